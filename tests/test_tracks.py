"""Named presets for the notebooks' parameters cells (eagle3lab.bundled.TRACKS)."""

from __future__ import annotations

import json

import pytest

from eagle3lab import bundled
from eagle3lab.app.workbook import notebook_paths
from eagle3lab.bundled import TRACKS, apply_track
from eagle3lab.errors import Eagle3LabError


def test_apply_track_swaps_only_values_still_at_the_bundled_defaults():
    params = {"TARGET": "../data/models/target", "DRAFT": "/my/own/draft", "TRAINED_RESID": [0, 3, 7],
              "DRAFT_WIRING": (0, 3, 7), "N_PROMPTS": 8, "TRACK": "smollm2", "extra": {"a": 1}}
    out = apply_track("smollm2", params)
    assert out == {"TARGET": "smollm2-135m-instruct", "TRAINED_RESID": [0, 3, 16], "DRAFT_WIRING": (0, 3, 16)}
    assert apply_track("bundled", params) == {}
    with pytest.raises(Eagle3LabError, match="TRACK"):
        apply_track("kimi", params)


def test_every_track_value_names_what_the_checkout_has():
    for value in TRACKS["smollm2"].values():
        if isinstance(value, str) and value.startswith("../data/"):
            assert (bundled.ROOT / "notebooks" / value / "config.json").exists(), value
        elif isinstance(value, str):
            assert value in bundled.REAL_TARGETS


def test_every_notebook_with_models_has_a_track_parameter_applied_right_after_its_parameters():
    for path in notebook_paths():
        cells = json.loads(path.read_text())["cells"]
        i = next(i for i, c in enumerate(cells) if "parameters" in c["metadata"].get("tags", []))
        params = "".join(cells[i]["source"])
        if "../data/models/target" not in params:   # notebook 07 is on the real track already
            continue
        assert 'TRACK = "bundled"' in params, path.name
        assert "apply_track(TRACK" in "".join(cells[i + 1]["source"]), path.name


def test_every_track_names_its_models():
    assert set(bundled.TRACK_MODELS) == set(bundled.TRACKS)
    for track, models in bundled.TRACK_MODELS.items():
        assert set(models) == {"target", "healthy", "case"}
        # the notebooks' preset swaps to the same models
        swap = bundled.apply_track(track, {"TARGET": "../data/models/target", "DRAFT": "../data/models/draft-healthy"})
        assert str(models["target"]).endswith(str(swap.get("TARGET", "data/models/target")).lstrip("./"))
