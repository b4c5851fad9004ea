"""What ships in ``data/``: the corpus, the prompts and the models trained here (paths and readers)."""

from __future__ import annotations

import json
from pathlib import Path

from eagle3lab.errors import bad_input

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "data"
MODELS = DATA / "models"
TARGET = MODELS / "target"
DRAFT_HEALTHY = MODELS / "draft-healthy"
DRAFT_CASE = MODELS / "draft-case"
PROMPTS = DATA / "prompts"
CORPUS = DATA / "corpus"


def available() -> dict[str, bool]:
    """Which bundled models exist in this checkout (``make data`` builds them)."""
    return {p.name: (p / "config.json").exists() for p in (TARGET, DRAFT_HEALTHY, DRAFT_CASE)}


def prompt_rows(path=None) -> list[dict]:
    """Every row of a prompts ``.jsonl`` (default the bundled one), each with ``text`` or ``ids``.

    The bundled rows also carry ``kind`` (code / prose), ``length`` (short / long) and ``source``.
    """
    path = Path(path) if path is not None else PROMPTS / "prompts.jsonl"
    if path.is_dir():
        path = path / "prompts.jsonl"
    if not path.exists():
        raise bad_input(path, None, "a prompts .jsonl file", "no such file",
                        "The bundled prompts live in data/prompts/prompts.jsonl (part of the repository).")
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            if "text" in row:
                if not isinstance(row["text"], str):
                    raise TypeError
            else:
                row["ids"] = [int(t) for t in row["ids"]]
        except (ValueError, KeyError, TypeError):
            raise bad_input(f"{path}:{i + 1}", "text", "a JSON object with a 'text' (or 'ids') field",
                            line[:60]) from None
        rows.append(row)
    return rows


def load_prompts(path=None, n: int | None = None, length: str | None = None, kind: str | None = None) -> list:
    """Prompts (text, or token ids) from a ``.jsonl``, the bundled one by default.

    Taken round-robin over the (kind, length) groups, so that a prefix of ``n`` mixes code and prose;
    ``length`` / ``kind`` keep one group.
    """
    groups: dict[tuple, list] = {}
    for row in prompt_rows(path):
        if (length is None or row.get("length") == length) and (kind is None or row.get("kind") == kind):
            groups.setdefault((row.get("kind"), row.get("length")), []).append(row.get("text", row.get("ids")))
    mixed = [t for batch in zip(*groups.values()) for t in batch] if groups else []
    rest = [t for g in groups.values() for t in g if t not in mixed]
    texts = mixed + rest
    return texts[:n] if n else texts
