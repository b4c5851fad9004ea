"""The teacher-forced offline evaluator predicts the real loop's greedy-chain acceptance."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.tiny_models import prompts, tiny_draft, tiny_pair, tiny_spec_target

from eagle3lab import bundled
from eagle3lab.decoding.evaluate import draft_passes, evaluate_offline, greedy_dataset, pass_mask
from eagle3lab.decoding.speculative import speculative_generate
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.draft import DraftCache

pytestmark = pytest.mark.usefixtures("single_thread")


def test_pass_mask_pattern():
    m = pass_mask(3, 3)[0, 0].int().tolist()
    assert m == [[1, 0, 0, 1, 0, 0, 1, 0, 0],
                 [1, 1, 0, 0, 1, 0, 0, 1, 0],
                 [1, 1, 1, 0, 0, 1, 0, 0, 1]]


def test_pass_mask_window_keeps_the_rows_of_the_window():
    # rows 1..2 of 4 in passes 2..3: pass-1 prefix rows <= t, then the window's diagonal per later pass
    m = pass_mask(4, 3, window=(1, 3))[0, 0].int().tolist()
    assert m == [[1, 1, 0, 0, 1, 0, 1, 0],
                 [1, 1, 1, 0, 0, 1, 0, 1]]
    full = pass_mask(4, 3)[0, 0]
    assert pass_mask(4, 3, window=(0, 4))[0, 0].equal(full)


def test_logits_at_scores_only_those_rows_and_matches_every_row():
    """Passes run on the window of the asked rows give the same logits there as passes over every row."""
    target, draft = tiny_pair()
    ids = torch.tensor(prompts(2, 14))
    from eagle3lab.models.capture import ResidCapture

    points = list(draft.aux_resid)
    at = torch.zeros(2, 13, dtype=torch.bool)
    at[0, 5:9], at[1, 7:11] = True, True
    with torch.no_grad(), ResidCapture(target.model, sorted(points)) as cap:
        target.model(ids)
        aux = torch.cat([cap.states[k] for k in points], -1)
        every = draft_passes(draft, ids, aux, 3)
        some = draft_passes(draft, ids, aux, 3, logits_at=at)
    for full, kept in zip(every, some):
        assert kept.logits.shape == (int(at.sum()), full.logits.shape[-1])
        torch.testing.assert_close(kept.logits, full.logits[at], atol=1e-5, rtol=1e-5)
    assert some[1].hidden.shape[1] == 11 - 5                                # the window of rows 5..10
    assert some[0].hidden.shape[1] == 13 - 5                                # pass 1 from row 5: keys only before


# the attention kinds and depths a draft can have (MLA and Qwen3 sizes as tests/models/family_cases.py states them)
KINDS = {"llama": {}, "two layers": {"num_hidden_layers": 2}, "qwen3": {"attention": "qwen3", "head_dim": 8},
         "mla": {"attention": "mla", "num_key_value_heads": 4, "q_lora_rank": 12, "kv_lora_rank": 16,
                 "qk_nope_head_dim": 6, "qk_rope_head_dim": 4, "v_head_dim": 5}}


@pytest.mark.parametrize("kind", KINDS)
def test_keys_only_rows_fill_the_cache_as_a_full_forward_does(kind):
    """Rows 0..t0-1 run keys_only (their keys and values only), then rows t0.. attend them from the cache:
    the same logits and hidden states there as one forward over every row, for every attention kind and a
    two-layer draft (whose first layer must run whole for the second's keys)."""
    from eagle3lab.models.capture import ResidCapture

    target = tiny_spec_target()
    draft = tiny_draft(target, train_steps=0, **KINDS[kind])
    ids = torch.tensor(prompts(2, 14))
    points = list(draft.aux_resid)
    with torch.no_grad(), ResidCapture(target.model, sorted(points)) as cap:
        target.model(ids)
        aux = torch.cat([cap.states[k] for k in points], -1)
        every = draft(ids[:, 1:], aux[:, :-1])
        t0, cache = 6, DraftCache()
        assert draft(ids[:, 1:t0 + 1], aux[:, :t0], cache=cache, keys_only=True) is None
        assert cache.seq_len == t0 and len(cache.keys) == draft.config.num_hidden_layers
        rest = draft(ids[:, t0 + 1:], aux[:, t0:-1], cache=cache)
    torch.testing.assert_close(rest.logits, every.logits[:, t0:], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(rest.hidden, every.hidden[:, t0:], atol=1e-5, rtol=1e-5)
    with pytest.raises(Eagle3LabError, match="keys_only"):
        draft(ids[:, 1:t0 + 1], aux[:, :t0], keys_only=True)


def test_pass_k_row_equals_the_loops_incremental_draft_step():
    """Row t of pass 3 == extend rows 0..t, then two recycled steps on the true tokens (as the loop does)."""
    target, draft = tiny_pair()
    ids = torch.tensor([prompts(1, 12)[0]])
    from eagle3lab.models.capture import ResidCapture

    points = list(draft.aux_resid)
    with torch.no_grad(), ResidCapture(target.model, sorted(points)) as cap:
        target.model(ids)
        aux = torch.cat([cap.states[k] for k in points], -1)
        outs = draft_passes(draft, ids, aux, 3)
        t = 6
        cache = DraftCache()
        out = draft(ids[:, 1:t + 2], aux[:, :t + 1], cache=cache)          # rows 0..t
        h = out.hidden[:, -1:]
        for k in (2, 3):
            out = draft(ids[:, t + k:t + k + 1], recycled_hidden=h, cache=cache)
            h = out.hidden
    torch.testing.assert_close(outs[2].logits[0, t], out.logits[0, 0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("num_steps", [3, 5])
def test_replay_reproduces_the_real_loop(num_steps):
    target, draft = tiny_pair()
    ps, budget = prompts(4), 40
    seqs, lens = greedy_dataset(target, ps, max_new_tokens=budget + num_steps + 1, eos_token_id=None)
    ev = evaluate_offline(target, draft, seqs, num_steps=num_steps, prompt_lens=lens, batch_size=3)
    loop = [r.accepted for p in ps
            for r in speculative_generate(target, draft, p, num_steps=num_steps, max_new_tokens=budget,
                                          eos_token_id=None).rounds]
    replay = ev.replay(max_new_tokens=budget)
    assert replay.rounds == len(loop) and replay.num_accepted_tokens == sum(loop)
    loop_tau = 1 + sum(loop) / len(loop)
    assert abs(replay.tau - loop_tau) <= 0.02 * loop_tau
    # every-anchor estimate: same quantity on more anchors; SpecForge's acc_1 is the same match
    allstats = ev.stats
    assert allstats.rounds > replay.rounds
    assert allstats.tau == pytest.approx(allstats.tau_from_survival)
    assert ev.specforge_acc[0] == pytest.approx(allstats.conditional[0])
    df = ev.to_frame()
    assert list(df.columns) == ["reached", "accepted", "conditional_c", "survival_a", "specforge_acc"]


def test_bad_prompt_lens():
    target, draft = tiny_pair()
    with pytest.raises(Eagle3LabError, match="prompt_lens"):
        evaluate_offline(target, draft, [[1, 2, 3]], prompt_lens=[5])


@pytest.mark.usefixtures("bundled_models")
def test_offline_agrees_with_loop_on_bundled_models():
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    draft = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    rows = [json.loads(line) for line in (bundled.PROMPTS / "prompts.jsonl").read_text().splitlines()]
    texts = [r["text"] for r in rows if r["length"] == "short"][:8]
    budget, k = 40, 5
    # no EOS stop: the replay needs the text num_steps + 1 tokens past the loop's last round
    seqs, lens = greedy_dataset(target, texts, max_new_tokens=budget + k + 1, eos_token_id=None)
    ev = evaluate_offline(target, draft, seqs, num_steps=k, prompt_lens=lens)
    loop = [r.accepted for t in texts for r in speculative_generate(target, draft, t, num_steps=k, eos_token_id=None,
                                                                     max_new_tokens=budget).rounds]
    loop_tau = 1 + sum(loop) / len(loop)
    assert abs(ev.replay(max_new_tokens=budget).tau - loop_tau) <= 0.02 * loop_tau


def test_logits_at_is_exact_for_a_rope_that_depends_on_the_length():
    """A dynamic RoPE picks its frequencies from each forward's length: past max_position_embeddings neither are
    the prompt rows split off nor the later passes cut to the window (a shorter forward would turn its rows by
    another set), and every pass's logits at the anchors stay those of passes over every row."""
    from eagle3lab.models.capture import ResidCapture

    target = tiny_spec_target()
    draft = tiny_draft(target, train_steps=0, max_position_embeddings=8,
                       rope_scaling={"rope_type": "dynamic", "factor": 2.0})
    ids = torch.tensor(prompts(2, 14))
    at = torch.zeros(2, 13, dtype=torch.bool)
    at[:, 6:10] = True
    points = list(draft.aux_resid)
    with torch.no_grad(), ResidCapture(target.model, sorted(points)) as cap:
        target.model(ids)
        aux = torch.cat([cap.states[k] for k in points], -1)
        every = draft_passes(draft, ids, aux, 3)
        some = draft_passes(draft, ids, aux, 3, logits_at=at)
    assert draft.rope.regime(6) != draft.rope.regime(13)
    for full, kept in zip(every, some):
        torch.testing.assert_close(kept.logits, full.logits[at], atol=1e-5, rtol=1e-5)
