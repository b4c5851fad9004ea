"""Notebook 08's readings (eagle3lab.readings.nb08_long_context) on hand-built curves and the real engine rules:
each verdict and each change follows from the intervals and the rules' codes, and its words carry the numbers."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from eagle3lab import bundled
from eagle3lab.analysis.context_curve import (
    NOT_SERVED,
    PARTLY,
    SERVED,
    ContextCurve,
    CurveOfEngine,
    Documents,
    PositionBin,
    bins_difference,
    word_of_curve,
)
from eagle3lab.analysis.verdicts import word_of
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio
from eagle3lab.engines.context_rules import SGLANG_ENV, SGLANG_FLAG, resolve_context
from eagle3lab.readings import nb08_long_context as r
from eagle3lab.readings.numbers import fmt, signed

TARGET = {"max_position_embeddings": 2048, "rope_theta": 10000.0}


def iv(value, half=0.1):
    return Interval(value, value - half, value + half, 0.95, 4)


def pbin(lo, hi, tau, change=None, vs=None, status=SERVED):
    return PositionBin(lo, hi, 100, 4, None if tau is None else iv(tau), 1.0 if status == SERVED else 0.5, status,
                       False, False, change, None if change is None else word_of(change), vs,
                       None if vs is None else word_of(vs))


EDGES = ((0, 512), (512, 1024), (1024, 2048))


def measured(*levels, n=12, seed=1):
    """A no-limit curve measured here on ``n`` documents: each document's tau in bin i is ``levels[i]`` plus its own
    offset (sd 0.1) and noise (sd 0.05), over 200 rounds a bin; intervals, changes and words as context_curve makes
    them (bootstrap over documents, paired changes, word_of_curve)."""
    rng = np.random.default_rng(seed)
    offset, bins = 0.1 * rng.standard_normal(n), []
    for (lo, hi), level in zip(EDGES, levels):
        rounds = (200.0,) * n
        tokens = tuple(float(t) * 200 for t in level + offset + 0.05 * rng.standard_normal(n))
        b = PositionBin(lo, hi, 200 * n, n, bootstrap_ratio(tokens, rounds), 1.0, SERVED, False, False,
                        tokens=tokens, rounds=rounds)
        if bins:
            change = bins_difference(b, bins[-1])
            b = replace(b, change=change, change_word=word_of_curve(change))
        bins.append(b)
    return CurveOfEngine("reference", "no limit", None, tuple(bins))


def draft_config(**keys):
    return {"max_position_embeddings": 2048, "rope_theta": 10000.0, "rope_scaling": None, "num_hidden_layers": 1,
            **keys}


def engine_curve(engine, version, bins, **keys):
    rule = resolve_context(engine, draft_config(**keys), TARGET, version)
    return CurveOfEngine(engine, rule.label, rule, tuple(bins))


FALLING = measured(2.8, 2.4, 2.0)
HOLDING = measured(2.8, 2.8, 2.8)
RISES_AND_RETURNS = measured(1.52, 1.63, 1.52)     # notebook 08's SmolLM2 shape: up past 512, back to its level


def test_the_built_curves_carry_the_words_their_shapes_earn():
    assert [b.change_word for b in FALLING.bins[1:]] == ["loses", "loses"]
    assert [b.change_word for b in HOLDING.bins[1:]] == ["within noise", "within noise"]
    assert [b.change_word for b in RISES_AND_RETURNS.bins[1:]] == ["beats", "loses"]


@pytest.mark.parametrize("trained, verdict", [(512, r.FALLS_PAST_TRAINED), (1024, r.FALLS_PAST_TRAINED),
                                              (2048, r.FALLS_WITHIN_TRAINED), (None, r.FALLS)])
def test_a_curve_falls_past_its_trained_length_only_below_the_level_inside_it(trained, verdict):
    reading = r.read_curve(FALLING, trained)
    assert reading.first_drop.lo == 512 and reading.verdict == verdict
    words = reading.words()
    assert f"tau {fmt(FALLING.bins[0].tau)} at 0-512 and {fmt(FALLING.bins[-1].tau)} at 1k-2k" in words
    assert f"from 512 on (512-1k: {signed(FALLING.bins[1].change)} from the bin before)" in words
    changes = r.what_to_change(reading, [])
    expected = {r.FALLS_PAST_TRAINED: "RETRAIN_LONGER", r.FALLS_WITHIN_TRAINED: "NOTHING", r.FALLS:
                "NAME_TRAINED_LENGTH"}[verdict]
    assert [c.code for c in changes] == [expected]
    if verdict == r.FALLS_PAST_TRAINED:
        within = FALLING.bins[0 if trained == 512 else 1]
        past = reading.past
        assert past.within == within and past.first_loss.lo == trained and set(past.words) == {"loses"}
        # the paired difference against the level inside: its point is the difference of the two bins' points
        assert past.difference(past.first_loss).value == pytest.approx(past.first_loss.tau.value - within.tau.value)
        assert (f"past the {trained}-token sequences it was trained on it falls below its level inside them "
                f"({within.label}: {fmt(within.tau)}) beyond noise from {trained} on") in words
        assert f"{past.first_loss.label}: {signed(past.difference(past.first_loss))}" in changes[0].text


def test_a_curve_that_rises_past_its_trained_length_and_returns_to_its_level_calls_for_no_retraining():
    """The bin after the trained length beats the level inside it and the next loses to the bin before, yet stays
    within noise of that level: it came back to where the draft was, not below; retraining longer restores
    nothing."""
    reading = r.read_curve(RISES_AND_RETURNS, 512)
    assert reading.first_drop.lo == 1024 and reading.verdict == r.HOLDS_PAST_TRAINED
    assert reading.past.words == ("beats", "within noise") and reading.past.first_loss is None
    assert "past the 512-token sequences it was trained on no bin is below its level inside them" in reading.words()
    assert [c.code for c in r.what_to_change(reading, [])] == ["NOTHING"]


def test_a_curve_within_noise_holds_and_calls_for_nothing():
    reading = r.read_curve(HOLDING, 512)
    assert reading.verdict == r.HOLDS and reading.first_drop is None
    assert "no bin loses to the bin before beyond noise (it holds up to 2048 tokens)" in reading.words()
    assert [c.code for c in r.what_to_change(reading, [])] == ["NOTHING"]


def test_a_trained_length_with_no_bin_wholly_inside_it_is_not_held_against_the_curve():
    reading = r.read_curve(FALLING, 256)
    assert reading.past is None and reading.verdict == r.FALLS
    assert "no bin lies wholly inside and another wholly past the 256-token sequences" in reading.words()
    assert [c.code for c in r.what_to_change(reading, [])] == ["NAME_TRAINED_LENGTH"]


def test_a_curve_without_a_tau_is_refused():
    with pytest.raises(ValueError, match="no bin with a tau"):
        r.read_curve(CurveOfEngine("x", "x", None, (pbin(0, 512, None, status=NOT_SERVED),)), 512)


def _copy_bins(losing: bool):
    """A copy's curve: bins past a window of 16, the last partly then not served past 256."""
    vs = iv(-0.2, 0.05) if losing else iv(-0.02, 0.05)
    return [pbin(0, 16, 2.5, vs=iv(0.0, 0.0)), pbin(16, 32, 2.4, vs=vs), pbin(128, 256, 2.2, vs=vs, status=PARTLY),
            pbin(256, 512, None, status=NOT_SERVED)]


def test_vllm_before_49343_fails_past_the_limit_and_a_window_it_applies_is_removed():
    curve = engine_curve("vllm", "0.24.0", _copy_bins(losing=True), max_position_embeddings=256,
                         sliding_window=16, layer_types=["sliding_attention"])
    rule = r.read_rule(curve)
    assert rule.rule.fails_from == 256 and rule.rule.window == 16 and not rule.window_dropped
    assert [b.label for b in rule.past_window] == ["16-32", "128-256"] == [b.label for b in rule.window_losses]
    assert [b.label for b in rule.not_served] == ["128-256", "256-512"]
    words = rule.words()
    assert "requests reaching position 256 fail (128-256 partly, 256-512 not served)" in words
    assert f"16-32 {signed(iv(-0.2, 0.05))} (loses)" in words and "0-16" not in words
    changes = r.what_to_change(r.read_curve(FALLING, 512), [rule], trained_window=0)
    codes = {c.code: c for c in changes}
    assert list(codes) == ["RETRAIN_LONGER", "RAISE_MAX_POSITIONS", "REMOVE_WINDOW"]
    assert "write max_position_embeddings 2048" in codes["RAISE_MAX_POSITIONS"].text
    assert "PR #49343 (0.32.0 read with it)" in codes["RAISE_MAX_POSITIONS"].text
    assert codes["REMOVE_WINDOW"].engine == "vLLM 0.24.0"
    # a draft trained with that window keeps it; a window within noise of full attention calls for nothing
    assert "REMOVE_WINDOW" not in {c.code for c in r.what_to_change(r.read_curve(HOLDING, 512), [rule],
                                                                      trained_window=16)}
    calm = r.read_rule(engine_curve("vllm", "0.32.0", _copy_bins(losing=False), sliding_window=16,
                                    layer_types=["sliding_attention"]))
    assert [c.code for c in r.what_to_change(r.read_curve(HOLDING, 512), [calm], trained_window=0)] == ["NOTHING"]


def test_sglang_drops_a_window_and_refuses_a_shorter_draft():
    curve = engine_curve("sglang", "0.5.23", _copy_bins(losing=False), max_position_embeddings=256,
                         sliding_window=16, layer_types=["sliding_attention"])
    rule = r.read_rule(curve)
    assert rule.window_dropped and rule.rule.window is None and rule.past_window == ()
    assert "SGLang 0.5.23 drops the draft's window" in rule.words()
    assert "refuses to start while the target's context is longer than the draft's 256" in rule.words()
    trained = {c.code: c.text for c in r.what_to_change(r.read_curve(HOLDING, 512), [rule], trained_window=16)}
    assert f"launch with {SGLANG_FLAG} 16" in trained["SET_WINDOW_FLAG"]
    assert f"or launch with {SGLANG_ENV}" in trained["RAISE_MAX_POSITIONS"]
    # not trained with the window: dropping it serves the draft as trained
    assert "SET_WINDOW_FLAG" not in {c.code for c in r.what_to_change(r.read_curve(HOLDING, 512), [rule],
                                                                       trained_window=0)}


def test_a_rope_unlike_the_targets_calls_for_rope_scaling():
    curve = engine_curve("vllm", None, [pbin(0, 512, 2.0)], rope_scaling={"rope_type": "linear", "factor": 2.0})
    changes = r.what_to_change(r.read_curve(HOLDING, None), [r.read_rule(curve)])
    assert [c.code for c in changes] == ["FIX_ROPE_SCALING"] and "rotates the draft by its own RoPE" in changes[0].text


def _curve(ref: CurveOfEngine, engines: dict) -> ContextCurve:
    docs = Documents(((1,) * 2048,) * 4, "4 x 2048 tokens of test text", "code")
    return ContextCurve(ref, engines, docs, 2048, 2048, None, 3, 2048, "cpu", "float32", 0.95)


def test_the_summary_states_only_numbers_it_claims():
    import re

    copy_curve = engine_curve("vllm", "0.24.0", _copy_bins(losing=True), max_position_embeddings=256,
                              sliding_window=16, layer_types=["sliding_attention"])
    rules = [r.read_rule(copy_curve)]
    reading = r.read_curve(FALLING, 512)
    main = _curve(FALLING, {})
    text, claims = r.summary({"bundled": (main, reading, r.what_to_change(reading, []))}, rules,
                             r.what_to_change(r.read_curve(HOLDING, None), rules, trained_window=0),
                             window=16, max_positions=256)
    t = claims["tracks"]["bundled"]
    assert t["verdict"] == r.FALLS_PAST_TRAINED and t["first_drop"] == 512 and t["changes"] == ["RETRAIN_LONGER"]
    assert [b["tau"]["value"] for b in t["bins"]] == [b.tau.value for b in FALLING.bins]
    assert t["bins"][1]["change_word"] == "loses"
    assert t["past_trained"]["within"] == "0-512" and t["past_trained"]["first_loss"] == 512
    assert [b["word"] for b in t["past_trained"]["bins"]] == ["loses", "loses"]
    assert claims["rule"]["engines"]["vllm"]["fails_from"] == 256
    assert claims["rule"]["engines"]["vllm"]["window_losses"] == ["16-32", "128-256"]
    assert [c["code"] for c in claims["rule"]["changes"]] == ["RAISE_MAX_POSITIONS", "REMOVE_WINDOW"]

    def numbers(v):
        if isinstance(v, dict):
            return [x for w in v.values() for x in numbers(w)]
        if isinstance(v, list):
            return [x for w in v for x in numbers(w)]
        return [v] if isinstance(v, float) else []

    claimed = {f"{abs(x):.2f}" for x in numbers(claims)}
    stated = re.findall(r"(\d+\.\d\d)(?![.\d])", text)
    assert stated and set(stated) <= claimed | {"0.24", "0.32"}    # the two builds' release numbers


def test_limits_are_read_from_the_training_record_and_the_configs(tmp_path):
    assert r.trained_length(bundled.DRAFT_HEALTHY) == json.loads(
        (bundled.DRAFT_HEALTHY / "training.json").read_text())["config"]["seq_len"] == 512
    assert r.trained_length(tmp_path) is None
    curve = _curve(FALLING, {})
    assert [(x.position, x.source) for x in r.draft_limits(curve, 512)] == [
        (512, "training record"), (2048, "draft config.json, target config.json")]
    assert r.draft_limits(curve, None)[0].label == ("draft max_position_embeddings 2048 = target "
                                                    "max_position_embeddings 2048")


@pytest.mark.usefixtures("bundled_models")
def test_the_limited_copy_shares_the_weights_and_declares_the_limits():
    from eagle3lab.analysis.context_curve import _draft_config
    from eagle3lab.models.checkpoint import load_draft

    draft = load_draft(bundled.DRAFT_HEALTHY, target=bundled.TARGET, device="cpu")
    twin = r.limited_copy(draft, sliding_window=16, max_position_embeddings=256)
    assert twin.fc.weight.data_ptr() == draft.fc.weight.data_ptr()
    assert draft.config.max_position_embeddings == 2048 and "sliding_window" not in draft.config.extra
    seen = _draft_config(twin)
    assert (seen["max_position_embeddings"], seen["sliding_window"], seen["layer_types"]) == (
        256, 16, ["sliding_attention"])
    rule = resolve_context("vllm", seen, TARGET, "0.24.0")
    assert (rule.fails_from, rule.window, rule.window_layers) == (256, 16, (0,))


def test_the_figure_is_titled_labelled_and_marks_the_limits_it_reaches():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eagle3lab.analysis.plot_style import style_problems

    curve = _curve(FALLING, {})
    copy_curve = engine_curve("vllm", "0.24.0", [pbin(0, 512, 2.8), pbin(512, 1024, 2.4),
                                                 pbin(1024, 2048, None, status=NOT_SERVED)], max_position_embeddings=256)
    limits = r.draft_limits(curve, 512) + (r.Limit("far", 4096, "test"),)
    fig = r.plot_curves([FALLING, copy_curve], limits, num_steps=3, title=r.figure_title(curve, "bundled"))
    ax = fig.axes[0]
    assert style_problems(fig) == [] and "emulated on cpu, float32" in ax.get_title()
    assert [line.get_xdata()[0] for line in ax.lines if line.get_linestyle() == "--"] == [512, 2048]   # not 4096
    assert "past the documents: far" in ax.get_xlabel()
    assert any(t.get_text() == "vLLM 0.24.0: not served" for t in ax.get_legend().get_texts())
    plt.close(fig)


def test_a_curve_from_too_few_documents_is_unworded_and_calls_for_more():
    """Bins whose changes rest on 4 documents (context_curve.word_of_curve: fewer than MIN_DOCUMENTS) give no
    verdict, not "holds": the reading says so with the count, and the change asked for is more documents."""
    from eagle3lab.analysis.context_curve import MIN_DOCUMENTS, TOO_FEW, word_of_curve

    bins = [PositionBin(lo, hi, 100, 4, iv(t), 1.0, SERVED, False, False, None if c is None else iv(c, 0.05),
                        None if c is None else word_of_curve(iv(c, 0.05)))
            for (lo, hi), (t, c) in zip([(0, 512), (512, 1024)], [(2.8, None), (2.0, -0.8)])]
    assert bins[1].change_word == TOO_FEW          # the interval lies below 0, but on 4 documents
    reading = r.read_curve(CurveOfEngine("reference", "no limit", None, tuple(bins)), 512)
    assert reading.verdict == r.UNWORDED and reading.first_drop is None
    assert f"the curve is unworded, too few documents to word (n = 4; at least {MIN_DOCUMENTS})" in reading.words()
    assert [c.code for c in r.what_to_change(reading, [])] == ["MORE_DOCUMENTS"]


def test_the_bins_table_shows_what_a_reader_weighs_and_no_empty_column():
    """Section 2's table: tau, the change from the bin before and, past the trained length, the difference from the
    level inside it, each with its word; no column that no bin fills (the full record is curve.to_frame())."""
    reading = r.read_curve(RISES_AND_RETURNS, 512)
    table = r.bins_table(_curve(RISES_AND_RETURNS, {}), reading)
    assert list(table.columns) == ["bin", "anchors", "documents", "tau (tokens per round)",
                                   "change from the bin before", "word", "vs 0-512 (trained level)",
                                   "word vs trained level"]
    assert list(table["word vs trained level"]) == ["", "beats", "within noise"]
    assert table["vs 0-512 (trained level)"][2] == signed(reading.past.difference(RISES_AND_RETURNS.bins[2]))
    assert not table.isna().any().any() and "emulated" in table.attrs["title"]
    # without a trained length there is nothing to hold the bins against: those columns are not there
    assert "word vs trained level" not in r.bins_table(_curve(RISES_AND_RETURNS, {}), r.read_curve(RISES_AND_RETURNS,
                                                                                                     None)).columns


def test_the_engine_table_says_what_happens_to_this_draft_beside_the_rule():
    """Issue 35: a draft at the target's limit is served at every position by every engine, SGLang included, whose
    rule for a shorter draft is to refuse to start: the table says both, in separate columns, as the line under it."""
    short = dict(max_position_embeddings=256)
    engines = {"sglang-short": engine_curve("sglang", "0.5.23", _copy_bins(losing=False), **short),
               "vllm-short": engine_curve("vllm", "0.24.0", _copy_bins(losing=False), **short),
               "sglang": engine_curve("sglang", "0.5.23", [pbin(0, 512, 2.0)])}
    table = r.limits_table(_curve(FALLING, engines)).set_index("curve", append=True)
    assert list(table.columns[:2]) == ["this draft's positions", "rule for a draft shorter than the target"]
    assert "positions" not in table.columns
    rows = list(table[["this draft's positions", "rule for a draft shorter than the target"]].itertuples(index=False))
    assert rows[0] == ("refuses to start at the target's context; as launched with --context-length 256, positions "
                       "from 256 on not served", "refuses to start")
    assert rows[1] == ("requests reaching position 256 fail", "fails past it")
    assert rows[2] == (r.RUNS_AS_IT_IS, "refuses to start")
    line = r.read_rule(engines["sglang"]).words()
    assert line == f"SGLang 0.5.23 {r.RUNS_AS_IT_IS}" and rows[2][0] in line
