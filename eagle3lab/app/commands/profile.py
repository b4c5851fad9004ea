"""``eagle3lab profile``: a draft's acceptance profile (speculation_profile.json), and the engines' replay settings."""

from __future__ import annotations

import json

from eagle3lab.app.cli import add_dtype_argument
from eagle3lab.app.commands.model_options import add_build_arguments, add_model_arguments, model_paths


def add_arguments(parser):
    add_model_arguments(parser)
    parser.add_argument("--out", required=True, metavar="FILE",
                        help="where to write the profile (Model-Optimizer's speculation_profile.json layout, "
                             "schema_version 1.0; see docs/cli/profile.md)")
    parser.add_argument("--engine", default="vllm",
                        help="run the draft as this engine's build does (vllm, sglang, or any eagle3lab profile; "
                             "'none': as its trainer does); default vllm")
    add_build_arguments(parser, "0.32.0", ", and so which aux ids it reads")
    parser.add_argument("--num-steps", type=int, default=4, help="draft positions K per round (default 4)")
    parser.add_argument("--topk", type=int, default=1, help="1 = chain, > 1 = tree (default 1)")
    parser.add_argument("--num-draft-tokens", type=int, default=None, help="tree only: tokens verified per round")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default), > 0 sampled")
    parser.add_argument("--prompts", default=None,
                        help="a .jsonl of prompts ('text' or 'ids' per line; default the bundled code prompts)")
    parser.add_argument("--num-prompts", type=int, default=8, help="how many prompts (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="tokens per prompt, EOS ignored (default 64)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ... (default auto)")
    add_dtype_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the written profile as JSON")



def measure(args):
    """The profile the arguments ask for (models loaded here)."""
    from eagle3lab.analysis.accept_profile import measure_profile
    from eagle3lab.bundled import display_path, load_prompts
    from eagle3lab.engines.profiles import for_build
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    engine = None if args.engine == "none" else args.engine
    if engine is not None:   # bad input refused before any model loads
        for_build(engine, args.engine_version, args.engine_platform)
    target_path, draft_path = model_paths(args)
    target = load_target(target_path, device=args.device, dtype=args.dtype)
    draft = load_draft(draft_path, target=target, device=args.device, dtype=args.dtype)
    if args.prompts is None:
        prompts, source = load_prompts(kind="code", n=args.num_prompts), "bundled data/prompts/prompts.jsonl (code)"
    else:
        prompts, source = load_prompts(args.prompts, n=args.num_prompts), display_path(args.prompts)
    return measure_profile(target, draft, prompts, num_steps=args.num_steps, topk=args.topk,
                           num_draft_tokens=args.num_draft_tokens, max_new_tokens=args.max_new_tokens,
                           temperature=args.temperature, engine=engine, engine_version=args.engine_version,
                           engine_platform=args.engine_platform, prompt_source=source, draft_path=draft_path,
                           progress=not args.json)


def print_profile(profile, out) -> None:
    """The table, the histogram and the replay settings in words."""
    c = profile.conditions
    print(profile.to_frame().attrs["title"])
    print(f"tau {profile.tau} ({profile.tau.level:.0%} over {profile.tau.units} prompts; per-request mean "
          f"{profile.tau_per_request:.3f}); {profile.rounds} rounds; prompts {min(c.prompt_lengths)}-"
          f"{max(c.prompt_lengths)} tokens from {c.prompt_source}")
    for k, (cond, marg) in enumerate(zip(profile.conditional, profile.marginal), start=1):
        print(f"  position {k}: conditional {cond}   marginal {marg}")
    print("accept length histogram: " + "  ".join(f"{j + 1}: {n}" for j, n in enumerate(profile.histogram)))
    print(f"wrote {out}")
    print("vLLM (>= 0.20.0, not its CPU build without Triton) replays it with --speculative-config '"
          + json.dumps(profile.vllm_speculative_config()) + "'")
    if c.topology != "chain":
        print("  (vLLM's synthetic rates are per chain position; this profile was measured on a tree)")
    env = " ".join(f"{k}={v}" for k, v in profile.sglang_simulation().items())
    print(f"SGLang simulates its mean accept length (not the per-position shape, one length per batch) with {env} "
          f"and {profile.sglang_launch()} (it caps the length at num_steps + 1)")


def run(args) -> int:
    from eagle3lab.atomic import write_json

    profile = measure(args)
    data = profile.to_json()
    write_json(args.out, data)
    if args.json:
        print(json.dumps(data, indent=1))
    else:
        print_profile(profile, args.out)
    return 0
