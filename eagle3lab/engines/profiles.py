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

import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from eagle3lab.engines.config_view import Written, rope_type_of
from eagle3lab.engines.layer_ids import SGLANG_NEWEST_READ, SGLANG_OLDEST_READ, resolve_aux_layers
from eagle3lab.engines.versions import Change, InForce, Rule, rule_at
from eagle3lab.engines.vllm_runner import (
    IDS_NESTED,
    IDS_TOP,
    RELEASES_READ,
    VLLM_NEWEST_READ,
    VLLM_WHEEL_READ,
    check_platform,
    vllm_runner,
)
from eagle3lab.errors import bad_input

# The four switchable flags of the draft, in the order they act on the data.
FLAGS = ("norm_before_fc", "fc_norm", "norm_before_residual", "norm_output")

# Where a checkpoint's aux layer ids can be written: IDS_TOP, IDS_NESTED (eagle3lab.engines.vllm_runner).
# The aux count written outright (SGLang and vLLM read it before the ids' length; no trainer writes it).
NUM_AUX_KEY = "num_aux_hidden_states"

# Draft family names, as pure data: what each engine does with a family (FAMILIES, FAMILY_ROWS below) is keyed by
# them. The families themselves (attention class and words, config detection, the switches whose weights they own,
# their variants) are eagle3lab.models.families, registered under these names.
LLAMA, QWEN3, MLA = "llama", "qwen3", "mla"
# How an engine applies a draft's sliding window (WINDOW rows): never; through the draft config's layer_types (with
# sliding_window); only through a launch flag, whatever the config says.
NO_WINDOW, BY_LAYER_TYPES, BY_FLAG = "none", "layer_types", "launch flag"


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
    norm_output_gates_final_norm: bool = False  # True: norm_output false = lm_head reads the un-normed state
    uses_target_embedding: bool = False          # replaces the draft's embedding with the target's
    rope_types: frozenset[str] = frozenset({"default", "linear", "llama3"})  # RoPE variants it applies
    rope_since: dict[str, str] = field(default_factory=dict)  # rope type -> since when / where it is applied
    rope_requires: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type -> keys without which: plain
    rope_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)   # type -> rope_scaling keys it drops
    rope_length: dict[str, str] = field(default_factory=dict)  # dynamic/longrope -> eagle3lab.models.rope.LENGTH_RULES
    rope_other: str | None = None                # what it does with a rope type it does not apply, where read
    rope_fails: dict[str, tuple[str, ...]] = field(default_factory=dict)  # type -> keys without which loading fails
    rope_fails_how: str = ""                     # how it fails, where read
    yarn_scale_ratio: bool = False               # yarn cos/sin x mscale(f, mscale) / mscale(f, mscale_all_dim), always
    engine_version: str | None = None            # passed to the layer-id translator
    engine_platform: str | None = None           # vLLM: "cuda" or "cpu" (None: a CUDA build assumed)
    # "vllm": where ids are read follows vLLM's model runner for this build (eagle3lab.engines.vllm_runner);
    # id_keys are then what the newest CUDA build reads, for display
    runner_rule: str | None = None
    notes: tuple[str, ...] = ()
    # the release whose rows (ROWS) its honours and RoPE fields were read from (None: written out, one build)
    release: str | None = None
    # where it reads each flag (FLAG_KEYS rows): flag -> places tried in turn ("nested": eagle_config, "top"), first
    # written wins; a flag absent here is read at the top level only
    flag_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    flag_keys_how: dict[str, str] = field(default_factory=dict)   # flag -> since when / where, in words
    nested_unread_formats: tuple[str, ...] = ()   # formats whose eagle_config never reaches its draft model
    family_ignores: dict[str, dict[str, str]] = field(default_factory=dict)  # family -> {flag its model never reads: where}
    draft_window: str = NO_WINDOW                 # how it applies a draft's sliding window (WINDOW rows)
    draft_window_how: str = ""                    # in words, since when / where read
    build_families: DraftFamilies | None = None   # for_build: the families of the build asked

    @property
    def label(self) -> str:
        return f"{self.engine} ({self.versions})"

    @property
    def families(self) -> DraftFamilies:
        """Which draft families (attention kinds, aux counts) it serves or trains, and since when (the build's,
        for a profile from ``for_build``)."""
        return self.build_families or FAMILIES.get(self.name, DraftFamilies())

    def flag_places(self, flag: str, fmt: str | None) -> tuple[str, ...]:
        """Where this build reads ``flag`` in a config of format ``fmt``, in the order tried."""
        places = self.flag_keys.get(flag, ("top",))
        return tuple(p for p in places if p != "nested" or fmt not in self.nested_unread_formats) or ("top",)

    def runner(self, arch: str | None = None):
        """vLLM's model runner for this profile's build and target (``vllm_runner``), or None where no runner rule
        applies."""
        if self.runner_rule is None:
            return None
        return vllm_runner(self.engine_version, self.engine_platform, arch=arch)

    def reads_ids_from(self, arch: str | None = None) -> tuple[str, ...]:
        """The config keys this engine build reads aux ids from, first found wins."""
        runner = self.runner(arch)
        return runner.id_keys if runner is not None else self.id_keys

    def aux_resolution(self, ids, key: str | None, num_layers: int, arch: str | None = None):
        """Which target states this engine feeds a draft whose aux ids were written at ``key`` (an
        ``eagle3lab.engines.layer_ids.AuxResolution``: ids it does not read fall back to its default)."""
        if self.runner_rule is not None and ids is not None:   # the runner decides, and says so in its notes
            return resolve_aux_layers(self.id_engine, ids=list(ids), num_layers=num_layers, arch=arch,
                                      engine_version=self.engine_version, engine_platform=self.engine_platform,
                                      key=key)
        seen, _ = self.visible_ids(ids, key, arch)
        return resolve_aux_layers(self.id_engine, ids=list(seen) if seen is not None else None, num_layers=num_layers,
                                  arch=arch, engine_version=self.engine_version, engine_platform=self.engine_platform)

    def default_for(self, flag: str, fmt: str | None) -> tuple[bool, str]:
        """Value this engine uses when ``flag`` is missing from a config of format ``fmt``, and the rule."""
        by_format = self.missing_by_format.get(fmt or "", {})
        value = by_format.get(flag, self.missing.get(flag, False))
        rule = self.missing_rule.get(flag, f"{self.engine} default when the key is missing")
        return value, rule

    def visible_ids(self, ids, key: str | None, arch: str | None = None) -> tuple[tuple[int, ...] | None, str | None]:
        """The aux ids this engine sees for ids written at ``key`` (None key = given in memory) on a target ``arch``
        (vLLM: its model runner can depend on the target)."""
        if ids is None:
            return None, None
        keys = self.reads_ids_from(arch)
        if key is None or key in keys:
            return tuple(ids), None
        runner = self.runner(arch)
        who = f"{runner.label}{' (assumed)' if runner.assumed else ''}" if runner else self.engine
        return None, (f"{who} reads aux ids only from {' or '.join(keys) or 'nowhere (hard-coded)'}; "
                      f"the ids at '{key}' are ignored and its defaults are used")


# RoPE as each engine builds it for a draft, read in the engines' source (pip wheels / git history). Types a
# profile applies are computed here with transformers' functions (eagle3lab.models.rope); what differs between
# engines is data: keys an engine ignores (rope_ignores) and which length picks dynamic/longrope frequencies.
_TRANSFORMERS_ROPE = frozenset({"default", "linear", "dynamic", "yarn", "longrope", "llama3", "proportional"})
_YARN_MSCALE = ("mscale", "mscale_all_dim")
_VLLM_ROPE_NOTE = ("llama_eagle3.py builds RoPE with llama.py's get_rope(rope_parameters=config.rope_parameters): "
                   "default, linear, dynamic, yarn, longrope, llama3; a legacy 'type: mrope' is rewritten to default + "
                   "mrope_section (transformers_utils/config.py) and built as MRotaryEmbedding; the draft's positions "
                   "are the target's, and for draft tokens all three mrope rows carry the 1-D position "
                   f"(llm_base_proposer.py, {VLLM_NEWEST_READ}). yarn honours mscale/mscale_all_dim (as transformers) from 0.30.0; "
                   "0.10.1.1-0.29.0 ignore them (cos/sin scaled by 0.1 ln(factor) + 1). dynamic: from 0.22.0 theta is "
                   "rescaled for max_trained_positions, which defaults to max_position_embeddings (so plain RoPE); "
                   "0.10.1.1-0.21.0 rescale it once for max_position_embeddings * factor. longrope: from 0.12.0 long "
                   "factors iff max_model_len > original_max_position_embeddings, fixed at start; 0.10.1.1 per batch "
                   "(any position > original). Read in the vllm wheels 0.10.1.1, 0.12-0.22, 0.26-0.30, "
                   f"{VLLM_NEWEST_READ}.")
_SGLANG_ROPE_NOTE = ("llama_eagle3.py builds RoPE with llama.py's get_rope(rope_scaling=config.rope_scaling): default, "
                     "linear, dynamic, yarn, longrope, llama3 (proportional from 0.5.11); mrope since 0.5.2 "
                     "(llama_eagle3.py sets rope_type 'default' when mrope_section is present and feeds "
                     "forward_batch.mrope_positions; up to 0.5.1 get_rope has no 'mrope' and the draft does not load). "
                     "yarn honours mscale/mscale_all_dim since 0.5.16 (PR #22711); earlier builds scale cos/sin by "
                     "0.1 ln(factor) + 1. dynamic: theta rescaled once for max_position_embeddings * factor; longrope: "
                     "long factors for a whole batch when any position > original_max_position_embeddings. Read in "
                     f"the sglang wheels 0.4.6-{SGLANG_NEWEST_READ}.")

# ---------------------------------------------------------------------------- release rows
# What an engine does that changed with a release is a row: from release ``since`` on, to the next row of the same
# engine, kind, name and reader. A profile's honours, RoPE and family dicts are the rows that hold at its
# ``release`` (``rows_at``, by the one lookup eagle3lab.engines.versions.rule_at), their prose generated from the
# rows; adding a release's rule is one row (tests/engines/test_profile_rows.py). Rows are keyed by the profile's
# id_engine ("speculators", "vllm", "sglang"); SpecForge and EAGLE are one build each, their dicts written out.
ALL = None   # a row's since: every release read
FLAG, ROPE, ROPE_IGNORES, ROPE_LENGTH, FAMILY = "flag", "rope", "rope_ignores", "rope_length", "family"
FLAG_KEYS, FAMILY_IGNORES, WINDOW = "flag_keys", "family_ignores", "window"
SPECULATORS_READ = "0.9.0"   # the newest speculators tag read (its arithmetic is checked against it)
# SGLang's -legacy profile: a build before EAGLE 3.1 (0.5.12) and proportional RoPE (0.5.11), with mrope (0.5.2)
SGLANG_LEGACY_RELEASE = "0.5.10"
# vLLM's -legacy profile: a build before PR #38111 (0.19.0), with deepseek_eagle3.py (0.18.0)
VLLM_LEGACY_RELEASE = "0.18.0"
# the newest release of each engine whose profile rules were read (readings ask "does the newest read do X")
NEWEST_READ = {"speculators": SPECULATORS_READ, "vllm": VLLM_NEWEST_READ, "sglang": SGLANG_NEWEST_READ}
_TAG = {"speculators": "v"}   # how the engine's tags spell a release (speculators: v0.7.0)
_RELEASES = {"vllm": RELEASES_READ}   # every release read, where known: "up to <the one before>" in the prose


# A row (eagle3lab.engines.versions.Rule, the one release-rule shape): from release ``since`` (PEP 440; ALL: every
# release read) on, ``engine``'s ``reader`` (a file or code path; "": the engine) does ``value`` with ``key``, by
# ``kind``: FLAG honours the flag (value True; a flag with several readers is honoured where every reader has it), ROPE
# applies the rope type, ROPE_IGNORES drops the rope_scaling keys in ``value`` (() = reads them all), ROPE_LENGTH picks
# dynamic/longrope frequencies by the rule ``value`` (eagle3lab.models.rope.LENGTH_RULES), FAMILY serves the draft
# family, FLAG_KEYS reads the flag at the places in ``value`` in turn ("nested": eagle_config, "top"), FAMILY_IGNORES:
# the family's draft model never reads the flags in ``value``, WINDOW applies a draft's sliding window by the rule
# ``value`` (NO_WINDOW, BY_LAYER_TYPES, BY_FLAG). ``source``: the PR(s) or note it came with; ``note``: what a build
# before it does, a template ({since} is filled in).
def _rows(engine: str, kind: str, since: str, *names: str, **fields) -> tuple[Rule, ...]:
    return tuple(Rule(engine, kind, name, since, **fields) for name in names)


# A draft's sliding window, one rule per engine and change (kind WINDOW, key None): the home of the fact, read by
# eagle3lab.engines.context_rules (its WINDOW rules) and by the profiles (draft_window: window_fields, by the one
# lookup, so a date or a PR mark places a build as a release does). ``source`` is a template filled from the row
# ({newest}, {since}, {until}, {pr}). speculators#684 made sliding_window 2048 with layer_types the default for
# new draft layers. SGLang: --speculative-draft-window-size came with PR #24664 (opened 2026-05-08); absent from the
# 0.5.11 wheel (llama_eagle3.py, server_args.py), present in the 0.5.12 one, whose build stamp (sglang/version.py in
# the wheel's zip) is 2026-05-16: on main by then (the merge day was not found).
SGLANG_DRAFT_WINDOW = Change("sglang", "--speculative-draft-window-size applied to the draft's attention "
                             "(llama_eagle3.py)", pr=24664, opened="2026-05-08", on_main_by="2026-05-16",
                             last_without="0.5.11", first_with="0.5.12")
_WINDOW_READ = {**NEWEST_READ, "vllm": VLLM_WHEEL_READ}   # the newest release each engine's window rules were read in
WINDOW_ROWS: tuple[Rule, ...] = (
    Rule("speculators", WINDOW, None, None, BY_LAYER_TYPES, reader="models/eagle3/core.py, eagle3/attention.py "
         "(the layers layer_types names; kv_idx > q_idx - sliding_window)", source="speculators {newest} (#684)"),
    Rule("vllm", WINDOW, None, None, BY_LAYER_TYPES, reader="model_executor/models/llama.py LlamaAttention / "
         "qwen3_eagle3.py (the layers layer_types names, indexed from target_layer_count; without layer_types the "
         "verifier's window); v1/attention/backends/flash_attn.py window (W-1, 0)",
         source="read in the 0.23.0 and {newest} wheels"),
    Rule("sglang", WINDOW, None, None, NO_WINDOW, reader="srt/models/llama_eagle3.py (the config's window never read)",
         source=f"read in the {SGLANG_OLDEST_READ}-{{until}} wheels"),
    Rule("sglang", WINDOW, None, SGLANG_DRAFT_WINDOW, BY_FLAG, reader="srt/models/llama_eagle3.py "
         "(--speculative-draft-window-size: sliding_window_size on every layer); "
         "srt/layers/attention/torch_native_backend.py (k_pos >= q_pos - W)",
         source="PR #{pr}; read in the {since}-{newest} wheels"),
)


def window_rules(engine: str, engine_version=None) -> InForce:
    """``engine``'s WINDOW rules as build ``engine_version`` reads them (the one lookup; dates, PR marks, releases)."""
    return rule_at(WINDOW_ROWS, engine_version, engine=engine, kind=WINDOW, newest=_WINDOW_READ[engine])


def window_fields(engine: str, engine_version=None) -> dict:
    """The EngineProfile fields draft_window and draft_window_how of ``engine``'s build ``engine_version`` (a release,
    date or PR mark), from WINDOW_ROWS; a build the rules' change cannot place behaves as the newest, and says so."""
    if not any(r.engine == engine for r in WINDOW_ROWS):
        return {}
    rules, unplaced = window_rules(engine, engine_version), []
    rules.get("value", lambda text, change: unplaced.append(text))
    row = rules.row
    since = f" since {rules.fields()['since']}" if isinstance(row.since, Change) else ""
    return {"draft_window": row.value,
            "draft_window_how": f"{row.reader}{since} ({rules.say(row.source)})" + "".join(f"; {w}" for w in unplaced)}


_BASE_ROPE = ("default", "linear", "dynamic", "yarn", "longrope", "llama3")
ROWS: tuple[Rule, ...] = (
    # speculators tags: norm_before_fc (one norm over the whole fc input, input_norm.weight) since v0.5.0 (PR #337,
    # gpt-oss); norm_output (recycle the normed state) since v0.7.0 (PR #610); fc_norm (one norm per aux chunk,
    # fc_norm.{i}.weight) since v0.7.0 (PR #670), refused together with norm_before_fc by the config validator; the
    # training CLI defaults to --draft-arch llama --norm-before-fc --norm-output since v0.7.0 (PR #692):
    # speculators' "EAGLE 3.1" is the one-norm variant, SGLang's the per-chunk one.
    Rule("speculators", FLAG, "norm_before_residual"),
    Rule("speculators", FLAG, "norm_before_fc", "0.5.0", source="PR #337"),
    Rule("speculators", FLAG, "fc_norm", "0.7.0", source="PR #670"),
    Rule("speculators", FLAG, "norm_output", "0.7.0", source="PR #610"),
    Rule("speculators", FAMILY, QWEN3, "0.4.0", reader="--draft-arch qwen3 (Qwen3DecoderEagle3FirstLayer over "
                                                      "transformers' Qwen3DecoderLayer)", source="PR #291"),
    # vLLM wheels: llama_eagle3.py applies input_norm since 0.18.0 (PR #36545) and also reads
    # eagle_config.norm_before_fc since 0.22.0, qwen3_eagle3.py since 0.24.0; update_eagle3 (speculators/algos.py)
    # passes a speculators config's key through since 0.19.0 (PR #38111). llama_eagle3.py and deepseek_eagle3.py apply
    # fc_norm (fc_norm.{i}.weight, one per aux chunk, after input_norm when both are set) and norm_output since 0.22.0,
    # qwen3_eagle3.py since 0.24.0; update_eagle3 passes a speculators config's fc_norm / norm_output through since
    # 0.25.0 (PR #46488): before, the keys never reach the model, so fc_norm.* weights find no module (load fails)
    # and norm_output recycles the pre-norm state.
    Rule("vllm", FLAG, "norm_before_residual"),
    Rule("vllm", FLAG, "norm_before_fc", "0.18.0", reader="llama_eagle3.py", source="PR #36545"),
    Rule("vllm", FLAG, "norm_before_fc", "0.19.0", reader="speculators configs", source="PR #38111"),
    *(row for flag in ("fc_norm", "norm_output") for row in (
        Rule("vllm", FLAG, flag, "0.22.0", reader="model code"),
        Rule("vllm", FLAG, flag, "0.25.0", reader="speculators configs", source="PR #46488"))),
    # vLLM wheels 0.10.1.1, 0.12-0.22, 0.26-0.30 and VLLM_NEWEST_READ (_VLLM_ROPE_NOTE)
    *_rows("vllm", ROPE, ALL, *_BASE_ROPE),
    Rule("vllm", ROPE, "mrope", source="legacy 'type: mrope' read as default + mrope_section"),
    Rule("vllm", ROPE_IGNORES, "yarn", value=_YARN_MSCALE),
    Rule("vllm", ROPE_IGNORES, "yarn", "0.30.0", value=()),
    Rule("vllm", ROPE_LENGTH, "dynamic", value="max_positions_times_factor"),
    Rule("vllm", ROPE_LENGTH, "dynamic", "0.22.0", value="max_positions"),
    Rule("vllm", ROPE_LENGTH, "longrope", value="last_position"),   # 0.10.1.1: per batch, any position > original
    Rule("vllm", ROPE_LENGTH, "longrope", "0.12.0", value="max_positions"),
    # 0.24.0 read in the 0.23.0 (no qwen3_eagle3.py, update_eagle3 names every draft Eagle3LlamaForCausalLM) and
    # 0.24.0 wheels (qwen3_eagle3.py, the qwen3 map)
    Rule("vllm", FAMILY, QWEN3, "0.24.0", reader="qwen3_eagle3.py",
        source="PR #43132: update_eagle3 maps layer model_type qwen3 to Eagle3Qwen3ForCausalLM",
        note="update_eagle3 names every speculators draft Eagle3LlamaForCausalLM before {since}, and "
               "llama_eagle3.py has no q_norm/k_norm parameter: loading fails"),
    Rule("vllm", FAMILY, MLA, "0.18.0", reader="deepseek_eagle3.py (Eagle3DeepseekV2ForCausalLM / "
                                              "Eagle3DeepseekV3ForCausalLM)", source="PR #36361",
        note="no deepseek_eagle3.py before {since}"),
    # SGLang wheels: fc_norm (one RMSNorm per aux chunk; keys fc_norm.{i}.weight, legacy aux_norm_low/mid/high, flag
    # fc_norm or legacy use_aux_norm) and norm_output (recycle the normed state): llama_eagle3.py since 0.5.12 (PRs
    # #24663, #26506), kimi_k25_eagle3.py since 0.5.13. norm_before_fc: absent from every model file in 0.5.12-0.5.16;
    # from 0.5.17 llama_eagle3.py reads eagle_config.norm_before_fc (else the top-level key) and applies input_norm
    # before fc for every target (PR #32334, "Fix GPT-OSS EAGLE3 hidden states", opened 2026-07-24). With
    # norm_before_fc also set it applies both, input_norm first. norm_before_residual: never read.
    *(row for flag in ("fc_norm", "norm_output") for row in (
        Rule("sglang", FLAG, flag, "0.5.12", reader="llama_eagle3.py", source="PRs #24663, #26506"),
        Rule("sglang", FLAG, flag, "0.5.13", reader="kimi_k25_eagle3.py"))),
    Rule("sglang", FLAG, "norm_before_fc", "0.5.17", reader="llama_eagle3.py (every target)", source="PR #32334"),
    # SGLang wheels 0.4.6-SGLANG_NEWEST_READ (_SGLANG_ROPE_NOTE)
    *_rows("sglang", ROPE, ALL, *_BASE_ROPE),
    Rule("sglang", ROPE, "mrope", "0.5.2"),   # up to 0.5.1 get_rope has no 'mrope': the draft does not load
    Rule("sglang", ROPE, "proportional", "0.5.11"),
    Rule("sglang", ROPE_IGNORES, "yarn", value=_YARN_MSCALE),
    Rule("sglang", ROPE_IGNORES, "yarn", "0.5.16", value=(), source="PR #22711"),
    Rule("sglang", ROPE_LENGTH, "dynamic", value="max_positions_times_factor"),
    Rule("sglang", ROPE_LENGTH, "longrope", value="last_position"),
    Rule("sglang", FAMILY, MLA, "0.5.12", reader="kimi_k25_eagle3.py (Eagle3DeepseekV2ForCausalLM)",
        note="no kimi_k25_eagle3.py before {since}"),
    # Where norm_before_fc is read. vLLM llama_eagle3.py: eagle_config.norm_before_fc, else the top-level key, since
    # 0.22.0 (PR #42143; read in the 0.22.0, 0.23.0, 0.24.0 and 0.32.0 wheels), qwen3_eagle3.py likewise since it
    # exists (0.24.0); a speculators config's eagle_config never reaches the model (update_eagle3 passes top-level
    # keys only: nested_unread_formats). SGLang llama_eagle3.py: eagle_config.norm_before_fc, else the top-level key,
    # from 0.5.17 (PR #32334; absent from every model file in the 0.5.4-0.5.16 wheels). Every other reader: top level.
    Rule("vllm", FLAG_KEYS, "norm_before_fc", value=("top",), reader="llama_eagle3.py", source="PR #36545"),
    Rule("vllm", FLAG_KEYS, "norm_before_fc", "0.22.0", value=("nested", "top"), reader="llama_eagle3.py",
        source="PR #42143"),
    Rule("sglang", FLAG_KEYS, "norm_before_fc", value=("top",), reader="llama_eagle3.py"),
    Rule("sglang", FLAG_KEYS, "norm_before_fc", "0.5.17", value=("nested", "top"), reader="llama_eagle3.py",
        source="PR #32334"),
    # MLA draft models never read norm_before_fc: vLLM deepseek_eagle3.py (0.18.0, 0.24.0 and 0.32.0 wheels: no
    # input_norm, fc reads the raw concatenation), SGLang kimi_k25_eagle3.py (0.5.12-SGLANG_NEWEST_READ wheels)
    Rule("vllm", FAMILY_IGNORES, MLA, value=("norm_before_fc",), reader="deepseek_eagle3.py"),
    Rule("sglang", FAMILY_IGNORES, MLA, value=("norm_before_fc",), reader="kimi_k25_eagle3.py"),
)


def rows_at(engine: str, kind: str, release: str, rows=None) -> dict[str, list[tuple[Rule | None, Rule | None]]]:
    """name -> for each reader of it, (the row of ``engine`` and ``kind`` that holds at ``release``, None before its
    first; the next row of that reader, None when none follows), in the rows' order (the one lookup, rule_at)."""
    from packaging.version import Version

    rows = ROWS if rows is None else rows
    mine = [r for r in rows if r.engine == engine and r.kind == kind]
    out: dict[str, list[tuple[Rule | None, Rule | None]]] = {}
    for name, reader in dict.fromkeys((r.key, r.reader) for r in mine):
        found = rule_at(mine, release, engine=engine, kind=kind, key=name, newest=NEWEST_READ.get(engine, release),
                        reader=reader)
        later = [r for r in found.rows if r.since is not ALL and Version(r.since) > Version(release)]
        out.setdefault(name, []).append((found.row if found.held else None, later[0] if later else None))
    return out


def _since(row: Rule, verb: str = "since") -> str:
    """A row in words: "<reader> since <release> (<source>)"; ALL reads "all versions" (or the source alone)."""
    if row.since == ALL:
        return " ".join(p for p in (row.reader, row.source or ("all versions" if not row.reader else "")) if p)
    when = f"{verb} {_TAG.get(row.engine, '')}{row.since}" + (f" ({row.source})" if row.source else "")
    return f"{row.reader} {when}" if row.reader else when


def _until(row: Rule, later: Rule) -> str:
    """A row that a later one ends, in words: up to the release read before it, else before it."""
    from packaging.version import Version

    older = [r for r in _RELEASES.get(row.engine, ()) if Version(r) < Version(later.since)]
    return (f"up to {max(older, key=Version)}" if older else f"before {later.since}"
            + (f" ({later.source})" if later.source else ""))


def honours_at(engine: str, release: str, rows=None) -> dict[str, str]:
    """Flag -> since when / where ``engine``'s build ``release`` honours it (absent: ignored), from the FLAG rows."""
    return {flag: "; ".join(_since(held) for held, _ in readers)
            for flag, readers in rows_at(engine, FLAG, release, rows).items()
            if all(held is not None and held.value for held, _ in readers)}


def rope_at(engine: str, release: str, rows=None) -> dict:
    """``engine``'s build ``release`` builds RoPE: the EngineProfile fields rope_types, rope_since, rope_ignores and
    rope_length, from the ROPE, ROPE_IGNORES and ROPE_LENGTH rows."""
    def held(kind):
        return {name: readers[0] for name, readers in rows_at(engine, kind, release, rows).items()}

    types = {name: row for name, (row, _) in held(ROPE).items() if row is not None and row.value}
    since = {name: _since(row) for name, row in types.items() if row.since != ALL or row.source}
    ignores = {}
    for name, (row, later) in held(ROPE_IGNORES).items():
        # the keys some build of this engine drops, named in the prose of every build
        keys = "/".join(dict.fromkeys(k for r in (ROWS if rows is None else rows) if (r.engine, r.kind, r.key) ==
                                      (engine, ROPE_IGNORES, name) for k in r.value))
        if row is not None and row.value:
            ignores[name] = tuple(row.value)
            if later is not None:
                since[name] = f"{keys} ignored {_until(row, later)}"
        elif row is not None and row.since != ALL:
            since[name] = f"{keys} honoured {_since(row, 'from')}"
    length = {name: row.value for name, (row, _) in held(ROPE_LENGTH).items() if row is not None}
    return {"rope_types": frozenset(types), "rope_since": since, "rope_ignores": ignores, "rope_length": length}


def families_at(engine: str, release: str, rows=None) -> tuple[dict[str, str], dict[str, str]]:
    """``(attention, attention_other)`` of DraftFamilies for ``engine``'s build ``release``, from the FAMILY rows:
    family -> since when / where it is served (llama: all versions), family -> what a build before its row does."""
    served, other = {LLAMA: "all versions"}, {}
    for name, ((row, later), *_) in rows_at(engine, FAMILY, release, rows).items():
        if row is not None and row.value:
            served[name] = _since(row)
        elif later is not None and later.note:
            other[name] = later.note.format(since=later.since)
    return served, other


def reading_at(engine: str, release: str, rows=None) -> dict:
    """The EngineProfile fields flag_keys, flag_keys_how, family_ignores, draft_window and draft_window_how of
    ``engine``'s build ``release``, from the FLAG_KEYS and FAMILY_IGNORES rows and WINDOW_ROWS."""
    def held(kind):
        return {name: readers[0][0] for name, readers in rows_at(engine, kind, release, rows).items()
                if readers[0][0] is not None}

    keys = held(FLAG_KEYS)
    return {"flag_keys": {flag: tuple(row.value) for flag, row in keys.items()},
            "flag_keys_how": {flag: _since(row) for flag, row in keys.items()},
            "family_ignores": {family: {flag: row.reader for flag in row.value}
                               for family, row in held(FAMILY_IGNORES).items()},
            **window_fields(engine, release)}


def release_fields(engine: str, release: str, rows=None) -> dict:
    """The EngineProfile fields that are release rows, as ``engine``'s build ``release`` has them."""
    return {"release": release, "honours": honours_at(engine, release, rows), **rope_at(engine, release, rows),
            **reading_at(engine, release, rows)}


PROFILES: dict[str, EngineProfile] = {p.name: p for p in [
    EngineProfile(
        name="speculators", engine="speculators",
        versions=f"0.1-{SPECULATORS_READ}, Eagle3DraftModel; arithmetic checked against {SPECULATORS_READ}",
        id_engine="speculators", id_keys=(IDS_TOP,),
        release=SPECULATORS_READ, honours=honours_at("speculators", SPECULATORS_READ),   # the speculators rows
        **reading_at("speculators", SPECULATORS_READ),
        missing_rule={"norm_before_residual": "speculators config default False "
                                              "(its training CLI default is True)"},
        # eagle3/model_definitions.py (v0.3.0), models/base_components.py (c05b95b3): the layer config's own
        # transformers rotary class (LlamaRotaryEmbedding, Qwen3RotaryEmbedding, ...)
        rope_types=_TRANSFORMERS_ROPE,
        rope_since={t: "transformers' rotary embedding of the layer config, since v0.3.0" for t in _TRANSFORMERS_ROPE},
        rope_other="transformers' LlamaRotaryEmbedding has no such rope_type (KeyError)",
    ),
    EngineProfile(
        name="vllm", engine="vLLM", versions="0.30.0+; EAGLE 3.1 speculators configs since PR #46488 (0.25.0)",
        id_engine="vllm", id_keys=(IDS_TOP,), runner_rule="vllm",
        **release_fields("vllm", VLLM_NEWEST_READ),   # honours and RoPE: the vLLM rows
        missing_by_format={"speculators": {"norm_before_residual": True}},
        nested_unread_formats=("speculators",),   # update_eagle3 passes a speculators config's top-level keys only
        missing_rule={"norm_before_residual": "vLLM speculators adapter: a missing key in a speculators "
                                              "config is True (update_eagle3); other configs: False"},
        rope_other="get_rope raises ValueError('Unknown RoPE scaling type')",
        notes=(_VLLM_ROPE_NOTE,
               "vLLM concatenates captured states in ascending layer order, whatever the order of the ids.",
               # eagle3lab.engines.vllm_runner: the rows, read in the vLLM wheels 0.17.0-VLLM_NEWEST_READ
               "Aux ids are read from the top-level eagle_aux_hidden_state_layer_ids. Without it, the V2 model "
               "runner (eagle3_utils.py) ignores eagle_config.eagle_aux_hidden_state_layer_ids (since 0.27.0 it "
               "reads eagle_config.layer_ids instead) and uses the default (2, N//2, N-3); the V1 runner "
               "(gpu_model_runner.py) reads eagle_config.eagle_aux_hidden_state_layer_ids since 0.22.0, as vLLM "
               "ids (resid[k]), one point below what SGLang/SpecForge meant by them. Which runner runs follows the "
               "build (engine_version, engine_platform): vLLM's CPU build always runs V1 (V2 needs Triton); a CUDA "
               "build runs V2 by default for every target from 0.29.0 (for some targets from 0.22.0), V1 where a "
               "launch feature V2 lacks is used. Shown: the runner of the build given (no platform: a CUDA build).",
               "On fallback to the default ids the V2 runner logs INFO 'Using Eagle3 auxiliary layers from model: "
               f"(...)'; the V1 runner logs nothing; no release read (up to {VLLM_NEWEST_READ}) warns (PR #50170, open)."),
    ),
    EngineProfile(
        name="vllm-legacy", engine="vLLM", versions="before PR #38111",
        id_engine="vllm", id_keys=(IDS_TOP,),
        **release_fields("vllm", VLLM_LEGACY_RELEASE),
        missing_by_format={"speculators": {"norm_before_residual": True}},
        nested_unread_formats=("speculators",),   # update_eagle3 passes a speculators config's top-level keys only
        missing_rule={"norm_before_residual": "vLLM speculators adapter: a missing key in a speculators "
                                              "config is True (update_eagle3); other configs: False"},
        rope_other="get_rope raises ValueError('Unknown RoPE scaling type')",
        notes=("norm_before_fc: update_eagle3 drops a speculators config's key before PR #38111 (0.19.0). A "
               "top-level key in another config is honoured from PR #36545 (0.18.0); before it, never.",
               "fc_norm: llama_eagle3.py has no fc_norm module before 0.22.0, so fc_norm.* weights find no parameter "
               "and loading fails; a speculators config's fc_norm reaches it only from 0.25.0 (PR #46488).",
               _VLLM_ROPE_NOTE),
    ),
    EngineProfile(
        name="sglang", engine="SGLang", versions="0.5.17+ (EAGLE 3.1: PRs #24663, #26506; norm_before_fc: PR #32334)",
        id_engine="sglang", id_keys=(IDS_NESTED,),
        **release_fields("sglang", SGLANG_NEWEST_READ),   # honours and RoPE: the SGLang rows
        uses_target_embedding=True,
        rope_other="get_rope raises ValueError('Unknown RoPE scaling type')",
        notes=(_SGLANG_ROPE_NOTE,
               "SGLang ignores norm_before_residual: the residual is always the raw fc output.",
               "norm_before_fc (one RMSNorm over the whole fc input) is applied by llama_eagle3.py for every target "
               "since PR #32334 (first release 0.5.17); builds up to 0.5.16 ignore it.",
               "A missing or malformed eagle_config is swallowed and the default ids are used silently.",
               "With num_hidden_layers > 1 SGLang's extra layers differ (additional_layers.*); not modelled."),
    ),
    EngineProfile(
        name="sglang-legacy", engine="SGLang", versions="0.4-0.5 before EAGLE 3.1 support",
        id_engine="sglang", id_keys=(IDS_NESTED,), uses_target_embedding=True,
        **release_fields("sglang", SGLANG_LEGACY_RELEASE),
        rope_other="get_rope raises ValueError('Unknown RoPE scaling type')",
        notes=("Ignores every norm flag: raw residual, no fc norms, recycles the pre-norm state.",
               _SGLANG_ROPE_NOTE),
    ),
    EngineProfile(
        name="specforge", engine="SpecForge", versions="0.2.0 = a6b6b023; arithmetic checked against 0.2.0",
        id_engine="specforge", id_keys=(IDS_NESTED,),
        # llama3_eagle.py since b7ce50cd (2026-07-19, PR #568): fc_norm = three per-chunk norms (fc is always 3 aux
        # wide); norm_output, missing = true, only norms lm_head's input (false: lm_head reads the un-normed state) and
        # the pre-norm state is always recycled. SpecForge#879 (merged 2026-09-15, after 0.2.0 / a6b6b023) always
        # norms lm_head's input, recycles the normed state when true, and defaults it to false as SGLang does.
        honours={"fc_norm": "since PR #568 (b7ce50cd), three chunks",
                 "norm_output": "means 'norm before lm_head' only (before SpecForge#879)"},
        norm_output_recycles_postnorm=False, uses_target_embedding=True,
        # 0.2.0 llama3_eagle.py: self.norm_output = getattr(config, "norm_output", True); compute_logits norms only
        # then (the TTT loop, algorithms/eagle3/model.py, feeds back the backbone's pre-norm output either way)
        norm_output_gates_final_norm=True, missing={"norm_output": True},
        missing_rule={"norm_output": "SpecForge: a missing norm_output is true (getattr(config, 'norm_output', "
                                     "True) in llama3_eagle.py): lm_head reads the normed state"},
        # specforge/modeling/draft/llama3_eagle.py LlamaAttention._init_rope, history read in sgl-project/SpecForge
        rope_types=frozenset({"default", "linear", "dynamic", "llama3", "mrope", "yarn"}),
        rope_since={"linear": "since v0.1.0 (3234e24a)", "dynamic": "since v0.1.0 (3234e24a)",
                    "mrope": "since PR #102 (1618db78, 2025-08-22)", "yarn": "since PR #224 (b04970fb, 2025-10-30)",
                    "llama3": "since PR #287 (41bdd2a2, 2025-11-12); before it plain RoPE ('for nv type')",
                    "default": "an explicit 'default' since PR #502 (1b24cbf6, 2026-03-24); before it ValueError"},
        # 0.2.0 runs under transformers 5.8.1 (its pin), whose standardize_rope_params fills a llama3 config's
        # original_max_position_embeddings with max_position_embeddings, and whose LlamaConfig raises KeyError
        # for a missing factor / low_freq_factor / high_freq_factor before SpecForge sees it (tests/oracles)
        rope_length={"dynamic": "sequence_at_least_max_positions_plus_20"},
        rope_other="raises ValueError('Unknown RoPE scaling type') in llama3_eagle.py",
        # llama3_eagle.py reads them with rope_get(key): a missing one is None in arithmetic (TypeError at
        # yarn_find_correction_dim / yarn_get_mscale, 0.2.0), asserted against SpecForge in tests/oracles
        rope_fails={"yarn": ("beta_fast", "beta_slow", "mscale", "mscale_all_dim"),
                    "llama3": ("factor", "low_freq_factor", "high_freq_factor")},
        rope_fails_how=("yarn: None in arithmetic, TypeError at yarn_find_correction_dim / yarn_get_mscale; llama3: "
                        "KeyError in transformers 5.8.1's LlamaConfig, before llama3_eagle.py sees it"),
        yarn_scale_ratio=True,
        draft_window_how="llama3_eagle.py (0.2.0) builds full attention; the config's window is not read",
        notes=("SpecForge's llama3_eagle.py applies Llama-3 RoPE scaling since PR #287 (41bdd2a2, 2025-11-12; before "
               "it plain RoPE), yarn since PR #224 and mrope since PR #102; any other type raises ValueError.",
               "yarn (LlamaYarnRotaryEmbedding) always scales cos/sin by yarn_get_mscale(factor, mscale) / "
               "yarn_get_mscale(factor, mscale_all_dim) (llama3_eagle.py:521-524; transformers uses "
               "yarn_get_mscale(factor) unless both are non-zero), and passes beta_fast, beta_slow, "
               "mscale and mscale_all_dim as read: a yarn config without one of them fails (None in arithmetic). "
               "mrope (LlamaMutiRotaryEmbedding): plain frequencies, sections over position_ids [3, B, T]; text "
               "positions are equal in the three rows. dynamic: its cos/sin table is built for "
               "max_position_embeddings + 20 rows, so theta is always rescaled for at least that length.",
               "SpecForge trains with the target's (frozen) embedding and does not save it.",
               "EAGLE 3.1 (fc_norm + norm_output) since PR #568: up to 0.2.0 its training recycles the pre-norm state "
               "while SGLang, reading norm_output true, recycles the normed one, so such a draft is served with "
               "other arithmetic than it was trained with; SpecForge#879 (merged 2026-09-15) recycles the normed "
               "state in training too."),
    ),
    EngineProfile(
        name="eagle", engine="EAGLE official", versions="SafeAILab/EAGLE cnets.py",
        id_engine="eagle", id_keys=(), honours={}, uses_target_embedding=True,
        draft_window_how="cnets.py builds full attention",
        rope_types=frozenset({"default", "linear", "dynamic"}), rope_other="cnets.py raises for it",
        notes=("Capture points are hard-coded (resid[2], resid[N//2], resid[N-3]); config ids are not read.",
               "cnets.py builds RoPE for rope_scaling types linear/dynamic only and raises for 'llama3'; shown "
               "here as plain RoPE. Official drafts ship without rope_scaling.",
               "The embedding is read from the base model unless config.json has target_hidden_size."),
    ),
]}

@dataclass(frozen=True)
class DraftFamilies:
    """The draft families one engine serves (or trains), read in its code, with since when."""

    attention: dict[str, str] = field(default_factory=lambda: {LLAMA: "all versions"})  # family -> since / where
    attention_other: dict[str, str] = field(default_factory=dict)   # kind it cannot run -> what happens, where read
    attention_requires: dict[str, dict[str, str]] = field(default_factory=dict)  # kind -> {config field: why}
    num_aux_keys: dict[str, tuple[str, ...]] = field(default_factory=dict)  # kind -> keys fc's width is read from
    num_aux_rule: str = "fc reads 3 aux states"                     # in words, with versions
    # MLA drafts (served kinds only): rope_scaling key -> what the engine uses when it is missing (the string
    # "max_position_embeddings": the draft's); a DeepSeek YaRN key missing here and in the config fails to load
    mla_rope_missing: dict[str, object] = field(default_factory=dict)
    mla_rope_rule: str = ""                                          # in words, where read


# How the engines that serve MLA drafts build their RoPE: not llama_eagle3.py's get_rope but DeepSeek's attention
# (SGLang kimi_k25_eagle3.py -> deepseek_v2.py DeepseekV2AttentionMLA, 0.5.12-SGLANG_NEWEST_READ; vLLM deepseek_eagle3.py ->
# deepseek_v2.py DeepseekV2MLAAttention, 0.18.0 and VLLM_NEWEST_READ), which renames every rope type but default
# "deepseek_yarn" (DeepseekScalingRotaryEmbedding): YaRN frequencies from factor and original_max_position_embeddings,
# cos/sin times yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim). So a linear, llama3 or
# dynamic MLA draft runs YaRN (llama3's low/high_freq_factor are not read), and mscale is honoured in every version.
# Defaults of DeepseekScalingRotaryEmbedding's signature (the same in both engines):
DEEPSEEK_YARN_DEFAULTS = {"beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 0.0}
DEEPSEEK_YARN_NEEDS = ("factor", "original_max_position_embeddings")
# keys that change this arithmetic in some engines only: refused, not modelled
_MLA_ROPE_UNMODELLED = {
    "apply_yarn_scaling": f"false drops the softmax mscale in SGLang and vLLM 0.18 (vLLM {VLLM_NEWEST_READ} ignores it)",
    "attention_factor": f"1.0 makes vLLM {VLLM_NEWEST_READ} build 'deepseek_llama_scaling' (no softmax mscale); SGLang "
                        "ignores it",
    "extrapolation_factor": f"SGLang and vLLM 0.18 scale the YaRN ramp by it; vLLM {VLLM_NEWEST_READ} ignores it",
    "attn_factor": f"SGLang and vLLM 0.18 multiply cos/sin by it; vLLM {VLLM_NEWEST_READ} ignores it",
}
_MLA_ROPE_VLLM = ("deepseek_v2.py's get_rope reads rope_parameters['factor'] and ['original_max_position_embeddings'] "
                  "for deepseek_yarn (transformers 5's standardize_rope_params fills the latter with "
                  "max_position_embeddings for yarn, llama3 and longrope only)")


_NO_MLA_SPECULATORS = ("speculators has no MLA first layer (eagle3/model_definitions.py registers llama and qwen3 "
                       f"only, v0.4.0-{SPECULATORS_READ}), and vLLM's update_eagle3 raises for any other layer model_type")
_SGLANG_NO_QWEN3 = (f"SGLang has no q/k-norm draft (0.5.12-{SGLANG_NEWEST_READ}): llama_eagle3.py builds Llama attention and its "
                    "load_weights skips names it has no parameter for, so q_norm/k_norm would be dropped silently; "
                    "SGLang does not read speculators configs")
_SPECFORGE_LLAMA_ONLY = ("llama3_eagle.py (LlamaForCausalLMEagle3) is SpecForge's only EAGLE-3 draft at a6b6b023 / "
                         "0.2.0; the MLA draft of PR #640 was closed unmerged")

# Read in the engines' own releases: vLLM wheels 0.17.0-VLLM_NEWEST_READ, SGLang wheels 0.5.8-SGLANG_NEWEST_READ, speculators tags
# v0.3.0-v0.7.0 and 0.9.0, SpecForge a6b6b023 (= 0.2.0's llama3_eagle.py), SafeAILab/EAGLE cnets.py.
def _families(engine: str, release: str, other: dict[str, str] | None = None, **fields) -> DraftFamilies:
    """The families ``engine``'s build ``release`` serves (its FAMILY rows) and ``other`` it cannot, with ``fields``."""
    served, before = families_at(engine, release)
    return DraftFamilies(attention=served, attention_other={**before, **(other or {})}, **fields)


FAMILIES: dict[str, DraftFamilies] = {
    "speculators": _families(
        "speculators", SPECULATORS_READ, {MLA: _NO_MLA_SPECULATORS},
        num_aux_keys={LLAMA: (IDS_TOP,), QWEN3: (IDS_TOP,)},
        num_aux_rule="fc reads len(eagle_aux_hidden_state_layer_ids) states since v0.7.0 (PR #670); 3 before"),
    "vllm": _families(
        "vllm", VLLM_NEWEST_READ,
        num_aux_keys={LLAMA: (NUM_AUX_KEY, IDS_NESTED), MLA: (NUM_AUX_KEY, IDS_NESTED),
                      QWEN3: ("num_aux_layers", NUM_AUX_KEY, IDS_TOP, IDS_NESTED)},
        num_aux_rule=("fc width from num_aux_hidden_states or the eagle_config ids since 0.22.0 (llama_eagle3.py, "
                      "deepseek_eagle3.py), also the top-level ids in qwen3_eagle3.py (0.24.0+); llama_eagle3.py "
                      "never reads the top-level ids a speculators config holds, so it builds fc for 3 and a 4-aux "
                      f"speculators Llama draft fails to load (vllm#54526; fix PR #54598 open, read up to {VLLM_NEWEST_READ})"),
        mla_rope_rule=(f"deepseek_v2.py DeepseekV2MLAAttention ({VLLM_NEWEST_READ}) renames any rope type but default "
                       "'deepseek_yarn'; " + _MLA_ROPE_VLLM)),
    "vllm-legacy": _families(
        "vllm", VLLM_LEGACY_RELEASE,
        num_aux_rule="fc = 3 x target_hidden_size before 0.22.0 (llama_eagle3.py, deepseek_eagle3.py)",
        mla_rope_rule="deepseek_eagle3.py (0.18.0) renames any rope_scaling 'deepseek_yarn'; " + _MLA_ROPE_VLLM),
    "sglang": _families(
        "sglang", SGLANG_NEWEST_READ, {QWEN3: _SGLANG_NO_QWEN3},
        attention_requires={MLA: {"q_lora_rank": "kimi_k25_eagle3.py raises ValueError('Eagle3 MLA layer requires "
                                                 f"q_lora_rank in the draft config'), 0.5.12-{SGLANG_NEWEST_READ}"}},
        num_aux_keys={LLAMA: (NUM_AUX_KEY, IDS_NESTED), MLA: (IDS_NESTED, IDS_TOP)},
        num_aux_rule=("any count since 0.5.12: llama_eagle3.py reads num_aux_hidden_states, else the eagle_config "
                      "ids; kimi_k25_eagle3.py the eagle_config ids, else the top-level ones; 3 before"),
        mla_rope_missing={"factor": 1.0, "original_max_position_embeddings": "max_position_embeddings"},
        mla_rope_rule=(f"kimi_k25_eagle3.py -> deepseek_v2.py (0.5.12-{SGLANG_NEWEST_READ}): any rope_scaling but default is "
                       "deepseek_yarn; factor missing = 1.0, original_max_position_embeddings missing = "
                       "max_position_embeddings (factory.py _get_rope_param, with a warning)")),
    "sglang-legacy": _families(
        "sglang", SGLANG_LEGACY_RELEASE, {QWEN3: _SGLANG_NO_QWEN3},
        num_aux_rule="fc = 3 x target hidden size up to 0.5.11 (llama_eagle3.py)"),
    "specforge": DraftFamilies(
        attention_other={MLA: _SPECFORGE_LLAMA_ONLY, QWEN3: _SPECFORGE_LLAMA_ONLY},
        num_aux_rule="fc = 3 x target_hidden_size and three fc_norm chunks (llama3_eagle.py, a6b6b023 / 0.2.0)"),
    "eagle": DraftFamilies(
        attention_other={MLA: "cnets.py builds a Llama layer only", QWEN3: "cnets.py builds a Llama layer only"},
        num_aux_rule="fc = 3 x hidden size, or 3 x target_hidden_size (cnets.py)"),
}


# eagle_config switches of NVIDIA ModelOpt's EAGLE export (modelopt/torch/speculative/config.py EagleConfig,
# plugins/megatron_eagle.py), carried by MLA drafts (TorchSpec kimi_k25_eagle3_mla.json): key -> (the value every
# serving engine acts as if written, what it means). No engine reads them: grep of SGLang SGLANG_NEWEST_READ and vLLM VLLM_NEWEST_READ
# finds no reference; SGLang kimi_k25_eagle3.py (0.5.12-SGLANG_NEWEST_READ), vLLM deepseek_eagle3.py (0.18.0-VLLM_NEWEST_READ) and
# TorchSpec deepseek_eagle.py (6f21829) always norm the embedding and the output.
MODELOPT_SWITCHES = {
    "use_input_layernorm_in_first_layer": (True, "input_layernorm on the embedding in the first layer"),
    "use_last_layernorm": (True, "the final norm before lm_head"),
    "use_mtp_layernorm": (False, "ModelOpt's MTP-style enorm/hnorm, built only when no aux states are used "
                                 "(EAGLE-1 path of megatron_eagle.py)"),
}


def unread_key_notes(stated: dict, table: dict, mismatch: str, prefix: str = "") -> list[tuple[str, object, str]]:
    """``(prefix + key, value, rule)`` for each ``table`` key (-> (value the code acts as if written, rule)) that
    ``stated`` holds; ``mismatch`` (formatted with key and value) is added when the stated value differs."""
    return [(prefix + key, stated[key], rule + ("" if bool(stated[key]) == acted else
                                                mismatch.format(key=key, value=stated[key])))
            for key, (acted, rule) in table.items() if key in stated]


def modelopt_switch_notes(eagle_config: dict) -> list[tuple[str, object, str]]:
    """``(key, value, rule)`` for each ModelOpt switch an ``eagle_config`` states: what engines do with it."""
    rules = {key: (acted, f"ModelOpt switch for {meaning}; no serving engine reads it (SGLang, vLLM and TorchSpec act "
                          f"as if {str(acted).lower()})") for key, (acted, meaning) in MODELOPT_SWITCHES.items()}
    return unread_key_notes(eagle_config, rules, ": a draft trained with {key}={value} runs different arithmetic "
                                                 "when served", prefix="eagle_config.")


# Keys of an MLA draft's config.json that change its attention where a model reads them, but that the EAGLE-3 MLA
# draft code does not model: key -> (the value that code acts as if written, the rule). Kept for round trips, not
# modelled (eagle3lab computes as the draft code does).
MLA_CONFIG_KEYS = {
    # SGLang configs/kimi_linear.py (0.5.12-SGLANG_NEWEST_READ) holds it; its kimi_linear.py and kimi_k3.py (SGLANG_NEWEST_READ) build
    # every MLA layer with skip_rope=True, vLLM 0.18.0 kimi_linear.py asserts use_nope; vLLM VLLM_NEWEST_READ's k3_dspark.py
    # refuses it for DSpark drafts. No EAGLE-3 MLA draft reads it: SGLang kimi_k25_eagle3.py (0.5.12-SGLANG_NEWEST_READ), vLLM
    # deepseek_eagle3.py (0.18.0, VLLM_NEWEST_READ) and TorchSpec deepseek_eagle.py (7adce248) rotate the rope dims anyway.
    "mla_use_nope": (False, "Kimi-Linear / Kimi-K3 MLA without rotary embedding (NoPE: the qk_rope_head_dim part of q "
                            "and k is never rotated; SGLang kimi_linear.py / kimi_k3.py skip_rope, vLLM 0.18 "
                            "kimi_linear.py); not modelled, and no EAGLE-3 MLA draft code reads it (SGLang "
                            f"kimi_k25_eagle3.py 0.5.12-{SGLANG_NEWEST_READ}, vLLM deepseek_eagle3.py 0.18.0-{VLLM_NEWEST_READ}, TorchSpec "
                            "deepseek_eagle.py): RoPE is applied"),
    # SGLang deepseek_v2.py DeepseekV2AttentionMLA: is_neox_style = not getattr(config, "rope_interleave", True)
    # (0.5.12, SGLANG_NEWEST_READ); vLLM deepseek_v2.py DeepseekV2MLAAttention passes is_neox_style=False (0.18.0, VLLM_NEWEST_READ).
    "rope_interleave": (True, "DeepSeek's RoPE pairs: true (the default) rotates (2j, 2j + 1), false the halves "
                              f"(i, i + d/2). SGLang deepseek_v2.py reads it (0.5.12-{SGLANG_NEWEST_READ}); vLLM deepseek_v2.py "
                              f"(0.18.0-{VLLM_NEWEST_READ}), TorchSpec and eagle3lab always rotate interleaved pairs; not "
                              "modelled"),
}


def mla_config_notes(raw: dict) -> list[tuple[str, object, str]]:
    """``(key, value, rule)`` for each MLA_CONFIG_KEYS key a config states."""
    return unread_key_notes(raw, MLA_CONFIG_KEYS, ": a draft trained with {key}={value} runs other arithmetic here "
                                                  "and where it is served")

def serving_problems(config, profile: str | EngineProfile, attention_words=None) -> list[str]:
    """Why ``profile`` cannot run this draft as written (empty when it can): a draft family it lacks, a
    field it needs, an aux count its fc cannot take. ``attention_words``: family name -> its attention in words
    (eagle3lab.models.families.ATTENTION_KINDS, the families' registry above this layer); else the name is said."""
    profile = get_profile(profile)
    fam, kind, out = profile.families, getattr(config, "attention", LLAMA), []
    if kind not in fam.attention:
        words = (attention_words or {}).get(kind, f"{kind} attention")
        out.append(f"{profile.label} cannot run a draft with {words}: "
                   f"{fam.attention_other.get(kind, 'it has no such draft model')}")
    for key, why in fam.attention_requires.get(kind, {}).items():
        if getattr(config, key, None) is None:
            out.append(f"{profile.label} needs {key} set for this draft: {why}")
    # the type as written: rope_type default with mrope_section (transformers 5's mrope spelling) builds plain
    # RoPE in an engine without mrope; a written type it does not know raises
    written = config.rope_scaling or {}
    rope_type = rope_type_of(written) if written.get("rope_type", written.get("type")) == "mrope" or \
        "mrope" in profile.rope_types else str(written.get("rope_type", written.get("type", "default")))
    if kind != MLA and rope_type not in profile.rope_types:   # an MLA draft's RoPE: mla_rope below
        out.append(f"{profile.label} cannot build rope_type '{rope_type}'"
                   + (f": {profile.rope_other}" if profile.rope_other else ""))
    elif kind != MLA and profile.rope_fails.get(rope_type):
        absent = [k for k in profile.rope_fails[rope_type] if (config.rope_scaling or {}).get(k) is None]
        if absent:
            out.append(f"{profile.label} cannot build rope_type '{rope_type}' without rope_scaling."
                       f"{', rope_scaling.'.join(absent)} ({profile.rope_fails_how}: loading fails)")
    if kind == MLA and kind in fam.attention:
        for key in mla_rope(config, profile)[2]:
            out.append(f"{profile.label} needs rope_scaling.{key} for this MLA draft (KeyError, loading fails): "
                       f"{fam.mla_rope_rule}")
    num_aux = config.num_aux
    if num_aux != 3:
        keys = fam.num_aux_keys.get(kind)
        written = {config.aux_ids_key, *([NUM_AUX_KEY] if NUM_AUX_KEY in config.extra else [])}
        if keys is None or (config.aux_ids_key is not None and not written & set(keys)):
            out.append(f"{profile.label} builds fc for 3 aux states, this draft's fc reads {num_aux} "
                       f"({fam.num_aux_rule}): loading fails"
                       + (f"; it reads the count from {' or '.join(keys)}" if keys else ""))
    return out


# The engine whose arithmetic a checkpoint family was trained with (the default profile on load).
FORMAT_PROFILE = {"speculators": "speculators", "sglang": "specforge", "eagle": "eagle"}


def for_build(profile: str | EngineProfile, engine_version=None, engine_platform=None) -> EngineProfile:
    """``profile`` as one engine build runs it: ``engine_version`` (a release, date or PR mark; None = the newest
    code read) and ``engine_platform`` ("cuda" or "cpu"; vLLM only, None = a CUDA build assumed)."""
    from eagle3lab.engines.versions import parse_engine_version

    profile = get_profile(profile)
    platform = check_platform(engine_platform)
    if platform is not None and profile.runner_rule is None:
        raise bad_input("engine_platform", None, f"a vLLM profile (the platform decides vLLM's model runner), not "
                        f"{profile.name}", repr(engine_platform))
    version = parse_engine_version(engine_version, "engine_version")
    built = replace(profile, engine_version=version or profile.engine_version,
                    engine_platform=platform or profile.engine_platform)
    built = _at_release(built, version)
    # the window's rule holds from a Change, so a date or a PR mark places it too (the other release rows: releases)
    return replace(built, **window_fields(profile.id_engine, version)) if version and profile.release else built


# The profile whose aux-count fields (fc width rule) a build of each engine has, by the release that changed them:
# vLLM llama_eagle3.py / deepseek_eagle3.py size fc from the count from 0.22.0, SGLang llama_eagle3.py from 0.5.12.
_NUM_AUX_SINCE = {"vllm": ("0.22.0", "vllm", "vllm-legacy"), "sglang": ("0.5.12", "sglang", "sglang-legacy")}


def _at_release(profile: EngineProfile, version: str | None) -> EngineProfile:
    """``profile`` with the release rows (honours, RoPE, flag places, window, families) of release ``version``; a
    date, PR mark or no version keeps the profile's own (the newest read: the layer-id rows place those)."""
    from packaging.version import InvalidVersion, Version

    if version is None or profile.release is None or profile.id_engine not in _NUM_AUX_SINCE:
        return profile
    try:
        release = Version(version)
    except InvalidVersion:
        return profile
    release = min(release, Version(NEWEST_READ[profile.id_engine]))
    first, newer, older = _NUM_AUX_SINCE[profile.id_engine]
    counts = FAMILIES[newer if release >= Version(first) else older]
    served, before = families_at(profile.id_engine, str(release))
    families = replace(counts, attention=served, attention_other={
        **{k: v for k, v in counts.attention_other.items() if k not in served}, **before})
    return replace(profile, **release_fields(profile.id_engine, str(release)), build_families=families,
                   versions=f"build {version}")


def engine_builds(engine: str | None = None, engine_version=None, engine_platform=None) -> dict[str, EngineProfile]:
    """Profile name -> the profile as build ``engine_version`` / ``engine_platform`` of ``engine`` ("vllm", "sglang")
    runs it: the engine's own profile (not its -legacy one, which models older builds); empty when nothing is
    given. A version needs its engine: 0.32.0 is a vLLM or an SGLang release."""
    if engine is None:
        if engine_version is not None or engine_platform is not None:
            raise bad_input("engine", None, "vllm or sglang (whose release engine_version / engine_platform name)",
                            None)
        return {}
    name = str(engine).strip().lower()
    if name not in ("vllm", "sglang"):
        raise bad_input("engine", None, "vllm or sglang", repr(engine))
    # the engine's current profile only: its -legacy profile models builds before a change, not this one
    return {name: for_build(name, engine_version, engine_platform)}


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
    final_norm: bool = True            # norm before lm_head (always, except SpecForge with norm_output false)
    use_target_embedding: bool = False
    qk_norm: bool = False              # Qwen3 drafts: the per-head q/k RMSNorms are applied
    rope_scaling: dict | None = None   # as this engine reads it (keys it ignores dropped; None = plain RoPE)
    rope_length: str = "sequence"      # which length picks dynamic/longrope frequencies (models.rope.LENGTH_RULES)
    # setting -> Decision(value, how it was decided), for load reports, inspect and notebooks
    decisions: dict[str, Decision] = field(default_factory=dict)


def resolve_settings(config, profile: str | EngineProfile, fmt: str | None = None,
                     has_target_embedding: bool = False) -> DraftSettings:
    """A checkpoint's written flags (None = key missing) + an engine profile -> ``DraftSettings``."""
    profile = get_profile(profile)
    kind = getattr(config, "attention", LLAMA)
    values, decisions = _flag_decisions(config, profile, fmt, kind)
    _check_norm_flags(config, values, profile)
    recycle_postnorm = values["norm_output"] and profile.norm_output_recycles_postnorm
    decisions["recycle"] = Decision("post-norm" if recycle_postnorm else "pre-norm",
                                    f"{profile.engine}: " + ("norm_output recycles the normed state"
                                                             if recycle_postnorm else "recycles the pre-norm state"))
    final_norm = values["norm_output"] if profile.norm_output_gates_final_norm else True
    if profile.norm_output_gates_final_norm:
        decisions["final_norm"] = Decision(final_norm, f"{profile.engine}: norm_output {str(final_norm).lower()}, "
                                           f"lm_head reads the {'normed' if final_norm else 'un-normed'} state")
    qk_norm = kind == QWEN3 and kind in profile.families.attention   # its q/k norms run where it is served
    if kind != LLAMA:
        served = kind in profile.families.attention
        decisions["attention"] = Decision(kind if served else "cannot run", f"{profile.engine}: " + (
            profile.families.attention[kind] if served else
            "cannot run it (" + profile.families.attention_other.get(kind, "no such draft model") + "); shown with "
            "the checkpoint's attention" + (" without the q/k norms" if kind == QWEN3 else "")))
    use_target_embedding = profile.uses_target_embedding and has_target_embedding
    if profile.uses_target_embedding:
        decisions["embedding"] = Decision("target" if use_target_embedding else "draft",
                                          f"{profile.engine} replaces the draft embedding with the target's"
                                          + ("" if has_target_embedding else "; no target given, so the draft's "
                                             "own is used"))
    rope, rope_type = _rope_as_read(config, profile, kind, decisions)
    rope_length = profile.rope_length.get(rope_type, "sequence")
    return DraftSettings(norm_before_fc=values["norm_before_fc"], fc_norm=values["fc_norm"],
                         norm_before_residual=values["norm_before_residual"], recycle_postnorm=recycle_postnorm,
                         final_norm=final_norm,
                         use_target_embedding=use_target_embedding, rope_scaling=rope, rope_length=rope_length,
                         qk_norm=qk_norm, decisions=decisions)


def _flag_decisions(config, profile: EngineProfile, fmt: str | None, kind: str) -> tuple[dict, dict]:
    """Each flag's value as this engine reads it (ignored, defaulted by its rule, or as written where it reads it),
    and the rule that chose it."""
    values: dict[str, bool] = {}
    decisions: dict[str, Decision] = {}
    for flag in FLAGS:
        places = written_places(config, flag)
        written, at = places.at(profile.flag_places(flag, fmt))
        unread = profile.family_ignores.get(kind, {}).get(flag)
        if flag not in profile.honours or unread:
            value, shown = False, places.at(("nested", "top"))[0]
            how = (f"ignored by {profile.label}" + (f" ({unread} never reads it)" if unread else "")
                   + (f" (written: {shown})" if shown is not None else ""))
        elif written is None:
            value, rule = profile.default_for(flag, fmt)
            how = f"missing, defaulted by {rule}" + _unread_place(places, profile, flag, fmt)
        else:
            value, how = bool(written), (f"explicit in the checkpoint ({place_key(flag, at)}), honoured by "
                                         f"{profile.engine}")
        values[flag] = value
        decisions[flag] = Decision(value, how)
    return values, decisions


def _check_norm_flags(config, values: dict, profile: EngineProfile) -> None:
    """Refuse norm flags the checkpoint cannot back: a norm switched on without its weights, or both fc norms."""
    for flag in ("norm_before_fc", "fc_norm"):  # these need weights the checkpoint may not have
        if values[flag] and not getattr(config, flag):
            raise bad_input("draft config", flag, "true only when the checkpoint has its norm weights",
                            f"{profile.label} defaults it to true", "Set the flag explicitly in config.json.")
    if values["norm_before_fc"] and values["fc_norm"]:
        raise bad_input("draft config", "norm_before_fc / fc_norm", "at most one of them true (mutually exclusive in "
                        "speculators' config validator since v0.7.0, PR #670; SGLang and vLLM would apply input_norm, "
                        "then fc_norm: not modelled)", "both true")


def _rope_as_read(config, profile: EngineProfile, kind: str, decisions: dict) -> tuple[dict | None, str]:
    """The draft's rope_scaling as this engine builds it (None = plain RoPE) and its rope type; a rope_scaling
    decision is added whenever the engine reads it otherwise than as written, or applies a scaling."""
    rope = config.rope_scaling
    rope_type = rope_type_of(rope)
    missing = [k for k in profile.rope_requires.get(rope_type, ()) if (rope or {}).get(k) is None]
    if kind == MLA and kind in profile.families.attention:   # DeepSeek's attention builds it, not get_rope
        rope, how, _ = mla_rope(config, profile)
        rope_type = rope_type_of(rope)
        if how:
            decisions["rope_scaling"] = Decision(rope_type, how)
    elif rope_type == "mrope" and rope.get("rope_type", rope.get("type")) == "default" and \
            rope_type not in profile.rope_types:   # transformers 5's spelling where mrope is not applied
        decisions["rope_scaling"] = Decision("default", f"{profile.label} reads rope_type 'default' and builds plain "
                                                        "RoPE (mrope_section is not read)")
        rope = None
    elif rope_type not in profile.rope_types:
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
        dropped = [k for k in profile.rope_ignores.get(rope_type, ()) if k in rope]
        rope = {k: v for k, v in rope.items() if k not in dropped}
        ratio = ""
        if rope_type == "yarn" and profile.yarn_scale_ratio and "attention_factor" not in rope and \
                None not in (rope.get("mscale"), rope.get("mscale_all_dim")):
            factor = float(rope["factor"])
            rope = {**rope, "attention_factor": yarn_mscale(factor, rope["mscale"]) /
                    yarn_mscale(factor, rope["mscale_all_dim"])}
            ratio = f", cos/sin x mscale ratio {rope['attention_factor']:.6g}"
        decisions["rope_scaling"] = Decision(rope_type, f"{profile.label} applies rope_type '{rope_type}'"
                                                        + (f" ({since})" if since else "")
                                                        + (f", ignoring {', '.join(dropped)}" if dropped else "")
                                                        + ratio)
    return rope, rope_type


# DraftConfig.extra key: a flag's top-level value where eagle_config also states it (the config's flag field then holds
# the value read first where both are read, eagle_config's)
TOP_FLAGS = "flags_top"


def written_places(config, flag: str) -> Written:
    """Where a draft config (a ``DraftConfig``) writes ``flag``: its top-level and eagle_config values."""
    extra = getattr(config, "extra", None) or {}
    nested = (extra.get("eagle_config") or {}).get(flag)
    if nested is None:
        return Written(top=getattr(config, flag))
    return Written(top=(extra.get(TOP_FLAGS) or {}).get(flag), nested=nested)


def place_key(flag: str, place: str | None) -> str:
    return f"eagle_config.{flag}" if place == "nested" else flag


def _unread_place(places: Written, profile: EngineProfile, flag: str, fmt: str | None) -> str:
    """Words for a flag written only where this build does not read it ("" when it is not written at all)."""
    value, at = places.at(("nested", "top"))
    if value is None:
        return ""
    reads = " or ".join(place_key(flag, p) for p in profile.flag_places(flag, fmt))
    return f"; {place_key(flag, at)} = {value} is written, but {profile.label} reads only {reads}"


def yarn_mscale(factor: float, mscale) -> float:
    """DeepSeek's yarn_get_mscale (SGLang, vLLM, SpecForge and transformers write the same formula)."""
    return 1.0 if factor <= 1 else 0.1 * float(mscale) * math.log(factor) + 1.0


def mla_rope(config, profile: str | EngineProfile) -> tuple[dict | None, str, list[str]]:
    """An MLA draft's RoPE as an engine that serves MLA drafts builds it: ``(rope_scaling for transformers' functions,
    None = plain; the rule in words, "" for plain RoPE; DeepSeek YaRN keys missing that the engine cannot do
    without)``. transformers' yarn computes DeepseekScalingRotaryEmbedding's frequencies; its cos/sin scale is
    given as attention_factor, since transformers' own mscale rule differs when only one of the two is written."""
    profile = get_profile(profile)
    rope, fam = config.rope_scaling, profile.families
    if rope_type_of(rope) in ("default", "mrope"):   # mrope: plain frequencies on a text-only draft's positions
        return None, "", []
    for key, why in _MLA_ROPE_UNMODELLED.items():
        if key in rope:
            raise bad_input("draft config", f"rope_scaling.{key}", f"absent for an MLA draft (not modelled: {why})",
                            repr(rope[key]))
    given = {k: v for k, v in rope.items() if v is not None}
    if rope_type_of(rope) in ("llama3", "yarn", "longrope"):   # transformers' standardize_rope_params
        given.setdefault("original_max_position_embeddings", config.max_position_embeddings)
    lacking = [k for k in DEEPSEEK_YARN_NEEDS if k not in given and k not in fam.mla_rope_missing]
    for key, value in fam.mla_rope_missing.items():
        given.setdefault(key, config.max_position_embeddings if value == "max_position_embeddings" else value)
    given = {**DEEPSEEK_YARN_DEFAULTS, "factor": 1.0, "original_max_position_embeddings":
             config.max_position_embeddings, **given}   # for what cannot load: shown as SGLang would run it
    factor = float(given["factor"])
    scale = yarn_mscale(factor, given["mscale"]) / yarn_mscale(factor, given["mscale_all_dim"])
    built = {"rope_type": "yarn", "factor": factor, "beta_fast": given["beta_fast"], "beta_slow": given["beta_slow"],
             "original_max_position_embeddings": given["original_max_position_embeddings"],
             "mscale": given["mscale"], "mscale_all_dim": given["mscale_all_dim"], "attention_factor": scale}
    how = (f"{profile.label} builds deepseek_yarn (DeepseekScalingRotaryEmbedding) for rope_type "
           f"'{rope_type_of(rope)}' of an MLA draft: factor {factor:g} over "
           f"{built['original_max_position_embeddings']} positions, cos/sin x {scale:.6g} "
           f"(mscale {given['mscale']:g} / mscale_all_dim {given['mscale_all_dim']:g}); {fam.mla_rope_rule}")
    return built, how, lacking
