"""How every notebook prints an interval: one home for the digits and the record a session stores."""

from __future__ import annotations

from eagle3lab.engines.acceptance import Interval


def fmt(i: Interval, d: int = 2, unit: str = "") -> str:
    """``1.23x [1.10, 1.35]``."""
    return f"{i.value:.{d}f}{unit} [{i.low:.{d}f}, {i.high:.{d}f}]"


def signed(i: Interval, d: int = 2) -> str:
    return f"{i.value:+.{d}f} [{i.low:+.{d}f}, {i.high:+.{d}f}]"


def interval_claims(i: Interval) -> dict:
    """value / low / high, and the magnitudes a negative bound shows after '[' (the workbook's decimal check)."""
    return {"value": i.value, "low": i.low, "high": i.high, "magnitudes": [abs(i.value), abs(i.low), abs(i.high)]}


def interval_record(i: Interval, unit: str | None = None) -> dict:
    """An interval whole, as a session stores it (``app.workbook.claim_metrics``): value, low, high, level, units
    (the units its bootstrap resampled), its unit when given, and the magnitudes of ``interval_claims``."""
    out = {**interval_claims(i), "level": i.level, "units": i.units}
    return out if unit is None else {**out, "unit": unit}
