"""benchmarks/bench_decode.py on the bundled models, at a size that takes seconds (speed is not asserted)."""

from __future__ import annotations

import importlib.util
import json

import pytest
from helpers.tiny_models import one_thread

from eagle3lab import bundled

spec = importlib.util.spec_from_file_location("bench_decode", bundled.ROOT / "benchmarks" / "bench_decode.py")
bench_decode = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_decode)

pytestmark = pytest.mark.usefixtures("bundled_models")


def test_one_step_cases_priced_here_and_served(tmp_path, capsys):
    out = tmp_path / "bench.json"
    with one_thread():
        rc = bench_decode.main(["--num-prompts", "1", "--max-new-tokens", "12", "--repeats", "1", "--out", str(out),
                                "--only", "case as SGLang, chain 1", bench_decode.HALF_FIXED])
    assert rc == 0
    printed = capsys.readouterr().out
    payload = json.loads(out.read_text())
    trained = bundled.recorded_resid(bundled.DRAFT_CASE)
    half = payload["results"][bench_decode.HALF_FIXED]
    shipped = payload["results"]["case as SGLang, chain 1"]
    # the half fix restores the trained wiring; SGLang still drops the residual rule
    assert half["aux_resid"] == trained != shipped["aux_resid"]
    assert half["norm_before_residual"] is False and half["profile"] == "sglang"
    lossless = {k: half["lossless"][k] for k in ("identical_to_generate", "prompts", "tie_flips", "bugs", "dtype")}
    assert lossless == {"identical_to_generate": 1, "prompts": 1, "tie_flips": 0, "bugs": 0, "dtype": "float32"}
    assert "lossless 1/1 identical" in printed
    served = {r["case"]: r for r in payload["served"]}
    row = served[f"{bench_decode.HALF_FIXED} | served, batch 1"]
    assert row["overhead"] == payload["served_assumptions"]["engine_overhead"]
    assert row["round_cost"] == pytest.approx(row["c"] + row["v_verify"] + row["overhead"])
    for name in (bench_decode.HALF_FIXED, "case as SGLang, chain 1"):
        assert f"{name}: tau" in printed
        # the speedup over the greedy loop with its paired interval over the prompts, both speed definitions
        r = payload["results"][name]
        for kind in ("decode", "e2e"):
            i = r["speed_ratio"][kind]
            assert i["low"] <= i["value"] <= i["high"] and i["level"] == 0.95 and i["units"] == 1
        assert r["acceptance"]["tau_low"] <= r["acceptance"]["tau"] <= r["acceptance"]["tau_high"]
        assert f"{r['speed_ratio']['decode']['value']:.2f}x [" in printed
    assert "implies a served round cost" in printed
