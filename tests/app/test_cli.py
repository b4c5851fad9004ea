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
