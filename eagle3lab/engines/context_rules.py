"""What each engine does with a draft's own context limits, by release: one row per rule.

A draft carries three limits of its own, whatever its target takes:

    limit (ROWS kind)   the draft config's key(s)                         what the engines do with it
    MAX_POSITIONS       max_position_embeddings as each engine reads it   vLLM before PR #49343 sizes the draft's RoPE
                        (LENGTH_ROWS: vLLM's RoPE cache, SGLang's         cache by it and fails past it (#48894); since
                        get_context_length)                               #49343 raises it to the target's length.
                                                                          SGLang refuses to start when the target's
                                                                          context is longer, unless
                                                                          SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1
                                                                          (then raises it, PR #10787)
    ROPE                rope_scaling / rope_parameters                    every engine rotates the draft by its own
                                                                          config, never the target's
    WINDOW              sliding_window with layer_types                   speculators trains it on the layers
                                                                          layer_types names (#684, default 2048);
                                                                          vLLM applies it through layer_types only;
                                                                          SGLang never reads it, applies
                                                                          --speculative-draft-window-size (PR #24664)

The WINDOW rules are held in ``eagle3lab.engines.profiles`` (``WINDOW_ROWS``, which the profiles read too) and
listed here. Each rule is one ``versions.Rule`` row, whole: engine, the limit (``kind``), the launch setting it needs (``key``), the
change it holds from (``since``, one of ``CHANGES``; None: every build read before the next row), what the engine does
(``value``: a code), the file it was read in (``reader``) and the releases read (``source``, a template filled from the
row). ``rules_at`` reads them through the one lookup, ``versions.rule_at``. ``resolve_context(engine, draft_config,
target_config, engine_version, ...)`` answers with a typed ``ContextRule``: the first position the engine cannot
serve (``fails_from``), the window it runs (``window``: keys with ``query - key < window``, on ``window_layers``),
whether the draft's RoPE computes the target's, and notes with stable codes (``NOTE_CODES``; callers match the code,
never the text). Builds are placed by ``eagle3lab.engines.versions`` (dates, PR marks, releases); one it cannot place
behaves as the newest code read, with the warning note. ``eagle3lab.analysis.context_curve`` runs a draft as each
rule says. Lengths are rules too (``LENGTH_ROWS``: kind LENGTH, value a ``Length``; ``context_length``): how each
engine reads the target's context (vLLM's max_model_len or --max-model-len, SGLang's get_context_length or
--context-length) and the positions its draft RoPE covers (vLLM: max_position_embeddings x factor for linear / dynamic,
original_max_position_embeddings x factor for YaRN). Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3lab.engines.config_view import (
    ORIGINAL_FILLED_ROPE_TYPES,
    read_draft,
    read_target,
    rope_type_of,
    text_config,
)
from eagle3lab.engines.layer_ids import SGLANG_NEWEST_READ, SGLANG_OLDEST_READ
from eagle3lab.engines.profiles import (
    BY_FLAG,
    BY_LAYER_TYPES,
    NO_WINDOW,
    SGLANG_DRAFT_WINDOW,
    SPECULATORS_READ,
    WINDOW,
    WINDOW_ROWS,
)
from eagle3lab.engines.versions import ENGINE_NAMES, Change, InForce, Rule, rule_at
from eagle3lab.engines.vllm_runner import VLLM_WHEEL_READ
from eagle3lab.errors import bad_input
from eagle3lab.findings import Finding, Severity

MAX_POSITIONS, ROPE = "max_positions", "rope"   # WINDOW: profiles' (the window rules are held there)
LENGTH = "length"                  # Rule.kind of LENGTH_ROWS: key TARGET or DRAFT, value a Length
# what an engine does (the value of a MAX_POSITIONS, ROPE or WINDOW rule)
FAILS = "fails past it"            # positions >= the draft's limit crash (or read past the RoPE cache)
REFUSES = "refuses to start"       # start-up raises while the target's context is longer than the draft's
EXTENDS = "extends it"             # the draft's limit is raised to the target's: RoPE computed at every position
DRAFT_ROPE = "the draft's own"     # the draft's RoPE from its own config, never the target's
# BY_LAYER_TYPES: the window on the layers layer_types names sliding_attention; BY_FLAG: only from a launch flag, on
# every draft layer; NO_WINDOW: none, whatever the config says (the values of profiles' WINDOW rows)
ENGINES = ("speculators", "vllm", "sglang")
# the newest release of each engine these rows were read in (vLLM: its installed wheel; vllm_runner.VLLM_NEWEST_READ
# is the newest whose runner was read); a row's source names it as {newest}
NEWEST_READ = {"vllm": VLLM_WHEEL_READ, "sglang": SGLANG_NEWEST_READ, "speculators": SPECULATORS_READ}
_TRACED = "0.24.0"                # the vLLM release #48894 traced: the newest known to lack #49343
SGLANG_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
SGLANG_FLAG = "--speculative-draft-window-size"

CHANGES = {
    # vLLM PR #49343 "[BugFix] eagle draft max position embeddings" (opened 2026-07-21, fixes #48894, reported and
    # traced on v0.24.0): SpeculativeConfig._maybe_override_draft_max_position_embeddings, read in the 0.32.0 wheel
    # (config/speculative.py); the releases between were not read, and the merge day was not read.
    "vllm#49343": Change("vllm", "an EAGLE draft's max_position_embeddings raised to the target's max_model_len",
                         pr=49343, opened="2026-07-21", last_without=_TRACED, first_with="0.32.0"),
    # SGLang PR #10787 (opened 2025-09-23, fixes #10713): with the env var, ModelConfig._derive_context_length also
    # raises the draft's max_position_embeddings; present in the 0.5.4 and 0.5.23 wheels (configs/model_config.py)
    "sglang#10787": Change("sglang", "with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, the draft's "
                           "max_position_embeddings raised to the target's context length", pr=10787,
                           opened="2025-09-23", first_with="0.5.4"),
    # --speculative-draft-window-size (PR #24664): the window rules' change, held with them (profiles.WINDOW_ROWS)
    "sglang#24664": SGLANG_DRAFT_WINDOW,
}


@dataclass(frozen=True)
class Length:
    """The value of a LENGTH rule: how its engine reads a length from a config, for the rule's key TARGET (the context
    it serves the target to) or DRAFT (the positions its draft's RoPE covers): the first written key of ``keys``
    (``smallest``: the smallest written one; a written value is any number, as both engines read ``getattr(config,
    key)``), times the RoPE scaling's factor (rope_scaling, else rope_parameters: transformers 5 maps either onto the
    config's rope_scaling) for the RoPE types ``scaled`` (None: every type but ``unscaled``), unless the scaling writes
    ``unscaled_if`` or the type is one of ``filled``, whose original_max_position_embeddings transformers 5
    (standardize_rope_params) fills when it is not written; ``base``: a RoPE type whose length is read from a scaling
    key instead; ``flag``: the launch flag that sets it outright; ``default``: the length when no key is written."""

    keys: tuple[str, ...]
    smallest: bool
    scaled: tuple[str, ...] | None
    unscaled: tuple[str, ...]
    unscaled_if: str | None
    base: dict
    flag: str | None
    filled: tuple[str, ...] = ()
    default: int | None = None


TARGET, DRAFT = "target", "draft"
# SGLang 0.5.23 srt/utils/hf_transformers/common.py CONTEXT_LENGTH_KEYS / get_context_length (2048 when no key is
# written), on the config transformers 5.19 (the engine environment's) loads, which fills original_max_position_embeddings
# for llama3, yarn and longrope: SGLang scales those by 1 (tests/oracles/test_sglang_context_length.py runs it)
_SGLANG_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")
# vLLM 0.32.0 transformers_utils/model_arch_config_convertor.py derive_max_model_len_and_key (the smallest written)
_VLLM_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
              "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
_SGLANG_LENGTH = dict(keys=_SGLANG_KEYS, smallest=False, scaled=None, unscaled=("llama3",),
                      unscaled_if="original_max_position_embeddings", base={}, filled=ORIGINAL_FILLED_ROPE_TYPES,
                      default=2048)
_SGLANG_READER = "srt/utils/hf_transformers/common.py get_context_length"
_TRANSFORMERS = Length(("max_position_embeddings",), False, (), (), None, {}, None)
_WHEEL = "read in the {newest} wheel"
_OLDEST_AND_NEWEST = f"read in the {SGLANG_OLDEST_READ} and {{newest}} wheels"
LENGTH_ROWS: tuple[Rule, ...] = (
    Rule("vllm", LENGTH, TARGET, None, Length(_VLLM_KEYS, True, None, ("su", "longrope", "llama3", "yarn",
         "deepseek_yarn", "deepseek_llama_scaling"), None, {}, "--max-model-len"), reader="config/model.py "
         "_get_and_verify_max_len (max_model_len; a tokenizer's model_max_length can lower it, not read here)",
         source=_WHEEL),
    # get_rope: linear and dynamic cache max_position x factor, YaRN original_max_position x factor, the rest
    # max_position (the draft's max_position_embeddings, llama.py)
    Rule("vllm", LENGTH, DRAFT, None, Length(("max_position_embeddings",), False, ("linear", "dynamic", "yarn"), (),
         None, {"yarn": "original_max_position_embeddings"}, None), reader="model_executor/layers/rotary_embedding/"
         "__init__.py get_rope; linear_scaling_rope.py, dynamic_ntk_scaling_rope.py, yarn_scaling_rope.py "
         "(_compute_cos_sin_cache)", source=_WHEEL),
    Rule("sglang", LENGTH, TARGET, None, Length(flag="--context-length", **_SGLANG_LENGTH), reader=_SGLANG_READER,
         source=_WHEEL),
    Rule("sglang", LENGTH, DRAFT, None, Length(flag=None, **_SGLANG_LENGTH), reader=_SGLANG_READER, source=_WHEEL),
    # transformers computes RoPE at any position: the config's length is what the model was trained to
    Rule("speculators", LENGTH, TARGET, None, _TRANSFORMERS, reader="transformers' config (RoPE computed at every "
         "position)", source="speculators {newest}"),
    Rule("speculators", LENGTH, DRAFT, None, _TRANSFORMERS, reader="transformers' config (RoPE computed at every "
         "position)", source="speculators {newest}"),
)


def rules_at(engine: str, kind: str, engine_version=None, key=None) -> InForce:
    """The rules of ``engine``'s ``kind`` (and ``key``: a launch setting, or LENGTH's role) as build ``engine_version``
    reads them: the one lookup (``versions.rule_at``) over ``ROWS`` (LENGTH: ``LENGTH_ROWS``)."""
    rows = LENGTH_ROWS if kind == LENGTH else ROWS
    return rule_at(rows, engine_version, engine=engine, kind=kind, key=key, newest=NEWEST_READ[engine])


def length_row(engine: str, role: str) -> Rule:
    return rules_at(engine, LENGTH, key=role).row


def cited(rules: InForce) -> str:
    """'reader; source' of the rule in force, its source filled from the row ({newest}, {since}, {until}, ...)."""
    return f"{rules.row.reader}; {rules.say(rules.row.source)}"


def context_length(engine: str, role: str, config: dict, launched: int | None = None) -> int | None:
    """The length ``engine`` reads from ``config`` for ``role`` (``LENGTH_ROWS``), or ``launched`` (the row's flag:
    --max-model-len, --context-length) when given."""
    row = length_row(engine, role).value
    if launched is not None:
        return int(launched)
    if not config:
        return None
    layer = text_config(config)
    layer = layer.get("transformer_layer_config") or layer      # speculators nests the draft's geometry
    written = [layer[k] for k in row.keys if _number(layer.get(k))]
    if not written:
        return row.default
    scaling = layer.get("rope_scaling") or layer.get("rope_parameters") or {}
    kind = rope_type_of(scaling)
    length = min(written) if row.smallest else written[0]
    if kind in row.base and _number(scaling.get(row.base[kind])):
        length = scaling[row.base[kind]]
    scales = (kind in row.scaled if row.scaled is not None else kind not in row.unscaled) and \
        not (row.unscaled_if and (row.unscaled_if in scaling or kind in row.filled))
    return int(length * (scaling.get("factor") or 1)) if scales else int(length)


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# Which keys a window of W keeps, past query - key < W: vLLM's flash-attention window (W-1, 0) and speculators'
# kv_idx > q_idx - W keep W keys; SGLang's backends keep k_pos >= q_pos - W (Gemma's files pass sliding_window - 1 to
# match; llama_eagle3.py passes the flag as it is), one key more.
WINDOW_EXTRA = {BY_LAYER_TYPES: 0, BY_FLAG: 1}
# A window written without layer_types, on an engine that reads windows from layer_types: (note code, what follows).
# vLLM 0.32.0 hands the draft the verifier's cache_config window (llama.py); speculators leaves full attention.
WINDOW_WITHOUT_LAYER_TYPES = {
    "vllm": ("CONTEXT_WINDOW_FROM_VERIFIER", "; the draft gets the verifier's window (cache_config), full attention "
             "for a target without one."),
    "speculators": ("CONTEXT_WINDOW_DROPPED", "."),
}


def _row(engine, kind, since, value, reader, source, key=None) -> Rule:
    return Rule(engine, kind, key, None if since is None else CHANGES[since], value, reader=reader, source=source)


# One rule per (engine, limit, launch setting, change it holds from), in the order the changes landed. ``source`` is a
# template filled from the row (``cited``): {newest} the newest release read, {since} / {until} the row's releases.
ROWS: tuple[Rule, ...] = (
    # vLLM: llama.py get_rope(max_position=max_position_embeddings) sizes cos_sin_cache; index_select past it is a
    # device-side assert under torch.compile, an unchecked read in eager forward_cuda (#48894's trace of v0.24.0)
    _row("vllm", MAX_POSITIONS, None, FAILS, "model_executor/layers/rotary_embedding/base.py (cos_sin_cache)",
         "not read here: vLLM #48894's trace of v{until} (crash under torch.compile, out-of-bounds reads eager)"),
    _row("vllm", MAX_POSITIONS, "vllm#49343", EXTENDS, "config/speculative.py "
         "(_maybe_override_draft_max_position_embeddings)", _WHEEL),
    _row("vllm", ROPE, None, DRAFT_ROPE, "model_executor/models/llama_eagle3.py (the draft's own hf_config)",
         _WHEEL + f"; #48894 traces the same in v{_TRACED}"),
    # SGLang: the draft's ModelConfig gets the target's context_len (eagle_worker.py / draft_worker_common.py)
    _row("sglang", MAX_POSITIONS, None, REFUSES, "srt/configs/model_config.py (_derive_context_length: "
         "ValueError 'Target model's context_length ... is greater than the derived context_length')",
         _OLDEST_AND_NEWEST),
    _row("sglang", MAX_POSITIONS, None, FAILS, "srt/layers/rotary_embedding.py (cache sized by "
         "max_position_embeddings: illegal memory access past it, #10713)", "before PR #10787: not read here",
         key=SGLANG_ENV),
    _row("sglang", MAX_POSITIONS, "sglang#10787", EXTENDS, "srt/configs/model_config.py "
         "(_derive_context_length overrides max_position_embeddings)", _OLDEST_AND_NEWEST, key=SGLANG_ENV),
    _row("sglang", ROPE, None, DRAFT_ROPE, "srt/models/llama_eagle3.py (the draft's own config)", _OLDEST_AND_NEWEST),
    # speculators (the trainer): cli.py writes max_position_embeddings = the verifier's and layer_types from
    # --sliding-window (default 2048, schema.py); eagle3/attention.py keeps kv_idx > q_idx - sliding_window
    _row("speculators", MAX_POSITIONS, None, EXTENDS, "transformers' RoPE (computed at every position)",
         "speculators {newest}"),
    _row("speculators", ROPE, None, DRAFT_ROPE, "models/eagle3/core.py (the draft's transformer_layer_config)",
         "speculators {newest}"),
    *WINDOW_ROWS,   # the draft's window: one rule per engine and change, held in eagle3lab.engines.profiles
)

LABELS = {**ENGINE_NAMES, "speculators": "speculators"}

NOTE_CODES = {
    "CONTEXT_VERSION_UNPLACED": "the build cannot be placed relative to a change: the newest behaviour is assumed",
    "CONTEXT_FAILS_PAST_LIMIT": "positions from the draft's limit on fail (crash or reads past the RoPE cache)",
    "CONTEXT_REFUSES_START": "start-up refuses while the target's context is longer than the draft's",
    "CONTEXT_EXTENDED": "positions past the draft's limit run (up to the target's): RoPE past what it declares",
    "CONTEXT_ROPE_DIFFERS": "the draft's RoPE computes other angles than the target's",
    "CONTEXT_WINDOW_DROPPED": "the draft config's window is not applied by this engine (full attention)",
    "CONTEXT_WINDOW_APPLIED": "a sliding window limits the draft's attention",
    "CONTEXT_WINDOW_FROM_VERIFIER": "sliding_window without layer_types: vLLM gives the draft the verifier's window",
}


# How bad each note is (the rest are information): positions the engine does not serve, then what it runs
# other than the draft was trained with.
_SEVERITY = {"CONTEXT_FAILS_PAST_LIMIT": Severity.ERROR, "CONTEXT_REFUSES_START": Severity.ERROR,
             "CONTEXT_VERSION_UNPLACED": Severity.WARNING, "CONTEXT_EXTENDED": Severity.WARNING,
             "CONTEXT_ROPE_DIFFERS": Severity.WARNING, "CONTEXT_WINDOW_DROPPED": Severity.WARNING,
             "CONTEXT_WINDOW_FROM_VERIFIER": Severity.WARNING}


def context_note(code: str, text: str) -> Finding:
    assert code in NOTE_CODES, code
    return Finding(code, _SEVERITY.get(code, Severity.INFO), text)


@dataclass(frozen=True)
class ContextRule:
    """How ``engine`` (build ``engine_version``) runs a draft's context: see the module docstring."""

    engine: str
    engine_version: str | None
    draft_max_positions: int | None   # as the engine reads it (context_length(engine, DRAFT, ...))
    target_max_positions: int | None  # the target's context as the engine derives it, or as launched
    positions: str                    # FAILS, REFUSES or EXTENDS
    fails_from: int | None            # the first position not served (None: every position)
    rope_same_as_target: bool | None  # None: a RoPE not read
    window: int | None                # keys with query - key < window (None: full attention)
    window_layers: tuple[int, ...]
    rows: tuple[Rule, ...]
    notes: tuple[Finding, ...]

    @property
    def label(self) -> str:
        return f"{LABELS.get(self.engine, self.engine)} {self.engine_version or NEWEST_READ[self.engine]}"

    @property
    def launch(self) -> str | None:
        """The launch a curve under this rule assumes: one refused at start-up runs only with the target's context
        cut to the draft's (SGLang: --context-length m)."""
        if self.positions != REFUSES or self.fails_from is None:
            return None
        return f"as launched with {length_row(self.engine, TARGET).value.flag} {self.fails_from}"

    def codes(self) -> tuple[str, ...]:
        return tuple(n.code for n in self.notes)


def rule_row(engine: str, kind: str, engine_version=None, key: str | None = None, warn=None) -> Rule:
    """The rule of ``engine``'s ``kind`` of limit (launched with ``key``) that holds for the build; ``warn(text)`` is
    called for each change the build cannot be placed by where the rule changes (it behaves as the newest code read).
    Dates, PR marks and releases place a build (``rules_at``, the one lookup)."""
    rules = rules_at(engine, kind, engine_version, key)
    rules.get("value", None if warn is None else lambda text, change: warn(text))
    return rules.row


def _positions(engine, rules: InForce, m, target_m, note) -> int | None:
    """The first position not served, with its note."""
    if m is None or (target_m is not None and m >= target_m):
        return None
    row = rules.row
    if row.value == FAILS:
        note("CONTEXT_FAILS_PAST_LIMIT", f"{LABELS[engine]} sizes the draft's RoPE cache by its max_position_embeddings "
             f"{m}: every request reaching position {m} fails ({cited(rules)}).")
        return m
    if row.value == REFUSES:
        note("CONTEXT_REFUSES_START", f"{LABELS[engine]} refuses to start: the target's context "
             f"({target_m}) is longer than the draft's ({m}); launch with {length_row(engine, TARGET).value.flag} {m} "
             f"(the target is then served only up to {m}) or set {SGLANG_ENV} ({cited(rules)}).")
        return m
    note("CONTEXT_EXTENDED", f"{LABELS[engine]} serves positions past the draft's length {m} up to the target's "
         f"{target_m}, RoPE computed beyond the draft's own limit ({cited(rules)}).")
    return None


def _window(engine, row, view, launch_window, note) -> tuple[int | None, tuple[int, ...]]:
    w, n = view.window, view.num_layers
    if row.value == BY_FLAG:
        if launch_window:
            note("CONTEXT_WINDOW_APPLIED", f"{SGLANG_FLAG} {launch_window}: every draft layer attends keys with "
                 f"query - key <= {launch_window} ({row.reader}).")
            return launch_window + WINDOW_EXTRA[BY_FLAG], tuple(range(n))
        if w.written:
            note("CONTEXT_WINDOW_DROPPED", f"the draft's sliding_window {w.size} is never read by {LABELS[engine]} "
                 f"({row.reader}): full attention unless launched with {SGLANG_FLAG} {w.size}.")
        return None, ()
    if row.value == NO_WINDOW:
        if w.written:
            note("CONTEXT_WINDOW_DROPPED", f"the draft's sliding_window {w.size} is never read by this "
                 f"{LABELS[engine]} build ({row.reader}): full attention.")
        return None, ()
    layers = w.by_layer_types(n)
    if w.written and w.layer_types is None:
        code, then = WINDOW_WITHOUT_LAYER_TYPES[engine]
        note(code, f"sliding_window {w.size} without layer_types: {LABELS[engine]} applies a draft window only "
             f"through layer_types ({row.reader}){then}")
    if layers:
        note("CONTEXT_WINDOW_APPLIED", f"layers {list(layers)} attend keys with query - key < {w.size} "
             f"({row.reader}).")
        return w.size + WINDOW_EXTRA[BY_LAYER_TYPES], layers
    return None, ()


def resolve_context(engine: str, draft_config: dict, target_config: dict, engine_version=None, *,
                    launch_window: int | None = None, allow_longer: bool = False,
                    target_context: int | None = None) -> ContextRule:
    """How ``engine`` runs this draft's context (``draft_config`` / ``target_config``: the config.json dicts).
    ``launch_window``: SGLang's --speculative-draft-window-size; ``allow_longer``: SGLang launched with
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1; ``target_context``: the target's context as launched (vLLM
    --max-model-len, SGLang --context-length; default: as the engine derives it, ``context_length``)."""
    if engine not in ENGINES:
        raise bad_input("engine", None, f"one of {', '.join(ENGINES)}", repr(engine))
    notes: list[Finding] = []

    def note(code, text):
        notes.append(context_note(code, text))

    def warn(text, change):
        note("CONTEXT_VERSION_UNPLACED", text)

    view, target = read_draft(draft_config, ()), read_target(target_config)
    setting = SGLANG_ENV if allow_longer and any((r.engine, r.key) == (engine, SGLANG_ENV) for r in ROWS) else None
    pos, rope, win = [rules_at(engine, kind, engine_version, key)
                      for kind, key in ((MAX_POSITIONS, setting), (ROPE, None), (WINDOW, None))]
    for rules in (pos, rope, win):
        rules.get("value", warn)   # a note for each change the build cannot be placed by where its rule changes
    m = context_length(engine, DRAFT, draft_config)
    target_m = context_length(engine, TARGET, target_config, target_context)
    fails_from = _positions(engine, pos, m, target_m, note)
    same = None if view.rope.unclear or target.rope.unclear else view.rope.computes() == target.rope.computes()
    if same is False:
        note("CONTEXT_ROPE_DIFFERS", f"{LABELS[engine]} rotates the draft by its own RoPE ({view.rope.words()}), not "
             f"the target's ({target.rope.words()}) ({cited(rope)}).")
    window, layers = _window(engine, win.row, view, launch_window, note)
    return ContextRule(engine, None if engine_version is None else str(engine_version), m, target_m, pos.row.value,
                       fails_from, same, window, layers, (pos.row, rope.row, win.row), tuple(notes))
