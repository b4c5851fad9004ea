"""Engine profiles: which flags each engine honours, what a missing key means, what is recycled."""

from __future__ import annotations

import pytest

from eagle3lab.engines.profiles import IDS_NESTED, IDS_TOP, PROFILES, get_profile, resolve_settings
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.draft import DraftConfig

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}


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
    assert resolve_settings(cfg(norm_before_fc=True), "sglang").norm_before_fc is False
    with pytest.raises(Eagle3LabError, match="mutually exclusive"):
        resolve_settings(cfg(norm_before_fc=True, fc_norm=True), "speculators")


def test_target_embedding_and_rope_variant_per_engine():
    c = cfg(rope_scaling=LLAMA3)
    assert resolve_settings(c, "sglang", has_target_embedding=True).use_target_embedding is True
    assert resolve_settings(c, "sglang", has_target_embedding=False).use_target_embedding is False
    assert resolve_settings(c, "vllm", has_target_embedding=True).use_target_embedding is False
    assert resolve_settings(c, "vllm").rope_scaling == LLAMA3
    spec = resolve_settings(c, "specforge")
    assert spec.rope_scaling is None and "rope_scaling" in spec.decisions


def test_which_config_keys_each_engine_reads_ids_from():
    assert PROFILES["sglang"].visible_ids([1, 2, 3], IDS_TOP)[0] is None
    assert "ignored" in PROFILES["sglang"].visible_ids([1, 2, 3], IDS_TOP)[1]
    assert PROFILES["sglang"].visible_ids([1, 2, 3], IDS_NESTED) == ((1, 2, 3), None)
    # vLLM reads hf_config.eagle_aux_hidden_state_layer_ids only: SpecForge's eagle_config ids are ignored
    for name in ("vllm", "vllm-legacy"):
        assert PROFILES[name].visible_ids([1, 2, 3], IDS_NESTED)[0] is None
        assert PROFILES[name].visible_ids([1, 2, 3], IDS_TOP)[0] == (1, 2, 3)
    assert PROFILES["eagle"].visible_ids([1, 2, 3], IDS_TOP)[0] is None
    assert PROFILES["speculators"].visible_ids([1, 2, 3], None)[0] == (1, 2, 3)   # given in memory


def test_every_profile_names_its_engine_versions_and_a_known_id_convention():
    from eagle3lab.engines.layer_ids import ID_CONVENTIONS

    for p in PROFILES.values():
        assert p.versions and p.id_engine in ID_CONVENTIONS
    with pytest.raises(Eagle3LabError, match="one of speculators, vllm"):
        get_profile("trtllm")
