"""Diagnosis: the wiring hypotheses a draft's config implies, the neighbourhood of a wiring and the slot scan."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from eagle3lab.analysis.diagnosis import slot_scan, wiring_hypotheses, wiring_neighbourhood
from eagle3lab.errors import Eagle3LabError
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


def test_wiring_neighbourhood_holds_reorderings_and_every_single_slot_substitution():
    hyp = wiring_neighbourhood([0, 3, 7], num_layers=12)
    assert len(hyp) == 1 + 5 + 3 * 12                 # itself, 5 reorderings, 12 others per slot
    assert hyp[(0, 3, 7)] == ["as given"]
    assert hyp[(7, 3, 0)] == ["reordered"]
    assert hyp[(0, 3, 3)] == ["slot 2 fed resid[3]"]  # repeats are legal fc inputs
    assert hyp[(12, 3, 7)] == ["slot 0 fed resid[12]"]
    with pytest.raises(Eagle3LabError, match=r"0\.\.12"):
        wiring_neighbourhood([0, 3, 13], num_layers=12)


def test_slot_scan_places_each_score_at_its_slot_and_point():
    rows = [((0, 3, 7), 3.0), ((5, 3, 7), 2.0), ((0, 3, 11), 1.5), ((7, 3, 0), 1.2)]
    scores = pd.DataFrame({"aux_resid": [w for w, _ in rows], "tau": [t for _, t in rows],
                           "norm_before_residual": True})
    grid = slot_scan(scores, (0, 3, 7), num_layers=12)
    assert grid.shape == (3, 13)
    assert list(grid.index) == ["slot 0 (resid[0] (embedding))", "slot 1 (resid[3])", "slot 2 (resid[7])"]
    assert grid.iloc[0, 0] == grid.iloc[1, 3] == grid.iloc[2, 7] == 3.0   # the wiring itself, in every row
    assert grid.iloc[0, 5] == 2.0 and grid.iloc[2, 11] == 1.5
    assert math.isnan(grid.iloc[1, 4])                                     # not scored
    mixed = pd.concat([scores, scores.assign(norm_before_residual=False)])
    with pytest.raises(Eagle3LabError, match="one residual rule"):
        slot_scan(mixed, (0, 3, 7), num_layers=12)


def test_symptoms_doc_is_generated_from_the_table_and_names_real_codes():
    from eagle3lab import bundled
    from eagle3lab.analysis.diagnosis import SYMPTOMS, symptoms_markdown

    doc = bundled.ROOT / "docs" / "symptoms.md"
    assert doc.read_text() == symptoms_markdown(), "regenerate docs/symptoms.md from diagnosis.SYMPTOMS"
    assert "docs/symptoms.md" in (bundled.ROOT / "README.md").read_text()
    sources = "".join(p.read_text() for p in (bundled.ROOT / "eagle3lab").rglob("*.py"))
    for codes in SYMPTOMS["doctor finds"]:
        for code in codes.split(", "):   # every code a symptom promises is one doctor or the resolver emits
            assert f'"{code}"' in sources, code
    assert len(SYMPTOMS) == 8 and SYMPTOMS.symptom.is_unique
