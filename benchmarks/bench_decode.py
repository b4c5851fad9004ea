"""Why is speculative decoding slower than no speculation? Measure both sides, then explain the gap.

    python benchmarks/bench_decode.py [--threads 1] [--out build/bench_decode.json] [--record]

Cases, each timed side by side with plain decoding in the same run (``eagle3lab.analysis.benchmark.run_benchmark``):

    healthy, chain 6        the healthy bundled draft as trained (goal: >= 1.8x transformers generate on CPU)
    healthy, tree 5/4/8     SGLang's default tree for Llama targets (steps 5, topk 4, 8 draft tokens)
    case as SGLang, chain 15  the seed's badly wired draft with the 16-token chain its team tried
    case as SGLang, chain 1   the same draft under SGLang's cap (steps 1 -> 2 verified tokens)
    case half fixed, chain 1  its trained wiring restored (from its training.json), but the residual
                              rule still as SGLang runs it (norm_before_residual ignored): a draft
                              that is bad, not useless

For each: tau, c, the verify cost v(M), the round cost in target steps (= break-even tau), projected
and measured speedup and the projection error. The measured speedup over plain decoding is worded from
its paired interval over prompts (``DecodeSweep.speed_ratio``, repetitions summed: ``verdicts.speed_word``,
faster / slower / within noise); a run without one (an older ``run_benchmark``) says so instead of ranking
a median. Then the same acceptance on a large served target,
where the verify curve and the per-round engine costs come from stated assumptions (a roofline of a
Kimi-K2-shaped MoE): the numbers that turn a break-even on this CPU into a loss there.
``--record`` writes each draft's results to ``bench.json`` beside it and re-renders the
throughput table of its model card (``eagle3lab.train.model_card.acceptance_section``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import torch

from eagle3lab import bundled
from eagle3lab.analysis.benchmark import finite_json, run_benchmark
from eagle3lab.analysis.cost_model import implied_round_cost
from eagle3lab.analysis.roofline import (
    NO_INTERVAL,
    ROOFLINE_EXAMPLES,
    SERVED,
    here_and_served,
    price_on_served,
    served_settings,
)
from eagle3lab.analysis.verdicts import speed_word
from eagle3lab.atomic import write_json
from eagle3lab.bundled import load_prompts
from eagle3lab.decoding.lossless import LosslessCheck
from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings.seed_case import SEED_RECORD

HALF_FIXED = "case half fixed, chain 1"
CASES = [  # (name, draft, profile, num_steps, topk, num_draft_tokens)
    ("healthy, chain 6", "healthy", None, 6, 1, None),
    ("healthy, tree 5/4/8", "healthy", None, 5, 4, 8),
    ("case as SGLang, chain 15", "case", "sglang", 15, 1, None),
    ("case as SGLang, chain 1", "case", "sglang", 1, 1, None),
    (HALF_FIXED, "case-half-fixed", "sglang", 1, 1, None),
]


def half_fixed(case, case_dir: Path):
    """The case draft fed the states it was trained on (its training.json), residual rule left to SGLang."""
    trained = bundled.recorded_resid(case_dir)
    return case.rewired(aux_resid=trained) if trained is not None else None


def speed_interval(r: dict, kind: str = "decode") -> Interval | None:
    """The case's speedup over plain decoding with its paired interval (``run_benchmark``'s ``speed_ratio``,
    ``kind`` "decode" or "e2e"); None when the run recorded none."""
    i = (r.get("speed_ratio") or {}).get(kind)
    if not i or None in (i.get("value"), i.get("low"), i.get("high")):
        return None
    return Interval(i["value"], i["low"], i["high"], i.get("level"), i.get("units"))


def ratio_words(r: dict, kind: str = "decode") -> str:
    """``1.23x [1.10, 1.35] (paired, 95%, 12 prompts): faster``, or the median and that it has no interval."""
    i = speed_interval(r, kind)
    if i is None:
        median = r["projection"]["measured_speedup"] if kind == "decode" else r["speedup"]["vs_greedy_loop"]
        return f"{median:.2f}x (median of {r['settings']['repeats']}): {NO_INTERVAL}"
    level = f"{i.level:.0%}, " if i.level is not None else ""
    return f"{i.value:.2f}x [{i.low:.2f}, {i.high:.2f}] (paired, {level}{i.units} prompts): {speed_word(i)}"


def _interval_columns(i: Interval | None) -> dict:
    if i is None:
        return {"measured_ratio": float("nan"), "measured_low": float("nan"), "measured_high": float("nan"),
                "measured_verdict": NO_INTERVAL}
    return {"measured_ratio": i.value, "measured_low": i.low, "measured_high": i.high, "measured_verdict": speed_word(i)}


def verdicts(results: dict, measured: pd.DataFrame, c: float, overhead: float, batch: int) -> str:
    """For each 1-step chain: its measured speedup here (worded from its paired interval), and whether its tau
    (with its interval when recorded) clears the break-even projected on the served target."""
    one_step = {}
    for name, r in results.items():
        if r["settings"]["num_steps"] != 1:
            continue
        a, here = r["acceptance"], speed_interval(r)
        one_step[name] = {"tau": a["tau"], "tau_low": a.get("tau_low"), "tau_high": a.get("tau_high"), "num_steps": 1,
                          "num_draft_tokens": r["settings"]["num_draft_tokens"],
                          "break_even_here": measured.loc[name, "break_even_tau"],
                          "measured_here": r["projection"]["measured_speedup"] if here is None else here}
    lines = []
    if one_step:
        for name, row in here_and_served(one_step, c=c, overhead=overhead, batch=batch).iterrows():
            served = "; ".join(f"{row[s.break_even]:.2f} ({s.name}, projected {row[s.speedup]:.2f}x) -> {row[s.verdict]}"
                               for s in served_settings(batch, overhead))
            tau = (f"tau {row.tau:.2f} [{row.tau_low:.2f}, {row.tau_high:.2f}]" if pd.notna(row.get("tau_low"))
                   else f"tau {row.tau:.2f}")
            lines.append(f"{name}: {tau}; here break-even {row.break_even_here:.2f}, measured "
                         f"{ratio_words(results[name])}; served MoE break-even (stated assumptions, no interval of "
                         f"its own) {served}")
    if "case as SGLang, chain 1" in results:
        tau = results["case as SGLang, chain 1"]["acceptance"]["tau"]
        plain, launched = SEED_RECORD.plain_tok_s, SEED_RECORD.launched_tok_s
        lines.append(f"The seed ({plain:g} -> {launched:g} tok/s) at this case's tau {tau:.2f} implies a served round "
                     f"cost of {implied_round_cost(tau, plain, launched):.2f} target steps for a 1-step chain (at tau 2, "
                     f"the most a 1-step chain can emit: {implied_round_cost(2.0, plain, launched):.2f}).")
    return "\n".join(["", "1-step chains: break-even here vs on the served target"] + lines) if lines else ""


def record(model_dir: Path, bench: dict) -> None:
    """Write ``bench.json`` beside the draft and re-render its card's acceptance section with it.

    The section is ``eagle3lab.train.model_card``'s (acceptance from ``acceptance.json``, measured by
    ``python -m eagle3lab.train.model_card --acceptance data``; throughput from ``bench.json``).
    """
    from eagle3lab.train.model_card import render_acceptance

    write_json(model_dir / "bench.json", bench)
    if not (model_dir / "acceptance.json").exists():
        print(f"{model_dir / 'acceptance.json'} missing: 'python -m eagle3lab.train.model_card --acceptance data' "
              "measures it and renders the card with this bench.json")
        return
    render_acceptance(model_dir)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--target", default=str(bundled.TARGET))
    p.add_argument("--healthy", default=str(bundled.DRAFT_HEALTHY))
    p.add_argument("--case", default=str(bundled.DRAFT_CASE))
    p.add_argument("--num-prompts", type=int, default=12)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--only", nargs="*", default=None, help="case names to run (default: all)")
    p.add_argument("--served-c", type=float, default=SERVED["c"],
                   help=f"assumed draft step / target step on the served GPU target (default {SERVED['c']})")
    p.add_argument("--engine-overhead", type=float, default=SERVED["overhead"],
                   help="assumed extra per-round engine cost in target steps on the server (no overlap "
                        f"scheduling, draft-extend launch, verify bookkeeping; default {SERVED['overhead']})")
    p.add_argument("--served-batch", type=int, default=SERVED["batch"],
                   help=f"concurrent requests on the server (default {SERVED['batch']})")
    p.add_argument("--out", default="build/bench_decode.json")
    p.add_argument("--record", action="store_true",
                   help="write bench.json beside each draft and its throughput table into the model card")
    args = p.parse_args(argv)

    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    for path in (args.target, args.healthy, args.case):
        if not (Path(path) / "config.json").exists():
            print(f"bench_decode: {path} is not built. Run 'make data' (or pass --target/--healthy/--case).",
                  file=sys.stderr)
            return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_target(args.target, device="cpu")
    drafts = {"healthy": load_draft(args.healthy, target=target, device="cpu"),
              "case": load_draft(args.case, target=target, device="cpu")}
    drafts["case-half-fixed"] = half_fixed(drafts["case"], Path(args.case))
    prompts = load_prompts(n=args.num_prompts)
    results = {}
    for name, which, profile, steps, topk, m in CASES:
        if args.only and name not in args.only:
            continue
        if drafts[which] is None:
            print(f"== {name}: skipped ({Path(args.case) / 'training.json'} says nothing of the trained wiring)")
            continue
        print(f"== {name}", flush=True)
        r = run_benchmark(target, drafts[which], prompts, num_steps=steps, topk=topk, num_draft_tokens=m,
                          profile=profile, max_new_tokens=args.max_new_tokens, repeats=args.repeats, progress=True)
        r["draft_name"] = "case" if which.startswith("case") else which
        r["overrides"] = dict(drafts[which].wiring)   # what-if settings this case ran with ({} = as shipped)
        results[name] = r
        t, a = r["tokens_per_s"], r["acceptance"]
        print(f"   tokens/s (medians of {args.repeats}): generate {t['generate']:.1f}, greedy loop "
              f"{t['greedy_loop']:.1f}, speculative {t['speculative']:.1f} ({r['speedup']['vs_generate']:.2f}x "
              f"generate's median, no interval); tau {a['tau']:.2f}; "
              f"lossless {LosslessCheck.from_json(r['lossless']).words()}", flush=True)
        print(f"   over the greedy loop: decode {ratio_words(r, 'decode')}; "
              f"end to end {ratio_words(r, 'e2e')}", flush=True)

    measured = pd.DataFrame([{
        "case": n, "tau": r["acceptance"]["tau"], "emitted_per_round": r["projection"]["tokens_per_round"],
        "c": r["cost_model"]["c"], "num_steps": r["settings"]["num_steps"], "v_verify": r["projection"]["v_verify"],
        "round_cost": r["projection"]["round_cost"], "projected_speedup": r["projection"]["speedup"],
        "measured_speedup": r["projection"]["measured_speedup"], "projection_error_%": 100 * r["projection"]["error"],
        **_interval_columns(speed_interval(r)), "vs_generate": r["speedup"]["vs_generate"]}
        for n, r in results.items()]).set_index("case")
    measured["break_even_tau"] = measured["round_cost"]
    print("\nMeasured on this device (round cost in target steps = break-even tau; measured_speedup: the median over "
          "repetitions, what projection_error_% compares; measured_ratio [measured_low, measured_high]: decode tokens "
          "over seconds, summed, over the greedy loop's, with its paired interval over prompts; measured_verdict: "
          "its word):")
    print(measured.round(3).to_string())
    served = price_on_served({n: {"tau": r["acceptance"]["tau"], **r["settings"]} for n, r in results.items()},
                             c=args.served_c, overhead=args.engine_overhead, batches=(1, args.served_batch))
    print(f"\nThe same tau on a served Kimi-K2-shaped MoE target (assumed: c = {args.served_c}, engine overhead "
          f"{args.engine_overhead} target steps per round; verify curve from the roofline "
          f"'{ROOFLINE_EXAMPLES[SERVED['roofline']].assumptions}'):")
    print(served.round(3).to_string())
    print(verdicts(results, measured, args.served_c, args.engine_overhead, args.served_batch))

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    payload = {"results": results, "measured": measured.reset_index().to_dict("records"),
               "served_assumptions": {"roofline": SERVED["roofline"], "c": args.served_c,
                                      "engine_overhead": args.engine_overhead, "batch": args.served_batch},
               "served": served.reset_index().to_dict("records")}
    write_json(out, finite_json(payload))
    print(f"\nwrote {out}")
    if args.record:
        command = "python benchmarks/bench_decode.py" + (f" --threads {args.threads}" if args.threads else "")
        for which, path in (("healthy", args.healthy), ("case", args.case)):
            bench = {name: {**r, "command": command} for name, r in results.items() if r["draft_name"] == which}
            if bench:
                record(Path(path), finite_json(bench))
                print(f"recorded in {Path(path) / 'bench.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
