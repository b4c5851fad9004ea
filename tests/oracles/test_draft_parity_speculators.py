"""Our draft arithmetic against speculators' own Eagle3DraftModel (speculators 0.9.0, the engine env).

Our checkpoints (tiny random drafts of every variant and the bundled drafts, written by our save_draft in
the speculators format) are loaded by ``Eagle3DraftModel.from_pretrained`` and run through its own TTT
forward; random Eagle3DraftModels written by its own ``save_pretrained`` are loaded by our load_draft.
Logits, pre-norm outputs and fed states agree at 1e-5 in fp32 at step 0 and at the recurrent steps.
The same holds for Qwen3 drafts (--draft-arch qwen3, per-head q/k norms) both ways, and for every RoPE type
transformers' rotary class builds from the layer config (linear, dynamic, llama3, yarn with and without
mscale / mscale_all_dim / betas / truncate, longrope, proportional); mrope it cannot build (asserted).
One engine-env subprocess runs every case (``engine_scripts/speculators_draft.py``).
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from draft_parity import (
    ROPES,
    STEPS,
    TINY,
    assert_steps_match,
    captured_features,
    engine_rows,
    max_difference,
    our_steps,
    random_features,
    rope_of,
    run_script,
    steps_of,
    tiny_draft,
    tiny_verifier,
    with_plain_rope,
)
from helpers.paths import engines_python

from eagle3lab import bundled
from eagle3lab.models.checkpoint import convert_draft, load_draft, save_draft
from eagle3lab.models.target import load_target

pytestmark = pytest.mark.usefixtures("single_thread")

# our variants: name -> tiny_draft keywords (GQA and a draft vocabulary unless said otherwise)
OURS = {
    "plain": {},
    "norm_before_residual": {"norm_before_residual": True},
    "norm_before_fc": {"norm_before_fc": True},
    "fc_norm": {"fc_norm": True},
    "norm_output": {"norm_output": True},
    "eagle3.1": {"fc_norm": True, "norm_output": True, "norm_before_residual": True},
    "2_layers": {"layers": 2, "norm_before_residual": True},
    "3_layers": {"layers": 3, "norm_output": True, "norm_before_fc": True},
    "4_aux": {"aux_ids": (1, 3, 5, 7)},
    "mha_target_vocab": {"kv_heads": 4, "draft_vocab": None},
}
# Qwen3 drafts (--draft-arch qwen3: Qwen3DecoderEagle3FirstLayer, then Qwen3DecoderLayer; since v0.4.0, PR #291)
QWEN3 = {
    "qwen3": {"attention": "qwen3"},
    "qwen3_2_layers": {"attention": "qwen3", "layers": 2, "norm_before_residual": True, "norm_output": True},
    "qwen3_yarn": {"attention": "qwen3", "rope": "yarn_deepseek"},
}
# speculators builds the rotary class of the layer config (core.py Eagle3DraftModel.__init__ "ROTARY EMBEDDINGS":
# transformers' LlamaRotaryEmbedding / Qwen3RotaryEmbedding), so every type transformers has; mrope it cannot
ROPED = {f"rope_{name}": {"rope": name} for name in ROPES if name != "mrope"}
# random Eagle3DraftModels built and saved by speculators itself: name -> (flags, layers, layer, rope)
THEIRS = {
    "theirs_plain": ({}, 1, "llama", None),
    "theirs_norm_before_residual": ({"norm_before_residual": True}, 1, "llama", None),
    "theirs_eagle3.1": ({"fc_norm": True, "norm_output": True}, 1, "llama", None),
    "theirs_norm_before_fc_2_layers": ({"norm_before_fc": True}, 2, "llama", None),
    "theirs_qwen3": ({}, 1, "qwen3", None),
    "theirs_qwen3_2_layers": ({"norm_before_residual": True, "norm_output": True}, 2, "qwen3", None),
    "theirs_qwen3_yarn": ({}, 1, "qwen3", "yarn_mscale_ratio"),
    "theirs_llama3": ({}, 1, "llama", "llama3"),
    "theirs_dynamic": ({}, 1, "llama", "dynamic"),
    # a Qwen2.5-VL verifier's mrope as its training CLI writes it (train/cli.py create_transformer_layer_config
    # drops the legacy "type": rope_type default with mrope_section): transformers builds plain RoPE
    "theirs_mrope_as_its_cli_writes": ({}, 1, "llama", "mrope"),
}
BUNDLED = {"draft-healthy": "bundled", "draft-case": "bundled", "smollm2-draft-healthy": "smollm2",
           "smollm2-draft-case": "smollm2", "smollm2-draft-chat": "smollm2"}
# never saved (core.py Eagle3DraftModel._keys_to_ignore_on_save), filled from the verifier by load_verifier_weights
FROM_VERIFIER = {"verifier_lm_head.weight", "verifier_norm.weight"}

_spec = importlib.util.spec_from_file_location("test_draft_reference", bundled.ROOT / "tests" / "models" /
                                               "test_draft.py")
_test_draft = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_test_draft)
reference = _test_draft.reference   # the hand-written reference the draft tests compare against


def _their_rope(rope: str | None) -> tuple[dict | None, int]:
    """(rope_parameters for their layer config, max_position_embeddings)."""
    scaling, max_positions, theta = rope_of(rope)
    if scaling is None:
        return None, max_positions
    params = {k: v for k, v in scaling.items() if k != "type"} | {"rope_theta": theta}
    params["rope_type"] = "default" if rope == "mrope" else scaling.get("rope_type", scaling.get("type"))
    return params, max_positions


def _text() -> str:
    return "\n".join(json.loads(line)["text"] for line in (bundled.PROMPTS / "prompts.jsonl").read_text().splitlines())


@pytest.fixture(scope="module")
def run(tmp_path_factory, real_target):
    """Every case saved, run by speculators in one subprocess, and ours computed: a dict of results."""
    engines_python()   # first: without the engine env nothing below is worth building (skip, or fail in CI)
    root = tmp_path_factory.mktemp("speculators")
    verifier = tiny_verifier(root / "verifier")
    cases, features, ours, drafts = [], {}, {}, {}

    def add(name, folder, ids, aux, our_draft, **extra):
        cases.append({"name": name, "kind": "load", "checkpoint": str(folder), "ttt_steps": STEPS, **extra})
        features.update({f"{name}/{k}": v for k, v in engine_rows(ids, aux).items()})
        if our_draft is not None:
            ours[name] = our_steps(our_draft, ids, aux)

    for i, (name, kw) in enumerate({**OURS, **QWEN3, **ROPED, "rope_mrope": {"rope": "mrope"}}.items()):
        draft = tiny_draft(seed=10 + i, **kw)
        draft.config.extra["verifier"] = str(verifier)   # speculators loads its verifier on from_pretrained
        save_draft(draft, root / name, "speculators")
        ids, aux = random_features(100 + i, TINY["vocab_size"], draft.config.fc_width)
        loaded = load_draft(root / name, target=verifier, device="cpu")
        drafts[name] = (loaded, ids, aux)
        add(name, root / name, ids, aux, loaded)
        if "rope" in kw:
            ours[f"{name}@plain"] = our_steps(with_plain_rope(loaded), ids, aux)
    # speculators' own positions (1 + arange, core.py forward): RoPE is relative, the numbers do not move
    draft, ids, aux = drafts["eagle3.1"]
    add("eagle3.1@default_positions", root / "eagle3.1", ids, aux, None, positions="default")
    ours["eagle3.1@default_positions"] = ours["eagle3.1"]
    # not loadable there: fc of width num_aux x target_hidden_size, and a checkpoint without its verifier
    wide = tiny_draft(seed=30, target_hidden=24)
    wide.config.extra["verifier"] = str(verifier)
    save_draft(wide, root / "target_hidden_24", "speculators")
    add("target_hidden_24", root / "target_hidden_24", *random_features(31, 50, 72), None)
    written = save_draft(tiny_draft(seed=32), root / "no_verifier", "speculators")
    assert "SPECULATORS_NO_VERIFIER" in [w.code for w in written.warnings]
    add("no_verifier", root / "no_verifier", *random_features(33, 50, 48), None)

    targets = {"bundled": load_target(bundled.TARGET, device="cpu"), "smollm2": real_target}
    for name, track in BUNDLED.items():   # shipped in the SGLang layout without an embedding; converted here
        target = targets[track]
        written = convert_draft(bundled.MODELS / name, root / name, "speculators", target=target.path)
        converted = load_draft(root / name, target=target, device="cpu")
        assert written.embedding_written and "SPECULATORS_NO_EMBEDDING" not in [w.code for w in written.warnings]
        assert converted.aux_resid == load_draft(bundled.MODELS / name, target=target).aux_resid   # same points
        ids, aux = captured_features(target, converted, _text())
        add(name, root / name, ids, aux, converted)
    # what speculators does with a checkpoint that has no embedding (ours wrote one until this was found)
    healthy = load_draft(bundled.DRAFT_HEALTHY, target=targets["bundled"])
    healthy.config.extra["verifier"] = str(targets["bundled"].path)
    written = save_draft(healthy, root / "no_embedding", "speculators", include_embedding=False)
    assert "SPECULATORS_NO_EMBEDDING" in [w.code for w in written.warnings]
    cases.insert(0, {"name": "no_embedding", "kind": "load", "checkpoint": str(root / "no_embedding"),
                     "ttt_steps": 1, "verifier": str(targets["bundled"].path)})
    features.update({f"no_embedding/{k}": v for k, v in engine_rows(*random_features(5, 4096, 576)).items()})

    for i, (name, (flags, layers, layer, rope)) in enumerate(THEIRS.items()):
        rope_parameters, max_positions = _their_rope(rope)
        geometry = {**TINY, "num_hidden_layers": layers, "max_position_embeddings": max_positions,
                    **({"rope_parameters": rope_parameters} if rope_parameters else {})}
        cases.append({"name": name, "kind": "theirs", "save_to": str(root / name), "verifier": str(verifier),
                      "seed": 40 + i, "ttt_steps": STEPS, "geometry": geometry, "flags": flags,
                      "aux_ids": [1, 3, 5], "draft_vocab": 20, "layer": layer})
        ids, aux = random_features(140 + i, TINY["vocab_size"], 48)
        features.update({f"{name}/{k}": v for k, v in engine_rows(ids, aux).items()})
        drafts[name] = (None, ids, aux)

    result, tensors = run_script("speculators_draft.py", cases, features, root / "run")
    for name in THEIRS:   # their checkpoints, in ours
        _, ids, aux = drafts[name]
        drafts[name] = (load_draft(root / name, target=verifier, device="cpu"), ids, aux)
        ours[name] = our_steps(drafts[name][0], ids, aux)
    return {"result": result, "tensors": tensors, "ours": ours, "drafts": drafts}


def _case(run, name) -> dict:
    rec = run["result"]["cases"][name]
    assert "error" not in rec, rec.get("traceback", rec.get("error"))
    return rec


@pytest.mark.parametrize("name", [*OURS, *QWEN3, *ROPED, *BUNDLED])
def test_our_checkpoints_load_in_speculators_without_missing_or_unexpected_keys(run, name):
    rec = _case(run, name)
    assert rec["unexpected"] == [] and set(rec["missing"]) == FROM_VERIFIER
    assert rec["changed"] == [] and rec["nan"] == []           # every saved value kept, nothing left unset
    assert rec["attn_implementation"] == "simple_flex_attention"   # its training default, not a test path


@pytest.mark.parametrize("name", [*OURS, "eagle3.1@default_positions", *QWEN3, *ROPED, *BUNDLED])
def test_speculators_forward_matches_ours_at_step_0_and_the_recurrent_steps(run, name):
    _case(run, name)
    theirs = steps_of(run["tensors"], name)
    assert sorted({k.split("/")[0] for k in theirs}) == [str(s) for s in range(STEPS)]
    assert_steps_match(run["ours"][name], theirs)


@pytest.mark.parametrize("name", list(THEIRS))
def test_their_checkpoints_load_in_ours_with_the_same_outputs(run, name):
    rec = _case(run, name)
    assert rec["unexpected"] == [] and set(rec["missing"]) == FROM_VERIFIER
    draft = run["drafts"][name][0]
    flags, layers, layer, rope = THEIRS[name]
    assert draft.load_report.format == "speculators" and draft.config.num_hidden_layers == layers
    for flag in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
        assert getattr(draft.config, flag) == flags.get(flag, False), flag   # every flag written explicitly
    assert draft.config.attention == layer and draft.settings.qk_norm == (layer == "qwen3")
    assert rec["layer_classes"][0] == f"{layer.capitalize()}DecoderEagle3FirstLayer"
    assert draft.rope.kind == rec["rotary"]["rope_type"]   # the RoPE type it built, read from its rope_parameters
    assert draft.rope.attention_scaling == pytest.approx(rec["rotary"]["attention_scaling"], rel=1e-12)
    assert_steps_match(run["ours"][name], steps_of(run["tensors"], name))


@pytest.mark.parametrize("name", list(QWEN3))
def test_qwen3_drafts_run_in_speculators_qwen3_layers_with_their_qk_norms(run, name):
    """Our qwen3 layer model_type is built by speculators as Qwen3DecoderEagle3FirstLayer (model_definitions.py),
    later layers as transformers' Qwen3DecoderLayer, RoPE by Qwen3RotaryEmbedding (base_components.py); without
    the per-head q/k norms (as SGLang's llama_eagle3.py would drop them) the numbers leave speculators' own."""
    rec = _case(run, name)
    layers = QWEN3[name].get("layers", 1)
    assert rec["layer_classes"] == ["Qwen3DecoderEagle3FirstLayer"] + ["Qwen3DecoderLayer"] * (layers - 1)
    assert rec["rotary"]["class"] == "Qwen3RotaryEmbedding"
    draft, ids, aux = run["drafts"][name]
    dropped = our_steps(draft.rewired(qk_norm=False), ids, aux)
    assert max_difference(dropped, steps_of(run["tensors"], name)) > 1e-2


@pytest.mark.parametrize("name", list(ROPED))
def test_speculators_builds_each_rope_type_as_transformers_does_and_it_matters(run, name):
    """The rotary class speculators builds reads the type and the cos/sin scale from the config we wrote; ours
    computes the same (transformers' ROPE_INIT_FUNCTIONS), and the same weights with plain RoPE do not agree
    (T = 128 rows past an original context of 16-64)."""
    rec = _case(run, name)
    scaling, *_ = ROPES[name.removeprefix("rope_")]
    assert rec["rotary"]["class"] == "LlamaRotaryEmbedding"
    assert rec["rotary"]["rope_type"] == scaling.get("rope_type", scaling.get("type"))
    draft = run["drafts"][name][0]
    assert draft.rope.kind == rec["rotary"]["rope_type"]
    assert draft.rope.attention_scaling == pytest.approx(rec["rotary"]["attention_scaling"], rel=1e-12)
    assert max_difference(run["ours"][f"{name}@plain"], steps_of(run["tensors"], name)) > 1e-3


def test_speculators_cannot_build_mrope_for_a_llama_draft(run):
    """A legacy ``type: mrope`` layer config (as Qwen2.5-VL writes it, and as our save_draft keeps it) fails in
    Eagle3DraftModel.__init__: transformers 5.19's LlamaRotaryEmbedding looks the type up in ROPE_INIT_FUNCTIONS,
    which has no mrope (KeyError; speculators 0.9.0 core.py "ROTARY EMBEDDINGS"). Its own training CLI writes
    such a verifier's RoPE as rope_type default with mrope_section (train/cli.py create_transformer_layer_config,
    the ``theirs_mrope_as_its_cli_writes`` case): plain RoPE. Our speculators profile shows plain RoPE and says
    why; vLLM serves it as mrope."""
    rec = run["result"]["cases"]["rope_mrope"]
    assert rec["error"] == "KeyError: 'mrope'", rec.get("error")
    assert any(f.startswith("transformers/models/llama/modeling_llama.py:") and f.endswith(" __init__")
               for f in rec["frames"]), rec["frames"]
    assert any(f.startswith("speculators/models/eagle3/core.py:") for f in rec["frames"]), rec["frames"]
    draft = run["drafts"]["rope_mrope"][0]
    # speculators cannot have trained it: load_draft runs it as vLLM, the format's server, and says why
    assert draft.profile.name == "vllm" and draft.rope.kind == "mrope"
    assert any(w.code == "PROFILE_PASSED_OVER" and "KeyError" in w.text for w in draft.load_report.warnings), \
        draft.load_report.warnings
    as_speculators = draft.under("speculators")
    assert as_speculators.rope.kind == "default"
    assert "does not apply rope_type 'mrope'" in as_speculators.settings.decisions["rope_scaling"].how
    theirs = run["drafts"]["theirs_mrope_as_its_cli_writes"][0]
    assert theirs.rope.kind == "default" and run["result"]["cases"]["theirs_mrope_as_its_cli_writes"]["rotary"][
        "rope_type"] == "default"


@pytest.mark.parametrize("name", [n for n in OURS if OURS[n].get("layers", 1) <= 2])
def test_the_draft_tests_reference_equals_speculators_at_step_0(run, name):
    """``reference()`` in tests/models/test_draft.py, on the same weights and rows, is speculators' step 0."""
    draft, ids, aux = run["drafts"][name]
    c, rows = draft.config, 32   # causal: the first rows alone give the same values (the reference is slow)
    inv_freq = 1.0 / c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim)
    logits, hidden = reference(draft.state_dict(), eps=c.rms_norm_eps, heads=c.num_attention_heads,
                               kv_heads=c.num_key_value_heads, inv_freq=inv_freq, input_ids=ids[:, 1:rows + 1],
                               aux=aux[:, :rows], norm_before_residual=c.norm_before_residual,
                               norm_before_fc=c.norm_before_fc, fc_norm=c.fc_norm, recycle_postnorm=c.norm_output)
    theirs = steps_of(run["tensors"], name)
    torch.testing.assert_close(theirs["0/logits"][:, :rows].double(), logits, atol=1e-5, rtol=1e-5)
    recycled = theirs["1/fed"][:, :rows].double()    # what speculators feeds step 1 = the reference's state
    torch.testing.assert_close(recycled, hidden, atol=1e-5, rtol=1e-5)


def test_each_flag_changes_speculators_outputs(run):
    """The parity above cannot pass by accident: each flag moves speculators' own logits."""
    plain = steps_of(run["tensors"], "plain")
    for name in ("norm_before_residual", "norm_before_fc", "fc_norm", "norm_output"):
        other = steps_of(run["tensors"], name)
        assert max_difference(plain, other) > 1e-2, name


def test_speculators_sizes_fc_from_the_draft_width_and_refuses_a_wider_target(run):
    """speculators 0.9.0 sizes fc as num_aux x transformer_layer_config.hidden_size (models/eagle3/core.py,
    Eagle3DraftModel.__init__ "FC LAYER"): its target_hidden_size field is not read, so a draft for a wider
    target does not load there (vLLM reads target_hidden_size)."""
    rec = run["result"]["cases"]["target_hidden_24"]
    assert "ignore_mismatched_sizes" in rec["error"], rec["error"]
    assert rec["expected_shapes"]["fc.weight"] == [16, 3 * 16]   # the file's fc is [16, 3 * 24]


def test_speculators_cannot_load_a_checkpoint_without_its_verifier(run):
    """Eagle3DraftModel.from_pretrained always calls load_verifier_weights, which reads the verifier's config
    (core.py: AutoConfig.from_pretrained(verifier.name_or_path)); name_or_path null fails there. Our save_draft
    warns (above) and convert_draft writes the target it was given."""
    rec = run["result"]["cases"]["no_verifier"]
    assert "AutoConfig.from_pretrained(verifier_config.name_or_path)" in rec["traceback"], rec["traceback"]


def test_speculators_leaves_a_missing_embedding_uninitialised(run):
    """speculators 0.9.0 copies the verifier's embedding only where its own is NaN (model.py
    _load_verifier_weights), a sentinel set in _init_vocab that transformers 5.19's from_pretrained does not
    keep: a checkpoint without embed_tokens.weight runs on whatever memory held. So our save_draft writes
    the embedding in the speculators format (the bundled conversions above load with the target's)."""
    rec = _case(run, "no_embedding")
    assert rec["embedding_equals_verifier"] is False
    assert all(run["result"]["cases"][name]["embedding_equals_verifier"] for name in BUNDLED)

