"""Where the tests' committed inputs are, and the engines' second environment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent.parent
FIXTURES = TESTS / "fixtures"
# Real published configs for parser tests, copied into the checkout (SOURCES.md says where each came from).
REAL_CONFIGS = FIXTURES / "real-configs"

# The engines' own code (speculators, SpecForge, SGLang) lives in a second environment, built by
# `make engines` (scripts/engines-env.sh from requirements-engines.lock); tests/oracles/ run scripts in it.
ENGINES_PYTHON = Path(os.environ.get("EAGLE3LAB_ENGINES_PYTHON", TESTS.parent / ".venv-engines" / "bin" / "python"))


def _required_python(python: Path, what: str, script: str, tests: str) -> Path:
    """``python`` if it exists; else a skip on a developer's machine, a failure in CI (CI=true)."""
    if not python.exists():
        msg = f"{what} missing: {python} does not exist; build it with `make engines` ({script})"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + f" (CI=true: the {tests} tests must run)")
        pytest.skip(msg)
    return python


def engines_python() -> Path:
    """The engine environment's python; a skip on a developer's machine without it, a failure in CI."""
    return _required_python(ENGINES_PYTHON, "engine environment", "scripts/engines-env.sh", "oracle")


# vLLM's CPU build (the real engine) lives in a third environment, built by `make engines` (scripts/vllm-env.sh
# from requirements-vllm.lock); tests/oracles/test_vllm_*.py serve with it (eagle3lab/oracle/vllm_serve.py).
VLLM_PYTHON = Path(os.environ.get("EAGLE3LAB_VLLM_PYTHON", TESTS.parent / ".venv-vllm" / "bin" / "python"))


def vllm_python() -> Path:
    """vLLM's environment's python; a skip on a developer's machine without it, a failure in CI."""
    return _required_python(VLLM_PYTHON, "vLLM environment", "scripts/vllm-env.sh", "real-engine")


SHIM = Path(__file__).resolve().parents[2] / "eagle3lab" / "oracle" / "absent_modules.py"


def run_engine_job(script: Path, cases: list[dict], job: Path) -> dict:
    """Run ``script`` in the engine environment on ``{"absent_modules": SHIM, "cases": cases}`` written to ``job``;
    its answer is the last line of stdout (JSON). The engine env never sees eagle3lab (no PYTHONPATH)."""
    import json
    import subprocess

    job.write_text(json.dumps({"absent_modules": str(SHIM), "cases": cases}))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run([str(engines_python()), str(script), str(job)], capture_output=True, text=True, env=env,
                          timeout=600)
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.fail(f"{script.name} failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
