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

from dataclasses import asdict, dataclass, field

from eagle3lab.engines.acceptance import Interval

SEVERITIES = ("critical", "warning", "info")
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
    def severity(self) -> str:
        if self.gain.sign() == 1 and self.gain.low >= self.threshold:
            return "critical"
        return "warning" if self.gain.sign() == 1 else "info"

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
    order = {s: i for i, s in enumerate(SEVERITIES)}
    return min(given, key=lambda c: (order[c.severity], -c.gain.low), default=None)


def cost_of(gain: Interval, before: Interval | float, after: Interval | float) -> Cost:
    """The cost of a fix measured between two rungs: its paired ``gain`` read against the higher tau."""
    value = lambda t: t.value if isinstance(t, Interval) else float(t)
    return Cost(gain, max(value(before), value(after)))


@dataclass
class DoctorFinding:
    """One thing wrong (or worth knowing), with its evidence and its fix; measured ones carry tau before
    and after the fix (intervals over prompts), the paired gain, and the ``cost`` their severity rests on."""

    code: str
    severity: str
    title: str
    evidence: str
    fix: str | None = None
    source: str = ""                      # flags / config / wiring / vocab / server
    tau_before: Interval | None = None
    tau_after: Interval | None = None
    gain: Interval | None = None          # paired: the same prompts resampled for both
    undone: Interval | None = None        # tau lost undoing only this fix, every other fix kept (paired)
    data: dict = field(default_factory=dict)
    cost: Cost | None = None              # what the severity of a measured finding rests on (``Cost``)

    def to_dict(self) -> dict:
        out = asdict(self)
        for k in ("tau_before", "tau_after", "gain", "undone"):
            v = getattr(self, k)
            out[k] = None if v is None else {"value": v.value, "low": v.low, "high": v.high, "level": v.level}
        out["cost"] = None if self.cost is None else self.cost.to_dict()
        return out
