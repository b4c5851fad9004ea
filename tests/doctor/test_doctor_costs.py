"""Severity from what a finding costs (issue 32): the rule's one home (findings.Cost), the labels check priced in
tokens per round, and fixes that never make a checkpoint worse: doctor's fixes applied (write_fixed) to a draft
that has no such problem change nothing that runs, and the written draft raises none of their findings.

Cost here: one capture of 10 committed-target prompts, two doctor runs on the tiny8 healthy draft (about 20 s)."""

from __future__ import annotations

import pytest
import torch
from helpers.fixture_drafts import draft_dir, heldout_prompts, tiny8

from eagle3lab.doctor.findings import MIN_SHARE_OF_TAU, MIN_TOKENS_PER_ROUND, Cost, cost_of, costliest
from eagle3lab.doctor.run import labels_cost, run_doctor
from eagle3lab.engines.acceptance import Interval
from eagle3lab.findings import Severity

pytestmark = pytest.mark.usefixtures("single_thread")

# the codes whose fix doctor writes into a checkpoint or asks of the trainer
FIX_CODES = {"WIRING", "FIRST_LAYER_RULE", "VOCAB_MAP", "TARGET_DISTRIBUTION_PRENORM", "AUX_IDS_UNREADABLE"}


def _gain(value, low, high, units=24) -> Interval:
    return Interval(value, low, high, 0.95, units)


def test_critical_needs_a_cost_a_user_notices():
    assert (MIN_TOKENS_PER_ROUND, MIN_SHARE_OF_TAU) == (0.1, 0.05)
    # the field's case: 66.9% against 66.5% agreement, significant and immaterial
    small = Cost(_gain(0.004, 0.0005, 0.0078), tau=2.9)
    assert small.severity == Severity.WARNING
    assert small.words.startswith("measurable but small: +0.0040 [+0.0005, +0.0078] tokens per round")
    assert "5% of tau 2.90) = 0.145" in small.words     # 5% of tau 2.9 is above 0.1 tokens: the threshold said
    # 5% of tau decides at a high tau, 0.1 tokens at a low one; the LOW end must clear it
    assert Cost(_gain(0.30, 0.16, 0.44), tau=4.0).severity == Severity.WARNING
    assert Cost(_gain(0.30, 0.16, 0.44), tau=1.5).severity == Severity.CRITICAL
    assert Cost(_gain(0.12, 0.09, 0.15), tau=1.2).severity == Severity.WARNING
    assert Cost(_gain(0.30, -0.01, 0.61), tau=1.5).severity == Severity.INFO
    assert Cost(_gain(-0.30, -0.5, -0.1), tau=1.5).words.startswith("measured as a loss")
    # a fix's cost is read against the higher tau of its two rungs; the larger of gain and undone decides
    assert cost_of(_gain(0.3, 0.2, 0.4), 2.0, 4.1).threshold == pytest.approx(0.205)
    noticed = Cost(_gain(0.5, 0.4, 0.6), tau=2.0)
    assert costliest(small, None, noticed) is noticed and costliest(None) is None
    assert noticed.to_dict()["severity"] == "critical" and noticed.to_dict()["threshold"] == pytest.approx(0.1)


class _Stats:
    conditional = (0.8, 0.5, 0.5)
    tau = 2.0


class _Score:
    stats = _Stats()


def test_the_labels_gap_is_priced_in_tokens_per_round():
    """An agreement gap on the first proposal, later steps held: tau gains gap x (1 + c2 + c2 c3)."""
    cost = labels_cost(_gain(0.04, 0.02, 0.06), _Score())
    assert cost.estimated and cost.tau == 2.0
    assert (cost.gain.value, cost.gain.low, cost.gain.high) == pytest.approx((0.04 * 1.75, 0.02 * 1.75, 0.06 * 1.75))
    assert cost.severity == Severity.WARNING and "about +0.0700" in cost.words


@pytest.fixture(scope="module")
def healthy():
    """The tiny8 healthy draft (trained on the points its ids name, with the rule its config states) and doctor's
    report on it, from a bank captured once."""
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.state_bank import capture_bank

    target = tiny8()[0]
    seqs, lens = greedy_dataset(target, heldout_prompts(10), max_new_tokens=24, progress=False)
    bank = capture_bank(target, seqs, lens)
    report = run_doctor(draft_dir("healthy"), target=target, bank=bank, engine="sglang", num_prompts=10,
                        progress=False)
    return target, bank, report


def test_fixes_applied_to_a_draft_without_the_problem_change_nothing(healthy, tmp_path):
    from eagle3lab.doctor.write_fixed import write_fixed
    from eagle3lab.models.checkpoint import load_draft

    target, bank, report = healthy
    assert not FIX_CODES & set(report.codes()), report.table()
    assert report.critical == [] and report.fixes == []
    written = write_fixed(report, tmp_path / "fixed")
    assert written["remaining"] == [] and written["agrees"]
    original = load_draft(draft_dir("healthy"), target=target)
    rewritten = load_draft(tmp_path / "fixed", target=target)
    for name, tensor in original.state_dict().items():     # the same weights and map
        assert torch.equal(tensor, rewritten.state_dict()[name]), name
    as_served = [d.under("sglang").bound(num_target_layers=target.num_layers) for d in (original, rewritten)]
    assert as_served[0].aux_resid == as_served[1].aux_resid
    assert as_served[0].settings == as_served[1].settings
    again = run_doctor(tmp_path / "fixed", target=target, bank=bank, engine="sglang", num_prompts=10, progress=False)
    assert not FIX_CODES & set(again.codes()) and again.critical == [], again.table()
    assert again.ladder[0].tau.value == pytest.approx(report.ladder[0].tau.value)
