"""Notebook 03's claims on the bundled models, and the helpers it calls.

The draft-case was trained on [resid[0], resid[3], resid[7]] with norm_before_residual=True and
shipped with SGLang ids [2, 6, 10], which SGLang (llama.py: config id k -> resid[k+1]) serves as
[resid[3], resid[7], resid[11]]. The drafts get retrained, so claims are relations with margins.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import torch

from eagle3lab import bundled
from eagle3lab.analysis.diagnosis import search_wiring, slot_scan, wiring_neighbourhood
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.capture import build_fc_input, capture_resid, fc_input_difference
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


# ----------------------------------------------------------------------------- claims, bundled models

TRAINED = (0, 3, 7)         # data/models/draft-case/training.json "trained_resid"


@pytest.fixture(scope="module")
def bundle(bundled_models):
    from eagle3lab.bundled import load_prompts
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # tiny matmuls: one thread avoids spin-waits on a busy 2-core box
    try:
        target = load_target(bundled.TARGET, device="cpu")
        case = load_draft(bundled.DRAFT_CASE, target=target)
        healthy = load_draft(bundled.DRAFT_HEALTHY, target=target)
        seqs, lens = greedy_dataset(target, load_prompts(n=8, length="short"), max_new_tokens=32)
        yield {"target": target, "case": case, "healthy": healthy, "seqs": seqs, "lens": lens}
    finally:
        torch.set_num_threads(threads)


def _scores(bundle, draft, hypotheses, rules=(True, False)):
    return search_wiring(bundle["target"], draft, bundle["seqs"], prompt_lens=bundle["lens"], hypotheses=hypotheses,
                         norm_before_residual=rules, num_steps=4, progress=False)


def _tau(scores, wiring, rule):
    row = scores[(scores.aux_resid == tuple(wiring)) & (scores.norm_before_residual == rule)]
    return float(row.tau.iloc[0])


def test_case_card_and_sglang_reading_match_the_story(bundle):
    facts = json.loads((bundled.DRAFT_CASE / "training.json").read_text())
    assert tuple(facts["trained_resid"]) == TRAINED
    assert bundle["case"].under("sglang").aux_resid == (3, 7, 11)


def test_training_and_serving_fc_inputs_differ_in_every_slot(bundle):
    seq = torch.tensor([bundle["seqs"][0]])
    served = bundle["case"].under("sglang").aux_resid
    states = capture_resid(bundle["target"], seq, sorted(set(TRAINED) | set(served)))
    trained_in, served_in = build_fc_input(states, TRAINED), build_fc_input(states, served)
    diff = fc_input_difference(trained_in, served_in)
    assert (diff["cosine"] < 0.95).all(), diff
    assert (diff["relative distance"] > 0.2).all(), diff
    same = fc_input_difference(trained_in, trained_in)
    assert (same["cosine"] > 0.999).all()


def test_served_wiring_costs_acceptance_and_both_causes_together_cost_most(bundle):
    served = bundle["case"].under("sglang").aux_resid
    scores = _scores(bundle, bundle["case"], {TRAINED: ["trained"], served: ["served"]})
    as_trained, wiring_only = _tau(scores, TRAINED, True), _tau(scores, served, True)
    as_served = _tau(scores, served, False)      # SGLang also ignores norm_before_residual
    assert as_trained - wiring_only >= 0.5, scores
    assert as_trained - as_served >= 1.0, scores
    assert float(scores.c1[(scores.aux_resid == TRAINED) & scores.norm_before_residual].iloc[0]) > 0.4


def test_search_without_the_training_log_finds_the_trained_wiring(bundle):
    scores = search_wiring(bundle["target"], bundle["case"], bundle["seqs"], prompt_lens=bundle["lens"],
                           num_steps=4, progress=False)
    best = scores.iloc[0]
    assert tuple(best.aux_resid) == TRAINED and bool(best.norm_before_residual), scores
    assert best.tau > scores.tau.iloc[1], scores


def test_reorderings_cost_and_the_embedding_slot_has_no_substitute(bundle):
    # reorderings and slot 0 only: the full 42-wiring scan is the notebook's
    hyp = {w: why for w, why in wiring_neighbourhood(TRAINED, 12).items()
           if why[0] in ("as given", "reordered") or why[0].startswith("slot 0")}
    scores = _scores(bundle, bundle["case"], hyp, rules=(True,))
    as_trained = _tau(scores, TRAINED, True)
    reordered = scores[scores.why == "reordered"].tau
    assert as_trained - reordered.min() >= 0.7, scores
    assert as_trained >= scores.tau.max() - 0.3, scores     # at (or within noise of) the top
    grid = slot_scan(scores, TRAINED, 12)
    assert grid.iloc[0].notna().all() and grid.iloc[1:].isna().sum().sum() == 2 * 13 - 2
    # the notebook's section 4: SGLang's nearest servable point, resid[1], is no fix for this draft
    assert grid.iloc[0, 1:].max() <= as_trained - 0.5, grid.iloc[0]


def test_healthy_draft_is_served_the_wiring_it_was_trained_on(bundle):
    healthy = bundle["healthy"]
    trained = tuple(json.loads((bundled.DRAFT_HEALTHY / "training.json").read_text())["trained_resid"])
    assert healthy.under("sglang").aux_resid == trained
    served_case = bundle["case"].under("sglang").aux_resid
    h = _scores(bundle, healthy, {trained: ["trained = served"]}, rules=(False,))
    c = _scores(bundle, bundle["case"], {served_case: ["served"]}, rules=(False,))
    assert h.tau.iloc[0] - c.tau.iloc[0] >= 0.5, (h, c)
