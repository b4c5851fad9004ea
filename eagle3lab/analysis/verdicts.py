"""Comparisons that state their own verdicts, so that a notebook's words follow from its numbers.

A quantity measured on prompts (tau = tokens / rounds, an agreement = hits / positions) is a ratio of
per-prompt sums (:class:`Measured`). :func:`compare` gives each one its bootstrap interval over prompts and
its paired difference against a reference (the same prompts resampled for both), and the word that
difference earns: **beats** / **within noise** / **loses** when the whole 95% interval lies above 0 /
straddles 0 / lies below 0. Nothing inside the noise is ranked. :class:`Verdicts` holds them: ``table()``,
``words()`` and ``claims()`` are what a notebook cell shows, says and hands to ``summary``.

The readings built on these live beside it: ``hypotheses`` (named wirings scored on one ``StateBank``),
``fc_reading`` (notebook 03: around one wiring, reading ``search_wiring``) and ``rule_reading`` (notebook 04:
each draft under each residual rule, each engine's rule).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from eagle3lab.engines.acceptance import Interval, bootstrap_ratio, bootstrap_ratio_difference

WORDS = ("beats", "within noise", "loses", "identical")
# each word as the verb before the thing compared with: "X beats Y", "X is identical to Y"
AGAINST = {"beats": "beats", "loses": "loses to", "within noise": "is within noise of", "identical": "is identical to"}
# what a compared quantity is counted in (a session stores it beside the interval; units = prompts resampled)
UNIT_OF = {"tau": "tokens per round", "step-1 agreement": "share of positions"}


MOST_DIGITS = 6   # past this, a bound is the reference for every reader


def _same_when_printed(x: float, ref: float, d: int) -> bool:
    return float(f"{x:.{d}f}") == float(f"{ref:.{d}f}")      # "-0.00" reads as the reference 0.00 too


def digits(values, references=(0.0,), d: int = 2) -> int:
    """The digits rule every printed interval follows: the fewest decimals (at least ``d``) at which no value in
    ``values`` that differs from a reference in ``references`` (0 for a difference, 1 for a speed ratio) prints
    as that reference. A value equal to it (a degenerate 0 [0, 0]) prints as it is."""
    for k in range(d, MOST_DIGITS + 1):
        if not any(x != r and _same_when_printed(x, r, k) for x in values for r in references):
            return k
    return MOST_DIGITS


def signed_text(diff: Interval, d: int = 2) -> str:
    """A paired difference, ``+0.31 [+0.10, +0.52]``, at the digits that keep a nonzero bound off 0."""
    k = digits((diff.value, diff.low, diff.high), (0.0,), d)
    return f"{diff.value:+.{k}f} [{diff.low:+.{k}f}, {diff.high:+.{k}f}]"


def interval_text(i: Interval, d: int = 2, unit: str = "", references=None) -> str:
    """``1.23x [1.10, 1.35]``; a speed ratio (``unit="x"``) is read against 1x, so a bound below 1 never prints as
    1.00; ``references``: other values a number off them must not print as."""
    refs = (1.0,) if references is None and unit == "x" else references or ()
    k = digits((i.value, i.low, i.high), refs, d) if refs else d
    return f"{i.value:.{k}f}{unit} [{i.low:.{k}f}, {i.high:.{k}f}]"


def rate_text(x: float, hits: int, total: int, d: int = 2) -> str:
    """A rate that is exactly 1 or 0 (every or no round accepted) with its count, ``1.00 (12/12)``: on few rounds
    it says little; one that only rounds there gets the digits that keep it off (``0.998``). NaN: "nan (0/0)"."""
    if math.isnan(x):
        return f"nan ({hits}/{total})"
    k = digits((x,), (0.0, 1.0), d)
    return f"{x:.{k}f}" + (f" ({hits}/{total})" if x in (0.0, 1.0) else "")


def degenerate(diff: Interval) -> bool:
    """Exactly 0 [0, 0]: the same rounds measured twice (one hypothesis under two names, a rung that changed
    nothing the meter sees), not a tie inside the noise."""
    return diff.value == diff.low == diff.high == 0.0


def word_of(diff: Interval) -> str:
    """The one verdict rule: "identical" for a degenerate 0 [0, 0]; "beats" / "loses" when the whole interval
    lies above / below 0; else "within noise" (and from one prompt)."""
    if degenerate(diff):
        return "identical"
    return {1: "beats", -1: "loses", 0: "within noise"}[diff.sign()]


def speed_word(ratio: Interval) -> str:
    """A measured speed ratio (``DecodeSweep.speed_ratio``): "faster" / "slower" when the whole interval lies
    above / below 1x, else "within noise" (never ranked inside its own interval, nor from one prompt: its
    bootstrap is the point); "not measured" for NaN."""
    if any(math.isnan(x) for x in (ratio.value, ratio.low, ratio.high)):
        return "not measured"
    if ratio.single:
        return "within noise"
    return "faster" if ratio.low > 1 else "slower" if ratio.high < 1 else "within noise"


def projected_word(tau: Interval, cost: float) -> str:
    """A projection's verdict: tau's whole interval above / below a round cost priced without an interval (the
    break-even tau), as ``speed_word`` reads a measured ratio against 1x; from one prompt, within noise."""
    if tau.single:
        return "projected within noise"
    return "projected faster" if tau.low > cost else "projected slower" if tau.high < cost else "projected within noise"


def short(wiring) -> str:
    """``[0, 3, 7]``: a wiring as resid indices, for tables and sentences."""
    return "[" + ", ".join(str(int(k)) for k in wiring) + "]"


@dataclass(frozen=True)
class Measured:
    """A quantity measured as ``sum(num) / sum(den)`` over units (one entry per prompt)."""

    num: tuple
    den: tuple

    @classmethod
    def of_score(cls, score) -> Measured:
        """tau of a ``BankScore`` (tokens over rounds, per sequence)."""
        num, den = score.tau_sums
        return cls(tuple(num), tuple(den))

    @classmethod
    def of_hits(cls, hits, mask) -> Measured:
        """An agreement rate from ``[B, T]`` boolean tensors: hits among the positions ``mask`` keeps, per row."""
        keep = mask.bool()
        return cls(tuple((hits.bool() & keep).sum(-1).tolist()), tuple(keep.sum(-1).tolist()))

    @property
    def value(self) -> float:
        return sum(self.num) / sum(self.den)

    @property
    def positions(self) -> int:
        return int(sum(self.den))

    def interval(self, level: float = 0.95) -> Interval:
        return bootstrap_ratio(self.num, self.den, level=level)


@dataclass(frozen=True)
class Verdict:
    """``name``'s measured ``value`` and, unless it is the reference, its paired difference to ``reference``."""

    name: str
    reference: str
    value: Interval
    diff: Interval | None
    quantity: str = "tau"

    @property
    def word(self) -> str:
        if self.diff is None:
            return "reference"
        return word_of(self.diff)

    @property
    def half_width(self) -> float:
        return (self.value.high - self.value.low) / 2

    def measured(self, decimals: int = 2) -> str:
        v = self.value
        return f"{self.quantity} {v.value:.{decimals}f} [{v.low:.{decimals}f}, {v.high:.{decimals}f}]"

    def against(self, decimals: int = 2, reference: str | None = None) -> str:
        """The verdict as a phrase: "beats X by 0.31 [0.10, 0.52]", "loses 1.10 [0.75, 1.47] to X",
        "within noise of X (+0.05 [-0.20, +0.31])"."""
        ref, d = reference or self.reference, self.diff
        if d is None:
            return f"is the reference ({ref})"
        if self.word == "identical":
            return f"is identical to {ref} (the same hypothesis, the same rounds)"
        if self.word == "beats":
            return f"beats {ref} by {self.margin(decimals)}"
        if self.word == "loses":
            return f"loses {self.margin(decimals)} to {ref}"
        return f"is within noise of {ref} ({signed_text(d, decimals)})"

    def margin(self, decimals: int = 2) -> str:
        """By how much it beats or loses, as magnitudes: ``1.10 [0.75, 1.47]`` (the digits rule: a bound off 0
        never prints as 0)."""
        d = self.diff
        lo, hi = (-d.high, -d.low) if self.word == "loses" else (d.low, d.high)
        f = digits((d.value, lo, hi), (0.0,), decimals)
        return f"{abs(d.value):.{f}f} [{lo:.{f}f}, {hi:.{f}f}]"

    def sentence(self, decimals: int = 2) -> str:
        return f"{self.name}: {self.measured(decimals)}, {self.against(decimals)}"

    def claims(self) -> dict:
        v, d = self.value, self.diff
        out = {"value": v.value, "low": v.low, "high": v.high, "word": self.word, "level": v.level,
               "units": v.units, "unit": UNIT_OF.get(self.quantity, self.quantity)}
        if d is not None:
            lo, hi = (-d.high, -d.low) if self.word == "loses" else (d.low, d.high)
            out.update(diff=d.value, diff_low=d.low, diff_high=d.high, diff_level=d.level, diff_units=d.units,
                       diff_unit=out["unit"], by=abs(d.value), by_low=lo, by_high=hi)
        # a negative bound after "[" reads as its magnitude to the workbook's decimal check
        out["magnitudes"] = [abs(x) for x in (v.low, v.high) + (() if d is None else (d.low, d.high))]
        return out


@dataclass
class Verdicts:
    """Every compared quantity against one ``reference``, in the order given."""

    reference: str
    items: dict
    quantity: str = "tau"
    level: float = 0.95

    def __getitem__(self, name: str) -> Verdict:
        return self.items[name]

    def __iter__(self):
        return iter(self.items.values())

    def __len__(self) -> int:
        return len(self.items)

    @property
    def units(self) -> int:
        return next(iter(self.items.values())).value.units

    def others(self) -> list[Verdict]:
        return [v for v in self if v.diff is not None]

    def counts(self, names=None) -> dict:
        """How many of ``names`` (default: all but the reference) earn each word."""
        chosen = self.others() if names is None else [self[n] for n in names]
        return {w: sum(v.word == w for v in chosen) for w in WORDS}

    def highest(self) -> Verdict:
        return max(self, key=lambda v: v.value.value)

    def table(self, decimals: int = 3) -> pd.DataFrame:
        ref = self.reference
        rows = [{"": v.name, self.quantity: round(v.value.value, decimals),
                 f"{self.quantity} {self.level:.0%}": f"[{v.value.low:.2f}, {v.value.high:.2f}]",
                 f"minus {ref}": "" if v.diff is None else signed_text(v.diff),
                 "verdict": v.word} for v in self]
        return pd.DataFrame(rows).set_index("")

    def words(self, names=None, decimals: int = 2) -> str:
        """One markdown bullet per verdict (the reference first, with its interval)."""
        ref = self[self.reference]
        chosen = self.others() if names is None else [self[n] for n in names]
        lines = [f"- {ref.name}: {ref.measured(decimals)} (the reference)"]
        lines += [f"- {v.sentence(decimals)}" for v in chosen]
        return "\n".join(lines)

    def claims(self) -> dict:
        return {v.name: v.claims() for v in self}


def compare(measured: Mapping, reference: str, *, quantity: str = "tau", level: float = 0.95) -> Verdicts:
    """``measured``: name -> :class:`Measured` (or a ``BankScore``), all on the same units in the same order;
    each gets its interval and its paired difference to ``measured[reference]``."""
    items = {k: v if isinstance(v, Measured) else Measured.of_score(v) for k, v in measured.items()}
    if reference not in items:
        raise KeyError(f"compare: the reference {reference!r} is not among the measured {list(items)}")
    ref = items[reference]
    out = {}
    for name, m in items.items():
        if len(m.num) != len(ref.num):
            raise ValueError(f"compare: {name!r} is measured on {len(m.num)} units, the reference on {len(ref.num)}; "
                             "a paired difference needs the same prompts")
        diff = None if name == reference else bootstrap_ratio_difference(m.num, m.den, ref.num, ref.den, level=level)
        out[name] = Verdict(name, reference, m.interval(level), diff, quantity)
    return Verdicts(reference, out, quantity, level)
