"""The analysis layer's figures (break-even, speedup against draft cost, acceptance per position)."""

from __future__ import annotations

import pandas as pd

from eagle3lab.engines.acceptance import AcceptanceStats


def plot_break_even(table: pd.DataFrame, ax=None):
    """Each case's tau against its break-even tau (round cost): above the diagonal, speculation wins."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.5))
    top = max(table["tau"].max(), table["break_even_tau"].max()) * 1.1
    ax.plot([1, top], [1, top], color="grey", lw=0.8, ls="--")
    ax.fill_between([1, top], [1, top], [top, top], color="tab:green", alpha=0.08)
    for name, row in table.iterrows():
        ax.scatter(row["break_even_tau"], row["tau"])
        ax.annotate(f"{name} ({row['projected_speedup']:.2f}x)", (row["break_even_tau"], row["tau"]), fontsize=7,
                    xytext=(4, 2), textcoords="offset points")
    ax.set_xlabel("round cost in target steps (= break-even tau)")
    ax.set_ylabel("tau (tokens per round)")
    ax.set_title("speculation pays above the diagonal")
    return ax.figure


def plot_speedup_vs_c(table: pd.DataFrame, ax=None, c_max: float | None = None):
    """Speedup against the draft cost c, one curve per case, with the measured points on them.

    ``table``: rows of :meth:`DecodeSweep.projection`. Solid: this cost model, tau / (K c + v(M)) with
    the measured tau and verify cost; dotted: Leviathan et al.'s model with the same tau, verification
    free (v = 1). Hollow marker: the projection at the measured c; filled: the measured speedup.
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
    ax.set_title("speedup vs draft cost: above the dashed line speculation pays")
    return ax.figure


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


def plot_here_and_served(where: pd.DataFrame, ax=None):
    """``eagle3lab.analysis.roofline.here_and_served`` on one break-even plot: each case's tau against its
    break-even here and on every served setting (the speedup shown is tau / round cost)."""
    rows = []
    for name, row in where.iterrows():
        for col in [c for c in where.columns if c.startswith("break-even ")]:
            be = row[col]
            rows.append({"case": f"{name} | {col.removeprefix('break-even ')}", "tau": row["tau"],
                         "break_even_tau": be, "projected_speedup": row["tau"] / be})
    return plot_break_even(pd.DataFrame(rows).set_index("case"), ax=ax)
