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
