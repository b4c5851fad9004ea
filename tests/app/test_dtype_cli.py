"""--dtype on every command that loads a model (issue 33): parsed, passed on, refused by name, and the dtype used
recorded in the JSON and the session."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from eagle3lab import bundled
from eagle3lab.app.cli import DTYPE_CHOICES, _load, main
from eagle3lab.models.device import dtype_name, resolve_dtype

LOADING = {"doctor": ["--draft", "D", "--target", "T"], "bench": [], "serve-check": []}


@pytest.mark.parametrize("name", sorted(LOADING))
def test_every_command_that_loads_a_model_takes_dtype(name, capsys):
    parser = argparse.ArgumentParser()
    _load(name).add_arguments(parser)
    assert parser.parse_args(LOADING[name]).dtype == "auto"
    assert parser.parse_args([*LOADING[name], "--dtype", "bfloat16"]).dtype == "bfloat16"
    with pytest.raises(SystemExit) as exit_:
        main([name, *LOADING[name], "--dtype", "fp8"])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "--dtype" in err and "'fp8'" in err and "bfloat16" in err


def test_the_choices_are_the_device_rules_names():
    assert {c: dtype_name(resolve_dtype(c, "cpu")) for c in DTYPE_CHOICES} == {
        "auto": "float32", "float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}


def _fake_report(device="cpu"):
    return SimpleNamespace(critical=[], findings=[], ladder=[], notes=[], device=device,
                           to_dict=lambda: {"device": device, "findings": []}, table=lambda: pd.DataFrame(),
                           ladder_table=lambda: pd.DataFrame({"rung": []}), summary=lambda: "fake")


@pytest.mark.parametrize("asked, used", [("bfloat16", "bfloat16"), ("auto", "float32")])
def test_doctor_passes_the_dtype_on_and_records_the_one_used(asked, used, monkeypatch, tmp_path, capsys):
    import eagle3lab.doctor.run as doctor_module
    from eagle3lab.app.session import Session

    if torch.cuda.is_available() or not (bundled.DRAFT_CASE / "config.json").exists():
        pytest.skip("needs the bundled models, on a machine whose auto is the CPU")
    seen = {}
    monkeypatch.setattr(doctor_module, "run_doctor", lambda *a, **kw: seen.update(kw) or _fake_report())
    code = main(["doctor", "--draft", str(bundled.DRAFT_CASE), "--target", str(bundled.TARGET), "--dtype", asked,
                 "--session", str(tmp_path / "s"), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and seen["dtype"] == used and seen["device"] == "cpu" and out["dtype"] == used
    session = Session.load(tmp_path / "s")
    assert session.runs_on == {"device": "cpu", "dtype": used} and session.parameters["dtype"] == asked


def test_bench_loads_both_models_in_the_dtype_asked(capsys, monkeypatch):
    """The models bench hands its measurement (whose JSON "dtype" is the target's own, analysis.benchmark): in bf16
    on the CPU when asked (the measurement itself is test_bench_command's)."""
    import eagle3lab.analysis.benchmark as benchmark

    if not (bundled.DRAFT_HEALTHY / "config.json").exists():
        pytest.skip("needs the bundled models")
    monkeypatch.setattr(benchmark, "run_benchmark", lambda tgt, d, *a, **kw: {
        "dtype": dtype_name(tgt.dtype), "draft_dtype": dtype_name(d.fc.weight.dtype), "device": str(tgt.device)})
    rc = main(["bench", "--device", "cpu", "--dtype", "bfloat16", "--json"])   # the bundled target and draft
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["dtype"] == out["draft_dtype"] == "bfloat16" and out["device"] == "cpu"


def test_serve_check_refuses_a_dtype_its_emulation_cannot_match_naming_the_flag(capsys):
    if not (bundled.DRAFT_HEALTHY / "config.json").exists():
        pytest.skip("needs the bundled models")
    assert main(["serve-check", "--dtype", "bfloat16", "--engine-python", "/nonexistent/python"]) == 2
    err = capsys.readouterr().err
    assert "--dtype" in err and "float32" in err and "bfloat16" in err
