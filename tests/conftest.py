"""Shared test settings: offline hub, deterministic torch, small thread count on 2-core CI."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from pathlib import Path  # noqa: E402

# Real published configs for parser tests, copied into the checkout (SOURCES.md says where each came from).
REAL_CONFIGS = Path(__file__).resolve().parent / "fixtures" / "real-configs"
