"""The cost model: formulas against hand computation, measured costs, the bench command end to end."""

from __future__ import annotations

import matplotlib
import pytest
import torch
from helpers.tiny_models import hand_costs, tiny_pair

from eagle3lab.analysis.cost_model import (
    break_even_tau,
    equivalent_alpha,
    explain,
    implied_round_cost,
    leviathan_speedup,
    leviathan_tokens_per_step,
    tokens_per_round,
)
from eagle3lab.analysis.timing import measure_costs
from eagle3lab.engines.acceptance import acceptance_stats
from eagle3lab.errors import Eagle3LabError


def test_leviathan_formulas_by_hand():
    assert leviathan_tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8 ** 5) / 0.2)  # 3.3616
    assert leviathan_speedup(0.8, 4, 0.1) == pytest.approx(3.3616 / 1.4)
    assert leviathan_tokens_per_step(1.0, 4) == 5
    # per-position generalisation: i.i.d. survival alpha^k gives Leviathan's number back
    assert tokens_per_round([0.8 ** k for k in range(1, 5)]) == pytest.approx(3.3616)
    assert break_even_tau(1.7) == 1.7
    # the seed: 90 tok/s plain, 56.8 with speculation; at tau 1.3 a round cost 2.06 target steps
    assert implied_round_cost(1.3, 90, 56.8) == pytest.approx(1.3 * 90 / 56.8)


def test_cost_model_projection_by_hand():
    cm = hand_costs()
    assert cm.c == pytest.approx(0.1)
    assert cm.v(3) == pytest.approx(1.2)          # interpolated
    assert cm.v(12) == pytest.approx(2.1)         # last slope extrapolated
    stats = acceptance_stats([0, 1, 3, 3], num_positions=3)   # tau = 11/4
    proj = cm.project(stats, num_steps=3)
    # P(a) = 1/4 each for a = 0, 1, 3 twice -> extend rows 1, 2, 4, 4
    extend = (0.1 + 0.12 + 0.16 + 0.16) / 4
    round_s = extend + 2 * 0.1 + 1.3              # 2 recycled draft steps, verify of 4 tokens
    assert proj.pieces["round_s"] == pytest.approx(round_s)
    assert proj.round_cost == pytest.approx(round_s)
    assert proj.speedup == pytest.approx(2.75 / round_s)
    assert proj.spec_tps == pytest.approx(2.75 / round_s) and proj.baseline_tps == 1.0
    assert cm.project(stats, num_steps=3, tokens_per_round=2.5).speedup == pytest.approx(2.5 / round_s)


def test_explain_table_by_hand():
    df = explain([{"name": "cpu, case, K=1", "tau": 1.3, "c": 0.15, "num_steps": 1, "v": 1.1},
                  {"name": "long chain", "tau": 1.3, "c": 0.15, "num_steps": 15, "v": 1.6, "measured_speedup": 0.4}])
    assert df.loc["cpu, case, K=1", "round_cost"] == pytest.approx(0.15 + 1.1)
    assert df.loc["cpu, case, K=1", "projected_speedup"] == pytest.approx(1.3 / 1.25)
    assert df.loc["long chain", "round_cost"] == pytest.approx(0.15 * 15 + 1.6)
    assert df.loc["long chain", "projected_speedup"] < 1
    served = explain([{"name": "served", "tau": 1.3, "c": 0.1, "num_steps": 1, "v": 1.05, "overhead": 0.2}])
    assert served.loc["served", "round_cost"] == pytest.approx(0.1 + 1.05 + 0.2)
    assert served.loc["served", "overhead"] == 0.2 and df.loc["long chain", "overhead"] == 0


def test_tree_projection_uses_measured_tree_phases():
    target, draft = tiny_pair()
    cm = measure_costs(target, draft, context_len=20, verify_sizes=(1, 2, 5), settings=((3, 2, 5),), repeats=2,
                       warmup=1)
    proj = cm.project(2.0, num_steps=3, topk=2, num_draft_tokens=5)
    assert proj.pieces["draft_s"] == cm.draft_phase_s["K=3,topk=2,M=5"]
    assert proj.pieces["verify_s"] == cm.setting_verify_s["K=3,topk=2,M=5"]
    assert torch.isfinite(torch.tensor(proj.speedup))


def test_plots_return_figures():

    matplotlib.use("Agg")
    from eagle3lab.analysis.plots import plot_break_even

    fig = hand_costs().plot_verify_curve()
    assert list(fig.axes[0].lines[0].get_ydata()) == pytest.approx([1.0, 1.1, 1.3, 1.7])
    # the legend (a long label, as notebook 05 writes it) covers no tick label and no point (issue 35)
    ax = hand_costs().plot_verify_curve(label="cpu, float32, batch 1, context 64 (timed with the emulated loop's "
                                              "own methods)").axes[0]
    ax.figure.canvas.draw()
    legend = ax.get_legend().get_window_extent()
    ticks = [t.get_window_extent() for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
    assert ticks and not any(legend.overlaps(t) for t in ticks)
    points = ax.transData.transform(ax.lines[0].get_xydata())
    assert not any(legend.contains(x, y) for x, y in points)
    table = explain([{"name": "a", "tau": 2.0, "c": 0.1, "num_steps": 3, "v": 1.2},
                     {"name": "b", "tau": 1.1, "c": 0.1, "num_steps": 15, "v": 1.6}])
    fig = plot_break_even(table)
    assert len(fig.axes[0].collections) >= 2


def test_equivalent_alpha_inverts_leviathan():
    for alpha, gamma in [(0.3, 1), (0.8, 5), (0.95, 15)]:
        tau = leviathan_tokens_per_step(alpha, gamma)
        assert equivalent_alpha(tau, gamma) == pytest.approx(alpha, abs=1e-6)
    assert equivalent_alpha(1.0, 4) == 0.0 and equivalent_alpha(5.0, 4) == 1.0
    with pytest.raises(Eagle3LabError, match="tau"):
        equivalent_alpha(6.0, 4)        # more tokens than a 4-draft round can emit


def test_seed_symptom_arithmetic():
    """tau ~ 1 on a 15-step chain cannot pay: the round costs 14 draft steps and a 16-token verify."""
    cm = hand_costs()
    st = acceptance_stats([0] * 9 + [1], num_positions=15)      # tau 1.1
    proj = cm.project(st, num_steps=15)
    extend = 0.9 * cm.extend_s[1] + 0.1 * cm.extend_s[2]
    assert proj.round_cost == pytest.approx(extend + 14 * cm.c + cm.v(16))
    assert proj.tau == pytest.approx(1.1) and proj.speedup < 0.5
