"""The notebooks' figures (eagle3lab.analysis.plots) on tiny hand-made tables: what each one draws."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")


import matplotlib
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

import eagle3lab  # noqa: E402
from eagle3lab.analysis import plots  # noqa: E402
from eagle3lab.analysis.plots import (  # noqa: E402
    plot_chain_vs_tree,
    plot_residual_balance,
    plot_residual_scale,
    plot_rms_halves,
    plot_slot_scan,
    plot_survival_by_rule,
    plot_tokens_per_round,
)
from eagle3lab.analysis.roofline import CostSeries  # noqa: E402
from eagle3lab.engines.acceptance import (
    acceptance_stats,
)

NEW = ["plot_tokens_per_round", "plot_slot_scan", "plot_rms_halves", "plot_residual_balance",
       "plot_survival_by_rule", "plot_residual_scale", "plot_chain_vs_tree"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _labels(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


def test_the_new_figures_are_public_names_of_eagle3lab():
    for name in NEW:
        assert getattr(eagle3lab, name) is getattr(plots, name)
        assert name in eagle3lab.__all__


def test_tokens_per_round_draws_one_bar_per_launch_and_count_with_missing_counts_as_zero():
    shares = pd.DataFrame({"as launched": {1: 0.7, 2: 0.3}, "fixed": {1: 0.2, 3: 0.5, 5: 0.3}})
    fig = plot_tokens_per_round(shares, cap=2, engine="sglang")
    ax = fig.axes[0]
    assert len(ax.patches) == 2 * 5                     # 1..5 tokens, two launches
    heights = [[bar.get_height() for bar in c] for c in ax.containers]
    assert heights == [pytest.approx([0.7, 0.3, 0, 0, 0]), pytest.approx([0.2, 0, 0.5, 0, 0.3])]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "3", "4", "5"]
    assert _labels(ax) == ["as launched", "fixed"]
    assert ax.get_title() == "Same draft, 2 sglang launches: as launched, at most 2 tokens per round"
    assert ax.get_xlabel() == "tokens emitted in a round (accepted drafts + bonus)"
    assert ax.get_ylabel() == "share of rounds"
    plain = plot_tokens_per_round(shares).axes[0]
    assert plain.get_title() == "Same draft, 2 launches"


def test_slot_scan_heatmap_marks_trained_and_served_points_beside_the_reorderings():
    grid = pd.DataFrame([[1.5, 2.0, 1.0, np.nan], [1.1, 1.3, 2.0, 1.7]],
                        index=["slot 0 (resid[1])", "slot 1 (resid[2])"],
                        columns=[f"resid[{k}]" for k in range(4)])
    orders = pd.DataFrame({"aux_resid": [(2, 1), (1, 2)], "tau": [1.2, 2.0]})
    fig = plot_slot_scan(grid, orders, trained=(1, 2), served=(2, 3), engine="sglang", tau_served_wiring=1.7,
                         num_steps=3)
    ax, bx, cbar = fig.axes
    np.testing.assert_array_equal(np.ma.filled(ax.images[0].get_array().astype(float), np.nan), grid.to_numpy())
    boxes = [(p.get_x(), p.get_y(), to_rgba(p.get_edgecolor())) for p in ax.patches]
    assert boxes == [(0.5, -0.5, to_rgba("white")), (1.55, -0.45, to_rgba("red")),
                     (1.5, 0.5, to_rgba("white")), (2.55, 0.55, to_rgba("red"))]
    texts = sorted((t.get_position(), t.get_text()) for t in ax.texts)
    assert len(texts) == 7 and ((3, 0), "nan") not in texts        # the unscored cell is left blank
    assert ((1, 0), "2.00") in texts and ((3, 1), "1.70") in texts
    assert [t.get_text() for t in ax.get_yticklabels()] == list(grid.index)
    assert "sglang" in ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
    assert cbar.get_ylabel() == "tau, tokens per round (3-step chain)"
    assert [b.get_width() for b in bx.patches] == [1.2, 2.0]
    assert [t.get_text() for t in bx.get_yticklabels()] == ["[2, 1]", "[1, 2]"]
    assert [to_rgba(b.get_facecolor()) for b in bx.patches] == [to_rgba("tab:grey"), to_rgba("tab:green")]
    assert list(bx.lines[0].get_xdata()) == [1.7, 1.7] and _labels(bx) == ["sglang's wiring"]
    assert bx.get_xlim() == pytest.approx((0, 1.4 * 2.0))
    assert bx.get_title() == "the trained states, reordered" and bx.get_xlabel() == "tau (tokens per round)"


def test_rms_halves_one_panel_per_draft_raw_outlined_normed_filled_counts_of_the_table():
    hooks = {"hook_embed": "embedding half, raw", "hook_fc_out": "fc half, raw (h)",
             "layers.0.hook_emb_normed": "input_layernorm(embed)", "layers.0.hook_hid_normed": "hidden_norm(h)"}
    base = {"hook_embed": [0.01, 0.02, 0.02, 0.03, 0.05], "hook_fc_out": [5.0, 8.0, 9.0, 12.0, 30.0],
            "layers.0.hook_emb_normed": [0.9, 1.0, 1.0, 1.1, 1.2], "layers.0.hook_hid_normed": [0.8, 0.95, 1.0, 1.0, 1.3]}
    per_token = pd.DataFrame({(name, hook): np.array(v) * scale for name, scale in (("case", 1.0), ("healthy", 2.0))
                              for hook, v in base.items()})
    fig = plot_rms_halves(per_token, labels=hooks, bins=20)
    panels = fig.axes
    assert [ax.get_title() for ax in panels] == ["case", "healthy"]
    assert fig._suptitle.get_text() == "per-token RMS of the two halves: outlined = raw, filled = after their norms"
    assert _labels(panels[0]) == list(hooks.values())
    assert panels[0].get_ylabel() == "tokens" and all(ax.get_xscale() == "log" for ax in panels)
    assert all(ax.get_xlabel() == "per-token RMS (log scale)" for ax in panels)
    values = per_token.to_numpy()
    edges = np.logspace(np.log10(values.min()) - 0.1, np.log10(values.max()) + 0.1, 20)
    for ax, name in zip(panels, ["case", "healthy"]):
        assert len(ax.patches) == 4
        for patch, hook in zip(ax.patches, base):
            assert patch.get_fill() == ("normed" in hook)
            blue = "emb" in hook
            drawn_colour = patch.get_facecolor() if patch.get_fill() else patch.get_edgecolor()
            assert to_rgba(drawn_colour)[:3] == to_rgba("tab:blue" if blue else "tab:orange")[:3]
            counts, _ = np.histogram(per_token[name, hook], bins=edges)
            drawn = patch.get_xy()
            assert drawn[:, 1].max() == counts.max() and counts.sum() == 5
            assert {float(y) for y in drawn[:, 1]} <= {0.0, *map(float, counts)}
            assert drawn[:, 0].min() == pytest.approx(edges[0]) and drawn[:, 0].max() == pytest.approx(edges[-1])


def _by_rule(values: dict) -> pd.DataFrame:
    index = pd.MultiIndex.from_tuples(list(values), names=["draft", "norm_before_residual"])
    return pd.DataFrame(list(values.values()), index=index)


def test_residual_balance_pairs_residual_and_attn_out_bars_on_a_log_scale():
    balance = _by_rule({("a", False): {"rms_residual": 20.0, "rms_attn_out": 0.5},
                        ("a", True): {"rms_residual": 1.0, "rms_attn_out": 0.6},
                        ("b", False): {"rms_residual": 15.0, "rms_attn_out": 9.0},
                        ("b", True): {"rms_residual": 1.1, "rms_attn_out": 8.0}})
    ax = plot_residual_balance(balance).axes[0]
    assert len(ax.patches) == 8
    residual, attn = ax.containers
    assert [b.get_height() for b in residual] == [20.0, 1.0, 15.0, 1.1]
    assert [b.get_height() for b in attn] == [0.5, 0.6, 9.0, 8.0]
    assert [b.get_x() + b.get_width() / 2 for b in residual] == pytest.approx([-0.2, 0.8, 1.8, 2.8])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a\nflag off", "a\nflag on", "b\nflag off", "b\nflag on"]
    assert ax.get_yscale() == "log" and ax.get_ylabel() == "median per-token RMS" and ax.get_xlabel()
    assert ax.get_title() == "what attn_out is added to, with norm_before_residual off / on"
    assert _labels(ax) == ["residual", "attn_out"]


def test_survival_by_rule_draws_one_line_per_draft_and_rule_with_its_tau():
    accept = _by_rule({("case", False): {"tau": 1.21, "a1": 0.2, "a2": 0.01, "a3": 0.0},
                       ("case", True): {"tau": 2.5, "a1": 0.8, "a2": 0.5, "a3": 0.2},
                       ("healthy", False): {"tau": 2.9, "a1": 0.9, "a2": 0.6, "a3": 0.4}})
    ax = plot_survival_by_rule(accept).axes[0]
    assert len(ax.lines) == 3
    for line, (_, row) in zip(ax.lines, accept.iterrows()):
        assert list(line.get_xdata()) == [1, 2, 3]
        assert list(line.get_ydata()) == [row.a1, row.a2, row.a3]
    assert [line.get_linestyle() for line in ax.lines] == ["-", "-", "--"]   # the first draft solid
    assert _labels(ax) == ["case, norm_before_residual=False (tau 1.21)", "case, norm_before_residual=True (tau 2.50)",
                           "healthy, norm_before_residual=False (tau 2.90)"]
    assert ax.get_ylim() == (0, 1) and ax.get_xlabel() == "draft position k"
    assert ax.get_ylabel() == "a_k = P(at least k accepted)"
    assert ax.get_title() == "acceptance under each residual rule (trained wiring)"


def test_residual_scale_plots_the_sweep_with_the_flag_off_level_and_rms_h():
    sweep = pd.Series({0.5: 0.7, 1.0: 0.75, 4.0: 0.4, 16.0: 0.2}, name="step-1 agreement")
    ax = plot_residual_scale(sweep, flag_off=0.25, h_scale=3.7, draft="draft-case").axes[0]
    curve, off, rms_h = ax.lines
    assert list(curve.get_xdata()) == [0.5, 1.0, 4.0, 16.0] and list(curve.get_ydata()) == [0.7, 0.75, 0.4, 0.2]
    assert list(off.get_ydata()) == [0.25, 0.25] and list(rms_h.get_xdata()) == [3.7, 3.7]
    assert _labels(ax) == ["draft-case, flag on, residual x c", "flag off (raw h)", "median rms(h) = 3.7"]
    assert ax.get_xscale() == "log" and ax.get_xlabel() == "factor c on the residual"
    assert ax.get_ylabel() == "step-1 agreement with the target" and "draft-case" in ax.get_title()


def test_chain_vs_tree_colours_chains_and_trees_and_labels_the_verify_width():
    trees = pd.DataFrame({"tau": [3.1, 3.4, 2.9], "tau_low": [2.9, 3.0, 2.5], "tau_high": [3.3, 3.7, 3.2],
                          "verified": [6, 8, 8], "topk": [1, 1, 4]},
                         index=pd.Index(["chain 5", "chain 7", "tree 5/4/8"], name="setting"))
    ax = plot_chain_vs_tree(trees).axes[0]
    assert [b.get_width() for b in ax.patches] == [3.1, 3.4, 2.9]
    assert [to_rgba(b.get_facecolor()) for b in ax.patches] == [to_rgba("tab:blue")] * 2 + [to_rgba("tab:green")]
    # the ranked bars carry their intervals (issue 35): one error bar per setting, from tau_low to tau_high
    (bars,) = [c for c in ax.containers if getattr(c, "errorbar", None) is not None]
    segments = bars.errorbar.lines[2][0].get_segments()
    assert [(seg[0][0], seg[1][0]) for seg in segments] == [pytest.approx((lo, hi)) for lo, hi in
                                                            zip(trees.tau_low, trees.tau_high)]
    assert [t.get_text() for t in ax.texts] == [" 6 verified", " 8 verified", " 8 verified"]
    assert [t.get_position() for t in ax.texts] == [(3.3, 0), (3.7, 1), (3.2, 2)]    # past the interval
    assert ax.yaxis_inverted()
    assert ax.get_title() == "chain vs tree, greedy"
    assert ax.get_xlabel() == "tau (tokens per verify step, 95% interval over prompts)"
    with pytest.raises(ValueError, match="tau_low"):
        plot_chain_vs_tree(trees.drop(columns=["tau_low", "tau_high"]))
    assert ax.get_ylabel() == "setting"
    assert plot_chain_vs_tree(trees, title="sampled").axes[0].get_title() == "sampled"


def test_plot_acceptance_draws_every_position():

    matplotlib.use("Agg")
    from eagle3lab.analysis.plots import plot_acceptance

    runs = {"healthy": acceptance_stats([0, 2, 3, 1, 3], num_positions=3),
            "case": acceptance_stats([0, 0, 1], num_positions=3)}
    fig = plot_acceptance(runs)
    ax = fig.axes[0]
    assert len(ax.patches) == 6 and len(ax.lines) == 2
    assert list(ax.lines[0].get_ydata()) == pytest.approx([0.8, 0.6, 0.4])


def test_one_plot_style_names_engine_and_device_and_sees_what_is_missing():
    import matplotlib.pyplot as plt

    from eagle3lab.analysis.plot_style import style_problems

    trees = pd.DataFrame({"tau": [3.1, 2.9], "tau_low": [2.9, 2.6], "tau_high": [3.3, 3.2], "verified": [6, 8], "topk": [1, 4]},
                         index=pd.Index(["chain 5", "tree 5/4/8"], name="setting"))
    ax = plot_chain_vs_tree(trees, engine="sglang", device="cpu").axes[0]
    assert ax.get_title() == "chain vs tree, greedy (engine sglang, on cpu)" and style_problems(ax.figure) == []
    # a function with its own engine argument keeps it (and takes it by position too)
    shares = pd.DataFrame({"launch A": [0.5, 0.5]}, index=[1, 2])
    assert style_problems(plot_tokens_per_round(shares, 2, "vllm", device="cuda:0")) == []
    bare, axes = plt.subplots()
    axes.plot([1, 2], [3, 4])
    assert style_problems(bare) == ["axes 0: no title", "axes 0: no x label", "axes 0: no y label"]
    plt.close("all")


# ------------------------------------------------------------------ notebook 05's speed figures

CONTEXT = "cpu, float32, batch 1, emulated SGLang (eagle3lab's loop, not a server)"


def _flat(title: str) -> str:
    """A title's words on one line (the context is wrapped under the title)."""
    return " ".join(title.split())


def _speed_rows():
    return pd.DataFrame({"num_steps": [1, 2, 3], "tau": [1.08, 2.4, 3.0], "tau_low": [1.05, 2.2, 2.8],
                         "tau_high": [1.11, 2.6, 3.2], "measured": [0.70, 1.40, 1.45], "measured_low": [0.66, 1.3, 1.35],
                         "measured_high": [0.74, 1.5, 1.55], "word": ["slower", "faster", "faster"],
                         "projected": [1.64, 1.41, 1.60], "break_even_tau": [0.66, 1.69, 1.87],
                         "draft_phase": [0.08, 0.27, 0.37], "v_verify": [0.58, 1.42, 1.50],
                         "paid_cost": [1.54, 1.71, 2.07], "paid_low": [1.46, 1.6, 1.94], "paid_high": [1.64, 1.85, 2.22]},
                        index=["case", "chain 2", "chain 3"])


def _outside(fig, legend) -> bool:
    """The legend's box lies right of every axes' plotting area (so no label sits on a point)."""
    fig.canvas.draw()
    box = legend.get_window_extent()
    return all(box.x0 >= ax.get_window_extent().x1 for ax in fig.axes if ax.get_legend() is legend)


def test_break_even_tells_projected_from_measured_and_prints_no_projected_speedup():
    rows = _speed_rows()
    fig = plots.plot_break_even(rows, context=CONTEXT)
    ax = fig.axes[0]
    assert len(ax.texts) == 0                               # no annotations to overlap
    labels = _labels(ax)
    assert labels[:3] == ["case: measured 0.70x [0.66, 0.74] (slower)", "chain 2: measured 1.40x [1.30, 1.50] (faster)",
                          "chain 3: measured 1.45x [1.35, 1.55] (faster)"]
    assert labels[3:] == ["projected round cost (timed pieces)", "round cost paid: tau / measured speedup"]
    assert not any(f"{p:.2f}x" in " ".join(labels) for p in rows.projected)
    from matplotlib.collections import PathCollection

    hollow = [c for c in ax.collections if isinstance(c, PathCollection) and c.get_facecolor().size == 0]
    assert [tuple(c.get_offsets()[0]) for c in hollow] == list(zip(rows.break_even_tau, rows.tau))
    assert CONTEXT in _flat(ax.get_title()) and _outside(fig, ax.get_legend())
    # a bare explain table (no measurement) still draws, projected only
    bare = plots.plot_break_even(rows[["tau", "break_even_tau", "projected"]]).axes[0]
    assert _labels(bare) == ["case", "chain 2", "chain 3", "projected round cost (timed pieces)"]


def test_here_and_served_draws_one_row_per_what_if_measured_filled_projected_hollow():
    where = pd.DataFrame({"tau": [1.08, 1.33], "tau_low": [1.05, 1.2], "tau_high": [1.11, 1.45],
                          "break-even here, measured": [1.5, 1.6], "break-even here, measured low": [1.4, 1.5],
                          "break-even here, measured high": [1.6, 1.7], "break-even served, batch 1, projected": [1.35] * 2,
                          "break-even served, batch 48, projected": [1.52] * 2}, index=["as launched", "half fixed"])
    measured = CostSeries("break-even here, measured", "here, measured", True, "break-even here, measured low",
                          "break-even here, measured high")
    fig = plots.plot_here_and_served(where, [measured] + [CostSeries(f"break-even served, batch {b}, projected",
                                                                     f"served, batch {b}, projected") for b in (1, 48)],
                                     context=CONTEXT)
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["as launched", "half fixed"]
    handles = dict(zip(_labels(ax), ax.get_legend().legend_handles))
    assert sorted(handles) == ["here, measured", "served, batch 1, projected", "served, batch 48, projected",
                               "tau (tokens per round)"]
    assert handles["served, batch 1, projected"].get_markerfacecolor() == "none"
    assert handles["served, batch 48, projected"].get_markerfacecolor() == "none"
    measured = next(c for c in ax.containers if c.get_label() == "here, measured")
    assert measured.lines[0].get_markerfacecolor() != "none"
    assert list(measured.lines[0].get_xdata()) == [1.5] and measured.has_xerr
    assert len(ax.texts) == 0 and CONTEXT in _flat(ax.get_title()) and _outside(fig, ax.get_legend())
    # roofline.here_and_served's table (no intervals) still draws: every setting hollow, tau a bar
    old = pd.DataFrame({"tau": [1.33], "break_even_here": [1.52], "break_even_served_1": [1.35]}, index=["x"])
    series = [CostSeries("break_even_here", "here (projected)"), CostSeries("break_even_served_1",
                                                                           "served, batch 1 (projected)")]
    assert sorted(_labels(plots.plot_here_and_served(old, series).axes[0])) == [
        "here (projected)", "served, batch 1 (projected)", "tau (tokens per round)"]


def test_speed_vs_chain_draws_measured_with_intervals_beside_the_projection_and_shades_the_fastest_set():
    rows = _speed_rows()
    ax = plots.plot_speed_vs_chain(rows, near=["chain 2", "chain 3"], context=CONTEXT).axes[0]
    measured, projected = ax.lines[0], next(line for line in ax.lines if line.get_linestyle() == "--")
    assert list(measured.get_ydata()) == [0.70, 1.40, 1.45] and list(projected.get_ydata()) == [1.64, 1.41, 1.60]
    assert projected.get_markerfacecolor() == "none"
    assert sorted(_labels(ax)) == ["measured (95% interval over repetition x prompt)",
                                   "projected (cost model, no interval)",
                                   "the fastest set: within noise of the top measurement (not ranked)"]
    assert len([p for p in ax.patches]) == 2 and CONTEXT in _flat(ax.get_title())


def test_tau_vs_chain_and_round_costs():
    table = pd.DataFrame({"tau": [1.8, 2.4], "tau_low": [1.7, 2.2], "tau_high": [1.9, 2.6], "predicted": [1.85, 2.3]},
                         index=pd.Index([1, 2], name="K"))
    ax = plots.plot_tau_vs_chain(table).axes[0]
    assert list(ax.lines[0].get_ydata()) == [2, 3]                 # the cap K + 1
    assert [t.get_text() for t in ax.get_legend().get_texts()][2] == "measured tau (95% interval over prompts)"
    rows = _speed_rows()
    fig = plots.plot_round_costs(rows, context=CONTEXT)
    ax = fig.axes[0]
    assert [b.get_width() for b in ax.patches] == pytest.approx(list(rows.draft_phase) + list(rows.v_verify))
    assert [t.get_text() for t in ax.get_yticklabels()] == list(rows.index)
    assert "paid, measured: tau / speedup (95%)" in _labels(ax) and CONTEXT in _flat(ax.get_title())
    assert _outside(fig, ax.get_legend())


def test_speedup_vs_c_names_its_context():
    from eagle3lab.analysis.cost_model import explain

    table = explain([{"name": "a", "tau": 2.0, "c": 0.1, "num_steps": 3, "v": 1.2, "measured_speedup": 1.1}])
    table["c_round"], table["verified"] = 0.1, 4
    ax = plots.plot_speedup_vs_c(table, context=CONTEXT).axes[0]
    assert _flat(ax.get_title()).endswith(CONTEXT)
