"""eagle3lab.analysis.verdicts: each word follows from its paired interval, and each phrase states the
numbers its claims hold."""

from __future__ import annotations

import re

import pytest
import torch

from eagle3lab.analysis import verdicts
from eagle3lab.analysis.verdicts import Measured, compare
from eagle3lab.readings.nb04_decoder_norm_split import probe_positions

# per prompt: tokens and rounds (tau = tokens / rounds)
ROUNDS = [10, 12, 9, 11, 10, 13, 8, 12]
BASE = Measured(tuple(3 * r for r in ROUNDS), tuple(ROUNDS))                     # tau 3.0 on every prompt
BETTER = Measured(tuple(3 * r + 5 for r in ROUNDS), tuple(ROUNDS))               # +5 tokens on every prompt
NOISY = Measured(tuple(3 * r + (4 if i % 2 else -4) for i, r in enumerate(ROUNDS)), tuple(ROUNDS))  # +-, mean ~0
WORSE = Measured(tuple(2 * r for r in ROUNDS), tuple(ROUNDS))


def test_words_follow_the_sign_of_the_paired_interval():
    v = compare({"base": BASE, "better": BETTER, "noisy": NOISY, "worse": WORSE, "same": BASE}, "base")
    assert v["base"].word == "reference" and v["base"].diff is None
    assert v["better"].word == "beats" and v["better"].diff.low > 0
    assert v["worse"].word == "loses" and v["worse"].diff.high < 0
    assert v["noisy"].word == "within noise" and v["noisy"].diff.low <= 0 <= v["noisy"].diff.high
    assert v["same"].word == "identical"
    assert v.counts() == {"beats": 1, "within noise": 1, "loses": 1, "identical": 1}
    assert v.highest().name == "better"
    assert v["worse"].value.value == pytest.approx(2.0) and v["worse"].diff.value == pytest.approx(-1.0)


def test_each_phrase_states_the_numbers_of_its_claims():
    v = compare({"base": BASE, "better": BETTER, "noisy": NOISY, "worse": WORSE}, "base")
    worse, better, noisy = v["worse"].claims(), v["better"].claims(), v["noisy"].claims()
    assert v["worse"].against() == (f"loses {worse['by']:.2f} [{worse['by_low']:.2f}, {worse['by_high']:.2f}] "
                                    "to base")
    assert worse["by_low"] <= worse["by"] <= worse["by_high"] and worse["by_low"] > 0
    assert v["better"].against() == (f"beats base by {better['by']:.2f} [{better['by_low']:.2f}, "
                                     f"{better['by_high']:.2f}]")
    assert v["noisy"].against().startswith("is within noise of base (") and f"{noisy['diff']:+.2f}" in v["noisy"].against()
    assert v["base"].measured() == f"tau 3.00 [{v['base'].value.low:.2f}, {v['base'].value.high:.2f}]"
    # the words list every comparison once, the reference first
    lines = v.words().splitlines()
    assert lines[0].startswith("- base: tau 3.00") and len(lines) == 4
    assert set(v.table()["verdict"]) == {"reference", "beats", "within noise", "loses"}


def test_a_paired_difference_needs_the_same_prompts():
    with pytest.raises(ValueError, match="same prompts"):
        compare({"a": BASE, "b": Measured((1, 2), (1, 1))}, "a")
    with pytest.raises(KeyError, match="reference"):
        compare({"a": BASE}, "nope")


def test_hits_and_positions_per_prompt():
    hits = torch.tensor([[1, 0, 1, 1], [0, 0, 1, 0]], dtype=torch.bool)
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]], dtype=torch.bool)
    m = Measured.of_hits(hits, mask)
    assert m.num == (2, 1) and m.den == (3, 4) and m.value == pytest.approx(3 / 7) and m.positions == 7


def test_probe_positions_split_prompt_rows_from_the_anchors_a_chain_scores():
    # one sequence of 10 tokens, prompt 4, chain of 2: rows 0..8 read token t+1; the prompt rows are 0..2,
    # anchors t >= 3 with t + 2 <= 9
    pos = probe_positions([4], [10], 9, 2)
    assert pos["prompt"][0].nonzero().flatten().tolist() == [0, 1, 2]
    assert pos["continuation"][0].nonzero().flatten().tolist() == [3, 4, 5, 6, 7]
    assert pos["all"][0].all()


def test_short_names_a_wiring_by_its_indices():
    assert verdicts.short((0, 3, 7)) == "[0, 3, 7]"
    assert not re.search(r"\d\.\d", verdicts.short((0, 3, 7)))   # no decimals for the workbook's decimal check


def test_speed_words_need_the_whole_interval_past_one():
    from eagle3lab.engines.acceptance import Interval

    assert verdicts.speed_word(Interval(1.3, 1.1, 1.5, 0.95, 8)) == "faster"
    assert verdicts.speed_word(Interval(0.7, 0.6, 0.9, 0.95, 8)) == "slower"
    assert verdicts.speed_word(Interval(1.3, 0.95, 1.6, 0.95, 8)) == "within noise"
    assert verdicts.speed_word(Interval(float("nan"), float("nan"), float("nan"), 0.95, 8)) == "not measured"


def test_one_prompt_ranks_nothing():
    """A bootstrap over one prompt is the point itself: 1.02 [1.02, 1.02] is no evidence of a speedup."""
    from eagle3lab.engines.acceptance import Interval, bootstrap_rate_ratio

    one = bootstrap_rate_ratio([10], [1.0], [10], [1.02])
    assert one.units == 1 and one.low == one.high and one.low > 1
    assert verdicts.speed_word(one) == "within noise"
    assert verdicts.word_of(Interval(0.3, 0.3, 0.3, 0.95, 1)) == "within noise"
    assert verdicts.word_of(Interval(0.3, 0.1, 0.5, 0.95, 2)) == "beats"
    assert verdicts.speed_word(Interval(1.3, 1.1, 1.5, 0.95, None)) == "faster"   # units unknown: the interval rules
    assert verdicts.projected_word(Interval(3.0, 3.0, 3.0, 0.95, 1), 2.0) == "projected within noise"
    assert verdicts.projected_word(Interval(3.0, 2.5, 3.5, 0.95, 8), 2.0) == "projected faster"


def test_one_word_for_a_degenerate_interval_wherever_a_difference_is_worded():
    from eagle3lab.engines.acceptance import Interval

    same = Interval(0.0, 0.0, 0.0, 0.95, 8)
    assert verdicts.word_of(same) == "identical"                    # the rule every reading calls
    assert verdicts.word_of(Interval(0.0, -0.1, 0.1, 0.95, 8)) == "within noise"
    assert verdicts.word_of(Interval(0.0, 0.0, 0.0, 0.95, 1)) == "identical"   # one prompt: still the same rounds


def test_a_bound_off_the_reference_never_prints_as_the_reference():
    from eagle3lab.engines.acceptance import Interval
    from eagle3lab.readings.numbers import fmt, rate, signed

    assert signed(Interval(0.04, 0.0004, 0.081, 0.95, 8)) == "+0.0400 [+0.0004, +0.0810]"
    assert signed(Interval(0.12, -0.004, 0.2, 0.95, 8)) == "+0.120 [-0.004, +0.200]"
    assert signed(Interval(0.0, 0.0, 0.0, 0.95, 8)) == "+0.00 [+0.00, +0.00]"      # the reference itself: as it is
    assert signed(Interval(0.31, 0.10, 0.52, 0.95, 8)) == "+0.31 [+0.10, +0.52]"  # nothing near 0: two decimals
    assert fmt(Interval(0.98, 0.96, 0.998, 0.95, 8), unit="x") == "0.980x [0.960, 0.998]"
    assert fmt(Interval(0.98, 0.96, 1.0, 0.95, 8), unit="x") == "0.98x [0.96, 1.00]"   # exactly 1x: as it is
    assert fmt(Interval(3.2, 3.06, 3.31, 0.95, 8)) == "3.20 [3.06, 3.31]"
    assert rate(1.0, 12, 12) == "1.00 (12/12)" and rate(0.0, 0, 9) == "0.00 (0/9)" and rate(0.9975, 399, 400) == "0.998"
    near = verdicts.Verdict("b", "a", Interval(3.0, 2.9, 3.1, 0.95, 8), Interval(0.05, -0.003, 0.1, 0.95, 8))
    assert near.against() == "is within noise of a (+0.050 [-0.003, +0.100])"
    beats = verdicts.Verdict("b", "a", Interval(3.0, 2.9, 3.1, 0.95, 8), Interval(0.05, 0.0004, 0.1, 0.95, 8))
    assert beats.against() == "beats a by 0.0500 [0.0004, 0.1000]"
