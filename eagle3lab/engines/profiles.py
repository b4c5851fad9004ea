"""Engine profiles: what each trainer or server does with an EAGLE-3 draft, as data.

The same draft weights give different arithmetic depending on who runs them: which config
flags an engine honours, what it assumes when a key is missing, which layer-id convention it
reads (and from which config key), what it recycles into the next draft step, whether it swaps
in the target's embedding. An ``EngineProfile`` records these facts (with the version range
they were read at, see the project's digest of engine facts, eagle3-facts.md sections 2-4); ``resolve_settings``
turns a checkpoint's ``DraftConfig`` plus a profile into the small ``DraftSettings`` that the
draft's math reads. No ``if engine == ...`` appears anywhere in the math.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from eagle3lab.engines.layer_ids import resolve_aux_layers
from eagle3lab.errors import bad_input

# The four switchable flags of the draft, in the order they act on the data.
FLAGS = ("norm_before_fc", "fc_norm", "norm_before_residual", "norm_output")

# Where a checkpoint's aux layer ids can be written.
IDS_TOP = "eagle_aux_hidden_state_layer_ids"
IDS_NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"


@dataclass(frozen=True)
class EngineProfile:
    """What one engine (in one version range) does with a draft checkpoint."""

    name: str                      # key in PROFILES, e.g. "vllm"
    engine: str                    # for people: "vLLM"
    versions: str                  # the version range these facts were read at
    id_engine: str                 # layer-id convention name for eagle3lab.engines.layer_ids
    id_keys: tuple[str, ...]       # config keys it reads aux ids from, first found wins
    honours: dict[str, str]        # flag -> since when / where it is honoured; absent = ignored
    missing: dict[str, bool] = field(default_factory=dict)   # value for a missing key (default False)
    missing_by_format: dict[str, dict[str, bool]] = field(default_factory=dict)  # format-specific
    missing_rule: dict[str, str] = field(default_factory=dict)  # flag -> the rule, in words
    norm_output_recycles_postnorm: bool = True  # False: norm_output only means "norm before lm_head"
    uses_target_embedding: bool = False          # replaces the draft's embedding with the target's
    rope_types: frozenset[str] = frozenset({"default", "linear", "llama3"})  # RoPE variants it applies
    rope_since: dict[str, str] = field(default_factory=dict)  # rope type -> since when / where it is applied
    rope_requires: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type -> keys without which: plain
    rope_other: str | None = None                # what it does with a rope type it does not apply, where read
    engine_version: str | None = None            # passed to the layer-id translator
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"{self.engine} ({self.versions})"

    def aux_resolution(self, ids, key: str | None, num_layers: int, arch: str | None = None):
        """Which target states this engine feeds a draft whose aux ids were written at ``key`` (an
        ``eagle3lab.engines.layer_ids.AuxResolution``: ids it does not read fall back to its default)."""
        seen, _ = self.visible_ids(ids, key)
        return resolve_aux_layers(self.id_engine, ids=list(seen) if seen is not None else None, num_layers=num_layers,
                                  arch=arch, engine_version=self.engine_version)

    def default_for(self, flag: str, fmt: str | None) -> tuple[bool, str]:
        """Value this engine uses when ``flag`` is missing from a config of format ``fmt``, and the rule."""
        by_format = self.missing_by_format.get(fmt or "", {})
        value = by_format.get(flag, self.missing.get(flag, False))
        rule = self.missing_rule.get(flag, f"{self.engine} default when the key is missing")
        return value, rule

    def visible_ids(self, ids, key: str | None) -> tuple[tuple[int, ...] | None, str | None]:
        """The aux ids this engine sees for ids written at ``key`` (None key = given in memory)."""
        if ids is None:
            return None, None
        if key is None or key in self.id_keys:
            return tuple(ids), None
        return None, (f"{self.engine} reads aux ids only from {' or '.join(self.id_keys) or 'nowhere (hard-coded)'}; "
                      f"the ids at '{key}' are ignored and its defaults are used")


PROFILES: dict[str, EngineProfile] = {p.name: p for p in [
    EngineProfile(
        name="speculators", engine="speculators", versions="0.1-0.3, Eagle3DraftModel",
        id_engine="speculators", id_keys=(IDS_TOP,),
        honours={"norm_before_residual": "all versions", "norm_before_fc": "gpt-oss drafts",
                 "fc_norm": "EAGLE 3.1 drafts", "norm_output": "EAGLE 3.1 drafts"},
        missing_rule={"norm_before_residual": "speculators config default False "
                                              "(its training CLI default is True)"},
    ),
    EngineProfile(
        name="vllm", engine="vLLM", versions="after PR #46488",
        id_engine="vllm", id_keys=(IDS_TOP,),
        # norm_before_fc, read in the vLLM wheels: llama_eagle3.py applies input_norm since 0.18.0 (PR #36545);
        # update_eagle3 (speculators/algos.py) passes a speculators config's key through since 0.19.0 (PR #38111);
        # llama_eagle3.py also reads eagle_config.norm_before_fc since 0.22.0; qwen3_eagle3.py since 0.24.0.
        honours={"norm_before_residual": "all versions",
                 "norm_before_fc": "llama_eagle3.py since PR #36545 (0.18.0); speculators configs since PR #38111 "
                                   "(0.19.0)",
                 "fc_norm": "since PR #46488", "norm_output": "since PR #46488"},
        missing_by_format={"speculators": {"norm_before_residual": True}},
        missing_rule={"norm_before_residual": "vLLM speculators adapter: a missing key in a speculators "
                                              "config is True (update_eagle3); other configs: False"},
        notes=("vLLM concatenates captured states in ascending layer order, whatever the order of the ids.",
               # read in the vLLM wheels 0.17.0-0.33.0: v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (V2 runner)
               # and v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config (V1 runner)
               "Aux ids are read from the top-level eagle_aux_hidden_state_layer_ids. Without it, the V2 model "
               "runner (eagle3_utils.py) ignores eagle_config.eagle_aux_hidden_state_layer_ids (since 0.27.0 it "
               "reads eagle_config.layer_ids instead) and uses the default (2, N//2, N-3); the V1 runner "
               "(gpu_model_runner.py) reads eagle_config.eagle_aux_hidden_state_layer_ids since 0.22.0, as vLLM "
               "ids (resid[k]), one point below what SGLang/SpecForge meant by them. Shown: the V2 runner.",
               "On fallback to the default ids the V2 runner logs INFO 'Using Eagle3 auxiliary layers from model: "
               "(...)'; the V1 runner logs nothing; no release read (up to 0.33.0) warns (PR #50170, open)."),
    ),
    EngineProfile(
        name="vllm-legacy", engine="vLLM", versions="before PR #38111",
        id_engine="vllm", id_keys=(IDS_TOP,),
        honours={"norm_before_residual": "all versions"},
        missing_by_format={"speculators": {"norm_before_residual": True}},
        missing_rule={"norm_before_residual": "vLLM speculators adapter: a missing key in a speculators "
                                              "config is True (update_eagle3); other configs: False"},
        notes=("norm_before_fc: update_eagle3 drops a speculators config's key before PR #38111 (0.19.0). A "
               "top-level key in another config is honoured from PR #36545 (0.18.0); before it, never.",),
    ),
    EngineProfile(
        name="sglang", engine="SGLang", versions="0.5.17+ (EAGLE 3.1: PRs #24663, #26506; norm_before_fc: PR #32334)",
        id_engine="sglang", id_keys=(IDS_NESTED,),
        # norm_before_fc, read in the sglang wheels: absent from every model file in 0.5.12-0.5.16; from 0.5.17
        # llama_eagle3.py reads eagle_config.norm_before_fc (else the top-level key) and applies input_norm before
        # fc for every target (PR #32334, "Fix GPT-OSS EAGLE3 hidden states", opened 2026-07-24).
        honours={"fc_norm": "PRs #24663, #26506", "norm_output": "PRs #24663, #26506",
                 "norm_before_fc": "llama_eagle3.py, every target, since PR #32334 (0.5.17)"},
        uses_target_embedding=True,
        notes=("SGLang ignores norm_before_residual: the residual is always the raw fc output.",
               "norm_before_fc (one RMSNorm over the whole fc input) is applied by llama_eagle3.py for every target "
               "since PR #32334 (first release 0.5.17); builds up to 0.5.16 ignore it.",
               "A missing or malformed eagle_config is swallowed and the default ids are used silently.",
               "With num_hidden_layers > 1 SGLang's extra layers differ (additional_layers.*); not modelled."),
    ),
    EngineProfile(
        name="sglang-legacy", engine="SGLang", versions="0.4-0.5 before EAGLE 3.1 support",
        id_engine="sglang", id_keys=(IDS_NESTED,), honours={}, uses_target_embedding=True,
        notes=("Ignores every norm flag: raw residual, no fc norms, recycles the pre-norm state.",),
    ),
    EngineProfile(
        name="specforge", engine="SpecForge", versions="as read at a6b6b023",
        id_engine="specforge", id_keys=(IDS_NESTED,),
        honours={"fc_norm": "EAGLE 3.1 templates", "norm_output": "means 'norm before lm_head' only"},
        norm_output_recycles_postnorm=False, uses_target_embedding=True,
        # specforge/modeling/draft/llama3_eagle.py LlamaAttention._init_rope, history read in sgl-project/SpecForge
        rope_types=frozenset({"default", "linear", "dynamic", "llama3", "mrope", "yarn"}),
        rope_since={"linear": "since v0.1.0 (3234e24a)", "dynamic": "since v0.1.0 (3234e24a)",
                    "mrope": "since PR #102 (1618db78, 2025-08-22)", "yarn": "since PR #224 (b04970fb, 2025-10-30)",
                    "llama3": "since PR #287 (41bdd2a2, 2025-11-12); before it plain RoPE ('for nv type')",
                    "default": "an explicit 'default' since PR #502 (1b24cbf6, 2026-03-24); before it ValueError"},
        rope_requires={"llama3": ("factor", "low_freq_factor", "high_freq_factor",
                                  "original_max_position_embeddings")},
        rope_other="raises ValueError('Unknown RoPE scaling type') in llama3_eagle.py",
        notes=("SpecForge's llama3_eagle.py applies Llama-3 RoPE scaling since PR #287 (41bdd2a2, 2025-11-12; before "
               "it plain RoPE), yarn since PR #224 and mrope since PR #102; with a llama3 key missing "
               "(low_freq_factor, ...) it builds plain RoPE, and any other type raises ValueError.",
               "SpecForge trains with the target's (frozen) embedding and does not save it."),
    ),
    EngineProfile(
        name="eagle", engine="EAGLE official", versions="SafeAILab/EAGLE cnets.py",
        id_engine="eagle", id_keys=(), honours={}, uses_target_embedding=True,
        rope_types=frozenset({"default", "linear", "dynamic"}), rope_other="cnets.py raises for it",
        notes=("Capture points are hard-coded (resid[2], resid[N//2], resid[N-3]); config ids are not read.",
               "cnets.py builds RoPE for rope_scaling types linear/dynamic only and raises for 'llama3'; shown "
               "here as plain RoPE. Official drafts ship without rope_scaling.",
               "The embedding is read from the base model unless config.json has target_hidden_size."),
    ),
]}

# The engine whose arithmetic a checkpoint family was trained with (the default profile on load).
FORMAT_PROFILE = {"speculators": "speculators", "sglang": "specforge", "eagle": "eagle"}


def get_profile(profile: str | EngineProfile) -> EngineProfile:
    if isinstance(profile, EngineProfile):
        return profile
    try:
        return PROFILES[profile]
    except KeyError:
        raise bad_input("profile", None, f"one of {', '.join(PROFILES)}", repr(profile)) from None


class Decision(NamedTuple):
    """How one setting got its value: ``value`` and the rule that chose it (``how``)."""

    value: object
    how: str


@dataclass(frozen=True)
class DraftSettings:
    """The resolved switches the draft's math reads (one engine's view of one checkpoint)."""

    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_before_residual: bool = False
    recycle_postnorm: bool = False
    use_target_embedding: bool = False
    rope_scaling: dict | None = None
    # setting -> Decision(value, how it was decided), for load reports, inspect and notebooks
    decisions: dict[str, Decision] = field(default_factory=dict)


def resolve_settings(config, profile: str | EngineProfile, fmt: str | None = None,
                     has_target_embedding: bool = False) -> DraftSettings:
    """A checkpoint's written flags (None = key missing) + an engine profile -> ``DraftSettings``."""
    profile = get_profile(profile)
    values: dict[str, bool] = {}
    decisions: dict[str, Decision] = {}
    for flag in FLAGS:
        written = getattr(config, flag)
        if flag not in profile.honours:
            value = False
            how = f"ignored by {profile.label}" + (f" (written: {written})" if written is not None else "")
        elif written is None:
            value, rule = profile.default_for(flag, fmt)
            how = f"missing, defaulted by {rule}"
        else:
            value, how = bool(written), f"explicit in the checkpoint, honoured by {profile.engine}"
        values[flag] = value
        decisions[flag] = Decision(value, how)
    for flag in ("norm_before_fc", "fc_norm"):  # these need weights the checkpoint may not have
        if values[flag] and not getattr(config, flag):
            raise bad_input("draft config", flag, "true only when the checkpoint has its norm weights",
                            f"{profile.label} defaults it to true", "Set the flag explicitly in config.json.")
    if values["norm_before_fc"] and values["fc_norm"]:
        raise bad_input("draft config", "norm_before_fc / fc_norm", "at most one of them true (speculators "
                        "treats them as mutually exclusive)", "both true")
    recycle_postnorm = values["norm_output"] and profile.norm_output_recycles_postnorm
    decisions["recycle"] = Decision("post-norm" if recycle_postnorm else "pre-norm",
                                    f"{profile.engine}: " + ("norm_output recycles the normed state"
                                                             if recycle_postnorm else "recycles the pre-norm state"))
    use_target_embedding = profile.uses_target_embedding and has_target_embedding
    if profile.uses_target_embedding:
        decisions["embedding"] = Decision("target" if use_target_embedding else "draft",
                                          f"{profile.engine} replaces the draft embedding with the target's"
                                          + ("" if has_target_embedding else "; no target given, so the draft's "
                                             "own is used"))
    rope = config.rope_scaling
    rope_type = rope_type_of(rope)
    missing = [k for k in profile.rope_requires.get(rope_type, ()) if (rope or {}).get(k) is None]
    if rope_type not in profile.rope_types:
        decisions["rope_scaling"] = Decision("default", f"{profile.label} does not apply rope_type '{rope_type}'"
                                             + (f" ({profile.rope_other}); shown as plain RoPE" if profile.rope_other
                                                else ""))
        rope = None
    elif missing:
        decisions["rope_scaling"] = Decision("default", f"{profile.label} builds plain RoPE for rope_type "
                                                        f"'{rope_type}' without {', '.join(missing)}")
        rope = None
    elif rope_type != "default":
        since = profile.rope_since.get(rope_type)
        decisions["rope_scaling"] = Decision(rope_type, f"{profile.label} applies rope_type '{rope_type}'"
                                                        + (f" ({since})" if since else ""))
    return DraftSettings(norm_before_fc=values["norm_before_fc"], fc_norm=values["fc_norm"],
                         norm_before_residual=values["norm_before_residual"], recycle_postnorm=recycle_postnorm,
                         use_target_embedding=use_target_embedding, rope_scaling=rope,
                         decisions=decisions)


def rope_type_of(rope_scaling: dict | None) -> str:
    if not rope_scaling:
        return "default"
    return str(rope_scaling.get("rope_type", rope_scaling.get("type", "default")))
