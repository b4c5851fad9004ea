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


# ----------------------------------------------------------------------------- release rules

@dataclass(frozen=True)
class Rule:
    """One engine rule over a release range: ``engine``'s ``kind`` of ``key`` is ``value`` from ``since`` on, up to the
    next rule of the same engine, kind, key, reader and platform. ``since`` is a ``Change`` (every build with it; the
    rules of a key then hold in the order their changes landed, the first one's ``since`` None), a release (PEP 440;
    "0" or None: every release read), or None. ``note`` is the rule in words, a template that ``InForce.say`` fills
    from the row and its range ({engine}, {since}, {until}, {newest}, {pr}, {merged}), so no release number is typed
    beside the row that holds it. ``value`` is what the engine does: a flag, a name, or a small record of fields
    (``InForce.get`` reads either). ``reader``: the file or code path that does it ("": the engine); ``source``: the
    PR(s) or where it was read; ``platform``: the rule holds on this platform only (None: every one)."""

    engine: str
    kind: str
    key: object
    since: Change | str | None = None
    value: object = True
    note: str = ""
    reader: str = ""
    source: str = ""
    platform: str | None = None


_RULE_FIELDS = frozenset(Rule.__dataclass_fields__)


def rule_field(rule: Rule, name: str):
    """``name`` of a rule: one of its own fields, else a field of its ``value`` record."""
    return getattr(rule, name) if name in _RULE_FIELDS else getattr(rule.value, name)


def _release_of(since) -> Version:
    return Version(since or "0")


@dataclass(frozen=True)
class InForce:
    """The rules of one key as a build reads them. ``span`` = (sure, era): the build is in one of ``rows[sure..era]``
    (equal when it is placed; ``era``, the newest, is what an unplaced build behaves as). ``held`` is False for a
    build older than every release rule (``row`` is then the oldest). ``release``: release rules, the release whose
    rules were used; ``note``: what was assumed about the build (None: nothing)."""

    rows: tuple[Rule, ...]
    span: tuple[int, int]
    engine_version: str | None
    newest: str
    read: tuple[str, ...] = ()
    release: str | None = None
    note: str | None = None
    held: bool = True

    @property
    def row(self) -> Rule:
        """The rule in force (the newest the build may have)."""
        return self.rows[self.span[1]]

    @property
    def next(self) -> Rule | None:
        """The rule that ends the one in force (None: it holds up to the newest build read)."""
        era = self.span[1] if self.held else -1
        return self.rows[era + 1] if era + 1 < len(self.rows) else None

    def get(self, field: str, warn=None):
        """``field`` of the rule in force; ``warn(text, change)`` is called once for each change inside the span at
        which that field's value changes (the build cannot be placed by it, and it matters)."""
        sure, era = self.span
        for before, row in zip(self.rows[sure:era], self.rows[sure + 1:era + 1]):
            if warn and rule_field(before, field) != rule_field(row, field):
                warning = place(row.since, self.engine_version).warning
                if warning:
                    warn(warning, row.since)
        return rule_field(self.rows[era], field)

    def change_to(self, field: str, value) -> Change | None:
        """The change from which ``field`` first has ``value`` (None: every rule has it from the start)."""
        row = next(r for r in self.rows if rule_field(r, field) == value)
        return row.since if isinstance(row.since, Change) else None

    def fields(self, row: Rule | None = None) -> dict:
        """What a note template may name, for ``row`` (default: the rule in force): {engine}, {since} (its first
        release), {until} (its last: the release read before the next rule, or the newest read), {later} (the next
        rule's first release), {newest}, {pr} and {merged} (its change's)."""
        row = self.row if row is None else row
        later = self.rows[self.rows.index(row) + 1:]
        change = row.since if isinstance(row.since, Change) else None
        return {"engine": ENGINE_NAMES.get(row.engine, row.engine), "since": _first_release(row, self.read),
                "until": _last_release(later[0], self.read) if later else self.newest, "newest": self.newest,
                "later": _first_release(later[0], self.read) if later else "",
                "pr": change.pr if change else "", "merged": change.merged if change else ""}

    def say(self, template: str | None = None, row: Rule | None = None, **more) -> str:
        """``template`` (default: the rule's own note) filled from the rule in force (or ``row``) and ``more``."""
        row = self.row if row is None else row
        return (row.note if template is None else template).format(**self.fields(row), **more)


def _first_release(row: Rule, read) -> str:
    if isinstance(row.since, Change):
        return row.since.first_with or "?"
    return row.since if row.since not in (None, "0") else (read[0] if read else "?")


def _last_release(later: Rule, read) -> str:
    """The last release a rule holds in: the one before ``later``'s first."""
    if isinstance(later.since, Change):
        return later.since.last_without or "?"
    older = [r for r in read if Version(r) < Version(later.since)]
    return max(older, key=Version) if older else f"before {later.since}"


def rule_at(rules, engine_version, *, engine: str, kind: str, key=None, newest: str, read=(), earlier=(), later=(),
            where: str = "engine_version", **match) -> InForce:
    """The one lookup of release rules: the rules of ``engine``'s ``kind`` and ``key`` (and whose fields equal
    ``match``), as the build ``engine_version`` reads them (``InForce``).

    Rules held from a ``Change`` are placed in the order they landed (``place_in_order``: dates, PR marks and releases
    all place a build); ``earlier`` / ``later`` are changes that landed before / after every rule's, so that a mark for
    one places the rules too. Rules held from a release: the one with the newest ``since`` at or before the build's
    release; no version (or 'latest') and a date or PR mark, which no release places, are read as ``newest`` (the
    newest release read), a release newer than that or one not in ``read`` uses the rules of the release read just
    before it, one older than every rule the oldest (``held`` False); ``note`` says which was assumed."""
    v = parse_engine_version(engine_version, where)
    mine = tuple(r for r in rules if (r.engine, r.kind, r.key) == (engine, kind, key)
                 and all(getattr(r, k) == x for k, x in match.items()))
    if not mine:
        raise bad_input("rules", None, f"a {engine} {kind} rule for {key!r}" + (f" with {match}" if match else ""),
                        "none")
    if any(isinstance(r.since, Change) for r in mine):
        chain = [*earlier, *(r.since for r in mine[1:]), *later]
        era, sure = place_in_order(chain, v, where)
        skip, last = len(earlier), len(mine) - 1
        span = (min(max(0, sure - skip), last), min(max(0, era - skip), last))
        return InForce(mine, span, v, newest, tuple(read))
    return _by_release(tuple(sorted(mine, key=lambda r: _release_of(r.since))), v, newest, tuple(read), engine)


def _by_release(rows, v, newest, read, engine) -> InForce:
    """``rule_at`` for rules held from a release (``rows`` sorted by it)."""
    engine, note = ENGINE_NAMES.get(engine, engine), None
    if v is None or _MARK.match(v.lower()) or _DATE.match(v):
        note = ((f"engine_version {v!r} is not a release, so no release row places it" if v else
                 "engine_version not given") + f": assumed {engine} {newest}, the newest release read.").lstrip()
        release = Version(newest)
    else:
        release = Version(v)
        if release > Version(newest):
            note = f"{engine} {v} is newer than the newest release read ({newest}): assumed it behaves as {newest}."
        elif read and v not in read and release >= _release_of(rows[0].since):
            older = max((r for r in read if Version(r) <= release), key=Version)
            note = f"{engine} {v} was not read: assumed it behaves as {older}, the release read just before it."
    older = [i for i, r in enumerate(rows) if _release_of(r.since) <= release]
    if not older:
        first = rows[0].since
        note = (f"{engine} {v} is older than every release read for this rule ({first}): assumed it behaves as "
                f"{first}.")
        return InForce(rows, (0, 0), v, newest, read, first, note, held=False)
    used = str(release) if release <= Version(newest) else newest
    return InForce(rows, (older[-1], older[-1]), v, newest, read, used, note)
