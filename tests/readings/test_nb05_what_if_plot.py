"""Notebook 05's what-if chart (WhatIf.plot_table with WhatIf.series): stable column names, display labels only in
the legend."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402

from eagle3lab.analysis.plots import plot_here_and_served  # noqa: E402
from eagle3lab.engines.acceptance import Interval  # noqa: E402
from eagle3lab.readings import nb05_acceptance_rates as reading  # noqa: E402


def what_if(name: str, tau: tuple, speed: tuple) -> reading.WhatIf:
    row = reading.SpeedRow(name, Interval(*tau, 0.95, 8), Interval(*speed, 0.95, 8), 1.64, 0.66, 0.08, 0.58, 2, 1,
                           "SGLang")
    return reading.WhatIf(name, row, reading.ServedCosts(48, 1.35, 1.52, 1.32), {})


def test_what_if_plot_table_has_stable_columns_and_the_series_label_them():
    launched, half = what_if("as launched", (1.08, 1.05, 1.11), (0.70, 0.66, 0.74)), what_if("half", (1.4, 1.3, 1.5),
                                                                                             (1.0, 0.9, 1.1))
    table = pd.concat([launched.plot_table(), half.plot_table()])
    assert list(table.columns) == ["tau", "tau_low", "tau_high", "paid_cost", "paid_cost_low", "paid_cost_high",
                                   "served_at_one", "served_at_batch", "served_overlapped"]
    paid = launched.row.paid_cost
    assert list(table.loc["as launched", ["paid_cost", "paid_cost_low", "paid_cost_high"]]) == [paid.value, paid.low,
                                                                                             paid.high]
    assert list(table.loc["half", ["served_at_one", "served_at_batch", "served_overlapped"]]) == [1.35, 1.52, 1.32]
    series = launched.series()
    assert [s.label for s in series] == ["here, measured", "served, batch 1, projected", "served, batch 48, projected",
                                         "served, batch 48, overlap on, projected"]
    assert [s.measured for s in series] == [True, False, False, False]
    assert {s.column for s in series} | {"paid_cost_low", "paid_cost_high"} <= set(table.columns)
    ax = plot_here_and_served(table, series).axes[0]
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == sorted(
        [s.label for s in series] + ["tau (tokens per round)"])
    assert [t.get_text() for t in ax.get_yticklabels()] == ["as launched", "half"]
