"""How much does the wiring search cost, and how does it grow with the target's depth?

    python benchmarks/bench_diagnose.py [--threads 2] [--out build/bench_diagnose.json]

1. The bundled models: wall time of capturing every state once and of the search on the case
   draft (16 held-out prompts, 48 greedy tokens each, 3-step chains), its answer and its draft
   evaluations beside the brute-force count.
2. Depth: random-initialised targets of 12, 24, 48 and 61 layers at width 64 with an untrained
   3-aux draft (an untrained draft makes the descent wander the longest): draft evaluations, the
   search time, and the brute-force count (variants x (N + 2) ** 3), side by side in one run.
Nothing here is a timed assertion; the unit test counts evaluations (tests/analysis/test_wiring_search.py).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd
import torch

from eagle3lab import bundled
from eagle3lab.analysis.wiring_search import search_wiring
from eagle3lab.atomic import write_json
from eagle3lab.decoding.evaluate import greedy_dataset
from eagle3lab.models.checkpoint import load_draft
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.state_bank import capture_bank
from eagle3lab.models.target import load_target, tiny_target


def bundled_case() -> dict:
    target = load_target(bundled.TARGET, device="cpu", dtype="float32")
    draft = load_draft(bundled.DRAFT_CASE, target=target, device="cpu")
    seqs, lens = greedy_dataset(target, bundled.load_prompts(n=16), max_new_tokens=48)
    t0 = time.perf_counter()
    bank = capture_bank(target, seqs, lens)
    t1 = time.perf_counter()
    found = search_wiring(bank, draft, progress=True)     # 3-step chains, the default
    t2 = time.perf_counter()
    return {"capture_s": t1 - t0, "search_s": t2 - t1, "evaluations": found.evaluations,
            "brute_force": found.brute_force, "tokens": sum(bank.lengths), "summary": found.summary()}


def depth_sweep(depths=(12, 24, 48, 61), width: int = 64) -> pd.DataFrame:
    rows = []
    for n in depths:
        target = tiny_target(num_layers=n, hidden_size=width, vocab_size=300)
        torch.manual_seed(0)
        draft = Eagle3Draft(DraftConfig(hidden_size=width, intermediate_size=2 * width, num_attention_heads=4,
                                        vocab_size=300, aux_layer_ids=(2, n // 2, n - 3))).bound(num_target_layers=n)
        seqs = torch.randint(0, 300, (8, 48), generator=torch.Generator().manual_seed(n)).tolist()
        bank = capture_bank(target, seqs, [8] * len(seqs))
        t0 = time.perf_counter()
        found = search_wiring(bank, draft, num_steps=3, progress=False)
        rows.append({"layers N": n, "draft evaluations": found.evaluations, "per (N + 2)": found.evaluations / (n + 2),
                     "brute force": found.brute_force, "search s": time.perf_counter() - t0,
                     "s per evaluation": (time.perf_counter() - t0) / found.evaluations})
    return pd.DataFrame(rows).set_index("layers N")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--out", default="build/bench_diagnose.json")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    case = bundled_case()
    print(f"bundled case draft: capture {case['capture_s']:.1f} s for {case['tokens']} tokens, search "
          f"{case['search_s']:.1f} s, {case['evaluations']} draft evaluations (brute force {case['brute_force']})")
    print(case["summary"])
    sweep = depth_sweep()
    print(f"\nsearch cost by depth (random-init targets, width 64, {torch.get_num_threads()} threads):")
    print(sweep.round(3).to_string())
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, {"threads": torch.get_num_threads(), "bundled_case": case,
                     "depth": sweep.reset_index().to_dict(orient="records")})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
