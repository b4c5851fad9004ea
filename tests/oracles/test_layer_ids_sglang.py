"""Layer-id parity: which hidden states SGLang 0.5.23's own model code captures for EAGLE-3 aux layer ids,
against ``resolve_aux_layers("sglang", ids, N, arch, engine_version="0.5.23")`` (what ``eagle3lab ids`` says).

Tiny targets (8 layers; the real Llama-3.1-8B, Qwen3-8B, DeepSeek-V3 and Kimi-K2.5 configs shrunk, Qwen2,
Qwen3-MoE and gpt-oss from their model types) are built by SGLang in the engine environment the way its
loader builds them, and each id list goes through the model's own ``set_eagle3_layers_to_capture``
(``engine_scripts/sglang_layer_ids.py``, one subprocess for the table). The loop indices it stores are
read as the 0.5.23 capture loops take them: index i in 0..N-1 is the residual stream entering layer i
(resid[i]; every file captures in the layer boundary, where before layer 0 the residual is the embedding
output), gpt_oss.py alone also index N after the last layer (resid[N]); other indices are never reached.
For Llama, Qwen2, Qwen3 and Qwen3-MoE that reading is checked by running SGLang's forward on CPU (one
prefill batch, torch_native attention, the weights of a transformers model of the same config) and naming
each aux state it returns by comparing it with transformers' residual stream.

Not run forward: DeepSeek-V3 and Kimi-K2.5 (deepseek_v2.py dispatches attention through
AttentionBackendRegistry, which in 0.5.23 has handlers only for GPU/NPU/XPU backends, none on a plain CPU),
gpt-oss (its attention passes ``sinks``, which TorchNativeAttnBackend.forward_extend does not take).
Not built at all: GLM-4-MoE-lite (below). The DeepSeek-family configs drop ``rope_scaling``: SGLang builds
YaRN RoPE as DeepseekScalingRotaryEmbedding, which asks ``get_device()`` for an accelerator and raises on
a CPU-only machine; RoPE plays no part in which states are captured.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.paths import REAL_CONFIGS, run_engine_job

from eagle3lab.engines.layer_ids import resolve_aux_layers, sglang_model_file

VERSION = "0.5.23"
N = 8
SCRIPT = Path(__file__).resolve().parent / "engine_scripts" / "sglang_layer_ids.py"
TOKENS = [3, 17, 42, 5, 9, 11]

# The seed's lists (Kimi-K2, 61 layers: [-1, 2, 30] and [2, 30, 58]) scaled to N = 8, and the edges.
IDS = {
    "defaults (no ids)": None,
    "SpecForge's default ids [1, N//2-1, N-4]": [1, N // 2 - 1, N - 4],
    "seed fix [-1, 2, 30] style": [-1, 2, N // 2],
    "seed [2, 30, 58] style": [2, N // 2, N - 3],
    "id 0": [0, 2, 5],
    "first id 1": [1, 2, 3],
    "id N-1": [2, N // 2, N - 1],
    "id N": [2, N // 2, N],
    "not ascending": [5, 1, 3],
    "repeated": [2, 2, 5],
}

MHA = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=N, num_attention_heads=4, num_key_value_heads=2,
           vocab_size=64, initializer_range=0.2, max_position_embeddings=256, tie_word_embeddings=False)
MLA = dict(hidden_size=32, intermediate_size=64, moe_intermediate_size=16, num_hidden_layers=N, num_attention_heads=4,
           num_key_value_heads=4, q_lora_rank=16, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8,
           v_head_dim=8, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1, first_k_dense_replace=1,
           vocab_size=64, num_nextn_predict_layers=0)
TINY_VISION = dict(num_hidden_layers=1, hidden_size=16, num_attention_heads=2, intermediate_size=32,
                   vt_num_hidden_layers=1, vt_hidden_size=16, vt_num_attention_heads=2, vt_intermediate_size=32,
                   mm_hidden_size=16, text_hidden_size=32)


def _real(name: str, drop=(), **changes) -> dict:
    """A published config shrunk: no fp8 quantization, no remote code, ``drop`` removed (YaRN, see above)."""
    config = json.loads((REAL_CONFIGS / name).read_text())
    for key in ("quantization_config", "auto_map", *drop):
        config.pop(key, None)
    config.update(changes)
    return config


def _kimi() -> dict:
    config = _real("moonshotai__Kimi-K2.5.json")
    config["text_config"].update(MLA)
    config["text_config"].pop("rope_scaling", None)
    config["vision_config"].update(TINY_VISION)
    return config


# name -> (SGLang module, config.json, run the forward?)
TARGETS = {
    "llama": ("sglang.srt.models.llama", _real("meta-llama__Llama-3.1-8B.json", **MHA), True),
    "qwen2": ("sglang.srt.models.qwen2", {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", **MHA}, True),
    "qwen3": ("sglang.srt.models.qwen3", _real("Qwen__Qwen3-8B.json", head_dim=8, **MHA), True),
    "qwen3_moe": ("sglang.srt.models.qwen3_moe", {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
                                                  "head_dim": 8, "num_experts": 4, "num_experts_per_tok": 2,
                                                  "moe_intermediate_size": 16, **MHA}, True),
    "deepseek_v3": ("sglang.srt.models.deepseek_v2",
                    _real("deepseek-ai__DeepSeek-V3.json", drop=("rope_scaling",), **MLA), False),
    "kimi_k25": ("sglang.srt.models.kimi_k25", _kimi(), False),
    "gpt_oss": ("sglang.srt.models.gpt_oss", {"architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss",
                                              "head_dim": 8, "num_local_experts": 4, "num_experts_per_tok": 2,
                                              "sliding_window": 16, **MHA}, False),
    "glm4_moe_lite": ("sglang.srt.models.glm4_moe_lite", {"architectures": ["Glm4MoeLiteForCausalLM"],
                                                          "model_type": "glm4_moe_lite", **MLA}, False),
}


@pytest.fixture(scope="module")
def answer(tmp_path_factory):
    root = tmp_path_factory.mktemp("layer_ids")
    cases = []
    for name, (module, config, forward) in TARGETS.items():
        folder = root / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
        cases.append({"name": name, "model_dir": str(folder), "module": module, "arch": config["architectures"][0],
                      "ids": list(IDS.values()), "forward": forward, "tokens": TOKENS})
    out = run_engine_job(SCRIPT, cases, root / "job.json")
    assert out["version"] == VERSION and out["error"] is None, out.get("traceback") or out
    return out


def _case(answer, name) -> dict:
    return next(c for c in answer["cases"] if c["name"] == name)


def _read_loop(indices: list[int], arch: str) -> list[int]:
    """resid points the 0.5.23 capture loops take for these loop indices (see the module docstring)."""
    top = N if sglang_model_file(arch) == "gpt_oss.py" else N - 1
    return sorted({i for i in indices if 0 <= i <= top})


BUILT = [name for name in TARGETS if name != "glm4_moe_lite"]


@pytest.mark.parametrize("name", BUILT)
def test_sglang_captures_what_we_say(answer, name):
    """Every id list: the resid points SGLang captures equal ours, and ours breaks exactly where SGLang does."""
    case = _case(answer, name)
    assert case["error"] is None, case.get("traceback")
    assert case["num_layers"] == N
    bad = {}
    for label, run in zip(IDS, case["runs"]):
        ids = IDS[label]
        assert run["ids"] == ids
        ours = resolve_aux_layers("sglang", ids, N, arch=case["arch"], engine_version=VERSION)
        wanted = 3 if ids is None else len(ids)
        if run["error"]:   # set_eagle3_layers_to_capture itself raised: start-up fails
            theirs, breaks = f"raises {run['error']}", True
            agree = bool(ours.fatal) and any(run["error"].split(":")[0] in t for t in ours.fatal)
        else:
            assert run["capture"] is True, label
            theirs = _read_loop(run["layers_to_capture"], case["arch"])
            breaks = len(theirs) < wanted
            agree = list(ours.resid) == theirs and bool(ours.fatal) == breaks
        agree = agree and not ours.unconfirmed   # every file here was read
        if not agree:
            bad[label] = (f"ids {ids}: SGLang loop {run['layers_to_capture']} -> {theirs} (breaks: {breaks}); ours "
                          f"{list(ours.resid)}, fatal {list(ours.fatal)}, unconfirmed {list(ours.unconfirmed)}")
    assert not bad, "\n".join(f"{k}: {v}" for k, v in bad.items())


@pytest.mark.parametrize("name", [n for n in TARGETS if TARGETS[n][2]])
def test_sglang_forward_returns_the_states_the_loop_indices_name(answer, name):
    """On CPU, SGLang's own forward returns exactly resid[i] for loop index i (transformers' residual stream
    names each state, to 0 in fp32, the next closest point far away): the reading the table relies on."""
    case = _case(answer, name)
    assert case["error"] is None, case.get("traceback")
    for label, run in zip(IDS, case["runs"]):
        if run["error"]:
            continue
        assert run["forward_error"] is None, (label, run["forward_error"])
        states = run["states"]
        assert [s["resid"] for s in states] == _read_loop(run["layers_to_capture"], case["arch"]), label
        for s in states:
            assert s["distance"] < 1e-5 < 1e-1 < s["second"], (label, s)


def test_sglang_id_minus_one_captures_the_embedding_in_0_5_23(answer):
    """Id -1 (+1 rule: loop index 0): in 0.5.23 the layer boundary captures before layer 0 too, where the
    residual is the embedding output; SGLang's forward returns resid[0] on Llama and Qwen3 (no TypeError)."""
    for name in ("llama", "qwen3"):
        run = _case(answer, name)["runs"][list(IDS).index("seed fix [-1, 2, 30] style")]
        assert run["layers_to_capture"] == [0, 3, N // 2 + 1]
        assert [s["resid"] for s in run["states"]] == [0, 3, N // 2 + 1]
    ours = resolve_aux_layers("sglang", [-1, 2, N // 2], N, arch="LlamaForCausalLM", engine_version=VERSION)
    assert ours.resid == (0, 3, N // 2 + 1) and not ours.fatal


@pytest.mark.parametrize("name", ["deepseek_v3", "kimi_k25"])
def test_sglang_deepseek_first_id_rule_of_pr_25454(answer, name):
    """deepseek_v2.py (and kimi_k25.py, which hands the ids to its DeepseekV3ForCausalLM): +1 only when the
    first id is 1; otherwise the ids are loop indices as written (id 0 = resid[0], captured in 0.5.23)."""
    runs = dict(zip(IDS, _case(answer, name)["runs"]))
    assert runs["first id 1"]["layers_to_capture"] == [2, 3, 4]
    assert runs["SpecForge's default ids [1, N//2-1, N-4]"]["layers_to_capture"] == [2, N // 2, N - 3]
    assert runs["id 0"]["layers_to_capture"] == [0, 2, 5]
    assert runs["seed [2, 30, 58] style"]["layers_to_capture"] == [2, N // 2, N - 3]
    assert runs["seed fix [-1, 2, 30] style"]["layers_to_capture"] == [-1, 2, N // 2]   # -1: never reached
    assert runs["defaults (no ids)"]["layers_to_capture"] == [2, N // 2, N - 3]
    arch = _case(answer, name)["arch"]
    assert resolve_aux_layers("sglang", [0, 2, 5], N, arch=arch, engine_version=VERSION).resid == (0, 2, 5)


def test_sglang_gpt_oss_reads_ids_reaching_n_as_boundaries(answer):
    """gpt_oss.py (since PR #32334, 0.5.17): ids whose largest is N are boundary indices as written (N = the
    last layer's output, captured at the final norm); any other list gets the +1."""
    runs = dict(zip(IDS, _case(answer, "gpt_oss")["runs"]))
    assert runs["id N"]["layers_to_capture"] == [2, N // 2, N]
    assert runs["id N-1"]["layers_to_capture"] == [3, N // 2 + 1, N]
    assert runs["first id 1"]["layers_to_capture"] == [2, 3, 4]


def test_sglang_qwen3_moe_rejects_id_n_minus_1_at_start_up(answer):
    """qwen2_moe.py's Qwen2MoeModel.set_eagle3_layers_to_capture (Qwen3-MoE's too) marks self.layers[k+1]:
    id N-1 (and N) is an IndexError while the model is set up, not a silently missing state."""
    runs = dict(zip(IDS, _case(answer, "qwen3_moe")["runs"]))
    for label in ("id N-1", "id N"):
        assert runs[label]["error"].startswith("IndexError"), label


def test_sglang_glm4_moe_lite_does_not_build_on_cpu(answer):
    """glm4_moe_lite.py hands get_rope_config's rope_parameters (a dict whenever transformers 5 reads the
    config, 'default' included) to DeepseekV2AttentionMLA, which turns any dict into deepseek_yarn; that
    RoPE asks get_device() for an accelerator. Its ids are checked by reading (tests/engines/test_layer_ids.py)."""
    case = _case(answer, "glm4_moe_lite")
    assert case["error"] and "No accelerator" in case["error"], case


def test_the_import_shims_were_never_used(answer):
    """torchvision is served to SGLang's imports, vLLM's _custom_ops to its rotary embedding module alone
    (bound while the model is built, called only by forward_cuda); nothing SGLang ran may touch either."""
    shim = answer["absent_modules"]
    assert "vllm._custom_ops <- sglang.srt.layers.rotary_embedding.base" in shim["served_to"]
    assert {m.split(" <- ")[1] for m in shim["served_to"] if m.startswith("vllm")} == {
        "sglang.srt.layers.rotary_embedding.base"}
    assert shim["used"] == []
