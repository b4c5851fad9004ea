"""doctor as stages (issue 26): which switch an engine cannot apply has one home, read by the wiring search and
the fixes alike; a fix is a typed value; no function of the analysis layer is longer than a screen or two."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from eagle3lab.analysis.switches import SWITCHES, cannot_apply, config_key, ignores
from eagle3lab.analysis.wiring_search import _fixes, settings_text
from eagle3lab.doctor.fixes import Fix, FixKind, Measure, RunState, WrittenIn


def test_the_switches_and_what_each_engine_ignores():
    assert SWITCHES == ("norm_before_fc", "fc_norm", "norm_before_residual", "recycle_postnorm")
    assert [config_key(k) for k in SWITCHES] == ["norm_before_fc", "fc_norm", "norm_before_residual", "norm_output"]
    every = dict.fromkeys(SWITCHES, True)
    assert cannot_apply("sglang", every) == ["norm_before_residual"]     # no SGLang release read honours it
    assert cannot_apply("vllm", every) == []
    # SpecForge 0.2.0 honours norm_output, but it only norms lm_head's input: the pre-norm state is recycled
    assert cannot_apply("specforge", every) == ["norm_before_fc", "norm_before_residual", "recycle_postnorm"]
    assert ignores("specforge", "recycle_postnorm") and not ignores("sglang", "recycle_postnorm")
    assert cannot_apply("sglang", dict.fromkeys(SWITCHES, False)) == []   # a switch off is always applied
    assert settings_text({"fc_norm": True, "norm_before_residual": True}) == "fc_norm, norm_before_residual, recycle pre-norm"


def test_the_wiring_search_reads_the_same_rule():
    """The search's per-server fixes name what each server cannot apply from the same home as doctor's rule fix."""
    variant = {"norm_before_fc": False, "fc_norm": False, "norm_before_residual": True, "recycle_postnorm": True}
    rows = _fixes((1, 4, 6), variant, 8, "LlamaForCausalLM")
    assert rows.loc["sglang", "cannot_apply"] == cannot_apply("sglang", variant) == ["norm_before_residual"]
    assert rows.loc["vllm", "cannot_apply"] == []
    assert rows.loc["sglang", "ids"] == [0, 3, 5] and rows.loc["vllm", "ids"] == [1, 4, 6]


def test_a_fix_is_a_frozen_value():
    start = RunState(True, (3, 6, 7), {"norm_before_residual": False}, 1)
    fix = Fix(FixKind.RULE, "FIRST_LAYER_RULE", "trained rule", {"variant": {"norm_before_residual": True}}, False,
              WrittenIn.CHECKPOINT, {"variant": {"norm_before_residual": False}}, "t", "e", "f", "wiring")
    assert fix.measure is Measure.PAIRED and not fix.fixed_by_checkpoint     # the engine ignores what it changes
    with pytest.raises(AttributeError):
        fix.applicable = True
    moved = start.changed({"wiring": (1, 4, 6)}, fix.change, {"aux": False})
    assert (moved.fed, moved.variant, moved.num_steps) == ((), {"norm_before_residual": True}, 1)
    assert start.wiring == (3, 6, 7) and start.variant == {"norm_before_residual": False}


def test_run_doctor_reads_as_its_stages():
    """Every function's 80-line limit is tests/test_layers.py's; run_doctor itself stays a list of stages."""
    import eagle3lab.doctor.run as run

    node = next(n for n in ast.walk(ast.parse(Path(run.__file__).read_text()))
                if isinstance(n, ast.FunctionDef) and n.name == "run_doctor")
    assert node.end_lineno - node.lineno + 1 < 60
