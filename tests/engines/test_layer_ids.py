"""The layer-id translator: every engine's rule, default and edge case, on N = 61 and N = 32."""

import json

import pytest

from eagle3lab.engines.layer_ids import (
    CHANGES,
    ID_CONVENTIONS,
    compare_engines,
    nearest_servable,
    resolve_aux_layers,
    to_engine_ids,
)
from eagle3lab.errors import Eagle3LabError

KIMI = "DeepseekV3ForCausalLM"  # Kimi-K2 / DeepSeek-V3: N = 61
LLAMA = "LlamaForCausalLM"  # Llama-3.1-8B: N = 32


# Tests match a note's code (NOTE_CODES); a text is read only where the test is about the words a user is shown,
# and then on the one note with its code.
def _note(res, code):
    [note] = [n for n in res.notes if n.code == code]
    return note


# the code of the note saying an engine used its default ids (speculators is served by vLLM)
DEFAULTED = {"sglang": "SGLANG_AUX_IDS_DEFAULTED", "vllm": "VLLM_AUX_IDS_DEFAULTED",
             "speculators": "VLLM_AUX_IDS_DEFAULTED", "specforge": "SPECFORGE_AUX_IDS_DEFAULTED"}


# ---- defaults: every engine lands on resid[2, N//2, N-3], and says a default was used

@pytest.mark.parametrize("n, arch, expected", [(61, KIMI, (2, 30, 58)), (32, LLAMA, (2, 16, 29))])
@pytest.mark.parametrize("engine", ID_CONVENTIONS)
def test_each_engine_default(engine, n, arch, expected):
    res = resolve_aux_layers(engine, None, n, arch=arch)
    assert res.resid == expected
    assert res.ids_as_written is None
    assert res.defaulted
    assert not res.fatal
    if engine in DEFAULTED:
        assert res.codes == (DEFAULTED[engine],), res.codes


def test_sglang_default_note_words_say_it_is_silent_and_where_ids_are_read():
    # about the words: the note tells the user where SGLang reads ids
    res = resolve_aux_layers("sglang", None, 32)
    text = _note(res, "SGLANG_AUX_IDS_DEFAULTED").text
    assert all(w in text for w in ("silently", "eagle_config", "eagle_aux_hidden_state_layer_ids"))


def test_vllm_default_note_words_name_what_the_runner_logs_and_that_no_release_warns():
    # about the words: the default note quotes what this build's model runner logs (a log line has no code)
    # vLLM wheels 0.17.0-0.33.0: eagle3_utils.py (V2 runner) logs INFO on fallback, gpu_model_runner.py (V1) nothing
    def text(res):
        assert res.codes == ("VLLM_AUX_IDS_DEFAULTED",)
        return res.notes[0].text

    res = resolve_aux_layers("vllm", None, 32)   # no build named: what each runner logs
    assert all(w in text(res) for w in ("V2 model runner", "INFO 'Using Eagle3 auxiliary layers from model",
                                        "V1 runner", "says nothing", "no release read (0.17.0-0.33.0) warns",
                                        "#50170"))
    assert "before PR #50170" not in text(res)
    gpu = resolve_aux_layers("vllm", None, 32, engine_version="0.32.0")   # a CUDA build assumed: V2
    assert gpu.runner == "V2" and "V2 model runner of a vLLM 0.32.0 cuda build (the platform assumed)" in text(gpu)
    assert "from model" in text(gpu)
    cpu = resolve_aux_layers("vllm", None, 32, engine_version="0.32.0", engine_platform="cpu")
    assert cpu.runner == "V1" and "V1 model runner" in text(cpu) and "says nothing" in text(cpu)
    assert "from model" not in text(cpu)
    warned = resolve_aux_layers("vllm", None, 32, engine_version="post-#50170")
    assert "warns once (PR #50170)" in text(warned)


def test_specforge_default_ids_written_in_sglang_convention():
    res = resolve_aux_layers("specforge", None, 61)
    assert res.resid == (2, 30, 58)
    # the note's words show the ids SpecForge writes, in SGLang's convention
    assert "[1, 29, 57]" in _note(res, "SPECFORGE_AUX_IDS_DEFAULTED").text
    # Writing those ids explicitly gives the same points on SGLang, before and after PR #25454.
    for version in ("2026-01-01", "2026-06-01"):
        assert resolve_aux_layers("sglang", [1, 29, 57], 61, arch=KIMI, engine_version=version).resid == (2, 30, 58)


def test_defaults_need_num_layers():
    with pytest.raises(Eagle3LabError, match="num_layers"):
        resolve_aux_layers("vllm", None, None)
    with pytest.raises(Eagle3LabError, match="num_layers"):
        resolve_aux_layers("eagle", [1, 2, 3], None)


# ---- written ids

def test_sglang_plus_one_rule_llama():
    res = resolve_aux_layers("sglang", [1, 15, 28], 32, arch=LLAMA)
    assert res.resid == (2, 16, 29)
    assert "llama.py" in res.rule and "k+1" in res.rule
    assert not res.fatal


def test_vllm_ids_are_resid_indices():
    res = resolve_aux_layers("vllm", [0, 16, 32], 32, arch=LLAMA)
    assert res.resid == (0, 16, 32)
    assert not res.fatal and not res.warnings


def test_same_ids_differ_between_engines_llama():
    ids = [2, 16, 29]
    assert resolve_aux_layers("vllm", ids, 32).resid == (2, 16, 29)
    assert resolve_aux_layers("sglang", ids, 32, arch=LLAMA).resid == (3, 17, 30)
    table = compare_engines(ids, 32, arch=LLAMA)
    assert table.loc["sglang", "resid"] == [3, 17, 30]
    assert table.loc["speculators", "resid"] == [2, 16, 29]
    assert table.loc["eagle", "resid"] == [2, 16, 29]


def test_kimi_k2_ids_before_and_after_pr_25454():
    # Merged 2026-05-18 (opened 2026-05-16): a build from the 17th still adds 1.
    before = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version="2026-05-17")
    after = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version="2026-05-18")
    assert before.resid == (3, 31, 59)
    assert after.resid == (2, 30, 58)
    assert "before PR #25454" in before.rule and "since PR #25454" in after.rule
    assert resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version="pre-#25454").resid == (3, 31, 59)
    assert resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version="post-25454").resid == (2, 30, 58)
    # No version: the newer behaviour, and a note that the build decides.
    unknown = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI)
    assert unknown.resid == (2, 30, 58)
    assert unknown.codes == ("SGLANG_AUX_IDS_VERSION_DEPENDENT",)
    # The heuristic is DeepSeek-family only: a Llama target keeps +1 in every version.
    assert resolve_aux_layers("sglang", [2, 30, 58], 61, arch=LLAMA, engine_version="2026-06-01").resid == (3, 31, 59)
    # Arch unknown: the +1 reading, with a warning about DeepSeek-family targets (an assumption).
    no_arch = resolve_aux_layers("sglang", [2, 30, 58], 61)
    assert no_arch.codes == ("SGLANG_AUX_IDS_ARCH_NEEDED",) and no_arch.unconfirmed


def test_specforge_follows_sglang_rule_for_the_target():
    res = resolve_aux_layers("specforge", [2, 30, 58], 61, arch="kimi_k2", engine_version="2026-01-01")
    assert res.resid == (3, 31, 59)
    assert "SpecForge" in res.rule and "SGLang" in res.rule


def test_version_that_cannot_be_placed_warns():
    # 0.5.12.post1 cherry-picked fixes onto the 0.5.12 branch after the merge: no bound places it.
    res = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version="0.5.12.post1")
    assert res.resid == (2, 30, 58)
    unplaced = _note(res, "ENGINE_VERSION_UNPLACED")
    assert unplaced.kind == "version" and unplaced.change == CHANGES["sglang#25454"]
    # v0.5.12 was published before the merge; v0.5.13 was cut from main after 2026-06-08: both placed.
    old = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version="0.5.12")
    assert old.resid == (3, 31, 59) and "ENGINE_VERSION_UNPLACED" not in old.codes
    new = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version="0.5.13")
    assert new.resid == (2, 30, 58) and not [n for n in new.notes if n.kind == "version"]


def test_seed_story_training_vs_serving_wiring():
    # Served (SGLang, before #25454): ids [2, 30, 58] -> resid[3, 31, 59].
    served = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI, engine_version="pre-#25454")
    assert served.resid == (3, 31, 59)
    # Training fed [embedding, resid[3], resid[31]]: the team's fix ids [-1, 2, 30] name these points,
    # and a Qwen3 target's capture loop (qwen2.py) would feed them...
    fix = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch="Qwen3ForCausalLM")
    assert fix.resid == (0, 3, 31) and not fix.fatal
    assert fix.codes == ("SGLANG_ID_MINUS1_RESID0",) and "qwen2.py" in fix.rule
    # ...but the seed's Kimi-K2 target crashes on -1 before #25454 and never reaches it since.
    old = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch=KIMI, engine_version="pre-#25454")
    assert old.fatal_codes == ("SGLANG_ID_MINUS1_TYPEERROR",) and "deepseek_v2.py" in old.rule
    new = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch=KIMI, engine_version="post-#25454")
    assert new.resid == (2, 30) and new.fatal_codes == ("SGLANG_ID_MINUS1_STOPPED",)


# ---- SGLang id -1: loop index 0, tested before layer 0 while the residual is still None

@pytest.mark.parametrize("arch, file, captures", [
    ("LlamaForCausalLM", "llama.py", False), ("MistralForCausalLM", "llama.py", False),  # mistral.py: a subclass
    ("Phi3ForCausalLM", "llama.py", False), ("InternLM3ForCausalLM", "llama.py", False),
    (KIMI, "deepseek_v2.py", False), ("DeepseekV32ForCausalLM", "deepseek_v2.py", False),
    ("KimiK25ForConditionalGeneration", "deepseek_v2.py", False), ("Qwen2ForCausalLM", "qwen2.py", True),
    ("Qwen3ForCausalLM", "qwen2.py", True), ("Qwen3MoeForCausalLM", "qwen2_moe.py", True)])
@pytest.mark.parametrize("engine", ["sglang", "specforge"])
def test_sglang_id_minus_one_per_model_file(engine, arch, file, captures):
    res = resolve_aux_layers(engine, [-1, 2, 30], 61, arch=arch, engine_version="pre-#25454")
    assert res.resid == (0, 3, 31)
    [note] = [n for n in res.notes if n.code.startswith("SGLANG_ID_MINUS1_")]
    assert note.code == ("SGLANG_ID_MINUS1_RESID0" if captures else "SGLANG_ID_MINUS1_TYPEERROR")
    assert note.kind == ("note" if captures else "breaks")
    assert note.confirmed and res.to_dict()["confirmed"] and not res.unconfirmed  # read in the file
    # the words name the file and the versions of it read
    assert file in note.text and "read: " in note.text and "release wheels" in note.text
    # SpecForge 0.2.0 refuses any negative id before training, whatever SGLang's file does with it
    assert bool(res.fatal) is (not captures or engine == "specforge")
    assert ("SPECFORGE_IDS_REJECTED" in res.fatal_codes) is (engine == "specforge")
    if engine == "specforge":
        with pytest.raises(Eagle3LabError, match="three non-negative"):
            to_engine_ids(engine, [0, 3, 31], 61, arch=arch, engine_version="pre-#25454")
    elif captures:
        assert to_engine_ids(engine, [0, 3, 31], 61, arch=arch, engine_version="pre-#25454") == [-1, 2, 30]
    else:
        with pytest.raises(Eagle3LabError, match=f"{file}.*TypeError"):
            to_engine_ids(engine, [0, 3, 31], 61, arch=arch, engine_version="pre-#25454")


# Loop index 0 per model file, release wheels 0.5.4-0.5.23: the last release computing `hidden_states + residual`
# there (TypeError) and the first capturing resid[0]; 0.5.23 run on CPU (tests/oracles/test_layer_ids_sglang.py).
INDEX0_CHANGES = [(LLAMA, "llama.py", "0.5.21", "0.5.22", "sglang-llama-boundary"),
                  (KIMI, "deepseek_v2.py", "0.5.13", "0.5.14", "sglang-deepseek-capture"),
                  ("KimiK25ForConditionalGeneration", "deepseek_v2.py", "0.5.13", "0.5.14", "sglang-deepseek-capture"),
                  ("Glm4MoeLiteForCausalLM", "glm4_moe_lite.py", "0.5.20", "0.5.21", "sglang-glm4-lite-boundary"),
                  ("GptOssForCausalLM", "gpt_oss.py", "0.5.16", "0.5.17", "sglang#32334")]


@pytest.mark.parametrize("arch, file, last_crash, first_capture, change", INDEX0_CHANGES)
@pytest.mark.parametrize("engine", ["sglang", "specforge"])
def test_sglang_loop_index_0_captures_the_embedding_from_a_release_per_file(engine, arch, file, last_crash,
                                                                            first_capture, change):
    change = CHANGES[change]
    assert (change.last_without, change.first_with) == (last_crash, first_capture)
    ids = [1, -1, 30] if file in ("deepseek_v2.py", "glm4_moe_lite.py") else [-1, 2, 30]  # +1 on: first id 1
    for version, crashes in [(last_crash, True), (first_capture, False), ("0.5.23", False), (None, False)]:
        res = resolve_aux_layers(engine, ids, 61, arch=arch, engine_version=version)
        assert 0 in res.resid and bool(res.fatal) is (crashes or engine == "specforge"), version
        code = "SGLANG_ID_MINUS1_TYPEERROR" if crashes else "SGLANG_ID_MINUS1_RESID0"
        note = _note(res, code)
        assert note.confirmed and file in res.rule, version
        # the words name the file and the release of its change
        assert file in note.text and (f"<= {last_crash}" if crashes else f"from release {first_capture}") in note.text
    # a PR mark before #25454 (0.5.13) lacks each of these later changes; a date after it cannot be placed
    assert resolve_aux_layers(engine, ids, 61, arch=arch, engine_version="pre-#25454").fatal
    dated = resolve_aux_layers(engine, ids, 61, arch=arch, engine_version="2026-07-01")
    assert bool(dated.fatal) is (engine == "specforge")
    assert change in [n.change for n in dated.notes if n.code == "ENGINE_VERSION_UNPLACED"]


@pytest.mark.parametrize("engine", ["sglang", "specforge"])
def test_sglang_deepseek_id_0_as_written_crashes_only_in_0_5_13(engine):
    # since PR #25454 a first id other than 1 is used as-is: id 0 is loop index 0
    assert resolve_aux_layers(engine, [0, 3, 31], 61, arch=KIMI, engine_version="0.5.12").resid == (1, 4, 32)
    crash = resolve_aux_layers(engine, [0, 3, 31], 61, arch=KIMI, engine_version="0.5.13")
    assert crash.resid == (0, 3, 31) and crash.fatal_codes == ("SGLANG_INDEX0_TYPEERROR",)
    for version in ("0.5.14", "0.5.23", None):
        ok = resolve_aux_layers(engine, [0, 3, 31], 61, arch=KIMI, engine_version=version)
        assert ok.resid == (0, 3, 31) and not ok.fatal, version
    assert to_engine_ids(engine, [0, 3, 31], 61, arch=KIMI, engine_version="0.5.23") == [0, 3, 31]


@pytest.mark.parametrize("engine", ["sglang", "specforge"])
def test_sglang_gpt_oss_reads_ids_reaching_n_as_boundaries_since_pr_32334(engine):
    gpt = "GptOssForCausalLM"
    for version in ("0.5.17", "0.5.23", None, "post-#32334"):
        res = resolve_aux_layers(engine, [2, 30, 61], 61, arch=gpt, engine_version=version)
        assert res.resid == (2, 30, 61) and not res.fatal and not res.unconfirmed and "gpt_oss.py" in res.rule
        plus = resolve_aux_layers(engine, [1, 29, 60], 61, arch=gpt, engine_version=version)
        assert plus.resid == (2, 30, 61) and not plus.fatal          # +1, and boundary 61 is captured
    for version in ("0.5.16", "pre-#32334"):
        old = resolve_aux_layers(engine, [1, 29, 60], 61, arch=gpt, engine_version=version)
        assert old.resid == (2, 30) and "SGLANG_FINAL_UNREACHED" in old.fatal_codes, version
        assert resolve_aux_layers(engine, [2, 30, 61], 61, arch=gpt, engine_version=version).fatal


def test_sglang_qwen3_moe_id_n_minus_1_is_an_index_error_at_start_up():
    # qwen2_moe.py Qwen2MoeModel.set_eagle3_layers_to_capture: setattr(self.layers[k+1], ...) (0.5.23 run)
    res = resolve_aux_layers("sglang", [2, 30, 47], 48, arch="Qwen3MoeForCausalLM")
    assert res.resid == (3, 31) and res.fatal_codes == ("SGLANG_PAST_END_INDEXERROR",)


@pytest.mark.parametrize("engine", ["sglang", "specforge"])
def test_sglang_glm4_moe_lite_has_the_first_id_rule_of_pr_25454(engine):
    # sglang wheels 0.5.13 and 0.5.23: glm4_moe_lite.py copies deepseek_v2.py's set_eagle3_layers_to_capture;
    # 0.5.12: Glm4MoeLiteForCausalLM subclasses DeepseekV2ForCausalLM (+1 always)
    glm = "Glm4MoeLiteForCausalLM"
    for version, resid in [("0.5.12", (3, 31, 59)), ("0.5.13", (2, 30, 58)), ("post-#25454", (2, 30, 58))]:
        res = resolve_aux_layers(engine, [2, 30, 58], 61, arch=glm, engine_version=version)
        assert res.resid == resid and "glm4_moe_lite.py" in res.rule and not res.unconfirmed, version
    assert resolve_aux_layers(engine, [1, 29, 57], 61, arch=glm).resid == (2, 30, 58)
    unknown = resolve_aux_layers(engine, [2, 30, 58], 61, arch=glm)
    assert "SGLANG_AUX_IDS_VERSION_DEPENDENT" in unknown.codes and "glm4_moe_lite.py" in unknown.rule
    # id -1 (+1 rule): loop index 0, residual None, `hidden_states + residual` in the 0.5.13 file
    crash = resolve_aux_layers(engine, [-1, 2, 30], 61, arch=glm, engine_version="pre-#25454")
    assert "SGLANG_ID_MINUS1_TYPEERROR" in crash.fatal_codes and "glm4_moe_lite.py" in crash.rule
    zero = resolve_aux_layers(engine, [0, 3, 31], 61, arch=glm, engine_version="0.5.13")
    assert "SGLANG_INDEX0_TYPEERROR" in zero.fatal_codes and "glm4_moe_lite.py" in zero.rule


def test_sglang_id_minus_one_anywhere_in_the_list():
    # Not first: still loop index 0, still captured first (ascending), same per-file outcome.
    llama = resolve_aux_layers("sglang", [2, -1, 30], 61, arch=LLAMA, engine_version="0.5.21")
    assert llama.resid == (0, 3, 31) and llama.fatal_codes == ("SGLANG_ID_MINUS1_TYPEERROR",)
    assert not resolve_aux_layers("sglang", [2, -1, 30], 61, arch=LLAMA, engine_version="0.5.22").fatal
    qwen = resolve_aux_layers("sglang", [2, -1, 30], 61, arch="Qwen3ForCausalLM")
    assert qwen.resid == (0, 3, 31) and not qwen.fatal and "AUX_IDS_REORDERED" in qwen.codes
    # DeepSeek since #25454 with a first id of 1: +1 stays on, so -1 is loop index 0 and crashes there.
    kimi = resolve_aux_layers("sglang", [1, -1, 30], 61, arch=KIMI, engine_version="0.5.13")
    assert kimi.resid == (0, 2, 31) and kimi.fatal_codes == ("SGLANG_ID_MINUS1_TYPEERROR",)
    assert "deepseek_v2.py" in kimi.rule


@pytest.mark.parametrize("arch", [None, "Llama4ForConditionalGeneration", "DeepseekV4ForCausalLM",
                                  "KimiLinearForCausalLM"])
def test_sglang_id_minus_one_unread_file_is_not_confirmed(arch):
    res = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch=arch)
    note = _note(res, "SGLANG_ID_MINUS1_UNCONFIRMED")
    assert note.kind == "note" and not note.confirmed and not res.fatal
    assert note.text in res.unconfirmed and res.to_dict()["confirmed"] is False
    # the words: how to name the architecture, or which it is, and what each file read does at loop index 0
    assert ("--arch" in note.text and "arch=" in note.text) if arch is None else (f"not confirmed for {arch}" in note.text)
    assert "llama.py (up to 0.5.21), deepseek_v2.py (up to 0.5.13)" in note.text and "raise TypeError" in note.text
    assert "qwen2_moe.py" in note.text
    # the inverse never offers an unconfirmed -1
    with pytest.raises(Eagle3LabError, match="cannot capture.*Id -1"):
        to_engine_ids("sglang", [0, 3, 31], 61, arch=arch)


@pytest.mark.parametrize("arch", ["DeepseekV4ForCausalLM", "KimiLinearForCausalLM"])
def test_sglang_unread_architecture_is_not_deepseek_v2_and_not_confirmed(arch):
    # Files of their own (deepseek_v4.py, kimi_linear.py): neither #25454's rule nor deepseek_v2.py's
    # TypeError applies by name; the +1 reading is shown and flagged as an assumption.
    res = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=arch, engine_version="post-#25454")
    assert res.resid == (3, 31, 59) and not res.fatal and "DeepSeek-family" not in res.rule
    [note] = res.notes
    assert note.code == "SGLANG_FILE_NOT_READ" and not note.confirmed and res.unconfirmed == (note.text,)
    assert f"Not confirmed for {arch}" in note.text   # the words name the architecture
    # the read architectures say nothing of the kind
    for read in (LLAMA, KIMI, "Qwen3ForCausalLM"):
        assert resolve_aux_layers("sglang", [1, 29, 57], 61, arch=read).to_dict()["unconfirmed"] == []


def test_sglang_n_minus_one_is_never_reached():
    res = resolve_aux_layers("sglang", [1, 15, 31], 32, arch=LLAMA)
    assert res.resid == (2, 16)
    assert res.fatal_codes == ("SGLANG_FINAL_UNREACHED",)


def test_vllm_final_layer_on_deepseek_depends_on_pr_46973():
    old = resolve_aux_layers("vllm", [2, 30, 61], 61, arch=KIMI, engine_version="2026-06-01")
    assert old.resid == (2, 30) and old.fatal_codes == ("VLLM_DEEPSEEK_FINAL_UNREACHED",)
    new = resolve_aux_layers("vllm", [2, 30, 61], 61, arch=KIMI, engine_version="2026-07-01")
    assert new.resid == (2, 30, 61) and not new.fatal
    assert resolve_aux_layers("vllm", [2, 16, 32], 32, arch=LLAMA).resid == (2, 16, 32)
    # release bounds read in the wheels: 0.24.0 captures ids up to 60 only, 0.25.0 captures id 61
    r24 = resolve_aux_layers("vllm", [2, 30, 61], 61, arch=KIMI, engine_version="0.24.0")
    assert r24.resid == (2, 30) and r24.codes == ("VLLM_DEEPSEEK_FINAL_UNREACHED",)   # placed: no version note
    r25 = resolve_aux_layers("vllm", [2, 30, 61], 61, arch=KIMI, engine_version="0.25.0")
    assert r25.resid == (2, 30, 61) and not r25.notes


DEEPSEEK_FAMILY = [KIMI, "DeepseekV2ForCausalLM", "KimiK25ForConditionalGeneration"]


@pytest.mark.parametrize("engine", ["vllm", "speculators"])
@pytest.mark.parametrize("arch", DEEPSEEK_FAMILY + ["DeepseekV32ForCausalLM"])
def test_vllm_id_0_crashes_deepseek_v2(engine, arch):
    # vllm/model_executor/models/deepseek_v2.py, releases 0.18.0-0.33.0: `hidden_states + residual`, residual None
    version = "0.28.0" if arch == "DeepseekV32ForCausalLM" else None   # V32 has a file of its own from 0.29.0
    res = resolve_aux_layers(engine, [0, 3, 31], 61, arch=arch, engine_version=version)
    assert res.resid == (0, 3, 31)
    assert res.fatal_codes == ("VLLM_DEEPSEEK_ID0_TYPEERROR",)
    assert "deepseek_v2.py" in res.rule and not res.unconfirmed
    assert arch in res.fatal[0]   # the words name the target
    with pytest.raises(Eagle3LabError, match="deepseek_v2.py.*TypeError"):
        to_engine_ids(engine, [0, 3, 31], 61, arch=arch, engine_version=version)
    assert nearest_servable(engine, (0, 3, 31), 61, arch=arch, engine_version=version) == ((1, 3, 31), [1, 3, 31])
    # other targets (EagleModelMixin guards the None residual) and the inverse there: unchanged
    assert not resolve_aux_layers(engine, [0, 3, 31], 61, arch=LLAMA).fatal
    assert to_engine_ids(engine, [0, 3, 31], 61, arch=LLAMA) == [0, 3, 31]


def test_vllm_deepseek_before_0_18_serves_no_eagle3():
    # 0.17.x: config/speculative.py has no DeepSeek model type in aux_hidden_states_supported (ValueError)
    for ids in (None, [2, 30, 58]):
        old = resolve_aux_layers("vllm", ids, 61, arch=KIMI, engine_version="0.17.1")
        assert "VLLM_DEEPSEEK_NO_EAGLE3" in old.fatal_codes
        assert not resolve_aux_layers("vllm", ids, 61, arch=KIMI, engine_version="0.18.0").fatal
    assert not resolve_aux_layers("vllm", [2, 30, 58], 61, arch=LLAMA, engine_version="0.17.1").fatal


def test_vllm_deepseek_v32_has_its_own_file_from_0_29():
    res = resolve_aux_layers("vllm", [0, 3, 61], 61, arch="DeepseekV32ForCausalLM", engine_version="0.29.0")
    assert res.resid == (0, 3) and "deepseek_v32" in res.rule
    # id 0: CUDA guards it, ROCm does not (no deepseek_v2.py TypeError); no capture after the last layer there
    assert res.codes == ("VLLM_DEEPSEEK_V32_ID0_PLATFORM", "VLLM_DEEPSEEK_V32_FINAL_UNREACHED")
    assert res.fatal_codes == ("VLLM_DEEPSEEK_V32_FINAL_UNREACHED",)


def test_vllm_id_0_without_arch_says_what_deepseek_does():
    res = resolve_aux_layers("vllm", [0, 3, 31], 61)
    assert not res.fatal and res.codes == ("VLLM_ID0_ARCH_NEEDED",)


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_unsorted_ids_are_captured_in_ascending_order(engine):
    res = resolve_aux_layers(engine, [29, 2, 16], 32, arch=LLAMA)
    assert list(res.resid) == sorted(res.resid)
    assert res.codes == ("AUX_IDS_REORDERED",)
    assert not res.fatal


@pytest.mark.parametrize("engine", ["vllm", "sglang", "transformerlens"])
def test_duplicates_collapse(engine):
    res = resolve_aux_layers(engine, [2, 2, 16], 32, arch=LLAMA)
    assert len(res.resid) == 2
    assert res.fatal_codes == ("AUX_IDS_REPEATED",)


def test_tiny_target_default_collapses_with_warning():
    res = resolve_aux_layers("vllm", None, 4)  # 2, 4//2, 4-3 -> {1, 2}
    assert res.resid == (1, 2)
    assert "AUX_IDS_WIDTH_CHANGED" in res.codes


@pytest.mark.parametrize("engine, ids", [("vllm", [2, 40]), ("sglang", [2, 40]), ("transformerlens", [40])])
def test_out_of_range_is_dropped_with_warning(engine, ids):
    res = resolve_aux_layers(engine, ids, 32)
    assert res.resid == ((2,) if engine == "vllm" else (3,) if engine == "sglang" else ())
    assert res.fatal_codes == ("AUX_IDS_OUT_OF_RANGE",)


@pytest.mark.parametrize("engine, ids", [("vllm", [-1, 2]), ("speculators", [0, -3]), ("sglang", [-2, 3]),
                                         ("specforge", [-5])])
def test_negative_ids_error_names_engine_behaviour(engine, ids):
    with pytest.raises(Eagle3LabError, match="never") as err:
        resolve_aux_layers(engine, ids, 32)
    assert engine in str(err.value) and "eagle_aux_hidden_state_layer_ids" in str(err.value)


def test_bad_input_errors():
    with pytest.raises(Eagle3LabError, match="one of"):
        resolve_aux_layers("tensorrt", [1], 32)
    with pytest.raises(Eagle3LabError, match="non-empty"):
        resolve_aux_layers("vllm", [], 32)
    with pytest.raises(Eagle3LabError, match="integer"):
        resolve_aux_layers("vllm", [1.5], 32)
    with pytest.raises(Eagle3LabError, match="num_layers"):
        resolve_aux_layers("vllm", [1], 0)


def test_eagle_ignores_written_ids():
    res = resolve_aux_layers("eagle", [1, 2, 3], 32)
    assert res.resid == (2, 16, 29)
    assert res.codes == ("EAGLE_IDS_IGNORED",)


def test_transformerlens_hook_names():
    res = resolve_aux_layers("transformerlens", ["blocks.0.hook_resid_pre", "blocks.3.hook_resid_post", 9], 32)
    assert res.resid == (0, 4, 9)
    with pytest.raises(Eagle3LabError, match="hook_resid_mid"):
        resolve_aux_layers("transformerlens", ["blocks.3.hook_resid_mid"], 32)


def test_ids_without_num_layers_skip_range_checks():
    res = resolve_aux_layers("sglang", [2, 30, 58])
    assert res.resid == (3, 31, 59)
    assert "AUX_IDS_NUM_LAYERS_NEEDED" in res.codes


def test_to_dict_is_json():
    res = resolve_aux_layers("sglang", [2, 30, 58], 61, arch=KIMI)
    d = json.loads(json.dumps(res.to_dict()))
    assert d["resid"] == [2, 30, 58] and d["ids_as_written"] == [2, 30, 58]
    assert d["label"] == "[resid[2], resid[30], resid[58]]"
    assert set(d) >= {"engine", "ids_as_written", "resid", "rule", "warnings", "defaulted"}


# ---- the inverse

@pytest.mark.parametrize("engine", ["vllm", "speculators", "sglang", "specforge", "transformerlens"])
@pytest.mark.parametrize("n, arch, version", [(61, KIMI, "pre-#25454"), (61, KIMI, "post-#25454"), (32, LLAMA, None)])
def test_to_engine_ids_round_trips(engine, n, arch, version):
    for resid in ([2, n // 2, n - 3], [1, 3, n - 1], [5]):
        if engine == "specforge" and len(resid) != 3:   # SpecForge 0.2.0 takes exactly three ids
            with pytest.raises(Eagle3LabError, match="three non-negative"):
                to_engine_ids(engine, resid, n, arch=arch, engine_version=version)
            continue
        ids = to_engine_ids(engine, resid, n, arch=arch, engine_version=version)
        back = resolve_aux_layers(engine, ids, n, arch=arch, engine_version=version)
        assert list(back.resid) == resid and not back.fatal, (engine, resid, ids)


def test_to_engine_ids_examples():
    assert to_engine_ids("sglang", [2, 30, 58], 61, arch=KIMI) == [1, 29, 57]  # same meaning in every version
    assert to_engine_ids("sglang", [3, 31, 59], 61, arch=KIMI, engine_version="post-#25454") == [3, 31, 59]
    assert to_engine_ids("sglang", [3, 31, 59], 61, arch=KIMI, engine_version="pre-#25454") == [2, 30, 58]
    assert to_engine_ids("vllm", [0, 3, 31], 61, arch=LLAMA) == [0, 3, 31]
    assert to_engine_ids("vllm", [1, 3, 31], 61, arch=KIMI) == [1, 3, 31]   # resid[0] crashes deepseek_v2.py
    assert to_engine_ids("transformerlens", [0, 32], 32) == ["blocks.0.hook_resid_pre", "blocks.31.hook_resid_post"]
    assert to_engine_ids("eagle", [2, 16, 29], 32) == [2, 16, 29]


def test_to_engine_ids_refuses_what_the_engine_cannot_capture():
    with pytest.raises(Eagle3LabError, match="TypeError"):
        to_engine_ids("sglang", [0, 3, 31], 61, arch=KIMI, engine_version="0.5.13")  # embedding, deepseek file
    with pytest.raises(Eagle3LabError, match="never reached"):
        to_engine_ids("sglang", [2, 16, 32], 32, arch=LLAMA)  # final layer output in SGLang
    with pytest.raises(Eagle3LabError, match="ascending"):
        to_engine_ids("vllm", [31, 3], 61)
    with pytest.raises(Eagle3LabError, match="0..61"):
        to_engine_ids("vllm", [62], 61)
    with pytest.raises(Eagle3LabError, match="cannot capture"):
        to_engine_ids("eagle", [0, 3, 31], 61)
    # resid[0] works where the target's capture loop is read to guard the None residual (Qwen3: qwen2.py).
    ids = to_engine_ids("sglang", [0, 3, 31], 61, arch="Qwen3ForCausalLM")
    assert ids == [-1, 2, 30]
    assert resolve_aux_layers("sglang", ids, 61, arch="Qwen3ForCausalLM").codes == ("SGLANG_ID_MINUS1_RESID0",)


def test_to_engine_ids_uses_unsorted_ids_when_only_they_work():
    # Since #25454 a DeepSeek-family list starting with 1 gets +1; putting 1 last keeps ids as-is.
    ids = to_engine_ids("sglang", [1, 3, 60], 61, arch=KIMI, engine_version="post-#25454")
    assert ids == [3, 60, 1]


# ---- the CLI

def test_cli_ids_json(capsys):
    from eagle3lab.app.cli import main

    rc = main(["ids", "sglang", "2,30,58", "--num-layers", "61", "--arch", KIMI, "--engine-version", "2026-01-01",
               "--to", "vllm", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert out["resid"] == [3, 31, 59] and out["ids_as_written"] == [2, 30, 58] and not out["breaks"]
    assert out["to"] == {"engine": "vllm", "ids": [3, 31, 59], "error": None}


def test_cli_ids_text_and_exit_codes(capsys):
    from eagle3lab.app.cli import main

    assert main(["ids", "sglang", "-1", "2", "30", "--num-layers", "61", "--arch", KIMI,
                 "--engine-version", "pre-#25454", "--to", "vllm"]) == 1  # the engine would crash
    text = capsys.readouterr().out
    assert "resid[0] (embedding), resid[3], resid[31]" in text and "BREAKS" in text
    assert "in vllm: cannot" in text and "deepseek_v2.py's DeepseekV2Model" in text  # vLLM crashes on id 0 too
    assert main(["ids", "sglang", "-1", "2", "30", "--num-layers", "61", "--arch", "Qwen3ForCausalLM",
                 "--to", "vllm"]) == 0
    assert "write [0, 3, 31]" in capsys.readouterr().out
    assert main(["ids", "vllm", "--num-layers", "32"]) == 0
    assert "[resid[2], resid[16], resid[29]]" in capsys.readouterr().out
    assert main(["ids", "vllm", "-5", "--num-layers", "32"]) == 2
    assert "-5" in capsys.readouterr().err
    assert main(["ids", "vllm", "0", "3", "--num-layers", "61", "--to", "sglang", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["to"]["ids"] is None and "--arch in `eagle3lab ids`" in out["to"]["error"]
    assert main(["ids", "vllm", "0", "3", "--num-layers", "61", "--arch", LLAMA, "--to", "sglang",
                 "--engine-version", "0.5.21", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["to"]["ids"] is None and "llama.py" in out["to"]["error"] and "TypeError" in out["to"]["error"]
    assert main(["ids", "vllm", "0", "3", "--num-layers", "61", "--arch", LLAMA, "--to", "sglang", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["to"]["ids"] == [-1, 2]   # llama.py from 0.5.22


def test_cli_ids_minus_one_exit_code_follows_the_model_file(capsys):
    from eagle3lab.app.cli import main

    # exit 0 for both "read to work" (Qwen3) and "not read" (no --arch); "confirmed" tells them apart
    for arch, rc, confirmed in [("Qwen3ForCausalLM", 0, True), (LLAMA, 1, True), (None, 0, False)]:
        argv = ["ids", "sglang", "-1", "2", "30", "--num-layers", "61", "--engine-version", "0.5.21", "--json"] + (
            ["--arch", arch] if arch else [])
        assert main(argv) == rc, arch
        out = json.loads(capsys.readouterr().out)
        assert out["resid"] == [0, 3, 31] and out["breaks"] is bool(rc) and out["confirmed"] is confirmed
        assert any(n["code"].startswith("SGLANG_ID_MINUS1_") and n["text"].startswith("Id -1") for n in out["notes"])
        assert bool(out["unconfirmed"]) is not confirmed and all(n.keys() == {"kind", "code", "text"} for n in out["notes"])
    assert main(["ids", "sglang", "-1", "2", "30", "--num-layers", "61"]) == 0
    assert "(note, SGLANG_ID_MINUS1_UNCONFIRMED, not confirmed): Id -1" in capsys.readouterr().out


def test_cli_ids_bad_version_names_the_flag(capsys):
    from eagle3lab.app.cli import main

    assert main(["ids", "sglang", "2", "30", "--num-layers", "61", "--engine-version", "banana"]) == 2
    err = capsys.readouterr().err
    assert "--engine-version" in err and "'banana'" in err and "engine_version:" not in err


def test_nearest_servable_moves_only_what_the_engine_cannot_capture():
    from eagle3lab.engines.layer_ids import nearest_servable

    # SGLang's llama.py up to 0.5.21 cannot feed the embedding: resid[0] -> resid[1]; the rest stays
    assert nearest_servable("sglang", (0, 3, 7), 12, arch="LlamaForCausalLM", engine_version="0.5.21") == (
        (1, 3, 7), [0, 2, 6])
    assert nearest_servable("sglang", (0, 3, 7), 12, arch="LlamaForCausalLM") == ((0, 3, 7), [-1, 2, 6])  # 0.5.22 on
    assert nearest_servable("sglang", (2, 6, 12), 12, arch="LlamaForCausalLM") == ((2, 6, 11), [1, 5, 10])
    # what an engine can express is returned as it is
    assert nearest_servable("vllm", (0, 3, 7), 12) == ((0, 3, 7), [0, 3, 7])
    assert nearest_servable("sglang", (3, 7, 11), 12, arch="LlamaForCausalLM") == ((3, 7, 11), [2, 6, 10])
    # two points that cannot stay: the nearest ascending wiring the engine captures as a whole
    assert nearest_servable("sglang", (0, 1, 7), 12, arch="LlamaForCausalLM", engine_version="0.5.21") == (
        (1, 2, 7), [0, 1, 6])
    # DeepSeek-family after SGLang #25454: a list starting with id 1 switches the convention, so resid[1]
    # is servable as part of [1, 3, 7] though not alone; the nearest answer is found as a whole
    assert nearest_servable("sglang", (0, 3, 7), 61, arch="DeepseekV3ForCausalLM", engine_version="0.5.13")[0] == (1, 3, 7)
    assert nearest_servable("eagle", (0, 3, 7), 12) == ((2, 6, 9), [2, 6, 9])   # EAGLE's fixed choice is near
    with pytest.raises(Eagle3LabError, match="no wiring within 8 moves"):
        nearest_servable("eagle", (0, 3, 7), 61)                                 # ... and here it is not


def test_plus_one_ids_and_fatal_codes_are_what_callers_match():
    from eagle3lab.engines.layer_ids import NOTE_CODES, plus_one_ids
    assert plus_one_ids((0, 3, 31)) == [-1, 2, 30]          # the real team's fix for resid[0, 3, 31]
    # DeepSeek-family on an old build: id -1 is loop index 0, where the residual is None -> a TypeError
    crash = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch="DeepseekV3ForCausalLM", engine_version="0.5.12")
    assert crash.fatal_codes and all(c in NOTE_CODES for c in crash.fatal_codes)
    assert len(crash.fatal_codes) == len(crash.fatal)
    assert any(c.endswith("TYPEERROR") for c in crash.fatal_codes)
    healthy = resolve_aux_layers("sglang", [1, 5, 8], 12, arch="LlamaForCausalLM")
    assert healthy.fatal_codes == () and not healthy.fatal


def test_qwen3_forward_releases_come_from_their_change():
    """qwen3.py: Qwen3Model runs Qwen2Model's forward in the 0.5.20 wheel, its own in the 0.5.21 one: the words of
    id -1's note name the releases of the change that records it (no release typed beside it)."""
    from eagle3lab.engines.layer_ids import CHANGES

    change = CHANGES["sglang-qwen3-forward"]
    assert (change.last_without, change.first_with) == ("0.5.20", "0.5.21")
    text = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch="Qwen3ForCausalLM").notes
    assert any(f"runs its forward up to {change.last_without}; from {change.first_with} a forward of its own"
               in n.text for n in text)
