"""Notebook 06's words on rungs built here: the word shown for a rung that shares the rung before's measurement."""

from types import SimpleNamespace

import pandas as pd

from eagle3lab.doctor.fixes import RunState
from eagle3lab.doctor.ladder import Rung
from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings.nb06_case_file import CaseLadder, candidates_table


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
    assert ladder.tau_table()["verdict"].tolist() == ["start", "identical", "identical"]
    assert ladder.speed_table()["vs rung before"].tolist() == ["", "identical", "within noise"]
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
