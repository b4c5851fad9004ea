"""eagle3lab.engines.flags: every SGLang / vLLM rule reproduced as the engine applies it, plus bad input.

Target and draft configs are excerpts of the real published files in
tests/fixtures/real-configs/ (the keys the rules read); `test_excerpts_match_real_configs`
checks them against those files.
"""

from __future__ import annotations

import json
import re

import pytest
from helpers.paths import REAL_CONFIGS

from eagle3lab import bundled
from eagle3lab.engines.flags import (
    SEED_COMMAND,
    SEED_DRAFT_CONFIG,
    SEED_TARGET_CONFIG,
    resolve_flags,
    sglang_what_if,
)
from eagle3lab.engines.flags.common import translator_findings, unplaced_finding
from eagle3lab.engines.flags.sglang import CHANGES as SGL_CHANGES
from eagle3lab.engines.flags.sglang_overlap import OVERLAP_CHANGES
from eagle3lab.engines.flags.vllm import CHANGES as VLLM_CHANGES
from eagle3lab.engines.layer_ids import CHANGES as ID_CHANGES
from eagle3lab.engines.layer_ids import AuxResolution, aux_note, resolve_aux_layers
from eagle3lab.engines.verify_width import ADJUSTED_LOG
from eagle3lab.errors import Eagle3LabError
from eagle3lab.findings import Severity

REAL = REAL_CONFIGS

LLAMA31_8B = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "max_position_embeddings": 131072,
              "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
DEEPSEEK_V3 = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61, "max_position_embeddings": 163840,
               "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                "original_max_position_embeddings": 4096, "type": "yarn"}}
KIMI_K25 = {"architectures": ["KimiK25ForConditionalGeneration"],
            "text_config": {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61,
                            "max_position_embeddings": 262144}}
SPECFORGE_LLAMA3 = {"architectures": ["LlamaForCausalLMEagle3"], "max_position_embeddings": 2048,
                    "num_hidden_layers": 1, "draft_vocab_size": 32000}
SPECFORGE_DSV3 = {"architectures": ["LlamaForCausalLMEagle3"], "max_position_embeddings": 163840,
                  "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57], "use_aux_hidden_state": True}}
SPECFORGE_KIMI25 = {"architectures": ["LlamaForCausalLMEagle3"], "max_position_embeddings": 131072,
                    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True}}
SPECULATORS_LLAMA = {
    "architectures": ["Eagle3Speculator"], "draft_vocab_size": 32000, "norm_before_residual": False,
    "speculators_model_type": "eagle3",
    "speculators_config": {"algorithm": "eagle3", "proposal_methods": [{"speculative_tokens": 5}],
                           "verifier": {"architectures": ["LlamaForCausalLM"],
                                        "name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}},
    "transformer_layer_config": {"max_position_embeddings": 2048, "num_hidden_layers": 1, "model_type": "llama"},
}
EXCERPTS = {
    "meta-llama__Llama-3.1-8B.json": LLAMA31_8B, "deepseek-ai__DeepSeek-V3.json": DEEPSEEK_V3,
    "moonshotai__Kimi-K2.5.json": KIMI_K25, "sgl-project__SpecForge__llama3-8B-eagle3.json": SPECFORGE_LLAMA3,
    "sgl-project__SpecForge__deepseek-v3-671b-eagle3.json": SPECFORGE_DSV3,
    "sgl-project__SpecForge__pr476__kimi-k25-eagle3.json": SPECFORGE_KIMI25,
    "nm-testing__EAGLE3-LLaMA3.1-Instruct-8B-converted.json": SPECULATORS_LLAMA,
}

SGL = "python -m sglang.launch_server --model-path M --speculative-algorithm EAGLE3 --speculative-draft-model-path D"
VLLM = "vllm serve meta-llama/Llama-3.1-8B-Instruct"


def _subset(excerpt, real):
    if isinstance(excerpt, dict):
        assert isinstance(real, dict)
        for k, v in excerpt.items():
            assert k in real, k
            _subset(v, real[k])
    elif isinstance(excerpt, list) and excerpt and isinstance(excerpt[0], dict):
        assert len(real) == len(excerpt)
        for e, r in zip(excerpt, real):
            _subset(e, r)
    else:
        assert real == excerpt, (real, excerpt)


def test_excerpts_match_real_configs():
    for name, excerpt in EXCERPTS.items():
        _subset(excerpt, json.loads((REAL / name).read_text()))


def sgl(extra="", target=LLAMA31_8B, draft=SPECFORGE_LLAMA3, version=None, base=SGL, **kw):
    return resolve_flags("sglang", f"{base} {extra}", target, draft, engine_version=version, **kw)


def vllm(spec=None, extra="", target=LLAMA31_8B, draft=SPECFORGE_LLAMA3, version=None, base=VLLM):
    cmd = base + (f" --speculative-config '{json.dumps(spec)}'" if spec is not None else "") + f" {extra}"
    return resolve_flags("vllm", cmd, target, draft, engine_version=version)


# ----------------------------------------------------------------------------- the seed

def test_0_5_4_cannot_serve_a_deepseek_eagle3_draft():
    """SGLang 0.5.4's deepseek_v2.py has no set_eagle3_layers_to_capture (PR #12319, 0.5.5): start-up fails (the
    seed's own Kimi-K2.5 has no class there at all: tests/engines/test_flags_seed.py)."""
    res = resolve_flags("sglang", SEED_COMMAND, DEEPSEEK_V3, SEED_DRAFT_CONFIG, engine_version="0.5.4")
    [f] = [f for f in res.errors if f.code == "SGL_AUX_BREAKS"]
    assert f.data == {"note_code": "SGLANG_NO_EAGLE3_HOOK"}   # the layer-id note's own code
    assert "AttributeError" in f.text   # the words tell a missing hook (this) from a missing class


def test_seed_command_verifies_two_tokens_not_sixteen():
    # 0.5.11: the +1 rule (before PR #25454) in every forward (CUDA graphs use the configured ids from PR #22836)
    res = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version="0.5.11")
    assert res.as_given["num_draft_tokens"] == 16
    assert res.effective["num_draft_tokens"] == 2
    assert res.max_accept_length == 2
    f = res.finding("SGL_TOPK1_DRAFT_TOKENS_ADJUSTED")
    assert f.severity == Severity.WARNING and f.where == "num_draft_tokens"
    assert "--speculative-num-steps 15 --speculative-eagle-topk 1" in f.fix
    assert "speculative_num_draft_tokens is adjusted" in f.text
    row = res.table().loc["num_draft_tokens"]
    assert row["as_given"] == "16" and row["effective"] == "2" and row["changed"]
    assert "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED" in row["why"]
    # The seed's second cause: SGLang before PR #25454 feeds resid[3, 31, 59] for ids [2, 30, 58].
    assert res.effective["aux_resid"] == [3, 31, 59]
    assert not res.errors


def test_seed_fix_verifies_sixteen():
    fixed = SEED_COMMAND.replace("--speculative-num-steps 1 ", "--speculative-num-steps 15 ")
    res = resolve_flags("sglang", fixed, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG)
    assert res.max_accept_length == 16 and res.effective["num_draft_tokens"] == 16
    assert "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED" not in res.codes()


@pytest.mark.parametrize("version,resid", [(None, [2, 30, 58]), ("0.5.5", [3, 31, 59]), ("2026-04-01", [3, 31, 59]),
                                           ("2026-06-01", [2, 30, 58]), ("pre-#25454", [3, 31, 59]),
                                           ("post-#25454", [2, 30, 58])])
def test_kimi_ids_follow_the_sglang_version(version, resid):
    res = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version=version)
    assert res.effective["aux_resid"] == resid
    assert res.effective["aux_source"].endswith("eagle_config -> eagle_aux_hidden_state_layer_ids")
    assert "current" in res.version_note if version is None else version in res.version_note


# ----------------------------------------------------------------------------- SGLang step rules

@pytest.mark.parametrize("target,version,triple", [
    (LLAMA31_8B, None, (5, 4, 8)), (LLAMA31_8B, "0.4.0", (5, 4, 8)),
    (DEEPSEEK_V3, None, (3, 1, 4)), (DEEPSEEK_V3, "0.5.2", (3, 1, 4)), (DEEPSEEK_V3, "0.4.2", (5, 4, 8)),
    ({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 48}, None, (3, 1, 4)),
    ({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 48}, "0.5.4", (5, 4, 8)),
    ({"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 36}, "0.4.10", (5, 4, 8)),
    ({"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 36}, "0.5.2", (3, 1, 4)),
    (KIMI_K25, None, (3, 1, 4)),
])
def test_auto_params_by_architecture_and_version(target, version, triple):
    res = sgl(target=target, draft=None, version=version)
    eff = res.effective
    assert (eff["num_steps"], eff["topk"], eff["num_draft_tokens"]) == triple
    assert res.max_accept_length == min(triple[0], triple[2] - 1) + 1
    f = res.finding("SGL_AUTO_PARAMS")
    assert f.severity == Severity.INFO and f"--speculative-num-steps {triple[0]}" in f.fix


def test_auto_params_in_an_unplaceable_release_show_the_older_choice():
    res = sgl(target={"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 48}, draft=None, version="0.5.6")
    assert res.effective["num_steps"] == 3
    assert "Older builds (see versions) choose (5, 4, 8)" in res.finding("SGL_AUTO_PARAMS").text


def test_auto_params_need_the_architecture():
    res = sgl(target=None, draft=None)
    assert res.effective["num_steps"] is None and res.max_accept_length is None
    assert res.finding("SGL_AUTO_PARAMS_UNKNOWN_ARCH").severity == Severity.WARNING
    assert sgl(target=None, draft=None, target_arch="LlamaForCausalLM").effective["num_steps"] == 5


def unplaced(res):
    """The changes an ENGINE_VERSION_UNPLACED finding was made for, by their span."""
    return [f.engine_versions for f in res.findings if f.code == "ENGINE_VERSION_UNPLACED"]


GPT_OSS = {"architectures": ["GptOssForCausalLM"], "num_hidden_layers": 36}


@pytest.mark.parametrize("target,version,auto", [
    # Llama's auto rule is (5, 4, 8) in every version read: no auto change is placed, none can warn.
    (LLAMA31_8B, "2026-04-01", []), (LLAMA31_8B, "post-#25454", []),
    (DEEPSEEK_V3, "2026-04-01", ["auto-deepseek"]), (DEEPSEEK_V3, "post-#25454", ["auto-deepseek"]),
    # gpt-oss: its branch (PR #9470) and, for builds without it, the else branch's change.
    (GPT_OSS, "post-#25454", ["auto-gptoss", "auto-others"]), (GPT_OSS, "2026-04-01", []),
    ({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 48}, "0.5.6", ["auto-others"]),
])
def test_auto_params_place_only_the_changes_the_architecture_reads(target, version, auto):
    res = sgl(target=target, draft=None, version=version)
    spans = {SGL_CHANGES[k].span(): k for k in SGL_CHANGES}
    said = [spans[s] for s in unplaced(res)]
    assert [k for k in said if k.startswith("auto-")] == auto
    assert set(said) - set(auto) <= {"spec-v2-opt-in", "spec-v2-default", "spec-v1-retired", "spec-v2-env-removed"}
    versions = res.finding("SGL_AUTO_PARAMS").engine_versions
    assert ("auto-deepseek" in versions) is (target is DEEPSEEK_V3)
    assert ("auto-gptoss" in versions) is (target is GPT_OSS)


def test_the_reviewers_examples_warn_once_per_change_read():
    llama = sgl(target=LLAMA31_8B, draft=None, version="2026-04-01")
    assert unplaced(llama) == []  # PR #11398 was on main by 2025-10-25; Llama's auto rule reads no change
    post = sgl(target=LLAMA31_8B, draft=None, version="post-#25454")
    # A mark for the layer-id PR places none of the overlap changes: one warning each, none about gpt-oss.
    assert unplaced(post) == [SGL_CHANGES[k].span() for k in OVERLAP_CHANGES]
    assert SGL_CHANGES["auto-gptoss"] not in [f.change for f in post.findings]


def test_kimi_k25_wrapper_arch_is_what_sglang_matches():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
              target=KIMI_K25, draft=SPECFORGE_KIMI25)
    assert res.effective["target_arch"] == "KimiK25ForConditionalGeneration"
    assert res.effective["num_target_layers"] == 61
    assert "SGL_ARCH_IS_WRAPPER" in res.codes()
    assert not any(c.startswith("SGL_DEEPSEEK") for c in res.codes())  # not in SGLang's MTP list


@pytest.mark.parametrize("extra,code", [
    ("--speculative-eagle-topk 1 --speculative-num-draft-tokens 4", "SGL_PARTIAL_FLAGS"),
    ("--speculative-num-draft-tokens 4", "SGL_PARTIAL_FLAGS"),
    ("--speculative-num-steps 3", "SGL_TOPK_MISSING"),
    ("--speculative-num-steps 3 --speculative-eagle-topk 4", "SGL_TREE_DRAFT_TOKENS_MISSING"),
    ("--speculative-num-steps 0 --speculative-eagle-topk 1", "SGL_ZERO"),
])
def test_partial_flag_sets_the_engine_rejects(extra, code):
    res = sgl(extra)
    f = res.finding(code)
    assert f is not None and f.severity == Severity.ERROR and f.fix
    assert res.max_accept_length is None


def test_steps_and_topk_one_without_draft_tokens_is_filled_in():
    res = sgl("--speculative-num-steps 4 --speculative-eagle-topk 1")
    assert res.effective["num_draft_tokens"] == 5 and res.max_accept_length == 5
    assert res.finding("SGL_TOPK1_DRAFT_TOKENS_SET").severity == Severity.INFO


def test_tree_pool_limit():
    res = sgl("--speculative-num-steps 2 --speculative-eagle-topk 2 --speculative-num-draft-tokens 16")
    f = res.finding("SGL_TREE_POOL_TOO_SMALL")
    assert f.severity == Severity.ERROR and "= 6" in f.text and "--speculative-num-draft-tokens 7" in f.fix
    ok = sgl("--speculative-num-steps 2 --speculative-eagle-topk 2 --speculative-num-draft-tokens 7")
    assert "SGL_TREE_POOL_TOO_SMALL" not in ok.codes()


def test_tree_accept_cap_and_the_bench_filter():
    long_draft = dict(SPECFORGE_LLAMA3, max_position_embeddings=131072)
    res = sgl("--speculative-num-steps 5 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8", draft=long_draft)
    assert res.max_accept_length == 6 and not res.errors
    assert "SGL_BENCH_WOULD_SKIP" not in res.codes()
    wide = sgl("--speculative-num-steps 2 --speculative-eagle-topk 4 --speculative-num-draft-tokens 16")
    assert wide.max_accept_length == 3          # depth 2 + bonus, however many nodes are verified
    assert wide.finding("SGL_BENCH_WOULD_SKIP").severity == Severity.WARNING
    assert "SGL_TREE_POOL_TOO_SMALL" not in wide.codes()  # pool 4 + 16 = 20 >= 15


def test_what_if_function_matches_the_command_line():
    a = sglang_what_if(1, 1, 16, target_config=SEED_TARGET_CONFIG, draft_config=SEED_DRAFT_CONFIG)
    assert a.max_accept_length == 2 and a.effective["num_draft_tokens"] == 2
    assert sglang_what_if(None, 4, None, target_config=LLAMA31_8B).finding("SGL_PARTIAL_FLAGS")


# ----------------------------------------------------------------------------- SGLang side rules

def test_token_map_ignored_for_eagle3_only():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-token-map freq_32768.pt")
    assert res.finding("SGL_TOKEN_MAP_IGNORED").severity == Severity.WARNING
    assert res.as_given["token_map"] == "freq_32768.pt" and res.effective["token_map"] is None
    eagle = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-token-map f.pt", draft=None,
                base=SGL.replace("EAGLE3", "EAGLE"))
    assert "SGL_TOKEN_MAP_IGNORED" not in eagle.codes() and eagle.effective["token_map"] == "f.pt"


def test_nextn_is_eagle_and_an_eagle3_head_needs_eagle3():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1", base=SGL.replace("EAGLE3", "nextn"))
    assert res.effective["algorithm"] == "EAGLE" and "SGL_NEXTN_IS_EAGLE" in res.codes()
    assert res.finding("SGL_EAGLE3_DRAFT_WITH_EAGLE").severity == Severity.ERROR


def test_deepseek_family_draft_path():
    base = "python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 --speculative-algorithm EAGLE3"
    res = sgl(base=base, target=DEEPSEEK_V3, draft=None)
    assert res.effective["draft_model"] == "deepseek-ai/DeepSeek-V3"
    assert res.finding("SGL_DEEPSEEK_DRAFT_IS_TARGET").severity == Severity.ERROR
    with_draft = sgl(base=base + " --speculative-draft-model-path ./d", target=DEEPSEEK_V3, draft=SPECFORGE_DSV3)
    assert with_draft.effective["draft_model"] == "./d"
    assert with_draft.finding("SGL_DEEPSEEK_MTP_LOG_LINE").severity == Severity.INFO
    # ids [1, 29, 57]: first id 1 -> +1 before and after PR #25454
    assert with_draft.effective["aux_resid"] == [2, 30, 58]
    mtp = sgl(base=base.replace("EAGLE3", "NEXTN"), target=DEEPSEEK_V3, draft=None)
    assert mtp.finding("SGL_DEEPSEEK_DRAFT_IS_TARGET").severity == Severity.INFO


def test_llama_needs_a_draft_path():
    res = sgl(base=SGL.replace(" --speculative-draft-model-path D", ""), draft=None)
    assert res.finding("SGL_NO_DRAFT_MODEL").severity == Severity.ERROR


def test_aux_ids_read_from_eagle_config_only():
    res = sgl()  # SpecForge llama template: no eagle_config
    assert res.effective["aux_resid"] == [2, 16, 29]
    assert res.effective["aux_source"].startswith("SGLang default")
    assert res.finding("SGL_AUX_IDS_DEFAULTED").severity == Severity.WARNING
    top = dict(SPECFORGE_LLAMA3, eagle_aux_hidden_state_layer_ids=[3, 16, 29])
    res = sgl(draft=top)
    f = res.finding("SGL_AUX_IDS_TOP_LEVEL_IGNORED")
    assert f.severity == Severity.ERROR and "[2, 15, 28]" in f.fix      # SGLang numbering of resid[3, 16, 29]
    assert res.as_given["aux_layer_ids"] == [3, 16, 29] and res.effective["aux_layer_ids"] is None
    nested = dict(SPECFORGE_LLAMA3, eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 15, 28]})
    assert sgl(draft=nested).effective["aux_resid"] == [3, 16, 29]
    off = dict(SPECFORGE_LLAMA3, eagle_config={"use_aux_hidden_state": False})
    assert "SGL_AUX_NOT_USED" in sgl(draft=off).codes()


def test_aux_id_that_sglang_never_reaches_is_an_error():
    draft = dict(SPECFORGE_LLAMA3, eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 15, 31]})
    res = sgl(draft=draft)
    assert res.effective["aux_resid"] == [3, 16]
    assert res.finding("SGL_AUX_BREAKS").severity == Severity.ERROR


def test_max_running_requests_and_mixed_chunk():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --enable-mixed-chunk")
    assert res.effective["max_running_requests"] == 48 and res.finding("SGL_MAX_RUNNING_REQUESTS")
    # from 0.5.19 EAGLE/EAGLE3 keep mixed chunked prefill (supports_mixed_chunk); earlier builds and STANDALONE do not
    assert res.effective["mixed_chunk"] is True and res.finding("SGL_MIXED_CHUNK_KEPT")
    old = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --enable-mixed-chunk", version="0.5.18")
    assert old.effective["mixed_chunk"] is False
    assert old.finding("SGL_MIXED_CHUNK_DISABLED").engine_logs == (
        "Mixed chunked prefill is disabled because of using eagle speculative decoding.",)
    alone = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --enable-mixed-chunk",
                base=SGL.replace("EAGLE3", "STANDALONE"), version="0.5.23")
    assert alone.effective["mixed_chunk"] is False
    assert alone.finding("SGL_MIXED_CHUNK_DISABLED").engine_logs == (
        "Mixed chunked prefill is disabled: STANDALONE speculative decoding does not support it.",)
    assert sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --enable-mixed-chunk",
               version="2026-07-01").finding("ENGINE_VERSION_UNPLACED")
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --max-running-requests 128")
    assert res.effective["max_running_requests"] == 128 and not res.finding("SGL_MAX_RUNNING_REQUESTS")


def test_draft_context_shorter_than_the_target():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1")
    f = res.finding("SGL_DRAFT_CONTEXT_TOO_SHORT")
    assert f.severity == Severity.ERROR and "(131072)" in f.text and "(2048)" in f.text
    env = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1",
              base="SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 " + SGL)
    assert env.finding("SGL_DRAFT_MAX_POSITION_OVERRIDDEN").severity == Severity.WARNING
    assert env.effective["draft_max_position_embeddings"] == 131072
    for value, overridden in (("y", True), ("TRUE", True), ("on", False), ("0", False)):  # SGLang's EnvBool words
        res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1",
                  base=f"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN={value} " + SGL)
        assert ("SGL_DRAFT_MAX_POSITION_OVERRIDDEN" in res.codes()) is overridden, value
    short = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --context-length 2048")
    assert not any("CONTEXT" in c or "MAX_POSITION" in c for c in short.codes())


def test_yarn_target_context_is_not_multiplied_when_original_is_named():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1", target=DEEPSEEK_V3, draft=SPECFORGE_DSV3)
    assert res.effective["context_length"] == 163840
    assert "SGL_DRAFT_CONTEXT_TOO_SHORT" not in res.codes()


def test_flags_without_an_algorithm_are_ignored():
    res = resolve_flags("sglang", "python -m sglang.launch_server --model-path M --speculative-num-steps 3")
    assert res.max_accept_length == 1 and res.finding("SGL_NO_ALGORITHM").severity == Severity.WARNING


# ----------------------------------------------------------------------------- parsing

def test_misspelled_abbreviated_and_unmodelled_flags():
    res = sgl("--speculative-num-stepz 3 --speculative-eagle-topk 1 --mem-fraction-static 0.8 --frobnicate 2")
    f = res.finding("UNKNOWN_FLAG")
    assert f.severity == Severity.ERROR and "did you mean --speculative-num-steps" in f.text
    assert res.unknown_flags[0] == {"flag": "--speculative-num-stepz", "value": "3", "closest": "--speculative-num-steps"}
    assert res.finding("UNCHECKED_FLAG").text.startswith("'--frobnicate 2'")
    assert "--mem-fraction-static" not in json.dumps(res.unknown_flags)
    under = sgl("--speculative_num_steps 3 --speculative-eagle-topk 1")
    assert under.finding("UNKNOWN_FLAG").fix == "Write --speculative-num-steps 3."
    abbrev = sgl("--speculative-num-step 3 --speculative-eagle-top 1")
    assert abbrev.effective["num_steps"] == 3 and abbrev.effective["topk"] == 1
    assert [f.severity for f in abbrev.findings if f.code == "FLAG_ABBREVIATED"] == [Severity.WARNING, Severity.WARNING]


def test_repeated_flag_with_the_same_value_is_noted():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-steps=3")
    assert res.finding("FLAG_REPEATED").severity == Severity.INFO and res.effective["num_steps"] == 3


def test_command_forms_env_prefix_docker_and_continuations():
    text = ("docker run --gpus all -e SGLANG_ENABLE_SPEC_V2=1 lmsysorg/sglang python3 -m sglang.launch_server \\\n"
            "  --model-path M --speculative-algorithm EAGLE3 --speculative-draft-model-path D \\\n"
            "  --speculative-num-steps=3 --speculative-eagle-topk 1")
    res = resolve_flags("sglang", text, LLAMA31_8B, SPECFORGE_LLAMA3, engine_version="0.5.4")
    assert res.effective["num_steps"] == 3 and res.effective["overlap_schedule"] is True
    flags_only = resolve_flags("sglang", ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2",
                                          "--speculative-eagle-topk", "1", "--speculative-draft-model-path", "D"],
                               LLAMA31_8B)
    assert flags_only.max_accept_length == 3


def test_stray_value_is_reported():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --trust-remote-code yes")
    assert res.finding("STRAY_ARGUMENT").severity == Severity.ERROR


def test_model_path_config_is_read_from_disk(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(DEEPSEEK_V3))
    res = resolve_flags("sglang", f"python -m sglang.launch_server --model-path {tmp_path} "
                                  "--speculative-algorithm EAGLE3")
    assert res.effective["target_arch"] == "DeepseekV3ForCausalLM" and res.effective["num_steps"] == 3
    assert "from the command's model path" in res.sources["target_config"]
    res = resolve_flags("sglang", SEED_COMMAND, target_config=tmp_path)  # a folder works too
    assert res.effective["num_target_layers"] == 61


@pytest.mark.parametrize("args,quoted", [
    (SGL + " --speculative-num-steps abc", "`--speculative-num-steps abc`"),
    (SGL + " --speculative-num-steps -3", "`--speculative-num-steps -3`"),
    (SGL + " --speculative-eagle-topk 1.5", "`--speculative-eagle-topk 1.5`"),
    (SGL + " --speculative-num-steps 3 --speculative-num-steps 5",
     "`--speculative-num-steps 3` and `--speculative-num-steps 5`"),
    (SGL.replace("EAGLE3", "EAGLE4"), "EAGLE4"),
    (SGL.replace("EAGLE3", "NGRAM"), "EAGLE-family"),
    (SGL + " --speculative-num-steps", "--speculative-num-steps"),
    (SGL + " --speculative-draft-model-path 'unbalanced", "balanced quotes"),
    ("vllm serve M", "a sglang launch command"),
    ("torchrun train.py --lr 1", "python -m sglang.launch_server"),
])
def test_bad_sglang_input_quotes_the_offending_part(args, quoted):
    with pytest.raises(Eagle3LabError) as err:
        resolve_flags("sglang", args)
    assert quoted in str(err.value)


def test_bad_engine_version_and_configs(tmp_path):
    with pytest.raises(Eagle3LabError, match="Did you mean 'vllm'"):
        resolve_flags("vlm", VLLM)
    with pytest.raises(Eagle3LabError, match="'banana'"):
        resolve_flags("sglang", SGL, engine_version="banana")
    with pytest.raises(Eagle3LabError, match="no file at"):
        resolve_flags("sglang", SGL, target_config=tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(Eagle3LabError, match="bad.json"):
        resolve_flags("sglang", SGL, draft_config=tmp_path / "bad.json")


# ----------------------------------------------------------------------------- vLLM

def test_vllm_eagle3_launch():
    res = vllm({"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 3},
               extra="-tp 2")
    eff = res.effective
    assert (eff["algorithm"], eff["num_speculative_tokens"], res.max_accept_length) == ("eagle3", 3, 4)
    assert eff["draft_tensor_parallel_size"] == 2 and eff["tensor_parallel_size"] == 2
    assert eff["aux_resid"] == [2, 16, 29] and res.finding("VLLM_AUX_IDS_DEFAULTED").severity == Severity.WARNING
    assert eff["draft_norm_flags"]["norm_before_residual"] is False
    assert res.finding("VLLM_DRAFT_MAX_POSITION").severity == Severity.INFO
    assert eff["draft_max_position_embeddings"] == 131072
    assert not res.errors


def test_vllm_reads_top_level_ids_not_eagle_config():
    nested = dict(SPECFORGE_LLAMA3, eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 15, 28]})
    res = vllm({"method": "eagle3", "model": "d", "num_speculative_tokens": 3}, draft=nested)
    f = res.finding("VLLM_AUX_IDS_NESTED_IGNORED")
    assert f.severity == Severity.WARNING and '"eagle_aux_hidden_state_layer_ids": [2, 16, 29]' in f.fix
    # the V1 runner reads the nested key since 0.22.0, as vLLM ids: one layer below what SGLang reads
    assert "since 0.22.0" in f.text and "resid[1, 15, 28], not the resid[2, 16, 29]" in f.text
    assert res.effective["aux_resid"] == [2, 16, 29] and res.effective["aux_layer_ids"] is None
    top = dict(SPECFORGE_LLAMA3, eagle_aux_hidden_state_layer_ids=[3, 16, 29])
    res = vllm({"method": "eagle3", "model": "d", "num_speculative_tokens": 3}, draft=top)
    assert res.effective["aux_resid"] == [3, 16, 29] and res.finding("VLLM_AUX_IDS")
    old = vllm({"method": "eagle3", "model": "d", "num_speculative_tokens": 3}, draft=top, version="0.10.2")
    assert old.effective["aux_resid"] == [2, 16, 29] and old.finding("VLLM_AUX_IDS_NOT_READ").severity == Severity.ERROR


def test_vllm_serves_a_speculators_checkpoint_directly():
    res = resolve_flags("vllm", "vllm serve nm-testing/EAGLE3-LLaMA3.1-Instruct-8B-converted",
                        target_config=LLAMA31_8B, draft_config=SPECULATORS_LLAMA)
    eff = res.effective
    assert eff["target_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert eff["draft_model"] == "nm-testing/EAGLE3-LLaMA3.1-Instruct-8B-converted"
    assert (eff["algorithm"], eff["num_speculative_tokens"], res.max_accept_length) == ("eagle3", 5, 6)
    assert "VLLM_SPECULATORS_SERVED_DIRECTLY" in res.codes()
    assert eff["draft_norm_flags"] == {"norm_before_residual": False, "norm_before_fc": False, "fc_norm": False,
                                       "norm_output": False}
    both = resolve_flags("vllm", "vllm serve spec --speculative-config '{\"num_speculative_tokens\": 2}'",
                         target_config=LLAMA31_8B, draft_config=SPECULATORS_LLAMA)
    f = both.finding("VLLM_SPECULATORS_REPLACES_SPEC_CONFIG")
    assert f.severity == Severity.WARNING and both.effective["num_speculative_tokens"] == 5
    named = resolve_flags("vllm", VLLM + ' --speculative-config \'{"method": "eagle3", "model": "spec", '
                                        '"num_speculative_tokens": 2}\'', LLAMA31_8B, SPECULATORS_LLAMA)
    assert "VLLM_SPECULATORS_SERVED_DIRECTLY" not in named.codes()   # the JSON names the draft: not direct
    assert named.effective["num_speculative_tokens"] == 2
    direct = resolve_flags("vllm", {"model": "spec"}, target_config=LLAMA31_8B, draft_config=SPECULATORS_LLAMA)
    assert direct.effective["num_speculative_tokens"] == 5


def test_vllm_speculators_checkpoint_from_the_served_folder(tmp_path):
    cfg = dict(SPECULATORS_LLAMA)
    del cfg["norm_before_residual"]
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    res = resolve_flags("vllm", f"vllm serve {tmp_path}", num_target_layers=32)
    assert res.effective["target_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert res.effective["target_arch"] == "LlamaForCausalLM"       # the verifier's architecture
    assert res.effective["draft_norm_flags"]["norm_before_residual"] is True
    assert res.finding("VLLM_SPECULATORS_NORM_BEFORE_RESIDUAL_DEFAULT").severity == Severity.WARNING
    broken = dict(cfg, speculators_config={"verifier": {"name_or_path": "x"}})
    (tmp_path / "config.json").write_text(json.dumps(broken))
    assert resolve_flags("vllm", f"vllm serve {tmp_path}").finding("VLLM_SPECULATORS_INVALID").severity == Severity.ERROR


@pytest.mark.parametrize("spec,code", [
    ({"method": "eagle3", "model": "d", "num_speculative_tokens": 0}, "VLLM_NUM_SPEC_TOKENS_NOT_POSITIVE"),
    ({"method": "eagle3", "model": "d"}, "VLLM_NUM_SPEC_TOKENS_MISSING"),
    ({"method": "eagle3", "num_speculative_tokens": 3}, "VLLM_NO_DRAFT_MODEL"),
    ({"method": "eagle3", "model": "d", "num_speculative_tokens": 3, "draft_tensor_parallel_size": 2},
     "VLLM_DRAFT_TP_INVALID"),
    ({"method": "eagle3", "model": "d", "num_speculative_tokens": 3, "tensor_parallel_size": 1},
     "VLLM_SPEC_CONFIG_TP_KEY"),
    ({"method": "eagle3", "model": "d", "num_speculative_token": 3}, "VLLM_SPEC_CONFIG_UNKNOWN_KEY"),
    ({"model": "org/my-draft", "num_speculative_tokens": 3}, "VLLM_METHOD_GUESSED"),
    ({"method": "eagle", "model": "d", "num_speculative_tokens": 3}, "VLLM_EAGLE3_DRAFT_WITH_EAGLE"),
])
def test_vllm_speculative_config_rules(spec, code):
    res = vllm(spec, extra="--tensor-parallel-size 4")
    f = res.finding(code)
    assert f is not None and f.severity == Severity.ERROR and f.fix


def test_vllm_method_from_the_model_name_and_draft_tp():
    res = vllm({"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 2,
                "draft_tensor_parallel_size": 1}, extra="-tp 4")
    assert res.effective["algorithm"] == "eagle3" and res.finding("VLLM_METHOD_FROM_NAME").severity == Severity.INFO
    assert res.effective["draft_tensor_parallel_size"] == 1 and not res.errors


def test_vllm_missing_tokens_fix_uses_the_speculators_value():
    res = vllm({"method": "eagle3", "model": "d"}, draft=SPECULATORS_LLAMA)
    assert '"num_speculative_tokens": 5' in res.finding("VLLM_NUM_SPEC_TOKENS_MISSING").fix


def test_vllm_removed_flags_by_version():
    res = resolve_flags("vllm", VLLM + " --speculative-model d --num-speculative-tokens 3", LLAMA31_8B)
    f = res.finding("VLLM_REMOVED_FLAGS")
    assert f.severity == Severity.ERROR and '"num_speculative_tokens": 3' in f.fix and '"model": "d"' in f.fix
    assert res.max_accept_length == 1
    old = resolve_flags("vllm", VLLM + " --speculative-model eagle3-d --num-speculative-tokens 3", LLAMA31_8B,
                        engine_version="0.8.1")
    assert old.finding("VLLM_DEPRECATED_FLAGS").severity == Severity.WARNING and old.max_accept_length == 4


def test_vllm_flag_spellings():
    res = resolve_flags("vllm", VLLM + " --speculative_config.method eagle3 --speculative-config.model d "
                                       "--speculative-config.num_speculative_tokens 2 --max_model_len 32k", LLAMA31_8B)
    assert res.effective["num_speculative_tokens"] == 2 and res.effective["context_length"] == 32000
    assert resolve_flags("vllm", VLLM + " --max-model-len 32K").effective["context_length"] == 32768
    none = resolve_flags("vllm", VLLM)
    assert none.max_accept_length == 1 and none.finding("VLLM_NO_SPECULATIVE_CONFIG").severity == Severity.WARNING


@pytest.mark.parametrize("args,quoted", [
    (VLLM + " --speculative-config '{method: eagle3}'", "malformed JSON"),
    (VLLM + " --speculative-config '[1, 2]'", "a JSON object"),
    (VLLM + ' --speculative-config \'{"method": "eagle3", "model": "d", "num_speculative_tokens": -1}\'',
     '"num_speculative_tokens": -1'),
    (VLLM + ' --speculative-config \'{"method": "eagle3", "model": "d", "num_speculative_tokens": "three"}\'',
     '"num_speculative_tokens": "three"'),
    (VLLM + ' --speculative-config \'{"method": "eagle4", "model": "d", "num_speculative_tokens": 3}\'',
     'Did you mean "eagle'),
    (VLLM + ' --speculative-config \'{"method": "ngram", "num_speculative_tokens": 3}\'', "EAGLE"),
    (VLLM + ' --speculative-config \'{"method": "eagle3", "model": "d", "num_speculative_tokens": 3, '
            '"draft_tensor_parallel_size": 0}\'', '"draft_tensor_parallel_size": 0'),
    (VLLM + " --max-model-len lots", "--max-model-len lots"),
    ("python -m sglang.launch_server --model-path M", "a vllm launch command"),
])
def test_bad_vllm_input_quotes_the_offending_part(args, quoted):
    with pytest.raises(Eagle3LabError) as err:
        resolve_flags("vllm", args)
    assert quoted in str(err.value)


# ----------------------------------------------------------------------------- result object and docs

def test_result_serialises_and_tables():
    res = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG)
    out = json.loads(json.dumps(res.to_dict()))
    assert out["schema_version"] == 1 and out["max_accept_length"] == 2
    assert set(out) == {"schema_version", "engine", "engine_version", "version_note", "command", "as_given",
                        "effective", "max_accept_length", "findings", "counts", "unknown_flags", "sources"}
    assert set(out["findings"][0]) == {"code", "severity", "message", "rule", "engine_versions", "fix", "setting",
                                       "engine_logs", "engine_error"}
    adjusted = next(f for f in out["findings"] if f["code"] == "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED")
    assert adjusted["engine_logs"] == [ADJUSTED_LOG] and adjusted["engine_error"] is None
    assert sum(out["counts"].values()) == len(out["findings"])
    assert list(res.table().columns) == ["as_given", "effective", "changed", "why"]
    assert list(res.findings_table().columns) == ["severity", "code", "message", "fix", "engine_versions", "rule"]
    assert "max accept length per verify step: 2" in res.report()


def test_every_finding_code_is_documented():
    root = bundled.ROOT
    src = "".join(p.read_text() for p in sorted((root / "eagle3lab" / "engines" / "flags").glob("*.py")))
    codes = set(re.findall(r'(?:_f|Finding)\(\s*"([A-Z0-9_]+)"', src))
    codes |= {p + s for s in re.findall(r'f"\{prefix\}(_AUX_[A-Z_]+)"', src) for p in ("SGL", "VLLM")}
    codes |= set(re.findall(r'^[A-Z_]+ = "([A-Z0-9_]+)"', src, re.MULTILINE))  # codes kept in a constant
    doc = (root / "docs" / "cli" / "flags.md").read_text()
    assert len(codes) > 40
    assert sorted(c for c in codes if f"`{c}`" not in doc) == []


def test_rules_that_need_the_layer_count_or_cannot_draft():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1", target=None, target_arch="LlamaForCausalLM")
    assert res.finding("SGL_AUX_NEEDS_LAYERS").severity == Severity.INFO and res.effective["aux_resid"] is None
    assert res.finding("SGL_AUX_IDS_DEFAULTED").severity == Severity.WARNING
    res = vllm({"method": "eagle3", "model": "d", "num_speculative_tokens": 3}, target=None)
    assert res.finding("VLLM_AUX_NEEDS_LAYERS") and res.finding("VLLM_AUX_IDS_DEFAULTED")
    one = sgl("--speculative-num-steps 3 --speculative-eagle-topk 2 --speculative-num-draft-tokens 1")
    assert one.max_accept_length == 1 and one.finding("SGL_NO_DRAFT_TOKENS").severity == Severity.WARNING


def test_vllm_final_layer_id_on_deepseek_before_pr_46973():
    draft = dict(SPECFORGE_DSV3, eagle_aux_hidden_state_layer_ids=[2, 30, 61])
    spec = {"method": "eagle3", "model": "d", "num_speculative_tokens": 3}
    old = vllm(spec, target=DEEPSEEK_V3, draft=draft, version="pre-#46973")
    assert old.effective["aux_resid"] == [2, 30] and old.finding("VLLM_AUX_BREAKS").severity == Severity.ERROR
    new = vllm(spec, target=DEEPSEEK_V3, draft=draft, version="post-#46973")
    assert new.effective["aux_resid"] == [2, 30, 61] and "VLLM_AUX_BREAKS" not in new.codes()


# ----------------------------------------------------------------------------- translator notes -> findings

def test_translator_findings_follow_the_note_kind_not_its_text():
    # A note that mentions "default" but is not a defaulting, ahead of the real one (matching the text
    # used to turn the first into the DEFAULTED finding and the real one into a NOTE).
    real = resolve_aux_layers("sglang", None, 32)
    mention = aux_note("note", "resid[2] is also the first point of vLLM's default; the ids agree there.")
    res = AuxResolution(real.engine, None, real.resid, real.rule, (mention, *real.notes), defaulted=True,
                        num_layers=32)
    found = translator_findings("SGL", res, "all", "fix")
    assert [(f.code, f.text) for f in found] == [("SGL_AUX_NOTE", mention.text),
                                                    ("SGL_AUX_IDS_DEFAULTED", real.warnings[0])]
    assert "Default ids used silently" in real.warnings[0]


def test_a_defaulting_not_worded_default_is_still_defaulted():
    res = resolve_aux_layers("eagle", [1, 2, 3], 32)  # SafeAILab/EAGLE "ignores layer ids"
    assert [n.kind for n in res.notes] == ["defaulted"] and "default" not in res.warnings[0].lower()
    found = translator_findings("SGL", res, "all", "fix")
    assert [(f.code, f.text) for f in found] == [("SGL_AUX_IDS_DEFAULTED", res.warnings[0])]


def test_translator_note_kinds_map_to_codes():
    res = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch="DeepseekV3ForCausalLM", engine_version="post-#25464")
    kinds = {n.kind for n in res.notes}
    assert {"breaks", "version"} <= kinds and res.fatal == tuple(n.text for n in res.notes if n.kind == "breaks")
    codes = {f.code: f.severity for f in translator_findings("SGL", res, "all", "fix")}
    assert codes["SGL_AUX_BREAKS"] == "error" and codes["ENGINE_VERSION_UNPLACED"] == "warning"
    # #25454 decides the ids; the count check of 0.5.17 / 0.5.20 cannot be placed by this mark either
    assert [n.change for n in res.notes if n.kind == "version"] == [
        ID_CHANGES["sglang#25454"], ID_CHANGES["sglang-aux-count-assert"], ID_CHANGES["sglang-aux-count-error"]]
    assert res.to_dict()["notes"][0].keys() == {"kind", "code", "text"} and res.to_dict()["fatal"] == list(res.fatal)


# ----------------------------------------------------------------------------- one shape for an unplaced build

def test_unplaced_findings_have_the_documented_shape_on_both_paths():
    # post-#25464 has every earlier overlap change and lacks none: only #27964 (the overlap rule, via
    # Inputs.place) and, a mark for another PR, #25454 (the layer-id translator, via translator_findings)
    # are unplaced; both findings come from unplaced_finding.
    version = "post-#25464"
    res = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version=version)
    found = [f for f in res.findings if f.code == "ENGINE_VERSION_UNPLACED"]
    changes = [SGL_CHANGES["spec-v2-env-removed"], ID_CHANGES["sglang#25454"]]
    assert found == [unplaced_finding(c, version) for c in changes]
    for f, change in zip(found, changes):
        assert (f.severity, f.where, f.rule, f.fix) == (Severity.WARNING, "engine_version", "eagle3lab.engines.versions.place", None)
        assert f.engine_versions == change.span() and f.change == change
    direct = translator_findings("SGL", resolve_aux_layers("sglang", [2, 30, 58], 61, arch="DeepseekV3ForCausalLM",
                                                           engine_version=version), "all", "fix")
    assert [f for f in direct if f.code == "ENGINE_VERSION_UNPLACED"] == [found[1]]


def test_vllm_translator_unplaced_finding_has_the_same_shape():
    deepseek = {"architectures": ["DeepseekV3ForCausalLM"], "num_hidden_layers": 61}
    draft = {"architectures": ["LlamaForCausalLMEagle3"], "eagle_aux_hidden_state_layer_ids": [2, 30, 61]}
    res = vllm({"method": "eagle3", "model": "d", "num_speculative_tokens": 3}, target=deepseek, draft=draft,
               version="pre-#1")
    found = [f for f in res.findings if f.code == "ENGINE_VERSION_UNPLACED"]
    changes = [VLLM_CHANGES["aux-from-config"], ID_CHANGES["vllm-deepseek-eagle3"],  # a flags rule, then the
               ID_CHANGES["vllm#46973"]]                                             # translator's two
    assert found == [unplaced_finding(c, "pre-#1") for c in changes]
    assert {(f.where, f.rule) for f in found} == {("engine_version", "eagle3lab.engines.versions.place")}


# ----------------------------------------------------------------------------- --speculative-adaptive by release

def test_adaptive_sets_the_static_parameters_from_0_5_14():
    """Issue 15's third rule: adaptive skips the auto-choice's assert (topk 1, draft tokens steps + 1)."""
    res = sgl("--speculative-adaptive", version="0.5.23")
    assert (res.effective["num_steps"], res.effective["topk"], res.effective["num_draft_tokens"]) == (3, 1, 4)
    assert res.finding("SGL_ADAPTIVE_PARAMS") and not res.finding("SGL_AUTO_PARAMS")  # Llama's auto: (5, 4, 8)
    assert sgl("--speculative-adaptive --speculative-num-steps 5", version="0.5.23").effective["num_draft_tokens"] == 6
    old = sgl("--speculative-adaptive --speculative-num-steps 5", version="0.5.19")   # candidates [0, 1, 3, 7]
    assert old.finding("SGL_ADAPTIVE_STEPS_NOT_CANDIDATE").engine_error == "ValueError"
    static = sgl("--speculative-adaptive", version="0.5.13")   # 0.5.11 .. 0.5.13: adapts at run time only
    assert static.finding("SGL_ADAPTIVE_STATIC") and static.effective["num_steps"] == 5   # Llama's auto choice
    assert sgl("--speculative-adaptive", version="0.5.10").finding("SGL_FLAG_NOT_IN_BUILD").engine_error == "SystemExit"
    tree = sgl("--speculative-adaptive --speculative-num-steps 3 --speculative-eagle-topk 4 "
               "--speculative-num-draft-tokens 8", version="0.5.23")
    assert tree.finding("SGL_ADAPTIVE_DISABLED").engine_logs == (
        "speculative_adaptive disabled: speculative_eagle_topk=4 (only topk=1 is supported). Falling back to static "
        "speculative params.",)
    assert tree.effective["topk"] == 4


def test_adaptive_reads_its_config_file(tmp_path):
    cfg = tmp_path / "adaptive.json"
    cfg.write_text(json.dumps({"1": {"candidate_steps": [2, 4, 6]}, "16": {"candidate_steps": [1]}, "note": {}}))
    res = sgl(f"--speculative-adaptive --speculative-adaptive-config {cfg}", version="0.5.23")
    assert res.effective["num_steps"] == 4 and "[1, 2, 4, 6]" in res.finding("SGL_ADAPTIVE_PARAMS").text
    missing = sgl("--speculative-adaptive --speculative-adaptive-config /nonexistent.json", version="0.5.23")
    assert missing.finding("SGL_ADAPTIVE_CONFIG_UNREAD") and missing.effective["num_steps"] is None


def test_deepseek_family_draft_path_for_every_eagle_algorithm():
    """Issue 15's second rule: STANDALONE goes through the same function; MistralLarge3/Pixtral log nothing."""
    base = "python -m sglang.launch_server --model-path M --speculative-algorithm STANDALONE"
    res = resolve_flags("sglang", base, target_arch="DeepseekV3ForCausalLM", engine_version="0.5.23")
    assert res.effective["draft_model"] == "M" and res.finding("SGL_DEEPSEEK_DRAFT_IS_TARGET").severity == Severity.WARNING
    assert not res.finding("SGL_NO_DRAFT_MODEL")
    for arch, logs in (("MistralLarge3ForCausalLM", ()), ("PixtralForConditionalGeneration", ()),
                       ("DeepseekV3ForCausalLM", ("DeepSeek MTP does not require setting speculative_draft_model_path.",))):
        res = sgl(target=None, target_arch=arch, version="0.5.23")
        assert res.finding("SGL_DEEPSEEK_MTP_LOG_LINE").engine_logs == logs, arch
    assert resolve_flags("sglang", base, target_arch="HYV4ForCausalLM", engine_version="0.5.20").effective[
        "draft_model"] == "M"
    assert resolve_flags("sglang", base + " --speculative-draft-model-path D", target_arch="HYV4ForCausalLM",
                         engine_version="0.5.19").finding("SGL_DEEPSEEK_MTP_LOG_LINE") is None


def test_context_length_above_the_target():
    res = sgl("--speculative-num-steps 3 --speculative-eagle-topk 1 --context-length 200000",
              draft=dict(SPECFORGE_LLAMA3, max_position_embeddings=131072))
    assert res.finding("SGL_CONTEXT_LENGTH_OVER_TARGET").engine_error == "ValueError"
    allowed = resolve_flags("sglang", f"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 {SGL} --speculative-num-steps 3 "
                            "--speculative-eagle-topk 1 --context-length 200000", LLAMA31_8B,
                            dict(SPECFORGE_LLAMA3, max_position_embeddings=131072))
    assert allowed.effective["context_length"] == 200000 and allowed.effective["draft_max_position_embeddings"] == 200000
    assert allowed.finding("SGL_CONTEXT_LENGTH_OVER_TARGET").severity == Severity.WARNING
