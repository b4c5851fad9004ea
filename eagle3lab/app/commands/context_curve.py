"""``eagle3lab context-curve``: a draft's acceptance against context position, and as each engine runs it past its
own limits (eagle3lab.analysis.context_curve; docs/cli/context-curve.md)."""

from __future__ import annotations

import json

from eagle3lab.app.cli import add_dtype_argument
from eagle3lab.app.commands.model_options import model_paths

ENGINES = ("speculators", "vllm", "sglang")   # engines.context_rules.ENGINES, named here so --help imports no torch
NUM_DOCUMENTS = 10     # analysis.context_curve.MIN_DOCUMENTS (the fewest a change is worded from), named here likewise
FLAGS = {"num_steps": "--num-steps", "n_documents": "--num-documents", "max_length": "--max-length",
         "launch_window": "--draft-window-size"}
LAUNCHED = {"vllm": "max_model_len", "sglang": "context_length"}     # engine -> the argument holding its target length


def add_arguments(parser):
    parser.add_argument("--target", default=None, help="target model folder or short name (default: data/models/target)")
    parser.add_argument("--draft", default=None, help="draft checkpoint folder (default: data/models/draft-healthy)")
    parser.add_argument("--engine", default=None, choices=ENGINES,
                        help="show the curve as this engine runs the draft (default: every engine, newest builds)")
    parser.add_argument("--engine-version", default=None, metavar="V",
                        help="that engine's build (a release such as 0.32.0, a date YYYY-MM-DD or pre-#PR / post-#PR); "
                             "needs --engine; default: the newest code read")
    parser.add_argument("--draft-window-size", type=int, default=None, metavar="W",
                        help="SGLang's --speculative-draft-window-size on the launch (default: not given)")
    parser.add_argument("--allow-longer-context", action="store_true",
                        help="SGLang launched with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    parser.add_argument("--max-model-len", type=int, default=None, metavar="N",
                        help="vLLM's --max-model-len for the target (default: vLLM's max_model_len from its config)")
    parser.add_argument("--context-length", type=int, default=None, metavar="N",
                        help="SGLang's --context-length for the target (default: SGLang's get_context_length)")
    parser.add_argument("--documents", default=None, metavar="FILE",
                        help="a .jsonl ('text' or 'ids' per line) or a text file (default: held-out standard-library "
                             "files from the bundled corpus, or chat transcripts for a target with a chat template); "
                             "cut to the target's context")
    parser.add_argument("--num-documents", type=int, default=NUM_DOCUMENTS,
                        help=f"bundled documents to build (default {NUM_DOCUMENTS}: changes are worded from "
                             f"{NUM_DOCUMENTS} documents on, unworded below)")
    parser.add_argument("--max-length", type=int, default=None, metavar="N",
                        help="tokens per document (default: the target's context, at most 2048; longer is refused)")
    parser.add_argument("--num-steps", type=int, default=3, help="draft positions K per round (default 3)")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, cuda:1 ... (default auto)")
    add_dtype_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the curves and rules as JSON")



def measure(args):
    """The curve the arguments ask for (models loaded here)."""
    from eagle3lab.analysis.context_curve import check_arguments, context_curve, file_documents
    from eagle3lab.errors import bad_input
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    if args.engine_version is not None and args.engine is None:
        raise bad_input("--engine-version", None, "--engine naming the engine it is a build of", "no --engine")
    check_arguments(num_steps=args.num_steps, n_documents=args.num_documents, max_length=args.max_length,
                    launch_window=args.draft_window_size, names=FLAGS)
    target_dir, draft_dir = model_paths(args)
    target = load_target(target_dir, device=args.device, dtype=args.dtype)
    draft = load_draft(draft_dir, target=target, device=args.device, dtype=args.dtype)
    documents = None
    if args.documents is not None:
        documents = file_documents(args.documents, target.tokenizer, args.max_length)
    launched = {e: getattr(args, key) for e, key in LAUNCHED.items() if getattr(args, key) is not None}
    return context_curve(target, draft, documents, engines=(args.engine,) if args.engine else ENGINES,
                         engine_version=args.engine_version, launch_window=args.draft_window_size,
                         allow_longer=args.allow_longer_context, max_length=args.max_length, launched_context=launched,
                         n_documents=args.num_documents, num_steps=args.num_steps, names=FLAGS,
                         progress=not args.json)


def _cell(b) -> str:
    if b.tau is None:
        return f"{b.status:>30}"
    mark = ("*" if b.past_draft_limit else " ") + ("w" if b.past_window else " ")
    return f"{b.tau.value:5.2f} [{b.tau.low:.2f}, {b.tau.high:.2f}] n={b.tau.units:<3}{mark}"


def print_curve(curve) -> None:
    print(curve.title())
    print(f"draft: max_position_embeddings {curve.draft_max_positions}, sliding window "
          f"{curve.draft_window or 'none'}; target context {curve.target_max_positions} (as the engines derive it)")
    print(f"{'position':>10}  " + "  ".join(f"{c.label[:30]:>30}" for c in curve.curves))
    for i, b in enumerate(curve.reference.bins):
        print(f"{b.label:>10}  " + "  ".join(f"{_cell(c.bins[i]):>30}" for c in curve.curves))
    print("  n: documents in the interval; * the bin reaches the draft's max_position_embeddings; w: its anchors "
          "attend past the curve's window")
    for b in curve.reference.bins[1:]:
        if b.change is not None:
            print(f"{b.label}: against the bin before, {b.said(b.change_word, b.change)}: {b.change.value:+.3f} "
                  f"[{b.change.low:+.3f}, {b.change.high:+.3f}] over {b.change.units} documents")
    for c in curve.engines.values():
        for note in c.rule.notes:
            print(f"{c.label}: [{note.code}] {note.text}")


def to_json(curve) -> dict:
    frame = curve.to_frame()
    return {"title": frame.attrs["title"], "documents": curve.documents.source,
            "bins": json.loads(frame.to_json(orient="records")),
            "rules": json.loads(curve.limits_frame().to_json(orient="records"))}


def run(args) -> int:
    curve = measure(args)
    if args.json:
        print(json.dumps(to_json(curve), indent=1))
    else:
        print_curve(curve)
    return 0
