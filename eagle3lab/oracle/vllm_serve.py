"""vLLM's offline API serving a target with an EAGLE-3 draft (or none), run where vLLM is installed.

Run by path, never imported by eagle3lab (it imports nothing of ours, and vLLM only inside ``main``)::

    VLLM_PYTHON eagle3lab/oracle/vllm_serve.py < request.json > answer.json

request: ``{"jobs": [job, ...]}``, served one after the other in this one process (vLLM's import costs
seconds; a baseline and several drafts share it). A job::

    {"name": "healthy", "target": DIR, "draft": DIR or null, "prompts": [[token ids], ...],
     "max_tokens": 64, "num_speculative_tokens": 4, "dtype": "float32", "ignore_eos": true}

Each job builds ``LLM(model=target, dtype=..., max_model_len=1024, enforce_eager=True,
speculative_config={"method": "eagle3", "model": draft, "num_speculative_tokens": K})`` (no
speculative config without a draft), serves one short warm-up request, then every prompt greedily
(temperature 0) in one ``generate`` call. The answer per job: the output token ids per prompt, vLLM's
spec-decode counters from ``llm.get_metrics()`` counted over that ``generate`` only (the registry is
the process's, so they are differences of two snapshots), the aux layers the target's model holds
(``aux_hidden_state_layers``, the ids vLLM feeds the draft) and where they came from (the log line
"Using auxiliary layers from speculative config" or the model's default), the model runner's class,
and vLLM's log records. With ``"evidence": true`` the warm-up's stats are logged (and reset) before the
``generate``, the Prometheus text of the registry is kept as ``prometheus`` after it, and then its
stats are logged (a ``SpecDecoding metrics`` line covering that ``generate`` only; marker lines on
stderr separate the three parts of the log). A job that fails carries ``error`` (type, message) and the others still run.
The answer names the vLLM version and platform; if vLLM cannot be imported it is
``{"engine": "vllm", "version": null, "error": ...}``. JSON only, in and out.

The environment is set here before vLLM is imported (a caller's own values win): one OpenMP thread
(without it a run on a loaded machine took 1-30 s), the engine core in this process
(``VLLM_ENABLE_V1_MULTIPROCESSING=0``), 1 GiB of CPU KV cache, no thread binding, no hub.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import sys

ENV = {"OMP_NUM_THREADS": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
       "VLLM_CPU_OMP_THREADS_BIND": "nobind", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
COUNTERS = ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
            "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_accepted_tokens_per_pos")
AUX_FROM_CONFIG = "Using auxiliary layers from speculative config"


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[dict] = []

    def emit(self, record):
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format is kept as its template
            message = str(record.msg)
        self.records.append({"logger": record.name, "level": record.levelname, "message": message})


def counters(llm) -> dict:
    """The spec-decode counters of the process's registry (summed over label sets); absent ones are 0."""
    out = {name: 0 for name in COUNTERS[:3]}
    out[COUNTERS[3]] = []
    for metric in llm.get_metrics():
        if metric.name not in COUNTERS:
            continue
        if metric.name == COUNTERS[3]:   # a Vector: one counter per draft position
            total = out[metric.name]
            total += [0] * (len(metric.values) - len(total))
            for i, value in enumerate(metric.values):
                total[i] += int(value)
        else:
            out[metric.name] += int(metric.value)
    return out


def counted_between(before: dict, after: dict) -> dict:
    out = {name: after[name] - before[name] for name in COUNTERS[:3]}
    a, b = after[COUNTERS[3]], before[COUNTERS[3]]
    out[COUNTERS[3]] = [x - (b[i] if i < len(b) else 0) for i, x in enumerate(a)]
    return out


def _runner_facts(worker) -> dict:
    """Run inside the worker (``collective_rpc``): the model runner's class and the target's aux layers."""
    runner = worker.model_runner
    model = runner.get_model() if hasattr(runner, "get_model") else runner.model
    holder = model
    for name in ("get_language_model", "language_model"):
        if hasattr(holder, name):
            holder = getattr(holder, name)() if callable(getattr(holder, name)) else getattr(holder, name)
            break
    holder = getattr(holder, "model", holder)
    layers = getattr(holder, "aux_hidden_state_layers", None)
    return {"runner": f"{type(runner).__module__}.{type(runner).__qualname__}",
            "aux_layers": None if layers is None else [int(i) for i in layers],
            "num_target_layers": len(holder.layers) if hasattr(holder, "layers") else None}


def serve_job(job: dict) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    records = _Records()
    vllm_logger = logging.getLogger("vllm")
    vllm_logger.addHandler(records)
    out = {"name": job.get("name"), "target": job["target"], "draft": job.get("draft"), "outputs": None,
           "counters": None, "aux_layers": None, "aux_layers_source": None, "runner": None,
           "num_target_layers": None, "logs": records.records, "error": None}
    llm = None
    try:
        kwargs = dict(model=job["target"], dtype=job.get("dtype", "float32"), max_model_len=1024, enforce_eager=True,
                      seed=0, disable_log_stats=False)   # the offline API keeps no counters without it
        if job.get("draft"):
            kwargs["speculative_config"] = {"method": "eagle3", "model": job["draft"],
                                            "num_speculative_tokens": int(job.get("num_speculative_tokens", 4))}
        llm = LLM(**kwargs)
        facts = llm.llm_engine.collective_rpc(_runner_facts)[0]
        out.update(runner=facts["runner"], num_target_layers=facts["num_target_layers"])
        if job.get("draft"):
            out["aux_layers"] = facts["aux_layers"]
            from_config = any(AUX_FROM_CONFIG in r["message"] for r in records.records)
            out["aux_layers_source"] = "draft config" if from_config else "model default"
        params = SamplingParams(temperature=0.0, max_tokens=int(job.get("max_tokens", 64)),
                                ignore_eos=bool(job.get("ignore_eos", True)))
        prompts = [TokensPrompt(prompt_token_ids=[int(t) for t in p]) for p in job["prompts"]]
        warm = [int(t) for t in job.get("warmup_prompt") or [1, 2, 3, 4, 5, 6, 7, 8]]
        llm.generate([TokensPrompt(prompt_token_ids=warm)], SamplingParams(temperature=0.0, max_tokens=8),
                     use_tqdm=False)
        if job.get("evidence"):   # the warm-up's drafts go into a SpecDecoding line of their own
            llm.llm_engine.do_log_stats()
            print("[vllm_serve] warm-up logged", file=sys.stderr, flush=True)
        before = counters(llm)
        results = llm.generate(prompts, params, use_tqdm=False)
        out["counters"] = counted_between(before, counters(llm))
        if job.get("evidence"):   # what a real run exposes: /metrics text (cumulative), then a stats line
            import prometheus_client
            out["prometheus"] = prometheus_client.generate_latest().decode()
            print("[vllm_serve] generate done", file=sys.stderr, flush=True)
            llm.llm_engine.do_log_stats()
        out["outputs"] = [list(r.outputs[0].token_ids) for r in results]
    except Exception as err:
        out["error"] = {"type": type(err).__name__, "message": str(err)}
    finally:
        vllm_logger.removeHandler(records)
        del llm
        gc.collect()
    return out


def _platform(device_type: str) -> str:
    """The build as eagle3lab.engines.vllm_runner names it: a CPU device with Triton importable is the CPU image with
    triton-cpu (vLLM's CPU Dockerfile), whose model runner follows the CUDA rules from 0.23.0."""
    if device_type != "cpu":
        return device_type
    try:
        from vllm.triton_utils import HAS_TRITON
    except Exception:   # older builds: no such module, and no V2 CPU runner
        return "cpu"
    return "cpu+triton" if HAS_TRITON else "cpu"


def answer_request(head, serve) -> int:
    """What every script run by path in vLLM's environment does around its jobs (vllm_synthetic.py too): ENV set (a
    caller's own values win), the request read from stdin, vLLM imported and ``head()`` (the answer's fields
    beside engine and version) asked, or else the answer ``{"engine": "vllm", "version": null, "error": ...}``; then
    ``serve(job)`` for each job with vLLM's prints sent to stderr, and the answer alone written to stdout."""
    for name, value in ENV.items():
        os.environ.setdefault(name, value)
    request = json.loads(sys.stdin.read())
    try:
        import vllm
        answer = {"engine": "vllm", "version": vllm.__version__, **head(), "jobs": []}
    except Exception as err:
        json.dump({"engine": "vllm", "version": None, "error": f"{type(err).__name__}: {err}"}, sys.stdout)
        return 0
    stdout, sys.stdout = sys.stdout, sys.stderr   # vLLM prints; the answer alone goes to stdout
    try:
        for job in request["jobs"]:
            answer["jobs"].append(serve(job))
    finally:
        sys.stdout = stdout
    json.dump(answer, sys.stdout)
    return 0


def _head() -> dict:
    from vllm.platforms import current_platform

    return {"platform": _platform(current_platform.device_type), "env": {k: os.environ.get(k) for k in ENV}}


def main() -> int:
    return answer_request(_head, serve_job)


if __name__ == "__main__":
    sys.exit(main())
