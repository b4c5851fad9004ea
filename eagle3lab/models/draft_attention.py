"""The attention kinds of a draft's decoder layers, each computed as the engines that serve it do.

    llama  q/k/v projections, grouped-query attention, RoPE on pairs (i, i + d/2)
    qwen3  the same with one RMSNorm over each head of q and of k, before RoPE (speculators
           ``--draft-arch qwen3``, ``Qwen3DecoderEagle3FirstLayer``; vLLM ``qwen3_eagle3.py``)
    mla    DeepSeek-V2/V3 multi-head latent attention (SGLang ``kimi_k25_eagle3.py``, vLLM
           ``deepseek_eagle3.py``, TorchSpec ``deepseek_eagle.py``):
             q = q_b_proj(q_a_layernorm(q_a_proj(x)))   (one q_proj when q_lora_rank is null)
             latent, k_rot = split(kv_a_proj_with_mqa(x), [kv_lora_rank, qk_rope_head_dim])
             k_nope, v = split(kv_b_proj(kv_a_layernorm(latent)), [qk_nope_head_dim, v_head_dim])
           RoPE turns only the last qk_rope_head_dim of q and the one k_rot all heads share, on
           DeepSeek's interleaved pairs (2j, 2j + 1).

Each reads the layer's input (2H wide in layer 0). Module attribute names are checkpoint key
names (``layers.0.self_attn.q_norm.weight``, ``layers.0.self_attn.kv_a_proj_with_mqa.weight``...).
Hook points ``self_attn.hook_q`` / ``hook_k`` / ``hook_v``: this forward's rows, after RoPE, per head
``[B, heads, T, d]`` (docs/hooks.md).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from eagle3lab.models.hooks import HookPoint
from eagle3lab.models.norms import RMSNorm
from eagle3lab.models.rope import apply_rope, rope_parameters


class Attention(nn.Module):
    """Grouped-query attention (``llama``)."""

    def __init__(self, cfg, in_dim: int, layer: int):
        super().__init__()
        self.layer = layer
        self.n_heads, self.n_kv, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(in_dim, self.n_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(in_dim, self.n_kv * self.head_dim, bias=False)
        self.v_proj = nn.Linear(in_dim, self.n_kv * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.head_dim, cfg.hidden_size, bias=False)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()   # after RoPE, per head

    def forward(self, x, s, cos, sin, mask, cache, keys_only: bool = False):
        """``keys_only``: only this layer's keys and values go into ``cache`` (rows that no query reads here)."""
        B, T, _ = x.shape
        k = self.k_proj(x).view(B, T, self.n_kv, self.head_dim)
        v = self.v_proj(x).view(B, T, self.n_kv, self.head_dim)
        if not keys_only:
            q = self.norm_q(self.q_proj(x).view(B, T, self.n_heads, self.head_dim), s)
            q = self.hook_q(apply_rope(q.transpose(1, 2), cos, sin))
        k = self.hook_k(apply_rope(self.norm_k(k, s).transpose(1, 2), cos, sin))   # [B, heads, T, head_dim]
        v = self.hook_v(v.transpose(1, 2))
        if cache is not None:
            k, v = cache.update(self.layer, k, v)
        if keys_only:
            return None
        # grouped-query attention: each kv head serves n_heads / n_kv query heads (SDPA expands them)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.n_kv != self.n_heads)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.head_dim))

    def norm_q(self, q, s):
        """q per head ``[B, T, heads, d]`` before RoPE: as projected (Llama has no q/k norm)."""
        return q

    def norm_k(self, k, s):
        return k


class Qwen3Attention(Attention):
    """``qwen3``: Llama's attention with one RMSNorm over each head of q and of k, before RoPE (the weights its family
    owns, eagle3lab.models.families; off with the ``qk_norm`` switch, as an engine without the family runs it)."""

    def __init__(self, cfg, in_dim: int, layer: int):
        super().__init__(cfg, in_dim, layer)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def norm_q(self, q, s):
        return self.q_norm(q) if s.qk_norm else q

    def norm_k(self, k, s):
        return self.k_norm(k) if s.qk_norm else k


def rotate_interleaved(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on DeepSeek's pairs (2j, 2j + 1); cos/sin come as ``cat(f, f)``. The result lists the
    rotated even entries, then the odd ones, as transformers' ``apply_rotary_pos_emb_interleave``
    does: q and k are permuted alike, so every q.k is that of the interleaved rotation."""
    half = cos.shape[-1] // 2
    cos, sin = cos[..., :half], sin[..., :half]
    even, odd = x[..., 0::2], x[..., 1::2]
    return torch.cat([even * cos - odd * sin, odd * cos + even * sin], dim=-1)


def mla_softmax_scale(cfg) -> float:
    """(qk_nope + qk_rope)^-1/2, times mscale(factor, mscale_all_dim)^2 when the RoPE is scaled, as
    transformers' DeepseekV3Attention (``yarn_apply_mscale``), SGLang's ``compute_mla_mscale_scaling``
    and vLLM's DeepseekV2MLAAttention compute it from the config."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_apply_mscale

    qk_dim = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
    return float(yarn_apply_mscale(rope_parameters(cfg.rope_theta, cfg.rope_scaling), qk_dim ** -0.5))


class MLAAttention(nn.Module):
    """Multi-head latent attention (``mla``); the config's head_dim is its qk_rope_head_dim (the RoPE width)."""

    def __init__(self, cfg, in_dim: int, layer: int):
        super().__init__()
        self.layer, self.n_heads = layer, cfg.num_attention_heads
        self.nope_dim, self.rope_dim, self.v_dim = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        self.latent_dim = cfg.kv_lora_rank
        qk_dim = self.nope_dim + self.rope_dim
        self.q_lora = cfg.q_lora_rank is not None
        if not self.q_lora:
            self.q_proj = nn.Linear(in_dim, self.n_heads * qk_dim, bias=False)
        else:
            self.q_a_proj = nn.Linear(in_dim, cfg.q_lora_rank, bias=False)
            self.q_a_layernorm = RMSNorm(cfg.q_lora_rank, cfg.rms_norm_eps)
            self.q_b_proj = nn.Linear(cfg.q_lora_rank, self.n_heads * qk_dim, bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(in_dim, self.latent_dim + self.rope_dim, bias=False)
        self.kv_a_layernorm = RMSNorm(self.latent_dim, cfg.rms_norm_eps)
        self.kv_b_proj = nn.Linear(self.latent_dim, self.n_heads * (self.nope_dim + self.v_dim), bias=False)
        self.o_proj = nn.Linear(self.n_heads * self.v_dim, cfg.hidden_size, bias=False)
        self.scale = mla_softmax_scale(cfg)
        self.hook_q, self.hook_k, self.hook_v = HookPoint(), HookPoint(), HookPoint()   # after RoPE, per head

    def project_q(self, x):
        """q for every head, [B, T, heads * (nope + rope)]: through q's LoRA (down, norm, up) when it has one."""
        if not self.q_lora:
            return self.q_proj(x)
        return self.q_b_proj(self.q_a_layernorm(self.q_a_proj(x)))

    def forward(self, x, s, cos, sin, mask, cache, keys_only: bool = False):
        """``keys_only``: only this layer's keys and values go into ``cache`` (rows that no query reads here)."""
        B, T, _ = x.shape
        latent, k_rot = self.kv_a_proj_with_mqa(x).split([self.latent_dim, self.rope_dim], dim=-1)
        kv = self.kv_b_proj(self.kv_a_layernorm(latent)).view(B, T, self.n_heads, -1).transpose(1, 2)
        k_nope, v = kv.split([self.nope_dim, self.v_dim], dim=-1)
        if not keys_only:
            q = self.project_q(x).view(B, T, self.n_heads, -1).transpose(1, 2)    # [B, heads, T, nope + rope]
            q_nope, q_rot = q.split([self.nope_dim, self.rope_dim], dim=-1)
            q = self.hook_q(torch.cat([q_nope, rotate_interleaved(q_rot, cos, sin)], dim=-1))
        k_rot = rotate_interleaved(k_rot[:, None], cos, sin)                     # [B, 1, T, rope]: one key for all heads
        k = self.hook_k(torch.cat([k_nope, k_rot.expand(-1, self.n_heads, -1, -1)], dim=-1))
        v = self.hook_v(v)
        if cache is not None:   # per-head keys/values: kv_b_proj acts row by row, so this equals a latent cache
            k, v = cache.update(self.layer, k, v)
        if keys_only:
            return None
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=self.scale)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.n_heads * self.v_dim))
