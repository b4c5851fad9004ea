"""The rendered workbook's learner path: glossary links that resolve from build/workbook/, the glossary written
beside the pages and linked from the index, and summaries rendered as markdown (bullets as lists)."""

from __future__ import annotations

import json
import re

from eagle3lab.app.workbook import (
    GLOSSARY,
    GLOSSARY_PAGE,
    NOTEBOOKS,
    NotebookResult,
    notebook_paths,
    render_glossary,
    render_index,
    rewrite_links,
)
from eagle3lab.bundled import ROOT

ANCHOR = re.compile(r"""<a id=["']([\w-]+)["']""")


def test_a_notebook_link_to_the_glossary_points_at_the_page_beside_it(tmp_path):
    body = '<a href="../docs/glossary.md#tau">τ</a> <a href=\'../docs/glossary.md\'>all</a> <a href="../README.md">r</a>'
    out = tmp_path / "build" / "workbook"
    fixed = rewrite_links(body, out)
    assert 'href="glossary.html#tau"' in fixed and "href='glossary.html'" in fixed
    readme = re.search(r'href="([^"]+)">r<', fixed).group(1)
    assert (out / readme).resolve() == (ROOT / "README.md").resolve()
    assert rewrite_links('<a href="https://arxiv.org/abs/2503.01840">x</a>', out).count("arxiv") == 1


def test_every_glossary_link_in_every_notebook_resolves_in_the_rendered_glossary(tmp_path):
    page = render_glossary(tmp_path)
    anchors = set(ANCHOR.findall(page))
    assert anchors == set(ANCHOR.findall(GLOSSARY.read_text())) and len(anchors) >= 25
    linked = set()
    for path in notebook_paths(NOTEBOOKS):
        for cell in json.loads(path.read_text())["cells"]:
            linked |= set(re.findall(r"\.\./docs/glossary\.md#([\w-]+)", "".join(cell["source"])))
    assert linked and linked <= anchors, sorted(linked - anchors)


def test_the_index_links_the_glossary_and_renders_summary_bullets_as_a_list(tmp_path):
    summary = ("The ladder, rung by rung:\n- **flags**: tau 1.09, `--speculative-num-steps 4`\n- wiring: tau 2.50\n\n"
               "See [τ](../docs/glossary.md#tau).")
    page = render_index([NotebookResult("06_case_file.ipynb", "06 · Case file", True, 1.0, summary)], tmp_path)
    assert f"href='{GLOSSARY_PAGE}'" in page
    items = re.findall(r"<li>(.*?)</li>", page, flags=re.S)
    assert len(items) == 2 and "<strong>flags</strong>" in items[0] and "<code>--speculative-num-steps 4</code>" in items[0]
    assert 'href="glossary.html#tau"' in page
