"""What kind of EAGLE-3 draft a config.json describes, from its keys alone (no weights, no model built).

    family     llama | qwen3 | mla: the decoder layer the engines build for it
               - mla: DeepSeek-V2/V3 attention keys (kv_lora_rank, qk_rope_head_dim) or an MLA draft
                 architecture (SGLang/TorchSpec Eagle3DeepseekV2ForCausalLM, SpecForge DeepseekV3ForCausalLMEagle3)
               - qwen3: layer model_type qwen3 (speculators --draft-arch qwen3 writes it in
                 transformer_layer_config; vLLM's algos.py maps it to Eagle3Qwen3ForCausalLM)
               - llama: everything else (LlamaForCausalLMEagle3, Eagle3Speculator with a llama layer, ...)
    attention  MLA | GQA (fewer kv heads than heads) | MHA
    rope_type  rope_scaling / rope_parameters type as every engine reads it ("default" when absent)
    num_aux    number of aux states fc reads: the written ids, else num_aux_hidden_states, else 3
"""

from __future__ import annotations

from eagle3lab.engines.profiles import IDS_TOP, NUM_AUX_KEY, rope_type_of

MLA_ARCHS = ("Eagle3DeepseekV2ForCausalLM", "DeepseekV3ForCausalLMEagle3", "Eagle3DeepseekV3ForCausalLM")
MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim")


def _layer_config(raw: dict) -> dict:
    """Where the layer geometry lives: speculators' transformer_layer_config, else the top level."""
    inner = raw.get("transformer_layer_config")
    return inner if isinstance(inner, dict) else raw


def written_aux_count(raw: dict) -> tuple[object, str | None]:
    """``num_aux_hidden_states`` where the engines read it: the layer config (speculators' transformer_layer_config,
    all that vLLM's update_eagle3 passes to the model; else the top level) -> ``(value as written, its key)``,
    ``(None, None)`` when absent."""
    inner = isinstance(raw.get("transformer_layer_config"), dict)
    value = _layer_config(raw).get(NUM_AUX_KEY)
    return (value, ("transformer_layer_config." if inner else "") + NUM_AUX_KEY) if value is not None else (None, None)


def _rope(layer: dict) -> tuple[str, dict | None]:
    params = layer.get("rope_parameters") if isinstance(layer.get("rope_parameters"), dict) else None
    scaling = layer.get("rope_scaling") if isinstance(layer.get("rope_scaling"), dict) else None
    rope = scaling or params
    return rope_type_of(rope), rope


def describe_draft_config(raw: dict) -> dict:
    """``{"family", "attention", "rope_type", "rope_scaling", "num_aux", "num_aux_from", "reasons"}``."""
    layer = _layer_config(raw)
    archs = [str(a) for a in (raw.get("architectures") or [])]
    reasons = []
    if any(a in MLA_ARCHS for a in archs) or any(layer.get(k) is not None for k in MLA_KEYS):
        family = "mla"
        reasons.append(f"architectures {archs}" if any(a in MLA_ARCHS for a in archs)
                       else f"DeepSeek attention keys {[k for k in MLA_KEYS if layer.get(k) is not None]}")
    elif layer.get("model_type") == "qwen3" or any("Qwen3" in a and "Eagle3" in a for a in archs):
        family = "qwen3"
        reasons.append(f"layer model_type {layer.get('model_type')!r} (q/k RMSNorm in attention)")
    else:
        family = "llama"
        reasons.append(f"layer model_type {layer.get('model_type', 'llama')!r}: a Llama decoder layer")
    heads, kv = layer.get("num_attention_heads"), layer.get("num_key_value_heads") or layer.get("num_attention_heads")
    attention = "MLA" if family == "mla" else ("GQA" if heads and kv and kv < heads else "MHA")
    rope_type, rope = _rope(layer)
    nested = raw.get("eagle_config") if isinstance(raw.get("eagle_config"), dict) else {}
    ids = raw.get(IDS_TOP) or nested.get("eagle_aux_hidden_state_layer_ids")
    if isinstance(ids, list) and ids:
        num_aux, source = len(ids), "the aux layer ids written"
    elif isinstance(written_aux_count(raw)[0], int):
        num_aux, source = written_aux_count(raw)
    else:
        num_aux, source = 3, "no ids written: every engine's default of 3"
    return {"family": family, "attention": attention, "rope_type": rope_type, "rope_scaling": rope,
            "num_aux": num_aux, "num_aux_from": source, "reasons": reasons}


def is_mla_draft(raw: dict) -> bool:
    """An MLA EAGLE-3 draft: one layer, an MLA draft architecture or DeepSeek attention keys with a draft vocab."""
    archs = [str(a) for a in (raw.get("architectures") or [])]
    one_layer = raw.get("num_hidden_layers", 1) == 1
    return any(a in MLA_ARCHS for a in archs) or (one_layer and "draft_vocab_size" in raw
                                                   and all(raw.get(k) is not None for k in MLA_KEYS))
