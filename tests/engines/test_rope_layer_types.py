"""The RoPE reader on configs with several attention types (rope_parameters keyed by layer type, as transformers 5
saves Gemma3) and the RoPE fix on a target that writes the legacy ``type`` key. Every config is written by the test;
transformers' own config classes (the installed 5.x) are the oracle for what a config means."""

from __future__ import annotations

import pytest

from eagle3lab.engines.config_view import read_rope, read_target
from eagle3lab.engines.draft_checks import context_problem, rope_fix, rope_problem
from eagle3lab.findings import Severity

POSITIONS = 131072
FULL = {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}
SLIDING = {"rope_type": "default", "rope_theta": 10000.0}


def gemma3_text(rope_parameters=None, **extra) -> dict:
    """A Gemma3 text config as transformers 5 saves it: rope_parameters keyed by layer type, layer_types written."""
    cfg = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "num_hidden_layers": 6,
           "hidden_size": 64, "vocab_size": 256, "max_position_embeddings": POSITIONS,
           "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
           "rope_parameters": rope_parameters if rope_parameters is not None else
           {"full_attention": dict(FULL), "sliding_attention": dict(SLIDING)}}
    return {**cfg, **extra}


def draft_layer(theta: float, scaling: dict | None, positions: int = POSITIONS) -> dict:
    return {"rope_theta": theta, "rope_scaling": scaling, "max_position_embeddings": positions}


def apply(layer: dict, fix: dict) -> dict:
    return {**layer, **fix}     # prefix "": the keys are the layer's own


def hf_full_attention(raw: dict) -> dict:
    """transformers' own reading of the full-attention layers' RoPE, as one flat config our reader then reads."""
    cls = pytest.importorskip("transformers").Gemma3TextConfig
    fields = {k: v for k, v in raw.items() if k not in ("architectures", "model_type")}
    hf = cls(**fields)
    return {"rope_parameters": dict(hf.rope_parameters["full_attention"]), "max_position_embeddings": POSITIONS}


def test_a_per_layer_type_target_is_read_at_its_full_attention_entry():
    target = read_target(gemma3_text())
    assert target.rope.unclear is None
    assert target.rope.computes() == (1e6, "linear", (("factor", 8.0),))
    assert target.rope.scaling_from == "rope_parameters.full_attention"
    assert target.rope.theta_from == "rope_parameters.full_attention.rope_theta"
    assert target.rope.computes() == read_rope(hf_full_attention(gemma3_text())).computes()


@pytest.mark.parametrize("raw", [
    # transformers 4's Gemma3 keys: rope_scaling and rope_theta for the global layers, rope_local_base_freq
    gemma3_text(rope_parameters={}, rope_scaling={"rope_type": "linear", "factor": 8.0}, rope_theta=1e6,
                rope_local_base_freq=10000.0),
    # both written: a legacy rope_scaling updates the full_attention entry (Gemma3's convert_rope_params_to_dict)
    gemma3_text(rope_scaling={"type": "linear", "factor": 4.0}),
    # the entry without theta takes the top-level rope_theta (the same method's setdefault)
    gemma3_text({"full_attention": {"rope_type": "linear", "factor": 8.0}, "sliding_attention": dict(SLIDING)},
                rope_theta=5e5),
])
def test_the_reader_agrees_with_transformers_gemma3_config(raw):
    if raw["rope_parameters"] == {}:
        raw = {k: v for k, v in raw.items() if k != "rope_parameters"}
    assert read_target(raw).rope.computes() == read_rope(hf_full_attention(raw)).computes()


def test_a_draft_matching_the_full_attention_layers_raises_no_rope_finding():
    target = read_target(gemma3_text()).rope
    mine = read_rope(draft_layer(1e6, {"rope_type": "linear", "factor": 8.0}))
    assert rope_problem(mine, target, "", "draft") is None
    assert context_problem(mine, target, "", "draft") is None
    # the draft saved by transformers 5 in the same per-layer-type form reads the same
    assert rope_problem(read_rope(gemma3_text()), target, "", "draft") is None


@pytest.mark.parametrize("layer, code", [
    (draft_layer(1e6, {"rope_type": "linear", "factor": 4.0}), "ROPE_SCALING"),   # another factor
    (draft_layer(1e6, None), "ROPE_SCALING"),                                    # scaling dropped
    (draft_layer(10000.0, None), "ROPE_SCALING"),                                # the sliding layers' RoPE
    (draft_layer(5e5, {"rope_type": "linear", "factor": 8.0}), "ROPE_THETA"),
])
def test_a_draft_unlike_the_full_attention_layers_is_found_and_fixed(layer, code):
    target = read_target(gemma3_text()).rope
    found = rope_problem(read_rope(layer), target, "", "draft")
    assert found is not None and (found.code, found.severity) == (code, Severity.WARNING)
    assert found.config_fix["rope_parameters"] == {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}
    assert rope_problem(read_rope(apply(layer, found.config_fix)), target, "", "draft") is None


@pytest.mark.parametrize("params, extra, why", [
    ({"main": {"rope_type": "yarn", "factor": 16.0, "rope_theta": 1e4}, "compress": dict(SLIDING)}, {},
     "no full_attention RoPE entry"),
    ({"full_attention": {"rope_type": "linear", "factor": 8.0}, "sliding_attention": dict(SLIDING)}, {},
     "writes no rope_theta"),
])
def test_a_per_layer_type_rope_it_cannot_place_is_an_info_note_without_a_fix(params, extra, why):
    target = read_target(gemma3_text(params, **extra)).rope
    assert target.unclear and why in target.unclear and why in target.words()
    draft = read_rope(draft_layer(1e6, {"rope_type": "linear", "factor": 8.0}))
    note = rope_problem(draft, target, "", "draft")
    assert (note.code, note.severity, note.config_fix) == ("ROPE_NOT_COMPARED", Severity.INFO, None)
    # a short context is still found; its fix keeps the draft's own RoPE (filled), never the unread target's
    short = read_rope(draft_layer(1e6, {"rope_type": "yarn", "factor": 4.0}, positions=4096))
    fix = context_problem(short, target, "", "draft").config_fix
    assert fix["max_position_embeddings"] == POSITIONS
    assert read_rope({**fix}).computes() == short.computes()


# ---------------------------------------------------------------------------- the legacy "type" key (M5)

LEGACY_YARN = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}


def test_the_fix_for_a_legacy_type_target_carries_the_type_and_clears_its_finding():
    target = read_rope({"rope_theta": 1e6, "rope_scaling": dict(LEGACY_YARN), "max_position_embeddings": POSITIONS})
    assert target.kind == "yarn"
    layer = draft_layer(1e6, None)
    found = rope_problem(read_rope(layer), target, "", "draft")
    assert found.code == "ROPE_SCALING"
    fix = found.config_fix
    assert fix["rope_scaling"]["rope_type"] == fix["rope_scaling"]["type"] == "yarn"
    assert fix["rope_parameters"] == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768,
                                      "rope_theta": 1e6}
    fixed = apply(layer, fix)
    assert rope_problem(read_rope(fixed), target, "", "draft") is None
    # each key alone computes the target's RoPE: a reader of rope_parameters only (transformers 5 once the legacy
    # key goes) and a reader of rope_scaling only
    only_params = {"rope_parameters": fix["rope_parameters"], "max_position_embeddings": POSITIONS}
    only_legacy = {"rope_scaling": fix["rope_scaling"], "rope_theta": 1e6, "max_position_embeddings": POSITIONS}
    assert read_rope(only_params).computes() == read_rope(only_legacy).computes() == target.computes()
    # and transformers' LlamaConfig (the draft layer's class) reads yarn with the factor from either
    llama = pytest.importorskip("transformers").LlamaConfig
    for keys in ({"rope_parameters": dict(fix["rope_parameters"])}, {"rope_scaling": dict(fix["rope_scaling"]),
                                                                      "rope_theta": 1e6}):
        got = llama(max_position_embeddings=POSITIONS, **keys).rope_parameters
        assert (got["rope_type"], got["factor"], got["rope_theta"]) == ("yarn", 4.0, 1e6)


def test_the_fix_keeps_mrope_in_transformers_5_spelling():
    mrope = read_rope({"rope_theta": 1e6, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}})
    fix = rope_fix(mrope, "")
    assert fix["rope_parameters"] == {"rope_type": "default", "mrope_section": [16, 24, 24], "rope_theta": 1e6}
    assert read_rope(fix).kind == "mrope" and read_rope(fix).computes() == mrope.computes()
