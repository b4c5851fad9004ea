"""``convert`` never changes a flag the source config states without a warning naming it, both values
and the rule, and ``--keep-stated-flags`` / ``keep_stated_flags=True`` writes the stated value."""

from __future__ import annotations

import json

from eagle3lab import bundled
from eagle3lab.app.cli import main
from eagle3lab.models.checkpoint import convert_draft, read_config

ROOT = bundled.ROOT
DRAFT, TARGET = ROOT / "data/models/draft-case", ROOT / "data/models/target"


def test_the_bundled_case_states_norm_before_residual_true():
    raw, _ = read_config(DRAFT)   # the premise of the tests below: an sglang-format draft that states it
    assert raw["architectures"] == ["LlamaForCausalLMEagle3"] and raw["norm_before_residual"] is True


def test_cli_warns_with_flag_values_and_rule(tmp_path, capsys):
    assert main(["convert", str(DRAFT), "--to", "speculators", str(tmp_path / "out"), "--target", str(TARGET),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["flags_written"]["norm_before_residual"] is False
    assert json.loads((tmp_path / "out/config.json").read_text())["norm_before_residual"] is False
    [warning] = [w for w in out["warnings"] if w.startswith("norm_before_residual")]
    assert "states True, written False" in warning
    assert "the sglang format is trained with SpecForge" in warning and "ignored by SpecForge" in warning
    assert "--keep-stated-flags" in warning
    # the flags the source does not state (or states as written) are not warned about
    assert not [w for w in out["warnings"] if w.startswith(("norm_before_fc", "fc_norm", "norm_output"))]


def test_cli_keep_stated_flags_writes_the_stated_value(tmp_path, capsys):
    assert main(["convert", str(DRAFT), "--to", "speculators", str(tmp_path / "out"), "--target", str(TARGET),
                 "--keep-stated-flags"]) == 0
    text = capsys.readouterr().out
    assert "norm_before_residual=True" in text and "kept the stated True" in text and "ran False" in text
    assert json.loads((tmp_path / "out/config.json").read_text())["norm_before_residual"] is True


def test_python_argument(tmp_path):
    default = convert_draft(DRAFT, tmp_path / "a", "speculators", target=TARGET)
    kept = convert_draft(DRAFT, tmp_path / "b", "speculators", target=TARGET, keep_stated_flags=True)
    assert default.flags_written["norm_before_residual"] is False
    assert kept.flags_written["norm_before_residual"] is True
    assert any(w.code == "STATED_FLAG_CHANGED" and "states True, written False" in w.text for w in default.warnings)
    assert any(w.code == "STATED_FLAG_KEPT" and "kept the stated True" in w.text for w in kept.warnings)


def test_convert_doc_says_so():
    doc = (ROOT / "docs/cli/convert.md").read_text()
    assert "--keep-stated-flags" in doc and "keep_stated_flags=True" in doc
    assert "never changed silently" in doc and "SpecForge ignores `norm_before_residual`" in doc
