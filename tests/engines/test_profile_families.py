"""Which draft families each engine profile can run, as read in the engines' releases: MLA, Qwen3
q/k norms, four aux states; a missing field (SGLang's q LoRA); what the draft's math does under
each profile (the q/k norms dropped where the engine has none)."""

from __future__ import annotations

import pytest

from eagle3lab.engines.profiles import (
    IDS_NESTED,
    IDS_TOP,
    NUM_AUX_KEY,
    PROFILES,
    resolve_settings,
    serving_problems,
)
from eagle3lab.models.draft import DraftConfig

GEO = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=64)
FAMILIES = {
    "llama": dict(),
    "qwen3": dict(attention="qwen3", head_dim=8),
    "mla": dict(attention="mla", q_lora_rank=12, kv_lora_rank=16, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5),
    "mla-no-q-lora": dict(attention="mla", kv_lora_rank=16, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5),
    "4-aux top": dict(aux_layer_ids=(1, 2, 3, 5), aux_ids_key=IDS_TOP),
    "4-aux top + count": dict(aux_layer_ids=(1, 2, 3, 5), aux_ids_key=IDS_TOP, extra={NUM_AUX_KEY: 4}),
    "4-aux nested": dict(aux_layer_ids=(1, 2, 3, 5), aux_ids_key=IDS_NESTED),
}
# family -> the profiles that can run it (vllm: 0.25.0+, vllm-legacy: up to 0.18.x, sglang: 0.5.17+,
# sglang-legacy: up to 0.5.11, specforge: 0.2.0, speculators: current)
RUNS = {
    "llama": set(PROFILES),
    "qwen3": {"speculators", "vllm"},                     # speculators v0.4.0 (PR #291), vLLM qwen3_eagle3.py 0.24.0
    "mla": {"vllm", "vllm-legacy", "sglang"},             # vLLM 0.18.0 (PR #36361), SGLang kimi_k25_eagle3.py 0.5.12
    "mla-no-q-lora": {"vllm", "vllm-legacy"},             # SGLang raises without q_lora_rank
    "4-aux top": {"speculators"},                         # vLLM's llama_eagle3.py never reads top-level ids (vllm#54526)
    "4-aux top + count": {"speculators", "vllm", "sglang"},
    "4-aux nested": {"vllm", "sglang"},                   # speculators reads only the top-level ids
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_which_engines_can_run_each_family(family):
    cfg = DraftConfig(**GEO, **FAMILIES[family])
    can = {name for name in PROFILES if not serving_problems(cfg, name)}
    assert can == RUNS[family]
    for name in set(PROFILES) - can:   # each refusal says what and why
        assert serving_problems(cfg, name)[0].startswith(PROFILES[name].label)


def test_each_profile_says_since_when_it_runs_a_family():
    fam = {name: p.families for name, p in PROFILES.items()}
    assert "0.18.0" in fam["vllm"].attention["mla"] and "#36361" in fam["vllm"].attention["mla"]
    assert "0.24.0" in fam["vllm"].attention["qwen3"]
    assert "0.5.12" in fam["sglang"].attention["mla"] and "0.5.12" in fam["sglang-legacy"].attention_other["mla"]
    assert "v0.4.0" in fam["speculators"].attention["qwen3"] and "#291" in fam["speculators"].attention["qwen3"]
    assert "v0.7.0" in fam["speculators"].num_aux_rule and "0.22.0" in fam["vllm"].num_aux_rule


def test_the_math_follows_the_profile_for_qwen3_and_states_it():
    cfg = DraftConfig(**GEO, **FAMILIES["qwen3"])
    vllm, sglang = resolve_settings(cfg, "vllm"), resolve_settings(cfg, "sglang")
    assert vllm.qk_norm and not sglang.qk_norm
    assert vllm.decisions["attention"].value == "qwen3" and "0.24.0" in vllm.decisions["attention"].how
    assert sglang.decisions["attention"].value == "cannot run" and "without the q/k norms" in sglang.decisions["attention"].how
    assert "attention" not in resolve_settings(DraftConfig(**GEO), "vllm").decisions   # Llama: nothing to say


def test_a_rope_the_engine_cannot_build_is_a_serving_problem():
    """Checked against the trainers themselves in tests/oracles: SpecForge 0.2.0's yarn reads beta_fast, beta_slow,
    mscale and mscale_all_dim with rope_get (None in arithmetic: TypeError), speculators' LlamaRotaryEmbedding
    has no mrope (KeyError), SpecForge has no longrope (ValueError)."""
    from eagle3lab.engines.profiles import serving_problems
    from eagle3lab.models.draft import DraftConfig

    def cfg(rope):
        return DraftConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=64, rope_scaling=rope)

    bare_yarn = cfg({"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16})
    (problem,) = serving_problems(bare_yarn, "specforge")
    assert problem.startswith("SpecForge (0.2.0 = a6b6b023; arithmetic checked against 0.2.0) cannot build rope_type "
                              "'yarn' without rope_scaling.beta_fast, rope_scaling.beta_slow, rope_scaling.mscale, "
                              "rope_scaling.mscale_all_dim (yarn: None in arithmetic, TypeError")
    assert serving_problems(bare_yarn, "sglang") == serving_problems(bare_yarn, "speculators") == []
    full_yarn = cfg({"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16, "beta_fast": 32,
                     "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.0})
    assert serving_problems(full_yarn, "specforge") == []
    mrope = cfg({"type": "mrope", "mrope_section": [1, 1, 2]})
    assert "KeyError" in serving_problems(mrope, "speculators")[0] and serving_problems(mrope, "vllm") == []
    longrope = cfg({"rope_type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4,
                    "original_max_position_embeddings": 16})
    assert "Unknown RoPE scaling type" in serving_problems(longrope, "specforge")[0]


def test_specforge_yarn_scales_cos_sin_by_the_mscale_ratio_even_with_one_of_them_zero():
    """transformers uses yarn_get_mscale(factor) unless both mscale keys are non-zero; SpecForge 0.2.0 always
    divides mscale(factor, mscale) by mscale(factor, mscale_all_dim) (llama3_eagle.py:521-524)."""
    import math

    from eagle3lab.models.draft import DraftConfig, Eagle3Draft

    rope = {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16, "beta_fast": 32,
            "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.0}
    cfg = DraftConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=64, rope_scaling=rope)
    assert Eagle3Draft(cfg, profile="specforge").rope.attention_scaling == pytest.approx(0.1 * 0.707 * math.log(8) + 1)
    assert Eagle3Draft(cfg, profile="speculators").rope.attention_scaling == pytest.approx(0.1 * math.log(8) + 1)
