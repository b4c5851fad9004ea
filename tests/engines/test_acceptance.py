"""Acceptance metrics on hand-computed round logs."""

from dataclasses import dataclass

import pytest

from eagle3lab.engines.acceptance import (
    acceptance_stats,
    bootstrap_rate_ratio,
    bootstrap_ratio,
    bootstrap_ratio_difference,
    compare_definitions,
    engine_log_lines,
    expected_tau,
    simulated_acc_len,
    survival_from_conditional,
    tau_difference,
    tau_interval,
)


def test_hand_computed_chain_log():
    # five rounds of a 3-token chain: accepted 0, 2, 3, 1, 3 drafts
    s = acceptance_stats([0, 2, 3, 1, 3], num_positions=3)
    assert s.rounds == 5 and s.num_accepted_tokens == 9 and s.num_draft_tokens == 15
    assert s.tau == pytest.approx(14 / 5)
    assert s.vllm_mean_acceptance_length == pytest.approx(2.8)
    assert s.vllm_draft_acceptance_rate == pytest.approx(0.6)
    assert s.accepted_per_pos == (4, 3, 2)
    assert s.reached_per_pos == (5, 4, 3)
    assert s.conditional == pytest.approx((0.8, 0.75, 2 / 3))
    assert s.survival == pytest.approx((0.8, 0.6, 0.4))
    assert s.tau_from_survival == pytest.approx(s.tau)
    assert s.specforge_simulated_acc_len == pytest.approx(1.8)  # tau - 1: bonus excluded


def test_round_objects_and_tree_draft_counts():
    @dataclass
    class R:
        drafted: tuple
        accepted: int
        max_accept: int

    # a tree round sends 7 nodes to verify but can accept at most 4 (its depth)
    log = [R((1,) * 7, 4, 4), R((1,) * 7, 0, 4), R((1,) * 7, 2, 4)]
    s = acceptance_stats(log)
    assert s.num_positions == 4 and s.num_draft_tokens == 21
    assert s.tau == pytest.approx(9 / 3)
    assert s.survival == pytest.approx((2 / 3, 2 / 3, 1 / 3, 1 / 3))
    assert s.conditional == pytest.approx((2 / 3, 1.0, 0.5, 1.0))
    assert s.vllm_draft_acceptance_rate == pytest.approx(6 / 21)
    df = s.to_frame()
    assert list(df.index) == [1, 2, 3, 4] and df.loc[3, "reached"] == 2


def test_position_never_reached_is_nan_and_bad_counts_raise():
    s = acceptance_stats([0, 0], num_positions=2)
    assert s.conditional[0] == 0.0 and s.conditional[1] != s.conditional[1]  # nan
    assert s.tau == 1.0 and s.tau_from_survival == 1.0
    with pytest.raises(ValueError, match="num_positions"):
        acceptance_stats([0, 3], num_positions=2)


def test_specforge_formula_and_expected_tau():
    acc = [0.9, 0.8, 0.5]
    assert survival_from_conditional(acc) == pytest.approx([0.9, 0.72, 0.36])
    assert simulated_acc_len(acc) == pytest.approx(1.98)
    assert expected_tau(acc) == pytest.approx(2.98)
    table = compare_definitions(acceptance_stats([1, 2], num_positions=2), specforge_acc=acc)
    assert table.loc["SGLang accept length", "value"] == pytest.approx(2.5)
    assert table.loc["SpecForge simulated_acc_len (acc_i)", "value"] == pytest.approx(1.98)


def test_random_logs_satisfy_tau_identity():
    import random

    rng = random.Random(0)
    for _ in range(50):
        k = rng.randint(1, 8)
        log = [rng.randint(0, k) for _ in range(rng.randint(1, 40))]
        s = acceptance_stats(log, num_positions=k)
        assert s.tau_from_survival == pytest.approx(s.tau)
        assert expected_tau(s.conditional) == pytest.approx(s.tau) or any(c != c for c in s.conditional)


def test_engine_log_lines_by_hand():
    st = acceptance_stats([2, 0, 3], num_positions=3)   # 5 accepted in 3 rounds of 3 drafts
    lines = engine_log_lines(st, elapsed_s=2.0)
    assert "accept len: 2.67, " in lines["SGLang before 2025-10"]
    assert "accept rate" not in lines["SGLang before 2025-10"]
    # 2025-10 .. #23530: (accepted + rounds) / (rounds * 4 verified) = 8/12; after: drafts only, 5/9
    assert "accept rate: 0.67," in lines["SGLang 2025-10 to PR #23530"]
    assert "accept rate: 0.56," in lines["SGLang from PR #23530"]
    vllm = lines["vLLM V1"]
    assert "Mean acceptance length: 2.67," in vllm and "Accepted: 5 tokens, Drafted: 9 tokens" in vllm
    assert "Per-position acceptance rate: 0.667, 0.667, 0.333," in vllm     # survival, not conditional
    assert "Avg Draft acceptance rate: 55.6%" in vllm and "Accepted throughput: 2.50 tokens/s" in vllm
    # a tree verifies more than depth + 1 tokens: SGLang divides by the verify width
    tree = engine_log_lines(st, num_draft_tokens=8)
    assert "accept rate: 0.33," in tree["SGLang 2025-10 to PR #23530"]      # 8 / (3 * 8)
    assert "Accepted throughput: ? tokens/s" in tree["vLLM V1"]


def test_compare_definitions_on_a_round_log():
    st = acceptance_stats([0, 1, 3, 3], num_positions=3)
    defs = compare_definitions(st)["value"]
    assert defs["SpecForge simulated_acc_len (loop c_k)"] == pytest.approx(st.tau - 1)


def test_bootstrap_ratio_pools_units_and_narrows_with_more_of_them():
    r = bootstrap_ratio([3, 5, 4], [2, 2, 2])
    assert r.value == pytest.approx(12 / 6) and r.low <= r.value <= r.high and r.units == 3
    same = bootstrap_ratio([2, 2, 2], [1, 1, 1])
    assert (same.low, same.value, same.high) == (2, 2, 2)          # no spread between units, no interval
    few, many = bootstrap_ratio([1, 3] * 2, [1, 1] * 2), bootstrap_ratio([1, 3] * 50, [1, 1] * 50)
    assert many.high - many.low < (few.high - few.low) / 3
    with pytest.raises(ValueError):
        bootstrap_ratio_difference([1, 2], [1, 1], [1], [1])


def test_tau_interval_and_paired_difference_by_hand():
    a = [[2, 0, 1], [1, 1]]      # accepted drafts per round, per prompt: 5 accepted + 5 bonus in 5 rounds
    assert tau_interval(a).value == pytest.approx(10 / 5)
    zero = tau_difference(a, a)
    assert (zero.low, zero.value, zero.high, zero.sign()) == (0, 0, 0, 0)
    # b accepts one more per round on every prompt: paired, the difference is certain although the
    # prompts' own taus differ widely
    b = [[3, 1, 2], [2, 2]]
    more = tau_difference(b, a)
    assert more.value == pytest.approx(1) and more.low == pytest.approx(1) and more.sign() == 1
    assert tau_difference(a, b).sign() == -1
    noisy = tau_difference([[3, 0], [0, 0]], [[0, 0], [2, 0]])     # one prompt up, one down: within noise
    assert noisy.sign() == 0


def test_bootstrap_intervals_do_not_depend_on_the_order_of_the_prompts():
    # two draws that end on the same prompts list them in other orders: the interval must be the same
    import numpy as np

    from eagle3lab.engines.acceptance import bootstrap_ratio, bootstrap_ratio_difference

    rng = np.random.default_rng(3)
    num_a, den_a = rng.integers(0, 40, 24).astype(float), rng.integers(10, 20, 24).astype(float)
    num_b, den_b = num_a + rng.normal(0, 3, 24), den_a
    perm = rng.permutation(24)
    one = bootstrap_ratio_difference(num_a, den_a, num_b, den_b)
    other = bootstrap_ratio_difference(num_a[perm], den_a[perm], num_b[perm], den_b[perm])
    assert (one.value, one.low, one.high) == pytest.approx((other.value, other.low, other.high), abs=1e-12)
    assert one.low < one.value < one.high
    r1, r2 = bootstrap_ratio(num_a, den_a), bootstrap_ratio(num_a[perm], den_a[perm])
    assert (r1.low, r1.high) == pytest.approx((r2.low, r2.high), abs=1e-12) and r1.low < r1.value < r1.high


def test_rate_ratio_is_paired_over_the_units():
    # b takes twice a's time on every prompt although the prompts' own times differ tenfold: certain 2x
    tok, sec_a = [10, 10, 10, 10], [1.0, 10.0, 2.0, 5.0]
    sec_b = [2 * s for s in sec_a]
    ratio = bootstrap_rate_ratio(tok, sec_a, tok, sec_b)
    assert ratio.value == pytest.approx(2.0) and ratio.low == pytest.approx(2.0) and ratio.high == pytest.approx(2.0)
    # one prompt faster, one slower: the interval holds 1x
    mixed = bootstrap_rate_ratio([10, 10], [1.0, 3.0], [10, 10], [2.0, 1.5])
    assert mixed.low < 1 < mixed.high
    with pytest.raises(ValueError):
        bootstrap_rate_ratio([1, 2], [1, 1], [1], [1])
