"""Notebook 05's lossless words (speed_reading.lossless_words) follow the checks' numbers: identical, tie flips, bugs."""

from __future__ import annotations

from types import SimpleNamespace

from eagle3lab.decoding.lossless import Divergence, LosslessCheck
from eagle3lab.readings.nb05_acceptance_rates import lossless_words


def divergence(prompt: int, ulps: float) -> Divergence:
    return Divergence(prompt=prompt, position=5, token=7, reference=3, top1=3, gap=ulps * 0.0625, resolution=0.0625,
                      later_ulps=0.0)


def sweep_of(checks: dict) -> SimpleNamespace:
    return SimpleNamespace(lossless=lambda name: checks.get(name))


def test_identical_outputs_are_worded_with_their_dtype():
    same = LosslessCheck(prompts=4, identical=4, divergences=(), dtype="float32")
    text, claims = lossless_words(sweep_of({"a": same, "b": same}), ["a", "b"])
    assert text == ", in float32 (no output differed: no tie flip and no bug to tell apart)"
    assert claims == {"lossless_dtype": "float32", "lossless_differing": 0, "tie_flips": 0, "lossless_bugs": 0}


def test_tie_flips_and_bugs_are_counted_apart():
    one_tie = LosslessCheck(prompts=4, identical=3, divergences=(divergence(1, 2.0),), dtype="bfloat16")
    tie_and_bug = LosslessCheck(prompts=4, identical=2, divergences=(divergence(0, 0.0), divergence(2, 40.0)),
                                dtype="bfloat16")
    text, claims = lossless_words(sweep_of({"a": one_tie, "b": tie_and_bug}), ["a", "b"])
    assert claims == {"lossless_dtype": "bfloat16", "lossless_differing": 3, "tie_flips": 2, "lossless_bugs": 1}
    assert text.startswith(", in bfloat16; of the 3 outputs that differed, 2 were tie flips (")
    assert "within 8 resolutions of bfloat16" in text and text.endswith("and **1 was a bug** (off the target's "
                                                                         "argmax by more than rounding)")
    text, _ = lossless_words(sweep_of({"a": one_tie}), ["a"])
    assert "of the 1 output that differed, 1 was a tie flip (" in text and "bug" not in text


def test_a_sweep_without_checks_says_nothing_more():
    assert lossless_words(sweep_of({}), ["a"]) == ("", {"lossless_dtype": None, "lossless_differing": 0,
                                                        "tie_flips": 0, "lossless_bugs": 0})
