"""Our draft arithmetic against SpecForge's own LlamaForCausalLMEagle3 and TTT loop (SpecForge 0.2.0).

Our checkpoints (tiny random drafts of every variant SpecForge can hold, and the bundled drafts, written
by our save_draft in the SGLang/SpecForge layout) are built the way SpecForge's trainer builds a draft
from a checkpoint (``build_eagle3_draft``: ``from_config`` + ``warm_start_draft_model``) and run through ``OnlineEagle3Model``'s TTT loop with both
attention backends it trains with (``sdpa``, the class default; ``flex_attention``, the 0.2.0 config
default, config/schema.py); random LlamaForCausalLMEagle3 written as its SGLang exporter writes them
are loaded by our load_draft. Our side runs the ``specforge`` profile. Logits, pre-norm outputs and
fed states agree at 1e-5 in fp32 at step 0 and at the recurrent steps. Where SpecForge cannot hold a
variant (norm_before_residual, norm_before_fc, 4 aux states, several layers, Qwen3's q/k norms) a test says so.
RoPE: every type its ``LlamaAttention._init_rope`` builds (linear, dynamic, llama3, yarn, mrope on text and on
image positions) agrees with ours; the ones it refuses (yarn without its betas or mscales, longrope,
proportional, mrope on 1-D positions) are asserted with the line that fails; where our specforge profile
disagrees with it (DISAGREE), a strict xfail says why and what to fix.
One engine-env subprocess runs every case (``engine_scripts/specforge_draft.py``).
"""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch
from draft_parity import (
    STEPS,
    TINY,
    TINY_TARGET_LAYERS,
    T,
    assert_close_scaled,
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
    vision_positions,
    with_plain_rope,
)
from helpers.paths import engines_python

from eagle3lab import bundled
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.checkpoint import load_draft, save_draft
from eagle3lab.models.target import load_target

pytestmark = pytest.mark.usefixtures("single_thread")

BACKENDS = ("sdpa", "flex_attention")
# our variants SpecForge loads: name -> tiny_draft keywords (one layer, GQA, a draft vocabulary unless said)
OURS = {
    "plain": {},
    "fc_norm": {"fc_norm": True},
    "norm_output": {"norm_output": True},
    "eagle3.1": {"fc_norm": True, "norm_output": True},
    "target_hidden_24": {"target_hidden": 24},
    "mha_target_vocab": {"kv_heads": 4, "draft_vocab": None},
    # written, and ignored or dropped by SpecForge (the tests at the end)
    "norm_before_residual": {"norm_before_residual": True},
    "norm_before_fc": {"norm_before_fc": True},
}
# RoPE variants LlamaAttention._init_rope builds (llama3_eagle.py, 0.2.0): linear and dynamic (since v0.1.0),
# mrope (PR #102), yarn (PR #224), llama3 (PR #287); mrope runs on [3, B, T] positions (text: three equal rows)
ROPED = {f"rope_{name}": name for name in ("linear", "dynamic", "llama3", "llama3_no_original", "yarn_deepseek",
                                            "yarn_kimi", "yarn_mscale_ratio", "yarn_mscale_all_dim_0", "mrope")}
# where our specforge profile (eagle3lab/engines/profiles.py) computes other numbers than SpecForge 0.2.0: name -> why
DISAGREE: dict[str, str] = {}   # none left: llama3 without its original length and yarn with mscale_all_dim 0 fixed
TEXT_MROPE = torch.arange(T).expand(3, 1, T)
# the same mrope checkpoint on other positions: name -> positions
MROPE_POSITIONS = {"rope_mrope@vision": vision_positions(), "rope_mrope@1d_positions": torch.arange(T)[None]}
# what SpecForge 0.2.0 refuses, where: name -> (error, innermost SpecForge frame)
REFUSED = {
    # beta_fast missing: passed as None (rope_get("beta_fast")) into the correction range
    "rope_yarn_no_mscale": ("TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'",
                            "specforge/modeling/draft/llama3_eagle.py:433 yarn_find_correction_dim"),
    # mscale / mscale_all_dim missing: None into yarn_get_mscale (transformers then uses 0.1 ln(factor) + 1)
    "rope_yarn_betas_no_mscale": ("TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'",
                                  "specforge/modeling/draft/llama3_eagle.py:454 yarn_get_mscale"),
    "rope_yarn_truncate_false": ("TypeError: unsupported operand type(s) for *: 'float' and 'NoneType'",
                                 "specforge/modeling/draft/llama3_eagle.py:454 yarn_get_mscale"),
    "rope_longrope": ("ValueError: Unknown RoPE scaling type longrope",
                      "specforge/modeling/draft/llama3_eagle.py:652 _init_rope"),
    "rope_proportional": ("ValueError: Unknown RoPE scaling type proportional",
                          "specforge/modeling/draft/llama3_eagle.py:652 _init_rope"),
    # LlamaMutiRotaryEmbedding.forward indexes position_ids[:, :, None, :]: an mrope draft needs the three axes
    "rope_mrope@1d_positions": ("IndexError: too many indices for tensor of dimension 2",
                                "specforge/modeling/draft/llama3_eagle.py:409 forward"),
}
# random LlamaForCausalLMEagle3 built and exported by SpecForge itself: name -> config attributes
THEIRS = {
    "theirs_plain": {},
    "theirs_fc_norm": {"fc_norm": True},
    "theirs_norm_output_true": {"norm_output": True},
    "theirs_norm_output_false": {"norm_output": False},   # SpecForge: no final norm before lm_head
    "theirs_yarn": {}, "theirs_llama3": {}, "theirs_mrope": {},
}
# their RoPE (its exporter writes rope_parameters and mirrors them to rope_scaling, apply_legacy_rope_scaling)
THEIRS_ROPE = {"theirs_yarn": "yarn_kimi", "theirs_llama3": "llama3", "theirs_mrope": "mrope"}
BUNDLED = {"draft-healthy": "bundled", "draft-case": "bundled", "smollm2-draft-healthy": "smollm2",
           "smollm2-draft-case": "smollm2", "smollm2-draft-chat": "smollm2"}

_spec = importlib.util.spec_from_file_location("test_draft_reference", bundled.ROOT / "tests" / "models" /
                                               "test_draft.py")
_test_draft = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_test_draft)
reference = _test_draft.reference   # the hand-written reference the draft tests compare against


def _text() -> str:
    return "\n".join(json.loads(line)["text"] for line in (bundled.PROMPTS / "prompts.jsonl").read_text().splitlines())


def valid_rows(step: int) -> int:
    """Rows SpecForge's flex path keeps at step k: it masks the k rows shifted past the end
    (flex_attention.py generate_eagle3_mask: seq_lengths -= lck); the sdpa path and ours compute them."""
    return T - step


@pytest.fixture(scope="module")
def run(tmp_path_factory, real_target):
    """Every case saved, run by SpecForge in one subprocess, and ours computed: a dict of results."""
    engines_python()   # first: without the engine env nothing below is worth building (skip, or fail in CI)
    root = tmp_path_factory.mktemp("specforge")
    verifier = tiny_verifier(root / "verifier")
    cases, features, ours, drafts = [], {}, {}, {}

    def add(name, folder, ids, aux, our_draft, embedding_from=None, positions=None):
        cases.append({"name": name, "kind": "load", "checkpoint": str(folder), "ttt_steps": STEPS,
                      "backends": list(BACKENDS), "embedding_from": embedding_from})
        features.update({f"{name}/{k}": v for k, v in engine_rows(ids, aux, positions).items()})
        if our_draft is not None:
            ours[name] = our_steps(our_draft, ids, aux, positions=positions)

    for i, (name, kw) in enumerate(OURS.items()):
        draft = tiny_draft(seed=10 + i, **kw)
        save_draft(draft, root / name, "sglang", num_target_layers=TINY_TARGET_LAYERS)
        ids, aux = random_features(100 + i, TINY["vocab_size"], draft.config.fc_width)
        loaded = load_draft(root / name, device="cpu", num_target_layers=TINY_TARGET_LAYERS)
        drafts[name] = (draft, ids, aux, loaded)
        add(name, root / name, ids, aux, loaded)
    rope_names = {**ROPED, **{name: name.removeprefix("rope_") for name in REFUSED if "@" not in name}}
    for i, (name, rope) in enumerate(rope_names.items()):
        draft = tiny_draft(seed=50 + i, rope=rope)
        save_draft(draft, root / name, "sglang", num_target_layers=TINY_TARGET_LAYERS)
        ids, aux = random_features(150 + i, TINY["vocab_size"], draft.config.fc_width)
        positions = TEXT_MROPE if rope == "mrope" else None
        loaded = load_draft(root / name, device="cpu", num_target_layers=TINY_TARGET_LAYERS)
        drafts[name] = (draft, ids, aux, loaded)
        add(name, root / name, ids, aux, loaded, positions=positions)
        ours[f"{name}@plain"] = our_steps(with_plain_rope(loaded), ids, aux)
    _, ids, aux, mrope = drafts["rope_mrope"]
    for name, positions in MROPE_POSITIONS.items():   # the same checkpoint and rows on other positions
        add(name, root / "rope_mrope", ids, aux, mrope, positions=positions)
    # a Qwen3 draft written in this layout: SpecForge builds Llama attention (the q/k norms have no module)
    qwen3 = tiny_draft(seed=60, attention="qwen3")
    save_draft(qwen3, root / "qwen3", "sglang", num_target_layers=TINY_TARGET_LAYERS)
    ids, aux = random_features(160, TINY["vocab_size"], 48)
    # SpecForge runs it (as Llama attention, the norms dropped); on its own, load_draft picks a profile that keeps them
    loaded = load_draft(root / "qwen3", device="cpu", num_target_layers=TINY_TARGET_LAYERS, profile="specforge")
    drafts["qwen3"] = (qwen3, ids, aux, loaded)
    add("qwen3", root / "qwen3", ids, aux, loaded)
    # refused there: 4 aux states (fc is 3 x target_hidden_size)
    save_draft(tiny_draft(seed=30, aux_ids=(1, 3, 5, 7)), root / "4_aux", "sglang", num_target_layers=TINY_TARGET_LAYERS)
    add("4_aux", root / "4_aux", *random_features(31, 50, 64), None)

    targets = {"bundled": load_target(bundled.TARGET, device="cpu"), "smollm2": real_target}
    for name, track in BUNDLED.items():   # as shipped: written by our save_draft in this layout
        target = targets[track]
        draft = load_draft(bundled.MODELS / name, target=target, device="cpu")
        ids, aux = captured_features(target, draft, _text())
        drafts[name] = (draft, ids, aux, draft)
        add(name, bundled.MODELS / name, ids, aux, draft, embedding_from=str(target.path))

    their_positions = {"theirs_mrope": vision_positions()}
    for i, (name, extra) in enumerate(THEIRS.items()):
        scaling, max_positions, theta = rope_of(THEIRS_ROPE.get(name))
        geometry = {**TINY, "num_hidden_layers": 1,   # SpecForge builds one midlayer whatever it says
                    "max_position_embeddings": max_positions, "rope_theta": theta,
                    **({"rope_scaling": scaling} if scaling else {})}
        cases.append({"name": name, "kind": "theirs", "save_to": str(root / name), "embedding_from": str(verifier),
                      "seed": 40 + i, "ttt_steps": STEPS, "backends": list(BACKENDS), "geometry": geometry,
                      "extra": {"draft_vocab_size": 20, **extra, "eagle_config": {
                          "use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": [1, 3, 5]}}})
        ids, aux = random_features(140 + i, TINY["vocab_size"], 48)
        features.update({f"{name}/{k}": v for k, v in engine_rows(ids, aux, their_positions.get(name)).items()})
        drafts[name] = (None, ids, aux, None)

    result, tensors = run_script("specforge_draft.py", cases, features, root / "run", env={"TORCHDYNAMO_DISABLE": "1"})
    for name in THEIRS:   # their checkpoints, in ours (the embedding from the same target as theirs)
        _, ids, aux, _ = drafts[name]
        loaded = load_draft(root / name, target=verifier, device="cpu")
        drafts[name] = (None, ids, aux, loaded)
        ours[name] = our_steps(loaded, ids, aux, positions=their_positions.get(name))
    return {"result": result, "tensors": tensors, "ours": ours, "drafts": drafts}


def _case(run, name) -> dict:
    rec = run["result"]["cases"][name]
    assert "error" not in rec, rec.get("traceback", rec.get("error"))
    return rec


@pytest.mark.parametrize("name", [*(n for n in OURS if n != "norm_before_fc"), *ROPED, *BUNDLED])
def test_our_checkpoints_load_in_specforge_without_missing_or_unexpected_keys(run, name):
    rec = _case(run, name)
    embedding = {"embed_tokens.weight"} if name in BUNDLED else set()   # shipped without: the target's
    assert rec["unexpected"] == [] and set(rec["missing"]) == embedding
    assert rec["changed"] == []                                          # every saved value kept
    fc_norm = ["fc_norm"] if OURS.get(name, {}).get("fc_norm") else []
    assert rec["layers"] == ["d2t", "embed_tokens", "fc", *fc_norm, "lm_head", "midlayer", "norm", "t2d"]


def _known(names, disagree=DISAGREE):
    """``names`` with the ``disagree`` ones marked: a strict xfail on a failed assertion, so that a fix of the
    profile makes them fail here (then remove them from DISAGREE)."""
    return [pytest.param(n, marks=pytest.mark.xfail(reason=disagree[n], strict=True, raises=AssertionError))
            if n in disagree else n for n in names]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", _known([*OURS, *ROPED, "rope_mrope@vision", "qwen3", *BUNDLED]))
def test_specforge_ttt_loop_matches_ours_at_step_0_and_the_recurrent_steps(run, name, backend):
    _case(run, name)
    theirs = steps_of(run["tensors"], f"{name}/{backend}")
    assert sorted({k.split("/")[0] for k in theirs}) == [str(s) for s in range(STEPS)]
    assert_steps_match(run["ours"][name], theirs, valid_rows if backend == "flex_attention" else None)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(THEIRS))
def test_their_checkpoints_load_in_ours_with_the_same_outputs(run, name, backend):
    rec = _case(run, name)
    assert rec["unexpected"] == [] and rec["missing"] == ["embed_tokens.weight"]   # the exporter drops it
    draft = run["drafts"][name][3]
    assert draft.load_report.format == "sglang" and draft.load_report.embedding == "target"
    kind = THEIRS_ROPE.get(name, "default").split("_")[0]
    assert draft.rope.kind == kind and rec["rotary"] == ROTARY_CLASS.get(kind, "LlamaRotaryEmbedding")
    assert_steps_match(run["ours"][name], steps_of(run["tensors"], f"{name}/{backend}"),
                       valid_rows if backend == "flex_attention" else None)


ROTARY_CLASS = {"linear": "LlamaLinearScalingRotaryEmbedding", "dynamic": "LlamaDynamicNTKScalingRotaryEmbedding",
                "llama3": "LlamaRotaryEmbedding", "yarn": "LlamaYarnRotaryEmbedding", "mrope": "LlamaMutiRotaryEmbedding"}


@pytest.mark.parametrize("name", _known(ROPED))
def test_specforge_builds_each_rope_type_and_it_matters(run, name):
    """_init_rope builds its own class per type (llama3: LlamaRotaryEmbedding with the Llama-3 frequency
    scaling, since PR #287); ours computes the same with transformers' functions (the parity above), and the
    same weights with plain RoPE do not agree (T = 128 rows past an original context of 16-32)."""
    rec = _case(run, name)
    kind = ROPED[name].split("_")[0]
    assert rec["rotary"] == ROTARY_CLASS[kind]
    draft = run["drafts"][name][3]
    assert draft.profile.name == "specforge" and draft.rope.kind == kind
    assert draft.settings.decisions["rope_scaling"].value == kind
    plain = run["ours"][f"{name}@plain"]
    if kind == "mrope":   # text positions: the three axes are equal, so mrope is plain RoPE (the vision case below)
        assert max_difference(plain, steps_of(run["tensors"], f"{name}/sdpa")) < 1e-4
    else:
        assert max_difference(plain, steps_of(run["tensors"], f"{name}/sdpa")) > 1e-3


def test_specforge_turns_each_mrope_section_with_its_own_axis(run):
    """On Qwen2-VL image positions (three different axes) SpecForge's apply_multimodal_rotary_pos_emb and ours
    agree (the parity above for rope_mrope@vision) and differ from the text positions' numbers."""
    theirs = steps_of(run["tensors"], "rope_mrope@vision/sdpa")
    assert max_difference(run["ours"]["rope_mrope"], theirs) > 1e-3   # the same rows on text positions


@pytest.mark.parametrize("name", list(REFUSED))
def test_specforge_refuses_these_ropes(run, name):
    """SpecForge 0.2.0 cannot build or run these (llama3_eagle.py): yarn reads beta_fast, beta_slow, mscale and
    mscale_all_dim with ``rope_get(key)`` (None when missing) and computes with them; longrope and proportional
    are no type of _init_rope; its mrope rotary needs [3, B, T] positions. transformers (so speculators) builds
    every yarn and longrope case here (test_draft_parity_speculators.py)."""
    rec = run["result"]["cases"][name]
    error, frame = REFUSED[name]
    assert rec.get("error") == error, rec.get("traceback", rec)
    assert [f for f in rec["frames"] if f.startswith("specforge/")][-1] == frame, rec["frames"]


def test_specforge_builds_llama_attention_for_a_qwen3_draft_and_drops_the_qk_norms(run):
    """SpecForge 0.2.0's only EAGLE-3 draft is llama3_eagle.py: a Qwen3 draft written in its layout loads with
    ``midlayer.self_attn.q_norm/k_norm.weight`` left out (unexpected, no module) and runs without them, as our
    specforge profile does (the parity above); as trained, with the norms, it does not."""
    rec = _case(run, "qwen3")
    assert rec["unexpected"] == ["midlayer.self_attn.k_norm.weight", "midlayer.self_attn.q_norm.weight"]
    assert rec["missing"] == []
    draft, ids, aux, loaded = run["drafts"]["qwen3"]
    assert loaded.config.attention == "qwen3" and loaded.settings.qk_norm is False
    as_trained = our_steps(draft, ids, aux)    # the speculators profile runs the q/k norms
    assert max_difference(as_trained, steps_of(run["tensors"], "qwen3/sdpa")) > 1e-2


@pytest.mark.parametrize("name", ["plain", "fc_norm", "norm_output", "target_hidden_24", "mha_target_vocab"])
def test_the_draft_tests_reference_equals_specforge_at_step_0(run, name):
    """``reference()`` in tests/models/test_draft.py, on the same weights and rows, is SpecForge's step 0."""
    _, ids, aux, draft = run["drafts"][name]
    c, rows = draft.config, 32   # causal: the first rows alone give the same values (the reference is slow)
    inv_freq = 1.0 / c.rope_theta ** (torch.arange(0, c.head_dim, 2, dtype=torch.float64) / c.head_dim)
    logits, hidden = reference(draft.state_dict(), eps=c.rms_norm_eps, heads=c.num_attention_heads,
                               kv_heads=c.num_key_value_heads, inv_freq=inv_freq, input_ids=ids[:, 1:rows + 1],
                               aux=aux[:, :rows], fc_norm=bool(c.fc_norm))
    theirs = steps_of(run["tensors"], f"{name}/sdpa")
    assert_close_scaled(theirs["0/logits"][:, :rows].double(), logits, msg="logits")
    assert_close_scaled(theirs["1/fed"][:, :rows].double(), hidden, msg="recycled")   # SpecForge feeds pre-norm


def test_specforge_ignores_norm_before_residual(run):
    """SpecForge 0.2.0 adds the attention output to the raw fc output (llama3_eagle.py LlamaDecoderLayer.forward:
    ``residual = hidden_states`` before ``hidden_norm``): a draft trained with the normed residual (speculators)
    runs differently there. Ours under the specforge profile agrees with it (above); as trained, it does not."""
    draft, ids, aux, _ = run["drafts"]["norm_before_residual"]
    as_trained = our_steps(draft, ids, aux)      # the speculators profile honours the flag
    assert max_difference(as_trained, steps_of(run["tensors"], "norm_before_residual/sdpa")) > 1e-2


def test_specforge_drops_the_norm_before_fc_weight(run):
    """SpecForge 0.2.0 builds no input_norm (LlamaForCausalLMEagle3.__init__ has fc_norm only): its warm start
    loads through from_pretrained, which leaves the file's ``input_norm.weight`` out without a word
    (training/model_loading.py _load_pretrained_draft_state), and the draft runs without the norm, as our
    specforge profile does (the parity above); as trained, with the norm, it does not."""
    rec = _case(run, "norm_before_fc")
    assert rec["unexpected"] == ["input_norm.weight"] and rec["missing"] == []
    draft, ids, aux, _ = run["drafts"]["norm_before_fc"]
    assert max_difference(our_steps(draft, ids, aux), steps_of(run["tensors"], "norm_before_fc/sdpa")) > 1e-2


def test_specforge_refuses_a_fourth_aux_state_and_holds_one_layer(run, tmp_path):
    """fc is ``target_hidden_size * 3`` columns and there is one ``midlayer`` (llama3_eagle.py
    LlamaForCausalLMEagle3.__init__): a 4-aux checkpoint does not load there, and our save_draft refuses a
    multi-layer draft in this layout."""
    rec = run["result"]["cases"]["4_aux"]
    assert "ignore_mismatched_sizes" in rec["error"], rec["error"]
    assert rec["expected_shapes"]["fc.weight"] == [16, 3 * 16]   # the file's fc is [16, 4 * 16]
    with pytest.raises(Eagle3LabError, match="num_hidden_layers"):
        save_draft(tiny_draft(seed=1, layers=2), tmp_path / "two", "sglang", num_target_layers=TINY_TARGET_LAYERS)


def test_norm_output_false_means_no_final_norm_in_specforge(run, tmp_path):
    """SpecForge 0.2.0 reads norm_output as "norm before lm_head" (llama3_eagle.py compute_logits; missing =
    true, ``getattr(config, "norm_output", True)``): written false, its logits are lm_head(h) of the pre-norm
    state; it recycles the pre-norm state either way. Our specforge profile computes the same (the parity
    above; before this was found ours always normed lm_head's input), and converting such a draft keeps it
    (written false explicitly in its own layout) or says that the other engines norm it."""
    on = steps_of(run["tensors"], "theirs_norm_output_true/sdpa")
    off = steps_of(run["tensors"], "theirs_norm_output_false/sdpa")
    draft = run["drafts"]["theirs_norm_output_false"][3]
    torch.testing.assert_close(off["0/logits"], draft.lm_head(off["0/prenorm"]), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(off["1/fed"], off["0/prenorm"])
    torch.testing.assert_close(on["1/fed"], on["0/prenorm"])
    assert draft.settings.final_norm is False and run["drafts"]["theirs_norm_output_true"][3].settings.final_norm
    written = save_draft(draft, tmp_path / "sglang", "sglang")
    assert json.loads((tmp_path / "sglang" / "config.json").read_text())["norm_output"] is False
    assert "SERVED_FINAL_NORM_DIFFERS" in [w.code for w in written.warnings]   # SGLang norms it
    assert load_draft(tmp_path / "sglang", require_embedding=False).settings.final_norm is False   # read back
