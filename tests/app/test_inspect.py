"""``eagle3lab inspect`` / ``convert`` on real published configs and on checkpoints of each family."""

from __future__ import annotations

import json
import re

import pytest
import torch
from helpers.paths import REAL_CONFIGS

from eagle3lab import bundled
from eagle3lab.app.cli import main
from eagle3lab.findings import Severity
from eagle3lab.models.checkpoint import save_draft
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.vocab import build_vocab_map

REAL = REAL_CONFIGS
ROOT = bundled.ROOT
KINDS = {
    "SafeAILab__EAGLE__traineagle3-config.json": "eagle",
    "deepseek-ai__DeepSeek-V3.json": "target",
    "meta-llama__Llama-3.1-8B.json": "target",
    "moonshotai__Kimi-K2.5.json": "target",
    "nm-testing__EAGLE3-LLaMA3.1-Instruct-8B-converted.json": "speculators",
    "sgl-project__SpecForge__deepseek-v3-671b-eagle3.json": "sglang",
    "sgl-project__SpecForge__llama3-8B-eagle3.json": "sglang",
    "sgl-project__SpecForge__pr476__kimi-k25-eagle3.json": "sglang",
    "sgl-project__SpecForge__qwen3-30B-A3B-eagle3.1.json": "sglang",
}


def inspect_json(capsys, *args) -> tuple[int, dict]:
    rc = main(["inspect", *map(str, args), "--json"])
    return rc, json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_real_config_parses_in_config_only_mode(capsys, name):
    rc, r = inspect_json(capsys, REAL / name)
    assert rc == 0 and r["errors"] == [] and r["kind"] == KINDS[name]
    if r["is_eagle3_draft"]:
        assert r["weights"]["checked"] is False
        assert any("no weight files" in n for n in r["not_checked"])
        assert set(r["aux_ids"]["by_engine"]) >= {"speculators", "vllm", "sglang", "specforge", "eagle"}
    assert main(["inspect", str(REAL / name)]) == 0            # the text form renders too
    assert KINDS[name] in capsys.readouterr().out


def test_real_cases_kimi_llama_template_and_eagle31(capsys):
    _, kimi = inspect_json(capsys, REAL / "sgl-project__SpecForge__pr476__kimi-k25-eagle3.json",
                           "--target", REAL / "moonshotai__Kimi-K2.5.json")
    ids = kimi["aux_ids"]
    assert ids["as_written"] == [2, 30, 58] and ids["key"] == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert ids["num_target_layers"] == 61 and ids["target_arch"] == "DeepseekV3ForCausalLM"
    assert any("PR #25454" in w for w in ids["by_engine"]["sglang"]["warnings"])  # version-dependent meaning
    assert ids["by_engine"]["vllm-legacy"]["ids_seen"] is None                     # top-level key only
    _, llama = inspect_json(capsys, REAL / "sgl-project__SpecForge__llama3-8B-eagle3.json", "--num-target-layers", 32)
    assert llama["aux_ids"]["as_written"] is None
    assert llama["aux_ids"]["by_engine"]["sglang"]["resid"] == [2, 16, 29]
    assert any("silently" in w for w in llama["aux_ids"]["by_engine"]["sglang"]["warnings"])
    _, e31 = inspect_json(capsys, REAL / "sgl-project__SpecForge__qwen3-30B-A3B-eagle3.1.json")
    recycle = e31["norm_flags"]["recycle"]["by_engine"]
    assert recycle["sglang"]["value"] == "post-norm" and recycle["specforge"]["value"] == "pre-norm"
    _, nm = inspect_json(capsys, REAL / "nm-testing__EAGLE3-LLaMA3.1-Instruct-8B-converted.json")
    nbr = nm["norm_flags"]["norm_before_residual"]
    assert nbr["written"] is False and nbr["by_engine"]["vllm"]["value"] is False
    assert nm["sizes"]["target_hidden_size"] == 4096 and nm["sizes"]["draft_vocab_size"] == 32000
    _, official = inspect_json(capsys, REAL / "SafeAILab__EAGLE__traineagle3-config.json")
    assert any(d["field"] == "rope_theta" for d in official["defaulted"])


def _draft() -> Eagle3Draft:
    cfg = DraftConfig(hidden_size=16, target_hidden_size=16, intermediate_size=32, num_attention_heads=4,
                      vocab_size=50, draft_vocab_size=20)
    torch.manual_seed(0)
    draft = Eagle3Draft(cfg, fmt="speculators")
    with torch.no_grad():
        for p in draft.parameters():
            p.normal_(0, 0.3)
        d2t, t2d = build_vocab_map(torch.randperm(50)[:20], 50)
        draft.d2t.copy_(d2t)
        draft.t2d.copy_(t2d)
    return draft


@pytest.mark.parametrize("fmt", ["speculators", "sglang", "eagle"])
def test_inspect_checks_weights_of_each_family(tmp_path, capsys, fmt):
    save_draft(_draft(), tmp_path / fmt, fmt)
    rc, r = inspect_json(capsys, tmp_path / fmt, "--num-target-layers", 8)
    assert rc == 0 and r["format"] == fmt and r["errors"] == []
    assert r["weights"]["checked"] and r["weights"]["embedding"] == "checkpoint"
    assert r["vocab"]["checked"] and r["vocab"]["findings"] == []
    assert r["aux_ids"]["by_engine"]["vllm"]["resid"] == [2, 4, 5]


def test_inspect_reports_a_broken_vocab_map_and_exits_1(tmp_path, capsys):
    draft = _draft()
    draft.d2t += torch.arange(20)                      # absolute ids where offsets belong
    save_draft(draft, tmp_path / "d", "speculators")
    assert main(["inspect", str(tmp_path / "d")]) == 1
    assert "ABSOLUTE target ids" in capsys.readouterr().out


def test_inspect_on_a_config_that_is_not_a_draft_and_on_no_config(tmp_path, capsys):
    (tmp_path / "mtp").mkdir()
    (tmp_path / "mtp" / "config.json").write_text(json.dumps({"speculators_model_type": "mtp"}))
    rc, r = inspect_json(capsys, tmp_path / "mtp")
    assert rc == 0 and r["kind"] == "mtp" and not r["is_eagle3_draft"]
    assert main(["inspect", str(tmp_path / "nothing")]) == 2
    assert "expected a draft checkpoint directory with config.json" in capsys.readouterr().err


def test_convert_cli(tmp_path, capsys):
    draft = _draft()
    draft.config.aux_layer_ids = (1, 3, 5)
    save_draft(draft, tmp_path / "sp", "speculators")
    assert main(["convert", str(tmp_path / "sp"), "--to", "sglang", str(tmp_path / "sg"),
                 "--num-target-layers", "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["aux_ids_written"] == [0, 2, 4] and out["trained_resid"] == [1, 3, 5]
    assert main(["convert", str(tmp_path / "sp"), "--to", "eagle", str(tmp_path / "eg"),
                 "--num-target-layers", "8"]) == 2
    assert "cannot capture" in capsys.readouterr().err and not (tmp_path / "eg").exists()
    doc = (ROOT / "docs/cli/convert.md").read_text()
    assert all(f"`{key}`" in doc for key in out)


def test_every_json_key_is_documented(tmp_path, capsys):
    save_draft(_draft(), tmp_path / "d", "speculators")
    _, r = inspect_json(capsys, tmp_path / "d", "--num-target-layers", 8)
    doc = (ROOT / "docs/cli/inspect.md").read_text()
    documented = set(re.findall(r"`([a-z0-9_]+)`", doc))
    assert set(r) <= documented, set(r) - documented
    assert set(r["sizes"]) <= documented and set(r["weights"]) <= documented
    assert set(r["aux_ids"]["by_engine"]["vllm"]) <= documented


def test_the_typed_inspection_is_the_json_and_its_notes_carry_codes(tmp_path, capsys):
    from dataclasses import fields

    from eagle3lab.models.checkpoint import inspect_checkpoint
    from eagle3lab.models.inspection import AuxRow, Inspection, SavedDraft

    draft = _draft()
    draft.d2t += torch.arange(20)                      # a broken map: an error with its own code
    written = save_draft(draft, tmp_path / "d", "speculators")
    assert isinstance(written, SavedDraft) and written.path == str(tmp_path / "d") and written.format == "speculators"
    report = inspect_checkpoint(tmp_path / "d", num_target_layers=8)
    assert main(["inspect", str(tmp_path / "d"), "--num-target-layers", "8", "--json"]) == 1
    assert report.to_dict() == json.loads(capsys.readouterr().out)   # to_dict() is what the CLI prints
    assert report.codes() == ["VOCAB_MAP_INVALID"] and report.vocab.findings[0].severity == Severity.ERROR
    assert isinstance(report.aux_ids.by_engine["vllm"], AuxRow) and report.aux_ids.by_engine["vllm"].resid == [2, 4, 5]
    (tmp_path / "config-only").mkdir()
    (tmp_path / "config-only" / "config.json").write_text((tmp_path / "d" / "config.json").read_text())
    bare = inspect_checkpoint(tmp_path / "config-only")
    assert bare.codes(of="not_checked") == ["NO_WEIGHTS", "NO_VOCAB_MAP", "NO_TARGET_LAYERS"] and not bare.errors
    assert bare.weights.checked is False and list(bare.to_dict()["weights"]) == ["files", "checked"]
    target = inspect_checkpoint(REAL / "meta-llama__Llama-3.1-8B.json")
    assert target.codes(of="warnings") == ["TARGET_CONFIG"] and target.codes(of="not_checked") == ["NOT_A_DRAFT"]
    assert target.target_like.num_hidden_layers == 32 and target.sizes is None
    # the field names are the documented JSON keys
    documented = set(re.findall(r"`([a-z0-9_]+)`", (ROOT / "docs/cli/inspect.md").read_text()))
    assert {f.name for f in fields(Inspection)} <= documented
