"""One reader of target and draft ``config.json`` files, the way transformers and the engines read them.

Every check of a config goes through it (draft loading, inspect, doctor's static checks, the family detector's
RoPE): what a key means is decided here once, not by each caller's ``dict.get``. Pure Python (no torch): the
engines layer reads it too.

- **RoPE** (``Rope``). transformers 5 holds theta and the scaling together in ``rope_parameters`` and saves no
  ``rope_scaling``; older configs write ``rope_scaling`` and ``rope_theta``. transformers 5's
  ``convert_rope_params_to_dict`` (modeling_rope_utils.py, 5.19 and 5.24) takes the legacy ``rope_scaling`` when it
  is set, else ``rope_parameters``; theta is the chosen dict's ``rope_theta``, else the top-level ``rope_theta``,
  else 10000; ``standardize_rope_params`` fills ``original_max_position_embeddings`` with
  ``max_position_embeddings`` for llama3, yarn and longrope. vLLM reads ``config.rope_parameters`` and SGLang
  ``config.rope_scaling``, which transformers 5 makes the same dict, so every engine on transformers 5 reads
  what this reads. ``Rope.computes`` is what the RoPE computes (theta, type, the numbers the type reads), the one
  thing two configs are compared by. Models with several attention types (Gemma3, Gemma3n, Olmo3, ModernBERT in
  transformers 5.24) save ``rope_parameters`` keyed by layer type; the draft's one decoder layer is a full-attention
  layer, so the ``full_attention`` entry is read (``per_layer_rope``); without one, ``Rope.unclear`` says why and
  nothing is compared.
- **Multimodal targets** keep the decoder in ``text_config`` (Kimi-K2.5's KimiK25ForConditionalGeneration,
  Qwen3-VL's Qwen3VLForConditionalGeneration); the served architecture is the top-level one.
- **Sliding windows** (``Window``): ``sliding_window`` with ``layer_types`` (which layers slide) and Qwen's
  ``use_sliding_window`` (false: no window).
- **Flags** at the top level and in ``eagle_config`` (NVIDIA ModelOpt exports nest ``norm_before_fc`` there), and
  the aux ids at both keys (``IDS_TOP``, ``IDS_NESTED``) with ``num_aux_hidden_states``: which key each engine
  reads is engine knowledge (eagle3lab.engines.profiles), not decided here.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3lab.engines.vllm_runner import IDS_NESTED, IDS_TOP

DEFAULT_THETA = 10000.0          # transformers' default_theta
NESTED = "eagle_config"
NUM_AUX_KEY = "num_aux_hidden_states"
# the rope_scaling keys each type's transformers function reads (others are carried, not computed with)
ROPE_READS = {
    "default": (), "linear": ("factor",), "dynamic": ("factor",),
    "yarn": ("factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "mscale", "mscale_all_dim",
             "attention_factor", "truncate"),
    "longrope": ("short_factor", "long_factor", "original_max_position_embeddings", "attention_factor"),
    "llama3": ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"),
}
ROPE_DEFAULTS = {"yarn": {"beta_fast": 32.0, "beta_slow": 1.0}}   # transformers' _compute_yarn_parameters
# the rope types whose original_max_position_embeddings transformers' standardize_rope_params fills (context_rules too)
ORIGINAL_FILLED_ROPE_TYPES = ("llama3", "yarn", "longrope")


def rope_type_of(rope_scaling: dict | None) -> str:
    """The RoPE type as the engines read it: rope_type, else the legacy type; "mrope" also for rope_type default with
    mrope_section, transformers 5's spelling (vLLM's transformers_utils/config.py rewrites a legacy 'type: mrope' to
    it and builds MRotaryEmbedding; SGLang's llama_eagle3.py keys mrope on mrope_section)."""
    if not rope_scaling:
        return "default"
    kind = str(rope_scaling.get("rope_type", rope_scaling.get("type", "default")))
    return "mrope" if kind == "default" and "mrope_section" in rope_scaling else kind


def text_config(raw: dict) -> dict:
    """The language-model part of a config: ``text_config`` of a multimodal wrapper, else the config itself."""
    inner = raw.get("text_config")
    return inner if isinstance(inner, dict) else raw


def layer_config(raw: dict) -> dict:
    """Where a draft's layer geometry lives: speculators' ``transformer_layer_config``, else the top level."""
    inner = raw.get("transformer_layer_config")
    return inner if isinstance(inner, dict) else raw


def _number(value):
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value


@dataclass(frozen=True)
class Rope:
    """A config's RoPE as transformers 5 reads it: ``theta``, the ``scaling`` (rope_type and its numbers, no
    rope_theta; None = plain RoPE), where each was read, and the layer's ``max_positions``."""

    theta: float
    scaling: dict | None
    theta_from: str              # "rope_parameters[.full_attention].rope_theta", "rope_theta" or "default"
    scaling_from: str | None     # "rope_scaling", "rope_parameters[.full_attention]" or None (nothing written)
    max_positions: int | None = None
    unclear: str | None = None   # why the full-attention layers' RoPE could not be read (None: read)

    @property
    def kind(self) -> str:
        return rope_type_of(self.scaling)

    def computes(self) -> tuple:
        """What this RoPE computes: theta, the type (mrope's text positions are plain RoPE's) and the numbers that
        type reads, with transformers' defaults filled, so equal tuples rotate every position alike."""
        kind = "default" if self.kind == "mrope" else self.kind
        given = dict(ROPE_DEFAULTS.get(kind, {}), **{k: v for k, v in (self.scaling or {}).items() if v is not None})
        if kind in ORIGINAL_FILLED_ROPE_TYPES and self.max_positions is not None:
            given.setdefault("original_max_position_embeddings", self.max_positions)
        keys = ROPE_READS.get(kind, tuple(k for k in sorted(given) if k not in ("type", "rope_type")))
        numbers = tuple((k, _number(given.get(k))) for k in keys if k in given)
        extra = (("max_position_embeddings", self.max_positions),) if kind == "dynamic" else ()
        return (float(self.theta), kind, numbers + extra)

    def filled_scaling(self) -> dict | None:
        """The scaling with original_max_position_embeddings filled as transformers 5 fills it (llama3, yarn,
        longrope: max_position_embeddings), so that it computes the same under another max_position_embeddings."""
        if self.scaling is None or self.kind not in ORIGINAL_FILLED_ROPE_TYPES or self.max_positions is None:
            return None if self.scaling is None else dict(self.scaling)
        return {**self.scaling, "original_max_position_embeddings":
                self.scaling.get("original_max_position_embeddings") or self.max_positions}

    def words(self) -> str:
        if self.unclear:
            return f"not read ({self.unclear})"
        scaling = "plain" if self.scaling is None else f"{self.kind} {_short(self.scaling)}"
        return f"theta {self.theta:g} ({self.theta_from}), {scaling}" + (
            f" ({self.scaling_from})" if self.scaling_from and self.scaling is not None else "")

    def legacy_keys(self) -> dict:
        """These RoPE settings in the keys every transformers (4 and 5) and so every engine reads: ``rope_scaling``
        (transformers 5 prefers it to ``rope_parameters``; null = plain) and ``rope_theta``."""
        return {"rope_scaling": dict(self.scaling) if self.scaling is not None else None, "rope_theta": self.theta}


def _short(scaling: dict) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in scaling.items() if k not in ("type", "rope_type")) + "}"


FULL_ATTENTION = "full_attention"


def per_layer_rope(params, layer: dict) -> bool:
    """``rope_parameters`` keyed by layer type (transformers 5.19/5.24 ``nested_rope_parameter_keys``: keys named in
    ``layer_types``). A plain RoPE dict never holds a dict, so one holding a dict is keyed too, ``layer_types`` or
    not."""
    if not isinstance(params, dict):
        return False
    types = layer.get("layer_types") if isinstance(layer.get("layer_types"), list) else ()
    return any(isinstance(v, dict) for v in params.values()) or any(k in types for k in params)


def _full_attention(legacy, params: dict, layer: dict) -> tuple[dict | None, str, str | None]:
    """``(rope dict, where, unclear)`` of the full-attention layers from a per-layer-type ``rope_parameters``: the
    draft's decoder layer is a full-attention layer (LlamaForCausalLMEagle3 and its peers have no sliding layer
    type). A legacy ``rope_scaling`` updates that entry, as Gemma3/Gemma3n/Olmo3/ModernBERT's
    ``convert_rope_params_to_dict`` do (transformers 5.24); the entry's theta, else the top-level rope_theta (the
    same method's setdefault), else the model class's own default, which a config does not name: unclear."""
    entry, where = params.get(FULL_ATTENTION), f"rope_parameters.{FULL_ATTENTION}"
    keys = ", ".join(map(str, params))
    if not isinstance(entry, dict):
        return None, where, (f"rope_parameters is keyed by layer type ({keys}) with no {FULL_ATTENTION} RoPE "
                             "entry: which one the draft's full-attention layer should match is not written")
    if isinstance(legacy, dict) and legacy:
        entry, where = {**entry, **legacy}, f"rope_scaling over {where}"
    if entry.get("rope_theta") is None and layer.get("rope_theta") is None:
        return None, where, (f"{where} writes no rope_theta, nor does the config: its theta is the model class's "
                             "default (Gemma3: 1e6, Olmo3: 5e5), not read from the config")
    return entry, where, None


def read_rope(layer: dict) -> Rope:
    """``layer``'s RoPE (a target's text_config, a draft's layer config) by transformers 5's rule (module docstring)."""
    legacy, params = layer.get("rope_scaling"), layer.get("rope_parameters")
    positions = layer.get("max_position_embeddings")
    positions = positions if isinstance(positions, int) else None
    if per_layer_rope(params, layer):
        chosen, source, unclear = _full_attention(legacy, params, layer)
        if unclear:   # theta as a reader without the layer types takes it; compared with nothing (rope_problem)
            top = layer.get("rope_theta")
            return Rope(float(top) if top is not None else DEFAULT_THETA, None,
                        "rope_theta" if top is not None else "default", None, positions, unclear)
    else:
        chosen, source = ((legacy, "rope_scaling") if isinstance(legacy, dict) and legacy else
                          (params, "rope_parameters") if isinstance(params, dict) and params else (None, None))
    if chosen is not None and chosen.get("rope_theta") is not None:
        theta, theta_from = chosen["rope_theta"], f"{source}.rope_theta"
    elif layer.get("rope_theta") is not None:
        theta, theta_from = layer["rope_theta"], "rope_theta"
    else:
        theta, theta_from = DEFAULT_THETA, "default"
    scaling = {k: v for k, v in (chosen or {}).items() if k != "rope_theta"} or None
    if scaling is not None and rope_type_of(scaling) == "default" and \
            not (set(scaling) - {"rope_type", "type", "partial_rotary_factor"}):
        scaling = None   # rope_parameters {rope_type: default, rope_theta}: plain RoPE
    return Rope(float(theta), scaling, theta_from, source if scaling is not None else None, positions)


@dataclass(frozen=True)
class Window:
    """A sliding window as written: ``size`` (sliding_window), ``layer_types`` (which layers slide; None = not
    written) and ``use_sliding_window`` (Qwen's switch; None = not written)."""

    size: int | None
    layer_types: tuple[str, ...] | None
    use_sliding_window: bool | None

    @property
    def written(self) -> bool:
        return bool(self.size)

    def sliding_layers(self, num_layers: int) -> tuple[int, ...]:
        """The layers transformers runs with the window: none when use_sliding_window is false or no size is
        written; those ``layer_types`` names "sliding_attention" when written; else every layer."""
        if not self.size or self.use_sliding_window is False:
            return ()
        if self.layer_types is not None:
            return tuple(i for i, t in enumerate(self.layer_types[:num_layers]) if "sliding" in str(t))
        return tuple(range(num_layers))

    def by_layer_types(self, num_layers: int) -> tuple[int, ...]:
        """The layers a reader that applies a window only through ``layer_types`` runs with it (vLLM's llama.py,
        speculators' eagle3 core.py)."""
        if not self.size or self.layer_types is None:
            return ()
        return tuple(i for i, t in enumerate(self.layer_types[:num_layers]) if t == "sliding_attention")


WINDOW_KEYS = ("sliding_window", "layer_types", "use_sliding_window")


def read_window(layer: dict) -> Window:
    size, types = layer.get("sliding_window"), layer.get("layer_types")
    use = layer.get("use_sliding_window")
    return Window(size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else None,
                  tuple(str(t) for t in types) if isinstance(types, list) else None,
                  use if isinstance(use, bool) else None)


@dataclass(frozen=True)
class Written:
    """One key written at the top level and/or in ``eagle_config``: each value as written (None = absent)."""

    top: object = None
    nested: object = None

    def at(self, key_order: tuple[str, ...]) -> tuple[object, str | None]:
        """``(value, where)`` for a reader that tries ``key_order`` ("top" / "nested") in turn, first written wins."""
        for where in key_order:
            value = self.top if where == "top" else self.nested
            if value is not None:
                return value, where
        return None, None


@dataclass(frozen=True)
class TargetView:
    """A target's config.json as the engines read it."""

    where: str
    arch: str | None                 # the architecture the engines load (the top level's, e.g. a VL wrapper)
    text_arch: str | None            # the decoder's (text_config's), when it differs
    num_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    max_positions: int | None
    rope: Rope
    window: Window
    dtype: str | None
    multimodal: bool


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def read_target(raw: dict, where: str = "target config.json") -> TargetView:
    text = text_config(raw)
    archs = [str(a) for a in (raw.get("architectures") or text.get("architectures") or [])]
    text_archs = [str(a) for a in (text.get("architectures") or [])]
    return TargetView(where, archs[0] if archs else None,
                      text_archs[0] if text_archs and text_archs[:1] != archs[:1] else None,
                      _int(text.get("num_hidden_layers")), _int(text.get("hidden_size")), _int(text.get("vocab_size")),
                      _int(text.get("max_position_embeddings")), read_rope(text), read_window(text),
                      text.get("torch_dtype") or text.get("dtype") or raw.get("torch_dtype") or raw.get("dtype"),
                      text is not raw)


@dataclass(frozen=True)
class DraftView:
    """A draft's config.json as read by the engines: the layer config, its RoPE and window, every flag and the aux
    ids at both places they are written, and the aux count written outright."""

    where: str
    layer: dict
    rope: Rope
    window: Window
    max_positions: int | None
    num_layers: int
    flags: dict[str, Written]
    ids: Written
    num_aux: object                  # num_aux_hidden_states as written (None = absent)
    num_aux_key: str | None
    speculators: bool                # geometry nested in transformer_layer_config

    def key(self, name: str, where: str | None) -> str:
        """The config key ``name`` read at ``where`` ("top", "nested"), as a user writes it."""
        return f"{NESTED}.{name}" if where == "nested" else name

    @property
    def layer_prefix(self) -> str:
        return "transformer_layer_config." if self.speculators else ""


def read_draft(raw: dict, flags: tuple[str, ...], where: str = "draft config.json") -> DraftView:
    """``raw`` (a draft's config.json) read once; ``flags``: the switch names to read at both places."""
    layer = layer_config(raw)
    nested = raw.get(NESTED) if isinstance(raw.get(NESTED), dict) else {}
    inner = layer is not raw
    num_aux = layer.get(NUM_AUX_KEY)
    return DraftView(
        where, layer, read_rope(layer), read_window(layer), _int(layer.get("max_position_embeddings")),
        _int(layer.get("num_hidden_layers")) or 1,
        {flag: Written(raw.get(flag), nested.get(flag)) for flag in flags},
        Written(raw.get(IDS_TOP), nested.get("eagle_aux_hidden_state_layer_ids")),
        num_aux, (("transformer_layer_config." if inner else "") + NUM_AUX_KEY) if num_aux is not None else None,
        inner)


IDS_KEYS = {"top": IDS_TOP, "nested": IDS_NESTED}


def draft_format(raw: dict) -> str:
    """A draft config's checkpoint format by its keys: "speculators" (``speculators_model_type`` or a
    ``speculators_config``), else "sglang" (the flat config SGLang serves and SpecForge trains). The trainer whose
    arithmetic it was trained with is ``eagle3lab.engines.profiles.FORMAT_PROFILE[format]``; the full detection (MTP
    heads, targets, EAGLE's template) is eagle3lab.models.checkpoint_formats, which needs no more here."""
    speculators = "speculators_model_type" in raw or isinstance(raw.get("speculators_config"), dict)
    return "speculators" if speculators else "sglang"
