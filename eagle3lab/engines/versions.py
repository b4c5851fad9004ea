"""Where one engine build sits relative to a change in engine behaviour.

An ``engine_version`` names a build in one of three ways:

    2026-04-01        the build's commit date: placed by the change's merge date (a build from the
                      merge day counts as on or after the merge, so it has the change); where only
                      bounds are known, a date before the PR was opened lacks it and one on or after
                      the day it is known to be on main has it
    pre-#N / post-#N  built before / after pull request N: places that PR only
    0.5.4             a release (PEP 440): placed where the change's release bounds are known

``place(change, engine_version)`` answers 'before', 'after' or 'uncertain'. An uncertain build
behaves as the newest code read, and the answer carries the one warning every caller shows
(engine, PR, merge date, and how to pass a placeable version). ``place_in_order(changes, ...)``
places a build among changes that landed one after another (a build with one has every earlier
one), so that what one PR mark leaves open is narrowed by the others. Pure Python: no torch import.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date

from packaging.version import InvalidVersion, Version

from eagle3lab.errors import bad_input

ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
NEWEST = ("", "latest", "main", "current")  # spellings of "the newest code read", besides None

_MARK = re.compile(r"^(pre|post)-?#?(\d+)$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Change:
    """A change in one engine's behaviour: its PR, merge date and the releases known to bound it."""

    engine: str                        # "sglang" or "vllm"
    what: str
    pr: int | None = None
    merged: str | None = None          # YYYY-MM-DD the PR reached main, when known
    last_without: str | None = None    # newest release known to lack it (PEP 440)
    first_with: str | None = None      # oldest release known to have it (PEP 440)
    landed: bool = True                # False: still open in the newest code read, so no build has it
    opened: str | None = None          # YYYY-MM-DD the PR was opened: a build dated before it lacks it
    on_main_by: str | None = None      # merge date unknown: a day by which it is known to be on main

    def span(self) -> str:
        """The change in words: PR, merge date (or its bounds) and the release bounds known for it."""
        bounds = None if self.merged else ", ".join(p for p in (
            f"opened {self.opened}" if self.opened else None,
            f"on main by {self.on_main_by} (merge day not known)" if self.on_main_by else None) if p)
        parts = [f"PR #{self.pr}" if self.pr else None, f"merged {self.merged}" if self.merged else bounds,
                 None if self.landed else "not merged in the newest code read"]
        if self.last_without or self.first_with:
            parts.append(f"releases <= {self.last_without or '?'} lack it, >= {self.first_with or '?'} have it")
        return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class Placement:
    """'before', 'after' or 'uncertain'; ``warning`` is set exactly when uncertain."""

    state: str
    warning: str | None = None

    @property
    def after(self) -> bool:
        """Behave as a build with the change? An uncertain build behaves as the newest code, which has it."""
        return self.state != "before"


def parse_engine_version(engine_version, where: str) -> str | None:
    """``engine_version`` checked and stripped; None for the newest code (None, 'latest', 'main').

    Raises ``Eagle3LabError`` naming ``where`` (the parameter or flag as the caller's user wrote it,
    e.g. ``"engine_version"`` or ``"--engine-version"``) for anything that is not a date, a PR mark or
    a release.
    """
    v = "" if engine_version is None else str(engine_version).strip()
    if v.lower() in NEWEST:
        return None
    if _MARK.match(v.lower()):
        return v
    if _DATE.match(v):
        try:
            date.fromisoformat(v)
        except ValueError:
            raise bad_input(where, None, "a real date YYYY-MM-DD", repr(v)) from None
        return v
    try:
        Version(v)
    except InvalidVersion:
        raise bad_input(where, None, "a build date YYYY-MM-DD, pre-#N / post-#N for a pull request, or a release "
                        "like 0.5.4 (PEP 440)", repr(engine_version),
                        "Leave it out to get the newest behaviour.") from None
    return v


def place(change: Change, engine_version, where: str = "engine_version") -> Placement:
    """Where this build sits relative to ``change``; see the module docstring. ``where`` names the
    version in the error for one that is not a date, a PR mark or a release."""
    v = parse_engine_version(engine_version, where)
    mark = _MARK.match(v.lower()) if v else None
    if mark and change.pr is not None and int(mark.group(2)) == change.pr:
        return Placement("after" if mark.group(1) == "post" else "before")
    if not change.landed:
        return Placement("before")  # no build has it yet, whatever its date, release or other marks
    if v is None:
        return Placement("after")
    if _DATE.match(v):
        if change.merged:
            return Placement("after" if v >= change.merged else "before")
        if change.on_main_by and v >= change.on_main_by:
            return Placement("after")
        if change.opened and v < change.opened:
            return Placement("before")
    elif not mark:  # a release (a mark for another PR says nothing about this one)
        release = Version(v)
        if change.first_with and release >= Version(change.first_with):
            return Placement("after")
        if change.last_without and release <= Version(change.last_without):
            return Placement("before")
    return Placement("uncertain", unplaced_warning(change, v))


def place_in_order(changes, engine_version, where: str = "engine_version") -> tuple[int, int]:
    """Place a build among ``changes`` that landed in this order (a build with one has every earlier one).

    Returns ``(era, sure)``: how many of the changes the build has when it behaves as the newest code
    read, and how many it has for certain. Equal when the build is placed; otherwise it may sit in any
    era from ``sure`` to ``era``, and ``changes[sure:era]`` are the ones it cannot be placed by (each
    gets its own warning). The order places what one mark cannot: ``pre-#N`` lacks every later change,
    ``post-#N`` has every earlier one.
    """
    states = [place(c, engine_version, where).state for c in changes]
    era = next((i for i, s in enumerate(states) if s == "before"), len(states))
    sure = max((i + 1 for i, s in enumerate(states) if s == "after"), default=0)
    return era, min(sure, era)


def unplaced_warning(change: Change, engine_version: str) -> str:
    """The one wording for a build that cannot be placed: it behaves as the newest code, which has the change."""
    engine = ENGINE_NAMES.get(change.engine, change.engine)
    name = f"{engine} PR #{change.pr}" if change.pr else f"{engine}'s change"
    by_date = None
    if change.merged:
        by_date = "the build's commit date as YYYY-MM-DD"
    elif change.opened or change.on_main_by:  # only bounds: dates between them stay unplaced
        known = [f"before {change.opened} lacks it" if change.opened else None,
                 f"from {change.on_main_by} on has it" if change.on_main_by else None]
        by_date = "the build's commit date as YYYY-MM-DD (" + "; ".join(k for k in known if k) + ")"
    ways = [by_date,
            f"'pre-#{change.pr}' / 'post-#{change.pr}'" if change.pr else None,
            f"a release <= {change.last_without} (lacks it)" if change.last_without else None,
            f"a release >= {change.first_with} (has it)" if change.first_with else None]
    ways = [w for w in ways if w]
    how = ("Pass " + ", or ".join(ways) + " to place it." if ways else
           "Nothing known places a build relative to it: check your build's source.")
    if not (change.last_without or change.first_with):
        how += " No release numbers are known to bound it."
    when = ("merged " + change.merged if change.merged else
            "merge date unknown" + (f", on main by {change.on_main_by}" if change.on_main_by else ""))
    return (f"engine_version {engine_version!r} cannot be placed relative to {name} ({change.what}; {when}): "
            f"assumed the newest code read, which has it. {how}")


def release_row(rows, engine_version, *, newest: str, read=(), engine: str = "", where: str = "engine_version",
                **match):
    """The one generic lookup of release-ranged rows: among ``rows`` whose attributes equal ``match``, the one with
    the newest ``since`` (PEP 440) at or before the build's release. A row holds from its ``since`` up to the next
    matching row's. Returns ``(row, release used, note)``; ``note`` (else None) says what was assumed: no version
    (or 'latest') and a date or PR mark, which no release row places, are read as ``newest`` (the newest release
    read); a release newer than that, or one not in ``read``, uses the rows of the release read just before it; one
    older than every row uses the oldest row."""
    v = parse_engine_version(engine_version, where)
    candidates = sorted((r for r in rows if all(getattr(r, k) == x for k, x in match.items())),
                        key=lambda r: Version(r.since))
    if not candidates:
        raise bad_input("rows", None, f"a row for {match}", "none")
    note = None
    if v is None or _MARK.match(v.lower()) or _DATE.match(v):
        note = ((f"engine_version {v!r} is not a release, so no release row places it" if v else
                 "engine_version not given") + f": assumed {engine} {newest}, the newest release read.").lstrip()
        release = Version(newest)
    else:
        release = Version(v)
        if release > Version(newest):
            note = f"{engine} {v} is newer than the newest release read ({newest}): assumed it behaves as {newest}."
        elif read and v not in read and release >= Version(candidates[0].since):
            older = max((r for r in read if Version(r) <= release), key=Version)
            note = f"{engine} {v} was not read: assumed it behaves as {older}, the release read just before it."
    older = [r for r in candidates if Version(r.since) <= release]
    if not older:
        note = (f"{engine} {v} is older than every release read for this rule ({candidates[0].since}): assumed it "
                f"behaves as {candidates[0].since}.")
        return candidates[0], candidates[0].since, note
    used = str(release) if release <= Version(newest) else newest
    return older[-1], used, note


def change_rows(rows, changes, engine_version, *, landed_after=(), where: str = "engine_version") -> tuple[int, int]:
    """The one generic lookup of change-ranged rows: ``rows`` hold in the order their changes landed, each from its
    ``since`` (a key of ``changes``; the first row's is None: every build read before the next). Returns ``(sure,
    era)``: the build is in one of ``rows[sure..era]`` (equal when it is placed; ``era``, the newest, is what an
    unplaced build behaves as). Dates, PR marks and releases all place it (``place_in_order``); ``landed_after`` are
    keys of changes that landed before every row's, so that a mark for one (``pre-#N``) places the rows too. Which
    warning an unplaced build gets depends on what is read from the rows (``row_value``)."""
    chain = [changes[k] for k in landed_after] + [changes[r.since] for r in rows[1:]]
    era, sure = place_in_order(chain, engine_version, where)
    skip = len(landed_after)
    return max(0, sure - skip), max(0, era - skip)


def row_value(rows, changes, span: tuple[int, int], field: str, engine_version, warn) -> object:
    """``field`` of the newest row in ``span`` (from ``change_rows``); ``warn(text, change)`` is called once for each
    change inside the span at which that field's value changes (the build cannot be placed by it, and it matters)."""
    sure, era = span
    for before, row in zip(rows[sure:era], rows[sure + 1:era + 1]):
        if getattr(before, field) != getattr(row, field):
            change = changes[row.since]
            warning = place(change, engine_version).warning
            if warning:
                warn(warning, change)
    return getattr(rows[era], field)
