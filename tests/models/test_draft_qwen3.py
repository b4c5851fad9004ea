"""Qwen3 drafts (speculators ``--draft-arch qwen3``: an RMSNorm over each q and k head before RoPE,
served by vLLM's qwen3_eagle3.py): attention parity with transformers' Qwen3Attention, the forward
against a transformers-module reference, lossless decoding, speculators checkpoints, and the
engines that drop or cannot load the q/k norms."""

from __future__ import annotations

import json

import pytest
import torch
from family_cases import (
    QWEN3,
    assert_matches_reference,
    hf_attention,
    hf_reference,
    lossless,
    target,
    trained,
)
from helpers.paths import REAL_CONFIGS
from safetensors.torch import load_file

from eagle3lab.errors import Eagle3LabError
from eagle3lab.findings import codes
from eagle3lab.models import checkpoint_formats as cf
from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft, save_draft
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.draft_attention import Attention, Qwen3Attention
from eagle3lab.models.families import family_of

pytestmark = pytest.mark.usefixtures("single_thread")


def test_attention_matches_transformers_qwen3_attention():
    cfg = DraftConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
                      vocab_size=64, rope_theta=1e6, **QWEN3)
    torch.manual_seed(0)
    draft = Eagle3Draft(cfg, profile="vllm")
    with torch.no_grad():
        for p in draft.parameters():
            p.normal_(0, 0.3)
    mine = draft.layers[0].self_attn
    prefix = "layers.0.self_attn."
    theirs, rotary = hf_attention(draft, {k[len(prefix):]: v for k, v in draft.state_dict().items()
                                          if k.startswith(prefix)})
    x = torch.randn(2, 6, 64)
    with torch.no_grad():
        cos, sin = draft._rope(0, 6, None, torch.float32, x.device)
        ours = mine(x, draft.settings, cos, sin, torch.ones(6, 6, dtype=torch.bool).tril(), None)
        ref, _ = theirs(x, rotary(x, torch.arange(6)[None].expand(2, -1)),
                        torch.full((6, 6), float("-inf")).triu(1)[None, None])
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    with torch.no_grad():   # the norms matter: without them the answer moves
        dropped = mine(x, draft.under("sglang").settings, cos, sin, torch.ones(6, 6, dtype=torch.bool).tril(), None)
    assert (dropped - ref).abs().max() > 1e-2


def test_the_qk_norms_are_the_qwen3_familys_own_attention_class():
    # the family registry picks the class; Llama's attention carries no q/k norm weights at all
    assert family_of("qwen3").attention_class is Qwen3Attention and family_of("llama").attention_class is Attention
    llama = Eagle3Draft(DraftConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=64))
    assert type(llama.layers[0].self_attn) is Attention
    assert not [k for k in llama.state_dict() if "q_norm" in k or "k_norm" in k]


def test_forward_matches_the_reference_and_sglang_drops_the_norms():
    draft = trained("qwen3")
    ids, aux, logits = assert_matches_reference(draft)
    # SGLang's llama_eagle3.py has no q/k norms: its view of these weights is the reference without them
    sglang = draft.under("sglang")
    assert sglang.settings.qk_norm is False and "cannot run it" in sglang.settings.decisions["attention"].how
    ref_dropped, _ = hf_reference(sglang, ids, aux, qk_norm=False)
    torch.testing.assert_close(sglang(ids, aux).logits, ref_dropped, atol=1e-5, rtol=1e-5)
    assert (ref_dropped - logits).abs().max() > 1e-2
    torch.testing.assert_close(draft.rewired(qk_norm=False)(ids, aux).logits, sglang(ids, aux).logits)


def test_variants_bring_the_qk_norms():
    from eagle3lab.analysis.wiring_search import settings_of

    variants = trained("qwen3").variants()
    assert {v["qk_norm"] for v in variants} == {True, False} and variants[0]["qk_norm"] is True
    # how each engine runs it, as the wiring search records a served hypothesis
    assert settings_of(trained("qwen3").under("vllm"))["qk_norm"] is True
    assert settings_of(trained("qwen3").under("sglang"))["qk_norm"] is False
    assert len(variants) == 2 * len(trained("mla").variants())   # MLA adds no switch of its own
    assert all("qk_norm" not in v for v in trained("mla").variants())


@pytest.mark.parametrize("settings", [dict(num_steps=3), dict(num_steps=3, topk=2, num_draft_tokens=6)],
                         ids=["chain", "tree"])
def test_decodes_losslessly_with_mixed_acceptance(settings):
    accepted = lossless(trained("qwen3"), **settings)
    assert max(accepted) >= 2 and min(accepted) == 0


def test_speculators_checkpoint_loads_runs_and_round_trips(tmp_path):
    draft = trained("qwen3")
    written = save_draft(draft, tmp_path / "spec", "speculators")
    assert "NOT_SERVABLE" not in codes(written.warnings)
    config = json.loads((tmp_path / "spec" / "config.json").read_text())
    assert config["transformer_layer_config"]["model_type"] == "qwen3"   # vLLM maps it to Eagle3Qwen3ForCausalLM
    keys = set(load_file(str(tmp_path / "spec" / "model.safetensors")))
    assert {"layers.0.self_attn.q_norm.weight", "layers.0.self_attn.k_norm.weight"} <= keys
    loaded = load_draft(tmp_path / "spec", device="cpu")
    assert loaded.config.attention == "qwen3" and loaded.settings.qk_norm
    sd, ld = draft.state_dict(), loaded.state_dict()
    assert sd.keys() == ld.keys() and all(torch.equal(sd[k], ld[k]) for k in sd)
    torch.manual_seed(5)
    ids, aux = torch.randint(0, 64, (1, 5)), torch.randn(1, 5, 96)
    torch.testing.assert_close(loaded(ids, aux).logits, draft(ids, aux).logits)
    save_draft(loaded, tmp_path / "again", "speculators")
    assert json.loads((tmp_path / "again" / "config.json").read_text()) == config
    assert lossless(loaded.bound(num_target_layers=target().num_layers), n_prompts=1, num_steps=2)


def test_engines_that_cannot_run_the_qk_norms_say_so(tmp_path):
    save_draft(trained("qwen3"), tmp_path / "spec", "speculators")
    problems = {n: row.problems for n, row in inspect_checkpoint(tmp_path / "spec").serving.items()}
    assert {n for n, p in problems.items() if not p} == {"speculators", "vllm"}
    assert "loading fails" in problems["vllm-legacy"][0] and "dropped silently" in problems["sglang"][0]
    # written for SGLang anyway: said on writing
    written = save_draft(trained("qwen3"), tmp_path / "sglang", "sglang")
    assert any(w.code == "NOT_SERVABLE" and "q_norm/k_norm would be dropped silently" in w.text
               for w in written.warnings)
    with pytest.raises(Eagle3LabError, match="key 'attention'.*found qwen3"):
        save_draft(trained("qwen3"), tmp_path / "eagle", "eagle")


def test_rebuilt_speculators_qwen3_config_reads_as_a_qwen3_layer():
    raw = json.loads((REAL_CONFIGS / "vllm-project__speculators__qwen3-8b-eagle3-qwen3-arch__REBUILT.json").read_text())
    cfg, defaulted = cf.config_to_draft(raw, "speculators", "qwen3")
    assert (cfg.attention, cfg.head_dim, cfg.num_key_value_heads, cfg.rope_theta) == ("qwen3", 128, 8, 1e6)
    assert not [d for d in defaulted if d[0] == "model_type"]
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in Eagle3Draft(cfg).state_dict().items()}
    assert shapes["layers.0.self_attn.q_norm.weight"] == shapes["layers.0.self_attn.k_norm.weight"] == (128,)
