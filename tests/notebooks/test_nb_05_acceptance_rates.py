"""Notebook 05's claims, and the sweep / log-line / speedup-plot helpers it calls.

On the bundled models the claims are relations with margins (the drafts can be retrained); no
timing is asserted (speed claims belong to benchmarks/), only acceptance, losslessness and the
cost model's arithmetic.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import json  # noqa: E402

import pytest  # noqa: E402
from conftest import hand_costs, notebook_claims, one_thread, prompts, tiny_pair  # noqa: E402

import eagle3lab  # noqa: E402
from eagle3lab import bundled  # noqa: E402
from eagle3lab.analysis.benchmark import decode_sweep, recorded_benchmarks
from eagle3lab.analysis.cost_model import equivalent_alpha, leviathan_tokens_per_step, verdict
from eagle3lab.analysis.plots import plot_speedup_vs_c
from eagle3lab.analysis.roofline import here_and_served, price_on_served
from eagle3lab.engines.acceptance import acceptance_stats, compare_definitions, engine_log_lines  # noqa: E402
from eagle3lab.errors import Eagle3LabError  # noqa: E402
from eagle3lab.models.checkpoint import load_draft  # noqa: E402


# ------------------------------------------------------------------------------------------ helpers


# ------------------------------------------------------------------------------------------ the bundled models


# ------------------------------------------------------------------ the notebook's claims, from its run


@pytest.fixture(scope="module")
def nb(bundled_models):
    return notebook_claims("05_acceptance_rates.ipynb")


def test_greedy_speculation_is_token_identical_to_generate(nb):
    assert nb["lossless"] == nb["greedy_settings"] >= 10


def test_healthy_acceptance_per_position_and_chain_length(nb):
    assert nb["tau"] == pytest.approx(nb["tau_from_survival"]) == pytest.approx(nb["vllm_mean"])
    assert min(nb["conditional"][:3]) > 0.5, "the healthy draft's first positions are accepted most of the time"
    assert all(a >= b for a, b in zip(nb["survival_all"], nb["survival_all"][1:]))
    ks, taus = nb["chain_ks"], nb["chain_taus"]
    assert ks == sorted(ks) and nb["tau_shortest"] == taus[0] <= 2 and nb["tau_longest"] == taus[-1] > taus[0] + 1
    by_k = dict(zip(ks, taus))
    assert by_k[1] < by_k[3] < by_k[5]                                # the chains the old sweep compared
    assert all(a < b + 0.1 for a, b in zip(taus, taus[1:]))           # a longer chain never accepts much less
    # the longest chain's survival predicts each shorter chain's tau (a prediction, so a margin)
    for k, tau in zip(ks, taus):
        assert 1 + sum(nb["survival_all"][:k]) == pytest.approx(tau, abs=0.4), k


def test_tree_and_sampling(nb):
    assert 1.5 < nb["tau_best_tree"] <= 6
    assert nb["tree_draft_tokens_per_round"] == [m - 1 for m in nb["tree_verified"]]   # every verified node counted
    assert 1.5 < nb["tau_sampled"] < nb["tau"] + 0.5, "sampling at T=1 accepts about as much as greedy, or less"


def test_seed_case_caps_and_collapse(nb):
    assert nb["case_verified"] == 2 and nb["case_most_accepted"] <= 1    # SGLang's topk-1 rule caps the launch
    assert nb["case_tau"] < 1.5 and nb["retry_tau"] < 1.5, "the case draft served as shipped is rejected at position 1"
    assert nb["retry_verdict"] == verdict(nb["retry_measured"], 1.0)    # the words follow the measured number


def test_half_fixed_case_is_bad_not_useless(nb):
    """Section 9: trained wiring restored, SGLang's residual rule kept -> a 1-step tau between the two."""
    assert nb["case_tau"] + 0.1 < nb["half_tau"] < 1.6
    assert nb["half_verdict_here"] == verdict(nb["half_measured_here"], 1.0)
    # at SGLang's 48 requests the stated costs need more than this tau ...
    assert nb["half_verdict_served_batch_48"] == "loses"
    # ... and it no longer loses once the engine overlaps its CPU work (spec V2): the overhead decided it
    assert nb["half_verdict_served_batch_48_overlap_on"] != "loses"
    if "recorded_measured" in nb:
        assert nb["recorded_verdict"] == verdict(nb["recorded_measured"], 1.0)


def test_offline_acc_matches_the_loop_definitions(nb):
    acc = nb["specforge_acc"]
    assert len(acc) == len(nb["conditional"]) and min(acc) > 0.4
    # unconditional acc_i vs the loop's conditional: same order of magnitude, both from one draft
    assert abs(nb["specforge_simulated"] - (nb["tau"] - 1)) < 1.5


def test_sglang_ignores_the_half_fixed_drafts_residual_rule(bundled_models):
    trained = bundled.recorded_resid(bundled.DRAFT_CASE)
    target = eagle3lab.load_target(bundled.TARGET, device="cpu")
    d = load_draft(bundled.DRAFT_CASE, target=target, device="cpu").rewired(aux_resid=trained).under("sglang")
    assert d.aux_resid == tuple(trained) and d.settings.norm_before_residual is False   # facts section 3
