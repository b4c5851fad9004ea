"""Notebook 01's cross-check cell, asserted from the notebook's own run.

The kernel that runs the notebooks here is the project's own environment, which has no SGLang: the cell
must say so rather than fail or claim agreement. With SGLang installed the same call
(``eagle3lab.engines.oracle.cross_check.cross_check``) is asserted in tests/engines/test_flags_cross_check.py
and tests/oracles/test_sglang_flags_parity.py.
"""

from __future__ import annotations

import importlib.util

import pytest
from helpers.notebooks import executed_notebook


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_cross_check_cell_says_when_no_engine_is_installed(bundled_models):
    assert importlib.util.find_spec("sglang") is None  # the premise: this kernel has no SGLang
    nb = executed_notebook("01_config_flags.ipynb")
    cell = next(c for c in nb.cells if c.get("id") == "crosschk2")
    text = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
    assert "No sglang installed in " in text
    assert "nothing to cross-check" in text
    md = next(c for c in nb.cells if c.get("id") == "crosschk1").source
    assert "--cross-check" in md and "Without SGLang there, it says so." in md


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_findings_table_shows_every_message_and_fix_whole(bundled_models):
    from eagle3lab.app.display import TABLE_CLASS

    nb = executed_notebook("01_config_flags.ipynb")
    cell = next(c for c in nb.cells if c.get("id") == "5b9e9576")
    html = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
    assert TABLE_CLASS in html
    from eagle3lab import SEED_COMMAND, SEED_DRAFT_CONFIG, SEED_TARGET_CONFIG, resolve_flags

    res = resolve_flags("sglang", SEED_COMMAND, target_config=SEED_TARGET_CONFIG, draft_config=SEED_DRAFT_CONFIG,
                        engine_version="0.5.4")
    import html as html_lib

    long_texts = [t for f in res.findings for t in (f.message, f.fix) if t and len(t) > 50]
    assert long_texts and all(html_lib.escape(t, quote=False) in html for t in long_texts)
    widget_cell = next(c for c in nb.cells if c.get("id") == "02e32819")
    assert any(TABLE_CLASS in o.get("data", {}).get("text/html", "") for o in widget_cell.outputs)


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_the_summary_verdict_follows_the_measured_taus(bundled_models):
    from helpers.notebooks import notebook_claims, notebook_summary

    claims, text = notebook_claims("01_config_flags.ipynb"), notebook_summary("01_config_flags.ipynb")
    assert claims["fixed_longer"] == (claims["tau_fixed"] > claims["tau_as_given"])
    assert claims["fixed_longer"]          # the bundled healthy draft: the fixed chain accepts more
    assert f"topk 1 {claims['tau_fixed']:.2f}, a longer accept length" in text
    assert claims["tau_as_given"] <= claims["max_accept_length"]


def test_the_text_points_at_the_notebook_that_measures_the_cost_and_the_parameters_are_complete():
    import json

    from eagle3lab import bundled

    cells = json.loads((bundled.ROOT / "notebooks" / "01_config_flags.ipynb").read_text())["cells"]
    text = "".join("".join(c["source"]) for c in cells)
    assert "notebook `02` measures the cost" not in text and "notebook `03`\nmeasures what feeding" in text
    params = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
    assert all(k in "".join(cells[params]["source"]) for k in ("DTYPE", "DEVICE_MAP", "TRUST_REMOTE_CODE = False"))
    below = "".join("".join(c["source"]) for c in cells[params + 1:] if c["cell_type"] == "code")
    for literal in ('"2026-06-01"', "render(2, 4, 16)", "ALPHA = ", "Kimi"):
        assert literal not in below, literal
