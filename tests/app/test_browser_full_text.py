"""Notebook 01's findings table in a real browser: the executed notebook saved as HTML (nbconvert, as
`make workbook` writes it), opened in headless Chromium (Debian's, driven by Playwright), and every finding's
message and fix read back from the rendered table whole, with no cut at pandas' 50 characters and no cell
clipped by its column."""

from __future__ import annotations

import pytest
from helpers.notebooks import executed_notebook

from eagle3lab.app.display import TABLE_CLASS

NOTEBOOK = "01_config_flags.ipynb"


def _chromium() -> str:
    import shutil

    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("the browser test needs Debian's chromium on PATH (sudo apt-get install chromium)")
    return found


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_findings_fix_column_renders_uncut_in_chromium(bundled_models, tmp_path):
    from nbconvert import HTMLExporter
    from playwright.sync_api import sync_playwright

    from eagle3lab import SEED_COMMAND, SEED_DRAFT_CONFIG, SEED_TARGET_CONFIG, resolve_flags

    body, _ = HTMLExporter().from_notebook_node(executed_notebook(NOTEBOOK))
    page_file = tmp_path / "01.html"
    page_file.write_text(body)
    res = resolve_flags("sglang", SEED_COMMAND, target_config=SEED_TARGET_CONFIG, draft_config=SEED_DRAFT_CONFIG,
                        engine_version="0.5.4")
    fixes = [f.fix for f in res.findings if f.fix and len(f.fix) > 50]
    assert fixes, "the premise: some fix is longer than pandas' 50-character cut"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_file.as_uri())
            cells = page.evaluate(f"""() => {{
                // the findings table: the full-text table with a 'fix' column (01's flags tables are full text too)
                const t = [...document.querySelectorAll('table.{TABLE_CLASS}')].find(
                    x => [...x.querySelectorAll('thead th')].some(h => h.innerText.trim() === 'fix'));
                if (!t) return null;
                const col = [...t.querySelectorAll('thead th')].findIndex(h => h.innerText.trim() === 'fix');
                return [...t.querySelectorAll('tbody tr')].map(r => {{
                    const td = r.children[col];
                    return {{text: td.innerText, clipped: td.scrollWidth > td.clientWidth + 1}};
                }});
            }}""")
        finally:
            browser.close()
    assert cells, f"no {TABLE_CLASS} table in the rendered notebook"
    shown = [c["text"].strip() for c in cells]
    for fix in fixes:
        assert " ".join(fix.split()) in [" ".join(s.split()) for s in shown], fix[:80]
    assert not any(c["clipped"] for c in cells)
    assert not any(s.endswith("...") for s in shown)
