"""``eagle3lab workbook``: execute the notebooks and render ``build/workbook/index.html``."""

from __future__ import annotations

import json
from pathlib import Path


def add_arguments(parser):
    parser.add_argument("--out", default="build/workbook", help="output folder (default build/workbook)")
    parser.add_argument("--only", nargs="*", help="run only notebooks whose file name contains one of these")
    parser.add_argument("--timeout", type=int, default=900, help="seconds allowed per cell")
    parser.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                        help="override a parameters-cell variable in every notebook (VALUE is JSON or a string)")
    parser.add_argument("--track", default=None, help="a named preset of models (eagle3lab.TRACKS: bundled, smollm2), "
                        "the same as --param TRACK=NAME")
    parser.add_argument("--json", action="store_true", help="print the per-notebook results as JSON (docs/cli/workbook.md)")


def _parse_params(pairs: list[str]) -> dict:
    params = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.isidentifier():
            raise ValueError(f"--param {pair!r}: expected NAME=VALUE with a Python identifier as NAME")
        try:
            params[name] = json.loads(value)
        except json.JSONDecodeError:
            params[name] = value
    return params


def run(args) -> int:
    from eagle3lab.app.workbook import build_workbook

    index, results = build_workbook(Path(args.out), only=args.only, timeout=args.timeout,
                                    parameters={**({"TRACK": args.track} if args.track else {}),
                                                **_parse_params(args.param)})
    if args.json:
        print(json.dumps({"index": str(index.resolve()), "notebooks": [r.__dict__ for r in results]}, indent=2))
    else:
        for r in results:
            where = f"in cell {r.cell}: " if r.cell is not None else ""
            print(f"{'ok    ' if r.ok else 'FAILED'} {r.name:<34} {r.seconds:6.0f} s  {where}{r.error or ''}")
        print(f"\nReport: {index.resolve()}")
    return 0 if all(r.ok for r in results) and results else 1
