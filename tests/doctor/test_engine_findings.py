"""doctor's static engine findings: a draft family the serving engine has no model for, and a RoPE it applies
otherwise than the draft's trainer (both silent in the server's log)."""

from __future__ import annotations

from eagle3lab.doctor.config_checks import engine_findings
from eagle3lab.findings import Severity
from eagle3lab.models.draft import DraftConfig, Eagle3Draft

GEOMETRY = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=64, max_position_embeddings=64)
MLA = dict(attention="mla", q_lora_rank=12, kv_lora_rank=16, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5)


def codes(draft, engine) -> dict:
    return {f.code: f for f in engine_findings(draft, engine)}


def test_a_qwen3_draft_is_critical_under_sglang_and_fine_under_vllm():
    draft = Eagle3Draft(DraftConfig(**GEOMETRY, num_key_value_heads=2, attention="qwen3", head_dim=8),
                        profile="speculators", fmt="speculators")
    found = codes(draft, "sglang")
    assert set(found) == {"ENGINE_CANNOT_RUN_DRAFT"} and found["ENGINE_CANNOT_RUN_DRAFT"].severity == Severity.CRITICAL
    assert "q/k-norm" in found["ENGINE_CANNOT_RUN_DRAFT"].text
    assert codes(draft, "vllm") == {}


def test_an_mla_draft_runs_in_current_servers_but_not_before_they_had_an_mla_draft_model():
    draft = Eagle3Draft(DraftConfig(**GEOMETRY, **MLA), profile="sglang", fmt="sglang")
    assert codes(draft, "sglang") == {} and codes(draft, "vllm") == {}
    legacy = codes(draft, "sglang-legacy")["ENGINE_CANNOT_RUN_DRAFT"]
    assert "kimi_k25_eagle3.py" in legacy.text
    no_q_lora = Eagle3Draft(DraftConfig(**GEOMETRY, **{**MLA, "q_lora_rank": None}), profile="sglang", fmt="sglang")
    assert "q_lora_rank" in codes(no_q_lora, "sglang")["ENGINE_CANNOT_RUN_DRAFT"].text


def test_a_yarn_scale_the_server_ignores_is_a_warning_naming_both_rules():
    yarn = {"rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 0.707, "beta_fast": 32,
            "beta_slow": 1, "original_max_position_embeddings": 16}
    draft = Eagle3Draft(DraftConfig(**GEOMETRY, rope_scaling=yarn), profile="specforge", fmt="sglang")
    assert "ROPE_SERVED_DIFFERENTLY" not in codes(draft, "sglang")       # 0.5.16+ reads mscale as SpecForge does
    found = codes(draft, "sglang-legacy")["ROPE_SERVED_DIFFERENTLY"]     # older SGLang drops mscale/mscale_all_dim
    assert found.severity == Severity.WARNING and "ignoring mscale" in found.text
    plain = Eagle3Draft(DraftConfig(**GEOMETRY), profile="specforge", fmt="sglang")
    assert codes(plain, "sglang-legacy") == {} and codes(plain, "vllm") == {}
