"""The real track's draft pipeline (train/build_real.py), end to end at smoke size on SmolLM2."""

from __future__ import annotations

import json

import pytest
import torch

from eagle3lab import bundled
from eagle3lab.models.checkpoint import load_draft
from eagle3lab.train import build_real

pytestmark = pytest.mark.usefixtures("single_thread")


def test_smoke_build_trains_saves_half_precision_measures_and_writes_the_card(real_target, tmp_path):
    (tmp_path / "corpus").symlink_to(bundled.CORPUS)
    run = tmp_path / "run"
    assert build_real.main(["--out", str(tmp_path), "--run-dir", str(run), "--smoke"]) == 0
    model_dir = tmp_path / "models" / build_real.HEALTHY
    facts = json.loads((model_dir / "training.json").read_text())
    acc = json.loads((model_dir / "acceptance.json").read_text())
    assert facts["steps"] == 3 and facts["trained_resid"] == [2, 15, 27] and facts["aux_ids_written"] == [1, 14, 26]
    assert (run / "features.safetensors").exists() and (run / "healthy-run" / "ckpt.pt").exists()
    from safetensors.torch import load_file

    weights = load_file(str(model_dir / "model.safetensors"))
    assert all(t.dtype == torch.float16 for t in weights.values() if t.is_floating_point())   # half precision
    assert not any("embed_tokens" in k for k in weights)                  # the target's embedding is used
    draft = load_draft(model_dir, target=real_target, device="cpu")
    assert draft.under("sglang").aux_resid == (2, 15, 27)                  # SGLang feeds what was trained
    run_ = acc["runs"]["chain 2"]
    assert run_["identical"] == f"{acc['prompts']}/{acc['prompts']}" and 1.0 <= run_["tau"] <= 3.0
    text = (model_dir / "README.md").read_text()
    assert "Q4_1" in text and f"{run_['tau']:.2f}" in text and "| chain 2 |" in text
    # a second build resumes: the features and the finished checkpoint are reused, nothing retrains
    (run / "features.safetensors").unlink()      # a finished run needs no features
    again = build_real.build_healthy(tmp_path, run, smoke=True, progress=False)
    assert again["steps"] == 3 and again["train_seconds"] == facts["train_seconds"]
    assert not (run / "features.safetensors").exists()
