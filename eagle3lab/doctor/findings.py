"""One thing doctor found: a code, a severity, the evidence, the fix in the engine's syntax, and for measured
findings tau before and after the fix with intervals (``engines.acceptance.Interval``).

**Severity from what a finding costs** (``Cost``, the one home of the rule): a measured finding is
*critical* only when its fix gains a cost a user would notice, stated on the interval's low end: at least
``MIN_TOKENS_PER_ROUND`` (0.1) tokens per round **and** at least ``MIN_SHARE_OF_TAU`` (5%) of tau (the higher
tau of the pair compared). An effect whose interval excludes 0 but stays below that is a *warning* that says
so ("measurable but small: +0.004 [+0.0005, +0.0078] tokens per round"); an interval holding 0 is *info*.
Findings that are not measured keep the severity of what they are (the engine refuses the checkpoint,
silently skips fc)."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, is_dataclass

from eagle3lab.engines.acceptance import Interval
from eagle3lab.findings import Finding, Severity

MIN_TOKENS_PER_ROUND = 0.1    # a critical fix gains at least this many accepted tokens per round ...
MIN_SHARE_OF_TAU = 0.05       # ... and at least this share of tau, both on the interval's low end


@dataclass(frozen=True)
class Cost:
    """What a fix gains, in tokens per round (a paired interval over prompts), read against ``tau`` (the
    higher tau of the two rungs compared); ``estimated``: converted from another quantity (said so)."""

    gain: Interval
    tau: float
    estimated: bool = False

    @property
    def threshold(self) -> float:
        """The gain a user would notice here: 0.1 tokens per round and 5% of tau, whichever is larger."""
        return max(MIN_TOKENS_PER_ROUND, MIN_SHARE_OF_TAU * self.tau)

    @property
    def severity(self) -> Severity:
        if self.gain.sign() == 1 and self.gain.low >= self.threshold:
            return Severity.CRITICAL
        return Severity.WARNING if self.gain.sign() == 1 else Severity.INFO

    def interval_text(self) -> str:
        g = self.gain
        digits = 2 if g.low >= 0.1 else 4
        return f"{g.value:+.{digits}f} [{g.low:+.{digits}f}, {g.high:+.{digits}f}] tokens per round"

    @property
    def words(self) -> str:
        """What the severity rests on, in words (estimated ones say "about")."""
        measured = ("about " if self.estimated else "") + self.interval_text()
        rule = (f"max({MIN_TOKENS_PER_ROUND} tokens per round, {MIN_SHARE_OF_TAU:.0%} of tau {self.tau:.2f}) = "
                f"{self.threshold:.3f}")
        return {"critical": f"a cost a user notices: {measured} (the low end clears {rule})",
                "warning": f"measurable but small: {measured} (the low end is below {rule}, the critical threshold)",
                "info": ("measured as a loss" if self.gain.sign() == -1 else "within noise") + f": {measured}",
                }[self.severity]

    def to_dict(self) -> dict:
        g = self.gain
        return {"tokens_per_round": {"value": g.value, "low": g.low, "high": g.high, "level": g.level},
                "tau": self.tau, "threshold": self.threshold, "estimated": self.estimated,
                "severity": self.severity, "words": self.words}


def costliest(*costs: Cost | None) -> Cost | None:
    """The cost that earns the highest severity (ties: the larger low end)."""
    given = [c for c in costs if c is not None]
    return min(given, key=lambda c: (c.severity.rank, -c.gain.low), default=None)


def cost_of(gain: Interval, before: Interval | float, after: Interval | float) -> Cost:
    """The cost of a fix measured between two rungs: its paired ``gain`` read against the higher tau."""
    value = lambda t: t.value if isinstance(t, Interval) else float(t)
    return Cost(gain, max(value(before), value(after)))


def _plain(v):
    """``v`` as ``dataclasses.asdict`` writes a field's value (dataclasses inside dicts and lists become dicts)."""
    if is_dataclass(v) and not isinstance(v, type):
        return asdict(v)
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, tuple) and hasattr(v, "_fields"):   # a namedtuple
        return type(v)(*(_plain(x) for x in v))
    if isinstance(v, list | tuple):
        return type(v)(_plain(x) for x in v)
    return copy.deepcopy(v)


def _interval(v: Interval | None) -> dict | None:
    return None if v is None else {"value": v.value, "low": v.low, "high": v.high, "level": v.level}


@dataclass(frozen=True)
class Measured:
    """What a doctor finding (a ``Finding`` whose ``detail`` this is) adds: the check that found it (``source``:
    flags / config / wiring / vocab / server) and, for measured findings, tau before and after the fix (intervals
    over prompts), the paired gain, the tau lost undoing only this fix (every other fix kept), and the ``cost`` its
    severity rests on."""

    source: str = ""
    tau_before: Interval | None = None
    tau_after: Interval | None = None
    gain: Interval | None = None          # paired: the same prompts resampled for both
    undone: Interval | None = None
    cost: Cost | None = None

    def json_of(self, f: Finding) -> dict:
        """``doctor --json``'s finding (docs/cli/doctor.md), keys in their old order."""
        return {"code": f.code, "severity": str(f.severity), "title": f.title, "evidence": f.text, "fix": f.fix,
                "source": self.source, "tau_before": _interval(self.tau_before),
                "tau_after": _interval(self.tau_after), "gain": _interval(self.gain),
                "undone": _interval(self.undone), "data": _plain(dict(f.data)),
                "cost": None if self.cost is None else self.cost.to_dict()}


def doctor_finding(code: str, severity: str, title: str, evidence: str, fix: str | None = None, source: str = "",
                   tau_before: Interval | None = None, tau_after: Interval | None = None,
                   gain: Interval | None = None, undone: Interval | None = None, data: dict | None = None,
                   cost: Cost | None = None) -> Finding:
    """One thing wrong (or worth knowing), with its evidence (the finding's text) and its fix; ``severity``
    "critical", "warning" or "info" (a flags "error" is worded "critical" here)."""
    return Finding(code, Severity(severity).worded(Severity.CRITICAL), evidence, fix, data=dict(data or {}),
                   title=title, detail=Measured(source, tau_before, tau_after, gain, undone, cost))

