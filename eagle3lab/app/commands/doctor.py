"""``eagle3lab doctor``: every finding for a draft as an engine serves it, its proof, and its fix."""

from __future__ import annotations

import json
from pathlib import Path

from eagle3lab.app.cli import add_dtype_argument, add_platform_argument


def add_arguments(parser):
    parser.add_argument("--draft", required=True, help="the draft checkpoint folder")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--target", default=None,
                     help="the target folder (or a short name such as smollm2-135m-instruct), run here")
    src.add_argument("--dump", default=None,
                     help="a hidden-state dump folder (eagle3lab or vLLM extract_hidden_states); then --target-head "
                          "names the target folder, read only for config.json and its norm and lm_head tensors")
    parser.add_argument("--target-head", default=None, help="with --dump: the target folder (config and head only)")
    parser.add_argument("--dump-layer-ids", default=None, metavar="K,K,...",
                        help="with a bare vLLM dump (no manifest.json): the eagle_aux_hidden_state_layer_ids it was "
                             "dumped with")
    parser.add_argument("--engine", default="sglang", choices=("sglang", "vllm"), help="the serving engine (default sglang)")
    parser.add_argument("--engine-version", default=None, help="the engine build (0.5.4, YYYY-MM-DD, pre-#N/post-#N)")
    add_platform_argument(parser, ", and so which id key it reads")
    parser.add_argument("--engine-args", default=None, metavar='"<launch command>"',
                        help="the server's launch command, resolved as the engine would")
    parser.add_argument("--server-log", default=None, metavar="FILE",
                        help="the server's log (SGLang 'accept len' lines, vLLM 'SpecDecoding metrics' lines) or "
                             "vLLM /metrics text: compared with the as-served prediction")
    parser.add_argument("--write-fixed", default=None, metavar="OUT",
                        help="write the corrected checkpoint for --engine to OUT and re-measure it")
    parser.add_argument("--overwrite", action="store_true", help="with --write-fixed: replace OUT")
    parser.add_argument("--prompts", default=None, help="a .jsonl of prompts (default: the bundled held-out prompts)")
    parser.add_argument("--num-prompts", type=int, default=8,
                        help="prompts the evidence starts with (default 8)")
    parser.add_argument("--max-prompts", type=int, default=None,
                        help="the cap: prompts are added while the fix is not told apart from its rivals (default 48, "
                             "the bundled pool: draws that reach it give the same answer)")
    parser.add_argument("--prompt-step", type=int, default=8, help="prompts added at a time (default 8)")
    parser.add_argument("--seed", type=int, default=None,
                        help="draw the prompts in a random order with this seed (default: the file's order)")
    parser.add_argument("--max-new-tokens", type=int, default=48, help="greedy tokens per prompt (default 48)")
    parser.add_argument("--num-steps", type=int, default=3,
                        help="chain length scored when no launch command says (default 3)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1 ... (default cpu)")
    add_dtype_argument(parser)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--session", default=None, metavar="DIR",
                        help="record this run as a session folder (eagle3lab session show / diff; docs/cli/session.md)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/doctor.md)")


def _interval(i) -> str:
    return "-" if i is None else f"{i.value:.2f} [{i.low:.2f}, {i.high:.2f}]"


def run(args) -> int:
    import torch

    from eagle3lab.bundled import load_prompts
    from eagle3lab.doctor.run import run_doctor
    from eagle3lab.doctor.write_fixed import write_fixed
    from eagle3lab.errors import bad_input
    from eagle3lab.models.device import dtype_name, resolve_dtype

    if args.dump and not args.target_head:
        raise bad_input("--dump", "--target-head", "the target folder for its config and head", None)
    if not args.dump and not args.target:
        raise bad_input("doctor", "--target / --dump", "where the target states come from", None)
    layer_ids = None
    if args.dump_layer_ids:
        try:
            layer_ids = [int(k) for k in args.dump_layer_ids.split(",")]
        except ValueError:
            raise bad_input("--dump-layer-ids", None, "comma-separated integers, e.g. 1,2,3", repr(args.dump_layer_ids)) from None
    if args.threads:
        torch.set_num_threads(args.threads)
    args.dtype_used = dtype_name(resolve_dtype(args.dtype, args.device))   # the rule load_target / load_draft apply
    server_log = None
    if args.server_log:
        path = Path(args.server_log)
        if not path.is_file():
            raise bad_input(path, None, "a server log or metrics text file", "no such file")
        server_log = path.read_text(errors="replace")
    report = run_doctor(args.draft, target=args.target_head if args.dump else args.target, dump=args.dump,
                        dump_layer_ids=layer_ids,
                        engine=args.engine, engine_version=args.engine_version,
                        engine_platform=args.engine_platform, engine_args=args.engine_args,
                        server_log=server_log, prompts=load_prompts(args.prompts), num_prompts=args.num_prompts,
                        max_prompts=args.max_prompts, prompt_step=args.prompt_step, seed=args.seed,
                        max_new_tokens=args.max_new_tokens, num_steps=args.num_steps, device=args.device,
                        dtype=args.dtype_used, progress=not args.json)
    remaining = report.critical
    fixed = None
    if args.session:
        _record(report, args)
    if args.write_fixed:
        fixed = write_fixed(report, args.write_fixed, overwrite=args.overwrite)
        remaining = fixed["remaining"]
    if args.json:
        out = {**report.to_dict(), "dtype": args.dtype_used}
        if fixed is not None:
            out["written"] = {**{k: v for k, v in fixed.items()
                                 if k not in ("tau", "predicted", "difference", "written", "remaining")},
                              "tau": vars(fixed["tau"]), "predicted": vars(fixed["predicted"]),
                              "difference": vars(fixed["difference"]), "warnings": fixed["written"]["warnings"]}
        out["remaining_critical"] = [f.code for f in remaining]
        print(json.dumps(out, indent=2, default=str))
    else:
        print(f"doctor: draft {report.draft}  target {report.target}  engine {report.engine} "
              f"{report.engine_version or '(current)'}  on {report.device} in {args.dtype_used}")
        for note in report.notes:
            print(f"note: {note}")
        for f in report.findings:
            measured = "" if f.gain is None else (f"   tau {_interval(f.tau_before)} -> {_interval(f.tau_after)}, "
                                                  f"undoing it alone costs {_interval(f.undone)}")
            print(f"\n[{f.severity.upper()}] {f.code}: {f.title}{measured}\n  evidence: {f.text}")
            if f.fix:
                print(f"  fix: {f.fix}")
        print("\nladder of single fixes (teacher-forced chain acceptance on the target's own greedy text):")
        print(report.ladder_table().round(3).to_string())
        print("\n" + report.summary())
        if fixed is not None:
            print(f"\nwrote {fixed['path']} ({report.engine} format): as {report.engine} serves it "
                  f"{fixed['served_wiring']}, tau {_interval(fixed['tau'])}; predicted "
                  f"{fixed['predicted'].value:.2f} (difference {_interval(fixed['difference'])}"
                  f"{'' if fixed['agrees'] else ': it does NOT match'})")
            for w in fixed["written"]["warnings"]:
                print(f"  warning: {w}")
        if remaining:
            print(f"\n{len(remaining)} critical finding(s) remain: {', '.join(f.code for f in remaining)}")
    return 1 if remaining else 0


def _record(report, args) -> None:
    """The run as a session: the command, the models by fingerprint, every measured tau and gain."""
    from eagle3lab.app.session import Session

    keep = ("engine", "engine_version", "engine_platform", "num_prompts", "max_prompts", "prompt_step", "seed",
            "max_new_tokens", "num_steps", "device", "dtype", "prompts")
    s = Session("doctor", command={"kind": "doctor", "argv": list(args.argv)},
                parameters={k: getattr(args, k) for k in keep}, runs_on={"device": report.device,
                                                                          "dtype": args.dtype_used})
    s.model("draft", args.draft)
    target = args.target_head if args.dump else args.target
    if target and Path(target).exists():
        s.model("target", target)
    if args.dump:
        s.model("dump", args.dump)
    for rung in report.ladder:
        s.metric(f"tau: {rung.name} (chain {rung.num_steps})", rung.tau)
    for f in report.findings:
        if f.gain is not None:
            s.metric(f"gain: {f.code}", f.gain)
    s.metric("critical findings", len(report.critical))
    s.table("findings", report.table())
    s.table("ladder", report.ladder_table().reset_index())
    s.notes = [report.summary(), *report.notes]
    s.save(args.session)
