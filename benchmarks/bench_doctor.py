"""How long does `eagle3lab doctor` take, and how many draft evaluations does its search cost against the
target's layer count N?

    python benchmarks/bench_doctor.py [--threads 1] [--tracks bundled,smollm2,deep61] [--engine-version V]
                                      [--out build/bench_doctor.json]

- bundled: the case draft with the seed's launch flags (SGLang, 1 step, 16 draft tokens), the case with vLLM
  0.32.0 (CPU build), and the healthy draft, on the bundled 12-layer target;
- smollm2: the healthy SmolLM2 draft on the 30-layer SmolLM2-135M-Instruct target (data/external);
- deep61: the wiring search alone on a synthetic 61-layer bank (the bundled target's states interpolated
  between its layers, a Kimi-K2-deep stack), the bundled case draft scored on it.

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
from eagle3lab.analysis.doctor import run_doctor
from eagle3lab.atomic import write_json
from eagle3lab.engines.flags import SEED_COMMAND

SEED_FLAGS = SEED_COMMAND.replace("moonshotai/Kimi-K2-Instruct", "TARGET").replace("./kimi-k2-eagle3", "DRAFT")
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


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--tracks", default="bundled,smollm2,deep61")
    p.add_argument("--engine-version", default=None, help="the SGLang build (default: the newest code read)")
    p.add_argument("--out", default="build/bench_doctor.json")
    args = p.parse_args(argv)
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
