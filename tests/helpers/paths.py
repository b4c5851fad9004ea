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


def engines_python() -> Path:
    """The engine environment's python; a skip on a developer's machine without it, a failure in CI."""
    if not ENGINES_PYTHON.exists():
        msg = (f"engine environment missing: {ENGINES_PYTHON} does not exist; build it with `make engines` "
               "(scripts/engines-env.sh)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + " (CI=true: the oracle tests must run)")
        pytest.skip(msg)
    return ENGINES_PYTHON


# vLLM's CPU build (the real engine) lives in a third environment, built by `make engines` (scripts/vllm-env.sh
# from requirements-vllm.lock); tests/oracles/test_vllm_*.py serve with it (eagle3lab/engines/oracle/vllm_serve.py).
VLLM_PYTHON = Path(os.environ.get("EAGLE3LAB_VLLM_PYTHON", TESTS.parent / ".venv-vllm" / "bin" / "python"))


def vllm_python() -> Path:
    """vLLM's environment's python; a skip on a developer's machine without it, a failure in CI."""
    if not VLLM_PYTHON.exists():
        msg = (f"vLLM environment missing: {VLLM_PYTHON} does not exist; build it with `make engines` "
               "(scripts/vllm-env.sh)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg + " (CI=true: the real-engine tests must run)")
        pytest.skip(msg)
    return VLLM_PYTHON
