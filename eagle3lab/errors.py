"""Errors written for the person reading them at 2 a.m.: where, what was expected, what was found.

Every error carries a stable ``code`` (callers that must tell errors apart match it, never the message) and a
one-line ``headline`` (what failed, without the advice that follows it)."""

from __future__ import annotations

from pathlib import Path

from eagle3lab.findings import first_sentence


class Eagle3LabError(ValueError):
    """Bad input: a checkpoint, config, flag or id that cannot be used as given.

    ``Eagle3LabError(message, code=..., headline=...)``: the message as ever; ``code`` defaults to the class's
    (``BAD_INPUT``), ``headline`` to the message's first sentence."""

    code = "BAD_INPUT"

    def __init__(self, message: str = "", *, code: str | None = None, headline: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self._headline = headline

    @property
    def headline(self) -> str:
        """What failed, in one line, without the advice that follows it."""
        return self._headline or first_sentence(str(self))

    def __reduce__(self):   # pickles (multiprocessing) keep the code and headline
        return _rebuild, (type(self), self.__dict__, self.args)


def _rebuild(cls, state: dict, args: tuple):
    err = Exception.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class UncapturablePoints(Eagle3LabError):
    """An engine captures these resid points with no ids it accepts. Callers read ``headline`` (what was
    asked and every ids tried) and ``tried`` (one "ids -> what it feeds (why not)" per try), never the text."""

    code = "UNCAPTURABLE_POINTS"

    def __init__(self, what: str, tried: tuple[str, ...], advice: str):
        super().__init__(f"{what}. {advice}", headline=what)
        self.what, self.tried, self.advice = what, tuple(tried), advice


def bad_input(where: str | Path | None, key: str | None, expected, found, hint: str | None = None,
              cls: type[Eagle3LabError] = Eagle3LabError, code: str | None = None) -> Eagle3LabError:
    """Build an error naming the file (or flag), the key, the expected and the found value; its headline is
    that much, without the hint."""
    parts = []
    if where is not None:
        parts.append(str(where))
    if key is not None:
        parts.append(f"key '{key}'")
    head = ": ".join(parts) if parts else "input"
    msg = f"{head}: expected {expected}, found {found}."
    full = f"{msg} {hint}" if hint else msg
    return cls(full, code=code, headline=msg.splitlines()[0])
