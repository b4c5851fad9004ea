"""What the kernel has (device, memory, libraries) and what is bundled: notebook 00 and bug reports."""

from __future__ import annotations

import importlib.metadata as md
import json
import os
import platform
from pathlib import Path

from eagle3lab import bundled
from eagle3lab.models.device import describe

LIBRARIES = ("torch", "transformers", "tokenizers", "safetensors", "accelerate", "pandas",
             "matplotlib", "ipywidgets", "nbclient", "eagle3lab")


def library_versions() -> dict[str, str]:
    out = {}
    for name in LIBRARIES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "not installed"
    return out


def memory_gib() -> float | None:
    """Physical memory of this machine (Linux), for 'will the target fit' questions."""
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        return None


def bundled_models() -> list[dict]:
    """One row per bundled model directory: present?, size on disk, architecture."""
    rows = []
    for path in (bundled.TARGET, bundled.DRAFT_HEALTHY, bundled.DRAFT_CASE):
        cfg_path = path / "config.json"
        row = {"name": path.name, "path": str(path.relative_to(bundled.ROOT)), "present": cfg_path.exists(),
               "size_mb": None, "architecture": None}
        if cfg_path.exists():
            cfg = json.loads(cfg_path.read_text())
            row["architecture"] = ",".join(cfg.get("architectures", [])) or cfg.get("model_type")
            row["size_mb"] = round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6, 2)
        rows.append(row)
    return rows


def notebook_map() -> list[dict]:
    from eagle3lab.app.workbook import notebook_paths, notebook_title

    return [{"notebook": p.name, "title": notebook_title(p)} for p in notebook_paths()]


def environment_report() -> dict:
    return {"python": platform.python_version(), "platform": platform.platform(),
            "memory_gib": memory_gib(), "device": describe(), "libraries": library_versions(),
            "bundled": {row["name"]: row["present"] for row in bundled_models()},
            "data_dir": str(Path(bundled.DATA))}
