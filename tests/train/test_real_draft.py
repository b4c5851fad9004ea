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


def _committed(name):
    folder = bundled.MODELS / name
    if not (folder / "config.json").exists():
        pytest.fail(f"{folder} is missing: run `make data-real` (the drafts are committed; a checkout should have them)")
    return (folder, json.loads((folder / "training.json").read_text()),
            json.loads((folder / "acceptance.json").read_text()), (folder / "README.md").read_text())


def test_the_committed_case_draft_is_the_seed_case_and_its_fix_recovers(real_target):
    folder, facts, acc, card = _committed(build_real.CASE)
    assert facts["trained_resid"] == [0, 3, 16] and facts["aux_ids_written"] == [2, 15, 28]
    assert facts["config"]["norm_before_residual"] is True and facts["steps"] == build_real.CASE_TRAIN["steps"]
    runs = acc["runs"]
    for k in build_real.ACCEPT_CHAINS:
        shipped = runs[f"as shipped, served by SGLang: chain {k}"]
        fixed = runs[f"trained wiring and residual restored: chain {k}"]
        assert fixed["tau_low"] > shipped["tau_high"], (k, shipped, fixed)     # beyond the intervals
        assert shipped["vs_generate"] < 1.0                                  # as shipped: slower than generate
        assert fixed["vs_generate"] > shipped["vs_generate"]
        for run in (shipped, fixed):
            assert run["identical"] == f"{acc['prompts']}/{acc['prompts']}"
    for name, run in runs.items():
        assert f"| {name} | {run['tau']:.2f} | [{run['tau_low']:.2f}, {run['tau_high']:.2f}] |" in card
    draft = load_draft(folder, target=real_target, device="cpu")
    served = draft.under("sglang")
    assert served.aux_resid == (3, 16, 29) and served.settings.norm_before_residual is False
    fixed = draft.rewired(aux_resid=(0, 3, 16), norm_before_residual=True).under("vllm")
    prompt = bundled.load_prompts(n=1, length="short")[0]
    ref = hf_generate(real_target, prompt, max_new_tokens=24).tokens
    assert speculative_generate(real_target, fixed, prompt, num_steps=2, max_new_tokens=24).tokens == ref


def test_the_committed_chat_draft_and_its_card(real_target):
    folder, facts, acc, card = _committed(build_real.CHAT)
    assert facts["trained_resid"] == [2, 15, 27] and "loss on the answer tokens only" in facts["data"]
    for name, run in acc["runs"].items():
        assert f"| {name} | {run['tau']:.2f} |" in card and run["identical"] == f"{acc['prompts']}/{acc['prompts']}"
    draft = load_draft(folder, target=real_target, device="cpu")
    assert draft.under("sglang").aux_resid == (2, 15, 27)
