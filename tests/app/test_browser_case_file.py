"""Notebook 06's tables in JupyterLab itself: the executed notebook (the run the notebook tests share) saved into a
JupyterLab started by test_browser.py's harness, opened once in headless Chromium (Debian's, driven by Playwright) at
1,400 pixels without re-running it. Every long fix is read back from the findings table whole (no cut at pandas' 50
characters, no cell clipped by its column), and the ladder's tau and speed tables render whole: no cell clipped or
cut, each table's right edge inside the notebook's output area (helpers.browser_tables, as for 00, 01, 05 and 08).

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
from helpers.browser_tables import READ_TABLES, assert_whole, table_with
from helpers.notebooks import executed_notebook
from helpers.parameters import parameters_and_code_below
from test_browser import SHOTS, lab  # noqa: F401  (the JupyterLab fixture, reused)

from eagle3lab.app.display import TABLE_CLASS
from eagle3lab.app.workbook import NOTEBOOKS
from eagle3lab.readings.nb06_case_file import RUNG_NAMES, TAU_LABELS, speed_labels

NOTEBOOK = "06_case_file.ipynb"
SAVED_AS = "06_case_file_executed.ipynb"
VIEWPORT = 1400
# the ladder's two tables, each known by its header (the notebook times its rungs end to end)
LADDER_TABLES = {"tau": list(TAU_LABELS.values()), "speed": list(speed_labels("end to end").values())}


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


def _close_left_sidebar(page) -> None:
    """Collapse JupyterLab's left sidebar (the file browser, open by default: 250 pixels of a 1,400-pixel screen),
    so the notebook reads full width, as a reader reading it does."""
    current = page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current")
    if current.count():
        current.first.click()
        page.wait_for_function("() => !document.querySelector('.jp-SideBar.jp-mod-left .lm-TabBar-tab.lm-mod-current')",
                               timeout=10_000)
        page.wait_for_timeout(500)           # let the notebook reflow to its new width


def _read_page(url: str, token: str, chromium: str) -> dict:
    """Open the saved notebook in JupyterLab at 1,400 pixels; read the fix column and every full-text table."""
    from playwright.sync_api import sync_playwright

    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": VIEWPORT, "height": 1000})
        try:
            page.goto(f"{url}/lab/tree/{SAVED_AS}?token={token}")
            page.wait_for_function(f"() => document.querySelector('.jp-Notebook table.{TABLE_CLASS}') !== null",
                                   timeout=120_000)
            page.wait_for_timeout(1000)          # let the remaining outputs render
            _close_left_sidebar(page)
            found = page.evaluate(READ_FIX_COLUMN)
            tables = page.locator(f".jp-Notebook table.{TABLE_CLASS}")
            if found["table"] is not None:
                tables.nth(found["table"]).screenshot(path=str(SHOTS / "06_findings.png"))
            found["tables"] = page.evaluate(READ_TABLES)
            for i, t in enumerate(found["tables"]):
                for name, labels in LADDER_TABLES.items():
                    if set(labels) <= set(t["head"]):
                        tables.nth(i).screenshot(path=str(SHOTS / f"06_ladder_{name}.png"))
        except Exception:
            page.screenshot(path=str(SHOTS / "06_failed.png"), full_page=True)
            raise
        finally:
            browser.close()
    return found


@pytest.fixture(scope="module")
def rendered(bundled_models, chromium_path, lab) -> dict:  # noqa: F811
    """Notebook 06 as JupyterLab renders it, read once for every test here (the shared execution, not a second)."""
    url, token = lab
    _save_trusted(url, token, executed_notebook(NOTEBOOK))
    return _read_page(url, token, chromium_path)


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_findings_fix_column_renders_uncut_in_jupyterlab(rendered):
    fixes = long_fixes()
    assert fixes, "the premise: some fix is longer than pandas' 50-character cut"
    found = rendered
    cells = found["cells"]
    assert cells, f"no {TABLE_CLASS} table with a fix column in notebook 06 as JupyterLab renders it"
    assert found["styled"], "the saved outputs rendered untrusted (full_text's style stripped), not as a live run"
    shown = [" ".join(c["text"].split()) for c in cells]
    for fix in fixes:
        assert " ".join(fix.split()) in shown, fix[:80]
    assert not any(c["clipped"] for c in cells)
    assert not any(s.endswith("...") or s.endswith("\u2026") for s in shown)


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_ladders_tau_and_speed_tables_render_whole_in_jupyterlab(rendered):
    """Issue 35: the ladder split in two (its 20 columns fell off a 1,400-pixel screen): each table shown with its
    labels, no cell clipped or cut, its right edge inside the output area at 1,400 pixels; the tau table shows every
    rung, the speed table the timed ones in the same order."""
    assert rendered["styled"], "the saved outputs rendered untrusted (full_text's style stripped), not as a live run"
    for labels in LADDER_TABLES.values():
        assert_whole([table_with(rendered["tables"], labels)])   # a failure names its right edge and its area's
    rungs = [f"{i + 1}. {name}" for i, name in enumerate(RUNG_NAMES.values())]
    assert table_with(rendered["tables"], LADDER_TABLES["tau"])["rows"] == rungs
    timed = table_with(rendered["tables"], LADDER_TABLES["speed"])["rows"]
    assert timed and timed[0] == rungs[0] and timed == [r for r in rungs if r in timed], timed
