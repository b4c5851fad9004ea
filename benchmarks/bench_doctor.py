"""How long does `eagle3lab doctor` take on the bundled models, and where does the time go?

    python benchmarks/bench_doctor.py [--threads 2] [--prompts 8] [--tokens 48] [--engine-version V]
                                      [--out build/bench_doctor.json]

Runs doctor on the bundled case draft with the seed's launch flags (SGLang, 1 step, 16 draft tokens)
and on the healthy draft, side by side in one run: wall time, draft evaluations of the wiring search,
the ladder's taus and the critical findings. Nothing here is asserted; tests/app/test_doctor_cli.py
checks the same runs' findings (the case with SGLang 0.5.21). The ladder measures the trained wiring
itself whatever the build; the build (--engine-version, default the newest code read) decides only
which ids the WIRING fix names: SGLang's llama.py feeds the embedding output (id -1) from 0.5.22, so
for 0.5.21 the fix is the nearest points it can capture, resid[1] in the embedding's place.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from eagle3lab import bundled
from eagle3lab.analysis.doctor import run_doctor
from eagle3lab.atomic import write_json
from eagle3lab.engines.flags import SEED_COMMAND

SEED_FLAGS = SEED_COMMAND.replace("moonshotai/Kimi-K2-Instruct", "TARGET").replace("./kimi-k2-eagle3", "DRAFT")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--engine-version", default=None, help="the SGLang build (default: the newest code read)")
    p.add_argument("--out", default="build/bench_doctor.json")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    prompts = bundled.load_prompts(n=args.prompts)
    runs = {"case, seed flags": dict(draft=bundled.DRAFT_CASE, engine_args=SEED_FLAGS),
            "healthy": dict(draft=bundled.DRAFT_HEALTHY, engine_args=None)}
    out = {}
    for name, kw in runs.items():
        t0 = time.perf_counter()
        report = run_doctor(kw["draft"], target=bundled.TARGET, engine="sglang", engine_version=args.engine_version,
                            engine_args=kw["engine_args"], prompts=prompts, max_new_tokens=args.tokens, progress=False)
        out[name] = {"seconds": time.perf_counter() - t0, "search_evaluations": report.search.evaluations,
                     "critical": [f.code for f in report.critical],
                     "wiring_fix": report.finding("WIRING").fix if report.finding("WIRING") else None,
                     "ladder": report.ladder_table().reset_index()[["rung", "num_steps", "tau", "tau_low",
                                                                   "tau_high"]].to_dict("records")}
    print(f"{args.prompts} prompts x {args.tokens} tokens, {torch.get_num_threads()} threads, CPU")
    for name, r in out.items():
        print(f"\n{name}: {r['seconds']:.1f} s, {r['search_evaluations']} search evaluations, "
              f"critical {r['critical'] or 'none'}")
        if r["wiring_fix"]:
            print(f"  wiring fix ({args.engine_version or 'newest code read'}): {r['wiring_fix']}")
        for rung in r["ladder"]:
            print(f"  {rung['rung']:<20} chain {rung['num_steps']:>2}  tau {rung['tau']:.2f} "
                  f"[{rung['tau_low']:.2f}, {rung['tau_high']:.2f}]")
    ratio = out["case, seed flags"]["seconds"] / out["healthy"]["seconds"]
    print(f"\nthe case takes {ratio:.1f}x the healthy draft's time (its ladder has more rungs to measure)")
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, {"threads": torch.get_num_threads(), "prompts": args.prompts, "tokens": args.tokens,
                      "engine_version": args.engine_version, "runs": out})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
