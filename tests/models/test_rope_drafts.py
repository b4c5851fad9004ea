"""Tiny yarn-RoPE and mrope drafts in each engine's key layout: written, loaded (RoPE applied as the
family's trainer applies it), lossless against the tiny target, and saved back unchanged."""

from __future__ import annotations

import functools
import json
import math

import pytest
import torch
from helpers.tiny_models import one_thread, prompts, tiny_draft, tiny_spec_target
from safetensors.torch import load_file

from eagle3lab.decoding.speculative import speculative_generate, target_greedy
from eagle3lab.models.checkpoint import load_draft, save_draft

pytestmark = pytest.mark.usefixtures("single_thread")

# SpecForge's DeepSeek-V2-Lite yarn (sgl-project__SpecForge__deepseek-v2-lite-eagle3.json) and TorchSpec's Kimi
# yarn, on a 16-token original context so the tiny prompts run past it; Qwen2.5-VL's mrope for head_dim 8
ROPES = {
    "yarn-deepseek": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 0.707,
                      "original_max_position_embeddings": 16, "rope_type": "yarn"},
    "yarn-kimi": {"beta_fast": 1.0, "beta_slow": 1.0, "factor": 64.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                  "original_max_position_embeddings": 16, "type": "yarn"},
    "yarn-no-mscale": {"rope_type": "yarn", "factor": 8.0, "original_max_position_embeddings": 16},
    "mrope": {"type": "mrope", "mrope_section": [1, 1, 2]},
}
LAYOUT = {"speculators": "layers.0.", "sglang": "midlayer."}
TRAINER = {"speculators": "speculators", "sglang": "specforge"}


@functools.cache
def target():
    with one_thread():
        return tiny_spec_target()


@functools.cache
def draft(name):
    with one_thread():
        return tiny_draft(target(), train_steps=40, ids=(1, 2, 3), head_dim=8, rope_scaling=dict(ROPES[name]),
                          max_position_embeddings=512)


@pytest.mark.parametrize("fmt", list(LAYOUT))
@pytest.mark.parametrize("name", list(ROPES))
def test_written_loaded_lossless_and_saved_back_unchanged(tmp_path, name, fmt):
    original = draft(name)
    first = tmp_path / "first"
    save_draft(original, first, fmt, num_target_layers=4)
    config = json.loads((first / "config.json").read_text())
    layer = config["transformer_layer_config"] if fmt == "speculators" else config
    assert layer["rope_scaling"] == ROPES[name]                       # kept exactly, key spelling included
    tensors = load_file(str(first / "model.safetensors"))
    assert any(k.startswith(LAYOUT[fmt]) for k in tensors) and not any(
        k.startswith(other) for f, other in LAYOUT.items() if f != fmt for k in tensors)

    loaded = load_draft(first, target=target(), device="cpu")
    # a trainer that cannot build the RoPE cannot have trained it: the draft runs as the format's server
    cannot = {("mrope", "speculators"): ("vllm", "KeyError"),   # transformers' LlamaRotaryEmbedding has no mrope
              ("yarn-no-mscale", "sglang"): ("sglang", "without rope_scaling.beta_fast")}   # None in SpecForge's yarn
    profile, why = cannot.get((name, fmt), (TRAINER[fmt], None))
    assert loaded.format == fmt and loaded.profile.name == profile
    if why:
        assert any(w.code == "PROFILE_PASSED_OVER" and why in w.text for w in loaded.load_report.warnings), \
            loaded.load_report.warnings
        assert "does not apply" in loaded.under(TRAINER[fmt]).settings.decisions["rope_scaling"].how or \
            name == "yarn-no-mscale"
    kind = "mrope" if name == "mrope" else "yarn"
    assert loaded.rope.kind == kind and loaded.settings.decisions["rope_scaling"].value == kind
    # the yarn attention factor: transformers' (speculators, SGLang 0.5.16+) and SpecForge's mscale ratio agree
    expected = {"yarn-deepseek": 1.0, "yarn-kimi": 1.0, "yarn-no-mscale": 1 + 0.1 * math.log(8.0), "mrope": 1.0}
    assert loaded.rope.attention_scaling == pytest.approx(expected[name])
    # same weights, same forward under the same engine (SpecForge runs the target's embedding)
    ids, aux = torch.randint(0, 64, (1, 20)), torch.randn(1, 20, 96)
    ref = original.bound(target_embedding=target().model.get_input_embeddings().weight.detach()).under(loaded.profile)
    torch.testing.assert_close(loaded(ids, aux).logits, ref(ids, aux).logits, atol=1e-5, rtol=1e-5)

    # lossless: greedy speculative decoding equals the target's own greedy decode, past the original context
    for prompt in prompts(2, length=10):
        out = speculative_generate(target(), loaded, prompt, num_steps=3, max_new_tokens=24, eos_token_id=None)
        assert out.tokens == target_greedy(target(), prompt, 24, eos_token_id=None).tokens
    if fmt == "speculators":   # run as trained, the draft is really used (SpecForge swaps in the target's embedding)
        assert sum(r.accepted for r in out.rounds) > 0

    second = tmp_path / "second"
    save_draft(loaded, second, fmt, num_target_layers=4)
    assert json.loads((second / "config.json").read_text()) == config
    again = load_file(str(second / "model.safetensors"))
    assert again.keys() == tensors.keys() and all(torch.equal(again[k], tensors[k]) for k in tensors)


def test_the_rope_changes_what_the_draft_proposes():
    """A yarn draft run as plain RoPE gives other logits: the RoPE really enters the loaded draft."""
    d = draft("yarn-deepseek")
    plain = d.rewired()
    plain.rope = type(d.rope)(d.config.head_dim, d.config.rope_theta, None, d.config.max_position_embeddings)
    plain._rope_table = {}
    ids, aux = torch.randint(0, 64, (1, 30)), torch.randn(1, 30, 96)
    assert (d(ids, aux).logits - plain(ids, aux).logits).abs().max() > 1e-3
