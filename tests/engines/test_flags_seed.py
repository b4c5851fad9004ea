"""The seed's constants are the case's own target: Kimi-K2.5 as published (KimiK25ForConditionalGeneration around a
DeepSeek-V3 language model), trimmed to what the resolvers read, and what each SGLang build then does with it."""

from __future__ import annotations

import json

import pytest
from helpers.paths import REAL_CONFIGS

from eagle3lab.engines.flags import SEED_COMMAND, SEED_DRAFT_CONFIG, SEED_TARGET_CONFIG, resolve_flags

PUBLISHED = json.loads((REAL_CONFIGS / "moonshotai__Kimi-K2.5.json").read_text())
TEMPLATE = json.loads((REAL_CONFIGS / "sgl-project__SpecForge__pr476__kimi-k25-eagle3.json").read_text())


def _kept_as_published(trimmed: dict, published: dict, where: str = "") -> None:
    for key, value in trimmed.items():
        assert key in published, f"{where}{key} is not in the published config"
        if isinstance(value, dict):
            _kept_as_published(value, published[key], f"{where}{key}.")
        else:
            assert value == published[key], f"{where}{key}: {value!r} != {published[key]!r}"


def test_the_seed_target_is_kimi_k25_as_published_trimmed():
    _kept_as_published(SEED_TARGET_CONFIG, PUBLISHED)
    assert SEED_TARGET_CONFIG["architectures"] == ["KimiK25ForConditionalGeneration"]
    assert SEED_TARGET_CONFIG["text_config"]["architectures"] == ["DeepseekV3ForCausalLM"]
    assert "--model-path moonshotai/Kimi-K2.5 " in SEED_COMMAND


def test_the_seed_draft_is_specforges_template_but_its_context():
    _kept_as_published({k: v for k, v in SEED_DRAFT_CONFIG.items() if k != "max_position_embeddings"}, TEMPLATE)
    assert TEMPLATE["max_position_embeddings"] == 131072 and SEED_DRAFT_CONFIG["max_position_embeddings"] == 262144
    # the template's context stops SGLang at start-up on this target: the team's launch served, so not this one
    short = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, TEMPLATE, engine_version="0.5.11")
    assert "SGL_DRAFT_CONTEXT_TOO_SHORT" in [f.code for f in short.errors]
    seed = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version="0.5.11")
    assert not seed.errors and seed.effective["context_length"] == 262144


@pytest.mark.parametrize("version", ["0.5.8", "0.5.11", "2026-06-01", None])
@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_the_trimmed_config_resolves_as_the_published_one(engine, version):
    if engine == "vllm":
        command, version = ("vllm serve moonshotai/Kimi-K2.5 --tensor-parallel-size 8 --speculative-config "
                            "'{\"method\": \"eagle3\", \"model\": \"./kimi-k25-eagle3\", \"num_speculative_tokens\": 3}'",
                            {"0.5.8": "0.18.0", "0.5.11": "0.25.0", "2026-06-01": "2026-06-01"}.get(version))
    else:
        command = SEED_COMMAND
    trimmed = resolve_flags(engine, command, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version=version)
    full = resolve_flags(engine, command, PUBLISHED, SEED_DRAFT_CONFIG, engine_version=version)
    assert trimmed.effective == full.effective and trimmed.findings == full.findings


def _aux_break(version):
    res = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version=version)
    return res, [f for f in res.errors if f.code == "SGL_AUX_BREAKS"]


def test_what_each_sglang_build_does_with_the_seed():
    """No KimiK25ForConditionalGeneration before 0.5.9 (kimi_k25.py), no EAGLE-3 hook in 0.5.9 (PR #19689, 0.5.10),
    CUDA graphs on the default ids in 0.5.10 (PR #22836, 0.5.11): 0.5.11 is the first build that serves it."""
    # one note code for both; the words tell the missing class from the missing hook
    for version in ("0.5.4", "0.5.8"):
        _, [f] = _aux_break(version)
        assert f.data["note_code"] == "SGLANG_NO_EAGLE3_HOOK", version
        assert "no KimiK25ForConditionalGeneration class (kimi_k25.py first ships in 0.5.9)" in f.text
    _, [f] = _aux_break("0.5.9")
    assert f.data["note_code"] == "SGLANG_NO_EAGLE3_HOOK"
    assert "has no set_eagle3_layers_to_capture" in f.text and "AttributeError" in f.text
    res, breaks = _aux_break("0.5.10")
    assert not breaks and "SGL_CUDA_GRAPH_DEFAULT_IDS" in res.codes()
    res, breaks = _aux_break("0.5.11")
    assert not breaks and not res.errors and "SGL_CUDA_GRAPH_DEFAULT_IDS" not in res.codes()
    # the lesson of the case: one step caps every verify at 2 tokens, and the ids feed resid[3, 31, 59]
    assert (res.effective["num_draft_tokens"], res.max_accept_length, res.effective["aux_resid"]) == (2, 2, [3, 31, 59])
    assert res.effective["target_arch"] == "KimiK25ForConditionalGeneration" and res.effective["num_target_layers"] == 61
    assert "SGL_ARCH_IS_WRAPPER" in res.codes() and "SGL_DEEPSEEK_MTP_LOG_LINE" not in res.codes()
    newest = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG)
    assert newest.effective["aux_resid"] == [2, 30, 58] and newest.max_accept_length == 2


def test_dict_args_equal_the_seed_command_line():
    as_dict = {"model_path": "moonshotai/Kimi-K2.5", "speculative-algorithm": "EAGLE3",
               "--speculative-draft-model-path": "./kimi-k25-eagle3", "speculative_num_steps": 1,
               "speculative_eagle_topk": "1", "speculative_num_draft_tokens": 16, "tp": 8, "trust_remote_code": True}
    a = resolve_flags("sglang", as_dict, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG)
    b = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG)
    assert a.effective == b.effective and a.codes() == b.codes()


def test_seed_flags_hold_the_command_with_placeholders_for_its_checkpoints():
    from eagle3lab.engines.flags import SEED_COMMAND, SEED_FLAGS

    assert "--model-path TARGET" in SEED_FLAGS and "--speculative-draft-model-path DRAFT" in SEED_FLAGS
    assert SEED_FLAGS.replace("TARGET", "moonshotai/Kimi-K2.5").replace("DRAFT", "./kimi-k25-eagle3") == SEED_COMMAND
