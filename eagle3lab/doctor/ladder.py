"""doctor's ladder: the fixes applied one at a time on one bank of target states (teacher-forced chain
acceptance), each state measured once; every fix's gain with a paired interval over prompts, and what
undoing it alone costs with every other fix kept (fixes can need each other: the trained wiring helps
little while the first-layer rule is still wrong)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, replace

import torch

from eagle3lab.doctor.findings import DoctorFinding
from eagle3lab.doctor.fixes import Fix, Measure, RunState
from eagle3lab.doctor.vocab_behaviour import crossfit_vocab, vocab_map
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio, bootstrap_ratio_difference
from eagle3lab.models.state_bank import StateBank


@dataclass
class Rung:
    """One state of the ladder: what runs (wiring, switch settings, chain length, map) and its score."""

    name: str
    wiring: tuple
    variant: dict
    num_steps: int
    d2t: torch.Tensor | None = None
    score: object = None       # decoding.evaluate.BankScore

    @property
    def tau(self) -> Interval:
        return bootstrap_ratio(*self.score.tau_sums)


def gain(before: Rung, after: Rung) -> Interval:
    return bootstrap_ratio_difference(*after.score.tau_sums, *before.score.tau_sums)


class Meter:
    """Rungs measured on one bank with the draft as the engine runs it (``view``: its embedding and RoPE
    choices; a state forces only the switches and the wiring). A state is measured once; a name only labels
    the rung."""

    def __init__(self, bank: StateBank, view):
        self.bank, self.view = bank, view
        self._scored: dict = {}

    def __call__(self, name: str, state: RunState) -> Rung:
        # the only map a state ever carries is the one read from behaviour, so "has a map" identifies it
        key = (state.fed, tuple(sorted(state.variant.items())), state.num_steps, state.d2t is not None)
        if key not in self._scored:
            self._scored[key] = self._measure(Rung(name, state.fed, dict(state.variant), state.num_steps, state.d2t))
        r = self._scored[key]
        return Rung(name, r.wiring, r.variant, r.num_steps, r.d2t, r.score)

    def _measure(self, rung: Rung) -> Rung:
        from eagle3lab.analysis.wiring_search import EVAL_BATCH
        from eagle3lab.decoding.evaluate import evaluate_on_bank

        view = self.view.rewired(**rung.variant)
        with vocab_map(view, rung.d2t) if rung.d2t is not None else contextlib.nullcontext():
            rung.score = evaluate_on_bank(self.bank, view, rung.wiring, rung.num_steps, batch_size=EVAL_BATCH)
        return rung

    def crossfit(self, state: RunState, before: Rung) -> Interval:
        """The gain of the map read from behaviour in ``state`` over ``before``, each half of the prompts
        scored with the map read from the other half (``vocab_behaviour.crossfit_vocab``)."""
        return crossfit_vocab(self.bank, self.view, {"aux": state.aux, "wiring": state.wiring,
                                                     "variant": state.variant}, before)


@dataclass
class Ladder:
    """The rungs (as launched, then each fix added) and each fix's finding, measured (``findings[i]`` is
    ``fixes[i]``'s)."""

    rungs: list[Rung]
    fixes: list[Fix]
    findings: list[DoctorFinding]


def _measured(meter: Meter, fix: Fix, rungs: tuple[Rung, Rung, Rung], all_but: RunState, every: RunState,
              steady: int) -> DoctorFinding:
    """``fix``'s finding: its gain on the ladder (``rungs``: before it, after it, the last) and the tau lost
    undoing it alone (``all_but``: every other fix; ``every``: every fix), at a chain of ``steady`` steps (a
    long chain's tau is noisy) except for the chain fix itself, measured at the final length."""
    before, after, final = rungs
    crossfit = fix.measure is Measure.CROSSFIT
    found = meter.crossfit(fix.read_from, before) if crossfit else gain(before, after)
    if fix.measure is Measure.FULL_CHAIN:
        without, everything = meter(f"all but {fix.rung}", all_but), final
        undone = gain(without, everything)
    else:
        everything = meter("every fix, steady chain", replace(every, num_steps=steady))
        without = meter(f"all but {fix.rung}, steady chain", replace(all_but, num_steps=steady))
        # the map read from the same prompts it is scored on would favour it: cross-fitted
        undone = meter.crossfit(fix.read_from, without) if crossfit else gain(without, everything)
    return fix.finding(before, after, found, undone, (without, everything))


def measure_ladder(meter: Meter, start: RunState, fixes: list[Fix], steady_floor: int) -> Ladder:
    """Apply ``fixes`` in order from ``start`` and measure each (``steady_floor``: the chain length undoing a
    fix is compared at, at most the final one)."""
    rungs = [meter("as launched", start)]
    for i, fix in enumerate(fixes):
        rungs.append(meter(fix.rung, start.changed(*(f.change for f in fixes[:i + 1]))))
    every = start.changed(*(f.change for f in fixes))
    steady = min(rungs[-1].num_steps, steady_floor)
    findings = [_measured(meter, fix, (rungs[i], rungs[i + 1], rungs[-1]),
                          start.changed(*(f.change for f in fixes if f is not fix)), every, steady)
                for i, fix in enumerate(fixes)]
    return Ladder(rungs, list(fixes), findings)
