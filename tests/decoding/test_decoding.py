"""Speculative decoding is lossless: greedy output == the target's own greedy ``generate``.

The pair below is real and tiny: a random Llama whose layers are scaled down (so its next token
depends mostly, not only, on the current one) and an EAGLE-3 draft trained for a second with the
same teacher-forced unroll the offline evaluator uses. Acceptance is mixed (0, 1, 2+ drafts per
round), so every path through accept / rollback / tree compaction is exercised.
"""

from __future__ import annotations

import pytest
import torch
from helpers.tiny_models import prompts, tiny_draft, tiny_pair, tiny_spec_target

from eagle3lab.decoding.speculative import (
    hf_generate,
    keep_cache_positions,
    speculative_generate,
    target_greedy,
    tree_settings,
)
from eagle3lab.decoding.tree import tree_attention_mask
from eagle3lab.engines.flags.sglang import CHAIN_CAP_CODES
from eagle3lab.engines.verify_width import ADJUSTED_LOG, pool_size
from eagle3lab.errors import Eagle3LabError
from eagle3lab.findings import Severity

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def pair():
    return tiny_pair()


@pytest.fixture(scope="module")
def eos_case(pair):
    """An EOS id the target emits mid-way for the first prompt (so EOS stopping is exercised)."""
    target, _ = pair
    ref = target_greedy(target, prompts()[0], max_new_tokens=40, eos_token_id=None).tokens
    return ref[17]


def check_log(result, max_new_tokens):
    assert 1 + sum(len(r.emitted) for r in result.rounds) == len(result.tokens)
    assert len(result.tokens) <= max_new_tokens
    for r in result.rounds:
        assert 0 <= r.accepted <= r.max_accept == result.settings["num_steps"]
        assert r.draft_forwards == result.settings["num_steps"]
        assert len(r.drafted) == result.settings["num_draft_tokens"] - 1
        assert r.draft_s >= 0 and r.verify_s > 0
    s = result.stats
    assert s.tau_from_survival == pytest.approx(s.tau)


@pytest.mark.parametrize("num_steps", [1, 3, 5])
def test_greedy_chain_is_token_identical_to_generate(pair, eos_case, num_steps):
    target, draft = pair
    accepted = []
    for i, prompt in enumerate(prompts()):
        eos = eos_case if i == 0 else None
        ref = hf_generate(target, prompt, max_new_tokens=40, eos_token_id=eos)
        out = speculative_generate(target, draft, prompt, num_steps=num_steps, max_new_tokens=40, eos_token_id=eos)
        assert out.tokens == ref.tokens, f"prompt {i}, num_steps {num_steps}"
        assert out.finished_by == ("eos" if i == 0 else "max_new_tokens")
        check_log(out, 40)
        accepted += [r.accepted for r in out.rounds]
    # the test exercised acceptance and rollback, not only the all-rejected path
    assert max(accepted) >= min(num_steps, 2) and min(accepted) == 0


@pytest.mark.parametrize("num_steps,topk,num_draft_tokens", [(2, 2, 4), (3, 2, 6), (4, 3, 8), (5, 4, 12), (3, 4, 5)])
def test_greedy_tree_is_token_identical_to_generate(pair, eos_case, num_steps, topk, num_draft_tokens):
    target, draft = pair
    accepted = []
    for i, prompt in enumerate(prompts(3)):
        eos = eos_case if i == 0 else None
        ref = hf_generate(target, prompt, max_new_tokens=40, eos_token_id=eos)
        out = speculative_generate(target, draft, prompt, num_steps=num_steps, topk=topk,
                                   num_draft_tokens=num_draft_tokens, max_new_tokens=40, eos_token_id=eos)
        assert out.tokens == ref.tokens, f"prompt {i}"
        check_log(out, 40)
        for r in out.rounds:  # a tree: every parent precedes its child
            assert all(p < i for i, p in enumerate(r.parents))
        accepted += [r.accepted for r in out.rounds]
    assert max(accepted) >= 2


def test_untrained_draft_and_one_token_budget_stay_lossless(pair):
    target, _ = pair
    draft = tiny_draft(target, seed=3, train_steps=0)
    prompt = prompts(1)[0]
    ref = hf_generate(target, prompt, max_new_tokens=25, eos_token_id=None)
    out = speculative_generate(target, draft, prompt, num_steps=4, max_new_tokens=25, eos_token_id=None)
    assert out.tokens == ref.tokens
    one = speculative_generate(target, draft, prompt, num_steps=4, max_new_tokens=1, eos_token_id=None)
    assert one.tokens == ref.tokens[:1] and one.rounds == []


def test_own_greedy_loop_matches_generate(pair):
    target, _ = pair
    for prompt in prompts(2):
        assert target_greedy(target, prompt, 30, None).tokens == hf_generate(target, prompt, 30, None).tokens


def test_a_forward_without_logits_to_keep_still_decodes_the_same(pair):
    """Remote-code targets may lack ``logits_to_keep``: the prefill then gets every row and takes the last."""
    from transformers import LlamaForCausalLM

    from eagle3lab.models.target import Target

    class NoKeep(LlamaForCausalLM):
        def forward(self, input_ids=None, position_ids=None, attention_mask=None, use_cache=None, cache=None):
            return super().forward(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                                   use_cache=use_cache, cache=cache)

    target, draft = pair
    bare = NoKeep(target.model.config)
    bare.load_state_dict(target.model.state_dict())
    bare.eval()
    other = Target.wrap(bare)
    for prompt in prompts(2):
        ref = target_greedy(target, prompt, 20, None).tokens
        assert target_greedy(other, prompt, 20, None).tokens == ref
        assert speculative_generate(other, draft, prompt, num_steps=3, max_new_tokens=20, eos_token_id=None).tokens == ref


def test_sglang_chain_adjustment_caps_the_chain(pair):
    # the seed: steps 1, draft tokens 16, topk 1 -> SGLang verifies 2 tokens; accept length <= 2
    target, draft = pair
    out = speculative_generate(target, draft, prompts(1)[0], num_steps=1, num_draft_tokens=16, max_new_tokens=30)
    assert out.settings["num_draft_tokens"] == 2
    [w] = out.warnings
    assert (w.code, w.severity, w.where, w.data) == ("SGL_TOPK1_DRAFT_TOKENS_ADJUSTED", Severity.WARNING,
                                                     "num_draft_tokens", {"written": 16, "used": 2})
    assert w.code in CHAIN_CAP_CODES   # the flag finding for the same SGLang rule has the same code
    assert w.text == f"{ADJUSTED_LOG} (as SGLang does): 16 -> 2"   # the words bench prints and its JSON carries
    assert all(len(r.drafted) == 1 for r in out.rounds) and out.tau <= 2.0


def test_tree_settings_follow_sglang_bounds():
    assert tree_settings(5, 4, 8) == ({"num_steps": 5, "topk": 4, "num_draft_tokens": 8}, [])   # a tree: as written
    assert tree_settings(3, 1, 4)[1] == []                 # a chain written as SGLang runs it: nothing to say
    assert pool_size(5, 4) == 4 + 4 * 16
    assert tree_settings(3, 2)[0]["num_draft_tokens"] == 7  # default: steps * topk + 1
    with pytest.raises(Eagle3LabError, match="num_draft_tokens"):
        tree_settings(1, 2, 4)      # pool of 2 candidates cannot fill 3 draft slots
    with pytest.raises(Eagle3LabError, match="num_steps"):
        tree_settings(0)


def test_tree_mask_gives_each_node_its_own_path_logits():
    """Target side only: one tree verify forward == plain forwards of each root-to-node path."""
    from eagle3lab.decoding.speculative import new_target_cache

    target = tiny_spec_target(seed=1, scale=1.0)
    model = target.model
    ctx = prompts(1, 7)[0]
    tokens, parents, depths = [5, 9, 11, 13, 2], [-1, 0, 0, 1, 3], [0, 1, 1, 2, 3]
    with torch.no_grad():
        cache = new_target_cache(model)
        model(torch.tensor([ctx]), cache=cache, use_cache=True)
        P = len(ctx)
        logits = model(torch.tensor([tokens]), cache=cache, use_cache=True,
                       position_ids=torch.tensor([[P + d for d in depths]]),
                       attention_mask=tree_attention_mask(parents, P, torch.float32)).logits[0]
        for leaf in (2, 4):
            path, j = [], leaf
            while j >= 0:
                path.insert(0, j)
                j = parents[j]
            ref = model(torch.tensor([ctx + [tokens[i] for i in path]])).logits[0, P:]
            torch.testing.assert_close(logits[path], ref, atol=1e-5, rtol=1e-5)
        # keep the path root->1->3->4: the compacted cache continues exactly like the plain prefix
        keep_cache_positions(cache, P, [0, 1, 3, 4])
        assert cache.get_seq_length() == P + 4
        nxt = model(torch.tensor([[7]]), cache=cache, use_cache=True).logits[0, -1]
        ref = model(torch.tensor([ctx + [5, 9, 13, 2, 7]])).logits[0, -1]
        torch.testing.assert_close(nxt, ref, atol=1e-5, rtol=1e-5)


def test_bad_inputs_name_the_setting(pair):
    target, draft = pair
    with pytest.raises(Eagle3LabError, match="temperature"):
        speculative_generate(target, draft, [1, 2, 3], temperature=-1)
    with pytest.raises(Eagle3LabError, match="prompt"):
        speculative_generate(target, draft, [])
    other = tiny_spec_target(hidden=48)
    with pytest.raises(Eagle3LabError, match="target_hidden_size"):
        speculative_generate(other, draft, [1, 2, 3])
