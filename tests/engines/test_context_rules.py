"""Each engine's rule for a draft's own context limits, row by row (eagle3lab.engines.context_rules)."""

import json

import pytest

from eagle3lab.bundled import DRAFT_HEALTHY, TARGET
from eagle3lab.engines import context_rules as cr
from eagle3lab.engines.context_rules import (
    BY_FLAG,
    BY_LAYER_TYPES,
    EXTENDS,
    FAILS,
    MAX_POSITIONS,
    NO_WINDOW,
    REFUSES,
    ROPE,
    ROWS,
    SGLANG_ENV,
    WINDOW,
    resolve_context,
    rule_row,
)
from eagle3lab.errors import Eagle3LabError

DRAFT = json.loads((DRAFT_HEALTHY / "config.json").read_text())
TARGET_CFG = json.loads((TARGET / "config.json").read_text())        # max_position_embeddings 2048
SHORT = dict(DRAFT, max_position_embeddings=256)                       # a limit below the target's
WINDOWED = dict(DRAFT, sliding_window=64, layer_types=["sliding_attention"])

# (engine, kind, build, key) -> the behaviour its row states: every row of ROWS is one case here
CASES = [
    ("vllm", MAX_POSITIONS, "0.24.0", None, FAILS),
    ("vllm", MAX_POSITIONS, "0.32.0", None, EXTENDS),
    ("vllm", ROPE, "0.32.0", None, cr.DRAFT_ROPE),
    ("vllm", WINDOW, "0.32.0", None, BY_LAYER_TYPES),
    ("sglang", MAX_POSITIONS, "0.5.23", None, REFUSES),
    ("sglang", MAX_POSITIONS, "pre-#10787", SGLANG_ENV, FAILS),
    ("sglang", MAX_POSITIONS, "0.5.4", SGLANG_ENV, EXTENDS),
    ("sglang", ROPE, "0.5.23", None, cr.DRAFT_ROPE),
    ("sglang", WINDOW, "0.5.11", None, NO_WINDOW),
    ("sglang", WINDOW, "0.5.12", None, BY_FLAG),
    ("speculators", MAX_POSITIONS, None, None, EXTENDS),
    ("speculators", ROPE, None, None, cr.DRAFT_ROPE),
    ("speculators", WINDOW, None, None, BY_LAYER_TYPES),
]


@pytest.mark.parametrize("engine,kind,build,key,value", CASES)
def test_each_row_answers_its_build(engine, kind, build, key, value):
    row = rule_row(engine, kind, build, key)
    assert row.value == value and row.reader and row.source


def test_every_row_is_a_case():
    hit = {rule_row(e, k, b, key) for e, k, b, key, _ in CASES}
    assert hit == set(ROWS)


def test_vllm_before_49343_fails_at_the_drafts_limit_and_after_it_extends():
    before = resolve_context("vllm", SHORT, TARGET_CFG, "0.24.0")
    assert (before.positions, before.fails_from, before.codes()) == (FAILS, 256, ("CONTEXT_FAILS_PAST_LIMIT",))
    assert resolve_context("vllm", SHORT, TARGET_CFG, "pre-#49343").fails_from == 256
    after = resolve_context("vllm", SHORT, TARGET_CFG, "0.32.0")
    assert (after.fails_from, after.codes()) == (None, ("CONTEXT_EXTENDED",))
    # a build between the releases read is placed by nothing: it behaves as the newest code, and says so
    unplaced = resolve_context("vllm", SHORT, TARGET_CFG, "0.28.0")
    assert unplaced.fails_from is None and unplaced.codes()[0] == "CONTEXT_VERSION_UNPLACED"
    assert resolve_context("vllm", SHORT, TARGET_CFG, "2026-07-01").fails_from == 256   # dated before the PR opened


def test_no_limit_below_the_target_means_every_position_is_served():
    for engine, build in (("vllm", "0.24.0"), ("sglang", "0.5.23"), ("speculators", None)):
        rule = resolve_context(engine, DRAFT, TARGET_CFG, build)
        assert rule.fails_from is None and rule.window is None and not rule.codes()


def test_sglang_refuses_to_start_unless_the_env_var_then_extends():
    plain = resolve_context("sglang", SHORT, TARGET_CFG)
    assert (plain.positions, plain.fails_from, plain.codes()) == (REFUSES, 256, ("CONTEXT_REFUSES_START",))
    allowed = resolve_context("sglang", SHORT, TARGET_CFG, allow_longer=True)
    assert (allowed.positions, allowed.fails_from) == (EXTENDS, None)


def test_each_engine_reads_the_drafts_length_with_its_rope_factor():
    """SGLang's get_context_length: max_position_embeddings x factor unless original_max_position_embeddings is
    written or the type is llama3; vLLM's RoPE cache (get_rope, 0.32.0): max_position x factor for linear and
    dynamic, original_max_position x factor for YaRN, max_position for the rest."""
    linear = dict(SHORT, rope_scaling={"rope_type": "linear", "factor": 4.0})
    assert resolve_context("sglang", linear, TARGET_CFG).fails_from == 1024
    assert resolve_context("vllm", linear, TARGET_CFG, "0.24.0").fails_from == 1024
    dynamic = dict(SHORT, rope_scaling={"type": "dynamic", "factor": 2.0})
    assert resolve_context("vllm", dynamic, TARGET_CFG, "0.24.0").fails_from == 512
    yarn = dict(SHORT, rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 128})
    assert resolve_context("vllm", yarn, TARGET_CFG, "0.24.0").fails_from == 512
    assert resolve_context("sglang", yarn, TARGET_CFG).fails_from == 256
    llama3 = dict(SHORT, rope_scaling={"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                                       "high_freq_factor": 4.0, "original_max_position_embeddings": 128})
    assert resolve_context("sglang", llama3, TARGET_CFG).fails_from == 256
    assert resolve_context("vllm", llama3, TARGET_CFG, "0.24.0").fails_from == 256


def test_the_targets_context_as_each_engine_derives_it_or_as_launched():
    """vLLM's max_model_len: the smallest length key x factor (not for llama3 / YaRN); SGLang: the first of
    max_sequence_length, seq_length, ... max_position_embeddings x factor; either replaced by its launch flag."""
    assert cr.context_length("vllm", cr.TARGET, TARGET_CFG) == cr.context_length("sglang", cr.TARGET, TARGET_CFG) == 2048
    scaled = dict(TARGET_CFG, rope_scaling={"rope_type": "linear", "factor": 2.0})
    assert cr.context_length("vllm", cr.TARGET, scaled) == cr.context_length("sglang", cr.TARGET, scaled) == 4096
    written = dict(TARGET_CFG, max_sequence_length=1024, seq_length=8192)
    assert cr.context_length("sglang", cr.TARGET, written) == 1024 and cr.context_length("vllm", cr.TARGET, written) == 1024
    assert cr.context_length("sglang", cr.TARGET, dict(TARGET_CFG, seq_length=8192)) == 8192
    assert cr.context_length("vllm", cr.TARGET, dict(TARGET_CFG, seq_length=8192)) == 2048
    assert cr.length_row("vllm", cr.TARGET).value.flag == "--max-model-len"
    # launched with a target context no longer than the draft's: SGLang starts and serves every position
    launched = resolve_context("sglang", SHORT, TARGET_CFG, target_context=256)
    assert (launched.fails_from, launched.codes(), launched.target_max_positions) == (None, (), 256)
    longer = resolve_context("vllm", SHORT, scaled, "0.24.0")
    assert (longer.target_max_positions, longer.fails_from) == (4096, 256)


def test_labels_name_the_build_read_and_the_launch_a_refusal_implies():
    assert resolve_context("vllm", DRAFT, TARGET_CFG).label == "vLLM 0.32.0"
    plain = resolve_context("sglang", SHORT, TARGET_CFG)
    assert plain.launch == "as launched with --context-length 256"
    assert resolve_context("sglang", SHORT, TARGET_CFG, allow_longer=True).launch is None


def test_rope_against_the_targets():
    assert resolve_context("vllm", DRAFT, TARGET_CFG).rope_same_as_target is True
    other = dict(DRAFT, rope_theta=500000.0)
    rule = resolve_context("vllm", other, TARGET_CFG)
    assert rule.rope_same_as_target is False and "CONTEXT_ROPE_DIFFERS" in rule.codes()


def test_windows_by_engine():
    vllm = resolve_context("vllm", WINDOWED, TARGET_CFG)
    assert (vllm.window, vllm.window_layers) == (64, (0,))
    assert resolve_context("speculators", WINDOWED, TARGET_CFG).window == 64
    dropped = resolve_context("sglang", WINDOWED, TARGET_CFG)
    assert dropped.window is None and "CONTEXT_WINDOW_DROPPED" in dropped.codes()
    flag = resolve_context("sglang", WINDOWED, TARGET_CFG, launch_window=64)
    assert (flag.window, flag.window_layers) == (65, (0,))       # SGLang keeps key >= query - W: one key more
    assert resolve_context("sglang", WINDOWED, TARGET_CFG, "0.5.11", launch_window=64).window is None
    no_types = dict(DRAFT, sliding_window=64)
    rule = resolve_context("vllm", no_types, TARGET_CFG)
    assert rule.window is None and rule.codes() == ("CONTEXT_WINDOW_FROM_VERIFIER",)


def test_an_unknown_engine_is_refused():
    with pytest.raises(Eagle3LabError, match="engine"):
        resolve_context("tgi", DRAFT, TARGET_CFG)


def test_note_codes_are_listed():
    rules = [resolve_context(e, {**WINDOWED, "max_position_embeddings": 256, "rope_theta": 1.0}, TARGET_CFG, v)
             for e, v in (("vllm", "0.28.0"), ("vllm", "0.24.0"), ("sglang", None), ("speculators", None))]
    assert {c for r in rules for c in r.codes()} <= set(cr.NOTE_CODES)


def test_sources_name_releases_through_their_row():
    """A rule's source says which releases were read as a template filled from the row (the newest read, its change's
    releases), so the release held by NEWEST_READ or a Change is never typed beside it."""
    for row in (*ROWS, *cr.LENGTH_ROWS):
        assert cr.NEWEST_READ[row.engine] not in row.source, row
    assert cr.cited(cr.rules_at("vllm", MAX_POSITIONS, "0.32.0")).endswith("; read in the 0.32.0 wheel")
    assert "#48894's trace of v0.24.0" in cr.cited(cr.rules_at("vllm", MAX_POSITIONS, "0.24.0"))
    assert cr.cited(cr.rules_at("sglang", WINDOW, "0.5.12")).endswith("PR #24664; read in the 0.5.12-0.5.23 wheels")
    assert cr.cited(cr.rules_at("sglang", WINDOW, "0.5.11")).endswith("read in the 0.5.4-0.5.11 wheels")


# SGLang 0.5.23's answers (srt/utils/hf_transformers/common.py get_context_length, lines 677-694, on the config its
# get_config loads with transformers 5.19), run by tests/oracles/test_sglang_context_length.py; committed here so the
# reading is held without the engine environment. One per way flags' copy and this module's once disagreed.
_LLAMA = {"model_type": "llama", "max_position_embeddings": 4096}
SGLANG_SAYS = [
    ({"model_type": "qwen3", "max_position_embeddings": 40960, "seq_length": 8192.5}, 8192),   # a float key is read
    ({**_LLAMA, "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e4}}, 16384),   # scaled
    ({**_LLAMA, "max_position_embeddings": 131072, "rope_scaling": {"type": "llama3", "factor": 8.0, "low_freq_factor":
                                                                     1.0, "high_freq_factor": 4.0}}, 131072),
    ({**_LLAMA, "rope_scaling": {"type": "linear", "factor": 2.0}}, 8192),   # a legacy type otherwise scales
    ({**_LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, 4096),   # original filled by transformers
    ({**_LLAMA, "rope_scaling": {"rope_type": "longrope", "factor": 4.0, "short_factor": [1.0] * 32,
                                 "long_factor": [1.0] * 32}}, 4096),
    ({"model_type": "llama"}, 2048),   # no length key: get_context_length's default
]


@pytest.mark.parametrize("config, length", SGLANG_SAYS)
def test_sglangs_context_length_is_one_reading(config, length):
    from eagle3lab.engines.flags.sglang import derived_context_length

    assert cr.context_length("sglang", cr.TARGET, config) == cr.context_length("sglang", cr.DRAFT, config) == length
    assert derived_context_length(config) == length   # flags reads the same row
    assert derived_context_length(None) is None and cr.context_length("sglang", cr.TARGET, {}) is None


def test_the_window_rule_has_one_home_that_dates_and_pr_marks_place():
    """SGLang's draft window: one rule per change (profiles.WINDOW_ROWS, PR #24664: opened 2026-05-08, on main by
    2026-05-16), read by resolve_context and by the profiles (draft_checks' DRAFT_WINDOW) alike: a build dated
    before the PR was opened, or marked pre-#24664, has no flag; one dated after 0.5.12's build has it; one dated in
    between behaves as the newest, with the one warning."""
    from eagle3lab.engines.profiles import WINDOW_ROWS, for_build

    assert [r for r in ROWS if r.kind == WINDOW] == list(WINDOW_ROWS)
    for build, window in (("2026-05-01", None), ("pre-#24664", None), ("0.5.11", None), ("2026-05-20", 65),
                          ("post-#24664", 65), ("0.5.12", 65), ("2026-05-10", 65)):
        rule = resolve_context("sglang", WINDOWED, TARGET_CFG, build, launch_window=64)
        assert rule.window == window, build
        assert for_build("sglang", build).draft_window == (BY_FLAG if window else NO_WINDOW), build
        unplaced = build == "2026-05-10"
        assert ("CONTEXT_VERSION_UNPLACED" in rule.codes()) == unplaced, build
        assert ("cannot be placed relative to SGLang PR #24664" in for_build("sglang", build).draft_window_how) == \
            unplaced, build
