"""A draft's rotary position embedding, computed by transformers' own implementations.

Inverse frequencies and the cos/sin scale (the "attention factor" that yarn and longrope apply)
come from ``transformers.modeling_rope_utils.ROPE_INIT_FUNCTIONS`` (default: the models'
``compute_default_rope_parameters``), fed a small config that holds only what those functions
read. Two things differ between engines and are given by the engine profile, not decided here:

- which ``rope_scaling`` keys the engine reads (``resolve_settings`` drops the others, e.g. older
  SGLang and vLLM builds ignore yarn's ``mscale`` / ``mscale_all_dim``), and
- for the length-dependent types (``dynamic``, ``longrope``), which sequence length picks the
  frequencies: a ``LENGTH_RULES`` name.

Positions are the ones the engine feeds: the draft's continue the target's (a draft token at
step k of a context of n tokens has position n + k). ``mrope`` (Qwen2/2.5-VL) takes positions
[3, B, T] (temporal, height, width); a text token has the same position in all three, so with
text positions (or 1-D positions) it is plain 1-D RoPE with the config's theta.
"""

from __future__ import annotations

import math

import torch

from eagle3lab.engines.profiles import rope_type_of
from eagle3lab.errors import bad_input

# rope_type -> how transformers computes it: every key of ROPE_INIT_FUNCTIONS plus the plain one;
# "mrope" is plain frequencies laid out per section.
ROPE_TYPES = ("default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional", "mrope")
LENGTH_DEPENDENT = ("dynamic", "longrope")

# Which sequence length a forward's frequencies follow, given its last position + 1 (``end``), the
# draft's max_position_embeddings (``M``) and the scaling factor. transformers' functions then
# decide as they do: dynamic rescales theta beyond M, longrope uses long factors beyond the original.
LENGTH_RULES = {
    # transformers / speculators: max(position_ids) + 1 of this forward
    "sequence": lambda end, M, factor: end,
    # any position > original_max_position_embeddings (SGLang, vLLM up to at least 0.10: torch.any(positions > k))
    "last_position": lambda end, M, factor: end - 1,
    # fixed once at load, as for a sequence of M (vLLM 0.33: dynamic with max_trained_positions = M, longrope
    # by max_model_len > original, max_model_len taken as the draft's max_position_embeddings)
    "max_positions": lambda end, M, factor: M,
    # fixed once at load at M * factor (SGLang, vLLM 0.10 DynamicNTKScalingRotaryEmbedding)
    "max_positions_times_factor": lambda end, M, factor: math.ceil(M * factor),
    # SpecForge LlamaDynamicNTKScalingRotaryEmbedding: its table is built for M + 20 rows, rebuilt longer on demand
    "sequence_at_least_max_positions_plus_20": lambda end, M, factor: max(end, M + 20),
}


def rope_parameters(theta: float, rope_scaling: dict | None) -> dict:
    """``rope_scaling`` as written (``type`` or ``rope_type``) -> transformers 5's ``rope_parameters``."""
    kind = rope_type_of(rope_scaling)
    params = {k: v for k, v in (rope_scaling or {}).items() if k not in ("type", "rope_type")}
    return {**params, "rope_type": kind, "rope_theta": float(theta)}


class _RopeConfig:
    """The attributes transformers' RoPE functions read from a model config, and nothing else."""

    def __init__(self, head_dim: int, max_position_embeddings: int, params: dict):
        self.head_dim, self.hidden_size, self.num_attention_heads = head_dim, head_dim, 1
        self.max_position_embeddings = max_position_embeddings
        self.rope_parameters = params

    def standardize_rope_params(self):   # what PreTrainedConfig does for the types that need it
        if self.rope_parameters["rope_type"] in ("llama3", "yarn", "longrope"):
            self.rope_parameters.setdefault("original_max_position_embeddings", self.max_position_embeddings)


class DraftRope:
    """Frequencies (fp32) and cos/sin scale of one draft, as transformers computes them."""

    def __init__(self, head_dim: int, theta: float, rope_scaling: dict | None, max_position_embeddings: int,
                 length_rule: str = "sequence", where: str = "draft config"):
        self.kind = rope_type_of(rope_scaling)
        if self.kind not in ROPE_TYPES:
            raise bad_input(where, "rope_scaling.rope_type", f"one of {', '.join(ROPE_TYPES)} (the types transformers "
                            "implements, and mrope)", repr(self.kind))
        if length_rule not in LENGTH_RULES:
            raise bad_input("engine profile", "rope_length", f"one of {', '.join(LENGTH_RULES)}", repr(length_rule))
        self.head_dim, self.max_positions = head_dim, max_position_embeddings
        self.length_rule = length_rule
        self.params = rope_parameters(theta, rope_scaling)
        self.mrope_section = tuple(self.params.get("mrope_section") or ()) if self.kind == "mrope" else ()
        if self.mrope_section and 2 * sum(self.mrope_section) != head_dim:
            raise bad_input(where, "rope_scaling.mrope_section", f"sections summing to head_dim / 2 = {head_dim // 2}",
                            list(self.mrope_section))
        self._cache: dict = {}
        expected = (f"the keys transformers needs for rope_type '{self.kind}', with values giving finite, "
                    "positive frequencies (zero only where 'proportional' leaves a dimension unrotated)")
        # every frequency set a forward can use is checked now: the load-time one, and longrope's long one
        for key in (None, "long") if self.kind == "longrope" else (None,):
            try:   # a key missing or malformed, or a value the formula cannot take (a zero length, a wrong length)
                inv, scale = self._compute(key)
            except (KeyError, TypeError, ValueError, ZeroDivisionError, RuntimeError) as err:
                raise bad_input(where, "rope_scaling", expected,
                                f"{rope_scaling} ({type(err).__name__}: {err})") from None
            # zeros are allowed: 'proportional' (partial_rotary_factor) leaves the dimensions it does not rotate at 0
            if not (bool(torch.isfinite(inv).all()) and bool((inv >= 0).all()) and bool((inv > 0).any())
                    and math.isfinite(scale) and scale > 0):
                raise bad_input(where, "rope_scaling", expected, f"{rope_scaling} (inverse frequencies from "
                                f"{float(inv.min()):g} to {float(inv.max()):g}, cos/sin scale {scale:g})")
        self.inv_freq, self.attention_scaling = self.frequencies(None)

    def regime(self, end: int | None):
        """A key equal for two forwards exactly when their frequencies are equal (None: the load-time ones).
        ``end`` is the forward's last position + 1."""
        if self.kind not in LENGTH_DEPENDENT or end is None:
            return None
        length = int(LENGTH_RULES[self.length_rule](end, self.max_positions, self.params.get("factor") or 1.0))
        if self.kind == "dynamic":   # theta is rescaled only beyond max_position_embeddings
            return length if length > self.max_positions else None
        original = self.params.get("original_max_position_embeddings", self.max_positions)
        return "long" if length > original else None    # longrope: long factors beyond the original

    def frequencies(self, end: int | None) -> tuple[torch.Tensor, float]:
        """(inverse frequencies [head_dim/2] fp32 on CPU, cos/sin scale) for a forward whose last position is end - 1."""
        key = self.regime(end)
        if key not in self._cache:
            # keep the load-time set and the latest other one (a growing dynamic length makes a new one per step)
            self._cache = {k: v for k, v in self._cache.items() if k is None} | {key: self._compute(key)}
        return self._cache[key]

    def _compute(self, key) -> tuple[torch.Tensor, float]:
        """transformers' (inverse frequencies, cos/sin scale) for regime ``key`` (see ``regime``)."""
        from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

        config = _RopeConfig(self.head_dim, self.max_positions, dict(self.params))
        # transformers picks the set from seq_len: dynamic rescales theta for it, longrope goes long above the original
        length = self.params.get("original_max_position_embeddings", self.max_positions) + 1 if key == "long" else key
        with torch.device("cpu"):   # real numbers even while a draft is built on the meta device
            if self.kind in ("default", "mrope"):
                from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
                inv, scale = LlamaRotaryEmbedding.compute_default_rope_parameters(config)
            else:
                inv, scale = ROPE_INIT_FUNCTIONS[self.kind](config, "cpu", seq_len=length)
        return inv.float(), float(scale)

    def cos_sin(self, position_ids: torch.Tensor, end: int | None, dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [..., T, head_dim] for positions [..., T] (mrope: [3, ..., T] also)."""
        inv, scale = self.frequencies(end)
        freqs = position_ids[..., None].float() * inv.to(position_ids.device)          # [..., T, head_dim/2]
        if self.mrope_section and position_ids.dim() >= 3 and position_ids.shape[0] == 3:
            # section i of the frequencies turns with axis i % 3 (temporal, height, width)
            chunks = freqs.split(list(self.mrope_section), dim=-1)
            freqs = torch.cat([chunk[i % 3] for i, chunk in enumerate(chunks)], dim=-1)
        angles = torch.cat([freqs, freqs], dim=-1)
        return (angles.cos() * scale).to(dtype), (angles.sin() * scale).to(dtype)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (i, i + d/2) of the last dimension (the neox / Llama layout)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin
