"""Engine rules that changed with a release are rows (eagle3lab.engines.profiles.ROWS): which flags a build honours,
which RoPE it applies and how, which draft families it serves. A profile's dicts are the rows that hold at its release
(rule_at, the one lookup of every release rule), their prose made from the rows; adding a release's rule is one
row, shown with a fictional SGLang 0.5.24."""

from __future__ import annotations

from eagle3lab.engines import profiles
from eagle3lab.engines.layer_ids import SGLANG_NEWEST_READ
from eagle3lab.engines.profiles import (
    FAMILY,
    FLAG,
    MLA,
    PROFILES,
    QWEN3,
    ROPE,
    Rule,
    families_at,
    honours_at,
    release_fields,
    resolve_settings,
    rope_at,
)
from eagle3lab.engines.vllm_runner import VLLM_NEWEST_READ
from eagle3lab.models.draft import DraftConfig

GEO = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, vocab_size=10)


def test_each_profile_is_its_rows_at_its_release():
    for name, engine, release in (("vllm", "vllm", VLLM_NEWEST_READ), ("vllm-legacy", "vllm", "0.18.0"),
                                  ("sglang", "sglang", SGLANG_NEWEST_READ), ("sglang-legacy", "sglang", "0.5.10")):
        profile = PROFILES[name]
        assert profile.release == release
        assert {k: getattr(profile, k) for k in release_fields(engine, release)} == release_fields(engine, release)
        assert profile.families.attention == families_at(engine, release)[0]
    assert PROFILES["speculators"].honours == honours_at("speculators", "0.9.0")


def test_honours_follow_the_releases_and_say_since_when():
    # vLLM: the model code and the speculators adapter both have to pass a flag on
    assert set(honours_at("vllm", "0.17.0")) == {"norm_before_residual"}
    assert set(honours_at("vllm", "0.18.0")) == {"norm_before_residual"}      # llama_eagle3.py only, not the adapter
    assert set(honours_at("vllm", "0.19.0")) == {"norm_before_residual", "norm_before_fc"}
    assert set(honours_at("vllm", "0.24.0")) == {"norm_before_residual", "norm_before_fc"}   # fc_norm: adapter 0.25
    assert set(honours_at("vllm", "0.25.0")) == {"norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"}
    assert honours_at("vllm", VLLM_NEWEST_READ)["norm_before_fc"] == ("llama_eagle3.py since 0.18.0 (PR #36545); "
                                                                      "speculators configs since 0.19.0 (PR #38111)")
    assert honours_at("speculators", "0.9.0")["norm_before_fc"] == "since v0.5.0 (PR #337)"
    assert honours_at("speculators", "0.9.0")["norm_before_residual"] == "all versions"
    assert set(honours_at("speculators", "0.6.0")) == {"norm_before_residual", "norm_before_fc"}
    assert honours_at("sglang", "0.5.11") == {} and set(honours_at("sglang", "0.5.16")) == {"fc_norm", "norm_output"}
    assert "norm_before_fc" in honours_at("sglang", "0.5.17")


def test_rope_rows_give_types_dropped_keys_and_length_rules_per_release():
    old, new = rope_at("vllm", "0.29.0"), rope_at("vllm", "0.30.0")
    assert old["rope_ignores"] == {"yarn": ("mscale", "mscale_all_dim")} and new["rope_ignores"] == {}
    assert old["rope_since"]["yarn"] == "mscale/mscale_all_dim ignored up to 0.29.0"
    assert new["rope_since"]["yarn"] == "mscale/mscale_all_dim honoured from 0.30.0"
    assert rope_at("vllm", "0.21.0")["rope_length"]["dynamic"] == "max_positions_times_factor"
    assert rope_at("vllm", "0.22.0")["rope_length"]["dynamic"] == "max_positions"
    assert rope_at("vllm", "0.11.0")["rope_length"]["longrope"] == "last_position"   # 0.10.1.1: per batch
    assert "mrope" not in rope_at("sglang", "0.5.1")["rope_types"] and "mrope" in rope_at("sglang", "0.5.2")["rope_types"]
    assert rope_at("sglang", "0.5.2")["rope_since"]["mrope"] == "since 0.5.2"
    assert "proportional" in PROFILES["sglang"].rope_types and "proportional" not in PROFILES["sglang-legacy"].rope_types
    assert rope_at("sglang", "0.5.15")["rope_since"]["yarn"] == "mscale/mscale_all_dim ignored before 0.5.16 (PR #22711)"


def test_family_support_is_rows():
    served, other = families_at("vllm", "0.23.0")
    assert MLA in served and QWEN3 not in served and "before 0.24.0" in other[QWEN3]
    assert families_at("vllm", "0.24.0")[0][QWEN3] == ("qwen3_eagle3.py since 0.24.0 (PR #43132: update_eagle3 maps layer "
                                                       "model_type qwen3 to Eagle3Qwen3ForCausalLM)")
    assert families_at("vllm", "0.17.0")[1][MLA] == "no deepseek_eagle3.py before 0.18.0"
    assert families_at("sglang", "0.5.11")[1][MLA] == "no kimi_k25_eagle3.py before 0.5.12"
    assert PROFILES["sglang-legacy"].families.attention_other[MLA] == "no kimi_k25_eagle3.py before 0.5.12"


def test_a_release_rule_is_one_row(monkeypatch):
    """A fictional SGLang 0.5.24 that honours norm_before_residual in llama_eagle3.py and serves Qwen3 drafts: two rows,
    and the build of 0.5.24 follows them; the newest release read does not."""
    rows = (*profiles.ROWS,
            Rule("sglang", FLAG, "norm_before_residual", "0.5.24", reader="llama_eagle3.py", source="PR #99999"),
            Rule("sglang", FAMILY, QWEN3, "0.5.24", reader="qwen3_eagle3.py"))
    monkeypatch.setattr(profiles, "ROWS", rows)
    assert honours_at("sglang", "0.5.24")["norm_before_residual"] == "llama_eagle3.py since 0.5.24 (PR #99999)"
    assert "norm_before_residual" not in honours_at("sglang", SGLANG_NEWEST_READ)
    assert families_at("sglang", "0.5.24")[0][QWEN3] == "qwen3_eagle3.py since 0.5.24"
    from dataclasses import replace

    build = replace(PROFILES["sglang"], **release_fields("sglang", "0.5.24"))
    settings = resolve_settings(DraftConfig(**GEO, norm_before_residual=True), build)
    assert settings.norm_before_residual is True and "honoured by SGLang" in settings.decisions["norm_before_residual"].how
    assert resolve_settings(DraftConfig(**GEO, norm_before_residual=True), "sglang").norm_before_residual is False
    # a rope type it applies from then on, one row too
    monkeypatch.setattr(profiles, "ROWS", (*rows, Rule("sglang", ROPE, "dynamic-ntk", "0.5.24")))
    assert "dynamic-ntk" in rope_at("sglang", "0.5.24")["rope_types"]
    assert rope_at("sglang", "0.5.24")["rope_since"]["dynamic-ntk"] == "since 0.5.24"


def test_the_newest_releases_read_are_typed_only_in_their_constants():
    import inspect

    source = inspect.getsource(profiles)   # SGLANG_NEWEST_READ / VLLM_NEWEST_READ live in layer_ids / vllm_runner
    assert SGLANG_NEWEST_READ not in source and VLLM_NEWEST_READ.removesuffix(".0") not in source
