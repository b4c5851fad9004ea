"""Full-text tables as a browser renders them (issue 35: "no table cut anywhere"), shared by the nbconvert pages of
test_browser_tables.py and the live JupyterLab of test_browser_case_file.py: one script reads every ``full_text``
table on a page, one check says each is whole."""

from __future__ import annotations

from eagle3lab.app.display import TABLE_CLASS

# per table: its header cells, its rows' first cells (the index) and its text, its right edge against the output area that holds it (and the window, where
# the area is wider than the screen), cells whose text overflows their column, and cells cut at pandas' "..."
READ_TABLES = f"""() => [...document.querySelectorAll('table.{TABLE_CLASS}')].map(t => {{
    const area = t.closest('.jp-OutputArea-output, .output_area, .jp-RenderedHTMLCommon') || document.body;
    const right = t.getBoundingClientRect().right;
    const limit = Math.min(area.getBoundingClientRect().right, document.documentElement.clientWidth);
    return {{
        head: [...t.querySelectorAll('thead th')].map(h => h.innerText.trim()),
        rows: [...t.querySelectorAll('tbody tr')].map(r => r.children[0].innerText.trim()),
        text: t.innerText,
        right: Math.round(right),
        limit: Math.round(limit),
        too_wide: right > limit + 1,
        clipped: [...t.querySelectorAll('td, th')].filter(c => c.scrollWidth > c.clientWidth + 1).length,
        cut: [...t.querySelectorAll('td')].filter(c => c.innerText.trim().endsWith('...')).length}};
}})"""


def assert_whole(tables: list[dict]) -> None:
    """Every table read by ``READ_TABLES`` whole: no cell clipped or cut, its right edge inside its area."""
    assert tables, f"no {TABLE_CLASS} table in the rendered notebook"
    for t in tables:
        assert not t["clipped"] and not t["cut"] and not t["too_wide"], (t["text"][:200], t)


def table_with(tables: list[dict], labels) -> dict:
    """The one table whose header shows every label in ``labels``."""
    found = [t for t in tables if set(labels) <= set(t["head"])]
    assert len(found) == 1, (sorted(labels), [t["head"] for t in tables])
    return found[0]
