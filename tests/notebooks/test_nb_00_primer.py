"""Notebook 00's EAGLE-3 primer: the paper cited, every glossary link resolving to a defined term, and the
diagram drawn (an image in the executed notebook, its boxes in the order the path runs)."""

from __future__ import annotations

import re

import pytest
from helpers.notebooks import executed_notebook

from eagle3lab import bundled
from eagle3lab.analysis.plots import EAGLE3_PATH

GLOSSARY = bundled.ROOT / "docs" / "glossary.md"
TERMS = ["tau", "ak-ck", "alpha", "steps", "teacher-forced", "norm-before-residual", "recycle", "d2t",
         "resid", "fc", "dual-norm", "recurrence", "verify", "bonus"]
# issue 35: the verdict words, the cost model, decode vs end-to-end speed, EAGLE-3.1 flags, engines and formats,
# the doctor's ladder
LEARNER_TERMS = ["verdicts", "projected", "cost-model", "decode-vs-e2e", "eagle31", "engines", "doctors-ladder"]


def test_the_glossary_defines_every_term_the_brief_names():
    text = GLOSSARY.read_text()
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', text))
    assert set(TERMS) <= anchors, set(TERMS) - anchors
    assert set(LEARNER_TERMS) <= anchors, set(LEARNER_TERMS) - anchors
    assert "2503.01840" in text
    for words in ("beats", "within noise", "loses", "identical", "fc_norm", "norm_output", "norm_before_fc", "v(M)",
                  "end to end", "SGLang", "vLLM", "SpecForge", "speculators", "eagle3lab convert", "one thing per rung"):
        assert words in text, words


def test_the_path_names_every_notebook_and_links_the_glossary():
    import json

    from eagle3lab.app.workbook import NOTEBOOKS, notebook_paths

    intro = "".join(json.loads((NOTEBOOKS / "00_environment.ipynb").read_text())["cells"][0]["source"])
    for path in notebook_paths(NOTEBOOKS)[1:]:
        assert f"(`{path.name[:2]}`)" in intro, f"00's path omits {path.name}"
    assert "](../docs/glossary.md)" in intro and "../docs/glossary.md#doctors-ladder" in intro


def test_the_diagram_runs_the_eagle3_path_in_order():
    names = [name.replace("\n", " ") for name, _ in EAGLE3_PATH]
    assert names == ["target", "resid[a, b, c]", "fc", "dual-norm first layer", "recurrence",
                     "draft vocab (d2t)", "verify", "bonus token"]


@pytest.mark.notebook
@pytest.mark.timeout(600)
def test_the_primer_cites_the_paper_links_the_glossary_and_draws_the_diagram(bundled_models):
    nb = executed_notebook("00_environment.ipynb")
    primer = next(c for c in nb.cells if c.get("id") == "primer01")
    assert "arxiv.org/abs/2503.01840" in primer.source
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', GLOSSARY.read_text()))
    links = re.findall(r"\.\./docs/glossary\.md#([\w-]+)", primer.source)
    assert set(TERMS) <= set(links) and set(links) <= anchors
    diagram = next(c for c in nb.cells if c.get("id") == "primer02")
    assert any("image/png" in o.get("data", {}) for o in diagram.outputs)
    from eagle3lab.app.display import TABLE_CLASS
    from eagle3lab.app.workbook import notebook_paths

    shown = next(c for c in nb.cells if c.get("id") == "e1e5eb67").outputs[-1]["data"]["text/html"]
    assert TABLE_CLASS in shown and all(p.name in shown for p in notebook_paths())   # the map whole, not cut
    first_code = next(c for c in nb.cells if c.cell_type == "code")
    assert "parameters" in first_code.metadata.get("tags", [])
