"""Notebooks executed once per test run, and the claims and words their summaries state."""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

import pytest


def _run(name: str):
    from eagle3lab.app.workbook import NOTEBOOKS, execute_notebook

    try:
        return execute_notebook(NOTEBOOKS / name, timeout=600), None
    except Exception as err:  # kept, so that a broken notebook runs once, not once per test
        return getattr(err, "nb", None), err


class _Failure(Exception):
    """A notebook's failure as another pytest-xdist worker recorded it."""

    def __init__(self, record: dict):
        super().__init__(record["text"])
        self.ename, self.evalue, self.kind = record["ename"], record["evalue"], record["type"]


@functools.cache
def _execute(name: str):
    """Once per test run: under pytest-xdist the workers share one execution through a folder named by the
    run's id (the first worker to ask runs it under a lock; the others wait and read its result)."""
    run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run_id:
        return _run(name)
    import fcntl
    import json

    import nbformat

    folder = Path(tempfile.gettempdir()) / f"eagle3lab-notebooks-{run_id}"
    folder.mkdir(exist_ok=True)
    done, failed = folder / name, folder / f"{name}.error.json"
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            nb, err = _run(name)
            if err is not None:       # before the notebook: a reader never takes a half-run one for a pass
                failed.write_text(json.dumps({"type": type(err).__name__, "ename": getattr(err, "ename", None),
                                              "evalue": getattr(err, "evalue", None), "text": str(err)}))
            if nb is not None:
                nbformat.write(nb, str(done) + ".tmp")
                os.replace(str(done) + ".tmp", done)
            if nb is None:
                done.write_text("")          # nothing to read, but the run happened
            return nb, err
    nb = nbformat.read(done, as_version=4) if done.stat().st_size else None
    return nb, (_Failure(json.loads(failed.read_text())) if failed.exists() else None)


def executed_notebook(name: str):
    """``notebooks/NAME`` executed on the bundled models, once per test run (every test shares the run)."""
    nb, err = _execute(name)
    if err is not None:
        # a cell error names itself (ename/evalue); str(err) ends with the traceback's rule of dashes
        what = (f"{err.ename}: {err.evalue}" if getattr(err, "ename", None) else
                str(err).strip().splitlines()[-1] if str(err).strip() else repr(err))
        pytest.fail(f"{name} failed to execute: {getattr(err, 'kind', type(err).__name__)}: {what}")
    return nb


def notebook_claims(name: str) -> dict:
    """The numbers (and verdicts) notebook NAME's summary states, as its run computed them."""
    from eagle3lab.app.workbook import find_claims

    return find_claims(executed_notebook(name))


def notebook_summary(name: str) -> str:
    """The text notebook NAME's summary states (its words must follow its claims)."""
    from eagle3lab.app.workbook import find_summary

    return find_summary(executed_notebook(name)) or ""


def run_with_parameters(name: str, parameters: dict, timeout: int = 600) -> tuple[dict, str, str]:
    """A fresh execution of notebook ``name`` with ``parameters`` injected (not the shared one), checked free
    of errors: its summary claims, its summary text and everything its cells printed."""
    from eagle3lab.app.workbook import NOTEBOOKS, error_outputs, execute_notebook, find_claims, find_summary

    nb = execute_notebook(NOTEBOOKS / name, timeout=timeout, parameters=parameters)
    assert not error_outputs(nb)
    printed = "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "stream")
    return find_claims(nb), find_summary(nb), printed
