"""The analysis layer's figures (break-even, speedup against draft cost, acceptance per position)."""

from __future__ import annotations

import pandas as pd

from eagle3lab.analysis.plot_style import styled
from eagle3lab.engines.acceptance import AcceptanceStats


def _title(ax, title: str, context: str | None = None, fontsize: float = 9):
    """A title with the run's context (device, dtype, batch, engine) wrapped under it, never wider than the axes."""
    import textwrap

    ax.set_title(title + ("\n" + textwrap.fill(context, 52) if context else ""), fontsize=fontsize)


def _legend_outside(ax, **kw):
    """A legend right of the axes: labels never sit on the points."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=7, **kw)


def _one_row_each(ax, names, xlabel: str, ylabel: str, title: str, context: str | None):
    """The frame of a chart with one horizontal row per name, first at the top, and its legend right of the axes;
    returns the figure."""
    ax.set_yticks(range(len(names)), list(names), fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _title(ax, title, context)
    _legend_outside(ax)
    ax.figure.tight_layout()
    return ax.figure


@styled
def plot_break_even(table: pd.DataFrame, ax=None, context: str | None = None):
    """Each case's tau against the round cost it pays, in target steps (= its break-even tau): above the
    diagonal, speculation pays.

    Hollow marker: the round cost the cost model projects (``break_even_tau``). Filled marker with its interval,
    where ``table`` has ``paid_cost`` (and ``paid_low`` / ``paid_high``): the cost the measured speedup implies
    (tau / speedup), the one that decides. One colour per case, named in a legend beside the axes (the measured
    speedup and its verdict there, when ``measured`` / ``word`` are given; never a projected speedup).
    ``context``: device, dtype, batch and engine, appended to the title.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    cols = [table["tau"], table["break_even_tau"]] + ([table["paid_high"]] if "paid_high" in table else
                                                      [table["paid_cost"]] if "paid_cost" in table else [])
    top = max(float(c.max()) for c in cols) * 1.1
    ax.plot([1, top], [1, top], color="grey", lw=0.8, ls="--")
    ax.fill_between([1, top], [1, top], [top, top], color="tab:green", alpha=0.08)
    for i, (name, row) in enumerate(table.iterrows()):
        color, label = f"C{i % 10}", str(name)
        if "measured" in row and row["measured"] == row["measured"]:
            label += f": measured {row['measured']:.2f}x" + (f" [{row['measured_low']:.2f}, {row['measured_high']:.2f}]"
                                                             if "measured_low" in row else "")
            label += f" ({row['word']})" if "word" in row else ""
        ax.scatter(row["break_even_tau"], row["tau"], s=45, facecolors="none", edgecolors=color, zorder=3,
                   label=None if "paid_cost" in row else label)
        if "paid_cost" in row:
            err = ([[row["paid_cost"] - row["paid_low"]], [row["paid_high"] - row["paid_cost"]]] if "paid_low" in row
                   else None)
            ax.errorbar(row["paid_cost"], row["tau"], xerr=err, fmt="o", color=color, ms=5, capsize=3, zorder=4,
                        label=label)
            ax.plot([row["break_even_tau"], row["paid_cost"]], [row["tau"]] * 2, color=color, lw=0.8, ls=":")
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], marker="o", ls="", mfc="none", mec="k", label="projected round cost (timed pieces)")]
    if "paid_cost" in table:
        handles += [Line2D([], [], marker="o", ls="", color="k", label="round cost paid: tau / measured speedup")]
    _legend_outside(ax, handles=handles)
    ax.set_xlabel("round cost in target steps (= break-even tau)")
    ax.set_ylabel("tau (tokens per round)")
    _title(ax, "speculation pays above the diagonal", context)
    ax.figure.tight_layout()
    return ax.figure


@styled
def plot_speedup_vs_c(table: pd.DataFrame, ax=None, c_max: float | None = None, context: str | None = None):
    """Speedup against the draft cost c, one curve per case, with the measured points on them.

    ``table``: rows of :meth:`DecodeSweep.projection`. Solid: this cost model, tau / (K c + v(M)) with
    the measured tau and verify cost; dotted: Leviathan et al.'s model with the same tau, verification
    free (v = 1). Hollow marker: the projection at the measured c; filled: the measured speedup.
    ``context``: device, dtype, batch and engine, appended to the title.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5))
    c_max = c_max or max(0.5, 1.3 * float(table.c_round.max()))
    cs = [c_max * i / 200 for i in range(201)]
    for i, (name, row) in enumerate(table.iterrows()):
        color, K = f"C{i}", int(row.num_steps)
        ax.plot(cs, [row.tau / (K * c + row.v_verify) for c in cs], color=color,
                label=f"{name}: tau {row.tau:.2f}, K {K}, v({int(row.verified)}) {row.v_verify:.2f}")
        ax.plot(cs, [row.tau / (K * c + 1) for c in cs], color=color, ls=":", lw=1)
        ax.scatter([row.c_round], [row.projected_speedup], s=60, facecolors="none", edgecolors=color, zorder=3)
        ax.scatter([row.c_round], [row.measured_speedup], s=30, color=color, zorder=4)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="k", ls=":", lw=1, label="Leviathan, same tau, verify free (v = 1)"),
                Line2D([], [], marker="o", ls="", mfc="none", mec="k", label="projected at the measured c"),
                Line2D([], [], marker="o", ls="", color="k", label="measured")]
    ax.legend(handles=handles, fontsize=7)
    ax.set_xlim(0, c_max)
    ax.set_ylim(0, None)
    ax.set_xlabel("c = draft forward / target step (per forward, as the round pays it)")
    ax.set_ylabel("speedup over plain decoding")
    _title(ax, "speedup vs draft cost: above the dashed line speculation pays", context)
    return ax.figure


@styled
def plot_speed_vs_chain(rows: pd.DataFrame, near=(), context: str | None = None, ax=None):
    """Measured speedup over no speculation per chain length (filled, solid, with its interval) beside the cost
    model's projection (hollow, dashed: no interval). ``rows``: index = setting, columns ``num_steps``,
    ``measured``, ``measured_low``, ``measured_high``, ``projected``; ``near``: the settings within noise of the
    fastest (shaded: not ranked among themselves)."""
    import matplotlib.pyplot as plt

    from eagle3lab.analysis.plot_style import MEASURED, PROJECTED

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4))
    k = rows["num_steps"].to_numpy()
    ax.errorbar(k, rows["measured"], yerr=[rows["measured"] - rows["measured_low"], rows["measured_high"] - rows["measured"]],
                color="tab:blue", capsize=3, label="measured (95% interval over repetition x prompt)", **MEASURED)
    ax.plot(k, rows["projected"], color="tab:orange", mfc="none", label="projected (cost model, no interval)",
            **{**PROJECTED, "marker": "o"})
    for i, name in enumerate(n for n in rows.index if n in set(near)):
        x = rows.loc[name, "num_steps"]
        ax.axvspan(x - 0.4, x + 0.4, color="tab:green", alpha=0.12, lw=0,
                   label="the fastest set: within noise of the top measurement (not ranked)" if i == 0 else None)
    ax.axhline(1, color="grey", lw=0.8, ls=":")
    ax.set_xticks(k)
    ax.set(xlabel="chain length K (draft tokens per round)", ylabel="speedup over no speculation (decode)")
    _title(ax, "speedup against chain length: tau grows, so does the round", context)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax.figure


@styled
def plot_tau_vs_chain(table: pd.DataFrame, ax=None):
    """Measured tau per chain length with its interval, the longest chain's 1 + sum a_k as a prediction
    (dashed) and the cap K + 1 (dotted). ``table``: index K, columns ``tau``, ``tau_low``, ``tau_high``,
    ``predicted``."""
    import matplotlib.pyplot as plt

    from eagle3lab.analysis.plot_style import MEASURED, PROJECTED

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 4))
    ks = table.index.to_numpy()
    ax.plot(ks, ks + 1, ls=":", color="grey", label="cap: K + 1")
    ax.plot(ks, table["predicted"], color="tab:orange", label=f"predicted: 1 + sum of a_k of the {ks[-1]}-chain",
            **PROJECTED)
    ax.errorbar(ks, table["tau"], yerr=[table["tau"] - table["tau_low"], table["tau_high"] - table["tau"]],
                color="tab:blue", capsize=3, label="measured tau (95% interval over prompts)", **MEASURED)
    ax.set_xticks(ks)
    ax.set_xlabel("draft tokens per round (chain length K)")
    ax.set_ylabel("tau (tokens per verify step)")
    ax.set_title("tau against chain length")
    ax.legend(fontsize=8)
    return ax.figure


@styled
def plot_round_costs(rows: pd.DataFrame, context: str | None = None, ax=None):
    """Per setting, the projected round cost as stacked pieces (draft phase, verify), the round cost the measured
    speedup implies (hollow diamond with its interval) and tau (black dot): a round that costs more target
    steps than its tau emits tokens is slower than plain decoding. ``rows``: columns ``draft_phase``,
    ``v_verify``, ``tau``, ``paid_cost``, ``paid_low``, ``paid_high``."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 1.2 + 0.55 * len(rows)))
    y = range(len(rows))
    ax.barh(y, rows["draft_phase"], color="tab:orange", label="projected: draft phase (extend + drafting)")
    ax.barh(y, rows["v_verify"], left=rows["draft_phase"], color="tab:grey", label="projected: verify v(M)")
    ax.errorbar(rows["paid_cost"], y, xerr=[rows["paid_cost"] - rows["paid_low"], rows["paid_high"] - rows["paid_cost"]],
                fmt="D", mfc="white", mec="tab:red", color="tab:red", capsize=3, zorder=4,
                label="paid, measured: tau / speedup (95%)")
    ax.scatter(rows["tau"], list(y), color="k", zorder=5, label="tau (tokens per round)")
    return _one_row_each(ax, rows.index, "target steps per round", "setting",
                         "round cost vs tokens per round: a round costlier than its tau loses", context)


@styled
def plot_acceptance(stats: dict | AcceptanceStats, ax=None, title: str | None = None):
    """Conditional c_k (bars) and survival a_k (line) per position; one colour per labelled run.

    ``stats``: one ``AcceptanceStats`` or ``{label: AcceptanceStats}``. Returns the figure.
    """
    import matplotlib.pyplot as plt

    runs = stats if isinstance(stats, dict) else {"": stats}
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3.5))
    width = 0.8 / max(len(runs), 1)
    for i, (label, s) in enumerate(runs.items()):
        pos = [k + (i - (len(runs) - 1) / 2) * width for k in range(1, s.num_positions + 1)]
        bars = ax.bar(pos, [0 if c != c else c for c in s.conditional], width=width, alpha=0.5,
                      label=f"{label} c_k (tau {s.tau:.2f})".strip())
        ax.plot(range(1, s.num_positions + 1), s.survival, marker="o", color=bars.patches[0].get_facecolor(),
                alpha=1.0, label=f"{label} a_k".strip())
    ax.set_xlabel("draft position k")
    ax.set_ylabel("rate")
    ax.set_ylim(0, 1.05)
    ax.set_xticks(range(1, max(s.num_positions for s in runs.values()) + 1))
    ax.set_title(title or "per-position acceptance: conditional c_k (bars), survival a_k (lines)")
    ax.legend(fontsize=8)
    return ax.figure


@styled
def plot_here_and_served(where: pd.DataFrame, series, ax=None, context: str | None = None):
    """One row per what-if: its tau (black bar, with its interval when ``tau_low`` / ``tau_high`` are given)
    against the round cost it pays here and on each served setting (one marker shape each, named in the
    legend; filled = measured, with its interval; hollow = projected). A marker left of the bar pays.
    ``where``: column ``tau`` and the columns ``series`` names (``roofline.CostSeries``, given by the table's
    producer: ``roofline.here_and_served_series`` or ``WhatIf.series`` of notebook 05's readings)."""
    import matplotlib.pyplot as plt

    series = list(series)
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 1.4 + 0.7 * len(where)))
    markers = "osD^vP*X"
    for i, (_, row) in enumerate(where.iterrows()):
        if "tau_low" in row:
            ax.plot([row["tau_low"], row["tau_high"]], [i, i], color="k", lw=5, alpha=0.25, solid_capstyle="butt")
        ax.plot([row["tau"]] * 2, [i - 0.3, i + 0.3], color="k", lw=2, label="tau (tokens per round)" if i == 0 else None)
        for j, s in enumerate(series):
            x = row[s.column]
            kw = dict(color=f"C{j}", ms=7, marker=markers[j % len(markers)], ls="", zorder=3,
                      label=s.label if i == 0 else None)
            if not s.measured:
                kw.update(mfc="none")
            y = i + 0.12 * (j - (len(series) - 1) / 2)
            if s.measured and s.low is not None:
                ax.errorbar(x, y, xerr=[[x - row[s.low]], [row[s.high] - x]], capsize=3, **kw)
            else:
                ax.plot(x, y, **kw)
    return _one_row_each(ax, where.index, "round cost in target steps (= break-even tau); left of the black bar pays",
                         "what-if", "tau against the round cost, here and served", context)


@styled
def plot_tokens_per_round(shares: pd.DataFrame, cap: int | None = None, engine: str | None = None, ax=None):
    """Share of rounds that emitted 1, 2, ... tokens (accepted drafts + bonus), one bar colour per launch.

    ``shares``: one column per launch, indexed by tokens per round (missing counts are drawn as 0);
    ``cap``: the most tokens the first launch can emit per round; ``engine``: whose rules the launches follow.
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7, 3))
    full = shares.reindex(range(1, int(shares.index.max()) + 1)).fillna(0)
    full.plot.bar(ax=ax, rot=0)
    ax.set_xlabel("tokens emitted in a round (accepted drafts + bonus)")
    ax.set_ylabel("share of rounds")
    title = f"Same draft, {len(full.columns)} {engine + ' ' if engine else ''}launches"
    if cap is not None:
        title += f": as launched, at most {cap} tokens per round"
    ax.set_title(title)
    return ax.figure


def _short(wiring) -> str:
    return "[" + ", ".join(str(int(k)) for k in wiring) + "]"


@styled
def plot_slot_scan(grid: pd.DataFrame, orders: pd.DataFrame, trained, served, engine: str,
                   tau_served_wiring: float | None = None, num_steps: int | None = None, level: float | None = None):
    """``slot_scan``'s grid as a heatmap (white box: the trained point; dashed red: what ``engine`` feeds) beside
    the tau of each reordering of the trained states (``orders``: ``NeighbourhoodScan.orders()`` rows; the
    trained order green). With ``tau_low`` / ``tau_high`` columns each bar carries its interval as an error bar
    (``level``: its confidence, named on the axis) and, with a ``verdict`` column, its verdict word against the
    trained order: bars inside the noise are not ranked by their length.

    ``tau_served_wiring``: the tau of the served wiring, drawn as a line on the reorderings.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    trained = tuple(int(k) for k in trained)
    values = grid.to_numpy(dtype=float)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [3, 1.3]})
    im = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(values.shape[1]), range(values.shape[1]))
    ax.set_yticks(range(len(grid.index)), grid.index)
    ax.set_xlabel("k: the slot is fed resid[k], the other slots as trained")
    ax.set_ylabel("fc input slot (trained point)")
    for i, (k_trained, k_served) in enumerate(zip(trained, served)):
        ax.add_patch(plt.Rectangle((k_trained - 0.5, i - 0.5), 1, 1, fill=False, ec="white", lw=2.5))
        ax.add_patch(plt.Rectangle((k_served - 0.45, i - 0.45), 0.9, 0.9, fill=False, ec="red", lw=2, ls="--"))
    ax.set_title(f"tau, one slot changed (white: trained point, dashed red: what {engine} feeds)")
    middle = np.nanmean(values)
    for (i, k), value in np.ndenumerate(values):
        if value == value:   # NaN: not scored
            ax.text(k, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                    color="black" if value > middle else "white")
    chain = f" ({num_steps}-step chain)" if num_steps else ""
    fig.colorbar(im, ax=ax, label=f"tau, tokens per round{chain}")
    names = [_short(w) for w in orders.aux_resid]
    intervals = {"tau_low", "tau_high"} <= set(orders.columns)
    xerr = np.vstack([orders.tau - orders.tau_low, orders.tau_high - orders.tau]) if intervals else None
    bx.barh(names, orders.tau, xerr=xerr, capsize=3 if intervals else 0, error_kw={"ecolor": "black", "lw": 1},
            color=["tab:green" if tuple(w) == trained else "tab:grey" for w in orders.aux_resid])
    right = float((orders.tau_high if intervals else orders.tau).max())
    if "verdict" in orders.columns:   # the word from the paired difference, inside the bar (clear of the lines)
        for i, word in enumerate(orders.verdict):
            bx.text(0.03 * right, i, "as trained" if word == "reference" else word, va="center", fontsize=7,
                    color="white")
    if tau_served_wiring is not None:
        bx.axvline(tau_served_wiring, color="red", ls="--", label=f"{engine}'s wiring")
        bx.legend(loc="lower right")
    bounds = f"\nbars: {f'{level:.0%} ' if level is not None else ''}interval over prompts" if intervals else ""
    bx.set_xlabel(f"tau (tokens per round){bounds}")
    bx.set_ylabel("fc input order (resid k)")
    bx.set_title("the trained states, reordered")
    bx.set_xlim(0, 1.4 * right)
    fig.tight_layout()
    return fig


@styled
def plot_rms_halves(per_token: pd.DataFrame, labels: dict[str, str] | None = None, bins: int = 70):
    """Histograms of per-token RMS of the first layer's two halves, one panel per draft.

    ``per_token``: one column per (draft, hook), one row per token. Hooks with ``normed`` in their name
    are drawn filled (after their norm), the others outlined (raw); the embedding half (``emb`` in the
    name) in blue, the fc half in orange. ``labels``: hook -> legend text. The bins are shared, log-spaced.
    """
    import matplotlib.pyplot as plt
    import numpy as np

    labels = labels or {}
    drafts = list(dict.fromkeys(per_token.columns.get_level_values(0)))
    everything = per_token.to_numpy(dtype=float)
    everything = everything[~np.isnan(everything)]
    edges = np.logspace(np.log10(everything.min()) - 0.1, np.log10(everything.max()) + 0.1, bins)
    fig, axes = plt.subplots(1, len(drafts), figsize=(5.5 * len(drafts), 3.6), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, name in zip(axes, drafts):
        for hook in per_token[name].columns:
            normed = "normed" in hook
            ax.hist(per_token[name, hook].dropna().to_numpy(), bins=edges,
                    color="tab:blue" if "emb" in hook else "tab:orange", alpha=0.45 if normed else 1.0,
                    histtype="stepfilled" if normed else "step", lw=2, label=labels.get(hook, hook))
        ax.set_xscale("log")
        ax.set_xlabel("per-token RMS (log scale)")
        ax.set_title(name)
    axes[0].set_ylabel("tokens")
    axes[0].legend(fontsize=8)
    fig.suptitle("per-token RMS of the two halves: outlined = raw, filled = after their norms")
    fig.tight_layout()
    return fig


def _rule_label(name, nbr) -> str:
    return f"{name}\nflag {'on' if nbr else 'off'}"


@styled
def plot_residual_balance(balance: pd.DataFrame, ax=None):
    """Median per-token RMS of the residual and of attn_out, per (draft, norm_before_residual) row of
    ``balance`` (stable columns ``rms_residual``, ``rms_attn_out``), on a log scale."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 3.4))
    x = np.arange(len(balance))
    ax.bar(x - 0.2, balance["rms_residual"], 0.4, label="residual")
    ax.bar(x + 0.2, balance["rms_attn_out"], 0.4, label="attn_out")
    ax.set_xticks(x, [_rule_label(name, nbr) for name, nbr in balance.index], fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel("draft and norm_before_residual")
    ax.set_ylabel("median per-token RMS")
    ax.set_title("what attn_out is added to, with norm_before_residual off / on")
    ax.legend()
    ax.figure.tight_layout()
    return ax.figure


@styled
def plot_survival_by_rule(accept: pd.DataFrame, ax=None):
    """Survival a_k per draft position, one line per (draft, norm_before_residual) row of ``accept``
    (columns ``tau``, ``a1``..``aK``); the first draft solid, the others dashed."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.6))
    cols = [c for c in accept.columns if c[0] == "a" and c[1:].isdigit()]
    ks = [int(c[1:]) for c in cols]
    first = accept.index[0][0]
    for (name, nbr), row in accept.iterrows():
        ax.plot(ks, row[cols].to_numpy(dtype=float), marker="o", ls="-" if name == first else "--",
                label=f"{name}, norm_before_residual={nbr} (tau {row['tau']:.2f})")
    ax.set_xticks(ks)
    ax.set_ylim(0, 1)
    ax.set_xlabel("draft position k")
    ax.set_ylabel("a_k = P(at least k accepted)")
    ax.set_title("acceptance under each residual rule (trained wiring)")
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax.figure


@styled
def plot_residual_scale(sweep: pd.Series, flag_off: float, h_scale: float, draft: str, ax=None):
    """Step-1 agreement against the factor c on the (normed) residual (``sweep``: c -> agreement), with the
    flag-off agreement (raw h) and the median rms(h) marked."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.4))
    ax.plot(sweep.index, sweep.values, marker="o", label=f"{draft}, flag on, residual x c")
    ax.axhline(flag_off, color="tab:red", ls=":", label="flag off (raw h)")
    ax.axvline(h_scale, color="grey", ls="--", label=f"median rms(h) = {h_scale:.1f}")
    ax.set_xscale("log")
    ax.set_xlabel("factor c on the residual")
    ax.set_ylabel("step-1 agreement with the target")
    ax.set_title(f"{draft}: scaling the normed residual towards rms(h)")
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax.figure


@styled
def plot_chain_vs_tree(trees: pd.DataFrame, title: str = "chain vs tree, greedy", ax=None):
    """tau per setting with its interval (``trees``: one row per setting, columns ``tau``, ``tau_low``,
    ``tau_high``, ``verified`` and ``topk``, 1 for a chain): chains blue, trees green, each bar labelled with the
    tokens it verifies per round past its interval. A chart that ranks settings draws their intervals: bars
    whose intervals overlap are not ranked by their length."""
    import matplotlib.pyplot as plt

    missing = {"tau_low", "tau_high"} - set(trees.columns)
    if missing:
        raise ValueError(f"plot_chain_vs_tree: the table has no {sorted(missing)} column(s); a ranked chart needs "
                         "each setting's interval (TreeReading.bars() gives them)")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 2.8))
    ax.barh(trees.index, trees.tau, color=["tab:blue" if k == 1 else "tab:green" for k in trees.topk],
            xerr=[trees.tau - trees.tau_low, trees.tau_high - trees.tau], capsize=3, error_kw={"lw": 1})
    for i, row in enumerate(trees.itertuples()):
        ax.text(row.tau_high, i, f" {row.verified} verified", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set(xlabel="tau (tokens per verify step, 95% interval over prompts)", ylabel="setting", title=title)
    ax.set_xlim(0, float(trees.tau_high.max()) * 1.25)      # room for the labels past the intervals
    return ax.figure


@styled
def plot_wiring_search(found, device: str | None = None):
    """``search_wiring``'s answer: per slot, tau when that slot alone takes each point (white box: the best
    point; dotted: points within noise of it), beside tau with its interval for the best hypothesis and
    for the checkpoint as each engine serves it."""
    import matplotlib.pyplot as plt
    import numpy as np

    slots = found.slots
    names = list(slots["tau_by_point"].iloc[0]) if len(slots) else []
    values = np.array([[row.get(n, np.nan) for n in names] for row in slots["tau_by_point"]], dtype=float)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 1.2 + 0.9 * max(len(slots), 2)),
                                 gridspec_kw={"width_ratios": [3, 1.6]})
    if len(slots):
        im = ax.imshow(values, cmap="viridis", aspect="auto")
        short = [n.replace(" (embedding)", "").replace("resid", "").replace("final post-norm", "post-norm")
                 for n in names]
        ax.set_xticks(range(len(names)), short, rotation=90 if len(names) > 20 else 0, fontsize=7)
        ax.set_yticks(range(len(slots)), [f"slot {i}" for i in slots.index])
        for i, (best, equal) in enumerate(zip(slots["best"], slots["equivalent"])):
            for n in equal:
                ax.add_patch(plt.Rectangle((names.index(n) - 0.42, i - 0.42), 0.84, 0.84, fill=False, ec="white",
                                           lw=1, ls=":"))
            ax.add_patch(plt.Rectangle((names.index(best) - 0.5, i - 0.5), 1, 1, fill=False, ec="white", lw=2.5))
        fig.colorbar(im, ax=ax, label="tau, tokens per round (teacher-forced)")
    ax.set_xlabel("the point fed to that slot, the other slots at the best ([k] = resid[k])")
    ax.set_title("one slot changed (white box: best, dotted: within noise)")
    def short(wiring):
        return "[" + ", ".join("post-norm" if not isinstance(p, int) else str(p) for p in wiring) + "]"

    bars = [(f"best {short(found.best['wiring'])}", found.best["tau"].value, found.best["tau"].low,
             found.best["tau"].high, "tab:green")]
    for (aux, _), group in found.served.groupby(["aux", "settings"], sort=False):
        bars.append((f"{short(aux)} {'/'.join(group.index)}", group["tau"].iloc[0], group["tau_low"].iloc[0],
                     group["tau_high"].iloc[0], "tab:red"))
    labels, tau, low, high, colors = zip(*bars)
    y = np.arange(len(bars))
    bx.barh(y, tau, color=colors, xerr=[np.subtract(tau, low), np.subtract(high, tau)], capsize=3)
    bx.set_yticks(y, labels, fontsize=7)
    bx.invert_yaxis()
    bx.set_xlabel(f"tau, tokens per round ({int(found.level * 100)}% interval, prompts resampled)")
    bx.set_title("best vs as each engine serves it")
    verdict = "identified" if found.identifiable else "not identifiable as one wiring"
    fig.suptitle(f"wiring search, {found.source}" + (f", {device}" if device else "")
                 + f": {verdict} ({found.evaluations} evaluations, brute force {found.brute_force})", fontsize=10)
    fig.tight_layout()
    return fig


@styled
def plot_tracks(measures: dict, chain: str = "chain 4"):
    """:func:`analysis.tracks.measure_track` per track, side by side: tau per setting (interval over
    prompts), conditional acceptance per position of ``chain``, and the tau a slot loses when fed the
    layer next to its best."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax, bx, cx) = plt.subplots(1, 3, figsize=(14, 3.8))
    width = 0.8 / max(len(measures), 1)
    for i, (track, m) in enumerate(measures.items()):
        label = f"{track} ({m.layers} layers)"
        taus = [m.sweep.tau_interval(n) for n in m.cases]
        x = np.arange(len(taus)) + (i - (len(measures) - 1) / 2) * width
        ax.bar(x, [t.value for t in taus], width, label=label,
               yerr=[[t.value - t.low for t in taus], [t.high - t.value for t in taus]], capsize=3)
        cond = m.sweep.stats(chain).conditional
        bx.plot(range(1, len(cond) + 1), cond, marker="o", label=label)
        bx.set_xticks(range(1, len(cond) + 1))
        slots = m.slot_table()
        cx.set_xticks(range(len(slots)))
        cx.bar(np.arange(len(slots)) + (i - (len(measures) - 1) / 2) * width, slots.tau_lost_next_layer, width,
               label=label)
        cases = m.cases
    ax.set_xticks(range(len(cases)), cases)
    ax.set(ylabel="tau, tokens per round (95% interval)", title="tau per setting, real decoding")
    bx.set(xlabel="draft position k", ylabel="c_k = P(accept k | 1..k-1 accepted)", ylim=(0, 1.05),
           title=f"{chain}: conditional acceptance")
    cx.set(xlabel="fc slot", ylabel="tau lost (tokens per round)", title="a slot fed the next layer instead")
    for a in (ax, bx, cx):
        a.legend(fontsize=7)
    devices = sorted({m.device for m in measures.values()})
    fig.suptitle(f"toy vs real target, healthy drafts, on {', '.join(devices)}", fontsize=10)
    fig.tight_layout()
    return fig


@styled
def plot_tensor_diff(diff, title: str | None = None, ax=None):
    """A :class:`analysis.tensor_diff.TensorDiff` per hook point in forward order: max |a-b| and max relative
    difference on a log axis (exact agreement drawn at the floor, a shape mismatch as a red x at the top),
    the first divergence marked; the title names the two sides."""
    import matplotlib.pyplot as plt
    import numpy as np

    table = diff.table
    if ax is None:
        _, ax = plt.subplots(figsize=(max(6.5, 0.38 * len(table) + 2), 3.8))
    x = np.arange(len(table))
    values = table[["max_abs", "max_rel"]].to_numpy(dtype=float)
    seen = values[np.isfinite(values) & (values > 0)]
    floor = seen.min() / 100 if seen.size else 1e-12
    top = seen.max() * 100 if seen.size else 1.0
    for col, (label, marker) in enumerate([("max |a-b|", "o"), ("max |a-b| / (|b| + tiny)", "s")]):
        y = np.where(np.isfinite(values[:, col]), np.maximum(values[:, col], floor), np.nan)
        ax.plot(x, y, marker=marker, ms=4, lw=1, label=label)
    mismatched = table["max_abs"].isna().to_numpy()
    if mismatched.any():
        ax.scatter(x[mismatched], np.full(mismatched.sum(), top), marker="x", color="tab:red", zorder=3,
                   label="shape mismatch")
    if (values == 0).any():
        ax.axhline(floor, color="grey", lw=0.8, ls=":", label="identical (0, drawn here)")
    if diff.first_divergence is not None:
        i = int(np.flatnonzero(table["name"].to_numpy() == diff.first_divergence)[0])
        ax.axvline(i, color="tab:red", ls="--", lw=1.2, label=f"first divergence: {diff.first_divergence}")
    ax.set_yscale("log")
    ax.set_ylim(floor / 3, top * 3)
    ax.set_xticks(x, table["name"], rotation=60, ha="right", fontsize=7)
    ax.set_xlabel("hook point, forward order")
    ax.set_ylabel("difference (log scale)")
    verdict = (f"first divergence at {diff.first_divergence}" if diff.first_divergence is not None
               else "no divergence")
    ax.set_title(title or f"{diff.label_a} vs {diff.label_b}: {verdict}", fontsize=10)
    ax.legend(fontsize=7)
    ax.figure.tight_layout()
    return ax.figure


# the path one EAGLE-3 round takes, left to right (label, what it is)
EAGLE3_PATH = [("target", "the big model,\nN layers"), ("resid[a, b, c]", "3 residual\nstreams"),
               ("fc", "3H -> H"), ("dual-norm\nfirst layer", "norm(embed) | norm(fc)\n-> attention, MLP"),
               ("recurrence", "own hidden state\nfed back, steps x"), ("draft vocab\n(d2t)", "draft ids ->\ntarget ids"),
               ("verify", "one target forward\nover the drafts"), ("bonus token", "target's own next;\nround = accepted + 1")]


def plot_eagle3_diagram(ax=None):
    """The EAGLE-3 path as boxes and arrows (arXiv 2503.01840): target -> resid[k] -> fc -> the dual-norm
    first layer -> the recurrence -> draft vocabulary -> verify -> bonus token. Returns the axes."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(12, 3.4))
    n, per_row = len(EAGLE3_PATH), 4
    xy = [((i % per_row) * 3.0, 0.0 if i < per_row else -2.4) for i in range(n)]
    for i, ((name, what), (x, y)) in enumerate(zip(EAGLE3_PATH, xy)):
        colour = "#dbe9f6" if i in (0, 1, 6, 7) else "#fde3c8"       # blue: the target; orange: the draft
        ax.add_patch(plt.Rectangle((x, y), 2.2, 1.3, fc=colour, ec="black", lw=1))
        ax.text(x + 1.1, y + 0.9, name, ha="center", va="center", fontsize=10, weight="bold")
        ax.text(x + 1.1, y + 0.32, what, ha="center", va="center", fontsize=7.5)
        if i + 1 < n:
            (x2, y2) = xy[i + 1]
            start, end = ((x + 2.2, y + 0.65), (x2, y2 + 0.65)) if y2 == y else ((x + 1.1, y), (x2 + 1.1, y2 + 1.3))
            ax.annotate("", end, start, arrowprops=dict(arrowstyle="->", lw=1.3))
    ax.annotate("", (xy[4][0] + 1.5, xy[4][1] + 1.3), (xy[4][0] + 0.7, xy[4][1] + 1.3),
                arrowprops=dict(arrowstyle="->", connectionstyle="arc3,rad=-1.2", lw=1))
    ax.set_xlim(-0.3, per_row * 3.0 - 0.5)
    ax.set_ylim(-2.7, 1.6)
    ax.set_axis_off()
    ax.set_title("EAGLE-3: one speculative round (blue: the target, orange: the draft)", fontsize=10)
    return ax


def plot_resid_similarity(sim: pd.DataFrame, ax=None):
    """Cosine similarity between resid points as a heatmap on a signed scale (-1 .. 1, a diverging map
    centred at 0), so that a negative cosine (resid[0] against resid[1] on the bundled target) shows."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.5))
    im = ax.imshow(sim.values, vmin=-1, vmax=1, cmap="RdBu_r")
    ax.set_xticks(range(len(sim.columns)), sim.columns, rotation=90)
    ax.set_yticks(range(len(sim.index)), sim.index)
    ax.set_title("mean per-token cosine similarity between resid points")
    ax.figure.colorbar(im, ax=ax, label="cosine similarity (-1 .. 1)")
    return ax
