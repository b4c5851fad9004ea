"""Sampling is lossless in distribution: speculative output ~ the target's own sampling distribution.

Small vocabulary (6 tokens), three new tokens: the first comes from the prefill, the next two from
the first draft-verify round (accepted drafts, residual resamples and the bonus). Their exact joint
distribution under the target at temperature T is enumerated from target forwards; a chi-square test
compares it with the speculative loop's samples (fixed seeds, so the test is deterministic). The
drafts themselves, taken from the same round logs, fail that test: the draft's proposals are
a different distribution, and the rejection rule is what turns them into the target's.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers.tiny_models import one_thread, tiny_draft
from helpers.tiny_models import tiny_spec_target as tiny_target
from scipy.stats import chisquare

from eagle3lab.decoding.speculative import speculative_generate

V, T, N = 6, 0.8, 1200
PROMPT = [1, 2, 3]


@pytest.fixture(scope="module")
def setup():
    with one_thread():
        target = tiny_target(seed=0, vocab=V, hidden=16, layers=2, scale=1.0, init=0.3)
        draft = tiny_draft(target, seed=1, draft_vocab=5, train_steps=0, ids=(0, 1, 2))  # 5 of 6 tokens: q = 0 on one
        with torch.no_grad():
            seqs = torch.tensor([PROMPT + [a, b] for a in range(V) for b in range(V)])
            logp = torch.log_softmax(target.model(seqs).logits.double() / T, dim=-1)
        joint = torch.zeros(V, V, V, dtype=torch.float64)
        for a in range(V):
            for b in range(V):
                r = a * V + b
                joint[a, b] = (logp[r, 2, a] + logp[r, 3, b] + logp[r, 4]).exp()
        yield target, draft, joint.flatten().numpy()


def chi2_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = probs / probs.sum() * counts.sum()
    small = expected < 5  # pool rare cells so the chi-square approximation holds
    obs = np.append(counts[~small], counts[small].sum())
    exp = np.append(expected[~small], expected[small].sum())
    return float(chisquare(obs, exp).pvalue)


@pytest.mark.parametrize("topk,num_steps,num_draft_tokens", [(1, 2, None), (2, 2, 4)], ids=["chain", "tree"])
def test_sampling_matches_target_distribution(setup, topk, num_steps, num_draft_tokens):
    target, draft, joint = setup
    out_counts, draft_counts = np.zeros(V ** 3), np.zeros(V ** 3)
    accepted = []
    with one_thread():
        for seed in range(N):
            r = speculative_generate(target, draft, PROMPT, num_steps=num_steps, topk=topk,
                                     num_draft_tokens=num_draft_tokens, temperature=T, max_new_tokens=3,
                                     eos_token_id=None, seed=seed)
            x, d = r.tokens, r.rounds[0].drafted
            out_counts[x[0] * V * V + x[1] * V + x[2]] += 1
            draft_counts[x[0] * V * V + d[0] * V + d[1]] += 1
            accepted.append(r.rounds[0].accepted)
    assert chi2_pvalue(out_counts, joint) > 1e-3
    assert chi2_pvalue(draft_counts, joint) < 1e-6          # the test has the power to see a wrong rule
    assert 0 < np.mean(accepted) < num_steps                 # both accept and reject paths were taken
    tv = 0.5 * np.abs(out_counts / N - joint).sum()
    assert tv < 0.12


def test_same_seed_same_sample(setup):
    target, draft, _ = setup
    runs = [speculative_generate(target, draft, PROMPT, num_steps=3, temperature=T, max_new_tokens=12,
                                 eos_token_id=None, seed=7).tokens for _ in range(2)]
    assert runs[0] == runs[1]
