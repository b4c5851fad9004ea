"""The package's layers: no import circle, no lower layer importing a higher one, engines without torch.

Every ``import`` counts, those inside functions too (a circle made only of lazy imports is still a
circle a reader has to untangle).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "eagle3lab"

# rank of each top-level room; a module may import only modules of its own rank or below
RANKS = {"errors": 0, "findings": 0, "atomic": 0, "bundled": 0, "__init__": 0,
         "engines": 1, "oracle": 2, "models": 2, "decoding": 3, "analysis": 4, "doctor": 5, "readings": 6, "app": 7, "train": 7}


def _public_api() -> dict[str, str]:
    """eagle3lab's lazy public names -> the module each comes from (read from __init__'s table)."""
    import eagle3lab

    return dict(eagle3lab._EXPORTS)


PUBLIC = _public_api()


def module_name(path: Path) -> str:
    parts = ("eagle3lab", *path.relative_to(PKG).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PKG.rglob("*.py")}


def room(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports_of(path: Path, known: dict[str, Path], me: str | None = None) -> set[str]:
    """eagle3lab modules a file imports (``from pkg import name`` is ``pkg.name`` when that is a module)."""
    out = set()
    me = me or module_name(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("eagle3lab")}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative import
                pkg = me if path.name == "__init__.py" else me.rpartition(".")[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rpartition(".")[0]
                base = f"{pkg}.{base}".rstrip(".")
            if not base.startswith("eagle3lab"):
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                if base == "eagle3lab" and a.name in PUBLIC:   # the lazy public API: the module behind the name
                    out.add(PUBLIC[a.name])
                else:
                    out.add(sub if sub in known else base)
    return out - {me}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {m: imports_of(p, known) for m, p in known.items()}


def find_cycle(g: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m):
        state[m] = 1
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if state.get(n) == 1:
                return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)):
                return c
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(g):
        if m not in state and (c := visit(m)):
            return c
    return None


def test_every_module_is_in_a_known_room():
    assert {room(m) for m in modules()} <= set(RANKS), sorted({room(m) for m in modules()} - set(RANKS))


def test_no_import_circle():
    assert find_cycle(graph()) is None, " -> ".join(find_cycle(graph()))


def test_no_lower_layer_imports_a_higher_one():
    bad = [f"{m} ({room(m)}) imports {n} ({room(n)})" for m, deps in graph().items() for n in deps
           if RANKS[room(n)] > RANKS[room(m)] or (room(m) == "train" and room(n) == "app")]
    assert not bad, "\n".join(bad)


def test_flag_engine_modules_import_no_package_init():
    g = graph()
    for m in ("eagle3lab.engines.flags.sglang", "eagle3lab.engines.flags.vllm", "eagle3lab.engines.flags.sglang_overlap"):
        assert "eagle3lab.engines.flags" not in g[m], m


def test_the_checker_sees_lazy_imports_and_circles(tmp_path):
    """The graph reader must see an import inside a function, and the cycle finder must report a circle."""
    f = tmp_path / "x.py"
    f.write_text("import os\n\ndef f():\n    from eagle3lab.engines import layer_ids\n    from . import y\n")
    known = {"eagle3lab.engines.layer_ids": f, "eagle3lab.models.y": f}
    assert imports_of(f, known, me="eagle3lab.models.x") == {"eagle3lab.engines.layer_ids", "eagle3lab.models.y"}
    f.write_text("from eagle3lab import decode_sweep, __version__\n")   # a public name is its home module
    assert imports_of(f, known, me="eagle3lab.models.x") == {"eagle3lab.analysis.benchmark", "eagle3lab"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_engine_layer_imports_without_torch():
    """Every module of the engine layer (and the foundation) imports where ``import torch`` raises."""
    mods = sorted(m for m in modules() if RANKS[room(m)] <= RANKS["engines"])
    code = f"""
import importlib, sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is blocked in this test")
sys.meta_path.insert(0, NoTorch())
for m in {mods!r}:
    importlib.import_module(m)
try:
    import torch
except ImportError:
    print("ok", len({mods!r}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PKG.parent)
    assert out.returncode == 0 and out.stdout.startswith("ok"), out.stderr[-2000:]
    assert len(mods) >= 10



def test_every_public_name_resolves_to_its_home():
    """``eagle3lab.NAME`` for every name in the lazy table: a name whose home lost it fails here, not at a user's
    ``from eagle3lab import *``."""
    import importlib

    missing = [(name, module) for name, module in PUBLIC.items()
               if not hasattr(importlib.import_module(module), name)]
    assert missing == []


# a room over a quarter of the package is several concepts in one room (issue 34)
MAX_ROOM_SHARE = 0.25


def room_lines() -> dict[str, int]:
    lines: dict[str, int] = {}
    for m, path in modules().items():
        lines[room(m)] = lines.get(room(m), 0) + len(path.read_text().splitlines())
    return lines


def test_no_room_holds_more_than_a_quarter_of_the_package():
    lines = room_lines()
    total = sum(lines.values())
    over = {r: f"{n / total:.1%}" for r, n in lines.items() if n > MAX_ROOM_SHARE * total}
    assert not over, f"rooms over {MAX_ROOM_SHARE:.0%} of the package's {total} lines: {over}"
    assert len(lines) >= 10 and total > 20_000   # the count sees the whole package


# STYLE.md: functions under 80 lines (def line to last line). A function over it that someone else is splitting goes
# here as "module.qualname" with the issue that tracks it; empty: every function in the package is within it.
MAX_FUNCTION_LINES = 80
LONG_FUNCTIONS_ALLOWED: frozenset[str] = frozenset()


def long_functions(source: str, module: str, limit: int = MAX_FUNCTION_LINES) -> dict[str, int]:
    """``module.qualname`` -> its length in lines, for every function (methods and nested ones too) longer than
    ``limit``, counted from its ``def`` line to its last line."""
    found: dict[str, int] = {}

    def visit(node, prefix: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}.{child.name}"
                length = child.end_lineno - child.lineno + 1
                if not isinstance(child, ast.ClassDef) and length > limit:
                    found[name] = length
                visit(child, name)
            else:
                visit(child, prefix)

    visit(ast.parse(source), module)
    return found


def test_no_function_over_80_lines():
    found = {name: n for m, path in sorted(modules().items()) for name, n in long_functions(path.read_text(), m).items()}
    over = [f"{name}: {n} lines" for name, n in found.items() if name not in LONG_FUNCTIONS_ALLOWED]
    assert not over, "split these (STYLE.md: functions under 80 lines):\n" + "\n".join(over)
    assert not LONG_FUNCTIONS_ALLOWED - set(found), "allowed but no longer over the limit: drop them from the list"


def test_the_length_check_counts_def_to_last_line():
    """An 81-line function is reported (a method and a nested function by their qualified names), an 80-line one
    is not; decorators do not count."""
    def fn(name: str, lines: int, indent: str = "") -> str:
        return f"{indent}def {name}():\n" + "".join(f"{indent}    x = {i}\n" for i in range(lines - 1))

    src = ("@decorator\n" + fn("at_limit", 80) + fn("over", 81) + "class K:\n" + fn("method", 81, "    ")
           + "def outer():\n" + fn("inner", 81, "    "))
    assert long_functions(src, "m") == {"m.over": 81, "m.K.method": 81, "m.outer": 82, "m.outer.inner": 81}
