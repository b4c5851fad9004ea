"""How every notebook prints an interval: one home for the digits and the record a session stores.

The digits rule (``verdicts.digits``, re-exported here; it lives with the words because ``Verdict`` prints too):
an interval is printed at 2 decimals unless a number that differs from its reference (0 for a difference, 1x for
a speed ratio, 0 and 1 for a rate) would print as the reference; then at as many more as it takes (up to
``MOST_DIGITS``), so that a lower bound of 0.0004 reads ``[0.0004, 0.0810]``, not ``[0.000, 0.081]``, and an upper
bound of 0.998 reads ``0.980x [0.960, 0.998]``, not ``0.98x [0.96, 1.00]``. A number equal to the reference (a
degenerate ``0.00 [0.00, 0.00]``) prints as it is.
"""

from __future__ import annotations

from eagle3lab.analysis.verdicts import MOST_DIGITS, digits, interval_text, rate_text, signed_text  # noqa: F401
from eagle3lab.engines.acceptance import Interval


def fmt(i: Interval, d: int = 2, unit: str = "", references=None) -> str:
    """``1.23x [1.10, 1.35]`` (``verdicts.interval_text``: a speed ratio gets the digits that keep a bound below
    1 from printing as 1.00)."""
    return interval_text(i, d, unit, references)


def signed(i: Interval, d: int = 2) -> str:
    """A difference, ``+0.31 [+0.10, +0.52]``, at the digits that keep a nonzero bound from printing as 0."""
    return signed_text(i, d)


def rate(x: float, hits: int, total: int, d: int = 2) -> str:
    """A rate of exactly 1.00 or 0.00 with its count, ``1.00 (12/12)`` (``verdicts.rate_text``)."""
    return rate_text(x, hits, total, d)


def interval_claims(i: Interval) -> dict:
    """value / low / high, and the magnitudes a negative bound shows after '[' (the workbook's decimal check)."""
    return {"value": i.value, "low": i.low, "high": i.high, "magnitudes": [abs(i.value), abs(i.low), abs(i.high)]}


def interval_record(i: Interval, unit: str | None = None) -> dict:
    """An interval whole, as a session stores it (``app.workbook.claim_metrics``): value, low, high, level, units
    (the units its bootstrap resampled), its unit when given, and the magnitudes of ``interval_claims``."""
    out = {**interval_claims(i), "level": i.level, "units": i.units}
    return out if unit is None else {**out, "unit": unit}
