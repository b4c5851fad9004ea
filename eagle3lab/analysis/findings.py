"""One thing doctor found: a code, a severity, the evidence, the fix in the engine's syntax, and for measured
findings tau before and after the fix with intervals (``engines.acceptance.Interval``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from eagle3lab.engines.acceptance import Interval

SEVERITIES = ("critical", "warning", "info")


@dataclass
class DoctorFinding:
    """One thing wrong (or worth knowing), with its evidence and its fix; measured ones carry tau before
    and after the fix (intervals over prompts) and the paired gain."""

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

    def to_dict(self) -> dict:
        out = asdict(self)
        for k in ("tau_before", "tau_after", "gain", "undone"):
            v = getattr(self, k)
            out[k] = None if v is None else {"value": v.value, "low": v.low, "high": v.high, "level": v.level}
        return out
