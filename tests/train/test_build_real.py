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
    features = build_real.feature_path(run, (2, 15, 27))
    model_dir = tmp_path / "models" / build_real.HEALTHY
    facts = json.loads((model_dir / "training.json").read_text())
    acc = json.loads((model_dir / "acceptance.json").read_text())
    assert facts["steps"] == 3 and facts["trained_resid"] == [2, 15, 27] and facts["aux_ids_written"] == [1, 14, 26]
    assert features.exists() and (run / "healthy-run" / "ckpt.pt").exists()
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
    features.unlink()      # a finished run needs no features
    again = build_real.build_draft("healthy", tmp_path, run, smoke=True, progress=False)
    assert again["steps"] == 3 and again["train_seconds"] == facts["train_seconds"]
    assert not features.exists()
    # the case draft: trained on the embedding first with norm_before_residual, shipped with ids
    # SGLang reads as other points; the card measures it as served and with the training wiring restored
    case_dir = tmp_path / "models" / build_real.CASE
    case = json.loads((case_dir / "training.json").read_text())
    assert case["trained_resid"] == [0, 3, 16] and case["aux_ids_written"] == [2, 15, 28]
    assert json.loads((case_dir / "config.json").read_text())["norm_before_residual"] is True
    served = json.loads((case_dir / "acceptance.json").read_text())["served"]
    assert served["as shipped, served by SGLang"] == {"profile": "sglang", "aux_resid": [3, 16, 29],
                                                      "norm_before_residual": False}
    assert served["trained wiring and residual restored"]["aux_resid"] == [0, 3, 16]
    assert "as shipped, served by SGLang: chain 2" in (case_dir / "README.md").read_text()

    # the chat draft: templated conversations answered by the target, the loss on the answers only,
    # measured on the same held-out requests chat-templated and raw, beside the healthy draft
    from eagle3lab.train.feature_cache import load_features

    chat = load_features(build_real.feature_path(run, (2, 15, 27), "chat"))
    assert chat.loss_mask is not None and 0 < int(chat.loss_mask.sum()) < chat.loss_mask.numel()
    first_answer = int(chat.loss_mask[0].nonzero()[0])
    assert real_target.tokenizer.decode(chat.windows[0, :first_answer]).rstrip().endswith("assistant")
    chat_dir = tmp_path / "models" / build_real.CHAT
    runs = json.loads((chat_dir / "acceptance.json").read_text())["runs"]
    assert {k.split(",")[0] for k in runs} == {f"{r}: {d} draft" for r in ("chat template", "raw completion")
                                               for d in ("chat", "healthy")}
    assert all(r["tau_low"] <= r["tau"] <= r["tau_high"] for r in runs.values())
    assert "loss on the answer tokens only" in (chat_dir / "README.md").read_text()
