"""Errors written for the person reading them at 2 a.m.: where, what was expected, what was found."""

from __future__ import annotations

from pathlib import Path


class Eagle3LabError(ValueError):
    """Bad input: a checkpoint, config, flag or id that cannot be used as given."""


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
