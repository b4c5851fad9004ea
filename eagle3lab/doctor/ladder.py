"""The ladder: one configuration changed one knob a rung, every rung measured, each change read from a paired
interval. doctor and notebook 06 climb this one.

A rung (:class:`Rung`) is a ``fixes.RunState`` (what runs: engine, build, flags, ids and the points they feed,
the first-layer rule, the map, the checkpoint format), named, with the finding that motivated it and what the
build does with it. A :class:`Meter` measures rungs; two stand behind one interface:

- :class:`TeacherForced`: chain acceptance on one ``StateBank`` (a live target's states or a cluster's dump), each
  distinct state scored once; tau with a bootstrap interval over the bank's prompts. doctor's.
- :class:`Decoded`: every distinct runnable state decoded in ONE interleaved ``analysis.benchmark.decode_sweep``
  (the machine's noise hits all rungs alike), timed, and checked token for token against ``generate``.

:func:`climb` measures the rungs and reads each against the previous run rung with one word rule
(:func:`rung_word`: ``verdicts.word_of`` of the paired tau difference). doctor's fixes (``measure_ladder``) add
what undoing each costs with every other fix kept (fixes can need each other: the trained wiring helps little
while the first-layer rule is still wrong).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, replace

from eagle3lab.analysis.verdicts import speed_word, word_of
from eagle3lab.doctor.fixes import KNOBS, Fix, Measure, RunState
from eagle3lab.doctor.vocab_behaviour import crossfit_vocab, vocab_map
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio, bootstrap_ratio_difference
from eagle3lab.engines.layer_ids import resid_label
from eagle3lab.findings import Finding
from eagle3lab.models.state_bank import StateBank

__all__ = ["KNOBS", "Decoded", "Ladder", "Meter", "Rung", "RunState", "TeacherForced", "climb", "gain",
           "measure_ladder", "rung_word"]


@dataclass
class Rung:
    """One rung: its name, what it runs (``state``), the finding that motivated its change (a code) and what the
    build does with it (``note``), the draft it runs (None: the meter's own); then what its meter measured and
    what :func:`climb` read against the previous run rung."""

    name: str
    state: RunState
    finding: str = ""
    note: str = ""
    draft: object = field(default=None, repr=False)
    measured_as: str | None = None   # the rung whose measurement this one shares (one state key); None: not run
    tau: Interval | None = None
    score: object = None             # teacher-forced: its decoding.evaluate.BankScore
    changed: tuple[str, ...] = ()    # the knobs turned since the previous runnable rung (fixes.KNOBS)
    gain: Interval | None = None     # tau minus the previous run rung's, paired over prompts
    word: str = ""                   # start / beats / within noise / loses / identical / not run
    e2e_tps: float = float("nan")    # decoded: the sweep's median end-to-end tokens/s
    speed: Interval | None = None    # decoded: rate over no speculation, paired over prompts (repeats summed)
    step_speed: Interval | None = None   # decoded: rate over the previous run rung's, paired the same way
    identical: tuple[int, int] | None = None   # decoded: (prompts token-identical to generate, prompts)

    # what runs, as doctor's report and write_fixed read it
    @property
    def wiring(self) -> tuple:
        return self.state.fed

    @property
    def variant(self) -> dict:
        return self.state.variant

    @property
    def num_steps(self) -> int:
        return self.state.num_steps

    @property
    def d2t(self):
        return self.state.d2t

    @property
    def ran(self) -> bool:
        return self.measured_as is not None

    @property
    def speedup(self) -> float:
        return float("nan") if self.speed is None else self.speed.value

    @property
    def speed_verdict(self) -> str | None:
        """faster / slower / within noise of no speculation (the whole interval); None when not timed."""
        return None if self.speed is None else speed_word(self.speed)

    @property
    def step_verdict(self) -> str | None:
        """The same against the previous run rung; "identical" when this rung shares its measurement (1x [1, 1])."""
        if self.step_speed is None:
            return None
        s = self.step_speed
        return "identical" if s.value == s.low == s.high == 1.0 else speed_word(s)

    def change_text(self) -> str:
        return ", ".join(self.changed) or "nothing"


def rung_word(rung: Rung, before: Rung | None) -> str:
    """The one word rule: "not run", "start" (the first run rung), "identical" (no knob turned, or the same
    measurement: verdicts.word_of's word for 0 [0, 0]), else ``verdicts.word_of`` the paired gain: beats / within
    noise / loses."""
    if not rung.ran:
        return "not run"
    if before is None:
        return "start"
    if same_measurement(rung, before):
        return "identical"
    return word_of(rung.gain)


def same_measurement(rung: Rung, before: Rung | None) -> bool:
    """``rung`` repeats ``before``'s (the previous run rung's) measurement: no knob turned, or the same state."""
    return before is not None and (not rung.changed or before.measured_as == rung.measured_as)


class Meter:
    """What measures rungs. ``measure`` returns the rungs with ``measured_as`` and ``tau`` set (a rung it cannot
    run: ``measured_as`` None, its note saying why); ``difference`` and ``step_speed`` pair two measured rungs over
    the same prompts (``step_speed``: None for a meter that times nothing)."""

    def measure(self, rungs: list[Rung]) -> list[Rung]:
        raise NotImplementedError

    def difference(self, a: Rung, b: Rung) -> Interval:
        raise NotImplementedError

    def step_speed(self, a: Rung, b: Rung) -> Interval | None:
        return None

    def __call__(self, name: str, state: RunState) -> Rung:
        """One state, measured as a rung named ``name``."""
        return self.measure([Rung(name, state)])[0]


def _shared(rungs: list[Rung], runnable) -> tuple[list[Rung], dict]:
    """Each rung with ``measured_as`` set to the first runnable rung of its state key (None when ``runnable``
    says it cannot run, with a reason that replaces it: ``(runs, note)``), and key -> that rung's name."""
    first, out = {}, []
    for r in rungs:
        runs, note = runnable(r)
        if not runs:
            out.append(replace(r, state=replace(r.state, runs=False), note=note, measured_as=None))
            continue
        name = first.setdefault(r.state.key(), r.name)
        out.append(replace(r, measured_as=name))
    return out, first


class TeacherForced(Meter):
    """Rungs scored teacher-forced on one bank: chain acceptance over ``state.chain`` steps, fed ``state.fed``,
    by the rung's draft as its engine runs it (``draft.under(state.engine)``), else by ``view`` (the draft as the
    engine runs it) with the state's switches forced and its map swapped in. Each state key is scored once,
    across calls. ``scored_on``: what the bank is, for the note of a rung fed a point it does not hold."""

    def __init__(self, bank: StateBank, view=None, *, batch_size: int | None = None, scored_on: str = ""):
        from eagle3lab.analysis.wiring_search import EVAL_BATCH

        self.bank, self.view, self.scored_on = bank, view, scored_on
        self.batch_size = batch_size or EVAL_BATCH
        self._scored: dict = {}     # state key -> (the first rung's name, its BankScore)

    def measure(self, rungs: list[Rung]) -> list[Rung]:
        def runnable(r: Rung) -> tuple[bool, str]:
            missing = [k for k in r.state.fed if k not in self.bank.points]
            if r.state.runs and missing:
                return False, f"the bank ({self.scored_on}) holds no {resid_label(missing)}; {r.note}"
            return r.state.runs, r.note

        out, _ = _shared(rungs, runnable)
        for r in out:
            if r.ran:
                key = r.state.key()
                if key not in self._scored:
                    self._scored[key] = (r.name, self._score(r))
                r.measured_as, r.score = self._scored[key]
                r.tau = bootstrap_ratio(*r.score.tau_sums)
        return out

    def _score(self, rung: Rung):
        from eagle3lab.decoding.evaluate import evaluate_on_bank

        state = rung.state
        if rung.draft is None:
            view = self.view.rewired(**state.variant)
        else:
            view = rung.draft.under(state.engine) if state.engine is not None else rung.draft
            if view.num_target_layers is None:
                view = view.bound(num_target_layers=self.bank.num_layers)
        with vocab_map(view, state.d2t) if state.d2t is not None else contextlib.nullcontext():
            return evaluate_on_bank(self.bank, view, state.fed, state.chain, batch_size=self.batch_size)

    def difference(self, a: Rung, b: Rung) -> Interval:
        return bootstrap_ratio_difference(*a.score.tau_sums, *b.score.tau_sums)

    def crossfit(self, state: RunState, before: Rung) -> Interval:
        """The gain of the map read from behaviour in ``state`` over ``before``, each half of the prompts
        scored with the map read from the other half (``vocab_behaviour.crossfit_vocab``)."""
        return crossfit_vocab(self.bank, self.view, {"aux": state.aux, "wiring": state.wiring,
                                                     "variant": state.variant}, before)


# What each rate a decoded ladder compares counts (decode_sweep's units), worded once for every notebook that says it.
SPEED_KINDS = {"e2e": "end to end (prefill included: every new token over prefill plus decoding)",
               "decode": "decode (tokens after the first over decoding time, the prefill not timed)"}


class Decoded(Meter):
    """Rungs decoded from ``prompts`` by ``target`` in one interleaved ``decode_sweep`` (one case per runnable
    state key: the rung's draft under ``state.engine``, a chain of ``num_steps``, topk 1, ``num_draft_tokens``
    verified), each timed ``repeats`` times: tau paired over prompts; speed (``speed_kind`` rates, end to end by
    default: prefill included, as ``generate`` is timed) paired over prompts, each prompt's repetitions summed."""

    def __init__(self, target, prompts, *, max_new_tokens: int, repeats: int, speed_kind: str = "e2e",
                 progress: bool = False):
        self.target, self.prompts, self.max_new_tokens = target, prompts, max_new_tokens
        self.repeats, self.speed_kind, self.progress = repeats, speed_kind, progress
        self.sweep = None

    def measure(self, rungs: list[Rung]) -> list[Rung]:
        from eagle3lab.analysis.benchmark import decode_sweep

        out, first = _shared(rungs, lambda r: (r.state.runs, r.note))
        by_name = {r.name: r for r in out}
        cases = {name: dict(draft=by_name[name].draft, num_steps=by_name[name].state.num_steps, topk=1,
                            num_draft_tokens=by_name[name].state.num_draft_tokens, profile=by_name[name].state.engine)
                 for name in first.values()}
        sweep = self.sweep = decode_sweep(self.target, cases, self.prompts, max_new_tokens=self.max_new_tokens,
                                          repeats=self.repeats, progress=self.progress)
        for r in out:
            if r.ran:
                r.tau = sweep.tau_interval(r.measured_as)
                r.e2e_tps = sweep.e2e_tps[r.measured_as]
                r.speed = sweep.speed_ratio(r.measured_as, kind=self.speed_kind)
                r.identical = (sweep.identical(r.measured_as), len(sweep.reference))
        return out

    def difference(self, a: Rung, b: Rung) -> Interval:
        return self.sweep.tau_difference(a.measured_as, b.measured_as)

    def step_speed(self, a: Rung, b: Rung) -> Interval:
        return self.sweep.speed_ratio(a.measured_as, b.measured_as, kind=self.speed_kind)


def climb(meter: Meter, rungs: list[Rung]) -> list[Rung]:
    """Measure ``rungs`` with ``meter``; read each against the previous run rung: the knobs turned since the
    previous runnable state, the paired tau gain (and speed, where timed) and its word (:func:`rung_word`)."""
    measured = meter.measure(rungs)
    before_state, before = None, None
    for r in measured:
        r.changed = () if before_state is None else r.state.turned(before_state)
        if r.ran and before is not None:
            r.gain, r.step_speed = meter.difference(r, before), meter.step_speed(r, before)
        r.word = rung_word(r, before)
        before = r if r.ran else before
        before_state = r.state if r.state.runs else before_state
    return measured


def gain(meter: Meter, before: Rung, after: Rung) -> Interval:
    """tau after minus before, paired over prompts."""
    return meter.difference(after, before)


# ------------------------------------------------------------------ doctor's fixes on the ladder


@dataclass
class Ladder:
    """The rungs (as launched, then each fix added) and each fix's finding, measured (``findings[i]`` is
    ``fixes[i]``'s)."""

    rungs: list[Rung]
    fixes: list[Fix]
    findings: list[Finding]


def _measured(meter: TeacherForced, fix: Fix, rungs: tuple[Rung, Rung, Rung], all_but: RunState,
              every: RunState, steady: int) -> Finding:
    """``fix``'s finding: its gain on the ladder (``rungs``: before it, after it, the last) and the tau lost
    undoing it alone (``all_but``: every other fix; ``every``: every fix), at a chain of ``steady`` steps (a
    long chain's tau is noisy) except for the chain fix itself, measured at the final length."""
    before, after, final = rungs
    crossfit = fix.measure is Measure.CROSSFIT
    found = meter.crossfit(fix.read_from, before) if crossfit else gain(meter, before, after)
    if fix.measure is Measure.FULL_CHAIN:
        without, everything = meter(f"all but {fix.rung}", all_but), final
        undone = gain(meter, without, everything)
    else:
        everything = meter("every fix, steady chain", replace(every, num_steps=steady))
        without = meter(f"all but {fix.rung}, steady chain", replace(all_but, num_steps=steady))
        # the map read from the same prompts it is scored on would favour it: cross-fitted
        undone = meter.crossfit(fix.read_from, without) if crossfit else gain(meter, without, everything)
    return fix.finding(before, after, found, undone, (without, everything))


def measure_ladder(meter: TeacherForced, start: RunState, fixes: list[Fix], steady_floor: int) -> Ladder:
    """Climb from ``start`` adding ``fixes`` one a rung, and measure each fix (``steady_floor``: the chain length
    undoing a fix is compared at, at most the final one)."""
    rungs = climb(meter, [Rung("as launched", start)]
                  + [Rung(fix.rung, start.changed(*(f.change for f in fixes[:i + 1])), fix.code)
                     for i, fix in enumerate(fixes)])
    every = start.changed(*(f.change for f in fixes))
    steady = min(rungs[-1].num_steps, steady_floor)
    findings = [_measured(meter, fix, (rungs[i], rungs[i + 1], rungs[-1]),
                          start.changed(*(f.change for f in fixes if f is not fix)), every, steady)
                for i, fix in enumerate(fixes)]
    return Ladder(rungs, list(fixes), findings)
