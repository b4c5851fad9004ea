"""Which hidden states SGLang's own model code captures for EAGLE-3 aux layer ids (oracle tests, engine env).

    python sglang_layer_ids.py JOB.json > answer.json

Never imports eagle3lab. JOB.json: {"absent_modules": path of eagle3lab/oracle/absent_modules.py,
"cases": [{"name", "model_dir", "module", "arch", "ids": [list | null, ...], "forward": bool, "tokens": [...]}]}.

Per case the target is built the way SGLang's loader builds it: the config read by SGLang's own
``get_config(model_dir)`` (what ModelConfig reads), the class the module exports as ``EntryClass`` under
that architecture name (what ModelRegistry maps it to), ``cls(config=..., quant_config=None)`` in fp32, after
a world-size-1 gloo process group and SGLang's published build topology (``sglang.test.layer_ut_utils
.init_single_process_dist``, SGLang's own helper for layer tests). Then per id list (null = no ids, as when
the draft config has none) ``set_eagle3_layers_to_capture(ids)`` and what it stored: ``model.layers_to_capture``
(loop indices; the loop captures before layer i runs, gpt_oss.py also after the last layer).

With "forward": the weights of a transformers model of the same config (seeded, written by its
save_pretrained, so the checkpoint's key layout) go through SGLang's own ``load_weights``; SGLang's forward
runs one prefill batch of ``tokens`` with its torch_native attention backend (the runner, KV pools and batch
from SGLang's attention test kit, ``sglang.test.kits.attention_unittest.attention_methods.dense_attention``;
its KV pool holds one layer, so a pool with every layer replaces it), and each aux state SGLang returns is
named by comparing it with transformers' residual stream: resid[k] = ``hidden_states[k]`` for k < N, resid[N]
= the input of the final norm (hooked). The answer lists, per state, the closest resid point and the distances
to the closest and the second closest, so the caller can check the match is exact and unambiguous.

SGLang imports torchvision and, while a rotary embedding is built on this platform, vLLM's ``_custom_ops``:
both come from the import shim (absent_modules.py; vLLM only to ``sglang.srt.layers.rotary_embedding.base``)
and any use of them is recorded; the answer carries ``served`` and ``used`` (must be empty).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import tempfile
import time
import traceback

VLLM_IMPORTER = "sglang.srt.layers.rotary_embedding.base"


def load_shim(path: str):
    spec = importlib.util.spec_from_file_location("absent_modules", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["absent_modules"] = module
    spec.loader.exec_module(module)
    module.install(("sglang",), narrow={"vllm": (VLLM_IMPORTER,)})
    return module


def build(case):
    """(config, model) as SGLang's loader builds them (model_loader/loader.py _initialize_model), with the
    class the module exports under the architecture's name (what ModelRegistry maps it to; importing the
    registry itself would import every model file, ~5 s)."""
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.layers.moe.utils import resolve_shared_experts_config
    from sglang.srt.runtime_context import get_model

    model_config = ModelConfig(case["model_dir"], trust_remote_code=False, dtype="float32")
    entry = importlib.import_module(case["module"]).EntryClass
    classes = {c.__name__: c for c in (entry if isinstance(entry, list) else [entry])}
    if case["arch"] not in classes:
        raise LookupError(f"{case['module']}.EntryClass has {sorted(classes)}, not {case['arch']}")
    model_class = classes[case["arch"]]
    shared_experts = resolve_shared_experts_config(model_class, model_config.hf_config, None)
    with get_model().override(shared_experts=shared_experts):
        model = model_class(config=model_config.hf_config, quant_config=None)
    model.shared_experts_config = shared_experts
    return model_config.hf_config, model


def language_model(model):
    """The causal LM that holds the capture loop (kimi_k25.py wraps a DeepseekV3ForCausalLM)."""
    return model.language_model if getattr(model, "language_model", None) is not None else model


def captured_indices(model) -> list | None:
    value = getattr(language_model(model).model, "layers_to_capture", None)
    return None if value is None else [int(i) for i in value]


class Prefill:
    """One prefill batch of T tokens through SGLang's forward with its torch_native attention backend."""

    def __init__(self, config, tokens):
        import torch
        from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS
        from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool
        from sglang.srt.model_executor.forward_batch_info import ForwardMode
        from sglang.test.kits.attention_unittest.attention_methods import dense_attention as kit

        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        context = 64
        case = kit.DenseAttentionCase(name="prefill", backend="torch_native", forward_mode=ForwardMode.EXTEND,
                                      num_heads=heads, num_kv_heads=kv_heads, page_size=1, prefix_lens=(0,),
                                      extend_lens=(len(tokens),))
        model_config = kit.TinyModelConfig(num_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
                                           hidden_size=config.hidden_size, context_len=context)
        self.runner = kit.MockModelRunner(case=case, model_config=model_config, dtype=torch.float32, device="cpu",
                                          max_context_len=context, head_dim=head_dim)
        self.runner.token_to_kv_pool = MHATokenToKVPool(
            size=2 + context, page_size=1, dtype=torch.float32, head_num=kv_heads, head_dim=head_dim,
            layer_num=config.num_hidden_layers, device="cpu", enable_memory_saver=False, enable_alt_stream=False)
        self.runner.init_kv_index_translator()
        self.backend = ATTENTION_BACKENDS["torch_native"](self.runner)
        self.batch = kit._make_forward_batch(case, self.runner, max_context_len=context, device="cpu")
        self.tokens = torch.tensor(tokens, dtype=torch.int64)
        self.batch.input_ids = self.tokens

    def aux_states(self, model):
        import torch
        from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

        with torch.no_grad(), forward_context(ForwardContext(attn_backend=self.backend)):
            self.backend.init_forward_metadata(self.batch)
            out = model.model(self.tokens, self.batch.positions, self.batch)
        return list(out[1]) if isinstance(out, tuple) else []

    def close(self):
        self.runner._server_args_override.restore()


def reference(config, seed: int):
    """A transformers model of the same config, its checkpoint tensors, and its residual stream per token."""
    import torch
    import transformers
    from safetensors.torch import load_file

    torch.manual_seed(seed)
    hf = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32).eval()
    with tempfile.TemporaryDirectory() as folder:
        hf.save_pretrained(folder)
        weights = {}
        for name in sorted(os.listdir(folder)):
            if name.endswith(".safetensors"):
                weights.update(load_file(os.path.join(folder, name)))
    return hf, weights


def resid_stream(hf, tokens) -> list:
    import torch

    seen = {}
    hook = hf.model.norm.register_forward_hook(lambda mod, args, out: seen.setdefault("final", args[0].detach()))
    with torch.no_grad():
        out = hf(torch.tensor([tokens]), output_hidden_states=True)
    hook.remove()
    n = hf.config.num_hidden_layers
    return [out.hidden_states[k][0] for k in range(n)] + [seen["final"][0]]


def name_states(states, stream) -> list[dict]:
    named = []
    for state in states:
        dist = [float((state.float() - r).abs().max()) for r in stream]
        order = sorted(range(len(dist)), key=dist.__getitem__)
        named.append({"resid": order[0], "distance": dist[order[0]], "second": dist[order[1]]})
    return named


def run_case(case) -> dict:
    """Every id list on a model of its own: SGLang calls set_eagle3_layers_to_capture once per model, and
    qwen2_moe.py / qwen3_moe.py mark the chosen layers on the model itself, so a reused model would keep them."""
    out = {"name": case["name"], "arch": case["arch"], "error": None, "num_layers": None, "runs": []}
    t0 = time.time()
    prefill = stream = weights = None
    try:
        config, _ = build(case)
        out["num_layers"] = int(config.get_text_config().num_hidden_layers)
        if case.get("forward"):
            hf, weights = reference(config, seed=case.get("seed", 0))
            stream = resid_stream(hf, case["tokens"])
            prefill = Prefill(config, case["tokens"])
    except Exception as err:
        out["error"] = f"{type(err).__name__}: {err}"
        out["traceback"] = traceback.format_exc(limit=-4)
        return out
    for ids in case["ids"]:
        run = {"ids": ids, "layers_to_capture": None, "capture": None, "error": None, "states": None,
               "forward_error": None}
        _, model = build(case)
        try:
            model.set_eagle3_layers_to_capture(None if ids is None else list(ids))
            run["layers_to_capture"] = captured_indices(model)
            run["capture"] = bool(getattr(language_model(model), "capture_aux_hidden_states", False))
        except Exception as err:
            run["error"] = f"{type(err).__name__}: {err}"
        if prefill is not None and run["error"] is None:
            try:
                model.load_weights(list(weights.items()))
                run["states"] = name_states(prefill.aux_states(model), stream)
            except Exception as err:
                run["forward_error"] = f"{type(err).__name__}: {err}"
        out["runs"].append(run)
    if prefill is not None:
        prefill.close()
    out["seconds"] = round(time.time() - t0, 2)
    return out


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main() -> int:
    job = json.load(open(sys.argv[1]))
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # SGLang prints; the answer alone goes to stdout
    shim = load_shim(job["absent_modules"])
    answer = {"engine": "sglang", "version": None, "error": None, "cases": []}
    try:
        from importlib.metadata import version

        import torch

        torch.set_num_threads(1)
        answer["version"] = version("sglang")
        from sglang.test.layer_ut_utils import init_single_process_dist

        # a free port unless the job names one: two suites (or pytest-xdist workers) may run this at once
        init_single_process_dist(master_port=int(job.get("master_port") or _free_port()))
        answer["cases"] = [run_case(c) for c in job["cases"]]
    except Exception as err:
        answer["error"] = f"{type(err).__name__}: {err}"
        answer["traceback"] = traceback.format_exc(limit=-6)
    answer["absent_modules"] = {"served": sorted({m for m, _ in shim.SERVED}),
                                "served_to": sorted({f"{m} <- {who}" for m, who in shim.SERVED}),
                                "used": list(shim.USED)}
    real_stdout.write(json.dumps(answer, default=str) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
