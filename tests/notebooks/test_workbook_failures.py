"""A notebook that stops early (a cell past the timeout, a cell error) is written as far as it ran,
marked FAILED in the index with its cell, and its session records the failure; the others still run."""

from __future__ import annotations

import json

import nbformat
import pytest

from eagle3lab.app.session import Session, diff_sessions
from eagle3lab.app.workbook import CLAIMS_KEY, SUMMARY_KEY, build_workbook

# what eagle3lab.summary() displays, without importing eagle3lab in the kernel (seconds on a loaded machine)
SUMMARY = ("from IPython.display import Markdown, display\n"
           f"display(Markdown('fine'), metadata={{{SUMMARY_KEY!r}: f'fine with {{N}} prompts and tau 1.25', "
           f"{CLAIMS_KEY!r}: {{'prompts': N, 'tau': 1.25}}}})")


def _notebook(folder, name, *cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(f"# {name}")]
    nb.cells += [nbformat.v4.new_code_cell(src, metadata={"tags": ["parameters"]} if i == 0 else {})
                 for i, src in enumerate(cells)]
    nbformat.write(nb, folder / name)


@pytest.mark.timeout(180)
def test_a_timed_out_and_a_broken_notebook_are_marked_failed_with_their_cell(tmp_path):
    books = tmp_path / "notebooks"
    books.mkdir()
    _notebook(books, "01_slow.ipynb", "SECONDS = 60", "print('before the slow cell')",
              "import time\ntime.sleep(SECONDS)", "print('never reached')")
    _notebook(books, "02_broken.ipynb", "N = 1", "raise ValueError('no such draft: N')")
    _notebook(books, "03_fine.ipynb", "N = 2", SUMMARY)
    index, results = build_workbook(tmp_path / "wb", folder=books, timeout=5)

    slow, broken, fine = results
    assert (slow.ok, slow.cell, broken.ok, broken.cell, fine.ok, fine.cell) == (False, 3, False, 2, True, None)
    assert "past the 5 s cell timeout" in slow.error and broken.error == "ValueError: no such draft: N"
    page = index.read_text()
    assert "2 notebook(s) FAILED" in page and "FAILED in cell 3</b>: CellTimeoutError" in page
    assert "FAILED in cell 2</b>: ValueError: no such draft: N" in page
    assert json.loads((tmp_path / "wb" / "summary.json").read_text())[0]["cell"] == 3

    # the executed copy keeps what ran before the timeout
    ran = nbformat.read(tmp_path / "wb" / "01_slow.ipynb", as_version=4)
    assert "before the slow cell" in ran.cells[2].outputs[0]["text"] and not ran.cells[4].outputs

    s = Session.load(tmp_path / "wb" / "sessions" / "01_slow")
    assert s.failure == {"error": slow.error, "kind": "timeout", "cell": 3, "source": "import time"}
    assert s.parameters == {"SECONDS": 60} and s.notes[-1] == f"FAILED in cell 3: {slow.error}"
    assert Session.load(tmp_path / "wb" / "sessions" / "02_broken").failure["kind"] == "cell error"
    ok = Session.load(tmp_path / "wb" / "sessions" / "03_fine")
    assert ok.failure is None and ok.metrics["tau"] == {"value": 1.25}
    diff = diff_sessions(s, ok)
    assert diff[diff.kind == "failure"].to_dict("records") == [
        {"kind": "failure", "name": "error", "a": slow.error, "b": None, "change": "removed"}]
