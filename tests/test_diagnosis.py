"""Diagnosis: the wiring hypotheses a draft's config implies, and the symptom table."""

from __future__ import annotations

from eagle3lab.analysis.diagnosis import wiring_hypotheses
from eagle3lab.models.draft import DraftConfig, Eagle3Draft

NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"


def case_like_draft() -> Eagle3Draft:
    """The seed case's shipping config in miniature: SGLang-format ids [2, 6, 10] for N = 12."""
    cfg = DraftConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=50,
                      aux_layer_ids=(2, 6, 10), aux_ids_key=NESTED, norm_before_residual=True)
    return Eagle3Draft(cfg, profile="specforge", fmt="sglang")


def test_hypotheses_cover_each_engines_reading_and_the_embedding_first_pattern():
    hyp = wiring_hypotheses(case_like_draft(), num_layers=12)
    assert "served by sglang" in hyp[(3, 7, 11)]           # SGLang: config id k -> resid[k+1]
    assert "served by specforge" in hyp[(3, 7, 11)]
    assert "served by vllm" in hyp[(2, 6, 9)]              # vLLM ignores eagle_config: its default
    assert "engines' default" in hyp[(2, 6, 9)]
    # the seed pattern: trained on [embedding, a, b], served [a, b, c]
    assert hyp[(0, 3, 7)] == ["embedding first, last dropped, of [resid[3], resid[7], resid[11]]"]
    assert all(len(k) == 3 for k in hyp)
