"""``eagle3lab inspect`` recognises every real config in tests/fixtures/real-configs/: its family,
RoPE type, attention kind and number of aux states, written out here by hand from each file."""

from __future__ import annotations

import json

import pytest
from helpers.paths import REAL_CONFIGS

from eagle3lab.app.cli import main

# file -> (kind, family, rope type, attention, num_aux); None for targets (not drafts)
EXPECTED = {
    "SafeAILab__EAGLE__traineagle3-config.json": ("eagle", "llama", "default", "GQA", 3),
    "lightseekorg__TorchSpec__kimi_k25_eagle3_mla.json": ("sglang", "mla", "yarn", "MLA", 3),
    "lightseekorg__TorchSpec__kimi_k3_eagle3_mla.json": ("sglang", "mla", "yarn", "MLA", 3),
    "nm-testing__EAGLE3-LLaMA3.1-Instruct-8B-converted.json": ("speculators", "llama", "default", "GQA", 3),
    "sgl-project__SpecForge__deepseek-v2-lite-eagle3.json": ("sglang", "llama", "yarn", "MHA", 3),
    "sgl-project__SpecForge__deepseek-v3-671b-eagle3.json": ("sglang", "llama", "default", "GQA", 3),
    "sgl-project__SpecForge__llama3-8B-eagle3.json": ("sglang", "llama", "default", "GQA", 3),
    "sgl-project__SpecForge__pr476__kimi-k25-eagle3.json": ("sglang", "llama", "default", "MHA", 3),
    "sgl-project__SpecForge__qwen2-5-vl-7b-eagle3.json": ("sglang", "llama", "mrope", "GQA", 3),
    "sgl-project__SpecForge__qwen2.5-vl-32b-eagle3.json": ("sglang", "llama", "mrope", "GQA", 3),
    "sgl-project__SpecForge__qwen3-30B-A3B-eagle3.1.json": ("sglang", "llama", "default", "GQA", 3),
    "vllm-project__speculators__llama3.1-8b-eagle3-4aux__REBUILT.json": ("speculators", "llama", "llama3", "GQA", 4),
    "vllm-project__speculators__qwen3-8b-eagle3-qwen3-arch__REBUILT.json": ("speculators", "qwen3", "default", "GQA", 3),
    "Qwen__Qwen3-8B.json": None,
    "deepseek-ai__DeepSeek-V3.json": None,
    "meta-llama__Llama-3.1-8B.json": None,
    "moonshotai__Kimi-K2.5.json": None,
}


def test_the_table_covers_every_fixture_and_each_has_a_source():
    files = sorted(p.name for p in REAL_CONFIGS.glob("*.json"))
    assert files == sorted(EXPECTED)
    sources = (REAL_CONFIGS / "SOURCES.md").read_text()
    assert all(f"`{name}`" in sources for name in files)
    rebuilt = [name for name in files if "REBUILT" in name]
    assert rebuilt and all("**rebuilt, not a published file**" in sources.split(f"`{name}`")[1].split("\n")[0]
                           for name in rebuilt)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_inspect_recognises_family_rope_attention_and_aux_count(capsys, name):
    rc = main(["inspect", str(REAL_CONFIGS / name), "--json"])
    r = json.loads(capsys.readouterr().out)
    assert rc == 0 and r["errors"] == []
    if EXPECTED[name] is None:
        assert r["kind"] == "target" and not r["is_eagle3_draft"] and "family" not in r
        return
    kind, family, rope, attention, num_aux = EXPECTED[name]
    assert r["is_eagle3_draft"] and r["kind"] == kind
    f = r["family"]
    assert (f["family"], f["rope_type"], f["attention"], f["num_aux"]) == (family, rope, attention, num_aux)
    main(["inspect", str(REAL_CONFIGS / name)])
    text = capsys.readouterr().out
    assert f"family: {family} ({attention} attention), rope {rope}, fc reads {num_aux} aux states" in text
    assert r["sizes"]["num_aux"] == num_aux   # the draft built from the config sizes fc from the same count
