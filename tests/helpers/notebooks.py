"""Notebooks executed once per test run, and the claims and words their summaries state."""

from __future__ import annotations

import functools

import pytest


@functools.cache
def _execute(name: str):
    from eagle3lab.app.workbook import NOTEBOOKS, execute_notebook

    try:
        return execute_notebook(NOTEBOOKS / name, timeout=600), None
    except Exception as err:  # kept, so that a broken notebook runs once, not once per test
        return getattr(err, "nb", None), err


def executed_notebook(name: str):
    """``notebooks/NAME`` executed on the bundled models, once per test run (every test shares the run)."""
    nb, err = _execute(name)
    if err is not None:
        # a cell error names itself (ename/evalue); str(err) ends with the traceback's rule of dashes
        what = (f"{err.ename}: {err.evalue}" if getattr(err, "ename", None) else
                str(err).strip().splitlines()[-1] if str(err).strip() else repr(err))
        pytest.fail(f"{name} failed to execute: {type(err).__name__}: {what}")
    return nb


def notebook_claims(name: str) -> dict:
    """The numbers (and verdicts) notebook NAME's summary states, as its run computed them."""
    from eagle3lab.app.workbook import find_claims

    return find_claims(executed_notebook(name))


def notebook_summary(name: str) -> str:
    """The text notebook NAME's summary states (its words must follow its claims)."""
    from eagle3lab.app.workbook import find_summary

    return find_summary(executed_notebook(name)) or ""


# the words notebooks 05 and 06 use for a measured speed verdict (eagle3lab.verdict)
SPEED_WORDS = {"wins": "faster than no speculation", "loses": "slower than no speculation",
               "breaks even": "no faster than no speculation"}
