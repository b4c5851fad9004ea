"""One track's compact measurement (analysis.tracks) on the bundled target and healthy draft."""

from __future__ import annotations

import json

import pytest

from eagle3lab import bundled
from eagle3lab.analysis.benchmark import finite_json
from eagle3lab.analysis.plots import plot_tracks
from eagle3lab.analysis.tracks import TRACK_CASES, measure_track, side_by_side
from eagle3lab.analysis.verdicts import speed_word
from eagle3lab.models.checkpoint import load_draft
from eagle3lab.models.target import load_target

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def measured(bundled_models):
    target = load_target(bundled.TARGET, device="cpu")
    draft = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    return measure_track(target, draft, bundled.load_prompts(n=3, length="short"), max_new_tokens=16, cost_repeats=1)


def test_measure_track_decodes_losslessly_and_searches_the_wiring(measured):
    m = measured
    assert m.cases == list(TRACK_CASES) and m.layers == 12
    assert all(m.sweep.identical(name) == 3 for name in m.cases)
    assert m.c > 0 and m.search.evaluations > 0
    assert len(m.search.best["wiring"]) == len(m.search.slots) == 3     # the healthy draft's three aux slots


def test_slot_table_reads_the_neighbouring_layers_from_the_search(measured):
    table = measured.slot_table()
    assert list(table.index) == list(measured.search.slots.index)
    for slot, row in measured.search.slots.iterrows():
        layers = [n for n in row.tau_by_point if n.startswith("resid")]
        assert 1 <= table.loc[slot, "within_noise"] <= measured.layers + 2
        assert table.loc[slot, "tau_lost_worst"] == pytest.approx(row.tau_drop)
        if row.best in layers:   # by hand: best minus the mean of the layers on either side that exist
            i = layers.index(row.best)
            near = [row.tau_by_point[layers[j]] for j in (i - 1, i + 1) if 0 <= j < len(layers)]
            assert table.loc[slot, "tau_lost_next_layer"] == pytest.approx(row.tau_best - sum(near) / len(near))
        assert table.loc[slot, "tau_lost_next_layer"] <= table.loc[slot, "tau_lost_worst"] + 1e-9


def test_side_by_side_json_and_plot(measured):
    df = side_by_side({"a": measured, "b": measured})
    assert list(df.columns) == ["a", "b"] and df.loc["target", "a"] == "12 layers, hidden 192"
    tau = measured.sweep.tau_interval("chain 2")
    assert df.loc["chain 2: tau [95%]", "a"] == f"{tau.value:.2f} [{tau.low:.2f}, {tau.high:.2f}]"
    record = json.loads(json.dumps(finite_json(measured.to_json())))
    assert record["cases"]["tree 5/4/8"]["identical"] == 3 and len(record["search"]["slots"]) == 3
    fig = plot_tracks({"a": measured})
    assert len(fig.axes) == 3 and "cpu" in fig._suptitle.get_text()



def test_the_recorded_speed_over_generate_is_the_pooled_interval_whole(measured):
    """to_json's ``vs_generate`` is the paired interval over prompts (every repetition pooled) with its own point,
    not a ratio of per-repetition medians beside an interval it may lie outside."""
    record = json.loads(json.dumps(finite_json(measured.to_json())))
    for name in measured.cases:
        r = measured.sweep.speed_ratio(name, "generate", kind="e2e")
        g = record["cases"][name]["vs_generate"]
        assert g == {"value": r.value, "low": r.low, "high": r.high, "level": r.level, "units": r.units,
                     "word": speed_word(r)}, name
        assert g["low"] <= g["value"] <= g["high"] and g["units"] == 3, name
        assert "vs_generate_interval" not in record["cases"][name]
