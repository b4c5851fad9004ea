"""doctor's verdict across dtypes, thread counts and prompt draws (issues 32 and 33), on both tracks' healthy
drafts and on the bundled case: no critical finding on a healthy draft, and one wiring, rule and set of finding
codes for the case whatever the dtype and thread count.

    python benchmarks/doctor_matrix.py [--tracks bundled,smollm2] [--drafts healthy,case] [--pool 16]
                                       [--seeds 0,1,2] [--dtypes float32,bfloat16] [--threads 1,2]
                                       [--out build/doctor_matrix.json]

Each track's prompt pool is decoded and captured once in fp32 (a draw is a choice of its rows); bf16 runs the
draft in bf16 on the bank cast to bf16, the thread count is set in-process. One row per run: seconds, the
wiring and rule handed out, the findings above info. The suite holds a cheap slice of this
(tests/doctor/test_doctor_healthy.py, test_doctor_dtypes.py); this script runs the whole matrix and asserts
nothing (SmolLM2 needs `make install`: its target lives in data/external). bf16 on a CPU is slow: the
bundled case took 423 s a run in bf16 against 163 s in fp32 on this 2-core machine under load.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import pandas as pd
import torch

from eagle3lab import bundled
from eagle3lab.atomic import write_json
from eagle3lab.decoding.evaluate import greedy_dataset
from eagle3lab.doctor.run import run_doctor
from eagle3lab.models.state_bank import capture_bank
from eagle3lab.models.target import load_target


def _run(draft, target, bank, dtype: str, threads: int, seed: int, num_prompts: int) -> dict:
    held = bank if dtype == "float32" else replace(bank, states={k: v.to(torch.bfloat16) for k, v in bank.states.items()},
                                                   _labels={})
    torch.set_num_threads(threads)
    start = time.perf_counter()
    report = run_doctor(draft, target=target, bank=held, engine="sglang", seed=seed, num_prompts=num_prompts,
                        max_prompts=len(bank.lengths), dtype=dtype, progress=False)
    return {"seconds": round(time.perf_counter() - start, 1), "wiring": list(map(str, report.choice.wiring)),
            "rule": report.choice.variant.get("norm_before_residual"), "critical": [f.code for f in report.critical],
            "findings": sorted(f"{f.code}:{f.severity}" for f in report.findings if f.severity != "info")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tracks", default="bundled,smollm2")
    ap.add_argument("--drafts", default="healthy,case")
    ap.add_argument("--pool", type=int, default=16)
    ap.add_argument("--num-prompts", type=int, default=8)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--out", default="build/doctor_matrix.json")
    args = ap.parse_args(argv)
    rows = []
    for track in args.tracks.split(","):
        spec = bundled.TRACK_MODELS[track]
        target = load_target(spec["target"], device="cpu", dtype="float32")
        seqs, lens = greedy_dataset(target, bundled.load_prompts(n=args.pool), max_new_tokens=32, progress=False)
        bank = capture_bank(target, seqs, lens)
        for name in args.drafts.split(","):
            for dtype in args.dtypes.split(","):
                for threads in map(int, args.threads.split(",")):
                    for seed in map(int, args.seeds.split(",")):
                        row = {"track": track, "draft": name, "dtype": dtype, "threads": threads, "seed": seed,
                               **_run(spec[name], target, bank, dtype, threads, seed, args.num_prompts)}
                        print(row, flush=True)
                        rows.append(row)
    table = pd.DataFrame(rows)
    print(table.to_string(index=False))
    for (track, name), part in table.groupby(["track", "draft"]):
        answers = {(tuple(r.wiring), r.rule, tuple(r.findings)) for r in part.itertuples()}
        print(f"{track} {name}: {len(answers)} distinct answer(s); critical in {int((part.critical.str.len() > 0).sum())}"
              f" of {len(part)} runs")
    write_json(args.out, {"rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
