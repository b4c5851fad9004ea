"""``eagle3lab session``: show a recorded debug session, or what changed between two."""

from __future__ import annotations

import json


def add_arguments(parser):
    parser.add_argument("action", choices=("show", "diff"), help="show DIR, or diff A B")
    parser.add_argument("folders", nargs="+", metavar="DIR", help="session folder(s)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/session.md)")


def run(args) -> int:
    from eagle3lab.app.session import Session, diff_sessions
    from eagle3lab.errors import bad_input

    want = 1 if args.action == "show" else 2
    if len(args.folders) != want:
        raise bad_input(f"session {args.action}", "DIR", f"{want} session folder(s)", len(args.folders))
    sessions = [Session.load(f) for f in args.folders]
    if args.action == "show":
        info = sessions[0].summary()
        if args.json:
            print(json.dumps(info, indent=2, default=str))
            return 0
        print(f"session {info['name']} ({info['path']}): {info['command'].get('kind')}")
        for role, m in info["models"].items():
            print(f"  model {role}: {m['path']}  sha256 {m['sha256'][:12]}  {m['files']} files, {m['bytes']:,} bytes")
        for k, v in info["parameters"].items():
            print(f"  parameter {k} = {v!r}")
        for k, m in info["metrics"].items():
            bounds = f" [{m['low']:.3f}, {m['high']:.3f}]" if m.get("low") is not None else ""
            print(f"  {k}: {m['value']:.4g}{bounds}" if isinstance(m["value"], (int, float)) else f"  {k}: {m['value']}")
        for note in info["notes"]:
            print(f"  note: {note}")
        print(f"  tables {info['tables']}, figures {info['figures']}")
        return 0
    table = diff_sessions(*sessions)
    if args.json:
        print(json.dumps({"a": str(sessions[0].path), "b": str(sessions[1].path),
                          "differences": table.to_dict("records")}, indent=2, default=str))
        return 0
    if table.empty:
        print("no differences: same models, command, parameters and metrics")
        return 0
    print(table.to_string(index=False))
    return 0
