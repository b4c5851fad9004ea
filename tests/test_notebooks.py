"""Every notebook executes headless on the bundled models without an error and states a summary."""

from __future__ import annotations

import pytest

from eagle3lab.app.workbook import error_outputs, execute_notebook, find_summary, notebook_paths

# Per-notebook limit (seconds per cell); the whole notebook must also fit the pytest timeout.
CELL_TIMEOUT = 600


@pytest.mark.notebook
@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_notebook_executes(path):
    nb = execute_notebook(path, timeout=CELL_TIMEOUT)
    assert error_outputs(nb) == []
    text = find_summary(nb)
    assert text and len(text) > 20, f"{path.name} ran but its summary() is missing or empty"
