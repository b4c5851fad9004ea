"""``eagle3lab bench``: baseline vs speculative tokens/s, acceptance and the cost model, in one run."""

from __future__ import annotations

import json

from eagle3lab.app.cli import add_dtype_argument
from eagle3lab.app.commands.model_options import add_build_arguments, add_model_arguments, model_paths


def add_arguments(parser):
    add_model_arguments(parser)
    parser.add_argument("--profile", default=None,
                        help="run the draft as this engine does (speculators, vllm, sglang, specforge, eagle, ...); "
                             "default: the checkpoint family's trainer")
    add_build_arguments(parser, "vLLM 0.32.0", ", and so which aux ids it reads (with --profile vllm)", "with --profile: ")
    parser.add_argument("--aux-resid", default=None, metavar="K,K,K",
                        help="what-if: feed fc these target states instead (resid indices, 0 = embedding output), "
                             "e.g. the wiring the draft was trained on")
    parser.add_argument("--norm-before-residual", choices=("true", "false"), default=None,
                        help="what-if: force the first layer's residual rule (true = hidden_norm(h), false = raw h)")
    parser.add_argument("--num-steps", type=int, default=5, help="draft forwards per round (default 5)")
    parser.add_argument("--topk", type=int, default=1, help="1 = chain, > 1 = tree (default 1)")
    parser.add_argument("--num-draft-tokens", type=int, default=None,
                        help="tokens verified per round incl. the root (chain: forced to num-steps + 1, as SGLang does)")
    parser.add_argument("--prompts", default=None,
                        help="a .jsonl of prompts ('text' or 'ids' per line; default data/prompts/prompts.jsonl)")
    parser.add_argument("--num-prompts", type=int, default=12, help="how many prompts (default 12)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per prompt (default 64)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions, medians reported (default 3)")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ... (default auto)")
    add_dtype_argument(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/bench.md)")



def wiring_overrides(args, num_aux: int, num_layers: int) -> dict:
    """``--aux-resid`` / ``--norm-before-residual`` -> keyword arguments of ``Eagle3Draft.rewired``."""
    from eagle3lab.errors import bad_input

    out: dict = {}
    if args.aux_resid is not None:
        expected = f"{num_aux} comma-separated resid indices in 0..{num_layers} (0 = embedding output), e.g. 0,3,7"
        try:
            resid = [int(k) for k in args.aux_resid.split(",")]
        except ValueError:
            raise bad_input("--aux-resid", None, expected, repr(args.aux_resid)) from None
        if len(resid) != num_aux or not all(0 <= k <= num_layers for k in resid):
            raise bad_input("--aux-resid", None, expected, repr(args.aux_resid),
                            f"The draft's fc reads {num_aux} target states; the target has {num_layers} layers.")
        out["aux_resid"] = resid
    if args.norm_before_residual is not None:
        out["norm_before_residual"] = args.norm_before_residual == "true"
    return out


def profile_for(args):
    """``--profile`` as the build ``--engine-version`` / ``--engine-platform`` runs it (None: the draft's own)."""
    from eagle3lab.engines.profiles import for_build
    from eagle3lab.errors import bad_input

    if args.profile is None:
        if args.engine_version is not None or args.engine_platform is not None:
            raise bad_input("--engine-version / --engine-platform", None, "--profile naming whose build they are "
                            "(e.g. --profile vllm)", "no --profile")
        return None
    return for_build(args.profile, args.engine_version, args.engine_platform)


def build_notes(draft, profile) -> dict:
    """The engine build the draft ran under and what its reading of the ids says (vLLM: the model runner)."""
    if profile is None or (profile.engine_version is None and profile.engine_platform is None):
        return {}
    d = draft.under(profile)
    res = d.aux_resolution
    return {"engine_version": profile.engine_version, "engine_platform": profile.engine_platform,
            "model_runner": res.runner, "aux_notes": [{"code": n.code, "text": n.text} for n in res.notes]}


def run(args) -> int:
    import torch

    from eagle3lab.analysis.benchmark import finite_json, run_benchmark
    from eagle3lab.analysis.verdicts import speed_word
    from eagle3lab.bundled import display_path, load_prompts
    from eagle3lab.decoding.lossless import LosslessCheck
    from eagle3lab.engines.acceptance import Interval
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    profile = profile_for(args)   # bad input refused before any model loads
    target_path, draft_path = model_paths(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    target = load_target(target_path, device=args.device, dtype=args.dtype)
    draft = load_draft(draft_path, target=target, device=args.device, dtype=args.dtype)
    overrides = wiring_overrides(args, draft.config.num_aux, target.num_layers)
    if overrides:   # they survive the profile: the engine's own choice is what they replace
        draft = draft.rewired(**overrides)
    prompts = load_prompts(args.prompts, n=args.num_prompts)
    result = run_benchmark(target, draft, prompts, num_steps=args.num_steps, topk=args.topk,
                           num_draft_tokens=args.num_draft_tokens, profile=profile,
                           max_new_tokens=args.max_new_tokens, repeats=args.repeats, progress=not args.json)
    result["draft"] = display_path(draft_path)
    result["overrides"] = overrides
    result["engine_build"] = build_notes(draft, profile)
    result = finite_json(result)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    s, t, sp, acc, cm, pr = (result[k] for k in ("settings", "tokens_per_s", "speedup", "acceptance",
                                                 "cost_model", "projection"))
    for w in result["warnings"]:
        print(f"warning: {w}")
    print(f"target {result['target']}  draft {result['draft']}  profile {result['profile']}  "
          f"aux {[f'resid[{k}]' for k in result['aux_resid']]}  norm_before_residual {result['norm_before_residual']}"
          + (f"  (what-if overrides: {result['overrides']})" if result["overrides"] else ""))
    if result["engine_build"]:
        b = result["engine_build"]
        print(f"build      {result['profile']} {b['engine_version'] or '(newest read)'} {b['engine_platform'] or ''}"
              + (f", {b['model_runner']} model runner" if b["model_runner"] else "")
              + "".join(f"\n           {n['code'] or 'note'}: {n['text']}" for n in b["aux_notes"]))
    print(f"{result['device']} {result['dtype']}, {result['threads']} threads; num_steps {s['num_steps']}, "
          f"topk {s['topk']}, num_draft_tokens {s['num_draft_tokens']}; {s['prompts']} prompts x "
          f"{s['max_new_tokens']} tokens, median of {s['repeats']}")
    print(f"tokens/s   generate {t['generate']:.1f}   greedy loop {t['greedy_loop']:.1f}   "
          f"speculative {t['speculative']:.1f}")
    print(f"speedup    vs generate {sp['vs_generate']:.2f}x (medians, no interval)   "
          f"(lossless: {LosslessCheck.from_json(result['lossless']).words()})")
    for kind, i in result["speed_ratio"].items():   # over the greedy loop, paired over prompts
        print(f"           {kind} vs greedy loop {i['value']:.2f}x [{i['low']:.2f}, {i['high']:.2f}] "
              f"({i['level']:.0%}, {i['units']} prompts): {speed_word(Interval(**i))}")
    fmt = lambda xs: "[" + ", ".join("-" if x is None else f"{x:.2f}" for x in xs) + "]"
    print(f"acceptance tau {acc['tau']:.3f}   conditional c_k {fmt(acc['conditional'])}   "
          f"survival a_k {fmt(acc['survival'])}")
    curve = "  ".join(f"{n}:{v:.2f}" for n, v in cm["verify_target_steps"].items())
    print(f"costs      c = {cm['c']:.3f}   verify v(M) in target steps  {curve}")
    print(f"model      round cost {pr['round_cost']:.2f} target steps (= break-even tau), {pr['tokens_per_round']:.2f} "
          f"tokens emitted per round   projected decode speedup {pr['speedup']:.2f}x   measured "
          f"{pr['measured_speedup']:.2f}x   error {100 * pr['error']:+.1f}%")
    return 0
