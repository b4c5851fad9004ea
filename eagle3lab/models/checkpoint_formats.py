"""The three draft checkpoint families as name tables: how to recognise each, read its config.json
into a ``DraftConfig``, and write one back. Weight names: our module uses speculators names;
the other families differ only by prefixes (eagle3-facts.md section 8).

- speculators: ``speculators_model_type: eagle3``; geometry in ``transformer_layer_config``; flags
  and ``eagle_aux_hidden_state_layer_ids`` (vLLM convention) at the top level; keys ``layers.0.*``.
- sglang (SpecForge / SGLang ``LlamaForCausalLMEagle3``): flat Llama config + ``draft_vocab_size``
  + ``eagle_config.eagle_aux_hidden_state_layer_ids`` (SGLang convention); keys ``midlayer.*``
  (older) or ``layers.0.*``; usually no embedding.
- eagle (SafeAILab/EAGLE): calls itself ``LlamaForCausalLM`` with ``draft_vocab_size``; no ids (the
  capture points are hard-coded); keys ``midlayer.*``; often a pickled ``pytorch_model.bin``.

The layer's draft family (``models.families``, one detector): Qwen3 drafts are speculators configs whose
layer ``model_type`` is ``qwen3`` (keys ``layers.0.self_attn.q_norm/k_norm.weight``); MLA drafts
are flat configs named ``Eagle3DeepseekV2ForCausalLM`` (SGLang ``kimi_k25_eagle3.py``, vLLM
``deepseek_eagle3.py``, TorchSpec) with q/kv LoRA ranks and nope/rope/v head dims, keys
``layers.0.self_attn.{q_a_proj, q_a_layernorm, q_b_proj, kv_a_proj_with_mqa, kv_a_layernorm,
kv_b_proj, o_proj}`` (``q_proj`` when ``q_lora_rank`` is null). EAGLE 3.1's per-chunk norms are
``fc_norm.{i}.weight`` (NeMo Automodel writes ``model.fc_norm.{i}.weight``, SGLang also reads
``aux_norm_low/mid/high``); the one norm over the whole fc input is ``input_norm.weight``.
"""

from __future__ import annotations

import re
from dataclasses import MISSING, fields

from eagle3lab.engines.config_view import WINDOW_KEYS, read_draft
from eagle3lab.engines.profiles import (
    FLAGS,
    IDS_NESTED,
    IDS_TOP,
    MLA,
    MLA_CONFIG_KEYS,
    NUM_AUX_KEY,
    TOP_FLAGS,
    mla_config_notes,
    modelopt_switch_notes,
)
from eagle3lab.errors import bad_input
from eagle3lab.models.draft import MLA_SIZES, DraftConfig, check_sizes
from eagle3lab.models.draft_family import written_aux_count
from eagle3lab.models.families import detect_family, family_of, layer_model_types

FORMATS = ("speculators", "sglang", "eagle")
SGLANG_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM")
SPECULATORS_ARCHS = ("Eagle3Speculator", "Eagle3DraftModel")
# Llama geometry keys read from (and written to) a flat config
GEOMETRY = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "num_hidden_layers", "vocab_size", "rms_norm_eps", "rope_theta", "rope_scaling",
            "max_position_embeddings", "hidden_act")
REQUIRED = ("hidden_size", "intermediate_size", "num_attention_heads", "vocab_size")
# keys kept verbatim for round trips
PASSTHROUGH = ("bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype", "dtype", "tie_word_embeddings")
IGNORED_WEIGHTS = ("verifier_norm.weight", "verifier_lm_head.weight")
# SGLang llama_eagle3.py's legacy names of the EAGLE 3.1 per-chunk norms (its legacy_name_map, 0.5.12 to
# SGLANG_NEWEST_READ)
LEGACY_FC_NORM = {"aux_norm_low.": "fc_norm.0.", "aux_norm_mid.": "fc_norm.1.", "aux_norm_high.": "fc_norm.2."}


def canonical_key(key: str) -> str:
    """A weight name from any family -> our (speculators) name."""
    key = key.removeprefix("model.")
    if key.startswith("midlayer."):
        key = "layers.0." + key[len("midlayer."):]
    for legacy, name in LEGACY_FC_NORM.items():
        if key.startswith(legacy):
            key = name + key[len(legacy):]
    return key


def family_key(key: str, fmt: str) -> str:
    """Our weight name -> the name a family writes."""
    if fmt in ("sglang", "eagle") and key.startswith("layers.0."):
        return "midlayer." + key[len("layers.0."):]
    return key


def classify_config(cfg: dict) -> tuple[str, str]:
    """``(kind, why)`` with kind in FORMATS, or 'target', 'mtp', 'unknown' (never raises)."""
    archs = [str(a) for a in (cfg.get("architectures") or [])]
    text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else {}
    if "speculators_model_type" in cfg:
        kind = cfg["speculators_model_type"]
        if kind == "eagle3":
            return "speculators", "speculators_model_type is 'eagle3'"
        return ("mtp" if "mtp" in str(kind).lower() else "unknown"), f"speculators_model_type is {kind!r}, not 'eagle3'"
    if any(a in SGLANG_ARCHS for a in archs):
        return "sglang", f"architectures {archs}"
    family, reason = detect_family(cfg)
    if family.is_flat_draft(cfg):   # a flat config like SpecForge's, with MLA attention
        return "sglang", f"an {family.label} EAGLE-3 draft ({reason})"
    if any(re.search(r"(MTP|NextN)", a) for a in archs):
        return "mtp", f"architectures {archs} name a multi-token-prediction head"
    layers = cfg.get("num_hidden_layers", text.get("num_hidden_layers"))
    if "draft_vocab_size" in cfg and "LlamaForCausalLM" in archs:
        return "eagle", "architectures ['LlamaForCausalLM'] with draft_vocab_size (the EAGLE official template)"
    if cfg.get("num_nextn_predict_layers") or text.get("num_nextn_predict_layers"):
        n = cfg.get("num_nextn_predict_layers") or text.get("num_nextn_predict_layers")
        return "target", (f"a target model ({', '.join(archs)}, {layers} layers) that bundles {n} MTP layer(s) "
                          "(num_nextn_predict_layers); MTP is served with its own draft path, not as EAGLE-3")
    if isinstance(layers, int) and layers > 4 and "draft_vocab_size" not in cfg:
        return "target", f"a target model ({', '.join(archs) or 'no architectures'}, {layers} layers)"
    return "unknown", f"architectures {archs or 'missing'}, no speculators_model_type, no draft_vocab_size"


def config_to_draft(cfg: dict, fmt: str, where: str) -> tuple[DraftConfig, list[tuple[str, object, str]]]:
    """A family's config.json -> ``(DraftConfig, defaulted fields as (field, value, rule))``."""
    defaulted: list[tuple[str, object, str]] = []
    geo_src = _geometry_source(cfg, fmt, where)
    view = read_draft(cfg, FLAGS, where)
    family = detect_family(cfg)[0]
    attention = family.name
    geo, model_type = _read_geometry(geo_src, view, family, defaulted)
    draft_vocab = cfg.get("draft_vocab_size")
    if draft_vocab is None:
        defaulted.append(("draft_vocab_size", geo["vocab_size"], "missing: engines use the target vocabulary "
                                                                 "(vLLM, SGLang)"))
    target_hidden = cfg.get("target_hidden_size")
    ids, ids_key = _read_aux_ids(view, where, defaulted)
    num_aux, num_aux_key = written_aux_count(cfg)
    if num_aux is not None:
        if not isinstance(num_aux, int) or num_aux < 1 or (ids is not None and num_aux != len(ids)):
            raise bad_input(where, num_aux_key, "a positive integer" + (f" equal to the {len(ids)} ids at {ids_key}"
                                                                      if ids is not None else ""), repr(num_aux))
    flags, tops = _read_flags(view, where, defaulted)
    extra = _extra_keys(cfg, geo_src, fmt, attention, model_type, tops, num_aux, defaulted)
    # every size refused here names the file and the key as written, before any tensor is made
    nested_keys = {*GEOMETRY, "q_lora_rank", *MLA_SIZES} if fmt == "speculators" else set()
    key_of = {**{k: f"transformer_layer_config.{k}" for k in nested_keys}, "num_aux": num_aux_key}
    defaults = {f.name: f.default for f in fields(DraftConfig) if f.default is not MISSING}
    check_sizes({**defaults, **geo, "draft_vocab_size": draft_vocab, "target_hidden_size": target_hidden,
                 "num_aux": num_aux, "attention": attention}, where, lambda k: key_of.get(k) or k)
    try:
        config = DraftConfig(**geo, draft_vocab_size=draft_vocab, target_hidden_size=target_hidden,
                             aux_layer_ids=ids, aux_ids_key=ids_key, num_aux=num_aux, attention=attention,
                             extra=extra, **flags)
    except TypeError as err:
        raise bad_input(where, None, "a Llama-style draft config", str(err)) from None
    return config, defaulted


def _geometry_source(cfg: dict, fmt: str, where: str) -> dict:
    """The dict that holds the layer geometry (speculators nests it in transformer_layer_config), its required
    sizes checked to be integers."""
    geo_src = cfg
    if fmt == "speculators":
        geo_src = cfg.get("transformer_layer_config")
        if not isinstance(geo_src, dict):
            raise bad_input(where, "transformer_layer_config", "a dict with the layer geometry (speculators format)",
                            type(geo_src).__name__)
    for key in REQUIRED:
        if not isinstance(geo_src.get(key), int):
            prefix = "transformer_layer_config." if fmt == "speculators" else ""
            raise bad_input(where, prefix + key, "an integer", repr(geo_src.get(key)))
    return geo_src


def _read_geometry(geo_src: dict, view, family, defaulted: list) -> tuple[dict, object]:
    """The layer geometry as written (RoPE as transformers 5 reads it), each missing key noted with the default
    that fills it, and the layer's model_type as written."""
    attention = family.name
    geo = {k: geo_src[k] for k in GEOMETRY if geo_src.get(k) is not None and k not in ("rope_theta", "rope_scaling")}
    # RoPE as transformers 5 reads it (rope_scaling, else rope_parameters; theta from the chosen dict, else rope_theta)
    if view.rope.theta_from != "default":
        geo["rope_theta"] = view.rope.theta
    if view.rope.scaling is not None:
        geo["rope_scaling"] = dict(view.rope.scaling)
    for key, rule in (("rope_theta", "Llama default 10000.0 (key missing, as in the EAGLE official template)"),
                      ("rms_norm_eps", "Llama default 1e-6"), ("num_key_value_heads", "= num_attention_heads"),
                      ("head_dim", "= hidden_size // num_attention_heads"),
                      ("max_position_embeddings", "default 2048"), ("hidden_act", "default silu"),
                      ("num_hidden_layers", "default 1")):
        if key not in geo and not (key == "head_dim" and attention == MLA):
            defaulted.append((key, None, rule))
    if attention == MLA:
        geo.update({k: geo_src.get(k) for k in ("q_lora_rank", *MLA_SIZES)})
        geo.pop("head_dim", None)   # an MLA layer's RoPE width is qk_rope_head_dim
    model_type = geo_src.get("model_type")   # absent: the family's layer
    if model_type not in {None, *layer_model_types()} and not family.keeps_model_type:
        defaulted.append(("model_type", model_type, "read as a Llama-style layer (no such draft layer is modelled)"))
    return geo, model_type


def _read_aux_ids(view, where: str, defaulted: list) -> tuple[tuple | None, str | None]:
    """The aux layer ids and the key they were read at (the top-level key first); ids written at both keys with
    different values are noted, since each engine reads its own key."""
    ids, ids_key = None, None
    for key, value in ((IDS_TOP, view.ids.top), (IDS_NESTED, view.ids.nested)):
        if value:
            if not (isinstance(value, list) and all(isinstance(i, int) for i in value)):
                raise bad_input(where, key, "a list of integer layer ids", repr(value))
            if ids is not None and list(ids) != value:
                defaulted.append(("aux_layer_ids", value, f"also written at {key} with different values; "
                                                          f"{ids_key} is used here, each engine reads its own key"))
                continue
            if ids is None:
                ids, ids_key = tuple(value), key
    return ids, ids_key


def _extra_keys(cfg: dict, geo_src: dict, fmt: str, attention: str, model_type, tops: dict, num_aux,
                defaulted: list) -> dict:
    """``DraftConfig.extra``: the keys kept as written for round trips and for the engines that read them (window,
    top-level flags, aux count, model_type, MLA keys, eagle_config switches, speculators' verifier)."""
    nested = cfg.get("eagle_config") if isinstance(cfg.get("eagle_config"), dict) else {}
    extra = {k: cfg[k] for k in PASSTHROUGH if k in cfg}
    extra.update({k: geo_src[k] for k in WINDOW_KEYS if geo_src.get(k) is not None})   # each engine reads it its way
    if tops:
        extra[TOP_FLAGS] = tops
    if num_aux is not None:
        extra[NUM_AUX_KEY] = num_aux
    if model_type not in {None, *layer_model_types()}:
        extra["model_type"] = model_type   # an MLA draft's (kimi_k2, deepseek_v3): vLLM picks MLA by it
    if attention == MLA:   # kept as written, with what the engines do with them
        extra.update({k: geo_src[k] for k in MLA_CONFIG_KEYS if k in geo_src})
        defaulted += mla_config_notes(geo_src)
    switches = {k: v for k, v in nested.items() if k not in ("eagle_aux_hidden_state_layer_ids", "use_aux_hidden_state")}
    if switches:
        extra["eagle_config"] = switches
        defaulted += modelopt_switch_notes(switches)
    if fmt == "speculators":
        spec = cfg.get("speculators_config") or {}
        methods = spec.get("proposal_methods") or [{}]
        extra["verifier"] = (spec.get("verifier") or {}).get("name_or_path")
        extra["verifier_architectures"] = (spec.get("verifier") or {}).get("architectures")
        extra["speculative_tokens"] = methods[0].get("speculative_tokens") if methods else None
    return extra


def _read_flags(view, where: str, defaulted: list) -> tuple[dict, dict]:
    """Each flag as the engines that read both places read it (eagle_config's, else the top-level key), and the
    top-level values of the flags eagle_config also states (each engine's own reading: profiles.resolve_settings)."""
    flags, tops = {}, {}
    for flag, places in view.flags.items():
        for key, value in ((flag, places.top), (f"eagle_config.{flag}", places.nested)):
            if value is not None and not isinstance(value, bool):
                raise bad_input(where, key, "true, false or absent", repr(value))
        flags[flag] = places.at(("nested", "top"))[0]
        if places.nested is not None:
            tops[flag] = places.top
            if places.top is not None and places.top != places.nested:
                defaulted.append((flag, places.top, f"eagle_config.{flag} is {places.nested}: engines that read "
                                                    "eagle_config first (vLLM 0.22.0+, SGLang 0.5.17+) use it"))
    return flags, tops


def draft_to_config(cfg: DraftConfig, fmt: str, ids: list[int] | None, flags: dict[str, bool]) -> dict:
    """A ``DraftConfig`` -> the config.json dict of family ``fmt`` (ids already in its convention)."""
    family = family_of(cfg.attention)
    geo = {"hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
           "num_attention_heads": cfg.num_attention_heads, "num_key_value_heads": cfg.num_key_value_heads,
           "head_dim": cfg.head_dim, "num_hidden_layers": cfg.num_hidden_layers, "vocab_size": cfg.vocab_size,
           "rms_norm_eps": cfg.rms_norm_eps, "rope_theta": cfg.rope_theta, "rope_scaling": cfg.rope_scaling,
           "max_position_embeddings": cfg.max_position_embeddings, "hidden_act": cfg.hidden_act,
           "model_type": cfg.extra.get("model_type", family.model_type),   # vLLM builds MLA only for DeepSeek types
           "attention_bias": False, "mlp_bias": False}
    if cfg.attention == MLA:   # SGLang and vLLM read these; head_dim is the rope width, not written
        del geo["head_dim"]
        geo.update({k: getattr(cfg, k) for k in ("q_lora_rank", *MLA_SIZES)})
        geo.update({k: cfg.extra[k] for k in MLA_CONFIG_KEYS if k in cfg.extra})
    if cfg.num_aux != 3 or NUM_AUX_KEY in cfg.extra:
        # vLLM's llama_eagle3.py sizes fc from this key (or eagle_config's ids), never from the top-level ids
        # (vllm#54526); in a speculators config only transformer_layer_config reaches the model
        geo[NUM_AUX_KEY] = cfg.num_aux
    passthrough = {k: cfg.extra[k] for k in PASSTHROUGH if k in cfg.extra}
    geo.update({k: cfg.extra[k] for k in WINDOW_KEYS if k in cfg.extra})
    if fmt == "speculators":
        out = {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
               "speculators_version": "0.1.0", "draft_vocab_size": cfg.draft_vocab_size,
               "target_hidden_size": cfg.target_hidden_size, **flags,
               "transformer_layer_config": geo,
               "speculators_config": {
                   "algorithm": "eagle3", "default_proposal_method": "greedy",
                   "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens":
                                         cfg.extra.get("speculative_tokens") or 3,
                                         "accept_tolerance": 0.0, "verifier_accept_k": 1}],
                   "verifier": {"name_or_path": cfg.extra.get("verifier"),
                                "architectures": cfg.extra.get("verifier_architectures") or []}},
               **passthrough}
        if ids is not None:
            out[IDS_TOP] = list(ids)
        return out
    # sglang: the family's own draft architecture, the first it names (MLA: Eagle3DeepseekV2ForCausalLM)
    arch = ((family.draft_archs or SGLANG_ARCHS)[0]) if fmt == "sglang" else "LlamaForCausalLM"
    out = {"architectures": [arch], **geo,
           "draft_vocab_size": cfg.draft_vocab_size, **passthrough}
    if cfg.target_hidden_size != cfg.hidden_size:
        out["target_hidden_size"] = cfg.target_hidden_size
    out.update({k: v for k, v in flags.items() if v})  # only the flags that are on, as SpecForge writes them
    if fmt == "sglang":
        out["eagle_config"] = {"use_aux_hidden_state": True, **cfg.extra.get("eagle_config", {})}
        for flag in FLAGS:   # a flag eagle_config states is written there too, with the value written at the top
            if flag in out["eagle_config"] and flag in flags:
                out["eagle_config"][flag] = bool(flags[flag])
        if ids is not None:
            out["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = list(ids)
    return out
