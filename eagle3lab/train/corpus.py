"""The training corpus: Python standard-library source (PSF license), split by file.

``data/corpus/{train,heldout}.jsonl.xz`` hold one ``{"path", "text"}`` record per source file,
in sorted path order. They are extracted once from a CPython 3.11 install
(``python -m eagle3lab.train.corpus --stdlib DIR --out data``); everything else is rebuilt from
the shipped files, so ``make data`` does not depend on which Python the machine has.
Held-out prompts (``data/prompts/prompts.jsonl``) come from held-out files only.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import lzma
import re
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from eagle3lab.atomic import write_bytes
from eagle3lab.errors import bad_input

SPLITS = ("train", "heldout")
# Test suites are mostly repetitive fixtures; charmap tables and pydoc topic dumps are generated data.
_SKIP_DIRS = {"site-packages", "test", "tests", "idle_test", "encodings", "pydoc_data", "__pycache__"}
_MAX_FILE_CHARS = 200_000


@dataclass(frozen=True)
class Doc:
    path: str  # relative to the stdlib root, '/'-separated
    text: str


def stdlib_root() -> Path:
    """This interpreter's standard library (in a venv: the base install's)."""
    return Path(sysconfig.get_paths()["stdlib"])


def collect_stdlib(root: str | Path | None = None) -> list[Doc]:
    """Every ``*.py`` under ``root`` except tests and generated tables, sorted by path."""
    root = Path(root) if root is not None else stdlib_root()
    if not root.is_dir():
        raise bad_input(root, None, "a directory with Python standard-library sources", "no such directory")
    docs = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if any(part in _SKIP_DIRS for part in rel.parts[:-1]):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if 0 < len(text) <= _MAX_FILE_CHARS:
            docs.append(Doc(rel.as_posix(), text.replace("\r\n", "\n")))
    return docs


def is_heldout(path: str, heldout_per_mille: int = 60) -> bool:
    """Deterministic split by file: a hash of the path, not of the machine or the order."""
    return int(hashlib.sha256(path.encode()).hexdigest()[:8], 16) % 1000 < heldout_per_mille


def split_docs(docs: list[Doc], heldout_per_mille: int = 60) -> dict[str, list[Doc]]:
    out = {"train": [], "heldout": []}
    for d in docs:
        out["heldout" if is_heldout(d.path, heldout_per_mille) else "train"].append(d)
    return out



def write_corpus(corpus_dir: str | Path, splits: dict[str, list[Doc]]) -> dict[str, Path]:
    """Write ``{split}.jsonl.xz`` (xz preset 9, deterministic bytes for the same docs)."""
    corpus_dir = Path(corpus_dir)
    paths = {}
    for split in SPLITS:
        lines = "".join(json.dumps({"path": d.path, "text": d.text}, ensure_ascii=False) + "\n"
                        for d in splits[split])
        paths[split] = corpus_dir / f"{split}.jsonl.xz"
        write_bytes(paths[split], lzma.compress(lines.encode("utf-8"), preset=9))
    return paths


def read_corpus(corpus_dir: str | Path, split: str) -> list[Doc]:
    """Read one split back; a clear error when the file is missing or malformed."""
    if split not in SPLITS:
        raise bad_input(None, "split", f"one of {SPLITS}", repr(split))
    path = Path(corpus_dir) / f"{split}.jsonl.xz"
    if not path.exists():
        raise bad_input(path, None, "the compressed corpus split", "no such file",
                        "Extract it with `python -m eagle3lab.train.corpus --out data`.")
    docs = []
    with lzma.open(path, "rt", encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            try:
                rec = json.loads(line)
                docs.append(Doc(rec["path"], rec["text"]))
            except (json.JSONDecodeError, KeyError, TypeError) as e:
                raise bad_input(path, f"line {lineno}", 'a JSON object with "path" and "text"',
                                type(e).__name__) from None
    return docs


# ---- held-out prompts -------------------------------------------------------------------------

_DEF = re.compile(r"^(\s*)(async\s+def|def|class)\s")


def _code_prompts(doc: Doc, n_lines: int) -> list[str]:
    """Chunks of ``n_lines`` lines starting at a def/class line (the model continues the body)."""
    lines = doc.text.split("\n")
    out = []
    for i, line in enumerate(lines):
        if _DEF.match(line) and i + n_lines <= len(lines):
            chunk = "\n".join(lines[i:i + n_lines]).rstrip()
            if len(chunk) >= 40 * (1 if n_lines < 10 else 10):
                out.append(chunk + "\n")
    return out


def _docstrings(doc: Doc) -> list[str]:
    try:
        tree = ast.parse(doc.text)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            s = ast.get_docstring(node, clean=True)
            if s:
                out.append(s)
    return out


def make_prompts(heldout: list[Doc], per_group: int = 12) -> list[dict]:
    """``per_group`` prompts in each of code/prose x short/long, spread over the held-out files.

    code: the first lines of a function or class (short: 4 lines, long: 30 lines);
    prose: the opening of a docstring (short: up to 200 chars, long: 600-1500 chars).
    """
    pools: dict[tuple[str, str], list[tuple[str, str]]] = {
        ("code", "short"): [], ("code", "long"): [], ("prose", "short"): [], ("prose", "long"): []}
    for d in heldout:
        for text in _code_prompts(d, 4)[::7]:
            pools["code", "short"].append((d.path, text))
        for text in _code_prompts(d, 30)[::9]:
            pools["code", "long"].append((d.path, text))
        for s in _docstrings(d):
            if 80 <= len(s):
                pools["prose", "short"].append((d.path, s[:200].rsplit(" ", 1)[0] + " "))
            if 600 <= len(s):
                pools["prose", "long"].append((d.path, s[:1500].rsplit(" ", 1)[0] + " "))
    prompts = []
    for (kind, length), pool in pools.items():
        # Evenly spaced picks: deterministic, and no single file dominates a group.
        step = max(1, len(pool) // per_group)
        for j, (path, text) in enumerate(pool[::step][:per_group]):
            prompts.append({"id": f"{kind}-{length}-{j:02d}", "kind": kind, "length": length,
                            "source": path, "text": text})
    return prompts


def write_prompts(prompts_dir: str | Path, prompts: list[dict]) -> Path:
    path = Path(prompts_dir) / "prompts.jsonl"
    body = "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in prompts)
    write_bytes(path, body.encode("utf-8"))
    return path


_LICENSE_NOTE = """\
The corpus in this directory is the Python 3.11 standard-library source code (``*.py`` files,
tests, charmap tables and pydoc topic dumps excluded), Copyright (c) 2001-2023 Python Software
Foundation, distributed under the PSF License Agreement (see PSF-LICENSE.txt, copied from the
CPython install it was extracted from). Files are stored unmodified except for CRLF -> LF.
"""


def extract(out: str | Path, stdlib: str | Path | None = None, heldout_per_mille: int = 60) -> dict:
    """Extract the stdlib corpus into ``out/corpus`` (+ license) and prompts into ``out/prompts``."""
    out = Path(out)
    root = Path(stdlib) if stdlib is not None else stdlib_root()
    splits = split_docs(collect_stdlib(root), heldout_per_mille)
    write_corpus(out / "corpus", splits)
    license_src = root / "LICENSE.txt"
    if license_src.exists():
        write_bytes(out / "corpus" / "PSF-LICENSE.txt", license_src.read_bytes())
    write_bytes(out / "corpus" / "LICENSE.md", _LICENSE_NOTE.encode())
    prompts = make_prompts(splits["heldout"])
    write_prompts(out / "prompts", prompts)
    return {split: {"files": len(docs), "chars": sum(len(d.text) for d in docs)} for split, docs in splits.items()} | {
        "prompts": len(prompts)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="data")
    p.add_argument("--stdlib", default=None, help="CPython Lib/ directory (default: this interpreter's)")
    args = p.parse_args(argv)
    print(json.dumps(extract(args.out, args.stdlib), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
