"""What the engine scripts record when a library refuses a case (imported by path beside them; no eagle3lab)."""

from __future__ import annotations

import traceback
from pathlib import Path


def library_frames(err: BaseException) -> list[str]:
    """Where an error came from: "package/module.py:line function" for each frame in an installed package."""
    frames = []
    for frame in traceback.extract_tb(err.__traceback__):
        path = Path(frame.filename)
        if "site-packages" in path.parts:
            inside = path.parts[path.parts.index("site-packages") + 1:]
            frames.append(f"{'/'.join(inside)}:{frame.lineno} {frame.name}")
    return frames


def record_refusal(rec: dict, err: BaseException, case: dict, expected_shapes) -> None:
    """A refusal is a result: the tests assert which cases are refused, where, and why."""
    rec["error"] = f"{type(err).__name__}: {err}"
    rec["traceback"] = traceback.format_exc(limit=4)
    rec["frames"] = library_frames(err)
    if case["kind"] == "load":
        try:   # what a refused file is held to (a config it cannot build at all fails here again)
            rec["expected_shapes"] = expected_shapes(Path(case["checkpoint"]))
        except Exception as again:
            rec["expected_shapes"] = f"{type(again).__name__}: {again}"
