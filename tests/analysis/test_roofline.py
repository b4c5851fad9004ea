"""Served targets: the roofline, the stated served costs, and the here-vs-served verdicts."""

from __future__ import annotations

import pytest

from eagle3lab.analysis.cost_model import (
    verdict,
)
from eagle3lab.analysis.roofline import ROOFLINE_EXAMPLES, Roofline, here_and_served, price_on_served


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


def test_here_and_served_measured_here_priced_there():
    cases = {"bad": {"tau": 1.43, "num_steps": 1, "num_draft_tokens": 2, "break_even_here": 1.42, "measured_here": 1.01},
             "useless": {"tau": 1.05, "num_steps": 1, "num_draft_tokens": 2, "break_even_here": 1.33,
                         "measured_here": 0.8}}
    where = here_and_served(cases, c=0.1, overhead=0.2, batch=48)
    assert list(where.index) == ["bad", "useless"]
    assert where.loc["bad", "verdict here"] == "breaks even" and where.loc["useless", "verdict here"] == "loses"
    for label, overhead, batch in (("batch 1", 0.2, 1), ("batch 48", 0.2, 48), ("batch 48, overlap on", 0.0, 48)):
        table = price_on_served({"bad": cases["bad"]}, c=0.1, overhead=overhead, batches=(batch,))
        be = float(table.break_even_tau.iloc[0])
        assert where.loc["bad", f"break-even served, {label}"] == pytest.approx(be)
        assert where.loc["bad", f"verdict served, {label}"] == verdict(1.43, be)
    # the overlap scheduler removes the per-round overhead, nothing else
    assert where.loc["bad", "break-even served, batch 48"] - where.loc["bad", "break-even served, batch 48, overlap on"] \
        == pytest.approx(0.2)
