"""Notebook 03's claims, asserted from the notebook's own run on the bundled models.

The draft-case was trained on [resid[0], resid[3], resid[7]] with norm_before_residual=True and
shipped with SGLang ids [2, 6, 10], which SGLang (llama.py: config id k -> resid[k+1]) serves as
[resid[3], resid[7], resid[11]]; its llama.py feeds resid[0] (id -1) only from 0.5.22. The drafts get
retrained, so claims are relations with margins.
"""

from __future__ import annotations

import pytest
from helpers.notebooks import notebook_claims, notebook_summary

from eagle3lab import bundled
from eagle3lab.engines.layer_ids import to_engine_ids
from eagle3lab.models.checkpoint import load_draft

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


def test_search_without_the_training_log_finds_the_trained_wiring_up_to_a_set(nb):
    # no list of hypotheses: the residual rule is found, the embedding slot is found, and the trained
    # wiring lies inside the per-slot sets within noise (this target's middle layers are interchangeable,
    # so the search says "not identifiable as one wiring" rather than ranking inside the noise)
    assert nb["best_rule"] is True and nb["best"][0] == TRAINED[0] and nb["search_in_sets"] is True
    assert nb["search_evaluations"] < nb["search_brute_force"] / 20
    assert nb["search_tau_low"] > nb["tau_served"] + 1.0           # far above what SGLang serves
    assert max(nb["slot_tau_drops"]) > 1.0 > min(nb["slot_tau_drops"])   # some slots matter, one barely


def test_reorderings_cost_and_the_embedding_slot_has_no_substitute(nb):
    assert nb["tau_trained"] - nb["tau_worst_order"] >= 0.7
    assert nb["tau_trained"] >= nb["tau_best_scanned"] - 0.3       # at (or within noise of) the top
    assert nb["worst_slot"] == 0                                   # the embedding slot matters most
    # section 4, SGLang up to 0.5.21 (the notebook's ENGINE_VERSION): its nearest servable wiring moves only
    # resid[0], and that is no fix for this draft
    assert nb["engine_version"] == "0.5.21"
    assert nb["servable"] == [1, 3, 7] and nb["servable_ids"] == [0, 2, 6]
    assert nb["slot0_best_substitute"] <= nb["tau_trained"] - 0.5
    assert nb["tau_servable"] <= nb["tau_trained"] - 0.5


def test_from_0_5_22_sglang_feeds_the_embedding_but_keeps_its_residual_rule(nb):
    """Section 4's newest build: llama.py captures at the layer boundary, id -1 = resid[0] (from 0.5.22)."""
    with pytest.raises(ValueError, match="TypeError"):
        to_engine_ids("sglang", TRAINED, 12, arch="LlamaForCausalLM", engine_version="0.5.21")
    assert to_engine_ids("sglang", TRAINED, 12, arch="LlamaForCausalLM", engine_version="0.5.22") == [-1, 2, 6]
    assert nb["newest_version"] == "0.5.23"
    assert nb["servable_newest"] == TRAINED and nb["servable_newest_ids"] == [-1, 2, 6]
    # the same wiring and rule as "as trained", scored on the same states
    assert nb["tau_servable_newest"] == pytest.approx(nb["tau_trained"], abs=1e-9)
    # SGLang still ignores norm_before_residual: fed the trained wiring, this draft keeps little
    assert nb["tau_servable_newest_engine_rule"] <= nb["tau_trained"] - 0.5
    text = notebook_summary("03_fc_input_ordering.ipynb")
    assert "SGLang 0.5.21 can serve, [resid[1], resid[3], resid[7]] (ids [0, 2, 6])" in text
    assert "SGLang 0.5.23 feeds the trained wiring itself (ids [-1, 2, 6])" in text


def test_healthy_draft_is_served_the_wiring_it_was_trained_on(nb, bundled_models):
    healthy = load_draft(bundled.DRAFT_HEALTHY, target=bundled.TARGET)
    assert healthy.under("sglang").aux_resid == tuple(bundled.recorded_resid(bundled.DRAFT_HEALTHY))
    assert nb["contrast_served_as_trained"] is True
    assert nb["contrast_tau_served"] - nb["tau_served"] >= 0.5
