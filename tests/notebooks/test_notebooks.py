"""Every notebook executes headless on the bundled models (once per test run), without an error, and
states a summary whose measured numbers are the ones its run computed (``summary(text, **claims)``).

The notebooks' claims themselves are asserted in ``tests/notebooks/test_nb_*.py`` from the same runs.
"""

from __future__ import annotations

import re

import pytest
from helpers.notebooks import executed_notebook

from eagle3lab.app.workbook import error_outputs, find_claims, find_summary, notebook_paths

_DECIMAL = re.compile(r"(?<![\w.#\[])(-?\d+\.\d+)(?![.\d])")


def _formatted(value, decimals: int) -> set[str]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return set()
    return {f"{value:.{decimals}f}"}


def decimals_not_claimed(text: str, claims: dict) -> list[str]:
    """Decimal numbers in ``text`` that no claim rounds to (at the precision the text shows)."""
    def flat(v):
        if isinstance(v, dict):
            return [x for w in v.values() for x in flat(w)]
        return [x for w in v for x in flat(w)] if isinstance(v, list) else [v]

    values = flat(claims)
    missing = []
    for token in _DECIMAL.findall(text):
        places = len(token.split(".")[1])
        if not any(token in _formatted(v, places) for v in values):
            missing.append(token)
    return missing


def test_decimal_check_sees_an_unclaimed_number():
    assert decimals_not_claimed("tau 1.43 and 0.94x", {"tau": 1.4321, "speedup": 0.9412}) == []
    assert decimals_not_claimed("tau 1.43 and 0.94x", {"tau": 1.4321}) == ["0.94"]
    assert decimals_not_claimed("resid[3] in v0.5.11 or 0.5.10.post1, PR #25454", {}) == []
    assert decimals_not_claimed("c = 0.043", {"side": {"smollm2": {"c": 0.0431}}}) == []   # nested claims


@pytest.mark.notebook
@pytest.mark.timeout(900)
@pytest.mark.parametrize("path", notebook_paths(), ids=lambda p: p.name)
def test_notebook_executes_and_its_summary_states_computed_numbers(path):
    nb = executed_notebook(path.name)
    assert error_outputs(nb) == []
    text = find_summary(nb)
    assert text and len(text) > 20, f"{path.name} ran but its summary() is missing or empty"
    claims = find_claims(nb)
    assert decimals_not_claimed(text, claims) == [], f"{path.name}: numbers in the summary not passed as claims"


def test_a_notebook_session_loads_without_the_models(tmp_path):
    """What make workbook writes beside each notebook: its parameters, models, claims and figures."""
    import json
    import subprocess
    import sys

    from eagle3lab.app.workbook import notebook_parameters, notebook_session

    nb = executed_notebook("05_acceptance_rates.ipynb")
    s = notebook_session(nb, "05_acceptance_rates.ipynb", notebook_parameters(nb))
    s.save(tmp_path / "s")
    code = ("import json, sys; from eagle3lab.app.session import Session; s = Session.load(sys.argv[1]); "
            "print(json.dumps({'p': s.parameters, 'm': s.metrics, 'models': sorted(s.models), 'figs': len(s.figures)}))")
    out = json.loads(subprocess.run([sys.executable, "-c", code, str(tmp_path / "s")], capture_output=True,
                                    text=True, check=True).stdout)
    claims = find_claims(nb)
    assert out["p"]["TRACK"] == "bundled" and out["p"]["NUM_STEPS"] == 5 and out["p"]["TREES"] == [[5, 2, 8], [5, 4, 8]]
    assert out["m"]["tau"]["value"] == claims["tau"] and out["m"]["side.smollm2.c"]["value"] == claims["side"]["smollm2"]["c"]
    assert {"TARGET", "DRAFT", "CASE_DRAFT"} <= set(out["models"]) and out["figs"] >= 8
