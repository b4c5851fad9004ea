"""benchmarks/gpu_smoke.py: its CPU stand-in shape runs end to end (the 8b shape needs a GPU)."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from eagle3lab import bundled

spec = importlib.util.spec_from_file_location("gpu_smoke", bundled.ROOT / "benchmarks" / "gpu_smoke.py")
gpu_smoke = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_smoke)


def test_tiny_shape_reports_every_piece(tmp_path):
    out = tmp_path / "smoke.json"
    assert gpu_smoke.main(["--shape", "tiny", "--prompt-len", "24", "--max-new-tokens", "12", "--out", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["device"] == "cpu" and report["dtype"] == "float32"
    assert report["capture"]["points"] == [2, 4, 5] and report["capture"]["tokens_per_s"] > 0
    assert {"generate", "greedy_loop", "speculative chain 5", "speculative tree 5/4/8"} <= set(report["tokens_per_s"])
    # random weights: acceptance means nothing, but fp32 greedy output must still be the target's own
    assert all(s["identical_to_greedy_loop"] for s in report["speculative"].values())
    sizes = [row["tokens"] for row in report["verify_curve"]]
    assert sizes[0] == 1 and sizes[-1] == 64 and report["costs"]["c"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine the 8b shape runs")
def test_8b_shape_needs_a_gpu(capsys):
    assert gpu_smoke.main(["--shape", "8b"]) == 2
    assert "CUDA" in capsys.readouterr().err
