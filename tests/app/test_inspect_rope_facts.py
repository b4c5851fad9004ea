"""What ``inspect`` now says about RoPE, per corrected fact: yarn and mrope drafts are not refused, SpecForge
applies llama3 scaling (PR #287), older SGLang/vLLM ignore yarn's mscale keys, mrope is served by SGLang since
0.5.2 and vLLM, not built by speculators' transformers rotary class, and the docs say the same."""

from __future__ import annotations

import json

from helpers.paths import REAL_CONFIGS

from eagle3lab import bundled
from eagle3lab.app.cli import main


def engines_rope(capsys, config) -> dict:
    assert main(["inspect", str(config), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["errors"] == []
    return r["norm_flags"]["rope_scaling"]["by_engine"]


def test_yarn_draft_is_applied_not_refused(capsys):
    rope = engines_rope(capsys, REAL_CONFIGS / "sgl-project__SpecForge__deepseek-v2-lite-eagle3.json")
    assert {e for e, d in rope.items() if d["value"] == "yarn"} == {"speculators", "vllm", "vllm-legacy", "sglang",
                                                                    "sglang-legacy", "specforge"}
    assert "#224" in rope["specforge"]["how"]
    assert rope["eagle"]["value"] == "default" and "does not apply rope_type 'yarn'" in rope["eagle"]["how"]
    # the trained cos/sin scale (mscale = mscale_all_dim: 1.0) is not what older servers apply
    for engine, version in (("sglang-legacy", "0.5.16"), ("vllm-legacy", "0.29.0")):
        assert "ignoring mscale, mscale_all_dim" in rope[engine]["how"] and version in rope[engine]["how"]
    assert "ignoring" not in rope["sglang"]["how"] and "from 0.30.0" in rope["vllm"]["how"]


def test_mrope_draft_per_engine(capsys):
    rope = engines_rope(capsys, REAL_CONFIGS / "sgl-project__SpecForge__qwen2.5-vl-32b-eagle3.json")
    assert rope["specforge"]["value"] == "mrope" and "#102" in rope["specforge"]["how"]
    assert rope["sglang"]["value"] == "mrope" and "since 0.5.2" in rope["sglang"]["how"]
    assert rope["vllm"]["value"] == "mrope"
    assert rope["speculators"]["value"] == "default" and "KeyError" in rope["speculators"]["how"]


def test_specforge_applies_llama3_scaling(tmp_path, capsys):
    config = json.loads((REAL_CONFIGS / "sgl-project__SpecForge__llama3-8B-eagle3.json").read_text())
    config["rope_scaling"] = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    rope = engines_rope(capsys, tmp_path)
    assert rope["specforge"]["value"] == "llama3" and "#287" in rope["specforge"]["how"]
    assert "41bdd2a2" in rope["specforge"]["how"]


def test_inspect_doc_states_the_rope_rules():
    doc = (bundled.ROOT / "docs/cli/inspect.md").read_text()
    assert "before SGLang 0.5.16 and vLLM 0.30.0" in doc and "or that it builds plain RoPE" in doc
