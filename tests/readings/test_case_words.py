"""Notebook 06's words on rungs built here: the word shown for a rung that shares the rung before's measurement."""

from types import SimpleNamespace

import pandas as pd

from eagle3lab.doctor.fixes import RunState
from eagle3lab.doctor.ladder import Rung
from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings.nb06_case_file import (
    TAU_LABELS,
    CaseLadder,
    candidates_table,
    lifted_cap_words,
    speed_labels,
)


def _iv(value, low, high):
    return Interval(value, low, high, 0.95, 4)


def _rung(name, word, gain, step):
    state = RunState(True, (0, 3, 7), {"norm_before_residual": False}, 4, engine="sglang", num_draft_tokens=5)
    return Rung(name, state, "WIRING", "note", measured_as=name if step is None or step.value != 1 else "a", tau=_iv(2.0, 1.8, 2.2),
                changed=("ids",), gain=gain, word=word, e2e_tps=10.0, speed=_iv(1.2, 1.1, 1.3), step_speed=step)


def test_a_shared_measurement_reads_identical_as_any_degenerate_interval():
    rungs = [_rung("a", "start", None, None), _rung("b", "identical", _iv(0, 0, 0), _iv(1, 1, 1)),
             _rung("c", "identical", _iv(0, 0, 0), _iv(1.05, 0.9, 1.2))]
    ladder = CaseLadder(rungs, None, 2, "cpu", "float32")
    assert ladder.tau_frame()["verdict"].tolist() == ["start", "identical", "identical"]
    assert ladder.speed_frame()["step_verdict"].tolist() == ["", "identical", "within noise"]
    assert ladder.step_speed_word(rungs[1]) == "the same decoding as the rung before"
    assert "grey: within noise or identical" in ladder.plot().axes[0].get_title()


class _Draft:
    settings = SimpleNamespace(norm_before_residual=False)

    def variants(self):
        return [{"norm_before_residual": (False, True)}]


class _Scorer:
    """Answers as wiring_search.Scorer does: a score whose stats hold c_k and the rounds behind each."""

    draft = _Draft()

    def __init__(self, stats):
        self.stats, self.asked = stats, []

    def __call__(self, wiring, variant):
        self.asked.append((wiring, variant["norm_before_residual"]))
        return SimpleNamespace(stats=self.stats[(wiring, variant["norm_before_residual"])])


def test_step_3_prints_each_rate_of_one_or_zero_with_its_count():
    search = pd.DataFrame({"wiring": ["a", "b"], "aux_resid": [(0, 3, 7), (1, 4, 8)], "norm_before_residual": [True, False],
                           "tau": [3.8251, 1.2], "c1": [0.9, 0.2], "c2": [1.0, 0.0]})
    stats = {((0, 3, 7), True): SimpleNamespace(conditional=[0.9, 1.0], accepted_per_pos=[9, 1], reached_per_pos=[10, 1]),
             ((1, 4, 8), False): SimpleNamespace(conditional=[0.2, 0.0], accepted_per_pos=[2, 0], reached_per_pos=[10, 2])}
    score = _Scorer(stats)
    table = candidates_table(search, score)
    assert table["c1"].tolist() == ["0.900", "0.200"] and table["c2"].tolist() == ["1.000 (1/1)", "0.000 (0/2)"]
    assert table["tau"].tolist() == [3.825, 1.2] and score.asked == [((0, 3, 7), True), ((1, 4, 8), False)]


def test_step_3s_tau_is_placed_as_the_trainer_table_places_it():
    last = _rung("c", "identical", _iv(0, 0, 0), _iv(1, 1, 1))
    last.tau = _iv(2.964, 2.6, 3.3)
    trainer = {"agree": [0.9, 0.8], "tau_est": 3.128, "tau_implied": 3.033}
    ladder = CaseLadder([last], None, 2, "cpu", "float32", trainer)
    above = (_iv(3.825, 3.41, 4.23), "the as-trained set")
    words = ladder.trainer_words(above)
    table = ladder.trainer_table(above)
    assert table["against the last rung's interval"].iloc[2] == "above"
    assert "3.825, is above both the trainer's (3.128 and 3.033) and above the last rung's interval" in words
    assert "is between the trainer's" in ladder.trainer_words((_iv(3.1, 2.9, 3.3), "x"))
    assert "is below both the trainer's" in ladder.trainer_words((_iv(2.9, 2.7, 3.1), "x"))
    assert "inside the last rung's interval" in ladder.trainer_words((_iv(2.9, 2.7, 3.1), "x"))


def test_the_tau_table_is_the_stable_frame_relabelled_to_fit_a_screen():
    """Issue 35: the frame keeps stable column names; the table shown puts the change and its finding in one column
    (a finding's code does not wrap) and wraps every label (no unbroken label widens a column past 1,400 pixels)."""
    rungs = [_rung("a", "start", None, None), _rung("b", "beats", _iv(0.2, 0.1, 0.3), _iv(1.1, 1.0, 1.2))]
    ladder = CaseLadder(rungs, None, 2, "cpu", "float32")
    frame, shown = ladder.tau_frame(), ladder.tau_table()
    assert list(frame.columns) == ["changes", "finding", "engine", "checkpoint", "chain", "ids", "feeds",
                                   "norm_before_residual", "tau", "tau_change", "verdict", "note"]
    assert list(shown.columns) == [TAU_LABELS[c] for c in frame.columns if c != "finding"]
    assert shown["changes (finding)"].tolist() == ["ids (WIRING)"] * 2 and "norm before residual" in shown.columns
    assert shown["tau (95%)"].tolist() == frame["tau"].tolist() and frame["tau_change"].tolist() == ["", "+0.200 [+0.100, +0.300]"]
    assert all(len(word) <= 10 for label in TAU_LABELS.values() for word in label.split())


def test_the_speed_table_is_the_stable_frame_relabelled_for_display():
    """Issue 34: the speed frame keeps stable column names; only the table shown carries the labels, which name the
    speed kind of the ratios (end to end or decode)."""
    rungs = [_rung("a", "start", None, None), _rung("b", "beats", _iv(0.2, 0.1, 0.3), _iv(1.1, 1.0, 1.2)),
             _rung("c", "beats", _iv(0.2, 0.1, 0.3), None)]
    rungs[2].speed = None                      # a rung not timed has no row
    ladder = CaseLadder(rungs, None, 2, "cpu", "float32", speed_kind="decode")
    frame, shown = ladder.speed_frame(), ladder.speed_table()
    assert list(frame.index) == ["1. a", "2. b"]
    assert list(frame.columns) == ["e2e_tps", "speed_ratio", "speed_verdict", "step_ratio", "step_verdict", "identical"]
    assert frame["e2e_tps"].tolist() == [10.0, 10.0] and frame["speed_ratio"].tolist() == ["1.20x [1.10, 1.30]"] * 2
    assert frame["speed_verdict"].tolist() == ["faster", "faster"]
    assert frame["step_ratio"].tolist() == ["", "1.10x [1.00, 1.20]"] and frame["step_verdict"].tolist() == ["", "within noise"]
    assert list(shown.columns) == [speed_labels("decode")[c] for c in frame.columns]
    assert "x no speculation (decode, 95%)" in shown.columns and "x rung before (decode, 95%)" in shown.columns
    assert shown.to_numpy().tolist() == frame.to_numpy().tolist()
    assert "x no speculation (end to end, 95%)" in CaseLadder(rungs, None, 2, "cpu", "float32").speed_table().columns
    assert CaseLadder(rungs[2:], None, 2, "cpu", "float32").speed_table().empty


def _flags_rung(fed, step):
    state = RunState(True, fed, {"norm_before_residual": False}, 15, engine="sglang", num_draft_tokens=16)
    return Rung("cap lifted", state, "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED", "note", measured_as="cap lifted",
                tau=_iv(1.1, 1.0, 1.2), changed=("flags",), gain=_iv(0.03, 0.0, 0.08), word="within noise",
                e2e_tps=5.0, speed=_iv(0.3, 0.2, 0.4), step_speed=step)


def test_the_rung_that_lifts_the_cap_is_set_beside_the_seeds_record():
    """The first timed rung that changes the flags, in the record's words; the reason (drafts rarely accepted while
    fed other states than the trained ones) only where its numbers and its states say so."""
    first, trained = _rung("a", "start", None, None), _rung("z", "beats", _iv(1, 0.5, 1.5), _iv(2, 1.5, 2.5))
    slower = CaseLadder([first, _flags_rung((3, 7, 11), _iv(0.48, 0.46, 0.49)), trained], None, 2, "cpu", "float32")
    words = lifted_cap_words(slower)
    assert words.startswith("The ladder's rung 2 (cap lifted) takes the same step on the bundled case: tau changes by "
                            "+0.030 [+0.000, +0.080] (within noise of the rung before) and the speed (end to end) is "
                            "0.48x [0.46, 0.49] the rung before's (slower), as in the seed's record")
    assert "fed [resid[3], resid[7], resid[11]], not the [resid[0] (embedding), resid[3], resid[7]]" in words
    fed_right = CaseLadder([first, _flags_rung((0, 3, 7), _iv(0.48, 0.46, 0.49)), trained], None, 2, "cpu", "float32")
    faster = CaseLadder([first, _flags_rung((3, 7, 11), _iv(1.3, 1.1, 1.5)), trained], None, 2, "cpu", "float32")
    for ladder in (fed_right, faster):
        assert "as in the seed's record" not in lifted_cap_words(ladder) and lifted_cap_words(ladder).endswith(").")
    assert lifted_cap_words(None) == "" and lifted_cap_words(CaseLadder([first], None, 2, "cpu", "float32")) == ""
