"""``eagle3lab serve-check`` without vLLM: it says how to install it and exits 3 (docs/cli/serve-check.md).

The command's real runs (vLLM serving, our emulation beside it) are tests/oracles/test_vllm_serve.py and
test_vllm_doctor.py, which use the same analysis module (eagle3lab.doctor.serve_check).
"""

from __future__ import annotations

import sys

from eagle3lab.app.cli import main
from eagle3lab.app.commands.serve_check import ENGINE_MISSING


def test_without_vllm_it_says_how_to_install_it(capsys, tmp_path):
    missing = tmp_path / "no-venv" / "bin" / "python"
    assert main(["serve-check", "--engine", "vllm", "--engine-python", str(missing)]) == ENGINE_MISSING == 3
    err = capsys.readouterr().err
    assert "vLLM is not installed" in err and str(missing) in err
    assert "make engines" in err and "scripts/vllm-env.sh" in err and "--engine-python" in err


def test_a_python_without_vllm_is_named(capsys, bundled_models):
    """A python that exists but cannot import vLLM (this test's own): the serve script answers so, and the
    command exits 3 naming that python, before any emulation runs."""
    code = main(["serve-check", "--engine", "vllm", "--engine-python", sys.executable, "--max-new-tokens", "2"])
    err = capsys.readouterr().err
    assert code == ENGINE_MISSING, err
    assert "vLLM does not import in" in err and "ModuleNotFoundError" in err and "make engines" in err


def test_bad_num_steps_is_bad_input(capsys, tmp_path):
    assert main(["serve-check", "--num-steps", "0", "--engine-python", sys.executable]) == 2
    assert "--num-steps" in capsys.readouterr().err


def test_the_served_runs_rejection_method_is_stated_with_the_prediction():
    """vllm_serve.py writes no rejection key and serves greedily: vLLM 0.32 runs 'standard' at temperature 0,
    where the emulation predicts the counters exactly; a synthetic run's counters would not measure the draft."""
    from eagle3lab.doctor.serve_check import rejection_terms

    served = rejection_terms(None, "0.32.0")
    assert (served["method"], served["draft_sample"], served["prediction"], served["measures_draft"]) == (
        "standard", "greedy", "exact", True)
    synthetic = rejection_terms({"num_speculative_tokens": 4, "rejection_sample_method": "synthetic",
                                 "synthetic_acceptance_rates": [0.8, 0.6, 0.4, 0.2]}, "0.32.0")
    assert synthetic["prediction"] == "replayed" and synthetic["measures_draft"] is False
    assert synthetic["synthetic_tau"] == 3.0
    assert rejection_terms(None, "0.20.0")["method"] == "strict"   # MRv2's default before #40651
