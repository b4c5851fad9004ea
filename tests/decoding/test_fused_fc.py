"""fc fused from per-slot projections (``evaluate_on_bank(fuse_fc=True)``, ``StateBank.fc_projection``) scores
exactly what fc over the concatenation scores, on the bundled case (12-layer target, case draft); a hook on
fc's way keeps the exact path."""

from __future__ import annotations

import pytest
import torch

from eagle3lab import bundled
from eagle3lab.decoding.evaluate import evaluate_on_bank, fc_is_linear
from eagle3lab.decoding.speculative import prompt_ids
from eagle3lab.models.state_bank import FINAL_NORMED, capture_bank

pytestmark = pytest.mark.usefixtures("single_thread", "bundled_models")


@pytest.fixture(scope="module")
def case():
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    # the prompts' own text as the continuation (no decoding: what is compared is the scoring, not the text)
    seqs = [prompt_ids(target, p)[:48] for p in bundled.load_prompts(n=6)]
    lens = [len(s) // 3 for s in seqs]
    draft = load_draft(bundled.DRAFT_CASE, target=target, device="cpu", check_vocab=False)
    return capture_bank(target, seqs, lens), draft


def _same(a, b):
    assert a.accept == b.accept   # every anchor's accepted length, so tau and every conditional rate
    assert a.ce_n == b.ce_n
    assert max(abs(x - y) / max(1.0, abs(y)) for x, y in zip(a.ce_sum, b.ce_sum)) < 1e-6
    assert abs(a.ce - b.ce) < 1e-6


@pytest.mark.parametrize("wiring", [(0, 3, 8), (12, 7, FINAL_NORMED)])
def test_fused_fc_scores_what_fc_on_the_concatenation_scores(case, wiring):
    bank, draft = case
    for variant in draft.variants():
        d = draft.rewired(**variant)
        _same(evaluate_on_bank(bank, d, wiring, 3, batch_size=2),
              evaluate_on_bank(bank, d, wiring, 3, batch_size=2, fuse_fc=False))


def test_projections_are_computed_once_and_follow_the_weight(case):
    bank, draft = case
    bank._fc.clear()
    evaluate_on_bank(bank, draft, (0, 3, 8), 2)
    held = len(bank._fc)
    assert held == 3   # one projection per (slot, point)
    evaluate_on_bank(bank, draft.rewired(norm_before_residual=True), (0, 3, 9), 2)
    assert len(bank._fc) == 4   # the variant shares fc: only slot 2's resid[9] is new
    proj = bank.fc_projection(draft.fc.weight, 1, 3)
    width = bank.states[3].shape[-1]
    expected = bank.states[3].float() @ draft.fc.weight[:, width:2 * width].float().T
    torch.testing.assert_close(proj, expected, rtol=1e-5, atol=1e-5)
    # a weight changed in place is never served its old projection
    other = draft.fc.weight.clone()
    other[:, width:2 * width] *= 2
    assert torch.allclose(bank.fc_projection(other, 1, 3), 2 * proj, rtol=1e-5, atol=1e-5)


def test_a_hook_on_fc_or_an_fc_norm_takes_the_exact_path(case):
    bank, draft = case
    assert fc_is_linear(draft)
    seen = []
    with draft.hooks({"hook_fc_out": lambda x, name: seen.append(x.shape)}):
        assert not fc_is_linear(draft)
        evaluate_on_bank(bank, draft, (0, 3, 8), 2)
    assert seen and all(s[-1] == draft.config.hidden_size for s in seen)   # fc ran, its hook fired
    assert fc_is_linear(draft)


def test_states_made_under_inference_mode_are_projected(case):
    """greedy_bank captures under torch.inference_mode: such states carry no version counter (doctor's live path
    raised 'Inference tensors do not track version counter' before)."""
    bank, draft = case
    width = bank.states[3].shape[-1]
    with torch.inference_mode():
        frozen = bank.states[3].clone()
    bank.states[3] = frozen
    proj = bank.fc_projection(draft.fc.weight, 1, 3)
    torch.testing.assert_close(proj, frozen.float() @ draft.fc.weight[:, width:2 * width].float().T,
                               rtol=1e-5, atol=1e-5)
