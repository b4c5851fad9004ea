"""Errors written for the person reading them at 2 a.m.: where, what was expected, what was found."""

from __future__ import annotations

from pathlib import Path


class Eagle3LabError(ValueError):
    """Bad input: a checkpoint, config, flag or id that cannot be used as given."""

    @property
    def headline(self) -> str:
        """What failed, without the advice that follows it (the whole message unless a subclass splits it)."""
        return str(self)


class UncapturablePoints(Eagle3LabError):
    """An engine captures these resid points with no ids it accepts. Callers read ``headline`` (what was
    asked and every ids tried) and ``tried`` (one "ids -> what it feeds (why not)" per try), never the text."""

    def __init__(self, what: str, tried: tuple[str, ...], advice: str):
        super().__init__(f"{what}. {advice}")
        self.what, self.tried, self.advice = what, tuple(tried), advice

    @property
    def headline(self) -> str:
        return self.what


def bad_input(where: str | Path | None, key: str | None, expected, found, hint: str | None = None,
              cls: type[Eagle3LabError] = Eagle3LabError) -> Eagle3LabError:
    """Build an error naming the file (or flag), the key, the expected and the found value."""
    parts = []
    if where is not None:
        parts.append(str(where))
    if key is not None:
        parts.append(f"key '{key}'")
    head = ": ".join(parts) if parts else "input"
    msg = f"{head}: expected {expected}, found {found}."
    if hint:
        msg += f" {hint}"
    return cls(msg)
