"""``eagle3lab flags ENGINE [options] -- <launch command>``: what SGLang or vLLM will really run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from eagle3lab.app.cli import add_platform_argument


def add_arguments(parser):
    parser.add_argument("engine", help="sglang or vllm")
    parser.add_argument("--target-arch", metavar="A", help="target architectures[0], e.g. DeepseekV3ForCausalLM "
                        "(overrides the target config)")
    parser.add_argument("--engine-version", metavar="V", help="engine release (0.5.4), build date (YYYY-MM-DD) or "
                        "pre-#PR / post-#PR; default: the current release")
    add_platform_argument(parser, ", and so where it reads the draft's aux ids")
    parser.add_argument("--target-config", metavar="PATH", help="the target's config.json or checkpoint folder")
    parser.add_argument("--draft-config", metavar="PATH", help="the draft's config.json or checkpoint folder")
    parser.add_argument("--num-layers", type=int, metavar="N", help="target num_hidden_layers (if no target config)")
    parser.add_argument("--file", metavar="PATH", help="read the launch command from a file ('-' = stdin)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/flags.md)")
    parser.add_argument("--cross-check", action="store_true", help="also run the installed engine's own resolver "
                        "on the command and show every disagreement with ours (SGLang)")
    parser.add_argument("--engine-python", metavar="PATH", help="the interpreter the engine is installed in, for "
                        "--cross-check (default: this one)")
    parser.add_argument("launch", nargs="*",
                        help="the launch command after --, e.g. -- python -m sglang.launch_server --model-path ...")

    # argparse fills `launch` at the first positional (ENGINE) and then rejects the tokens after `--`;
    # take those from parse_known_args instead, so options may sit between ENGINE and `--`.
    def parse_args(args=None, namespace=None):
        ns, extra = type(parser).parse_known_args(parser, args, namespace)
        if extra and extra[0] == "--":
            ns.launch = list(ns.launch) + extra[1:]
        elif extra:
            parser.error("unrecognized arguments: " + " ".join(extra) + " (put the launch command after --)")
        return ns

    parser.parse_args = parse_args


def _launch(args):
    tokens = list(args.launch)
    if tokens and tokens[0] == "--":
        tokens = tokens[1:]
    if args.file:
        if tokens:
            raise ValueError("give the launch command either after -- or with --file, not both")
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        return text
    if not tokens:
        raise ValueError("no launch command: put it after --, e.g. eagle3lab flags sglang -- python -m "
                         "sglang.launch_server --model-path M --speculative-algorithm EAGLE3 ...")
    return tokens[0] if len(tokens) == 1 else tokens


def run(args) -> int:
    from eagle3lab.engines.flags import resolve_flags
    from eagle3lab.engines.flags.cmdline import parse_count
    from eagle3lab.engines.versions import parse_engine_version
    from eagle3lab.errors import bad_input

    # Bad input is named as the user typed it here; resolve_flags names its Python parameters.
    parse_engine_version(args.engine_version, "--engine-version")
    if args.num_layers is not None:
        parse_count(f"--num-layers {args.num_layers}", args.num_layers, minimum=1)
    if args.engine_platform and args.engine.strip().lower() != "vllm":
        raise bad_input("--engine-platform", None, "engine vllm (the platform decides vLLM's model runner)",
                        args.engine)
    if args.engine_python and not args.cross_check:
        raise ValueError("--engine-python is for --cross-check: add --cross-check")
    launch = _launch(args)
    check = _cross_check(args, launch) if args.cross_check else None
    res = check.ours if check is not None and check.ours is not None else resolve_flags(
        args.engine, launch, target_config=args.target_config, draft_config=args.draft_config,
        engine_version=args.engine_version, target_arch=args.target_arch, num_target_layers=args.num_layers,
        engine_platform=args.engine_platform)
    if args.json:
        out = res.to_dict()
        if check is not None:
            out["cross_check"] = {k: v for k, v in check.to_dict().items() if k != "ours"}
        print(json.dumps(out, indent=2, default=str))
    else:
        print(res.report())
        if check is not None:
            print("\ncross-check\n" + check.report())
    if check is not None and check.disagreements:
        return 3
    return 1 if res.errors else 0


def _cross_check(args, launch):
    from eagle3lab.oracle.cross_check import CROSS_CHECK_ENGINES, cross_check

    if args.engine.strip().lower() not in CROSS_CHECK_ENGINES:
        raise ValueError(f"--cross-check runs the engine's own resolver for {', '.join(CROSS_CHECK_ENGINES)} only; for "
                         f"{args.engine} none is wired up (see docs/cli/flags.md)")
    return cross_check(args.engine, launch, target_config=args.target_config, draft_config=args.draft_config,
                       python=args.engine_python, engine_version=args.engine_version, target_arch=args.target_arch,
                       num_target_layers=args.num_layers)
