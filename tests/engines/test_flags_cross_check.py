"""`eagle3lab flags sglang --cross-check`: the installed SGLang's own resolver next to our rules.

With the engine environment's python (.venv-engines: SGLang 0.5.23) and with this one, which has no
SGLang. The import shim the resolver uses is checked here too.
"""

from __future__ import annotations

import json
import sys
import types

import pytest
from helpers.paths import REAL_CONFIGS, engines_python

from eagle3lab.app.cli import main
from eagle3lab.engines.flags import SEED_COMMAND, SEED_DRAFT_CONFIG, SEED_TARGET_CONFIG
from eagle3lab.oracle import absent_modules
from eagle3lab.oracle.cross_check import cross_check

SEED = SEED_COMMAND.split()
TARGET = REAL_CONFIGS / "deepseek-ai__DeepSeek-V3.json"
DRAFT = REAL_CONFIGS / "sgl-project__SpecForge__deepseek-v3-671b-eagle3.json"


def run(capsys, *argv):
    rc = main(["flags", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cross_check_with_sglang_installed(capsys):
    python = engines_python()
    rc, out, _ = run(capsys, "sglang", "--cross-check", "--engine-python", str(python), "--target-config",
                     str(TARGET), "--draft-config", str(DRAFT), "--json", "--", *SEED)
    res = json.loads(out)
    check = res["cross_check"]
    assert (rc, check["installed_version"], check["agree"], check["disagreements"]) == (0, "0.5.23", True, [])
    assert res["engine_version"] == "0.5.23"  # our rules were applied for the version found installed
    assert check["engine_case"]["settings"]["speculative_num_draft_tokens"] == 2
    assert "--trust-remote-code dropped" in check["note"] and "--device cuda added" in check["note"]
    # the model paths are hub ids here: the engine read the configs given, from a temporary folder
    assert check["engine_case"]["target"]["architecture"] == "DeepseekV3ForCausalLM"


def test_the_seed_constants_start_in_sglang_as_our_rules_say(tmp_path):
    """The seed's own target (Kimi-K2.5's config, trimmed) and draft through SGLang 0.5.23's resolver: the same
    settings and no start-up error (the wrapper class matched, the draft's context the target's); SpecForge's
    template context (131072) stops both."""
    target, draft = tmp_path / "target.json", tmp_path / "draft.json"
    target.write_text(json.dumps(SEED_TARGET_CONFIG))
    draft.write_text(json.dumps(SEED_DRAFT_CONFIG))
    res = cross_check("sglang", SEED, target, draft, python=engines_python())
    assert (res.installed_version, res.agree, res.disagreements) == ("0.5.23", True, [])
    assert res.engine_case["target"]["architecture"] == "KimiK25ForConditionalGeneration"
    assert res.engine_case["settings"]["speculative_num_draft_tokens"] == 2 and not res.engine_case.get("error")
    draft.write_text(json.dumps({**SEED_DRAFT_CONFIG, "max_position_embeddings": 131072}))
    short = cross_check("sglang", SEED, target, draft, python=engines_python())
    assert short.agree and "131072" in str(short.engine_case.get("error"))


def test_cross_check_shows_a_disagreement_as_a_table(capsys):
    """Our rules for 0.5.18 (mixed chunk switched off) against the installed 0.5.23 (kept): exit status 3."""
    python = engines_python()
    rc, out, _ = run(capsys, "sglang", "--cross-check", "--engine-python", str(python), "--engine-version",
                     "0.5.18", "--target-config", str(TARGET), "--draft-config", str(DRAFT), "--", *SEED,
                     "--enable-mixed-chunk")
    assert rc == 3
    text = out.split("\ncross-check\n", 1)[1]
    assert "2 disagreement(s) between sglang 0.5.23's own resolver and eagle3lab's rules" in text
    assert "- setting mixed_chunk:\n    sglang 0.5.23: True\n    eagle3lab: False" in text
    res = cross_check("sglang", SEED + ["--enable-mixed-chunk"], TARGET, DRAFT, python=python, engine_version="0.5.18")
    table = res.table()
    assert list(table.columns) == ["kind", "what", "sglang 0.5.23", "eagle3lab"]
    assert table.loc[table["what"] == "mixed_chunk", ["sglang 0.5.23", "eagle3lab"]].values.tolist() == [
        ["True", "False"]]


def test_cross_check_says_when_no_engine_is_installed(capsys):
    """This interpreter has no SGLang: said clearly, and the exit status is the one without --cross-check."""
    rc, out, _ = run(capsys, "sglang", "--cross-check", "--engine-python", sys.executable, "--", *SEED)
    assert rc == 0
    assert f"No sglang installed in {sys.executable}" in out and "nothing to cross-check" in out
    rc, out, _ = run(capsys, "sglang", "--cross-check", "--json", "--", *SEED)  # default: the current interpreter
    assert json.loads(out)["cross_check"]["installed_version"] is None


def test_cross_check_needs_the_configs_the_engine_reads(capsys):
    """Hub ids and no configs given: the engine cannot read them offline, and the cross-check says which."""
    rc, out, _ = run(capsys, "sglang", "--cross-check", "--engine-python", str(engines_python()), "--", *SEED)
    assert rc == 0 and "--model-path moonshotai/Kimi-K2.5 is not a local folder with a config.json" in out
    assert "Pass --target-config / --draft-config." in out


def test_cross_check_bad_use_is_bad_input(capsys):
    assert run(capsys, "sglang", "--engine-python", sys.executable, "--", *SEED)[0] == 2   # without --cross-check
    assert run(capsys, "vllm", "--cross-check", "--", "vllm", "serve", "M")[0] == 2        # no vLLM resolver
    rc, _, err = run(capsys, "sglang", "--cross-check", "--engine-python", "/nonexistent/python", "--", *SEED)
    assert rc == 2 and "/nonexistent/python" in err


def test_the_import_shim_serves_only_sglang_and_raises_on_use():
    """Binding a name from an absent module is fine; any use of it raises and is recorded."""
    module = absent_modules._AbsentModule("torchvision.transforms")
    stand_in = module.Compose
    assert repr(stand_in) == "<absent torchvision.transforms.Compose>"
    before = len(absent_modules.USED)
    for use in (lambda: stand_in(), lambda: stand_in.BICUBIC, lambda: types.new_class("X", (stand_in,))):
        with pytest.raises(absent_modules.AbsentModuleUsed):
            use()
    assert absent_modules.USED[before:] == ["torchvision.transforms.Compose (call)",
                                            "torchvision.transforms.Compose (.BICUBIC)",
                                            "torchvision.transforms.Compose (subclassed)"]
    finder = absent_modules._Finder(("sglang",))
    assert finder.find_spec("torchvision") is None   # asked from here (not an SGLang module): nothing found
    assert finder.find_spec("numpy") is None          # only the modules in ABSENT


def test_an_engine_python_that_does_not_answer_is_not_called_uninstalled(tmp_path):
    """A resolver that hangs or prints no JSON: said as such, never as 'no sglang installed'."""
    from eagle3lab.oracle.cross_check import resolve_engine

    chatty = tmp_path / "python"
    chatty.write_text(f"#!{sys.executable}\nimport sys; sys.stdin.read(); print('native banner, not JSON')\n")
    chatty.chmod(0o755)
    res = cross_check("sglang", SEED, TARGET, DRAFT, python=chatty)
    assert res.installed_version is None and "not JSON" in res.note and "No sglang installed" not in res.note
    slow = tmp_path / "slow"
    slow.write_text(f"#!{sys.executable}\nimport time; time.sleep(30)\n")
    slow.chmod(0o755)
    answer = resolve_engine("sglang", [], python=slow, timeout=1)
    assert answer["answered"] is False and "no reply within 1 s" in answer["error"]
