"""``eagle3lab convert DRAFT --to FORMAT OUT``: rewrite a draft in another family's format."""

from __future__ import annotations

import json


def add_arguments(parser):
    parser.add_argument("draft", help="draft checkpoint folder")
    parser.add_argument("--to", required=True, choices=["speculators", "sglang", "eagle"], help="output family")
    parser.add_argument("out", help="output folder (must not exist unless --overwrite)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--target", help="target folder (layer count for id translation; embedding if the draft has none)")
    group.add_argument("--num-target-layers", type=int, metavar="N", help="the target's number of decoder layers")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    parser.add_argument("--keep-stated-flags", action="store_true",
                        help="write each norm flag the source config states as stated, not as its trainer ran it")
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/convert.md)")


def run(args) -> int:
    from eagle3lab.models.checkpoint import convert_draft

    result = convert_draft(args.draft, args.out, args.to, target=args.target,
                           num_target_layers=args.num_target_layers, overwrite=args.overwrite,
                           keep_stated_flags=args.keep_stated_flags)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2))
        return 0
    src = result.source
    print(f"{src['path']} ({src['format']}) -> {result.path} ({result.format})")
    print(f"  aux ids written: {result.aux_ids_written} (trained on resid {result.trained_resid or 'engine defaults'})")
    print("  flags written: " + ", ".join(f"{k}={v}" for k, v in result.flags_written.items()))
    print(f"  embedding written: {result.embedding_written}")
    for w in result.warnings:
        print(f"  warning: {w}")
    return 0
