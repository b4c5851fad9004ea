"""Engine profiles: which flags each engine honours, what a missing key means, what is recycled."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from eagle3lab.engines.profiles import (
    IDS_NESTED,
    IDS_TOP,
    PROFILES,
    get_profile,
    resolve_settings,
    serving_problems,
)
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.draft import DraftConfig

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}


FLAGS_MISSING = {"norm_before_fc": None, "fc_norm": None, "norm_before_residual": None, "norm_output": None}


def cfg(**kw) -> DraftConfig:
    return DraftConfig(hidden_size=16, intermediate_size=32, num_attention_heads=2, vocab_size=10, **kw)


def test_vllm_reads_a_missing_norm_before_residual_as_true_only_in_speculators_configs():
    s = resolve_settings(cfg(), "vllm", fmt="speculators")
    assert s.norm_before_residual is True
    how = s.decisions["norm_before_residual"].how
    assert "missing" in how and "update_eagle3" in how
    assert resolve_settings(cfg(), "vllm", fmt="sglang").norm_before_residual is False
    assert resolve_settings(cfg(), "speculators", fmt="speculators").norm_before_residual is False
    assert resolve_settings(cfg(norm_before_residual=False), "vllm", fmt="speculators").norm_before_residual is False


def test_sglang_specforge_and_eagle_ignore_norm_before_residual():
    for name in ("sglang", "sglang-legacy", "specforge", "eagle"):
        s = resolve_settings(cfg(norm_before_residual=True), name, fmt="speculators")
        assert s.norm_before_residual is False, name
        assert "ignored by" in s.decisions["norm_before_residual"].how
    assert resolve_settings(cfg(norm_before_residual=True), "speculators").norm_before_residual is True


def test_norm_output_recycles_post_norm_in_vllm_and_sglang_but_not_in_specforge():
    c = cfg(fc_norm=True, norm_output=True)
    assert resolve_settings(c, "vllm").recycle_postnorm is True
    assert resolve_settings(c, "sglang").recycle_postnorm is True
    assert resolve_settings(c, "specforge").recycle_postnorm is False      # "norm before lm_head" only
    assert resolve_settings(c, "specforge").fc_norm is True
    assert resolve_settings(c, "sglang-legacy").recycle_postnorm is False
    assert resolve_settings(c, "vllm-legacy").fc_norm is False              # before PR #46488


def test_norm_before_fc_only_where_honoured_and_never_with_fc_norm():
    assert resolve_settings(cfg(norm_before_fc=True), "vllm").norm_before_fc is True
    assert resolve_settings(cfg(norm_before_fc=True), "vllm-legacy").norm_before_fc is False
    # SGLang's llama_eagle3.py applies it for every target since PR #32334 (release 0.5.17), not on a GPT-OSS path
    sglang = resolve_settings(cfg(norm_before_fc=True), "sglang")
    assert sglang.norm_before_fc is True and "honoured by SGLang" in sglang.decisions["norm_before_fc"].how
    assert "llama_eagle3.py" in PROFILES["sglang"].honours["norm_before_fc"]
    assert "#32334" in PROFILES["sglang"].honours["norm_before_fc"] and "0.5.17" in PROFILES["sglang"].versions
    assert not any("GPT-OSS draft path" in n for n in PROFILES["sglang"].notes)
    assert resolve_settings(cfg(norm_before_fc=True), "sglang-legacy").norm_before_fc is False
    # vLLM: llama_eagle3.py since PR #36545 (0.18.0); speculators configs since PR #38111 (0.19.0)
    vllm_since = PROFILES["vllm"].honours["norm_before_fc"]
    assert "#36545" in vllm_since and "0.18.0" in vllm_since and "#38111" in vllm_since
    with pytest.raises(Eagle3LabError, match="mutually exclusive"):
        resolve_settings(cfg(norm_before_fc=True, fc_norm=True), "speculators")


def test_target_embedding_and_rope_variant_per_engine():
    c = cfg(rope_scaling=LLAMA3)
    assert resolve_settings(c, "sglang", has_target_embedding=True).use_target_embedding is True
    assert resolve_settings(c, "sglang", has_target_embedding=False).use_target_embedding is False
    assert resolve_settings(c, "vllm", has_target_embedding=True).use_target_embedding is False
    assert resolve_settings(c, "vllm").rope_scaling == LLAMA3


def test_specforge_applies_llama3_yarn_and_mrope_rope():
    # specforge/modeling/draft/llama3_eagle.py _init_rope: llama3 scaling since PR #287 (41bdd2a2, 2025-11-12)
    spec = resolve_settings(cfg(rope_scaling=LLAMA3), "specforge")
    assert spec.rope_scaling == LLAMA3
    assert spec.decisions["rope_scaling"].value == "llama3"
    assert "#287" in spec.decisions["rope_scaling"].how and "41bdd2a2" in spec.decisions["rope_scaling"].how
    assert {"llama3", "yarn", "mrope", "linear", "dynamic"} <= PROFILES["specforge"].rope_types
    assert not any("plain RoPE for rope_type 'llama3'" in n for n in PROFILES["specforge"].notes)
    # a llama3 key missing: SpecForge 0.2.0's transformers (5.8.1) fills original_max_position_embeddings and
    # refuses a missing factor / low_freq_factor / high_freq_factor (KeyError in LlamaConfig): checked in tests/oracles
    no_original = {k: v for k, v in LLAMA3.items() if k != "original_max_position_embeddings"}
    assert resolve_settings(SimpleNamespace(**FLAGS_MISSING, rope_scaling=no_original), "specforge").rope_scaling \
        == no_original
    partial = {k: v for k, v in LLAMA3.items() if k != "low_freq_factor"}
    problems = serving_problems(SimpleNamespace(**FLAGS_MISSING, rope_scaling=partial, attention="llama", num_aux=3),
                                "specforge")
    assert problems and "rope_scaling.low_freq_factor" in problems[0] and "KeyError" in problems[0]
    # what SpecForge does is recorded even where our draft cannot compute it yet (yarn, mrope)
    for rope, since in [({"rope_type": "yarn", "factor": 4.0}, "#224"), ({"type": "mrope"}, "#102")]:
        s = resolve_settings(SimpleNamespace(**FLAGS_MISSING, rope_scaling=rope), "specforge")
        assert s.rope_scaling == rope and since in s.decisions["rope_scaling"].how
    other = resolve_settings(SimpleNamespace(**FLAGS_MISSING, rope_scaling={"rope_type": "longrope"}), "specforge")
    assert other.rope_scaling is None and "ValueError" in other.decisions["rope_scaling"].how


def test_which_config_keys_each_engine_reads_ids_from():
    assert PROFILES["sglang"].visible_ids([1, 2, 3], IDS_TOP)[0] is None
    assert "ignored" in PROFILES["sglang"].visible_ids([1, 2, 3], IDS_TOP)[1]
    assert PROFILES["sglang"].visible_ids([1, 2, 3], IDS_NESTED) == ((1, 2, 3), None)
    # vLLM's V2 runner (eagle3_utils.py) reads the top-level key, never eagle_config.eagle_aux_hidden_state_layer_ids
    # (the V1 runner does since 0.22.0, in vLLM numbering: the profile says so)
    for name in ("vllm", "vllm-legacy"):
        assert PROFILES[name].visible_ids([1, 2, 3], IDS_NESTED)[0] is None
        assert PROFILES[name].visible_ids([1, 2, 3], IDS_TOP)[0] == (1, 2, 3)
    assert any("V1 runner" in n and "0.22.0" in n and "eagle_config.layer_ids" in n for n in PROFILES["vllm"].notes)
    assert PROFILES["eagle"].visible_ids([1, 2, 3], IDS_TOP)[0] is None
    assert PROFILES["speculators"].visible_ids([1, 2, 3], None)[0] == (1, 2, 3)   # given in memory


def test_every_profile_names_its_engine_versions_and_a_known_id_convention():
    from eagle3lab.engines.layer_ids import ID_CONVENTIONS

    for p in PROFILES.values():
        assert p.versions and p.id_engine in ID_CONVENTIONS
    with pytest.raises(Eagle3LabError, match="one of speculators, vllm"):
        get_profile("trtllm")
