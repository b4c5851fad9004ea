"""GPU smoke: a Llama-3.1-8B-shaped random target and a matching EAGLE-3 draft in bf16.

    python benchmarks/gpu_smoke.py [--out build/gpu_smoke.json] [--shape 8b|tiny] [--no-doctor]

Random weights, so acceptance means nothing here; what is real is the cost of every piece on this
GPU: capture of three resid points on a batch, the target's one-token step and its verify-cost curve
v(M) up to 64 tokens, the draft step (c), the whole draft phase of a chain and of SGLang's default
tree, baseline and speculative tokens/s, and peak memory. Then (unless ``--no-doctor``) both models are
saved (the target with transformers, the draft in speculators format) and ``eagle3lab doctor`` runs on
them in a child process, as a user runs it: its seconds, the seconds and host memory of ``load_target``
inside it, its peak GPU memory and its peak host RSS (the whole child, and the anonymous part sampled:
what the load itself keeps on the host; docs/gpu.md). ``--shape tiny`` runs the same script on a CPU in
seconds (to check the script, not the GPU). Budget: about 5 minutes on one H100/H200 with the doctor
step (16 GB written and read back).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

SHAPES = {  # Llama-3.1-8B (config.json of meta-llama/Llama-3.1-8B-Instruct) and a CPU-sized stand-in
    "8b": dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=8, vocab_size=128256, draft_vocab_size=32000, max_position_embeddings=131072,
               rope_parameters={"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}),
    "tiny": dict(hidden_size=64, intermediate_size=128, num_hidden_layers=8, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=512, draft_vocab_size=256, max_position_embeddings=4096,
                 rope_parameters={"rope_type": "default", "rope_theta": 10000.0}),
}


def build(shape: dict, device: torch.device, dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle3lab.models.draft import DraftConfig, Eagle3Draft
    from eagle3lab.models.target import Target
    from eagle3lab.models.vocab import build_vocab_map

    s = dict(shape)
    dv = s.pop("draft_vocab_size")
    rope = s["rope_parameters"]
    cfg = LlamaConfig(**s, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    torch.manual_seed(0)
    with torch.device(device):  # initialise on the GPU: 8B parameters on a CPU take minutes
        model = LlamaForCausalLM(cfg).to(dtype)
    target = Target.wrap(model)
    n = cfg.num_hidden_layers
    scaling = {k: v for k, v in rope.items() if k != "rope_theta"} if rope["rope_type"] != "default" else None
    dcfg = DraftConfig(hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                       num_attention_heads=cfg.num_attention_heads, num_key_value_heads=cfg.num_key_value_heads,
                       vocab_size=cfg.vocab_size, draft_vocab_size=dv, target_hidden_size=cfg.hidden_size,
                       rope_theta=rope["rope_theta"], rope_scaling=scaling,
                       max_position_embeddings=cfg.max_position_embeddings, aux_layer_ids=(2, n // 2, n - 3))
    with torch.device(device):
        draft = Eagle3Draft(dcfg, profile="speculators").to(dtype).bound(num_target_layers=n)
    ids = torch.randperm(cfg.vocab_size, generator=torch.Generator().manual_seed(0))[:dv].sort().values
    d2t, t2d = build_vocab_map(ids, cfg.vocab_size)
    draft.d2t.copy_(d2t.to(device))
    draft.t2d.copy_(t2d.to(device))
    draft.eval().requires_grad_(False)
    return target, draft


def timed(fn, device, repeats=3):
    """Median seconds of ``repeats`` calls after one warm-up, synchronised (``eagle3lab.analysis.timing.Clock``)."""
    from eagle3lab.analysis.timing import Clock

    clock = Clock(device)
    for i in range(repeats + 1):
        clock.time("fn", fn, keep=i > 0)
    return clock.median("fn")


# the child that runs `eagle3lab doctor`: the CLI as a user runs it, with load_target timed and the host memory
# watched (VmHWM: every resident page, mapped file pages included; RssAnon sampled: what the process itself holds)
_DOCTOR_CHILD = r"""
import contextlib, io, json, resource, sys, threading, time
import torch
import transformers  # noqa: F401  (imported before the baseline, as everything the load needs)
import eagle3lab.models.target as target_module
from eagle3lab.app.cli import main

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(key + ":"))

if torch.cuda.is_available():
    torch.cuda.init()
    torch.empty(1, device="cuda")          # the CUDA context, part of the baseline
peak, done = {"anon": 0}, threading.Event()
def watch():
    while not done.is_set():
        peak["anon"] = max(peak["anon"], status("RssAnon"))
        time.sleep(0.05)
base = {"rss": status("VmRSS"), "anon": status("RssAnon")}
threading.Thread(target=watch, daemon=True).start()
real_load, load = target_module.load_target, {}
def timed_load(*a, **kw):
    t = time.perf_counter()
    out = real_load(*a, **kw)
    load.update(seconds=time.perf_counter() - t, peak_rss=status("VmHWM"), anon_after=status("RssAnon"))
    return out
target_module.load_target = timed_load
buf, t = io.StringIO(), time.perf_counter()
with contextlib.redirect_stdout(buf):
    code = main(["doctor", *sys.argv[1:]])
seconds = time.perf_counter() - t
done.set()
out = json.loads(buf.getvalue())
gib = 2.0 ** -30
print(json.dumps({
    "exit_code": code, "seconds": seconds, "dtype": out.get("dtype"), "device": out.get("device"),
    "findings": [f["code"] for f in out.get("findings", [])], "ladder": len(out.get("ladder", [])),
    "load_seconds": load.get("seconds"), "baseline_rss_gib": base["rss"] * gib,
    "peak_rss_after_load_gib": load.get("peak_rss", 0) * gib, "peak_rss_gib": status("VmHWM") * gib,
    "peak_anon_gib": max(peak["anon"], status("RssAnon")) * gib, "baseline_anon_gib": base["anon"] * gib,
    "peak_gpu_gib": torch.cuda.max_memory_allocated() * gib if torch.cuda.is_available() else None,
    "peak_gpu_reserved_gib": torch.cuda.max_memory_reserved() * gib if torch.cuda.is_available() else None}))
"""


def save_models(target, draft, folder: Path) -> tuple[Path, Path]:
    """The target with transformers (safetensors shards of 5 GB, as hub checkpoints come) and a byte-level
    tokenizer (random weights: any text encodes), the draft in speculators format."""
    from eagle3lab.models.checkpoint import save_draft
    from eagle3lab.models.target import tiny_tokenizer

    target_dir, draft_dir = folder / "target", folder / "draft"
    target.model.save_pretrained(target_dir, max_shard_size="5GB")
    tiny_tokenizer(512).save_pretrained(target_dir)
    save_draft(draft, draft_dir, format="speculators", overwrite=True)
    return target_dir, draft_dir


def doctor_step(target_dir: Path, draft_dir: Path, device, dtype, extra: str = "") -> dict:
    """`eagle3lab doctor` on the saved models in a child process (_DOCTOR_CHILD): what it measured."""
    import shlex
    import subprocess

    cmd = [sys.executable, "-c", _DOCTOR_CHILD, "--target", str(target_dir), "--draft", str(draft_dir),
           "--engine", "vllm", "--device", str(device), "--dtype", str(dtype).removeprefix("torch."), "--json",
           *shlex.split(extra)]
    done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "HF_HUB_DISABLE_PROGRESS_BARS": "1"})
    if done.returncode != 0 or not done.stdout.strip():
        return {"error": done.stderr[-3000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def measure_costs_into(report: dict, target, draft, args, device, cuda: bool) -> None:
    """The costs of every piece on this device (capture, tokens/s, c, the verify curve), added to ``report``."""
    from eagle3lab.analysis.timing import measure_costs
    from eagle3lab.decoding.speculative import hf_generate, speculative_generate, target_greedy
    from eagle3lab.models.capture import capture_resid

    vocab = target.vocab_size
    gen = torch.Generator().manual_seed(1)
    batch = torch.randint(0, vocab, (4, 512), generator=gen)
    points = list(draft.aux_resid)
    cap_s = timed(lambda: capture_resid(target, batch, points, offload=False), device)
    report["capture"] = {"batch": [4, 512], "points": points, "seconds": cap_s, "tokens_per_s": 4 * 512 / cap_s}
    if cuda:
        report["capture"]["peak_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(json.dumps({"capture": report["capture"]}), flush=True)

    prompt = torch.randint(0, vocab, (args.prompt_len,), generator=gen).tolist()
    m = args.max_new_tokens
    rates = {"generate": m / timed(lambda: hf_generate(target, prompt, m, eos_token_id=None), device, 2),
             "greedy_loop": m / timed(lambda: target_greedy(target, prompt, m, eos_token_id=None), device, 2)}
    same = {}
    for name, steps, topk, ndt in (("chain 3", 3, 1, None), ("chain 5", 5, 1, None), ("tree 5/4/8", 5, 4, 8)):
        out = {}

        def spec(steps=steps, topk=topk, ndt=ndt, out=out):
            out["r"] = speculative_generate(target, draft, prompt, num_steps=steps, topk=topk, num_draft_tokens=ndt,
                                            max_new_tokens=m, eos_token_id=None)
        rates[f"speculative {name}"] = m / timed(spec, device, 2)
        same[name] = {"tau": out["r"].tau,
                      "identical_to_greedy_loop": out["r"].tokens == target_greedy(target, prompt, m, None).tokens}
    report["tokens_per_s"] = rates
    report["speculative"] = same  # bf16: near-ties may legitimately differ between batched and 1-token forwards
    print(json.dumps({"tokens_per_s": rates, "speculative": same}), flush=True)

    costs = measure_costs(target, draft, context_len=args.prompt_len + m // 2,
                          verify_sizes=(1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64),
                          settings=((3, 1, None), (5, 1, None), (5, 4, 8)), repeats=5)
    report["costs"] = costs.to_dict()
    report["verify_curve"] = costs.verify_frame().reset_index().to_dict("records")
    if cuda:
        report["peak_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    print(f"c = {costs.c:.3f}; verify curve (target steps): "
          + "  ".join(f"{n}:{costs.v(n):.2f}" for n in sorted(costs.verify_s)), flush=True)

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", choices=sorted(SHAPES), default="8b")
    p.add_argument("--out", default=os.path.join(os.environ.get("OUT", "build"), "gpu_smoke.json"))
    p.add_argument("--prompt-len", type=int, default=256)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--no-doctor", action="store_true", help="skip the doctor run on the saved models")
    p.add_argument("--doctor-only", action="store_true", help="skip the costs: build, save and run doctor only")
    p.add_argument("--doctor-args", default="", metavar='"ARGS"',
                   help="more doctor options, e.g. \"--max-prompts 8 --max-new-tokens 16\" for a quick dry run")
    p.add_argument("--work", default=None, help="where the models are saved for doctor (default: a temp folder)")
    args = p.parse_args(argv)

    from eagle3lab.atomic import write_text

    cuda = torch.cuda.is_available()
    if args.shape == "8b" and not cuda:
        print("gpu_smoke: the 8b shape needs a CUDA GPU (bf16, ~17 GB for target + draft); "
              "run --shape tiny to check the script on a CPU.", file=sys.stderr)
        return 2
    device = torch.device("cuda" if cuda else "cpu")
    if not cuda:
        torch.set_num_threads(1)  # the tiny CPU check: one thread avoids spin-waits on a shared box
    dtype = torch.bfloat16 if cuda else torch.float32
    t0 = time.perf_counter()
    target, draft = build(SHAPES[args.shape], device, dtype)
    report = {"shape": args.shape, "device": torch.cuda.get_device_name(0) if cuda else "cpu",
              "dtype": str(dtype).replace("torch.", ""), "torch": torch.__version__, "build_s": time.perf_counter() - t0,
              "target_params": sum(p.numel() for p in target.model.parameters()),
              "draft_params": sum(p.numel() for p in draft.parameters())}
    if cuda:
        report["memory_after_load_gib"] = torch.cuda.memory_allocated() / 2**30
        torch.cuda.reset_peak_memory_stats()
    print(json.dumps(report), flush=True)

    if not args.doctor_only:
        measure_costs_into(report, target, draft, args, device, cuda)
    if not args.no_doctor:
        work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="gpu_smoke_"))
        t = time.perf_counter()
        folders = save_models(target, draft, work)
        saved_s = time.perf_counter() - t
        del target, draft   # the child loads its own copies; this process lets go of its GPU memory
        if cuda:
            torch.cuda.empty_cache()
        report["doctor"] = {**doctor_step(*folders, device, dtype, args.doctor_args), "save_s": saved_s,
                            "folder": str(work)}
        print(json.dumps({"doctor": report["doctor"]}), flush=True)
    report["total_s"] = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text(out, json.dumps(report, indent=1, default=str))
    print(f"wrote {out} in {report['total_s']:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
