"""The glossary's verdict words (docs/glossary.md#verdicts) state the rule the readings apply: verdicts.word_of for a
paired difference, verdicts.speed_word for a speed ratio, and the ladder's step word (issue 35)."""

from __future__ import annotations

import re
from types import SimpleNamespace

from eagle3lab import bundled
from eagle3lab.analysis.verdicts import speed_word, word_of
from eagle3lab.doctor.ladder import Rung
from eagle3lab.engines.acceptance import Interval


def entry(anchor: str) -> str:
    text = (bundled.ROOT / "docs" / "glossary.md").read_text()
    body = text.split(f'<a id="{anchor}"></a>', 1)[1].split("<a id=", 1)[0]
    return " ".join(body.split())


def iv(value, low, high, units=4):
    return Interval(value, low, high, 0.95, units)


def test_within_noise_is_an_interval_that_contains_the_reference_bounds_included():
    words = entry("verdicts")
    assert "straddles" not in words and "contains 0, bounds included" in words
    assert "contains 1x, bounds included" in words
    # the glossary's own example, and its mirror, earn the word it gives them
    example = re.search(r"\((\+[\d.]+) \[(\+[\d.]+), (\+[\d.]+)\] is within noise\)", words)
    assert word_of(iv(*map(float, example.groups()))) == "within noise"
    assert word_of(iv(-0.031, -0.081, 0.0)) == "within noise" and word_of(iv(0.1, 0.001, 0.2)) == "beats"
    assert word_of(iv(0.5, 0.4, 0.6, units=1)) == "within noise" and "single prompt" in words
    assert speed_word(iv(1.05, 1.0, 1.1)) == "within noise" and speed_word(iv(0.9, 0.8, 1.0)) == "within noise"
    assert speed_word(iv(1.05, 1.001, 1.1)) == "faster" and speed_word(iv(0.9, 0.8, 0.999)) == "slower"


def test_identical_is_the_degenerate_interval_for_a_difference_and_for_a_rungs_speed():
    words = entry("verdicts")
    assert "exactly 0 [0, 0]" in words and "exactly 1x [1, 1]" in words
    assert word_of(iv(0.0, 0.0, 0.0)) == "identical"
    step = Rung.step_verdict.fget
    assert step(SimpleNamespace(step_speed=iv(1.0, 1.0, 1.0))) == "identical"
    assert step(SimpleNamespace(step_speed=iv(1.0, 0.99, 1.01))) == "within noise"
    for word in ("faster", "slower", "within noise", "identical", "beats", "loses"):
        assert f"*{word}*" in words, word
