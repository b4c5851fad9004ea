"""``eagle3lab serve-check --engine vllm --target T --draft D``: the real vLLM's counters beside our prediction."""

from __future__ import annotations

import json
import sys

from eagle3lab.app.cli import add_dtype_argument
from eagle3lab.app.commands.model_options import add_model_arguments

# exit codes (docs/cli/serve-check.md)
AGREES, DISAGREES, BAD_INPUT, ENGINE_MISSING, ENGINE_FAILED = 0, 1, 2, 3, 4


def add_arguments(parser):
    parser.add_argument("--engine", choices=("vllm",), default="vllm", help="the engine that serves (vllm)")
    add_model_arguments(parser)
    parser.add_argument("--prompts", default=None,
                        help="a .jsonl of prompts ('text' or 'ids' per line; the first 8 are served); default: the "
                             "8 code prompts of data/prompts/prompts.jsonl")
    parser.add_argument("--num-steps", type=int, default=4, help="vLLM's num_speculative_tokens (default 4)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="greedy tokens per prompt (default 64)")
    add_dtype_argument(parser, "vLLM and eagle3lab's emulation (both on the CPU)")
    parser.add_argument("--engine-python", default=None, metavar="PY",
                        help="the python where vLLM is installed (default: $EAGLE3LAB_VLLM_PYTHON, else .venv-vllm "
                             "built by `make engines`)")
    parser.add_argument("--profile-out", default=None, metavar="FILE",
                        help="also write the served run's acceptance profile from vLLM's counters (the "
                             "speculation_profile.json layout of `eagle3lab profile`) and print it beside the "
                             "emulated one")
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/serve-check.md)")


def run(args) -> int:
    from eagle3lab import bundled
    from eagle3lab.analysis.benchmark import finite_json
    from eagle3lab.app.commands.model_options import model_paths
    from eagle3lab.atomic import write_json
    from eagle3lab.doctor.serve_check import EngineFailed, EngineMissing, default_prompts, serve_check
    from eagle3lab.models.device import dtype_name, resolve_dtype

    dtype = dtype_name(resolve_dtype(args.dtype, "cpu"))   # vLLM's CPU build and the emulation both run here
    try:
        target, draft = model_paths(args)
        prompts = default_prompts(args.prompts) if args.prompts else None
        report = serve_check(target, draft, prompts=prompts, num_steps=args.num_steps,
                             max_new_tokens=args.max_new_tokens, dtype=dtype, engine_python=args.engine_python,
                             progress=not args.json, profiles=args.profile_out is not None,
                             prompt_source=bundled.display_path(args.prompts) if args.prompts else None)
    except EngineMissing as err:
        print(f"eagle3lab serve-check: {err}", file=sys.stderr)
        return ENGINE_MISSING
    except EngineFailed as err:
        print(f"eagle3lab serve-check: {err}", file=sys.stderr)
        return ENGINE_FAILED
    if args.profile_out is not None:
        write_json(args.profile_out, finite_json(report["profile"]))
    if args.json:
        print(json.dumps(finite_json(report), indent=2))
    else:
        print_report(report)
        if args.profile_out is not None:
            print_profiles(report, args.profile_out)
    return AGREES if report["verdict"] == "AGREES" else DISAGREES


def print_report(r: dict) -> None:
    s, v, o, ti = r["settings"], r["vllm"], r["eagle3lab"], r["token_identity"]
    print(f"vLLM {r['engine_version']} ({r['engine_platform']} build, {r['runner']}) served {r['draft']} for "
          f"{r['target']}: {s['prompts']} prompts x {s['max_new_tokens']} greedy tokens, "
          f"{s['num_speculative_tokens']} speculative tokens, {r['dtype']}")
    print(f"layers     vLLM {r['layers']['vllm']} ({r['layers']['vllm_source']})   eagle3lab "
          f"{[f'resid[{k}]' for k in r['layers']['eagle3lab']]} ({o['profile']}), norm_before_residual "
          f"{r['norm_before_residual']}")
    print(f"{'':10} {'drafts':>7} {'drafted':>8} {'accepted':>9} {'tau':>7}   accepted per position")
    for name, c in (("vLLM", v), ("eagle3lab", o)):
        print(f"{name:10} {c['num_drafts']:>7} {c['num_draft_tokens']:>8} {c['num_accepted_tokens']:>9} "
              f"{c['tau']:>7.3f}   {c['accepted_per_pos']}")
    print(f"tokens     vLLM with the draft identical to vLLM without speculation on {ti['vllm_spec_vs_vllm_plain']}"
          f"/{ti['prompts']} prompts; eagle3lab's output on {ti['eagle3lab_vs_vllm_plain']}/{ti['prompts']}")
    line = f"verdict    {r['verdict']}"
    if r["verdict"] != "AGREES":
        line += f": differs in {', '.join(r['differs']) or 'nothing named'}"
        if r["explained_by"]:
            line += f" (a re-run with vLLM's {r['explained_by']} reproduces vLLM's counts exactly)"
    print(line)


def print_profiles(r: dict, out) -> None:
    """The served run's profile (vLLM's counters) beside the emulated one, per position and tau."""
    print(f"profile    vLLM's counters written to {out}; beside eagle3lab's emulation of the same run "
          "(conditional c_k, marginal a_k, tau; emulated interval over prompts, vLLM's counters one unit):")
    print(f"{'':10} {'quantity':<14} {'emulated':>8} {'interval':>18} {'vLLM':>8} {'vLLM - em.':>10}  in interval")
    for row in r["profile_comparison"]:
        interval = f"[{row['emulated_low']:.3f}, {row['emulated_high']:.3f}]"
        print(f"{'':10} {row['quantity']:<14} {row['emulated']:>8.3f} {interval:>18} {row['real']:>8.3f} "
              f"{row['real_minus_emulated']:>+10.3f}  {'yes' if row['in_interval'] else 'no'}")
