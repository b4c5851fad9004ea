"""The lossless check tells a tie flip from a bug (eagle3lab.decoding.lossless).

Both are made on purpose in a real speculative run on a tiny bf16 target, by one change to a step:
- a tie flip: the target's LM-head row of token S is set to that of token R (< S), so the two logits are
  equal at every position and the greedy loop's argmax takes R; the verify's logits are moved by one float32
  step towards S (far below bf16's resolution): a verify whose rounding breaks the tie the other way, which
  is what a batched forward does to a near-tie in bf16;
- a bug: the accept step takes the first drafted token when the target rejected it.
"""

from __future__ import annotations

import pytest
import torch
from helpers.tiny_models import prompts, tiny_draft, tiny_spec_target

from eagle3lab.decoding import speculative
from eagle3lab.decoding.lossless import (
    TIE_ULPS,
    LosslessCheck,
    classify_divergence,
    divergence_from_logits,
    lossless_check,
)
from eagle3lab.decoding.speculative import hf_generate, speculative_generate

pytestmark = pytest.mark.usefixtures("single_thread")

R, S = 50, 63      # R: a token the tiny target's greedy output holds; S: one it never emits, made R's twin
NEW = 20


@pytest.fixture(scope="module")
def bf16_pair():
    target = tiny_spec_target(seed=0)
    draft = tiny_draft(target, seed=3, train_steps=0)
    target.model.to(torch.bfloat16)
    draft.to(torch.bfloat16)
    return target, draft


def decode(target, draft, prompt_list, **kw):
    refs = [hf_generate(target, p, NEW, None).tokens for p in prompt_list]
    outs = [speculative_generate(target, draft, p, num_steps=3, max_new_tokens=NEW, eos_token_id=None, **kw).tokens
            for p in prompt_list]
    return outs, refs


def test_bf16_without_injection_is_identical(bf16_pair):
    target, draft = bf16_pair
    outs, refs = decode(target, draft, prompts(2))
    check = lossless_check(target, prompts(2), outs, refs)
    assert (check.identical, check.prompts, check.divergences, check.dtype) == (2, 2, (), "bfloat16")
    assert check.lossless and check.words() == "2/2 identical"


def test_a_verify_that_breaks_an_exact_tie_the_other_way_is_a_tie_flip(bf16_pair, monkeypatch):
    target, draft = bf16_pair
    head = target.model.lm_head.weight
    saved = head[S].clone()
    verify = speculative.SpeculativeRun.verify

    def verify_rounding_towards_s(self, tree, chain):
        logits, aux = verify(self, tree, chain)
        logits = logits.float()
        logits[:, S] = torch.nextafter(logits[:, S], torch.tensor(float("inf")))   # one float32 step
        return logits, aux

    try:
        with torch.no_grad():
            head[S] = head[R]
        x = target.model(torch.tensor([prompts(1)[0]])).logits[0]
        assert torch.equal(x[:, R], x[:, S])            # the premise: an exact tie at every position
        monkeypatch.setattr(speculative.SpeculativeRun, "verify", verify_rounding_towards_s)
        outs, refs = decode(target, draft, prompts(3))
        check = lossless_check(target, prompts(3), outs, refs)
    finally:
        with torch.no_grad():
            head[S] = saved
    assert all(R in ref[1:] and S not in ref for ref in refs)   # R is chosen in verified rows, S never
    assert check.identical == 0 and len(check.ties) == 3 and not check.bugs and check.lossless
    for d, ref in zip(check.ties, refs):
        assert (d.token, d.reference, d.top1, d.gap, d.ulps) == (S, R, R, 0.0, 0.0)
        assert d.position == ref.index(R, 1) and d.later_ulps <= TIE_ULPS
    assert "3 tie flips in bfloat16" in check.words() and "MISMATCH" not in check.words()
    assert check.to_json()["tie_flips"] == 3 and check.to_json()["divergences"][0]["kind"] == "tie"
    assert LosslessCheck.from_json(check.to_json()) == check     # a benchmark JSON's field words the same


def test_an_accept_that_takes_a_rejected_draft_is_a_bug(bf16_pair, monkeypatch):
    target, draft = bf16_pair
    accept = speculative.SpeculativeRun.accept

    def accept_unchecked(self, tree, logits, draft_probs=None):
        path, bonus = accept(self, tree, logits, draft_probs)
        return (path, bonus) if path else ([0], int(logits[1].argmax()))   # the first draft, never checked

    monkeypatch.setattr(speculative.SpeculativeRun, "accept", accept_unchecked)
    outs, refs = decode(target, draft, prompts(2))
    check = lossless_check(target, prompts(2), outs, refs)
    assert len(check.bugs) == 2 and not check.ties and not check.lossless
    for d in check.bugs:
        assert d.token != d.reference == d.top1 and d.ulps > 10 * TIE_ULPS   # far above rounding, not a near-tie
    assert "2 MISMATCHES above the tie rule" in check.words()
    assert check.to_json()["bugs"] == 2


def rows_with_gap(gap: float) -> torch.Tensor:
    """Three positions of logits over 4 tokens, max |logit| 8: token 0 on top, token 1 ``gap`` below it."""
    rows = torch.tensor([[8.0, 8.0 - gap, 1.0, -2.0]] * 3)
    return rows


@pytest.mark.parametrize("ulps,kind", [(0.0, "tie"), (7.9, "tie"), (8.1, "bug"), (200.0, "bug")])
def test_the_rule_is_tie_ulps_resolutions_of_the_dtype(ulps, kind):
    res = torch.finfo(torch.bfloat16).eps * 8.0               # 1/16: bf16's eps at the logit's magnitude
    d = divergence_from_logits(rows_with_gap(ulps * res), [1, 0], [0, 0], torch.bfloat16)
    assert (d.position, d.token, d.reference, d.top1) == (0, 1, 0, 0)
    assert d.resolution == pytest.approx(res) and d.ulps == pytest.approx(ulps, abs=1e-4) and d.kind == kind
    # the same gap in fp32 is a bug unless it is (near) zero: fp32's eps is 2^-23
    d32 = divergence_from_logits(rows_with_gap(ulps * res), [1, 0], [0, 0], torch.float32)
    assert d32.kind == ("tie" if ulps == 0 else "bug")


def test_a_later_token_off_the_targets_argmax_makes_a_tie_a_bug():
    rows = rows_with_gap(0.0)
    rows[2, 3] = 9.0                                           # position 2: token 3 on top by a whole logit
    assert divergence_from_logits(rows, [1, 0, 2], [0, 0, 0], torch.bfloat16).kind == "bug"
    assert divergence_from_logits(rows, [1, 0, 3], [0, 0, 0], torch.bfloat16).kind == "tie"


def test_lengths_that_differ_are_a_bug_and_identical_outputs_need_no_forward():
    d = divergence_from_logits(rows_with_gap(0.0), [0, 0], [0, 0, 1], torch.bfloat16)
    assert (d.position, d.token, d.reference, d.gap, d.kind) == (2, None, 1, None, "bug")
    assert divergence_from_logits(rows_with_gap(0.0), [0, 1], [0, 1], torch.bfloat16) is None
    assert classify_divergence(None, [1, 2], [3, 4], [3, 4]) is None   # the target is never read
