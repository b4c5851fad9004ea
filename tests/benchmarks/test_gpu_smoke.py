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
    assert gpu_smoke.main(["--shape", "tiny", "--prompt-len", "24", "--max-new-tokens", "12", "--out", str(out),
                           "--no-doctor"]) == 0
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


def test_the_doctor_step_saves_loadable_models_and_runs_doctor_as_a_user_does(tmp_path, monkeypatch):
    """The models doctor reads back (the target with transformers, the draft in speculators format) and the
    command line of its child; the child itself is timed on the GPU (docs/gpu.md), minutes on this CPU."""
    import subprocess

    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    target, draft = gpu_smoke.build(gpu_smoke.SHAPES["tiny"], torch.device("cpu"), torch.float32)
    target_dir, draft_dir = gpu_smoke.save_models(target, draft, tmp_path)
    again = load_target(target_dir, device="cpu", dtype="bfloat16")
    loaded = load_draft(draft_dir, target=again, device="cpu", dtype="bfloat16")
    assert again.num_layers == 8 and again.tokenizer is not None and loaded.fc.weight.dtype == torch.bfloat16
    assert torch.equal(loaded.fc.weight, draft.fc.weight.to(torch.bfloat16)) and loaded.aux_resid == draft.aux_resid
    seen = {}

    def child(cmd, **kw):
        seen["cmd"] = cmd
        return subprocess.CompletedProcess(cmd, 0, stdout='{"seconds": 1.5, "peak_rss_gib": 0.4}\n', stderr="")

    monkeypatch.setattr(subprocess, "run", child)
    out = gpu_smoke.doctor_step(target_dir, draft_dir, torch.device("cpu"), torch.bfloat16, "--max-prompts 8")
    assert out == {"seconds": 1.5, "peak_rss_gib": 0.4}
    args = seen["cmd"][3:]
    assert args[args.index("--dtype") + 1] == "bfloat16" and args[args.index("--device") + 1] == "cpu"
    assert args[args.index("--target") + 1] == str(target_dir) and args[-2:] == ["--max-prompts", "8"]
