"""Notebooks 00, 01, 05 and 08 in a real browser (issue 35: "no table cut anywhere"): each executed notebook saved as HTML
(nbconvert, as `eagle3lab workbook` writes it), opened in headless Chromium (Debian's, driven by Playwright) at
1,400 pixels, and every full-text table read back: no cell clipped by its column, no text cut at pandas' 50
characters ("..."), no table wider than the output area that holds it. 00's notebook map shows every notebook's
title whole; 01's first flags table shows every setting; 08's curve tables show only the columns a reader weighs. 06 is
covered by test_browser_case_file.py."""

from __future__ import annotations

import os
import shutil

import pytest
from helpers.browser_tables import READ_TABLES, assert_whole
from helpers.notebooks import executed_notebook

from eagle3lab.app.workbook import notebook_paths, notebook_title


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    msg = "the browser test needs Debian's chromium on PATH: `make install` provides it (scripts/install-system.sh)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(msg)
    pytest.skip(msg)


def _tables(name: str, tmp_path) -> list[dict]:
    from nbconvert import HTMLExporter
    from playwright.sync_api import sync_playwright

    body, _ = HTMLExporter().from_notebook_node(executed_notebook(name))
    page_file = tmp_path / f"{name}.html"
    page_file.write_text(body)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=["--no-sandbox", "--disable-gpu"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_file.as_uri())
            return page.evaluate(READ_TABLES)
        finally:
            browser.close()


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_notebook_map_of_00_renders_whole_in_chromium(bundled_models, tmp_path):
    tables = _tables("00_environment.ipynb", tmp_path)
    assert_whole(tables)
    shown = " ".join(" ".join(t["text"].split()) for t in tables)
    for path in notebook_paths():
        assert " ".join(notebook_title(path).split()) in shown, path.name


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_first_flags_table_of_01_renders_whole_in_chromium(bundled_models, tmp_path):
    from eagle3lab import SEED_COMMAND, SEED_DRAFT_CONFIG, SEED_TARGET_CONFIG, resolve_flags

    tables = _tables("01_config_flags.ipynb", tmp_path)
    assert_whole(tables)
    res = resolve_flags("sglang", SEED_COMMAND, target_config=SEED_TARGET_CONFIG, draft_config=SEED_DRAFT_CONFIG,
                        engine_version="0.5.11")
    first = " ".join(tables[0]["text"].split())
    long_cells = [v for v in res.table().to_numpy().ravel() if len(str(v)) > 50]
    assert long_cells, "the premise: a cell of the flags table is longer than pandas' 50-character cut"
    for setting, row in res.table().iterrows():       # every setting and every long cell, whole
        assert str(setting) in first
        for value in row:
            text = " ".join(str(value).split())
            if len(text) > 50:
                assert text in first, text[:80]


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_curve_tables_of_08_render_whole_in_chromium(bundled_models, tmp_path):
    """08's section 2 shows only the columns a reader weighs (reading.bins_table: no column no bin fills), and every
    table fits the output area at 1,400 pixels."""
    tables = _tables("08_long_context.ipynb", tmp_path)
    assert_whole(tables)
    header = tables[0]["text"].splitlines()[0]
    for column in ("bin", "tau (tokens per round)", "change from the bin before", "vs 0-512 (trained level)"):
        assert column in header, column
    for dropped in ("change_units", "vs_reference", "past_window", "NaN"):
        assert dropped not in tables[0]["text"], dropped


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_tables_of_05_render_whole_in_chromium(bundled_models, tmp_path):
    """05's full-text tables (counters, chains, trees, speeds, the what-if, the tracks) fit at 1,400 pixels."""
    assert_whole(_tables("05_acceptance_rates.ipynb", tmp_path))
