"""``eagle3lab serve-check`` without vLLM: it says how to install it and exits 3 (docs/cli/serve-check.md); and
``--profile-out`` with a stand-in for vLLM's serve script (the file written, the comparison printed).

The command's real runs (vLLM serving, our emulation beside it) are tests/oracles/test_vllm_serve.py and
test_vllm_doctor.py, which use the same analysis module (eagle3lab.doctor.serve_check).
"""

from __future__ import annotations

import json
import sys

import pytest

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


def _stand_in_vllm(fewer_at_last: int = 0):
    """A stand-in for vLLM's serve script that answers with our own emulation's tokens and counters (as a vLLM that
    agrees would), or with ``fewer_at_last`` rounds fewer accepting at the last position: the plumbing of
    ``--profile-out`` without vLLM (the real counters: tests/oracles/test_vllm_serve.py)."""
    from eagle3lab.doctor import serve_check as sc
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    def run_vllm(jobs, engine_python=None, timeout=1800):
        base, job = jobs
        target = load_target(job["target"], device="cpu")
        draft = load_draft(job["draft"], target=target, device="cpu")
        K = job["num_speculative_tokens"]
        ours = sc.emulate(target, draft, job["prompts"], num_steps=K, max_new_tokens=job["max_tokens"],
                          engine_version="0.32.0", engine_platform="cpu")
        per_pos = list(ours["accepted_per_pos"])
        per_pos[-1] -= fewer_at_last
        counters = {"vllm:spec_decode_num_drafts": ours["num_drafts"],
                    "vllm:spec_decode_num_draft_tokens": ours["num_draft_tokens"],
                    "vllm:spec_decode_num_accepted_tokens": ours["num_accepted_tokens"] - fewer_at_last,
                    "vllm:spec_decode_num_accepted_tokens_per_pos": per_pos}
        served = {"name": job["name"], "target": job["target"], "draft": job["draft"], "outputs": ours["tokens"],
                  "counters": counters, "aux_layers": sorted(ours["aux_resid"]), "aux_layers_source": "draft config",
                  "runner": "stand-in", "error": None}
        return {"version": "0.32.0", "platform": "cpu",
                "jobs": [{**served, "name": base["name"], "draft": None, "counters": None}, served]}
    return run_vllm


@pytest.fixture
def prompts_file(tmp_path):
    from eagle3lab.bundled import load_prompts

    path = tmp_path / "prompts.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in load_prompts(kind="code", n=3)))
    return path


ARGS = ["serve-check", "--engine-python", sys.executable, "--num-steps", "3", "--max-new-tokens", "12"]


@pytest.mark.usefixtures("bundled_models", "single_thread")
def test_profile_out_writes_the_served_profile_and_prints_it_beside_the_emulated_one(monkeypatch, capsys, tmp_path,
                                                                                      prompts_file):
    from eagle3lab.analysis.accept_profile import SCHEMA_VERSION, AcceptanceProfile
    from eagle3lab.doctor import serve_check as sc

    monkeypatch.setattr(sc, "run_vllm", _stand_in_vllm())
    out = tmp_path / "served_profile.json"
    assert main([*ARGS, "--prompts", str(prompts_file), "--profile-out", str(out)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["schema_version"] == SCHEMA_VERSION and data["num_speculative_tokens"] == 3
    profile = AcceptanceProfile.from_json(data)
    c = profile.conditions
    assert (c.measured_by, c.engine, c.engine_version, c.engine_platform) == ("real", "vllm", "0.32.0", "cpu")
    assert c.prompts == 3 and c.output_lengths == (12, 12, 12) and c.prompt_source.endswith("prompts.jsonl")
    assert profile.tau.units == 1          # aggregate counters: one unit, the interval is the point
    assert "vLLM's counters written to" in printed and "marginal 3" in printed and "tau" in printed
    # a vLLM that agrees: every difference 0 and inside the emulated interval
    assert main([*ARGS, "--prompts", str(prompts_file), "--profile-out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    rows = {r["quantity"]: r for r in report["profile_comparison"]}
    assert list(rows) == [f"conditional {k}" for k in (1, 2, 3)] + [f"marginal {k}" for k in (1, 2, 3)] + ["tau"]
    assert all(r["real_minus_emulated"] == 0 and r["in_interval"] for r in rows.values())
    assert report["profile"]["mean_accept_length"] == pytest.approx(report["vllm"]["tau"], abs=1e-6)


@pytest.mark.usefixtures("bundled_models", "single_thread")
def test_a_served_profile_that_differs_shows_where(monkeypatch, capsys, tmp_path, prompts_file):
    from eagle3lab.doctor import serve_check as sc

    monkeypatch.setattr(sc, "run_vllm", _stand_in_vllm(fewer_at_last=2))
    out = tmp_path / "p.json"
    assert main([*ARGS, "--prompts", str(prompts_file), "--profile-out", str(out), "--json"]) == 1   # DISAGREES
    report = json.loads(capsys.readouterr().out)
    rows = {r["quantity"]: r for r in report["profile_comparison"]}
    drafts = report["vllm"]["num_drafts"]
    assert rows["marginal 3"]["real_minus_emulated"] == pytest.approx(-2 / drafts)
    assert rows["tau"]["real_minus_emulated"] == pytest.approx(-2 / drafts)
    assert all(rows[f"marginal {k}"]["real_minus_emulated"] == 0 for k in (1, 2))
    assert json.loads(out.read_text())["marginal_accept_rates"][2] == pytest.approx(
        rows["marginal 3"]["real"], abs=1e-6)

