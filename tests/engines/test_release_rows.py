"""Adding an engine release's id rule is one row: a fictional SGLang 0.5.24 whose llama.py also captures loop index N
(after the last layer, as gpt_oss.py does since PR #32334) is added to ``RULES`` with its ``Change``, the
newest release read moves to it, and ``eagle3lab ids``, ``eagle3lab inspect`` and doctor's serving decision
(``nearest_servable``, which ``doctor.fix_choice`` asks) follow it. Nothing else is edited."""

import json
from dataclasses import replace

import pytest

from eagle3lab.app.cli import main
from eagle3lab.engines import layer_ids
from eagle3lab.engines.layer_ids import (
    AT_DRAFT_FC,
    CAPTURE,
    CHANGES,
    RULES,
    nearest_servable,
    resolve_aux_layers,
)
from eagle3lab.engines.versions import Change
from eagle3lab.errors import Eagle3LabError
from eagle3lab.findings import Severity

LLAMA, N = "LlamaForCausalLM", 12
IDS = [2, 6, N - 1]              # SGLang ids: loop indices 3, 7 and N (+1 rule)
FICTIONAL = "sglang-fictional-llama-final"


@pytest.fixture
def release_0_5_24(monkeypatch):
    """SGLang 0.5.24 (fictional): llama.py captures loop index N. One Change, one row, the newest release read."""
    newest = [r for r in RULES if (r.engine, r.kind, r.key) == ("sglang", CAPTURE, "llama.py")][-1]
    change = Change("sglang", "llama.py captures loop index N (fictional)", last_without="0.5.23", first_with="0.5.24")
    row = replace(newest, since=change, value=replace(newest.value, final=True), note=newest.note
                  + " From {since} loop index N is captured after the last layer (read up to {newest}).")
    monkeypatch.setitem(CHANGES, FICTIONAL, change)   # listed with the others (one record per change)
    monkeypatch.setattr(layer_ids, "RULES", RULES + (row,))
    monkeypatch.setattr(layer_ids, "SGLANG_NEWEST_READ", "0.5.24")


def test_the_row_decides_the_resolution(release_0_5_24):
    old = resolve_aux_layers("sglang", IDS, N, arch=LLAMA, engine_version="0.5.23")
    assert old.resid == (3, 7) and [n.code for n in old.notes if n.kind == "breaks"] == ["SGLANG_FINAL_UNREACHED"]
    new = resolve_aux_layers("sglang", IDS, N, arch=LLAMA, engine_version="0.5.24")
    assert new.resid == (3, 7, N) and not new.fatal and not new.notes
    assert "From 0.5.24 loop index N is captured" in new.rule and "read up to 0.5.24" in new.rule
    # a build the row's change cannot place behaves as the newest row, and says so (a version note naming it)
    dated = resolve_aux_layers("sglang", IDS, N, arch=LLAMA, engine_version="2026-09-01")
    assert dated.resid == (3, 7, N) and [n.change for n in dated.notes if n.kind == "version"] == [CHANGES[FICTIONAL]]
    # the rows of other files, and this file's older releases, are untouched
    assert resolve_aux_layers("sglang", IDS, N, arch="Qwen3ForCausalLM", engine_version="0.5.24").resid == (3, 7)
    assert resolve_aux_layers("sglang", [-1, 2, 6], N, arch=LLAMA, engine_version="0.5.21").fatal


def test_without_the_row_nothing_changed():
    res = resolve_aux_layers("sglang", IDS, N, arch=LLAMA, engine_version="0.5.24")
    assert res.resid == (3, 7) and res.fatal and layer_ids.SGLANG_NEWEST_READ == "0.5.23"


def test_ids_follows_the_row(release_0_5_24, capsys):
    args = ["ids", "sglang", *map(str, IDS), "--num-layers", str(N), "--arch", LLAMA, "--json"]
    assert main([*args, "--engine-version", "0.5.23"]) == 1
    assert json.loads(capsys.readouterr().out)["resid"] == [3, 7]
    assert main([*args, "--engine-version", "0.5.24"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["resid"] == [3, 7, N] and not out["breaks"] and "read up to 0.5.24" in out["rule"]


@pytest.fixture
def draft_config(tmp_path):
    """A draft config.json whose SGLang ids (eagle_config) reach loop index N, and its Llama target's config."""
    target = tmp_path / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({
        "architectures": [LLAMA], "model_type": "llama", "hidden_size": 192, "intermediate_size": 512,
        "num_attention_heads": 6, "num_key_value_heads": 2, "num_hidden_layers": N, "vocab_size": 4096}))
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 192,
        "intermediate_size": 512, "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 32,
        "num_hidden_layers": 1, "vocab_size": 4096, "draft_vocab_size": 2048, "max_position_embeddings": 2048,
        "eagle_config": {"use_aux_hidden_state": True, "eagle_aux_hidden_state_layer_ids": IDS}}))
    return draft, target


def test_inspect_follows_the_row(release_0_5_24, draft_config, capsys):
    draft, target = draft_config

    def sglang_row(version):
        main(["inspect", str(draft), "--target", str(target), "--engine", "sglang", "--engine-version", version,
              "--json"])
        return json.loads(capsys.readouterr().out)["aux_ids"]["by_engine"]["sglang"]

    old, new = sglang_row("0.5.23"), sglang_row("0.5.24")
    assert old["resid"] == [3, 7] and old["fatal"]
    assert new["resid"] == [3, 7, N] and not new["fatal"] and "read up to 0.5.24" in new["rule"]


def test_the_serving_decision_follows_the_row(release_0_5_24):
    """doctor's fix must be servable by the build: resid[N] is, from the fictional release on."""
    wanted = (3, 7, N)
    assert nearest_servable("sglang", wanted, N, arch=LLAMA, engine_version="0.5.24") == (wanted, IDS)
    nearest, ids = nearest_servable("sglang", wanted, N, arch=LLAMA, engine_version="0.5.23")
    assert nearest == (3, 7, N - 1) and ids == [2, 6, N - 2]


def test_every_note_has_a_listed_code():
    """Callers match codes, never text: every note the translator writes carries a code of NOTE_CODES, and the
    codes are documented."""
    from eagle3lab import bundled

    seen = set()
    for engine in ("sglang", "specforge", "vllm", "speculators", "eagle"):
        for arch in (None, LLAMA, "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM", "Glm4MoeLiteForCausalLM",
                     "Qwen3MoeForCausalLM", "GptOssForCausalLM", "FooForCausalLM"):
            for ids in (None, [-1, 2, 6], [0, 2, 6], [2, 6, N], [6, 2, 6], [2, 6, N + 3], [1, 6, N - 1]):
                for version in (None, "0.5.12", "0.5.21", "0.5.23", "2026-09-01", "0.17.0", "0.24.0", "0.33.0"):
                    for n in (N, None):
                        try:
                            res = resolve_aux_layers(engine, ids, n, arch=arch, engine_version=version)
                        except Eagle3LabError:   # bad input for this engine: no notes to check
                            continue
                        for note in res.notes:
                            assert note.code in layer_ids.NOTE_CODES, (engine, arch, ids, version, note.text)
                            seen.add(note.code)
    doc = (bundled.ROOT / "docs" / "cli" / "ids.md").read_text()
    assert all(f"`{code}`" in doc for code in layer_ids.NOTE_CODES)
    assert len(seen) >= 25   # the grid reaches nearly every code


def test_vllm_deepseek_rows_place_a_build_by_their_order():
    """vLLM's deepseek_v2.py rules (layer_ids.RULES) hold in the order their changes landed: a build with PR #46973 (0.25.0)
    has 0.18.0's EAGLE-3 support, so no version note doubts it; a build before #46973 cannot be placed by 0.18.0's
    change (no PR, no date) and says so, and misses id N."""
    after = resolve_aux_layers("vllm", [2, 30, 61], 61, arch="DeepseekV3ForCausalLM", engine_version="post-#46973")
    assert after.resid == (2, 30, 61) and "ENGINE_VERSION_UNPLACED" not in after.codes
    before = resolve_aux_layers("vllm", [2, 30, 61], 61, arch="DeepseekV3ForCausalLM", engine_version="pre-#46973")
    assert before.resid == (2, 30) and "VLLM_DEEPSEEK_FINAL_UNREACHED" in before.codes
    assert [n.change for n in before.notes if n.kind == "version"] == [CHANGES["vllm-deepseek-eagle3"]]


# ----------------------------------------------------------------------------- corrected facts (issue 32)

def test_specforge_never_proposes_id_minus_1():
    """SpecForge 0.2.0's model_providers.py resolve_eagle_capture_layers takes exactly three non-negative ids: -1
    (resid[0] under the +1 rule) is refused before training, so to_engine_ids must not propose it."""
    from eagle3lab.engines.layer_ids import to_engine_ids

    with pytest.raises(Eagle3LabError, match="three non-negative"):
        to_engine_ids("specforge", [0, 3, 11], N, arch=LLAMA, engine_version="0.5.23")
    res = resolve_aux_layers("specforge", [-1, 2, 10], N, arch=LLAMA, engine_version="0.5.23")
    assert "SPECFORGE_IDS_REJECTED" in res.fatal_codes and "resid[1] (id 0)" in res.fatal[-1]
    assert "SPECFORGE_IDS_REJECTED" in resolve_aux_layers("specforge", [2, 10], N, arch=LLAMA).fatal_codes
    assert to_engine_ids("specforge", [1, 4, 11], N, arch=LLAMA) == [0, 3, 10]
    # SGLang itself serves id -1 from llama.py 0.5.22 on: only SpecForge refuses it
    assert to_engine_ids("sglang", [0, 3, 11], N, arch=LLAMA, engine_version="0.5.23") == [-1, 2, 10]


@pytest.mark.parametrize("arch", ["MistralLarge3ForCausalLM", "DeepseekForCausalLM", "GlmMoeDsaForCausalLM"])
def test_vllm_deepseek_subclasses_run_deepseek_v2_loop(arch):
    """vLLM wheels 0.18.0-0.32.0: MistralLarge3ForCausalLM (mistral_large_3.py) subclasses deepseek_v2.py's
    DeepseekV3ForCausalLM, DeepseekForCausalLM and GlmMoeDsaForCausalLM are deepseek_v2.py classes: id 0 is the
    unguarded-residual TypeError, id N is captured only from PR #46973 (0.25.0) (GlmMoeDsa on CUDA runs
    deepseek_v32 from 0.29.0: its rule, below)."""
    res = resolve_aux_layers("vllm", [0, 3, 31], 61, arch=arch, engine_version="0.28.0", engine_platform="cpu")
    assert "VLLM_DEEPSEEK_ID0_TYPEERROR" in res.fatal_codes and "deepseek_v2.py" in res.rule
    final = resolve_aux_layers("vllm", [2, 30, 61], 61, arch=arch, engine_version="0.24.0")
    assert final.resid == (2, 30) and "VLLM_DEEPSEEK_FINAL_UNREACHED" in final.fatal_codes
    # 0.18.0-0.21.0: an eagle3 target's model_type must contain a listed name (config/speculative.py)
    refused = resolve_aux_layers("vllm", [2, 30, 58], 61, arch=arch, engine_version="0.21.0")
    assert ("VLLM_DEEPSEEK_NO_EAGLE3" in refused.fatal_codes) is (arch != "MistralLarge3ForCausalLM")
    assert not resolve_aux_layers("vllm", [2, 30, 58], 61, arch=arch, engine_version="0.22.0").fatal


@pytest.mark.parametrize("arch", ["DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"])
def test_vllm_dsa_final_layer_depends_on_the_platform(arch):
    """vllm/models/deepseek_v32/__init__.py (0.29.0-0.32.0): nvidia/model.py on CUDA never captures id N; CPU and
    XPU import deepseek_v2.py's classes, which capture it (since PR #46973)."""
    cuda = resolve_aux_layers("vllm", [2, 30, 61], 61, arch=arch, engine_version="0.32.0", engine_platform="cuda")
    assert cuda.resid == (2, 30) and "VLLM_DEEPSEEK_V32_FINAL_UNREACHED" in cuda.fatal_codes
    cpu = resolve_aux_layers("vllm", [2, 30, 61], 61, arch=arch, engine_version="0.32.0", engine_platform="cpu")
    assert cpu.resid == (2, 30, 61) and not cpu.fatal and "deepseek_v2.py" in cpu.rule
    assumed = resolve_aux_layers("vllm", [2, 30, 61], 61, arch=arch, engine_version="0.32.0")
    assert assumed.fatal_codes == ("VLLM_DEEPSEEK_V32_FINAL_UNREACHED",)   # as on CUDA
    assert "CUDA build assumed" in assumed.fatal[0]   # and the words say the platform was assumed


KIMI_K2, KIMI_K25 = "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration"


@pytest.mark.parametrize("version, code, words", [
    ("0.5.4", "SGLANG_NO_EAGLE3_HOOK", "AttributeError"),        # no DeepSeek EAGLE-3 code before PR #12319
    ("0.5.5", "SGLANG_ID_MINUS1_TYPEERROR", "TypeError"), ("0.5.12", "SGLANG_ID_MINUS1_TYPEERROR", "TypeError"),
    ("0.5.13", "SGLANG_ID_MINUS1_UNREACHED", "RuntimeError at the draft's first forward"),
    ("0.5.16", "SGLANG_ID_MINUS1_UNREACHED", "RuntimeError at the draft's first forward"),
    ("0.5.17", "SGLANG_ID_MINUS1_STOPPED", "AssertionError"), ("0.5.19", "SGLANG_ID_MINUS1_STOPPED", "AssertionError"),
    ("0.5.20", "SGLANG_ID_MINUS1_STOPPED", "RuntimeError"), ("0.5.23", "SGLANG_ID_MINUS1_STOPPED", "RuntimeError")])
def test_the_seed_ids_per_sglang_release(version, code, words):
    """The seed's [-1, 2, 30] on Kimi-K2 (DeepseekV3ForCausalLM, 61 layers), read in the release wheels: 0.5.4 has no
    hook, the +1 rule meets the None residual at loop index 0 up to 0.5.12, and from PR #25454 (0.5.13) -1 is never
    reached: nothing counts the states up to 0.5.16 (the draft's fc fails on them), an assert from 0.5.17, a
    RuntimeError from 0.5.20."""
    res = resolve_aux_layers("sglang", [-1, 2, 30], 61, arch=KIMI_K2, engine_version=version)
    [note] = [n for n in res.notes if n.code == code]
    assert note.kind == "breaks" and words in note.text
    if code.startswith("SGLANG_ID_MINUS1_UN") or code.endswith("STOPPED"):
        assert res.resid == (2, 30)   # two states reach a three-slot fc
    # every build stops: from 0.5.17 the count check at the target's first forward, before it the draft's fc, whose
    # Linear(3H, H) cannot take the two states that come back
    assert res.stops == {"SGLANG_NO_EAGLE3_HOOK": "at start-up", "SGLANG_ID_MINUS1_UNREACHED": AT_DRAFT_FC}.get(
        code, "at the first forward")


def test_kimi_k25_gets_its_hook_in_0_5_10():
    """kimi_k25.py: no file up to 0.5.8, KimiK25ForConditionalGeneration without set_eagle3_layers_to_capture in 0.5.9
    (start-up AttributeError), the hook from PR #19689 (0.5.10)."""
    for version, words in (("0.5.8", "no KimiK25ForConditionalGeneration class"), ("0.5.9", "AttributeError")):
        res = resolve_aux_layers("sglang", [1, 29, 57], 61, arch=KIMI_K25, engine_version=version)
        assert "SGLANG_NO_EAGLE3_HOOK" in res.fatal_codes and words in res.fatal[0], version
    assert not resolve_aux_layers("sglang", [1, 29, 57], 61, arch=KIMI_K25, engine_version="0.5.10").fatal
    assert not resolve_aux_layers("sglang", [1, 29, 57], 61, arch=KIMI_K2, engine_version="0.5.5").fatal
    # a mark after PR #25454 has both hooks; SpecForge's own SGLang is not this build
    assert not resolve_aux_layers("sglang", [1, 29, 57], 61, arch=KIMI_K25, engine_version="post-#25454").fatal
    assert not resolve_aux_layers("specforge", [1, 29, 57], 61, arch=KIMI_K2, engine_version="0.5.4").fatal


def test_from_0_5_14_ids_0_3_31_feed_exactly_those_points():
    for version in ("0.5.14", "0.5.20", "0.5.23"):
        res = resolve_aux_layers("sglang", [0, 3, 31], 61, arch=KIMI_K2, engine_version=version)
        assert res.resid == (0, 3, 31) and not res.fatal, version


SEED_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1,
              "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]}}
SEED_TARGET = {"architectures": [KIMI_K2], "num_hidden_layers": 61}
LAUNCH = ("python -m sglang.launch_server --model-path t --speculative-algorithm EAGLE3 --speculative-draft-model-path "
          "d --speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4")


@pytest.mark.parametrize("version, extra, fires", [
    ("0.5.5", "", True), ("0.5.10", "", True), ("0.5.11", "", False), ("0.5.10", " --disable-cuda-graph", False),
    ("2026-04-14", "", True), ("2026-04-16", "", False)])
def test_sglang_cuda_graphs_captured_with_the_default_ids_before_pr_22836(version, extra, fires):
    """model_runner.py / cuda_graph_runner.py, wheels 0.5.4-0.5.10: the graphs are captured with the default ids and
    the configured ones reach only eager forwards; PR #22836 (merged 2026-04-15, 0.5.11) fixed it."""
    from eagle3lab.engines.flags import resolve_flags

    res = resolve_flags("sglang", LAUNCH + extra, SEED_TARGET, SEED_DRAFT, engine_version=version)
    f = res.finding("SGL_CUDA_GRAPH_DEFAULT_IDS")
    assert bool(f) is fires
    if fires:
        assert f.severity == Severity.WARNING and "resid[2, 30, 58]" in f.text and "--disable-cuda-graph" in f.fix
    # ids whose points ARE the default: graphs and eager forwards agree, nothing to say
    default = {**SEED_DRAFT, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}}
    assert not resolve_flags("sglang", LAUNCH, SEED_TARGET, default, engine_version="0.5.5").finding(
        "SGL_CUDA_GRAPH_DEFAULT_IDS")


def test_sglang_two_batch_overlap_skips_capture_past_first_k_dense_replace():
    """deepseek_v2.py (release wheels 0.5.5-0.5.23): with forward_batch.can_run_tbo the capture loop stops at
    first_k_dense_replace; the later layers run through model_forward_stages, which captures nothing."""
    from eagle3lab.engines.flags import resolve_flags

    target = {**SEED_TARGET, "first_k_dense_replace": 1}   # Kimi-K2's
    res = resolve_flags("sglang", LAUNCH + " --enable-two-batch-overlap", target, SEED_DRAFT, engine_version="0.5.23")
    f = res.finding("SGL_TBO_SKIPS_AUX_CAPTURE")
    assert f.severity == Severity.ERROR and "resid[2, 30, 58]" in f.text and "layer 1" in f.text
    assert not resolve_flags("sglang", LAUNCH, target, SEED_DRAFT, engine_version="0.5.23").finding(
        "SGL_TBO_SKIPS_AUX_CAPTURE")
    llama = {"architectures": [LLAMA], "num_hidden_layers": 61, "first_k_dense_replace": 1}
    assert not resolve_flags("sglang", LAUNCH + " --enable-two-batch-overlap", llama, SEED_DRAFT).finding(
        "SGL_TBO_SKIPS_AUX_CAPTURE")
