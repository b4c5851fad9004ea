"""bench_decode's words from recorded numbers (no models): a speedup is worded from its paired interval, never
from its median against a fixed band, and a run that recorded no interval says so."""

from __future__ import annotations

import importlib.util

import pandas as pd

from eagle3lab import bundled

spec = importlib.util.spec_from_file_location("bench_decode", bundled.ROOT / "benchmarks" / "bench_decode.py")
bench_decode = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_decode)


def result(median: float, decode=None, e2e=None, tau_interval=None) -> dict:
    """The parts of a ``run_benchmark`` result bench_decode reads."""
    r = {"settings": {"num_steps": 1, "num_draft_tokens": 2, "repeats": 3},
         "acceptance": {"tau": 1.43}, "projection": {"measured_speedup": median},
         "speedup": {"vs_greedy_loop": median}}
    if decode is not None:
        r["speed_ratio"] = {"decode": dict(zip(("value", "low", "high"), decode), level=0.95, units=12),
                            "e2e": dict(zip(("value", "low", "high"), e2e or decode), level=0.95, units=12)}
    if tau_interval is not None:
        r["acceptance"] |= {"tau_low": tau_interval[0], "tau_high": tau_interval[1]}
    return r


def test_a_point_of_1_03_inside_an_interval_that_straddles_1_is_within_noise_and_a_clear_one_faster():
    results = {"straddles": result(1.03, (1.03, 0.97, 1.09), tau_interval=(1.30, 1.50)),
               "clearly faster": result(1.40, (1.40, 1.31, 1.52), e2e=(1.30, 1.22, 1.41)),
               "median only": result(1.50)}
    assert bench_decode.ratio_words(results["straddles"]) == "1.03x [0.97, 1.09] (paired, 95%, 12 prompts): within noise"
    assert bench_decode.ratio_words(results["clearly faster"], "e2e").endswith("1.30x [1.22, 1.41] (paired, 95%, 12 "
                                                                               "prompts): faster")
    assert bench_decode.ratio_words(results["median only"]) == "1.50x (median of 3): not measured with an interval"
    measured = pd.DataFrame({"break_even_tau": [1.42] * 3}, index=list(results))
    lines = dict(line.split(": ", 1) for line in bench_decode.verdicts(results, measured, 0.1, 0.2, 48).splitlines()
                 if line.split(": ", 1)[0] in results)
    assert lines["straddles"].startswith("tau 1.43 [1.30, 1.50]; here break-even 1.42, measured 1.03x [0.97, 1.09]")
    assert "within noise; served MoE" in lines["straddles"] and "-> projected within noise" in lines["straddles"]
    assert "(paired, 95%, 12 prompts): faster; served MoE" in lines["clearly faster"]
    assert "-> projected, no tau interval" in lines["clearly faster"]          # no tau interval recorded: not ranked
    assert "not measured with an interval" in lines["median only"]
    assert not any(w in " ".join(lines.values()) for w in ("wins", "loses", "breaks even"))   # the old 5% band's words


def test_the_measured_table_columns_carry_the_interval_and_its_word():
    cols = bench_decode._interval_columns(bench_decode.speed_interval(result(0.8, (0.80, 0.74, 0.86))))
    assert cols == {"measured_ratio": 0.80, "measured_low": 0.74, "measured_high": 0.86, "measured_verdict": "slower"}
    bare = bench_decode._interval_columns(bench_decode.speed_interval(result(0.8)))
    assert bare["measured_verdict"] == "not measured with an interval" and pd.isna(bare["measured_low"])
