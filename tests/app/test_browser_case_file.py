"""Notebook 06's findings table in JupyterLab itself: the executed notebook (the run the notebook tests share)
saved into a JupyterLab started by test_browser.py's harness, opened in headless Chromium (Debian's, driven by
Playwright) without re-running it, and every long fix read back from the rendered table whole: no cut at
pandas' 50 characters, no cell clipped by its column.

The fixes are computed here from the notebook's own parameters (``resolve_flags`` on its launch command), not
read from the notebook. Without chromium or Playwright the test skips on a developer's machine and fails under
CI=true (where `make install` provides both)."""

from __future__ import annotations

import copy
import json
import os
import shutil
import urllib.request

import pytest
from helpers.notebooks import executed_notebook
from helpers.parameters import parameters_and_code_below
from test_browser import SHOTS, lab  # noqa: F401  (the JupyterLab fixture, reused)

from eagle3lab.app.display import TABLE_CLASS
from eagle3lab.app.workbook import NOTEBOOKS

NOTEBOOK = "06_case_file.ipynb"
SAVED_AS = "06_case_file_executed.ipynb"


def _required(what: str, found):
    """``found``, or a skip on a developer's machine and a failure under CI=true."""
    if found:
        return found
    msg = f"the JupyterLab browser test needs {what}: `make install` provides it (scripts/install-system.sh)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg + " (CI=true: the browser tests must run)")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def chromium_path() -> str:
    """Checked before the JupyterLab fixture starts a server (same scope: the argument order holds)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        _required("Playwright's Python package", None)
    return _required("Debian's chromium on PATH", shutil.which("chromium") or shutil.which("chromium-browser"))


def long_fixes() -> list[str]:
    """The fixes of the findings for the notebook's launch command longer than pandas' 50-character cut."""
    from eagle3lab import resolve_flags

    p, _ = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
    launch = (f"python -m {p['ENGINE']}.launch_server --model-path {p['TARGET']} --speculative-draft-model-path "
              f"{p['DRAFT']} {p['SPEC_FLAGS']}")
    res = resolve_flags(p["ENGINE"], launch, engine_version=p["SGLANG_VERSION"])
    return [f.fix for f in res.findings if f.fix and len(f.fix) > 50]


def _save_trusted(url: str, token: str, nb) -> None:
    """Save ``nb`` through the server's contents API with every cell marked trusted, as JupyterLab keeps outputs
    it produced itself (the server signs it on save, so the saved HTML outputs render unsanitised)."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.metadata["trusted"] = True
    body = json.dumps({"type": "notebook", "format": "json", "content": nb}).encode()
    req = urllib.request.Request(f"{url}/api/contents/{SAVED_AS}?token={token}", data=body, method="PUT",
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status in (200, 201), resp.status


# the fix column's cells of the first full_text table that has one, and whether full_text's style survived
# (JupyterLab strips <style> from untrusted outputs; a user's own run is trusted)
READ_FIX_COLUMN = f"""() => {{
    const styled = [...document.querySelectorAll('.jp-Notebook style')].some(
        e => e.textContent.includes('{TABLE_CLASS}'));
    const tables = [...document.querySelectorAll('.jp-Notebook table.{TABLE_CLASS}')];
    for (const [i, t] of tables.entries()) {{
        for (const row of t.querySelectorAll('thead tr')) {{
            const col = [...row.children].findIndex(h => h.innerText.trim() === 'fix');
            if (col < 0) continue;
            t.scrollIntoView();
            return {{styled, table: i, cells: [...t.querySelectorAll('tbody tr')].map(r => {{
                const td = r.children[col];
                return {{text: td.innerText, clipped: td.scrollWidth > td.clientWidth + 1}};
            }})}};
        }}
    }}
    return {{styled, table: null, cells: null}};
}}"""


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_findings_fix_column_renders_uncut_in_jupyterlab(bundled_models, chromium_path, lab):  # noqa: F811
    fixes = long_fixes()
    assert fixes, "the premise: some fix is longer than pandas' 50-character cut"
    url, token = lab
    _save_trusted(url, token, executed_notebook(NOTEBOOK))
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            page.goto(f"{url}/lab/tree/{SAVED_AS}?token={token}")
            page.wait_for_function(f"() => document.querySelector('.jp-Notebook table.{TABLE_CLASS}') !== null",
                                   timeout=120_000)
            page.wait_for_timeout(1000)          # let the remaining outputs render
            found = page.evaluate(READ_FIX_COLUMN)
            if found["table"] is not None:
                page.locator(f".jp-Notebook table.{TABLE_CLASS}").nth(found["table"]).screenshot(
                    path=str(SHOTS / "06_findings.png"))
        except Exception:
            page.screenshot(path=str(SHOTS / "06_failed.png"), full_page=True)
            raise
        finally:
            browser.close()
    cells = found["cells"]
    assert cells, f"no {TABLE_CLASS} table with a fix column in notebook 06 as JupyterLab renders it"
    assert found["styled"], "the saved outputs rendered untrusted (full_text's style stripped), not as a live run"
    shown = [" ".join(c["text"].split()) for c in cells]
    for fix in fixes:
        assert " ".join(fix.split()) in shown, fix[:80]
    assert not any(c["clipped"] for c in cells)
    assert not any(s.endswith("...") or s.endswith("\u2026") for s in shown)
