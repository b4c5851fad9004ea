"""The EAGLE-3 draft head in plain PyTorch: every convention explicit, every step a named hook point.

    emb      = embed_tokens(token)                                               hook_embed
    fc_in    = [resid[a] ; resid[b] ; resid[c]]   (num_aux target states)        hook_fc_in
               normed whole (input_norm) or per chunk (fc_norm) when the draft has it   hook_fc_normed
    h        = fc(fc_in), or at later draft steps the recycled state            hook_fc_out | hook_recycled_in
    layer 0, the dual-norm step (FirstDecoderLayer):
      emb_normed = input_layernorm(emb)                                         layers.0.hook_emb_normed
      hid_normed = hidden_norm(h)                                               layers.0.hook_hid_normed
      resid      = hid_normed if norm_before_residual else h                    layers.0.hook_residual
      attn_in    = [emb_normed ; hid_normed]   (2H wide: q/k/v read both)       layers.0.hook_attn_in
    layers 1..: resid = h, attn_in = input_layernorm(h)   (plain pre-norm layers of width H)
    every layer, then:
      resid = resid + o_proj(attn(attn_in))        hook_attn_out, hook_resid_mid
      resid = resid + mlp(post_attention_layernorm(resid))     hook_mlp_in, hook_mlp_out, hook_resid_out
      (attn: Llama, Qwen3 with q/k norms, or MLA, eagle3lab.models.draft_attention; self_attn.hook_q/k/v)
    logits = lm_head(norm(h)) over the draft vocabulary;  target id = i + d2t[i]
             (lm_head(h) where the profile says so: SpecForge with norm_output false)
    recycled state (fed back instead of fc(aux) at the next draft step) = h, or norm(h)
    when the profile says norm_output recycles the normed state.

Which flags apply is decided once by an engine profile (``eagle3lab.engines.profiles``) into
``self.settings``; the math below only reads those booleans. Module attribute names equal
speculators checkpoint key names, so loading is a name table (``eagle3lab.models.checkpoint``).

Hook points follow TransformerLens: attributes ``hook_<what>``, named by module path
(``layers.0.self_attn.hook_q``); ``draft.hook_names`` lists those of a given draft, and docs/hooks.md
tables every name with its shape and meaning. A name that is not a full path means the first
layer's (``"hook_residual"`` is ``"layers.0.hook_residual"``).
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields, replace

import torch
import torch.nn.functional as F
from torch import nn

from eagle3lab.engines.profiles import (
    LLAMA,
    MLA,
    Decision,
    DraftSettings,
    EngineProfile,
    get_profile,
    resolve_settings,
)
from eagle3lab.errors import bad_input
from eagle3lab.models.families import family_of, make_attention, switch_owners
from eagle3lab.models.hooks import HookPoint, installed, run_with_cache, run_with_patches, setup_hooks
from eagle3lab.models.norms import RMSNorm
from eagle3lab.models.rope import DraftRope

# MLA geometry a config must give (q_lora_rank may be null: one q_proj then)
MLA_SIZES = ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")
# every size a config states: a positive integer (the ones with a default may be absent)
REQUIRED_SIZES = ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size", "num_hidden_layers",
                  "max_position_embeddings")
OPTIONAL_SIZES = ("num_key_value_heads", "head_dim", "draft_vocab_size", "target_hidden_size", "num_aux",
                  "q_lora_rank", *MLA_SIZES)


def check_sizes(values: dict, where="draft config", key_of=lambda key: key) -> None:
    """Refuse a size no layer can be built with, before a tensor is made: every size a positive integer, the
    heads dividing as attention needs, the draft vocabulary inside the target's. ``key_of``: field -> the key
    as the config file writes it (a speculators config nests the geometry in transformer_layer_config)."""
    for key in REQUIRED_SIZES + OPTIONAL_SIZES:
        value = values.get(key)
        if value is None and key in OPTIONAL_SIZES:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise bad_input(where, key_of(key), "a positive integer", repr(value))
    heads, kv, hidden = values["num_attention_heads"], values.get("num_key_value_heads"), values["hidden_size"]
    if kv is not None and heads % kv:
        raise bad_input(where, key_of("num_key_value_heads"), f"a divisor of num_attention_heads={heads} (each "
                        "key/value head serves a whole group of query heads)", kv)
    if values.get("attention", LLAMA) != MLA and values.get("head_dim") is None and hidden % heads:
        raise bad_input(where, key_of("head_dim"), f"stated, or hidden_size={hidden} divisible by "
                        f"num_attention_heads={heads} (head_dim defaults to their quotient)", "neither")
    draft_vocab = values.get("draft_vocab_size")
    if draft_vocab is not None and draft_vocab > values["vocab_size"]:
        raise bad_input(where, key_of("draft_vocab_size"), f"at most vocab_size={values['vocab_size']} (the draft "
                        "vocabulary is a subset of the target's)", draft_vocab)
    eps = values.get("rms_norm_eps")
    if eps is not None and (isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0 <= eps < 1):
        raise bad_input(where, key_of("rms_norm_eps"), "a small non-negative number (RMSNorm's epsilon)", repr(eps))


@dataclass
class DraftConfig:
    """Geometry and flags of a draft, as written in its checkpoint (a flag is None when the key is missing)."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    vocab_size: int                               # the TARGET vocabulary (embedding rows)
    num_key_value_heads: int | None = None
    head_dim: int | None = None
    num_hidden_layers: int = 1
    draft_vocab_size: int | None = None           # None -> same as vocab_size
    target_hidden_size: int | None = None         # None -> same as hidden_size
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    max_position_embeddings: int = 2048
    hidden_act: str = "silu"
    aux_layer_ids: tuple[int, ...] | None = None  # as written, in the writer's convention
    aux_ids_key: str | None = None                # where they were written (None: given in memory)
    num_aux: int | None = None                    # None -> len(aux_layer_ids) or 3
    norm_before_residual: bool | None = None
    norm_before_fc: bool | None = None
    fc_norm: bool | None = None
    norm_output: bool | None = None
    attention: str = LLAMA                        # a draft family: llama, qwen3, mla (models.families)
    q_lora_rank: int | None = None                # mla: rank of q's LoRA (None: one q_proj)
    kv_lora_rank: int | None = None               # mla: width of the compressed k/v latent
    qk_nope_head_dim: int | None = None           # mla: per-head q/k width RoPE leaves alone
    qk_rope_head_dim: int | None = None           # mla: per-head q/k width RoPE turns (= head_dim)
    v_head_dim: int | None = None                 # mla: per-head v width
    extra: dict = field(default_factory=dict)     # config keys kept for round trips (bos/eos ids...)

    def __post_init__(self):
        family_of(self.attention)   # a registered family, else refused naming the key
        check_sizes(self.__dict__)
        if self.attention == MLA:
            missing = [k for k in MLA_SIZES if not isinstance(getattr(self, k), int)]
            if missing:
                raise bad_input("draft config", missing[0], "an integer (an MLA draft needs all of "
                                f"{', '.join(MLA_SIZES)})", repr(getattr(self, missing[0])))
            # every head reads the one latent; head_dim is the RoPE width, as in transformers' DeepseekV3Config
            for key, value, rule in (("num_key_value_heads", self.num_attention_heads, "num_attention_heads: every "
                                      "head reads the one latent"),
                                     ("head_dim", self.qk_rope_head_dim, "qk_rope_head_dim: an MLA layer's RoPE width")):
                if getattr(self, key) not in (None, value):
                    raise bad_input("draft config", key, f"{value} (= {rule}) or absent for an MLA draft",
                                    getattr(self, key))
            self.num_key_value_heads, self.head_dim = self.num_attention_heads, self.qk_rope_head_dim
        self.num_key_value_heads = self.num_key_value_heads or self.num_attention_heads
        self.head_dim = self.head_dim or self.hidden_size // self.num_attention_heads
        self.draft_vocab_size = self.draft_vocab_size or self.vocab_size
        self.target_hidden_size = self.target_hidden_size or self.hidden_size
        if self.aux_layer_ids is not None:
            self.aux_layer_ids = tuple(int(i) for i in self.aux_layer_ids)
        self.num_aux = self.num_aux or (len(self.aux_layer_ids) if self.aux_layer_ids else 3)
        DraftRope(self.head_dim, self.rope_theta, self.rope_scaling, self.max_position_embeddings)  # refuses an unknown type

    @property
    def fc_width(self) -> int:
        """fc's input width: num_aux target states side by side (the one home of that rule)."""
        return self.num_aux * self.target_hidden_size

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class DraftOutput:
    logits: torch.Tensor          # [B, T, draft_vocab] ([B, n, V] with logits_to_keep=n, [N, V] with logits_at)
    hidden: torch.Tensor          # [B, T, H], the state to recycle into the next draft step
    cache: DraftCache | None = None


class DraftCache:
    """Per-layer keys/values (after RoPE, before GQA expansion) for incremental drafting.

    Appends with plain ``torch.cat``, so gradients flow through cached entries (training code
    presents the draft its own recycled states through this cache). ``crop(n)`` rolls back.
    """

    def __init__(self):
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []

    @property
    def seq_len(self) -> int:
        return self.keys[0].shape[-2] if self.keys else 0

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if layer == len(self.keys):
            self.keys.append(k)
            self.values.append(v)
        else:
            self.keys[layer] = torch.cat([self.keys[layer], k], dim=-2)
            self.values[layer] = torch.cat([self.values[layer], v], dim=-2)
        return self.keys[layer], self.values[layer]

    def crop(self, n: int) -> DraftCache:
        """Keep the first ``n`` positions (rollback after rejected drafts). Returns self."""
        if n < 0 or n > self.seq_len:
            raise bad_input("DraftCache.crop", "n", f"0 <= n <= seq_len={self.seq_len}", n)
        self.keys = [k[..., :n, :] for k in self.keys]
        self.values = [v[..., :n, :] for v in self.values]
        return self

    def __repr__(self) -> str:
        return f"DraftCache(layers={len(self.keys)}, seq_len={self.seq_len})"


# ---------------------------------------------------------------------------- building blocks

_ACT = {"silu": F.silu, "gelu": F.gelu, "relu": F.relu,
        "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh")}


class MLP(nn.Module):
    def __init__(self, cfg: DraftConfig):
        super().__init__()
        self.gate_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.up_proj = nn.Linear(cfg.hidden_size, cfg.intermediate_size, bias=False)
        self.down_proj = nn.Linear(cfg.intermediate_size, cfg.hidden_size, bias=False)
        self.act = _ACT[cfg.hidden_act]

    def forward(self, x):
        return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """A pre-norm Llama decoder layer (layers 1..); layer 0 is ``FirstDecoderLayer``.

    Hook points are made in forward order, so their names come out in that order.
    """

    def __init__(self, cfg: DraftConfig, index: int):
        super().__init__()
        attn_width = self.make_input_step(cfg)
        self.hook_residual, self.hook_attn_in = HookPoint(), HookPoint()
        self.self_attn = make_attention(cfg, attn_width, index)
        self.hook_attn_out, self.hook_resid_mid = HookPoint(), HookPoint()
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hook_mlp_in = HookPoint()
        self.mlp = MLP(cfg)
        self.hook_mlp_out, self.hook_resid_out = HookPoint(), HookPoint()

    def make_input_step(self, cfg: DraftConfig) -> int:
        """The norms that make attention's input (attribute names = checkpoint keys); q/k/v's input width."""
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        return cfg.hidden_size

    def input_step(self, h, emb, s: DraftSettings):
        """(resid: what the attention output is added to, attn_in: what q/k/v read)."""
        return h, self.input_layernorm(h)

    def forward(self, h, emb, s: DraftSettings, cos, sin, mask, cache, keys_only: bool = False):
        resid, attn_in = self.input_step(h, emb, s)
        resid, attn_in = self.hook_residual(resid), self.hook_attn_in(attn_in)
        if keys_only:   # rows only later queries read: their keys and values are all that is needed
            return self.self_attn(attn_in, s, cos, sin, mask, cache, keys_only=True)
        # self attention
        attn_out = self.hook_attn_out(self.self_attn(attn_in, s, cos, sin, mask, cache))
        resid = self.hook_resid_mid(resid + attn_out)
        # fully connected
        mlp_in = self.hook_mlp_in(self.post_attention_layernorm(resid))
        mlp_out = self.hook_mlp_out(self.mlp(mlp_in))
        return self.hook_resid_out(resid + mlp_out)


class FirstDecoderLayer(DecoderLayer):
    """Layer 0, EAGLE-3's dual-norm step: the token's embedding and the fed state ``h`` are normed
    apart and read side by side (q/k/v are 2H wide); the residual is the raw ``h``, or ``hidden_norm(h)``
    when the profile's ``norm_before_residual`` says so (speculators' ``LlamaDecoderEagle3FirstLayer``)."""

    def make_input_step(self, cfg: DraftConfig) -> int:
        super().make_input_step(cfg)
        self.hidden_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.hook_emb_normed, self.hook_hid_normed = HookPoint(), HookPoint()
        return 2 * cfg.hidden_size

    def input_step(self, h, emb, s: DraftSettings):
        emb_normed = self.hook_emb_normed(self.input_layernorm(emb))
        hid_normed = self.hook_hid_normed(self.hidden_norm(h))
        resid = hid_normed if s.norm_before_residual else h   # the residual rule: the profile's (SGLang ignores the flag)
        return resid, torch.cat([emb_normed, hid_normed], dim=-1)


# ---------------------------------------------------------------------------- the draft

class Eagle3Draft(nn.Module):
    """An EAGLE-3 draft head; ``draft.under("sglang")`` runs the same weights the way SGLang would."""

    def __init__(self, config: DraftConfig, profile: str | EngineProfile = "speculators", fmt: str | None = None):
        super().__init__()
        cfg = self.config = config
        H, fc_width = cfg.hidden_size, cfg.fc_width
        self.embed_tokens = nn.Embedding(cfg.vocab_size, H)
        self.hook_embed, self.hook_fc_in = HookPoint(), HookPoint()
        if cfg.norm_before_fc:   # one RMSNorm over the whole fc input (gpt-oss drafts)
            self.input_norm = RMSNorm(fc_width, cfg.rms_norm_eps)
        if cfg.fc_norm:          # one RMSNorm per aux chunk (EAGLE 3.1)
            self.fc_norm = nn.ModuleList(RMSNorm(cfg.target_hidden_size, cfg.rms_norm_eps) for _ in range(cfg.num_aux))
        if cfg.norm_before_fc or cfg.fc_norm:
            self.hook_fc_normed = HookPoint()
        self.fc = nn.Linear(fc_width, H, bias=False)
        self.hook_fc_out, self.hook_recycled_in = HookPoint(), HookPoint()
        self.layers = nn.ModuleList([FirstDecoderLayer(cfg, 0)] +
                                    [DecoderLayer(cfg, i) for i in range(1, cfg.num_hidden_layers)])
        self.hook_prenorm_out = HookPoint()
        self.norm = RMSNorm(H, cfg.rms_norm_eps)
        self.hook_normed_out = HookPoint()
        self.lm_head = nn.Linear(H, cfg.draft_vocab_size, bias=False)
        self.hook_logits, self.hook_hidden_out = HookPoint(), HookPoint()
        # one source of names, set once from the module paths: "hook_fc_out", "layers.0.self_attn.hook_q", ...
        self.hook_points = setup_hooks(self)
        if cfg.draft_vocab_size != cfg.vocab_size:
            self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
            self.register_buffer("t2d", torch.zeros(cfg.vocab_size, dtype=torch.bool))
        else:
            self.d2t = self.t2d = None
        self.format = fmt
        self.target_embedding: torch.Tensor | None = None   # the target's embedding weight, when known
        self.num_target_layers: int | None = None
        self.target_arch: str | None = None
        self.load_report = None
        self.embedding_missing = False   # loaded for conversion only: the checkpoint had no embedding
        self.wiring: dict = {}           # explicit overrides from rewired(): they survive under()
        self._set_profile(profile)

    # -- engine view -----------------------------------------------------------------------
    def _set_profile(self, profile):
        self.profile = get_profile(profile)
        self.settings = resolve_settings(self.config, self.profile, self.format,
                                         has_target_embedding=self.target_embedding is not None)
        flags = {k: v for k, v in self.wiring.items() if k != "aux_resid"}
        if flags:
            self.settings = replace(self.settings, **flags, decisions={
                **self.settings.decisions, **{k: Decision(v, "set explicitly with rewired()") for k, v in flags.items()}})
        # fp32 and not a buffer, so that draft.to(bfloat16) cannot round the RoPE frequencies
        self.rope = DraftRope(self.config.head_dim, self.config.rope_theta, self.settings.rope_scaling,
                              self.config.max_position_embeddings, self.settings.rope_length)
        self._rope_table: dict = {}   # (device, dtype, regime) -> (cos, sin) rows by position, grown on demand

    def under(self, profile: str | EngineProfile) -> Eagle3Draft:
        """The same weights (shared, not copied) run with that engine's arithmetic."""
        twin = copy.copy(self)  # shares the parameter/buffer dicts; only profile-derived attributes differ
        twin._set_profile(profile)
        return twin

    def rewired(self, aux_resid=None, **flags) -> Eagle3Draft:
        """The same weights fed ``aux_resid`` (canonical resid indices, in fc order) and/or with
        settings forced (e.g. ``norm_before_residual=True``), whatever the profile says.

        This is how a hypothesis is tested: "was this draft trained on [resid[0], resid[3], resid[7]]
        with the normed residual?" The overrides survive ``under()``.
        """
        unknown = set(flags) - {f.name for f in fields(DraftSettings)} - {"decisions"}
        if unknown or "decisions" in flags:
            raise bad_input("rewired", ", ".join(sorted(unknown | ({"decisions"} & set(flags)))),
                            f"aux_resid or a DraftSettings switch ({', '.join(f.name for f in fields(DraftSettings)[:-1])})",
                            "an unknown name")
        owners = {**switch_owners(self.config.attention),   # the switches a family's own weights carry
                  "fc_norm": (bool(self.config.fc_norm), "the fc_norm.{i} weights (config fc_norm true)"),
                  "norm_before_fc": (bool(self.config.norm_before_fc), "the input_norm weight (config "
                                                                        "norm_before_fc true)")}
        for flag, (present, weights) in owners.items():
            if flags.get(flag) and not present:
                raise bad_input("rewired", flag, f"true only for a draft with {weights}", "true",
                                f"This {self.config.attention} draft has none; switching it off is always possible.")
        if aux_resid is not None and len(aux_resid) != self.config.num_aux:
            raise bad_input("rewired", "aux_resid", f"{self.config.num_aux} resid indices (fc reads "
                            f"{self.config.num_aux} x {self.config.target_hidden_size})", list(aux_resid))
        twin = copy.copy(self)
        twin.wiring = {**self.wiring, **flags, **({"aux_resid": tuple(int(k) for k in aux_resid)} if aux_resid is not None else {})}
        twin._set_profile(self.profile)
        return twin

    def variants(self) -> list[dict[str, bool]]:
        """Every setting of the switches these weights can run with, as ``rewired`` keywords: the
        first-layer residual rule and the recycled state always; an fc norm only when its weights
        exist (then also without it, as an engine that ignores it runs). A wiring search enumerates
        these, so a draft family with other switches brings its own list: Qwen3 drafts add their q/k
        norms (on, then off as SGLang would drop them); MLA adds none (every engine that serves it
        computes the same latent attention)."""
        fc_rules = [{"norm_before_fc": False, "fc_norm": False}]
        if self.config.norm_before_fc:
            fc_rules.append({"norm_before_fc": True, "fc_norm": False})
        if self.config.fc_norm:
            fc_rules.append({"norm_before_fc": False, "fc_norm": True})
        family = family_of(self.config.attention).variants
        return [{**fc, **extra, "norm_before_residual": nbr, "recycle_postnorm": post}
                for extra in family for fc in fc_rules for nbr in (False, True) for post in (False, True)]

    def bound(self, num_target_layers: int | None = None, target_arch: str | None = None,
              target_embedding: torch.Tensor | None = None) -> Eagle3Draft:
        """The same weights bound to a target: its layer count and architecture (which states the
        profile's ids mean) and its embedding (for engines that swap it in); unset arguments keep
        what this draft had. The settings are resolved again, since they depend on the embedding."""
        twin = copy.copy(self)
        if num_target_layers is not None:
            twin.num_target_layers = int(num_target_layers)
        if target_arch is not None:
            twin.target_arch = target_arch
        if target_embedding is not None:
            # a plain tensor: an nn.Parameter would be registered in the parameter dict the twin shares
            twin.target_embedding = target_embedding.detach()
        twin._set_profile(self.profile)
        return twin

    @property
    def aux_resolution(self):
        """Which target states this draft is fed under its profile (the profile translates the ids)."""
        if self.num_target_layers is None:
            raise bad_input("draft", "num_target_layers", "the target's number of decoder layers",
                            "None", "Pass load_draft(..., target=) or num_target_layers=.")
        return self.profile.aux_resolution(self.config.aux_layer_ids, self.config.aux_ids_key,
                                           self.num_target_layers, self.target_arch)

    @property
    def aux_resid(self) -> tuple[int, ...]:
        if "aux_resid" in self.wiring:
            return self.wiring["aux_resid"]
        return tuple(self.aux_resolution.resid)

    # -- the math ----------------------------------------------------------------------------
    def forward(self, input_ids, aux_hidden_states=None, *, recycled_hidden=None, position_ids=None,
                attention_mask=None, cache: DraftCache | None = None, logits_to_keep: int = 0,
                logits_at: torch.Tensor | None = None, keys_only: bool = False) -> DraftOutput | None:
        """``logits_to_keep`` n > 0: logits for the last n rows only (decoding reads one; the LM head
        over every row of a long extend is the costliest waste), and so ``hook_logits`` sees
        ``[B, n, V]``; ``logits_at`` ([B, T] bool): logits only at those rows, ``[N, V]`` in row order (offline
        scoring reads only the anchors after each prompt). ``hidden`` keeps every row. ``keys_only``: these
        rows only fill ``cache`` for later rows (the last layer computes its keys and values, nothing after
        them) and None is returned: offline scoring's prompt rows, which no logit is read at."""
        s, cfg = self.settings, self.config
        B, T = input_ids.shape
        if logits_to_keep < 0:
            raise bad_input("draft forward", "logits_to_keep", "0 (every row) or n > 0 (the last n rows)",
                            logits_to_keep)
        past = cache.seq_len if cache is not None else 0
        if self.embedding_missing and not s.use_target_embedding:
            raise bad_input("draft", "embed_tokens.weight", "an embedding (this checkpoint has none)", "missing",
                            "Load it with load_draft(..., target=) so the target's embedding is used.")
        emb_weight = self.target_embedding if s.use_target_embedding else self.embed_tokens.weight
        # rows in fc's dtype: a target's bf16 embedding feeding an fp32 draft (doctor's search) is upcast
        emb = self.hook_embed(F.embedding(input_ids, emb_weight).to(self.fc.weight.dtype))

        if (aux_hidden_states is None) == (recycled_hidden is None):
            raise bad_input("draft forward", "aux_hidden_states / recycled_hidden", "exactly one of them",
                            "both" if aux_hidden_states is not None else "neither")
        if aux_hidden_states is not None:   # target features go through fc
            self._check_width("aux_hidden_states", aux_hidden_states, cfg.fc_width, B, T)
            h = self.hook_fc_out(self.fc(self._fc_input(aux_hidden_states, s)))
        else:                               # the draft's own previous state skips fc
            self._check_width("recycled_hidden", recycled_hidden, cfg.hidden_size, B, T)
            h = self.hook_recycled_in(recycled_hidden)

        cos, sin = self._rope(past, T, position_ids, h.dtype, input_ids.device)   # [B|1, 1, T, head_dim]
        mask = self._mask(attention_mask, T, past, input_ids.device)

        if keys_only and cache is None:
            raise bad_input("draft forward", "keys_only", "a cache to fill", "cache=None")
        for i, layer in enumerate(self.layers):
            h = layer(h, emb, s, cos, sin, mask, cache, keys_only=keys_only and i == len(self.layers) - 1)
        if keys_only:
            return None
        prenorm = self.hook_prenorm_out(h)
        normed = self.hook_normed_out(self.norm(prenorm) if s.final_norm else prenorm)
        kept = normed[logits_at] if logits_at is not None else normed[:, -logits_to_keep:] if logits_to_keep else normed
        logits = self.hook_logits(self.lm_head(kept))
        hidden = self.hook_hidden_out(normed if s.recycle_postnorm else prenorm)
        return DraftOutput(logits=logits, hidden=hidden, cache=cache)

    def _fc_input(self, aux, s: DraftSettings):
        """fc's input: the aux states side by side, normed as a whole (norm_before_fc) or per target
        state (fc_norm) when the draft has that norm and the profile applies it."""
        fc_in = self.hook_fc_in(aux)
        if s.norm_before_fc:
            return self.hook_fc_normed(self.input_norm(fc_in))
        if s.fc_norm:
            chunks = fc_in.split(self.config.target_hidden_size, dim=-1)
            return self.hook_fc_normed(torch.cat([norm(c) for norm, c in zip(self.fc_norm, chunks)], dim=-1))
        return fc_in

    def _rope(self, past: int, T: int, position_ids, dtype, device):
        """cos, sin [B|1, 1, T, head_dim]. Consecutive positions (every chain step) are rows of a table
        computed once per frequency set, so a one-token draft step pays no trigonometry; explicit
        positions ([B, T], or [3, B, T] for mrope) are computed."""
        if position_ids is None and torch.is_inference_mode_enabled():
            # a table made here would be an inference tensor, unusable by a later training forward
            position_ids = torch.arange(past, past + T, device=device)[None]
        if position_ids is not None:
            if position_ids.dim() == 3 and self.rope.kind != "mrope":
                raise bad_input("draft forward", "position_ids", f"[B, {T}] positions (only mrope drafts take [3, B, T])",
                                f"shape {tuple(position_ids.shape)}")
            cos, sin = self.rope.cos_sin(position_ids, int(position_ids.max()) + 1, dtype)
            return cos.unsqueeze(-3), sin.unsqueeze(-3)   # [3, B, T, d] mrope rows are merged into [B, T, d]
        key = (device, dtype, self.rope.regime(past + T))
        table = self._rope_table.get(key)
        if table is None or table[0].shape[0] < past + T:
            rows = max(past + T, 2 * (table[0].shape[0] if table is not None else 128))
            table = self.rope.cos_sin(torch.arange(rows, device=device), past + T, dtype)
            # one device and frequency set at a time: old tables are not kept alive
            self._rope_table = {k: v for k, v in self._rope_table.items() if k[0] == device and k[2] is None} | {key: table}
        return table[0][None, None, past:past + T], table[1][None, None, past:past + T]

    @staticmethod
    def _mask(attention_mask, T: int, past: int, device):
        if attention_mask is None:  # causal after the cache: query t sees keys 0..past+t
            return None if T == 1 else torch.ones(T, past + T, dtype=torch.bool, device=device).tril(past)
        if attention_mask.dtype != torch.bool or attention_mask.dim() != 4 or \
                tuple(attention_mask.shape[-2:]) != (T, past + T):
            raise bad_input("draft forward", "attention_mask", f"a bool tensor [B or 1, 1, {T}, {past + T}] "
                            "(True = may attend)", f"{attention_mask.dtype} {tuple(attention_mask.shape)}")
        return attention_mask

    @staticmethod
    def _check_width(key, x, width, B, T):
        if x.dim() != 3 or x.shape[-1] != width or x.shape[1] != T:
            raise bad_input("draft forward", key, f"a tensor [{B}, {T}, {width}]", f"shape {tuple(x.shape)}",
                            "aux_hidden_states is num_aux target states concatenated; recycled_hidden is "
                            "the draft's own .hidden from the previous step.")

    # -- vocab ---------------------------------------------------------------------------------
    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary ids -> target ids (``i + d2t[i]``; identity without a map)."""
        if self.d2t is None:
            return draft_ids
        return draft_ids + self.d2t[draft_ids]

    # -- hooks ---------------------------------------------------------------------------------
    @property
    def hook_names(self) -> tuple[str, ...]:
        return tuple(self.hook_points)

    def hooks(self, fns: dict):
        """Context manager installing ``{name or pattern: fn(tensor, name) -> tensor | None}``.

        Views from ``under()`` / ``rewired()`` share the weights and so the hook points: a hook installed
        through one view fires in any view run inside the ``with`` block."""
        return installed(self.hook_points, fns)

    def run_with_cache(self, *args, names=None, detach: bool = True, **kwargs):
        """``(DraftOutput, {hook name: tensor})`` for the selected names (all when None)."""
        return run_with_cache(self, self.hook_points, *args, names=names, detach=detach, **kwargs)

    def run_with_patches(self, *args, patches: dict, **kwargs) -> DraftOutput:
        """Forward with ``{name: tensor or fn}`` replacing those activations."""
        return run_with_patches(self, self.hook_points, *args, patches=patches, **kwargs)

    def extra_repr(self) -> str:
        return f"profile={self.profile.name}, format={self.format}"
