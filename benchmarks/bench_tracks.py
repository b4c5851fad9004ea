"""What changes from a toy target to a real one? The same measurements on both tracks, side by side.

    python benchmarks/bench_tracks.py [--threads 2] [--prompts 6] [--tokens 64] [--repeats 3]
                                      [--out build/bench_tracks.json]

Tracks (``eagle3lab.bundled.TRACKS``): ``bundled`` (the 12-layer, hidden-192 target trained here and
its healthy draft) and ``smollm2`` (SmolLM2-135M-Instruct, 30 layers, the Q4_1 GGUF release
dequantized, and its healthy draft trained here). For each, in one run:

- real lossless decoding beside ``transformers`` ``generate``: tau with a bootstrap interval over
  prompts, conditional acceptance per position, and the end-to-end speed ratio (medians over
  ``--repeats`` interleaved repetitions), for chains of 2 and 4 and SGLang's Llama tree (5, 4, 8);
- the cost ratio c (a draft step over a target step) on this machine (``measure_costs``);
- how interchangeable adjacent layers are: ``search_wiring`` on the healthy draft, per slot the
  number of points within noise of the best and the tau lost at the worst point.
Only ratios and acceptance carry over between machines; the absolute rates are this machine's.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch

from eagle3lab import bundled
from eagle3lab.analysis.benchmark import decode_sweep, finite_json
from eagle3lab.analysis.timing import measure_costs
from eagle3lab.analysis.wiring_search import search_wiring
from eagle3lab.atomic import write_json
from eagle3lab.decoding.evaluate import greedy_dataset
from eagle3lab.models.checkpoint import load_draft
from eagle3lab.models.state_bank import capture_bank
from eagle3lab.models.target import load_target

MODELS = {"bundled": (bundled.TARGET, bundled.DRAFT_HEALTHY),
          "smollm2": ("smollm2-135m-instruct", bundled.MODELS / "smollm2-draft-healthy")}
CASES = {"chain 2": dict(num_steps=2), "chain 4": dict(num_steps=4),
         "tree 5/4/8": dict(num_steps=5, topk=4, num_draft_tokens=8)}


def measure_track(track: str, n_prompts: int, tokens: int, repeats: int) -> dict:
    target_path, draft_path = MODELS[track]
    target = load_target(target_path, device="cpu", dtype="float32")
    draft = load_draft(draft_path, target=target, device="cpu")
    prompts = bundled.load_prompts(n=n_prompts)
    t0 = time.perf_counter()
    sweep = decode_sweep(target, {name: dict(draft=draft, **kw) for name, kw in CASES.items()}, prompts,
                         max_new_tokens=tokens, repeats=repeats, progress=True)
    table = sweep.table()
    out = {"layers": target.num_layers, "hidden": target.hidden_size, "decode_s": time.perf_counter() - t0,
           "generate_tps": sweep.generate_tps, "cases": {}}
    for name in CASES:
        tau = sweep.tau_interval(name)
        out["cases"][name] = {"tau": tau.value, "tau_low": tau.low, "tau_high": tau.high,
                              "conditional": list(sweep.stats(name).conditional),
                              "vs_generate": float(table.e2e_tps[name] / sweep.generate_tps),
                              "identical": f"{sweep.identical(name)}/{len(prompts)}"}
    out["c"] = measure_costs(target, draft, context_len=sweep.context_len, settings=((2, 1, None),)).c
    seqs, lens = greedy_dataset(target, prompts, max_new_tokens=32)
    found = search_wiring(capture_bank(target, seqs, lens), draft, num_steps=3, progress=False)
    out["search"] = {"summary": found.summary(), "identifiable": found.identifiable,
                     "slots": [{"best": r.best, "within_noise": len(r.equivalent), "tau_drop": r.tau_drop}
                               for r in found.slots.itertuples()]}
    return out


def side_by_side(results: dict) -> pd.DataFrame:
    rows = {}
    for track, r in results.items():
        col = {"target": f"{r['layers']} layers, hidden {r['hidden']}", "cost ratio c": round(r["c"], 3)}
        for name, case in r["cases"].items():
            col[f"{name}: tau [95%]"] = f"{case['tau']:.2f} [{case['tau_low']:.2f}, {case['tau_high']:.2f}]"
            col[f"{name}: c_k"] = ", ".join(f"{c:.2f}" for c in case["conditional"])
            col[f"{name}: vs generate"] = f"{case['vs_generate']:.2f}x"
        for i, s in enumerate(r["search"]["slots"]):
            col[f"slot {i}: points within noise / tau lost at worst"] = f"{s['within_noise']} / {s['tau_drop']:.2f}"
        rows[track] = col
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--prompts", type=int, default=6)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--tracks", nargs="*", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--out", default="build/bench_tracks.json")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    results = {t: measure_track(t, args.prompts, args.tokens, args.repeats) for t in args.tracks}
    print(f"\n{args.prompts} held-out prompts x {args.tokens} tokens, {args.repeats} repetitions, "
          f"{torch.get_num_threads()} threads, CPU")
    print(side_by_side(results).to_string())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, finite_json({"threads": torch.get_num_threads(), "prompts": args.prompts, "tokens": args.tokens,
                                 "repeats": args.repeats, "tracks": results}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
