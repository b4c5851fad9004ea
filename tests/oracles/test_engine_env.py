"""The engine environment holds exactly the pinned engine versions the oracle tests speak for."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers.paths import engines_python

LOCK = Path(__file__).resolve().parents[2] / "requirements-engines.lock"
ENGINES = ("speculators", "specforge", "sglang", "transformers", "torch")


def test_engine_env_has_the_locked_versions():
    pins = dict(line.split("==") for line in LOCK.read_text().splitlines() if "==" in line and not line.startswith("#"))
    code = ("import json, importlib.metadata as m; "
            f"print(json.dumps({{n: m.version(n) for n in {list(ENGINES)!r}}}))")
    out = subprocess.run([str(engines_python()), "-c", code], capture_output=True, text=True, check=True).stdout
    found = json.loads(out)
    assert {n: found[n].split("+")[0] for n in ENGINES} == {n: pins[n] for n in ENGINES}
    assert pins["speculators"] == "0.9.0" and pins["specforge"] == "0.2.0" and pins["sglang"] == "0.5.23"
