#!/usr/bin/env bash
# Builds .venv-engines: speculators, SpecForge and SGLang at pinned versions, the oracles the parity
# tests in tests/oracles/ compare our arithmetic and rules with. Run by `make engines` (and so by
# `make test`); about one minute on a clean machine (torch comes from the same local file as ours).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=.venv-engines
test -x "$VENV/bin/python" || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-engines.lock
# The oracle modules must import; a failure here names the package instead of failing tests later.
"$VENV/bin/python" - <<'PYEOF'
import importlib
for name in ("speculators.models.eagle3.core", "specforge.modeling.draft.llama3_eagle", "sglang.srt.server_args"):
    importlib.import_module(name)
PYEOF
