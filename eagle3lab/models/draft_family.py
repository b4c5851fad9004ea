"""What kind of EAGLE-3 draft a config.json describes, from its keys alone (no weights, no model built).

    family     a registered draft family (eagle3lab.models.families, one detector: ``detect_family``):
               - mla: DeepSeek-V2/V3 attention keys (kv_lora_rank, qk_rope_head_dim) or an MLA draft
                 architecture (SGLang/TorchSpec Eagle3DeepseekV2ForCausalLM, SpecForge DeepseekV3ForCausalLMEagle3)
               - qwen3: layer model_type qwen3 (speculators --draft-arch qwen3 writes it in
                 transformer_layer_config; vLLM's algos.py maps it to Eagle3Qwen3ForCausalLM)
               - llama: everything else (LlamaForCausalLMEagle3, Eagle3Speculator with a llama layer, ...)
    attention  MLA | GQA (fewer kv heads than heads) | MHA
    rope_type  the RoPE type as transformers 5 and so every engine reads it (eagle3lab.engines.config_view.read_rope:
               rope_scaling, else rope_parameters; "default" when plain)
    num_aux    number of aux states fc reads: the written ids, else num_aux_hidden_states, else 3
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from eagle3lab.engines.config_view import layer_config, read_draft
from eagle3lab.engines.profiles import MLA, NUM_AUX_KEY
from eagle3lab.models.families import detect_family


def written_aux_count(raw: dict) -> tuple[object, str | None]:
    """``num_aux_hidden_states`` where the engines read it: the layer config (speculators' transformer_layer_config,
    all that vLLM's update_eagle3 passes to the model; else the top level) -> ``(value as written, its key)``,
    ``(None, None)`` when absent."""
    inner = isinstance(raw.get("transformer_layer_config"), dict)
    value = layer_config(raw).get(NUM_AUX_KEY)
    return (value, ("transformer_layer_config." if inner else "") + NUM_AUX_KEY) if value is not None else (None, None)


@dataclass(frozen=True)
class DraftDescription:
    """What kind of draft a config describes (inspect's ``family``; the module docstring says each field)."""

    family: str
    attention: str          # MHA | GQA | MLA
    rope_type: str
    rope_scaling: object    # as written
    num_aux: int
    num_aux_from: str       # the ids written, num_aux_hidden_states, or the default 3
    reasons: list[str]

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def describe_draft_config(raw: dict) -> DraftDescription:
    """The family, attention kind, RoPE type and aux count of a config.json dict, from its keys alone."""
    layer = layer_config(raw)
    family, reason = detect_family(raw)
    heads, kv = layer.get("num_attention_heads"), layer.get("num_key_value_heads") or layer.get("num_attention_heads")
    attention = "MLA" if family.name == MLA else ("GQA" if heads and kv and kv < heads else "MHA")
    view = read_draft(raw, ())
    rope_type, rope = view.rope.kind, view.rope.scaling
    ids = view.ids.top or view.ids.nested
    if isinstance(ids, list) and ids:
        num_aux, source = len(ids), "the aux layer ids written"
    elif isinstance(written_aux_count(raw)[0], int):
        num_aux, source = written_aux_count(raw)
    else:
        num_aux, source = 3, "no ids written: every engine's default of 3"
    return DraftDescription(family.name, attention, rope_type, rope, num_aux, source, [reason])
