"""Paths of what ships in ``data/``: the corpus, the prompts and the models trained here."""

from __future__ import annotations

from pathlib import Path

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
