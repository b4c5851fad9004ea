"""Shared by the draft-family tests: tiny drafts of each family for the tiny Llama target, and an
EAGLE-3 forward assembled from transformers' own modules (the independent reference).

The reference shares no code with eagle3lab.models: its norms are ``LlamaRMSNorm``, its MLP
``LlamaMLP``, its attention the family's transformers module (``DeepseekV3Attention``,
``Qwen3Attention``, ``LlamaAttention``) with transformers' own rotary embedding; only the weights
are copied from the draft.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import torch
from helpers.tiny_models import one_thread, prompts, tiny_draft, tiny_spec_target
from safetensors.torch import load_file, save_file
from torch import nn

# MLA sizes of the tiny drafts (hidden 32, 4 heads, each reading the one latent): q LoRA 12, latent 16, nope 6 + rope 4
# per head, v 5
MLA = dict(attention="mla", num_key_value_heads=4, q_lora_rank=12, kv_lora_rank=16, qk_nope_head_dim=6,
           qk_rope_head_dim=4, v_head_dim=5)
QWEN3 = dict(attention="qwen3", head_dim=8)
# Kimi-K2.5's yarn (TorchSpec kimi_k25_eagle3_mla.json) on a short context, and one with a softmax mscale
KIMI_YARN = {"type": "yarn", "factor": 64.0, "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 1.0,
             "beta_slow": 1.0, "original_max_position_embeddings": 16}
DEEPSEEK_YARN = {"rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 0.707, "beta_fast": 32,
                 "beta_slow": 1, "original_max_position_embeddings": 16}


@functools.cache
def target():
    """The tiny Llama target, 6 layers: every engine and build read can capture resid[1..5] (not resid[N]; SGLang's
    resid[0] only from 0.5.22)."""
    with one_thread():
        return tiny_spec_target(layers=6)


@functools.cache
def trained(name: str, **extra):
    """A tiny draft of family ``name`` trained for a moment on the tiny target (acceptance is mixed)."""
    families = {"mla": MLA, "mla-yarn": {**MLA, "rope_scaling": KIMI_YARN}, "mla-no-q-lora": {**MLA, "q_lora_rank": None},
                "qwen3": QWEN3, "fc_norm": dict(fc_norm=True, norm_output=True), "norm_before_fc": dict(norm_before_fc=True),
                "4-aux": dict(ids=(1, 2, 3, 5))}
    with one_thread():
        return tiny_draft(target(), train_steps=60, **{"ids": (1, 3, 5), **families[name], **extra})


# ---------------------------------------------------------------------------- the reference

# RoPE as each engine builds it from a draft's config, stated here from the engines' own source (not read from
# eagle3lab's profiles), so that the reference catches eagle3lab applying the wrong rule:
# - MLA drafts where they are served (SGLang kimi_k25_eagle3.py -> deepseek_v2.py DeepseekV2AttentionMLA, 0.5.12-0.5.23;
#   vLLM deepseek_eagle3.py -> deepseek_v2.py DeepseekV2MLAAttention, 0.18.0 and 0.33.0): every type but default is
#   renamed deepseek_yarn (DeepseekScalingRotaryEmbedding): YaRN frequencies from factor (SGLang: 1.0 when missing),
#   original_max_position_embeddings (else max_position_embeddings), beta_fast 32, beta_slow 1 when missing; cos/sin
#   times yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim), mscale 1 and mscale_all_dim 0
#   when missing; other keys (llama3's low/high_freq_factor) are not read.
# - Llama layers under vllm-legacy / sglang-legacy: yarn without mscale / mscale_all_dim (YaRNScalingRotaryEmbedding
#   before vLLM 0.30.0 / SGLang 0.5.16).
# - otherwise (speculators, vLLM, SGLang, SpecForge): as written, computed by transformers' rotary class.
MLA_SERVED_BY = ("vllm", "vllm-legacy", "sglang")


def engine_rope(draft) -> dict | None:
    """``draft.config.rope_scaling`` as the engine of ``draft.profile`` builds it (the rules above)."""
    cfg, engine, rope = draft.config, draft.profile.name, draft.config.rope_scaling
    kind = (rope or {}).get("rope_type", (rope or {}).get("type", "default"))
    if kind == "default":
        return None
    if cfg.attention == "mla" and engine in MLA_SERVED_BY:
        factor = rope.get("factor", 1.0)

        def yarn_mscale(m):
            return 1.0 if factor <= 1 else 0.1 * m * math.log(factor) + 1.0

        return {"rope_type": "yarn", "factor": factor, "beta_fast": rope.get("beta_fast", 32),
                "beta_slow": rope.get("beta_slow", 1), "mscale_all_dim": rope.get("mscale_all_dim", 0),
                "original_max_position_embeddings": rope.get("original_max_position_embeddings",
                                                             cfg.max_position_embeddings),
                "attention_factor": yarn_mscale(rope.get("mscale", 1)) / yarn_mscale(rope.get("mscale_all_dim", 0))}
    if engine in ("vllm-legacy", "sglang-legacy") and kind == "yarn":
        return {k: v for k, v in rope.items() if k not in ("mscale", "mscale_all_dim")}
    if engine in ("speculators", "vllm", "sglang", "specforge") and kind in ("linear", "dynamic", "yarn"):
        return rope
    raise NotImplementedError(f"no engine rule stated here for rope_type {kind!r} under {engine}")



def _rms(weight, eps):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    norm = LlamaRMSNorm(weight.shape[0], eps=eps)
    norm.weight.data.copy_(weight)
    return norm


def hf_attention(draft, layer_sd: dict, qk_norm: bool = True):
    """Layer 0's attention as transformers builds it for this family (input 2H, output H), with its rotary;
    ``qk_norm=False``: a Qwen3 layer as an engine without q/k norms runs it (Llama attention, norms dropped)."""
    cfg = draft.config
    H = cfg.hidden_size
    common = dict(hidden_size=2 * H, num_attention_heads=cfg.num_attention_heads, rms_norm_eps=cfg.rms_norm_eps,
                  rope_theta=cfg.rope_theta, rope_scaling=engine_rope(draft),
                  max_position_embeddings=cfg.max_position_embeddings, attention_bias=False)
    if cfg.attention == "mla":
        from transformers import DeepseekV3Config
        from transformers.models.deepseek_v3.modeling_deepseek_v3 import (
            DeepseekV3Attention,
            DeepseekV3RotaryEmbedding,
        )

        hc = DeepseekV3Config(**common, num_key_value_heads=cfg.num_attention_heads, q_lora_rank=cfg.q_lora_rank,
                              kv_lora_rank=cfg.kv_lora_rank, qk_nope_head_dim=cfg.qk_nope_head_dim,
                              qk_rope_head_dim=cfg.qk_rope_head_dim, v_head_dim=cfg.v_head_dim)
        attn, rotary, out_in = DeepseekV3Attention(hc, 0), DeepseekV3RotaryEmbedding(hc), cfg.num_attention_heads * cfg.v_head_dim
    elif cfg.attention == "qwen3" and qk_norm:
        from transformers import Qwen3Config
        from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3RotaryEmbedding

        hc = Qwen3Config(**common, num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim)
        attn, rotary, out_in = Qwen3Attention(hc, 0), Qwen3RotaryEmbedding(hc), cfg.num_attention_heads * cfg.head_dim
    else:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

        hc = LlamaConfig(**common, num_key_value_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim)
        layer_sd = {k: v for k, v in layer_sd.items() if not k.endswith(("q_norm.weight", "k_norm.weight"))}
        attn, rotary, out_in = LlamaAttention(hc, 0), LlamaRotaryEmbedding(hc), cfg.num_attention_heads * cfg.head_dim
    hc._attn_implementation = "eager"
    attn.o_proj = nn.Linear(out_in, H, bias=False)   # the draft's attention writes back H, not 2H
    attn.load_state_dict(layer_sd, strict=True)
    return attn, rotary


def assert_matches_reference(draft, seed: int = 3, rows: int = 6):
    """The draft's logits and recycled state equal ``hf_reference``'s at 1e-5 on random rows (two sequences);
    returns ``(ids, aux, reference logits)`` for further checks on the same rows."""
    torch.manual_seed(seed)
    ids, aux = torch.randint(0, draft.config.vocab_size, (2, rows)), torch.randn(2, rows, draft.config.fc_width)
    out = draft(ids, aux)
    logits, hidden = hf_reference(draft, ids, aux)
    torch.testing.assert_close(out.logits, logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(out.hidden, hidden, atol=1e-5, rtol=1e-5)
    return ids, aux, logits


def hf_reference(draft, input_ids, aux, qk_norm: bool = True):
    """(logits, recycled state) of a one-layer EAGLE-3 draft computed with transformers' modules, under
    ``draft.settings`` (fc norm rule, residual rule, final norm, recycled state) and ``engine_rope``."""
    from transformers.models.llama.modeling_llama import LlamaConfig, LlamaMLP

    cfg, s = draft.config, draft.settings
    sd = {k: v.detach().float() for k, v in draft.state_dict().items()}
    eps = cfg.rms_norm_eps
    with torch.no_grad():
        x = aux.float()
        if s.norm_before_fc:
            x = _rms(sd["input_norm.weight"], eps)(x)
        if s.fc_norm:
            chunks = x.chunk(cfg.num_aux, dim=-1)
            x = torch.cat([_rms(sd[f"fc_norm.{i}.weight"], eps)(c) for i, c in enumerate(chunks)], dim=-1)
        h = x @ sd["fc.weight"].T
        emb = sd["embed_tokens.weight"][input_ids]
        e, hn = _rms(sd["layers.0.input_layernorm.weight"], eps)(emb), _rms(sd["layers.0.hidden_norm.weight"], eps)(h)
        prefix = "layers.0.self_attn."
        attn_sd = {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}
        attn, rotary = hf_attention(draft, attn_sd, qk_norm)
        B, T = input_ids.shape
        positions = torch.arange(T)[None].expand(B, -1)
        cos, sin = rotary(h, positions)
        causal = torch.full((T, T), float("-inf")).triu(1)[None, None]
        a, _ = attn(torch.cat([e, hn], dim=-1), (cos, sin), causal)
        h = (hn if s.norm_before_residual else h) + a
        mlp = LlamaMLP(LlamaConfig(hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                                   hidden_act=cfg.hidden_act, mlp_bias=False))
        mlp.load_state_dict({k.split("mlp.")[1]: v for k, v in sd.items() if k.startswith("layers.0.mlp.")})
        h = h + mlp(_rms(sd["layers.0.post_attention_layernorm.weight"], eps)(h))
        normed = _rms(sd["norm.weight"], eps)(h) if s.final_norm else h   # SpecForge norm_output false: no norm
        return normed @ sd["lm_head.weight"].T, (normed if s.recycle_postnorm else h)


# ---------------------------------------------------------------------------- checkpoints


def rekey(folder: Path, rename) -> Path:
    """Rewrite ``folder``'s safetensors with ``rename(key) -> key`` (another engine's key layout); returns it."""
    file = folder / "model.safetensors"
    tensors = load_file(str(file))
    save_file({rename(k): v for k, v in tensors.items()}, str(file), metadata={"format": "pt"})
    return folder


def edit_config(folder: Path, change) -> Path:
    file = folder / "config.json"
    cfg = json.loads(file.read_text())
    change(cfg)
    file.write_text(json.dumps(cfg, indent=2) + "\n")
    return folder


def lossless(draft, n_prompts: int = 2, **settings) -> list[int]:
    """Greedy speculative decoding equals the target's own greedy generate; returns the accepted counts."""
    from eagle3lab.decoding.speculative import hf_generate, speculative_generate

    accepted = []
    with one_thread():
        for prompt in prompts(n_prompts):
            ref = hf_generate(target(), prompt, max_new_tokens=24, eos_token_id=None)
            out = speculative_generate(target(), draft, prompt, max_new_tokens=24, eos_token_id=None, **settings)
            assert out.tokens == ref.tokens
            accepted += [r.accepted for r in out.rounds]
    return accepted
