"""The committed SmolLM2 draft (data/models/smollm2-draft-healthy, `make data-real`): it loads for the real
target, SGLang feeds it what it was trained on, it decodes losslessly, and its card states its own numbers."""

from __future__ import annotations

import json

import pytest

from eagle3lab import bundled
from eagle3lab.decoding.speculative import hf_generate, speculative_generate
from eagle3lab.models.checkpoint import load_draft
from eagle3lab.train import build_real

pytestmark = pytest.mark.usefixtures("single_thread")
FOLDER = bundled.MODELS / build_real.HEALTHY


def test_the_committed_real_draft(real_target):
    if not (FOLDER / "config.json").exists():
        pytest.fail(f"{FOLDER} is missing: run `make data-real` (the draft is committed; a checkout should have it)")
    facts = json.loads((FOLDER / "training.json").read_text())
    acc = json.loads((FOLDER / "acceptance.json").read_text())
    card = (FOLDER / "README.md").read_text()
    assert facts["steps"] == build_real.HEALTHY_TRAIN["steps"] and facts["target"] == build_real.TARGET
    for name, run in acc["runs"].items():   # the card shows the measured numbers, all lossless
        assert f"| {name} | {run['tau']:.2f} |" in card and run["identical"] == f"{acc['prompts']}/{acc['prompts']}"
        assert run["tau"] > 1.2, (name, run)        # better than an untrained draft (about 1.0)
    draft = load_draft(FOLDER, target=real_target, device="cpu")
    assert draft.under("sglang").aux_resid == tuple(facts["trained_resid"])
    for prompt in bundled.load_prompts(n=2, length="short"):
        ref = hf_generate(real_target, prompt, max_new_tokens=24).tokens
        out = speculative_generate(real_target, draft, prompt, num_steps=2, max_new_tokens=24)
        assert out.tokens == ref and out.tau > 1.0
