"""The CLI front door: help, unknown commands, and the env command's JSON."""

from __future__ import annotations

import json
import subprocess
import sys

from eagle3lab.app.cli import COMMANDS, main


def test_help_lists_every_command(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out


def test_unknown_command_is_a_usage_error(capsys):
    try:
        main(["frobnicate"])
    except SystemExit as exc:
        assert exc.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


def test_every_command_has_a_module_and_a_json_doc():
    from eagle3lab.bundled import ROOT

    for name in COMMANDS:
        module = name.replace("-", "_")   # as cli._load imports it
        assert (ROOT / "eagle3lab" / "app" / "commands" / f"{module}.py").exists(), \
            f"eagle3lab/app/commands/{module}.py missing"
        assert (ROOT / "docs" / "cli" / f"{name}.md").exists(), f"docs/cli/{name}.md missing (document --json)"


def test_env_json_runs_as_a_console_script():
    out = subprocess.run([sys.executable, "-m", "eagle3lab.app.cli", "env", "--json"], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["device"]["device_auto"] in ("cpu", "cuda")
    assert report["libraries"]["torch"].startswith("2.")
    assert set(report["bundled"]) == {"target", "draft-healthy", "draft-case"}


def test_engine_platform_choices_are_vllm_runners():
    """ids, inspect, flags, bench and doctor take --engine-platform from one home, vllm_runner.PLATFORMS (cpu+triton included)."""
    import argparse
    import importlib

    from eagle3lab.engines.vllm_runner import PLATFORMS

    for name in ("ids", "inspect", "flags", "bench", "doctor"):
        parser = argparse.ArgumentParser()
        importlib.import_module(f"eagle3lab.app.commands.{name}").add_arguments(parser)
        action = next(a for a in parser._actions if "--engine-platform" in a.option_strings)
        assert tuple(action.choices) == tuple(PLATFORMS) and "cpu+triton" in action.choices, name
        assert "cpu+triton = vLLM's CPU build with triton-cpu" in action.help, name
