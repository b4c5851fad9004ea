"""Notebook 05's readings (eagle3lab.readings.nb05_acceptance_rates): each word follows from its interval, projected and
measured told apart, nothing ranked inside the noise."""

from __future__ import annotations

import pytest
from helpers.tiny_models import hand_costs, prompts, tiny_pair

from eagle3lab.analysis.verdicts import speed_word, word_of
from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings import nb05_acceptance_rates as reading

pytestmark = pytest.mark.usefixtures("single_thread")


def iv(value, low, high, units=8):
    return Interval(value, low, high, 0.95, units)


def row(name="x", tau=(1.08, 1.05, 1.11), speed=(0.70, 0.66, 0.74), projected=1.64, round_cost=0.66):
    return reading.SpeedRow(name, iv(*tau), iv(*speed), projected, round_cost, 0.08, 0.58, 2, 1, "SGLang")


@pytest.fixture(scope="module")
def sweep():
    from eagle3lab.analysis.benchmark import decode_sweep

    target, draft = tiny_pair()
    cases = {"chain 1": dict(draft=draft, num_steps=1), "chain 2": dict(draft=draft, num_steps=2),
             "chain 3": dict(draft=draft, num_steps=3),
             "tree 3/2/4": dict(draft=draft, num_steps=3, topk=2, num_draft_tokens=4),
             "case": dict(draft=draft, num_steps=1, num_draft_tokens=16)}
    return decode_sweep(target, cases, prompts(n=3), max_new_tokens=10, repeats=2, progress=False)


def test_the_round_cost_paid_is_tau_over_the_measured_speedup_and_the_projection_error_is_against_it():
    r = row()
    assert r.word == "slower"
    assert (r.paid_cost.value, r.paid_cost.low, r.paid_cost.high) == pytest.approx((1.08 / 0.70, 1.08 / 0.74, 1.08 / 0.66))
    assert r.error == pytest.approx(1.64 / 0.70 - 1) and not r.projection_inside
    assert row(projected=0.72).projection_inside


def test_break_even_words_say_which_side_of_tau_each_cost_falls_and_who_decides():
    """05's old contradiction: tau 1.08 above a projected round cost 0.66, yet measured slower."""
    speeds = reading.SpeedReading({"x": row(), "y": row("y", round_cost=1.5, projected=0.72)}, 0.585, 0.1, "cpu",
                                  "float32", 8, 2)
    x, y = reading.break_even_words(speeds, ["x", "y"]).split("; y: ")
    noisy = reading.SpeedReading({"z": row("z", speed=(0.83, 0.75, 1.01), round_cost=2.56, projected=0.42)}, 0.585,
                                 0.1, "cpu", "float32", 8, 2)
    z = reading.break_even_words(noisy, ["z"])
    assert "measured decode 0.70x [0.66, 0.74] (slower)" in x and "1.54 [1.46, 1.64] target steps, above its tau" in x
    assert ("priced it at 0.66 (below tau, outside the measured interval), on the other side of tau: the projection "
            "(1.64x) mispriced the round") in x
    assert "priced it at 1.50 (above tau, inside the measured interval), on the same side of tau" in y
    # a paid cost within noise of tau has no side: the words say so, whatever side its point is on (second reading)
    assert "within noise of its tau" in z and "side of tau:" not in z.replace("cannot tell which side of tau", "")
    assert ("priced it at 2.56 (above tau, outside the measured interval): the measurement cannot tell which side of "
            "tau the round falls") in z
    trust = speeds.trust_words()
    assert "v(2) = 0.585: a 2-token verify timed cheaper than the 1-token step" in trust
    assert "1 of 2 lie inside" in trust and "from +3% to +134%" in trust


def test_projected_words_read_taus_interval_against_a_cost_without_one():
    tau = iv(1.33, 1.2, 1.45)
    assert reading.projected_word(tau, 1.52) == "projected slower"
    assert reading.projected_word(tau, 1.32) == "projected within noise"
    assert reading.projected_word(tau, 1.1) == "projected faster"


def test_speed_context_names_device_dtype_batch_and_the_emulation():
    text = reading.speed_context("cpu", "float32", ["SpecForge", "SGLang", "SGLang"])
    assert text == "cpu, float32, batch 1, emulated SpecForge / SGLang (eagle3lab's loop, not a server)"


def test_chain_reading_gains_are_paired_differences_worded_by_their_interval(sweep):
    chains = reading.read_chains(sweep, ["chain 1", "chain 2", "chain 3"])
    assert chains.ks == [1, 2, 3]
    for a, b in (("chain 1", "chain 2"), ("chain 2", "chain 3")):
        d = sweep.tau_difference(b, a)
        assert chains.gain[b] == d
        assert chains.table().loc[int(b.split()[1]), "verdict"] == word_of(d)
    longest = sweep.stats("chain 3")
    assert chains.predicted == pytest.approx([1 + sum(longest.survival[:k]) for k in (1, 2, 3)])
    plot = chains.plot_table()
    assert list(plot.index) == [1, 2, 3] and (plot.tau_low <= plot.tau).all() and (plot.tau <= plot.tau_high).all()
    c = chains.claims()
    assert c["chain_taus"] == [sweep.stats(n).tau for n in chains.names]


def test_tree_reading_counts_the_rounds_whose_tree_reaches_full_depth(sweep):
    trees = reading.read_trees(sweep, ["tree 3/2/4"], ["chain 1", "chain 2", "chain 3"])
    assert trees.trees() == ["tree 3/2/4"]
    r = trees.rows["tree 3/2/4"]
    assert r["same_width_name"] == "chain 3" and r["same_depth_name"] == "chain 3"   # 4 verified, depth 3
    rounds = [x for o in sweep.results["tree 3/2/4"] for x in o.rounds]
    assert r["rounds"] == len(rounds) and 0 <= r["full_depth"] <= len(rounds)
    assert r["most_accepted"] <= 3
    # a round that accepted 3 drafts had a path of depth 3
    assert r["full_depth"] >= sum(x.accepted == 3 for x in rounds)
    assert f"in {r['full_depth']} of {r['rounds']} rounds" in trees.words()
    assert list(trees.bars().index) == ["chain 3", "tree 3/2/4"] and trees.bars().topk.tolist() == [1, 2]


def test_depth_of_a_tree_round_follows_the_parent_links():
    from types import SimpleNamespace

    assert reading._depth(SimpleNamespace(parents=(-1, -1, 0, 2, 1), drafted=(1, 2, 3, 4, 5))) == 3
    assert reading._depth(SimpleNamespace(parents=None, drafted=(1, 2, 3))) == 3


def test_speed_reading_ranks_nothing_inside_the_noise(sweep):
    speeds = reading.read_speeds(sweep, hand_costs(), device="cpu", dtype="float32", repeats=2)
    assert speeds.units == 3     # prompts (each one's 2 repetitions summed)
    for name, r in speeds.rows.items():
        assert r.speed == sweep.speed_ratio(name) and r.word == speed_word(r.speed)
        assert r.tau == sweep.tau_interval(name)
    fastest, ratios = speeds.find_fastest(["chain 1", "chain 2", "chain 3"], "chain")
    assert speeds.rows[fastest].speed.value == max(speeds.rows[n].speed.value for n in ("chain 1", "chain 2", "chain 3"))
    near = speeds.near_fastest("chain")
    assert near[0] == fastest
    for n, ratio in ratios.items():
        assert ratio == sweep.speed_ratio(n, fastest)
        assert (n in near) == (ratio.low <= 1 <= ratio.high)
    claims = speeds.claims()
    assert claims["fastest_chain"]["near"] == near
    proj = speeds.projection()
    assert list(proj.measured_speedup) == [speeds.rows[n].speed.value for n in proj.index]
    table = speeds.plot_table(["chain 1", "case"])
    assert list(table.columns[:3]) == ["num_steps", "tau", "tau_low"] and table.loc["case", "word"] == speeds["case"].word


def test_a_what_if_has_one_verdict_and_places_a_recorded_run_against_it(sweep):
    speeds = reading.read_speeds(sweep, hand_costs(), device="cpu", dtype="float32", repeats=2)
    r = speeds["case"]
    inside = {"settings": {"prompts": 12, "max_new_tokens": 64, "repeats": 3}, "acceptance": {"tau": r.tau.value},
              "projection": {"measured_speedup": r.speed.value}}
    w = reading.what_if(speeds, "case", roofline="kimi-k2 fp8, 8 GPUs (H200-class)", c=0.1, overhead=0.2, batch=48,
                        recorded=inside)
    assert list(w.served.labelled()) == ["served, batch 1", "served, batch 48", "served, batch 48, overlap on"]
    assert list(w.served.labelled().values()) == [w.served.at_one, w.served.at_batch, w.served.overlapped]
    assert w.served.batch == 48 and w.served.overlapped == pytest.approx(w.served.at_batch - 0.2)
    assert w.served_words() == {k: reading.projected_word(r.tau, v) for k, v in w.served.labelled().items()}
    assert "inside this run's interval: the two agree" in w.recorded_words()
    assert "not a second verdict" in w.recorded_words()
    table = w.table()
    assert table.loc["here, measured", "verdict"] == r.word
    assert all(v.startswith("projected ") for v in table.verdict.iloc[1:])
    outside = {**inside, "acceptance": {"tau": r.tau.high + 1}, "projection": {"measured_speedup": r.speed.high + 1}}
    w2 = reading.what_if(speeds, "case", roofline="kimi-k2 fp8, 8 GPUs (H200-class)", c=0.1, overhead=0.2, batch=48,
                         recorded=outside)
    words = w2.recorded_words()
    assert "outside this run's interval" in words and f"tau {r.tau.high + 1:.2f}, outside this run's" in words
    assert "one median without an interval" in words
    assert "experts per layer" in reading.experts_words(w2)


def test_a_recorded_run_with_its_interval_is_placed_by_overlap_not_by_its_median(sweep):
    """run_benchmark records ``speed_ratio`` (decode, e2e) with its pooled interval and tau's bounds: the what-if
    reads the interval of its own speed definition, and words the two runs from whether the intervals overlap."""
    speeds = reading.read_speeds(sweep, hand_costs(), device="cpu", dtype="float32", repeats=2)
    r = speeds["case"]
    s = r.speed

    def record(lo, hi, median):
        return {"settings": {"prompts": 12, "max_new_tokens": 64, "repeats": 3},
                "acceptance": {"tau": r.tau.value, "tau_low": r.tau.low, "tau_high": r.tau.high, "tau_level": 0.95},
                "projection": {"measured_speedup": median},
                "speed_ratio": {"decode": {"value": (lo + hi) / 2, "low": lo, "high": hi, "level": 0.95, "units": 12},
                                "e2e": {"value": 9.0, "low": 8.0, "high": 10.0, "level": 0.95, "units": 12}}}

    # the median lies outside this run's interval, the recorded interval overlaps it: the two agree
    w = reading.what_if(speeds, "case", roofline="kimi-k2 fp8, 8 GPUs (H200-class)", c=0.1, overhead=0.2, batch=48,
                        recorded=record(s.high - 0.01, s.high + 0.5, s.high + 0.3))
    rec = w.claims()["recorded"]
    # (lo + hi) / 2 of a timed bound: equal to s.high + 0.245 up to rounding only
    assert rec["speed"] == {"value": pytest.approx(s.high + 0.245), "low": s.high - 0.01, "high": s.high + 0.5,
                            "level": 0.95, "units": 12}
    assert rec["agrees"] is True
    words = w.recorded_words()
    sp = rec["speed"]   # printed from the recorded numbers (s.high + 0.245 may round either way at 2 digits)
    assert f"measured {sp['value']:.2f}x [{sp['low']:.2f}, {sp['high']:.2f}] (its paired interval" in words
    assert "overlapping this run's interval: the two agree" in words and "median" not in words
    # disjoint: the two differ, and why (its tau's interval against this run's)
    w = reading.what_if(speeds, "case", roofline="kimi-k2 fp8, 8 GPUs (H200-class)", c=0.1, overhead=0.2, batch=48,
                        recorded=record(s.high + 0.2, s.high + 0.6, s.value))
    assert w.claims()["recorded"]["agrees"] is False
    words = w.recorded_words()
    assert f"apart from this run's interval {reading.fmt(s, unit='x')}; the two differ by other prompts" in words
    assert f"tau {reading.fmt(r.tau)}, overlapping this run's {reading.fmt(r.tau)}" in words
    # an old record (no speed_ratio): its median against this run's interval, said to be one median
    old = {"settings": {"prompts": 12, "max_new_tokens": 64, "repeats": 3}, "acceptance": {"tau": r.tau.value},
           "projection": {"measured_speedup": s.high + 1}}
    w = reading.what_if(speeds, "case", roofline="kimi-k2 fp8, 8 GPUs (H200-class)", c=0.1, overhead=0.2, batch=48,
                        recorded=old)
    assert "speed" not in w.claims()["recorded"] and w.claims()["recorded"]["agrees"] is False
    assert "one median without an interval" in w.recorded_words()


def test_a_what_ifs_words_name_its_own_chain_length(sweep):
    speeds = reading.read_speeds(sweep, hand_costs(), device="cpu", dtype="float32", repeats=2)
    w = reading.what_if(speeds, "chain 2", roofline="kimi-k2 fp8, 8 GPUs (H200-class)", c=0.1, overhead=0.2, batch=48)
    assert "Here a 2-step round paid" in w.words() and "1-step" not in w.words()


def _chains(taus, gains, span):
    names = [f"chain {k}" for k in range(1, len(taus) + 1)]
    return reading.ChainReading(names, list(range(1, len(taus) + 1)), {n: iv(*t) for n, t in zip(names, taus)},
                                [t[0] for t in taus], {n: iv(*g) for n, g in zip(names[1:], gains)},
                                None if span is None else iv(*span))


def test_chain_words_follow_the_paired_intervals_not_the_order_of_k():
    """Teacher-forced chains of different K score different anchors: tau can fall, and the words say so."""
    falling = _chains([(2.10, 2.00, 2.20), (2.05, 1.95, 2.15), (1.90, 1.80, 2.00)],
                      [(-0.05, -0.10, 0.01), (-0.15, -0.20, -0.10)], (-0.20, -0.26, -0.14))
    words = falling.words()
    assert words.startswith("tau falls from 2.10 [2.00, 2.20] (chain 1) to 1.90 [1.80, 2.00] (chain 3), "
                            "-0.20 [-0.26, -0.14] paired over the same prompts;")
    assert "grows" not in words
    assert ("beats the chain before it for none, is within noise of it for chain 2 and loses to it for chain 3."
            in words)
    assert falling.claims()["chain_span"]["word"] == "loses"
    flat = _chains([(2.0, 1.9, 2.1), (2.02, 1.9, 2.1)], [(0.02, -0.03, 0.07)], (0.02, -0.03, 0.07))
    assert flat.words().startswith("tau stays within noise from 2.00")
    rising = _chains([(1.5, 1.4, 1.6), (2.0, 1.9, 2.1)], [(0.5, 0.4, 0.6)], (0.5, 0.4, 0.6))
    assert rising.words().startswith("tau rises from 1.50") and "beats the chain before it for chain 2," in rising.words()


def _fastest(ratios, top=(1.62, 1.54, 1.71)):
    rows = {"chain 5": row("chain 5", speed=top), **{n: row(n) for n in ratios}}
    speeds = reading.SpeedReading(rows, 1.3, 0.13, "cpu", "float32", 4, 2)
    speeds.fastest_of["chain"] = ("chain 5", {n: iv(*r) for n, r in ratios.items()})
    return speeds


def test_inside_the_noise_the_fastest_is_a_set_and_its_top_point_only_the_top_measurement():
    """Issue 35: "fastest measured: chain 5 ... within noise of it: chain 3, chain 4" ranked inside the noise. The
    set is named; its top point is "the top measurement", never "the fastest" (verdicts.speed_word's vocabulary)."""
    speeds = _fastest({"chain 3": (0.97, 0.90, 1.04), "chain 4": (0.99, 0.93, 1.05), "chain 1": (0.70, 0.65, 0.76)})
    assert speeds.near_fastest("chain") == ["chain 5", "chain 3", "chain 4"]
    head = ("The fastest chains measured (decode) are a set, not one chain: chain 5 (the top measurement, "
            "1.62x [1.54, 1.71]")
    assert speeds.fastest_set_words("chain") == head + ") and, within noise of it, chain 3, chain 4"
    assert speeds.fastest_words("chain") == (
        head + " the decode speed of no speculation) and, within noise of it (their paired ratio to it holds 1x), "
        "chain 3, chain 4; slower than the top measurement: chain 1. Nothing inside that set is ranked.")
    for words in (speeds.fastest_set_words("chain"), speeds.fastest_words("chain")):
        assert "fastest measured:" not in words and "chain 5, " not in words and "is a set" not in words


def test_a_top_measurement_alone_outside_everyones_noise_is_the_fastest():
    speeds = _fastest({"chain 1": (0.70, 0.65, 0.76), "chain 3": (0.90, 0.85, 0.95)})
    assert speeds.near_fastest("chain") == ["chain 5"]
    assert speeds.fastest_set_words("chain") == ("The fastest chain measured (decode) is chain 5 (1.62x [1.54, 1.71]), "
                                                 "no other chain within noise of it")
    assert speeds.fastest_words("chain") == (
        "The fastest chain measured (decode) is chain 5 (1.62x [1.54, 1.71] the decode speed of no speculation), no "
        "other chain within noise of it; slower than it: chain 1, chain 3.")
    assert "a set" not in speeds.fastest_words("chain") and "ranked" not in speeds.fastest_words("chain")


def test_what_06_times_is_what_05_says_it_times(sweep):
    """05 says 06 times its case "end to end (prefill included: every new token over prefill plus decoding)"
    (reading.E2E_SPEED; issue 35: not "start-up" too). 06 climbs its ladder at decode_rungs' default kind, "e2e", and
    decode_sweep's e2e unit is a decoding's new tokens over its prefill_s + decode_s: nothing else on the clock."""
    import inspect

    from eagle3lab.doctor.ladder import Decoded
    from eagle3lab.readings import nb06_case_file

    assert inspect.signature(nb06_case_file.decode_rungs).parameters["speed_kind"].default == "e2e"
    assert "speed_kind" not in inspect.getsource(nb06_case_file.climb_case)          # 06 climbs at that default
    assert inspect.signature(Decoded).parameters["speed_kind"].default == "e2e"
    n = len(sweep.reference)
    for name, outs in sweep.results.items():
        assert sweep.timed["e2e"][name][:n] == [(len(o.tokens), o.prefill_s + o.decode_s) for o in outs], name
        assert sweep.timed["decode"][name][:n] == [(len(o.tokens) - 1, o.decode_s) for o in outs], name
    assert reading.E2E_SPEED == "end to end (prefill included: every new token over prefill plus decoding)"
    assert f"same prompts {reading.E2E_SPEED}, in timed runs" in reading.E2E_POINTER
    assert "start-up" not in reading.E2E_POINTER


def test_a_served_record_beside_the_stated_costs_makes_the_verdict_a_set_where_they_disagree():
    """Issue 35: the seed's record implies the round its fleet paid (1.73 target steps at the as-launched tau); the
    half fix's tau 1.30 [1.18, 1.56] lies wholly below it (projected slower) while the stated costs' rounds (1.32 to
    1.52) lie inside it (within noise): the served verdict is the set, said so, in the table, words and claims."""
    half = reading.WhatIf("half", row("half", tau=(1.30, 1.18, 1.56), speed=(0.86, 0.73, 1.10)),
                          reading.ServedCosts(48, 1.348, 1.523, 1.323), {"batch": 48},
                          fleet_record=("the seed's fleet (its 90 -> 56.8 tok/s as launched)", 1.73))
    assert half.table().loc["the seed's fleet (its 90 -> 56.8 tok/s as launched), implied", "verdict"] == \
        "projected slower"
    assert set(half.served_words().values()) == {"projected within noise"}
    assert half.record_words() == (" The seed's fleet (its 90 -> 56.8 tok/s as launched) implies a round of 1.73 "
                                   "target steps: projected slower; the stated costs and the record disagree, so the "
                                   "served verdict is a set (projected slower, projected within noise), which only a "
                                   "measurement on the fleet decides.")
    assert half.claims()["fleet_record"] == {"label": "the seed's fleet (its 90 -> 56.8 tok/s as launched)",
                                       "round_cost": 1.73, "word": "projected slower"}
    agreeing = reading.WhatIf("half", half.row, half.served, {"batch": 48}, fleet_record=("a fleet", 1.4))
    assert agreeing.record_words().endswith("projected within noise, as the stated costs say.")
    assert reading.WhatIf("half", half.row, half.served, {}).record_words() == ""
