"""Where does `make test`'s time go? The suite run once, its slowest tests and every notebook's execution.

    python benchmarks/bench_suite.py [--top 15] [--out build/bench_suite.json] [-- PYTEST ARGS ...]

Runs pytest in this process (the same collection as ``python -m pytest``; pass arguments after ``--``
to run part of it, e.g. ``-- tests/notebooks``) and prints:

- the wall time against the 15-minute budget of ``make test`` on the 2-core machine, and the machine's
  load average before and after (a loaded machine is slower: say what else ran);
- the slowest ``--top`` tests (setup + call + teardown: a test that first asks for a notebook, a trained
  draft or an engine subprocess pays for it in its setup or call), each with what it buys: the first
  sentence of its docstring, else of its module's;
- each notebook execution (``eagle3lab.app.workbook.execute_notebook``, timed around every call the
  suite makes: tests/helpers/notebooks.py runs each notebook once) and its share of the total.

Nothing is asserted: speed is this script's to print (the budget is the lead's to judge).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]   # pytest's rootdir: node ids are relative to it
BUDGET_S = 15 * 60      # `make test` on this 2-core machine (developers' guide)
MAKE_ENV = {"PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}   # the Makefile's


def first_sentence(doc: str | None, width: int = 150) -> str:
    """A docstring's first sentence (its first paragraph up to a full stop), cut at ``width`` characters."""
    paragraph = " ".join((doc or "").strip().split("\n\n")[0].split())
    sentence = paragraph.split(". ")[0].rstrip(".")
    return sentence if len(sentence) <= width else sentence[:width - 3] + "..."


def buys(nodeid: str) -> str:
    """What a test buys: its docstring's first sentence, else its module's, read from the source (under
    pytest-xdist the collected items live in the workers, not in this process)."""
    import ast

    path, _, name = nodeid.partition("::")
    try:
        tree = ast.parse((ROOT / path).read_text())
    except (OSError, SyntaxError):
        return ""
    func = name.split("::")[-1].split("[")[0]
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == func:
            return first_sentence(ast.get_docstring(node)) or first_sentence(ast.get_docstring(tree))
    return first_sentence(ast.get_docstring(tree))


class SuiteTimes:
    """A pytest plugin: seconds per test (all phases); ``buys`` says what each test buys."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.outcome: dict[str, str] = {}

    def pytest_runtest_logreport(self, report):
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        if report.when == "call" or report.outcome != "passed":
            self.outcome[report.nodeid] = report.outcome


def time_notebooks() -> list[dict]:
    """Wrap ``execute_notebook`` so that every notebook the suite executes is timed (before pytest imports it)."""
    from eagle3lab.app import workbook

    calls: list[dict] = []
    execute = workbook.execute_notebook

    def timed(path, *args, **kwargs):
        start, ok = time.perf_counter(), False
        try:
            nb = execute(path, *args, **kwargs)
            ok = True
            return nb
        finally:
            calls.append({"notebook": Path(path).name, "seconds": time.perf_counter() - start, "ok": ok})

    workbook.execute_notebook = timed
    return calls


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    pytest_args = argv[argv.index("--") + 1:] if "--" in argv else []
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--out", default="build/bench_suite.json")
    args = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)

    import pytest

    from eagle3lab.analysis.benchmark import finite_json
    from eagle3lab.atomic import write_json

    for key, value in MAKE_ENV.items():     # what `make test` exports (subprocesses and kernels inherit it)
        os.environ.setdefault(key, value)
    notebooks, times = time_notebooks(), SuiteTimes()
    load_before, start = os.getloadavg(), time.perf_counter()
    rc = int(pytest.main(["-q", "-p", "no:cacheprovider", *pytest_args], plugins=[times]))
    wall, load_after = time.perf_counter() - start, os.getloadavg()

    slowest = sorted(times.seconds.items(), key=lambda kv: -kv[1])[:args.top]
    print(f"\npytest exit {rc}: {len(times.seconds)} tests in {wall:.0f} s = {wall / BUDGET_S:.2f}x the "
          f"{BUDGET_S // 60}-minute budget, {os.cpu_count()} CPUs, load average {load_before[0]:.1f} before, "
          f"{load_after[0]:.1f} after")
    print(f"\nslowest {len(slowest)} tests (setup + call + teardown):")
    for nodeid, secs in slowest:
        print(f"  {secs:7.1f} s  {100 * secs / wall:4.1f}%  {times.outcome.get(nodeid, '?'):<7} {nodeid}\n"
              f"{'':26}buys: {buys(nodeid) or '(no docstring)'}")
    print("\nnotebook executions:")
    if not notebooks and any(a == "-n" or a.startswith("-n") or a.startswith("--numprocesses") for a in pytest_args):
        print("  (not timed under pytest-xdist: the notebooks run in the workers; their tests' seconds are above)")
    for call in notebooks:
        print(f"  {call['seconds']:7.1f} s  {100 * call['seconds'] / wall:4.1f}%  "
              f"{'ok' if call['ok'] else 'FAILED':<7} {call['notebook']}")
    print(f"  {sum(c['seconds'] for c in notebooks):7.1f} s  in all")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_json(out, finite_json({"exit": rc, "wall_s": wall, "budget_s": BUDGET_S, "cpus": os.cpu_count(),
                                 "load_before": list(load_before), "load_after": list(load_after),
                                 "pytest_args": pytest_args, "notebooks": notebooks,
                                 "slowest": [{"test": n, "seconds": s, "outcome": times.outcome.get(n),
                                              "buys": buys(n)} for n, s in slowest],
                                 "tests": times.seconds}))
    print(f"\nwritten: {out}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
