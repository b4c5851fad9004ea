"""Nothing half-written: every file and folder eagle3lab writes appears whole or not at all.

Writers work on a temporary sibling (same filesystem) that is renamed into place at the end;
an error or an interrupt leaves the old version untouched and no debris behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_file(path: str | Path) -> Iterator[Path]:
    """``with atomic_file(p) as tmp: write(tmp)``: ``p`` is replaced only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)   # mkstemp makes 0600; what we publish is meant to be read
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_dir(path: str | Path) -> Iterator[Path]:
    """``with atomic_dir(d) as tmp: fill(tmp)``: ``d`` (replaced if it exists) appears complete."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        yield tmp
        for p in [tmp, *tmp.rglob("*")]:   # mkdtemp makes 0700
            os.chmod(p, 0o755 if p.is_dir() else 0o644)
        if path.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    with atomic_file(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_file(path) as tmp:
        tmp.write_bytes(data)


def write_json(path: str | Path, obj, indent: int = 1) -> None:
    write_text(path, json.dumps(obj, indent=indent) + "\n")
