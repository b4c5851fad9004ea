"""Notebook 06's words on rungs built here: the word shown for a rung that shares the rung before's measurement."""

from eagle3lab.doctor.fixes import RunState
from eagle3lab.doctor.ladder import Rung
from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings.nb06_case_file import CaseLadder, shown


def _iv(value, low, high):
    return Interval(value, low, high, 0.95, 4)


def _rung(name, word, gain, step):
    state = RunState(True, (0, 3, 7), {"norm_before_residual": False}, 4, engine="sglang", num_draft_tokens=5)
    return Rung(name, state, "WIRING", "note", measured_as=name if word != "no change" else "a", tau=_iv(2.0, 1.8, 2.2),
                changed=("ids",), gain=gain, word=word, e2e_tps=10.0, speed=_iv(1.2, 1.1, 1.3), step_speed=step)


def test_a_shared_measurement_reads_identical_as_any_degenerate_interval():
    rungs = [_rung("a", "start", None, None), _rung("b", "no change", _iv(0, 0, 0), _iv(1, 1, 1)),
             _rung("c", "identical", _iv(0, 0, 0), _iv(1.05, 0.9, 1.2))]
    ladder = CaseLadder(rungs, None, 2, "cpu", "float32")
    assert ladder.tau_table()["verdict"].tolist() == ["start", "identical", "identical"]
    assert ladder.speed_table()["vs rung before"].tolist() == ["", "identical", "within noise"]
    assert ladder.step_speed_word(rungs[1]) == "the same decoding as the rung before"
    assert shown("no change") == "identical" and shown("beats") == "beats" and shown(None) is None
    assert "no change" not in ladder.plot().axes[0].get_title()
