"""One finding type for the whole package: a stable ``code``, a ``Severity``, the ``text``, the ``fix``, ``where``
it is about, and ``data``. Engine notes (layer ids, vLLM's model runner, context rules, inspect), flag findings,
config problems, vocabulary-map findings, load and target warnings and doctor findings are all ``Finding``s;
callers match ``code`` and compare ``severity``, never the text.

**One severity scale, three levels** (``Severity.rank``): 0 the engine refuses, crashes or runs something
broken (or, measured, a cost a user notices); 1 it runs, but not as written or trained; 2 worth knowing. The top
level keeps the word each documented output has always printed: ``ERROR`` ("error") in ``eagle3lab flags``
and the vocabulary-map checks, ``CRITICAL`` ("critical") in ``doctor`` and ``inspect``'s config problems; both
are rank 0 (``Severity.blocking``), so code asks ``severity.blocking`` or compares ranks, never the word.

What one producer adds beyond the shared fields (a flag finding's engine rule, a doctor finding's measured tau)
is a small typed record in ``detail``; its fields read as attributes of the finding (``finding.rule``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum


class Severity(StrEnum):
    """How bad a finding is, on one scale (``rank``); the value is the word printed (see the module docstring)."""

    CRITICAL = "critical"   # rank 0, in doctor's and inspect's words
    ERROR = "error"         # rank 0, in flags' and the vocabulary checks' words
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        """0 (blocking), 1 (warning) or 2 (info): what sorts and compares findings of every producer."""
        return _RANK[self]

    @property
    def blocking(self) -> bool:
        return self.rank == 0

    def worded(self, top: Severity) -> Severity:
        """This level in the words of a producer whose top level is ``top`` (CRITICAL or ERROR)."""
        return top if self.blocking else self


_RANK = {Severity.CRITICAL: 0, Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}

@dataclass(frozen=True)
class Finding:
    """One thing found: the code callers match, the severity, the sentence, the fix (in the engine's syntax),
    where (a file, config key, flag or setting), data (stable keys), an optional short ``title`` and the
    producer's typed ``detail``."""

    code: str
    severity: Severity
    text: str
    fix: str | None = None
    where: str | None = None
    data: dict = field(default_factory=dict, hash=False)
    title: str = ""
    detail: object = field(default=None, hash=False)

    def __post_init__(self):
        object.__setattr__(self, "severity", Severity(self.severity))

    def __getattr__(self, name: str):
        # only reached for names that are no field: the detail's fields
        if name.startswith("__") or name == "detail":
            raise AttributeError(name)
        detail = self.detail
        if detail is not None and name in {f.name for f in fields(detail)}:
            return getattr(detail, name)
        raise AttributeError(f"{type(self).__name__} {self.code} has no field {name!r}")

    def __str__(self) -> str:
        return self.text

    @property
    def headline(self) -> str:
        """The title, or else the text's first sentence (one line)."""
        return self.title or first_sentence(self.text)

    def to_dict(self) -> dict:
        """The JSON of this finding: its producer's documented shape where the ``detail`` has one (``json_of``:
        flags, config problems, doctor), else the shared fields."""
        if hasattr(self.detail, "json_of"):
            return self.detail.json_of(self)
        return {"code": self.code, "severity": str(self.severity), "text": self.text, "fix": self.fix,
                "where": self.where, "data": dict(self.data)}


def first_sentence(text: str) -> str:
    """The first line of ``text`` up to the end of its first sentence (". " before a capital letter)."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    for i in range(len(line) - 2):
        if line[i] == "." and line[i + 1] == " " and line[i + 2].isupper():
            return line[:i + 1]
    return line


def codes(findings) -> list[str]:
    return [f.code for f in findings]


def worst(findings) -> Severity | None:
    """The most severe level among ``findings`` (None when there are none)."""
    return min((f.severity for f in findings), key=lambda s: s.rank, default=None)
