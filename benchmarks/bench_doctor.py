"""How long does `eagle3lab doctor` take, and how many draft evaluations does its search cost against the
target's layer count N?

    python benchmarks/bench_doctor.py [--threads 1] [--tracks bundled,smollm2,deep61] [--engine-version V]
                                      [--out build/bench_doctor.json]
    python benchmarks/bench_doctor.py --shape kimi-k2.5 [--scale 1] [--layers 61] [--prompts 16]
                                      [--probe] [--device cpu] [--workdir DIR] [--out build/bench_doctor_kimi.json]

- bundled: the case draft with the seed's launch flags (SGLang, 1 step, 16 draft tokens), the case with vLLM
  0.32.0 (CPU build), and the healthy draft, on the bundled 12-layer target;
- smollm2: the healthy SmolLM2 draft on the 30-layer SmolLM2-135M-Instruct target (data/external);
- deep61: the wiring search alone on a synthetic 61-layer bank (the bundled target's states interpolated
  between its layers, a Kimi-K2-deep stack), the bundled case draft scored on it.

``--shape kimi-k2.5``: the seed's own shape from a dump (``benchmarks/kimi_case.py`` writes a synthetic
Kimi-K2.5 dump of resid[0..61] in bf16, a head folder with the 163840-token vocabulary and an MLA draft with three
aux states; ``--scale`` shrinks every width, ``--layers`` the depth), then ``doctor --dump`` on it in a child
process (``--engine vllm``): seconds, the child's peak host memory
(ru_maxrss) and draft evaluations, and the doctor's answer. ``--probe`` stops after the states, head and draft
are loaded and times one evaluation of the served wiring by fc over the concatenation and one fused from slot
projections (their cost first and when cached), for a shape whose whole search does not fit the time at hand.
See docs/dumps.md, "The seed's shape".

Each row: wall seconds, CPU seconds of this process (steadier than wall time on a shared machine), the
load average while it ran, the prompts the answer rests on (doctor's sequential rule), the search's draft
evaluations and the bound 4 x N x slots. Nothing here is asserted; the tests check the findings.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from eagle3lab import bundled
from eagle3lab.atomic import write_json
from eagle3lab.doctor.run import run_doctor
from eagle3lab.engines.flags import SEED_FLAGS

SMOLLM2 = Path("data/external/smollm2-135m-instruct")


def _timed(fn):
    t0, c0, load0 = time.perf_counter(), time.process_time(), os.getloadavg()[0]
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0, (load0 + os.getloadavg()[0]) / 2


def _doctor_row(draft, target, **kw) -> dict:
    report, wall, cpu, load = _timed(lambda: run_doctor(draft, target=target, progress=False, **kw))
    wiring = report.finding("WIRING")
    slots = report.model.config.num_aux
    n = report.bank.num_layers
    return {"N": n, "slots": slots, "evaluations": report.search.evaluations, "bound": 4 * n * slots,
            "seconds": wall, "cpu_seconds": cpu, "load": load, "prompts": report.prompts_used,
            "critical": [f.code for f in report.critical], "wiring_fix": wiring.fix if wiring else None,
            "tau_served": report.ladder[0].tau.value, "tau_fixed": report.ladder[-1].tau.value}


def _deep_bank(layers: int = 61, prompts: int = 8):
    """The bundled target's states over ``prompts`` prompts, stretched to ``layers`` layers by linear
    interpolation between neighbouring real layers (the final post-norm state and the labels kept)."""
    from dataclasses import replace

    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.state_bank import FINAL_NORMED, capture_bank
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    seqs, lens = greedy_dataset(target, bundled.load_prompts(n=prompts), max_new_tokens=48, progress=False)
    bank = capture_bank(target, seqs, lens)
    n = bank.num_layers
    states = {FINAL_NORMED: bank.states[FINAL_NORMED]}
    for k in range(layers + 1):
        x = k * n / layers
        lo = min(int(x), n - 1)
        w = x - lo
        states[k] = (1 - w) * bank.states[lo] + w * bank.states[lo + 1]
    return replace(bank, states=states, num_layers=layers, source=f"synthetic {layers}-layer bank", _labels={})


def _kimi_case():
    import importlib.util

    spec = importlib.util.spec_from_file_location("kimi_case", Path(__file__).with_name("kimi_case.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _in_child(fn, *args, in_process: bool = False):
    """``fn(*args)`` in a fresh (spawned) process: its result, and its own peak RSS in bytes (each stage's
    memory is its own, not the sum of what this process held before). ``in_process``: here (a test; the
    peak is then this process's)."""
    import multiprocessing as mp

    if in_process:
        return _measured(fn, *args)
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(_measured, (fn, *args))


def _measured(fn, *args):
    import resource

    out = fn(*args)
    return out, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _build(workdir: str, scale: float, layers, prompts: int, prompt_len: int, new_tokens: int) -> tuple[dict, float]:
    t0 = time.perf_counter()
    case = _kimi_case().write_case(workdir, scale=scale, layers=layers, prompts=prompts, prompt_len=prompt_len,
                                   new_tokens=new_tokens)
    return case, time.perf_counter() - t0


def _doctor_on_dump(case: dict, threads, device: str, fc_cache_gb) -> dict:
    """run_doctor on the case's dump, as ``eagle3lab doctor --dump D --target-head H --draft R --engine vllm``."""
    import re

    from eagle3lab.models import state_bank

    if threads:
        torch.set_num_threads(threads)
    if fc_cache_gb is not None:
        state_bank.FC_CACHE_BYTES = int(fc_cache_gb * 2**30)
    t0, c0 = time.perf_counter(), time.process_time()
    report = run_doctor(case["draft"], target=case["head"], dump=case["dump"], engine="vllm", device=device,
                        progress=False)
    wiring = report.finding("WIRING")
    found = report.search
    return {"seconds": time.perf_counter() - t0, "cpu_seconds": time.process_time() - c0,
            "evaluations": found.evaluations, "prompts": report.prompts_used, "codes": [f.code for f in report.findings],
            "critical": [f.code for f in report.critical], "best": [str(p) for p in found.best["wiring"]],
            "chosen": None if report.choice is None else [str(p) for p in report.choice.wiring],
            "identified": found.identifiable, "wiring_fix": wiring.fix if wiring else None,
            "tau_served": report.ladder[0].tau.value, "tau_fixed": report.ladder[-1].tau.value,
            "search": re.sub(r"\s+", " ", found.summary()), "summary": report.summary()}


def _probe(case: dict, threads, device: str, rows) -> dict:
    """Load what doctor --dump loads, then time the served wiring scored by fc on the concatenation and fused
    (the first fused call computes its three slot projections, the second finds them cached), on the first
    ``rows`` prompts (all when None; an evaluation's cost is linear in them)."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank
    from eagle3lab.doctor.evidence import take_rows
    from eagle3lab.doctor.run import gather_evidence

    if threads:
        torch.set_num_threads(threads)
    t0 = time.perf_counter()
    evidence = gather_evidence(case["draft"], case["head"], dump=case["dump"], device=device, progress=False)
    loaded = time.perf_counter() - t0
    draft = evidence.draft.under("vllm")
    wiring = tuple(draft.aux_resid)
    bank = evidence.bank if rows is None else take_rows(evidence.bank, range(rows))
    times = {"load_seconds": loaded, "wiring": list(wiring), "prompts_timed": len(bank.lengths)}
    for name, fuse in (("exact", False), ("fused_first", True), ("fused_cached", True)):
        t = time.perf_counter()
        score = evaluate_on_bank(bank, draft, wiring, 3, batch_size=2, fuse_fc=fuse)
        times[name] = time.perf_counter() - t
        tokens, rounds = score.tau_sums
        times[f"{name}_tau"], times[f"{name}_ce"] = sum(tokens) / max(1, sum(rounds)), score.ce
    return times


def kimi(args) -> int:
    """``--shape kimi-k2.5``: write the case, then doctor (or the probe) on it, each in its own process."""
    import tempfile

    work = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="kimi-case-"))
    case, build_rss = _in_child(_build, str(work), args.scale, args.layers, args.prompts, args.prompt_len,
                                args.new_tokens, in_process=args.in_process)
    case, build_seconds = case
    print(f"case: {case['shape']}, {case['prompts']} prompts, {case['tokens']} tokens, trained on resid"
          f"{case['trained']}, ids {case['ids']}; written in {build_seconds:.0f} s (peak RSS {build_rss / 2**30:.1f} "
          f"GiB) under {work}")
    run = _probe if args.probe else _doctor_on_dump
    extra = (args.device, args.probe_prompts) if args.probe else (args.device, args.fc_cache_gb)
    result, rss = _in_child(run, case, args.threads, *extra, in_process=args.in_process)
    result.update(peak_rss_gib=rss / 2**30, threads=args.threads or torch.get_num_threads(), device=args.device)
    for key, value in result.items():
        print(f"  {key}: {value:.2f}" if isinstance(value, float) else f"  {key}: {value}")
    path = Path(args.out or "build/bench_doctor_kimi.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"case": case, "build_seconds": build_seconds, "build_peak_rss_gib": build_rss / 2**30,
                      "probe" if args.probe else "doctor": result})
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--tracks", default="bundled,smollm2,deep61")
    p.add_argument("--engine-version", default=None, help="the SGLang build (default: the newest code read)")
    p.add_argument("--out", default=None, help="default build/bench_doctor.json (kimi: build/bench_doctor_kimi.json)")
    p.add_argument("--shape", choices=["kimi-k2.5"], default=None, help="the seed's shape from a dump (see above)")
    p.add_argument("--scale", type=float, default=1.0, help="kimi: every width times this (1 = Kimi-K2.5's)")
    p.add_argument("--layers", type=int, default=None, help="kimi: target layers (default 61)")
    p.add_argument("--prompts", type=int, default=16, help="kimi: prompts in the dump")
    p.add_argument("--prompt-len", type=int, default=32)
    p.add_argument("--new-tokens", type=int, default=40)
    p.add_argument("--probe", action="store_true", help="kimi: load and time one evaluation, no search")
    p.add_argument("--probe-prompts", type=int, default=None, help="kimi --probe: time on this many prompts")
    p.add_argument("--device", default="cpu")
    p.add_argument("--fc-cache-gb", type=float, default=None, help="kimi: bytes of fc slot projections kept")
    p.add_argument("--workdir", default=None, help="kimi: where the case is written (default: a new temp folder)")
    p.add_argument("--in-process", action="store_true", help="kimi: no child processes (peak RSS is then this "
                   "process's own, whatever it held before)")
    args = p.parse_args(argv)
    if args.shape:
        return kimi(args)
    args.out = args.out or "build/bench_doctor.json"
    if args.threads:
        torch.set_num_threads(args.threads)
    tracks = args.tracks.split(",")
    rows = {}
    if "bundled" in tracks:
        rows["case, seed flags (sglang)"] = _doctor_row(bundled.DRAFT_CASE, bundled.TARGET, engine="sglang",
                                                         engine_version=args.engine_version, engine_args=SEED_FLAGS)
        rows["case (vllm 0.32.0 cpu)"] = _doctor_row(bundled.DRAFT_CASE, bundled.TARGET, engine="vllm",
                                                      engine_version="0.32.0", engine_platform="cpu")
        rows["healthy (sglang)"] = _doctor_row(bundled.DRAFT_HEALTHY, bundled.TARGET, engine="sglang")
    if "smollm2" in tracks:
        if SMOLLM2.exists():
            rows["smollm2 healthy (sglang)"] = _doctor_row("data/models/smollm2-draft-healthy", str(SMOLLM2),
                                                            engine="sglang")
        else:
            print(f"smollm2: {SMOLLM2} missing (make data), skipped")
    if "deep61" in tracks:
        from eagle3lab.analysis.wiring_search import search_wiring
        from eagle3lab.models.checkpoint import load_draft

        bank = _deep_bank()
        draft = load_draft(bundled.DRAFT_CASE, target=bundled.TARGET, device="cpu", check_vocab=False)
        found, wall, cpu, load = _timed(lambda: search_wiring(bank, draft, num_steps=3, progress=False))
        rows["deep61 search (case draft)"] = {"N": 61, "slots": 3, "evaluations": found.evaluations, "bound": 4 * 61 * 3,
                                              "seconds": wall, "cpu_seconds": cpu, "load": load,
                                              "prompts": len(bank.lengths), "critical": None, "wiring_fix": None,
                                              "tau_served": None, "tau_fixed": found.best["tau"].value}
    print(f"{torch.get_num_threads()} torch threads, CPU ({os.cpu_count()} cores); wall seconds ride on the load")
    print(f"{'run':<28} {'N':>3} {'slots':>5} {'evals':>6} {'4xNxslots':>9} {'wall s':>7} {'cpu s':>6} "
          f"{'load':>5} {'prompts':>7}")
    for name, r in rows.items():
        print(f"{name:<28} {r['N']:>3} {r['slots']:>5} {r['evaluations']:>6} {r['bound']:>9} {r['seconds']:>7.1f} "
              f"{r['cpu_seconds']:>6.1f} {r['load']:>5.1f} {r['prompts']:>7}")
    for name, r in rows.items():
        if r["critical"] is not None:
            print(f"\n{name}: critical {r['critical'] or 'none'}; tau as served {r['tau_served']:.2f}, "
                  f"fixed {r['tau_fixed']:.2f}")
            if r["wiring_fix"]:
                print(f"  wiring fix: {r['wiring_fix']}")
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"threads": torch.get_num_threads(), "engine_version": args.engine_version, "runs": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
