"""Served targets: the roofline, the stated served costs, and the here-vs-served verdicts."""

from __future__ import annotations

import pytest

from eagle3lab.analysis.roofline import (
    ROOFLINE_EXAMPLES,
    Roofline,
    here_and_served,
    here_and_served_labels,
    here_and_served_series,
    price_on_served,
    served_settings,
)
from eagle3lab.analysis.verdicts import projected_word
from eagle3lab.engines.acceptance import Interval, bootstrap_rate_ratio


def test_roofline_moe_reads_more_experts_for_more_tokens():
    dense = ROOFLINE_EXAMPLES["llama-3.1-8b bf16, 1 GPU (H100-class)"]
    moe = ROOFLINE_EXAMPLES["kimi-k2 fp8, 8 GPUs (H200-class)"]
    assert dense.touched_experts(16) == 0
    assert moe.touched_experts(1) == pytest.approx(8)
    assert 8 < moe.touched_experts(16) < 16 * 8 and moe.touched_experts(10_000) == pytest.approx(384)
    dense_v = dense.verify_curve((1, 2, 16))["target_steps"]
    moe_v = moe.verify_curve((1, 2, 16))["target_steps"]
    assert dense_v.loc[1] == 1.0 and dense_v.loc[16] == pytest.approx(1.0)   # memory-bound: verify is ~free
    assert moe_v.loc[16] > moe_v.loc[2] > 1.0                                  # MoE: it is not
    toy = Roofline(name="toy", dense_params=1e9, expert_params=0, bytes_per_param=1, active_params=1e9,
                   mem_bw=1e12, flops=1e14)
    assert toy.forward_s(1) == pytest.approx(1e-3)            # 1 GB / 1 TB/s
    assert toy.forward_s(100) == pytest.approx(2e-3)          # 2 * 1e9 * 100 flop / 1e14: compute-bound


def test_price_on_served_uses_the_roofline_and_stated_costs():
    from eagle3lab.analysis.roofline import SERVED, price_on_served

    roof = ROOFLINE_EXAMPLES[SERVED["roofline"]]
    table = price_on_served({"one step": {"tau": 1.4, "num_steps": 1, "num_draft_tokens": 2}}, batches=(1, 48))
    assert list(table.index) == ["one step | served, batch 1", "one step | served, batch 48"]
    for b in (1, 48):
        row = table.loc[f"one step | served, batch {b}"]
        v = roof.forward_s(2 * b) / roof.forward_s(b)
        assert row.v_verify == pytest.approx(v) and row.overhead == SERVED["overhead"]
        assert row.break_even_tau == pytest.approx(SERVED["c"] + v + SERVED["overhead"])
    # a busier server pays more for the second token: a second token per sequence reads more routed experts
    assert table.break_even_tau.iloc[1] > table.break_even_tau.iloc[0] > 1


ONE_STEP = {"tau": 1.43, "num_steps": 1, "num_draft_tokens": 2, "break_even_here": 1.42}


def test_here_and_served_words_the_measured_speedup_from_its_interval_not_its_point():
    """1.03x whose interval straddles 1 is within noise (the old 5% band said the same for the wrong reason, and
    1.06x with the same width would have been "wins"); a whole interval above 1 is faster, below 1 slower."""
    cases = {"straddles": {**ONE_STEP, "measured_here": Interval(1.03, 0.97, 1.09, 0.95, 12)},
             "wide but above": {**ONE_STEP, "measured_here": (1.06, 1.01, 1.12)},
             "clearly faster": {**ONE_STEP, "measured_here": {"value": 1.40, "low": 1.31, "high": 1.52}},
             "slower": {**ONE_STEP, "measured_here": Interval(0.80, 0.74, 0.86, 0.95, 12)},
             "median only": {**ONE_STEP, "measured_here": 1.50}}
    where = here_and_served(cases, c=0.1, overhead=0.2, batch=48)
    assert dict(where["verdict_here"]) == {"straddles": "within noise", "wide but above": "faster",
                                           "clearly faster": "faster", "slower": "slower",
                                           "median only": "not measured with an interval"}
    assert list(where.loc["straddles", ["measured_here", "measured_here_low", "measured_here_high"]]) == [1.03, 0.97, 1.09]
    assert where.loc["median only", "measured_here"] == 1.50 and where.loc["median only", ["measured_here_low",
                                                                                         "measured_here_high"]].isna().all()


def test_here_and_served_words_a_paired_speed_ratio_the_way_speed_word_does():
    """The interval bench_decode hands over (a paired bootstrap of the rate ratio): the same word as speed_word."""
    from eagle3lab.analysis.verdicts import speed_word

    same = bootstrap_rate_ratio([10] * 8, [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.0], [10] * 8, [1.0] * 8)
    twice = bootstrap_rate_ratio([20] * 8, [1.0, 1.1, 0.9, 1.0, 1.05, 0.95, 1.0, 1.0], [10] * 8, [1.0] * 8)
    where = here_and_served({"same": {**ONE_STEP, "measured_here": same}, "twice": {**ONE_STEP, "measured_here": twice}})
    assert where.loc["same", "verdict_here"] == speed_word(same) == "within noise"
    assert where.loc["twice", "verdict_here"] == speed_word(twice) == "faster"


def test_here_and_served_served_columns_are_projections_worded_from_taus_interval():
    cases = {"bad": {**ONE_STEP, "measured_here": 1.01}, "bad, measured": {**ONE_STEP, "tau_low": 1.30, "tau_high": 1.50,
                                                                            "measured_here": (1.01, 0.95, 1.07)},
             "bad, tight": {**ONE_STEP, "tau_low": 1.40, "tau_high": 1.47, "measured_here": (1.01, 0.98, 1.04)},
             "useless": {"tau": 1.05, "tau_low": 1.02, "tau_high": 1.08, "num_steps": 1, "num_draft_tokens": 2,
                         "break_even_here": 1.33, "measured_here": (0.80, 0.75, 0.85)}}
    where = here_and_served(cases, c=0.1, overhead=0.2, batch=48)
    assert list(where.index) == ["bad", "bad, measured", "bad, tight", "useless"]
    one, busy, overlap = served_settings(48, 0.2)
    assert [(s.batch, s.overhead, s.name) for s in (one, busy, overlap)] == [
        (1, 0.2, "batch 1"), (48, 0.2, "batch 48"), (48, 0.0, "batch 48, overlap on")]
    for s in (one, busy, overlap):
        be = float(price_on_served({"bad": cases["bad"]}, c=0.1, overhead=s.overhead, batches=(s.batch,)).break_even_tau.iloc[0])
        assert where.loc["bad", s.break_even] == pytest.approx(be)
        assert where.loc["bad", s.speedup] == pytest.approx(1.43 / be)
        # no tau interval: no ranking on the point, however far it lies from the break-even
        assert where.loc["bad", s.verdict] == "projected, no tau interval"
    be1, be48 = (where.loc["bad", s.break_even] for s in (one, busy))
    assert 1.30 < be1 < 1.40 and 1.50 < be48    # the stated costs: batch 1 cheaper than tau 1.43, batch 48 dearer
    words = where[[one.verdict, busy.verdict]]
    assert list(words.loc["bad, measured"]) == ["projected within noise", "projected slower"]   # [1.30, 1.50]
    assert list(words.loc["bad, tight"]) == ["projected faster", "projected slower"]          # [1.40, 1.47]
    # the same rule as the what-if's (verdicts.projected_word, notebook 05)
    for name in ("bad, measured", "bad, tight", "useless"):
        tau = Interval(*where.loc[name, ["tau", "tau_low", "tau_high"]], 0.95, 8)
        for s in (one, busy, overlap):
            assert where.loc[name, s.verdict] == projected_word(tau, where.loc[name, s.break_even])
    assert where.loc["useless", "verdict_here"] == "slower"
    assert list(where.loc["useless", ["tau_low", "tau_high"]]) == [1.02, 1.08]
    # the overlap scheduler removes the per-round overhead, nothing else
    assert where.loc["bad", busy.break_even] - where.loc["bad", overlap.break_even] == pytest.approx(0.2)
    # stable column names, relabelled only to show the table
    shown = where.rename(columns=here_and_served_labels(48))
    assert list(shown.columns.drop(["tau_low", "tau_high"])) == [
        "tau", "break-even here", "measured here", "measured here low", "measured here high", "verdict here"] + [
        f"{what} served, {b}" for b in ("batch 1", "batch 48", "batch 48, overlap on")
        for what in ("break-even", "projected speedup", "verdict")]


def test_here_and_served_table_draws():
    from eagle3lab.analysis import plots

    where = here_and_served({"x": {**ONE_STEP, "tau_low": 1.3, "tau_high": 1.55, "measured_here": (1.0, 0.9, 1.1)}})
    fig = plots.plot_here_and_served(where, here_and_served_series())
    labels = {h.get_label() for h in fig.axes[0].get_legend().legend_handles}
    assert labels == {"here (projected)", "served, batch 1 (projected)", "served, batch 48 (projected)",
                      "served, batch 48, overlap on (projected)", "tau (tokens per round)"}
    assert {s.column for s in here_and_served_series()} <= set(where.columns)   # every series names a column
