"""The draft families, one registry: each family brings what the rest of the package asks of it.

    name          the key engines' support is keyed by (eagle3lab.engines.profiles: LLAMA, QWEN3, MLA; each
                  profile's ``families``, the FAMILY rows): engine knowledge stays in engines, by this name
    label         short, for sentences ("an MLA EAGLE-3 draft")
    attention     its attention in words, and ``attention_class``, what one decoder layer builds
                  (eagle3lab.models.draft_attention)
    detect        ``(layer config, architectures) -> the reason this config is of the family, or None``: from the
                  keys of config.json alone (no weights, no model built)
    owns          DraftSettings switches only its weights carry -> those weights: ``rewired`` refuses a switch whose
                  weights are absent, ``variants`` runs each one on, then off (as an engine without it runs)
    model_type    the layer model_type written for it (speculators' transformer_layer_config, flat configs); with
                  ``keeps_model_type`` its layers carry their target's model_type instead, kept as written
    draft_archs   architectures naming a flat draft of it (a flat config of this family with a draft vocabulary
                  and one layer is a draft too: the sglang format)
    formats       the checkpoint formats that can hold it

``detect_family`` is the one detector: every family but the default (llama) is asked in registry order, the first that
recognises the config wins, else llama (the engines build a Llama decoder layer for every other EAGLE-3 draft).
``register`` adds a family (a test registers a fictional one; its engine support is then whatever the engine
profiles list under its name: nothing, until a row names it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import product

from torch import nn

from eagle3lab.engines.config_view import layer_config
from eagle3lab.engines.profiles import LLAMA, MLA, QWEN3
from eagle3lab.errors import bad_input
from eagle3lab.models.draft_attention import Attention, MLAAttention, Qwen3Attention

MLA_ARCHS = ("Eagle3DeepseekV2ForCausalLM", "DeepseekV3ForCausalLMEagle3", "Eagle3DeepseekV3ForCausalLM")
MLA_KEYS = ("kv_lora_rank", "qk_rope_head_dim")
ALL_FORMATS = ("speculators", "sglang", "eagle")   # eagle3lab.models.checkpoint_formats.FORMATS


@dataclass(frozen=True)
class DraftFamily:
    """One draft family (see the module docstring)."""

    name: str
    label: str
    attention: str
    attention_class: type[nn.Module]
    detect: Callable[[dict, list[str]], str | None]
    owns: dict[str, str] = field(default_factory=dict)
    model_type: str = LLAMA
    keeps_model_type: bool = False
    draft_archs: tuple[str, ...] = ()
    formats: tuple[str, ...] = ALL_FORMATS

    @property
    def variants(self) -> list[dict[str, bool]]:
        """The settings of the switches it owns that a wiring search runs: each on, then off ([{}] when none)."""
        return [dict(zip(self.owns, values)) for values in product((True, False), repeat=len(self.owns))]

    def is_flat_draft(self, raw: dict) -> bool:
        """A flat config of this family that is a draft, not a target: a draft architecture of it is named, or its
        keys come with a draft vocabulary and one layer."""
        archs = architectures(raw)
        one_layer = raw.get("num_hidden_layers", 1) == 1
        return bool(self.draft_archs) and (any(a in self.draft_archs for a in archs) or
                                           (one_layer and "draft_vocab_size" in raw))


def architectures(raw: dict) -> list[str]:
    return [str(a) for a in (raw.get("architectures") or [])]


def _mla(layer: dict, archs: list[str]) -> str | None:
    if any(a in MLA_ARCHS for a in archs):
        return f"architectures {archs}"
    keys = [k for k in MLA_KEYS if layer.get(k) is not None]
    return f"DeepSeek attention keys {keys}" if keys else None


def _qwen3(layer: dict, archs: list[str]) -> str | None:
    if layer.get("model_type") == QWEN3 or any("Qwen3" in a and "Eagle3" in a for a in archs):
        return f"layer model_type {layer.get('model_type')!r} (q/k RMSNorm in attention)"
    return None


def _llama(layer: dict, archs: list[str]) -> str:
    return f"layer model_type {layer.get('model_type', LLAMA)!r}: a Llama decoder layer"


DRAFT_FAMILIES: dict[str, DraftFamily] = {f.name: f for f in (
    DraftFamily(LLAMA, "Llama", "Llama (grouped-query) attention", Attention, _llama),
    DraftFamily(QWEN3, "Qwen3", "Qwen3 attention (an RMSNorm over each q and k head before RoPE)", Qwen3Attention,
                _qwen3,
                owns={"qk_norm": "a Qwen3 draft's q_norm/k_norm weights"}, model_type=QWEN3,
                formats=("speculators", "sglang")),   # cnets.py builds a Llama layer only
    # SGLang/TorchSpec Eagle3DeepseekV2ForCausalLM, SpecForge DeepseekV3ForCausalLMEagle3; its layers carry their
    # target's DeepSeek model_type (deepseek_v3, kimi_k2), kept as written; vLLM builds MLA only for DeepSeek types
    DraftFamily(MLA, "MLA", "MLA (DeepSeek-V2/V3 multi-head latent attention)", MLAAttention, _mla,
                model_type="deepseek_v3", keeps_model_type=True, draft_archs=MLA_ARCHS,
                formats=("sglang",)),   # speculators registers llama and qwen3 layers only (vLLM's update_eagle3)
)}
DEFAULT_FAMILY = LLAMA   # what a config no other family recognises is


class _AttentionKinds(Mapping):
    """Family name -> its attention in words, read from the registry (a family registered later is in it)."""

    def __getitem__(self, name: str) -> str:
        return DRAFT_FAMILIES[name].attention

    def __iter__(self):
        return iter(DRAFT_FAMILIES)

    def __len__(self) -> int:
        return len(DRAFT_FAMILIES)


ATTENTION_KINDS: Mapping[str, str] = _AttentionKinds()


def register(family: DraftFamily) -> DraftFamily:
    """Add ``family`` to the registry (a name already there is refused)."""
    if family.name in DRAFT_FAMILIES:
        raise bad_input("draft families", family.name, "a new family name", "one already registered")
    DRAFT_FAMILIES[family.name] = family
    return family


def family_of(name: str, where: str = "draft config") -> DraftFamily:
    """The registered family ``name``; an unknown one is refused naming ``where`` and its key ``attention``."""
    try:
        return DRAFT_FAMILIES[name]
    except (KeyError, TypeError):
        raise bad_input(where, "attention", f"one of {', '.join(DRAFT_FAMILIES)}", repr(name)) from None


def detect_family(raw: dict) -> tuple[DraftFamily, str]:
    """``(family, why)`` of a config.json dict: the one detector (inspect, the format classifier and loading read it)."""
    layer, archs = layer_config(raw), architectures(raw)
    for family in DRAFT_FAMILIES.values():
        reason = family.detect(layer, archs) if family.name != DEFAULT_FAMILY else None
        if reason:
            return family, reason
    default = DRAFT_FAMILIES[DEFAULT_FAMILY]
    return default, default.detect(layer, archs)


def make_attention(cfg, in_dim: int, layer: int) -> nn.Module:
    """The attention module of ``cfg.attention``'s family (its ``attention_class``)."""
    return family_of(cfg.attention).attention_class(cfg, in_dim, layer)


def switch_owners(name: str) -> dict[str, tuple[bool, str]]:
    """Every switch some family's weights own -> (do family ``name``'s weights carry it, which weights)."""
    family = family_of(name)
    return {switch: (switch in family.owns, weights) for f in DRAFT_FAMILIES.values()
            for switch, weights in f.owns.items()}


def layer_model_types() -> set[str]:
    """The layer model_types that name a family's layer (llama, qwen3); any other is kept as written."""
    return {f.model_type for f in DRAFT_FAMILIES.values() if not f.keeps_model_type}
