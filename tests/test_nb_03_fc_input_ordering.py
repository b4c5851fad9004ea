"""Notebook 03's claims on the bundled models, and the helpers it calls.

The draft-case was trained on [resid[0], resid[3], resid[7]] with norm_before_residual=True and
shipped with SGLang ids [2, 6, 10], which SGLang (llama.py: config id k -> resid[k+1]) serves as
[resid[3], resid[7], resid[11]]. The drafts get retrained, so claims are relations with margins.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from conftest import notebook_claims

from eagle3lab import bundled
from eagle3lab.analysis.diagnosis import slot_scan, wiring_neighbourhood
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.capture import build_fc_input, capture_resid, fc_input_difference
from eagle3lab.models.checkpoint import load_draft
from eagle3lab.models.target import tiny_target

# ----------------------------------------------------------------------------- helpers, tiny models


def test_fc_input_difference_per_slot_and_padding_dropped():
    torch.manual_seed(0)
    target = tiny_target("llama", num_layers=4, hidden_size=32)
    ids = torch.randint(0, target.vocab_size, (2, 7))
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0                                   # right padding in the second row
    states = capture_resid(target, ids, range(5), mask)
    a, b = build_fc_input(states, [0, 1, 3]), build_fc_input(states, [0, 2, 4])
    diff = fc_input_difference(a, b, mask, names=("trained", "served"))
    assert list(diff.index) == ["slot 0", "slot 1", "slot 2", "whole fc input"]
    assert diff.loc["slot 0", "cosine"] == pytest.approx(1.0, abs=1e-6)
    assert diff.loc["slot 0", "relative distance"] == 0.0
    assert diff.loc["slot 0", "norm ratio"] == pytest.approx(1.0)
    assert diff.loc["slot 2", ["trained", "served"]].tolist() == ["resid[3]", "resid[4]"]
    # by hand over the 7 + 4 valid tokens only
    keep = mask.reshape(-1).bool()
    x, y = states[1].reshape(-1, 32)[keep], states[2].reshape(-1, 32)[keep]
    assert diff.loc["slot 1", "cosine"] == pytest.approx(float(torch.cosine_similarity(x, y, dim=-1).mean()), abs=1e-6)
    assert diff.loc["slot 1", "relative distance"] == pytest.approx(float((y - x).norm() / x.norm()), rel=1e-5)
    assert diff.loc["slot 1", "norm ratio"] == pytest.approx(float(y.norm() / x.norm()), rel=1e-5)
    assert 0 < diff.loc["whole fc input", "relative distance"] < diff["relative distance"].iloc[1:3].max()
    with pytest.raises(Eagle3LabError, match="same shape"):
        fc_input_difference(a, build_fc_input(states, [0, 1]))


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


# ----------------------------------------------------------------------------- the notebook's claims

TRAINED = [0, 3, 7]          # data/models/draft-case/training.json "trained_resid"


@pytest.fixture(scope="module")
def nb(bundled_models):
    return notebook_claims("03_fc_input_ordering.ipynb")


def test_case_card_and_sglang_reading_match_the_story(nb):
    assert bundled.recorded_resid(bundled.DRAFT_CASE) == TRAINED == nb["trained"]
    assert nb["served"] == [3, 7, 11]


def test_training_and_serving_fc_inputs_differ_in_every_slot(nb):
    assert all(c < 0.95 for c in nb["slot_cosines"]), nb["slot_cosines"]
    assert all(d > 0.2 for d in nb["slot_distances"]), nb["slot_distances"]


def test_served_wiring_costs_acceptance_and_both_causes_together_cost_most(nb):
    assert nb["tau_trained"] - nb["tau_served_wiring"] >= 0.5      # the wiring alone
    assert nb["tau_trained"] - nb["tau_served"] >= 1.0             # SGLang also ignores norm_before_residual
    assert nb["c1_trained"] > 0.4


def test_search_without_the_training_log_finds_the_trained_wiring(nb):
    assert nb["best"] == TRAINED and nb["best_rule"] is True and nb["search_margin"] > 0


def test_reorderings_cost_and_the_embedding_slot_has_no_substitute(nb):
    assert nb["tau_trained"] - nb["tau_worst_order"] >= 0.7
    assert nb["tau_trained"] >= nb["tau_best_scanned"] - 0.3       # at (or within noise of) the top
    assert nb["worst_slot"] == 0                                   # the embedding slot matters most
    # section 4: SGLang's nearest servable wiring moves only resid[0], and that is no fix for this draft
    assert nb["servable"] == [1, 3, 7] and nb["slot0_best_substitute"] <= nb["tau_trained"] - 0.5
    assert nb["tau_servable"] <= nb["tau_trained"] - 0.5


def test_healthy_draft_is_served_the_wiring_it_was_trained_on(nb, bundled_models):
    healthy = load_draft(bundled.DRAFT_HEALTHY, target=bundled.TARGET)
    assert healthy.under("sglang").aux_resid == tuple(bundled.recorded_resid(bundled.DRAFT_HEALTHY))
    assert nb["contrast_served_as_trained"] is True
    assert nb["contrast_tau_served"] - nb["tau_served"] >= 0.5
