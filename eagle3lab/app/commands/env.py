"""``eagle3lab env``: the kernel's device, library versions and the bundled models."""

from __future__ import annotations

import json


def add_arguments(parser):
    parser.add_argument("--json", action="store_true", help="print one JSON object (see docs/cli/env.md)")


def run(args) -> int:
    from eagle3lab.app.environment import environment_report

    report = environment_report()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"device (auto): {report['device']['device_auto']}  dtype (auto): {report['device']['dtype_auto']}")
    for gpu in report["device"]["gpus"]:
        print(f"  GPU {gpu['index']}: {gpu['name']} ({gpu['memory_gib']} GiB)")
    print("libraries: " + ", ".join(f"{k} {v}" for k, v in report["libraries"].items()))
    print("bundled models: " + ", ".join(f"{k} ({'present' if v else 'missing: run make data'})"
                                         for k, v in report["bundled"].items()))
    return 0
