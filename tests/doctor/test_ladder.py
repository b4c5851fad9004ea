"""One ladder (issue 34): one ``Rung``, one state, one word rule, two meters behind one interface. doctor and
notebook 06 climb it; these tests climb it with a meter given by hand, so every word is checked against the
interval that earns it."""

from __future__ import annotations

import ast
from dataclasses import replace
from pathlib import Path

import pytest

import eagle3lab
from eagle3lab.analysis.verdicts import word_of
from eagle3lab.doctor.ladder import Decoded, Meter, Rung, RunState, TeacherForced, climb, rung_word
from eagle3lab.engines.acceptance import Interval

START = RunState(True, (3, 7, 11), {"norm_before_residual": False}, 1, engine="sglang", build="0.5.23",
                 num_draft_tokens=2, ids=(2, 6, 10), checkpoint="specforge")


class ByHand(Meter):
    """tau per state wiring and rule, given; the difference of two rungs their taus' difference, with an interval
    of +-``spread`` around it."""

    def __init__(self, taus: dict, spread: float = 0.1):
        self.taus, self.spread, self.measured = taus, spread, []

    def measure(self, rungs):
        first, out = {}, []
        for r in rungs:
            if not r.state.runs:
                out.append(r)
                continue
            name = first.setdefault(r.state.key(), r.name)
            v = self.taus[r.state.fed, r.state.rule]
            out.append(replace(r, measured_as=name, tau=Interval(v, v - 0.2, v + 0.2, 0.95, 8)))
        self.measured.append(list(first.values()))
        return out

    def difference(self, a, b):
        d = a.tau.value - b.tau.value
        return Interval(d, d - self.spread, d + self.spread, 0.95, 8)


def test_climb_reads_each_rung_against_the_previous_run_rung_with_one_word_rule():
    flags = replace(START, num_steps=4, num_draft_tokens=5)
    wiring = replace(flags, ids=(-1, 2, 6), wiring=(0, 3, 7))
    same = replace(wiring, ids=(-1, 2, 6))                    # the same points fed: the same measurement
    broken = replace(same, runs=False)                       # the build cannot run it
    rule = replace(same, variant={"norm_before_residual": True})
    meter = ByHand({((3, 7, 11), False): 1.05, ((0, 3, 7), False): 1.6, ((0, 3, 7), True): 1.65})
    rungs = climb(meter, [Rung("as launched", START), Rung("flags", flags, "CAP"), Rung("wiring", wiring, "WIRING"),
                          Rung("same ids", same, "WIRING"), Rung("broken", broken, "X", "fails"),
                          Rung("rule", rule, "FIRST_LAYER_RULE")])
    assert meter.measured == [["as launched", "flags", "wiring", "rule"]]   # once per state key, in one call
    assert [r.word for r in rungs] == ["start", "within noise", "beats", "identical", "not run", "within noise"]
    assert [r.changed for r in rungs] == [(), ("flags",), ("wiring",), (), (), ("rule",)]
    assert rungs[1].measured_as == "flags" and rungs[3].measured_as == "wiring" and not rungs[4].ran
    # the word is verdicts.word_of of the paired gain against the previous RUN rung (the one not run is skipped)
    assert rungs[5].gain.value == pytest.approx(1.65 - 1.6) and rungs[5].word == word_of(rungs[5].gain)
    assert rungs[2].gain.value == pytest.approx(1.6 - 1.05) and rungs[2].gain.low > 0
    assert rung_word(rungs[4], rungs[3]) == "not run" and rung_word(rungs[0], None) == "start"
    # a teacher-forced meter times nothing: no speed, no step speed
    assert all(r.speed is None and r.step_speed is None for r in rungs)


def test_one_state_says_what_runs_and_where():
    eagle = replace(START, aux=False)          # the EAGLE algorithm: fc skipped, the final state fed past it
    assert eagle.fed == () and START.fed == (3, 7, 11) and eagle.turned(START) == ("flags",)
    assert START.chain == 1 and replace(START, num_steps=5).chain == 1 and replace(START, num_draft_tokens=None).chain == 1
    assert replace(START, num_steps=4, num_draft_tokens=None).chain == 4     # doctor's states: the chain as asked
    assert replace(START, engine="vllm", checkpoint="speculators").turned(START) == ("engine",)
    assert START.rule is False and START.key() == replace(START, ids=(9, 9, 9)).key()
    claims = START.claims()
    assert (claims["engine"], claims["fed"], claims["ids"], claims["rule"], claims["map"]) == (
        "sglang", [3, 7, 11], [2, 6, 10], False, False)


def test_both_meters_stand_behind_one_interface():
    assert issubclass(TeacherForced, Meter) and issubclass(Decoded, Meter)
    rung = Rung("r", START)
    assert (rung.wiring, rung.variant, rung.num_steps, rung.d2t) == ((3, 7, 11), START.variant, 1, None)


def test_one_rung_class_in_the_package():
    package = Path(eagle3lab.__file__).parent
    rungs = [f"{p.relative_to(package)}" for p in package.rglob("*.py")
             for n in ast.walk(ast.parse(p.read_text())) if isinstance(n, ast.ClassDef) and n.name == "Rung"]
    assert rungs == ["doctor/ladder.py"]
