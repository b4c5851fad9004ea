"""greedy_bank: one decode gives the continuations greedy_dataset gives and the states capture_bank captures."""

from __future__ import annotations

import pytest
import torch

from eagle3lab import bundled
from eagle3lab.decoding.evaluate import greedy_dataset
from eagle3lab.decoding.greedy_bank import greedy_bank
from eagle3lab.models.state_bank import FINAL_NORMED, capture_bank

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def target(bundled_models):
    from eagle3lab.models.target import load_target

    return load_target(str(bundled.TARGET), device="cpu")


def _twice(target, prompts, **kw):
    seqs, lens = greedy_dataset(target, prompts, batch_size=4, **kw)
    return capture_bank(target, seqs, lens), greedy_bank(target, prompts, batch_size=4, **kw)


def _assert_same_bank(old, new):
    assert old.lengths == new.lengths and old.prompt_lens == new.prompt_lens
    assert torch.equal(old.input_ids, new.input_ids)
    assert set(old.states) == set(new.states) and old.num_layers == new.num_layers
    rows = sum(old.lengths)
    agree = sum(int((old.top1[i, :n] == new.top1[i, :n]).sum()) for i, n in enumerate(old.lengths))
    assert agree >= rows - 1          # a float near-tie may break the other way once, no more
    for k in old.states:              # the incremental decode's states equal one full forward's within rounding
        for i, n in enumerate(old.lengths):
            a, b = old.states[k][i, :n], new.states[k][i, :n]
            assert float(((a - b).norm(dim=-1) / a.norm(dim=-1).clamp(min=1e-6)).max()) < 1e-4, (k, i)


def test_one_decode_gives_the_continuations_and_the_states_of_two_passes(target):
    """Prompts of different lengths (left-padded together): the same text, prompt lengths and states."""
    old, new = _twice(target, bundled.load_prompts(n=5), max_new_tokens=12)
    assert min(old.prompt_lens) < max(old.prompt_lens)
    _assert_same_bank(old, new)
    assert FINAL_NORMED in new.states and new.source == old.source


def test_rows_that_all_stop_early_are_read_once_more(target):
    """A stop token every row emits first: generate ends before reading it, so the batch is captured again
    (capture_bank's states) and the bank still holds every kept token, the stop token included."""
    prompts = bundled.load_prompts(n=1)
    first = greedy_dataset(target, prompts, max_new_tokens=1)[0][0][-1]
    old, new = _twice(target, prompts, max_new_tokens=12, eos_token_id=first)
    assert new.lengths == [new.prompt_lens[0] + 1]     # the prompt and the stop token
    _assert_same_bank(old, new)
