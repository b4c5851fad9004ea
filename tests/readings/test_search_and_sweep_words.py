"""Words of notebook 03's search reading and notebook 04's scale sweep, from small made-up inputs (issue 35)."""

from __future__ import annotations

import torch

from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings import nb03_fc_input_ordering as fc
from eagle3lab.readings import nb04_decoder_norm_split as rules


def test_a_cross_entropy_difference_reads_lower_as_better():
    assert fc.ce_word(Interval(0.01, 0.005, 0.015, 0.95, 16)) == "loses"       # higher cross-entropy than the reference
    assert fc.ce_word(Interval(-0.01, -0.015, -0.005, 0.95, 16)) == "beats"
    assert fc.ce_word(Interval(0.002, -0.001, 0.005, 0.95, 16)) == "within noise"
    assert fc.ce_word(Interval(0.0, 0.0, 0.0, 0.95, 16)) == "identical"


def test_a_search_variant_is_said_with_its_residual_rule_and_its_recycled_state():
    variant = {"norm_before_fc": False, "fc_norm": False, "norm_before_residual": True, "recycle_postnorm": True}
    assert fc.settings_said(variant) == "norm_before_residual=True, recycle post-norm"
    assert fc.settings_said({**variant, "norm_before_residual": False, "recycle_postnorm": False, "fc_norm": True}) == \
        "norm_before_residual=False, fc_norm, recycle pre-norm"


def test_all_positions_are_the_prompt_the_anchors_and_the_rows_past_the_last_anchor():
    # one sequence of 10 tokens, a prompt of 4, 3-step chains: rows 0..8 read a next token
    masks = rules.probe_positions([4], [10], 10, 3)
    counts = rules.position_counts(masks)
    assert counts == {"prompt": 3, "continuation": 4, "all": 9}
    assert not (masks["prompt"] & masks["continuation"]).any()
    assert torch.equal(masks["all"] & ~(masks["prompt"] | masks["continuation"]),
                       torch.tensor([[False] * 7 + [True, True, False]]))
    assert rules.positions_said(counts, 3) == ("all 9 positions of the first draft pass (3 prompt tokens, 4 continuation "
                                               "anchors and 2 last continuation positions, too near the end to anchor "
                                               "a 3-step chain)")
