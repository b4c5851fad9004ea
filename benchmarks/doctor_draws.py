"""Does doctor name the same fix on every prompt draw? The bundled case draft, five draws (seeds) per engine
build, one captured pool of prompts shared by every run (a draw is a choice of its rows, evidence.take_rows).

    python benchmarks/doctor_draws.py [--seeds 0,1,2,3,4] [--pool 48] [--max-prompts N] [--threads 1]
                                      [--builds sglang,vllm]
                                      [--out build/doctor_draws.json]

Prints one row per (engine build, seed): the wiring and norm_before_residual doctor hands the user, whether
the build can serve it, the prompts the answer rests on and whether the sequential rule settled it; then
whether every draw of a build, and both builds, gave the same answer. Issue 24's check; nothing is
asserted here (tests/doctor/test_doctor_stability.py asserts two draws per build in the suite).
"""

from __future__ import annotations

import argparse
import time

import pandas as pd
import torch

from eagle3lab import bundled
from eagle3lab.atomic import write_json
from eagle3lab.decoding.evaluate import greedy_dataset
from eagle3lab.doctor.run import run_doctor
from eagle3lab.models.state_bank import capture_bank
from eagle3lab.models.target import load_target

BUILDS = {"sglang": ("0.5.23", None), "vllm": ("0.32.0", "cpu")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--pool", type=int, default=48, help="prompts captured once (the bundled pool holds 48)")
    ap.add_argument("--max-prompts", type=int, default=None, help="doctor's cap (default: doctor's own)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--builds", default="sglang,vllm", help="engine builds to run (sglang 0.5.23, vllm 0.32.0 cpu)")
    ap.add_argument("--out", default="build/doctor_draws.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]

    target = load_target(bundled.TARGET, device="cpu")
    seqs, lens = greedy_dataset(target, bundled.load_prompts(n=args.pool), max_new_tokens=48, progress=False)
    bank = capture_bank(target, seqs, lens)
    rows = []
    for engine, (version, platform) in ((e, BUILDS[e]) for e in args.builds.split(",")):
        for seed in seeds:
            t0 = time.perf_counter()
            report = run_doctor(bundled.DRAFT_CASE, target=target, bank=bank, engine=engine, engine_version=version,
                                engine_platform=platform, seed=seed, max_prompts=args.max_prompts, progress=False)
            wiring = report.finding("WIRING")
            data = wiring.data if wiring is not None else {}
            rows.append({"build": f"{engine} {version}" + (f" ({platform})" if platform else ""), "seed": seed,
                         "wiring": tuple(data.get("wiring") or ()),
                         "norm_before_residual": report.ladder[-1].variant.get("norm_before_residual"),
                         "servable": data.get("servable") == data.get("wiring"), "ids": data.get("ids"),
                         "prompts": report.prompts_used, "settled": data.get("settled"),
                         "tau_fixed": round(report.ladder[-1].tau.value, 3), "seconds": round(time.perf_counter() - t0, 1)})
            print(rows[-1], flush=True)
    df = pd.DataFrame(rows)
    print(df.to_string(index=False))
    answers = df.groupby("build").apply(lambda g: sorted(set(zip(g.wiring, g.norm_before_residual))))
    for build, got in answers.items():
        print(f"{build}: {'the same answer on every draw' if len(got) == 1 else f'{len(got)} answers'}: {got}")
    same = len({a for got in answers for a in got}) == 1
    print("both builds and every draw:", "THE SAME" if same else "DIFFERENT")
    write_json(args.out, {"rows": df.astype({"wiring": str}).to_dict("records"), "same": same,
                          "torch_threads": args.threads})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
