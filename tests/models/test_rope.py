"""RoPE parity with transformers' own rotary embedding modules for every type, as the draft runs it,
and the engines' differences (keys they ignore, which length picks dynamic/longrope) against
the engines' formulas written out by hand."""

from __future__ import annotations

import math

import pytest
import torch
from transformers import LlamaConfig, Qwen2VLTextConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding

from eagle3lab.engines.profiles import resolve_settings
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.rope import DraftRope

HEAD_DIM, THETA, MAX_POS = 16, 10000.0, 64
# one config per type, written as published configs write them (``type`` or ``rope_type``)
ROPES = {
    "default": None,
    "linear": {"type": "linear", "factor": 4.0},
    "dynamic": {"type": "dynamic", "factor": 3.0},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 16},
    # DeepSeek-V2-Lite's draft (mscale = mscale_all_dim: factor 1), Kimi's (beta 1/1), gpt-oss's (truncate false)
    "yarn": {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 16, "beta_fast": 32.0,
             "beta_slow": 1.0, "mscale": 0.707, "mscale_all_dim": 0.707},
    "yarn-kimi": {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 16, "beta_fast": 1.0,
                  "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
    "yarn-plain-mscale": {"rope_type": "yarn", "factor": 32.0, "original_max_position_embeddings": 16,
                          "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False},
    "longrope": {"rope_type": "longrope", "original_max_position_embeddings": 16, "factor": 4.0,
                 "short_factor": [1.0, 1.1, 1.2, 1.5, 2.0, 3.0, 4.0, 5.0],
                 "long_factor": [1.0, 1.5, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0]},
    "proportional": {"rope_type": "proportional", "factor": 2.0},
}


def hf_rotary(rope_scaling):
    params = {"rope_type": "default"} if rope_scaling is None else dict(rope_scaling)
    params.setdefault("rope_type", params.pop("type", "default"))
    params.pop("type", None)
    config = LlamaConfig(hidden_size=HEAD_DIM * 4, num_attention_heads=4, max_position_embeddings=MAX_POS,
                         rope_parameters={**params, "rope_theta": THETA})
    return LlamaRotaryEmbedding(config)


@pytest.mark.parametrize("name", list(ROPES))
def test_cos_sin_equal_transformers_rotary_module(name):
    """Positions past max_position_embeddings and past the original context, in growing order as a
    decode feeds them (transformers' dynamic/longrope modules follow the longest sequence seen)."""
    ours = DraftRope(HEAD_DIM, THETA, ROPES[name], MAX_POS)
    theirs = hf_rotary(ROPES[name])
    x = torch.zeros(1, dtype=torch.float32)
    for start, length in ((0, 10), (10, 7), (17, 30), (60, 20), (80, 1)):   # ends 10, 17, 47, 80, 81
        pos = torch.arange(start, start + length)[None]
        cos, sin = ours.cos_sin(pos, start + length, torch.float32)
        ref_cos, ref_sin = theirs(x, pos)
        torch.testing.assert_close(cos, ref_cos, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(sin, ref_sin, atol=1e-5, rtol=1e-5)


def test_the_variants_really_differ_and_scale():
    """Guards against a test that passes because everything is plain RoPE."""
    plain = DraftRope(HEAD_DIM, THETA, None, MAX_POS)
    for name, rope in ROPES.items():
        if rope is not None and name != "dynamic":   # dynamic is plain up to max_position_embeddings
            assert not torch.allclose(DraftRope(HEAD_DIM, THETA, rope, MAX_POS).inv_freq, plain.inv_freq), name
    assert DraftRope(HEAD_DIM, THETA, ROPES["yarn"], MAX_POS).attention_scaling == pytest.approx(1.0)
    # without mscale keys yarn's cos/sin grow by 0.1 ln(factor) + 1
    assert DraftRope(HEAD_DIM, THETA, ROPES["yarn-plain-mscale"], MAX_POS).attention_scaling == \
        pytest.approx(0.1 * math.log(32.0) + 1)
    # longrope: sqrt(1 + ln(factor) / ln(original))
    assert DraftRope(HEAD_DIM, THETA, ROPES["longrope"], MAX_POS).attention_scaling == \
        pytest.approx(math.sqrt(1 + math.log(4.0) / math.log(16)))


def test_mrope_has_one_rule_for_both_spellings():
    """transformers 5 writes mrope as rope_type default + mrope_section (vLLM's config.py rewrites a legacy 'type: mrope'
    to it, SGLang's llama_eagle3.py keys mrope on mrope_section): the draft family, the profiles, the config reader
    and the draft's RoPE all read it as mrope."""
    from eagle3lab.engines.profiles import rope_type_of
    from eagle3lab.models import checkpoint_formats as cf
    from eagle3lab.models.draft_family import describe_draft_config

    section = [2, 3, 3]
    legacy, v5 = {"type": "mrope", "mrope_section": section}, {"rope_type": "default", "mrope_section": section}
    assert rope_type_of(legacy) == rope_type_of(v5) == "mrope"
    torch.manual_seed(0)
    grid, ids, aux = torch.randint(0, 40, (3, 1, 6)), torch.randint(0, 32, (1, 6)), torch.randn(1, 6, 3 * 64)
    logits = []
    for rope in (legacy, v5):
        cfg = DraftConfig(hidden_size=64, intermediate_size=64, num_attention_heads=4, vocab_size=32, rope_theta=1e6,
                          rope_scaling=rope)
        torch.manual_seed(1)
        draft = Eagle3Draft(cfg, profile="sglang")
        assert draft.rope.kind == "mrope" and draft.settings.decisions["rope_scaling"].value == "mrope"
        logits.append(draft(ids, aux, position_ids=grid).logits)   # [3, B, T] positions are taken
    torch.testing.assert_close(logits[0], logits[1])
    # an engine without mrope: plain RoPE, and why (transformers 5's spelling reads as default there)
    assert "mrope_section is not read" in draft.under("speculators").settings.decisions["rope_scaling"].how
    flat = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64, "intermediate_size": 64,
            "num_attention_heads": 4, "vocab_size": 32, "draft_vocab_size": 32,
            "rope_parameters": {**v5, "rope_theta": 1e6}}
    assert describe_draft_config(flat).rope_type == "mrope"
    assert cf.config_to_draft(flat, "sglang", "cfg")[0].rope_scaling == v5


def test_mrope_equals_qwen2_vl_rotary_and_reduces_to_plain_rope_for_text():
    section = [2, 3, 3]                                   # sums to head_dim / 2, as Qwen2.5-VL's [16, 24, 24]
    mrope = {"type": "mrope", "mrope_section": section}
    ours = DraftRope(HEAD_DIM, 1e6, mrope, MAX_POS)
    qwen = Qwen2VLRotaryEmbedding(Qwen2VLTextConfig(hidden_size=HEAD_DIM * 4, num_attention_heads=4,
                                                    max_position_embeddings=MAX_POS, rope_scaling=dict(mrope),
                                                    rope_theta=1e6))
    x = torch.zeros(1)
    torch.manual_seed(0)
    grid = torch.randint(0, 40, (3, 2, 9))                # an image: temporal, height, width positions differ
    cos, sin = ours.cos_sin(grid, None, torch.float32)
    ref_cos, ref_sin = qwen(x, grid)
    torch.testing.assert_close(cos, ref_cos, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(sin, ref_sin, atol=1e-5, rtol=1e-5)
    assert cos.shape == (2, 9, HEAD_DIM)
    # text: the three rows carry the same position (what SGLang, vLLM and SpecForge feed a text-only draft),
    # which is 1-D RoPE with the same theta, whether given as [3, B, T] or [B, T]
    text = torch.arange(5, 17)[None]
    plain = hf_rotary(None)
    plain.inv_freq = DraftRope(HEAD_DIM, 1e6, None, MAX_POS).inv_freq.clone()
    ref_cos, _ = plain(x, text)
    torch.testing.assert_close(ours.cos_sin(text.expand(3, 1, -1), None, torch.float32)[0], ref_cos, atol=1e-6, rtol=0)
    torch.testing.assert_close(ours.cos_sin(text, None, torch.float32)[0], ref_cos, atol=1e-6, rtol=0)
    torch.testing.assert_close(qwen(x, text.expand(3, 1, -1))[0], ref_cos, atol=1e-6, rtol=0)


def make_draft(rope, profile="speculators", max_pos=MAX_POS):
    cfg = DraftConfig(hidden_size=32, intermediate_size=48, num_attention_heads=2, num_key_value_heads=1,
                      head_dim=HEAD_DIM, vocab_size=40, rope_theta=THETA, rope_scaling=rope,
                      max_position_embeddings=max_pos)
    torch.manual_seed(0)
    draft = Eagle3Draft(cfg, profile=profile)
    with torch.no_grad():
        for p in draft.parameters():
            p.normal_(0, 0.3)
    return draft


@pytest.mark.parametrize("name", ["yarn", "yarn-plain-mscale", "longrope", "dynamic", "llama3"])
def test_the_draft_rotates_q_and_k_as_transformers_does(name):
    """The draft's q/k (after RoPE) equal q_proj/k_proj of its attention input rotated by transformers'
    cos/sin, for a prefill and for cached one-token steps past max_position_embeddings (the table path)."""
    draft = make_draft(ROPES[name])
    theirs = hf_rotary(ROPES[name])
    attn = draft.layers[0].self_attn

    def check(ids, aux, cache, positions):
        _, acts = draft.run_with_cache(ids, aux, cache=cache, names=["hook_attn_in", "hook_q", "hook_k"])
        B, T, _ = acts["layers.0.hook_attn_in"].shape
        q = attn.q_proj(acts["layers.0.hook_attn_in"]).view(B, T, 2, HEAD_DIM).transpose(1, 2)
        k = attn.k_proj(acts["layers.0.hook_attn_in"]).view(B, T, 1, HEAD_DIM).transpose(1, 2)
        cos, sin = theirs(q, positions)
        ref_q, ref_k = apply_rotary_pos_emb(q, k, cos, sin)
        torch.testing.assert_close(acts["layers.0.self_attn.hook_q"], ref_q, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(acts["layers.0.self_attn.hook_k"], ref_k, atol=1e-5, rtol=1e-5)

    from eagle3lab.models.draft import DraftCache
    cache = DraftCache()
    torch.manual_seed(1)
    check(torch.randint(0, 40, (1, 60)), torch.randn(1, 60, 96), cache, torch.arange(60)[None])
    for step in range(60, 70):   # the draft's positions continue the target's, past max_position_embeddings
        check(torch.randint(0, 40, (1, 1)), torch.randn(1, 1, 96), cache, torch.tensor([[step]]))


def dynamic_theta(factor, length, max_pos, dim=HEAD_DIM):
    """Dynamic NTK theta for a sequence length, as every engine writes it."""
    return THETA * ((factor * length / max_pos) - (factor - 1)) ** (dim / (dim - 2))


def inv_freq_of(theta, dim=HEAD_DIM):
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))


def test_dynamic_ntk_follows_each_engines_length_rule():
    rope = ROPES["dynamic"]
    plain = inv_freq_of(THETA).float()
    rules = {p: make_draft(rope, p).rope for p in ("speculators", "vllm", "vllm-legacy", "sglang", "specforge")}
    # within max_position_embeddings: transformers (speculators) and vLLM 0.22+ plain; SGLang and vLLM <= 0.21
    # rescale once for max_position_embeddings * factor; SpecForge's table is built for max_position_embeddings + 20
    torch.testing.assert_close(rules["speculators"].frequencies(10)[0], plain)
    torch.testing.assert_close(rules["vllm"].frequencies(10)[0], plain)
    for engine in ("sglang", "vllm-legacy"):
        torch.testing.assert_close(rules[engine].frequencies(10)[0], inv_freq_of(dynamic_theta(3.0, 3 * MAX_POS, MAX_POS)).float())
    torch.testing.assert_close(rules["specforge"].frequencies(10)[0],
                               inv_freq_of(dynamic_theta(3.0, MAX_POS + 20, MAX_POS)).float())
    # past it: transformers and SpecForge rescale for the sequence so far; vLLM 0.22+ stays plain
    for engine in ("speculators", "specforge"):
        torch.testing.assert_close(rules[engine].frequencies(200)[0], inv_freq_of(dynamic_theta(3.0, 200, MAX_POS)).float())
    torch.testing.assert_close(rules["vllm"].frequencies(200)[0], plain)


def test_longrope_switch_point_per_engine():
    """transformers: long factors once max(position) + 1 > original (16); SGLang: once any position > 16;
    vLLM 0.12+: fixed at start by max_model_len (here max_position_embeddings 64) > 16, so always long."""
    rope = ROPES["longrope"]
    short = 1.0 / (torch.tensor(rope["short_factor"]) * THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    long = 1.0 / (torch.tensor(rope["long_factor"]) * THETA ** (torch.arange(0, HEAD_DIM, 2).float() / HEAD_DIM))
    hf, sgl, vllm = (make_draft(rope, p).rope for p in ("speculators", "sglang", "vllm"))
    torch.testing.assert_close(hf.frequencies(16)[0], short)
    torch.testing.assert_close(hf.frequencies(17)[0], long)      # last position 16
    torch.testing.assert_close(sgl.frequencies(17)[0], short)    # 16 is not > 16
    torch.testing.assert_close(sgl.frequencies(18)[0], long)
    torch.testing.assert_close(vllm.frequencies(3)[0], long)


def test_yarn_mscale_is_ignored_by_older_sglang_and_vllm():
    """SpecForge trained DeepSeek-V2-Lite's yarn draft with cos/sin scale 1.0 (mscale = mscale_all_dim);
    SGLang before 0.5.16 (PR #22711) and vLLM before 0.30.0 serve it with 0.1 ln(40) + 1 = 1.369."""
    rope = ROPES["yarn"]
    scale = {p: make_draft(rope, p).rope.attention_scaling for p in ("specforge", "sglang", "vllm", "sglang-legacy",
                                                                      "vllm-legacy")}
    assert scale["specforge"] == pytest.approx(1.0) and scale["sglang"] == pytest.approx(1.0)
    assert scale["vllm"] == pytest.approx(1.0)
    assert scale["sglang-legacy"] == pytest.approx(1 + 0.1 * math.log(40)) == scale["vllm-legacy"]
    how = resolve_settings(make_draft(rope).config, "sglang-legacy").decisions["rope_scaling"].how
    assert "ignoring mscale, mscale_all_dim" in how and "#22711" in how


def test_unknown_type_and_missing_keys_are_refused_with_the_key():
    with pytest.raises(Eagle3LabError, match=r"rope_scaling.rope_type.*found 'su2'"):
        DraftRope(HEAD_DIM, THETA, {"type": "su2"}, MAX_POS)
    with pytest.raises(Eagle3LabError, match=r"key 'rope_scaling': expected the keys transformers needs for "
                                             r"rope_type 'longrope'.*KeyError.*short_factor"):
        DraftRope(HEAD_DIM, THETA, {"rope_type": "longrope", "long_factor": [1.0] * 8}, MAX_POS)
    with pytest.raises(Eagle3LabError, match=r"mrope_section.*head_dim / 2 = 8.*\[16, 24, 24\]"):
        DraftRope(HEAD_DIM, THETA, {"type": "mrope", "mrope_section": [16, 24, 24]}, MAX_POS)
