"""Tiny real models for tests, built or trained inside the run (seconds), and the one training loop for them.

A test that asserts a statistical verdict (a search answer, a finding's severity, a ranking) on a trained
draft reads the committed fixtures instead (``helpers.fixture_drafts``): a draft trained here moves with the
CPU's float kernels and the thread count. What is trained here is for claims that hold on any training run
(lossless decoding, equal scores by two routes) or that state their margin from an interval.
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

import torch

# ------------------------------------------------------------------ a random target + a draft trained on it
# A random Llama whose layers are scaled down (so its next token depends mostly, not only, on the
# current one) and an EAGLE-3 draft trained for a second with the same teacher-forced unroll the
# offline evaluator uses: acceptance is mixed (0, 1, 2+ drafts per round), so every path through
# accept / rollback / tree compaction is exercised.

V, H = 64, 32


@contextlib.contextmanager
def one_thread():
    """Tiny matmuls run fastest on one thread; on a busy 2-core box two threads spin-wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def tiny_spec_target(seed=0, vocab=V, hidden=H, layers=4, scale=0.15, init=0.02):
    from transformers import LlamaConfig, LlamaForCausalLM

    from eagle3lab.models.target import Target

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      initializer_range=init, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = LlamaForCausalLM(cfg)
    with torch.no_grad():  # small layer outputs: the next token leans on the current one
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.mul_(scale)
            layer.mlp.down_proj.weight.mul_(scale)
    return Target.wrap(model)


def tiny_draft(target, seed=0, draft_vocab=None, train_steps=150, passes=3, ids=(1, 2, 4), **config):
    """An EAGLE-3 draft (speculators profile) for ``target``; trained when train_steps > 0. ``config``:
    DraftConfig fields that differ (attention="mla" with its sizes, fc_norm=True, ...)."""
    from eagle3lab.decoding.evaluate import draft_passes
    from eagle3lab.models.capture import ResidCapture, concat_aux
    from eagle3lab.models.draft import DraftConfig, Eagle3Draft
    from eagle3lab.models.vocab import build_vocab_map

    vocab, hidden = target.vocab_size, target.hidden_size
    dv = draft_vocab or vocab * 3 // 4
    torch.manual_seed(seed)
    draft = Eagle3Draft(DraftConfig(**{**dict(hidden_size=hidden, intermediate_size=2 * hidden, num_attention_heads=4,
                                              num_key_value_heads=2, vocab_size=vocab, draft_vocab_size=dv,
                                              target_hidden_size=hidden, aux_layer_ids=ids), **config}),
                         profile="speculators").bound(num_target_layers=target.num_layers)
    seqs = torch.randint(0, vocab, (32, 20), generator=torch.Generator().manual_seed(seed))
    points = list(draft.aux_resid)
    with torch.no_grad(), ResidCapture(target.model, sorted(points)) as cap:
        greedy = target.model(seqs).logits.argmax(-1)
    aux = concat_aux(cap.states, points)
    keep = torch.bincount(greedy.flatten(), minlength=vocab).argsort(descending=True)[:dv].sort().values
    d2t, t2d = build_vocab_map(keep, vocab)
    if draft.d2t is not None:
        draft.d2t.copy_(d2t)
        draft.t2d.copy_(t2d)
    to_draft = torch.full((vocab,), -100)
    to_draft[keep] = torch.arange(dv)
    opt = torch.optim.AdamW(draft.parameters(), lr=5e-3)
    rows = seqs.shape[1] - 1
    for _ in range(train_steps):
        loss = 0.0
        for k, out in enumerate(draft_passes(draft, seqs, aux, passes), start=1):
            labels = torch.full((len(seqs), rows), -100)
            labels[:, :rows - k + 1] = to_draft[greedy[:, k:]]
            loss = loss + torch.nn.functional.cross_entropy(out.logits.flatten(0, 1), labels.flatten(),
                                                            ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()
    draft.eval().requires_grad_(False)
    return draft


@functools.cache
def tiny_pair():
    """The random target and its trained draft, built once per test run (the cache)."""
    with one_thread():
        target = tiny_spec_target()
        return target, tiny_draft(target)


def prompts(n=4, length=6, vocab=V):
    return [torch.randint(0, vocab, (length,), generator=torch.Generator().manual_seed(100 + i)).tolist()
            for i in range(n)]


def hand_costs():
    """A cost model with round numbers: target step 1 s, draft step 0.1 s, verify curve up to 8 tokens."""
    from eagle3lab.analysis.cost_model import CostModel

    return CostModel(device="cpu", context_len=10, target_step_s=1.0, draft_step_s=0.1,
                     verify_s={1: 1.0, 2: 1.1, 4: 1.3, 8: 1.7}, extend_s={1: 0.1, 2: 0.12, 3: 0.14, 4: 0.16})


# ------------------------------------------------------------------ a tiny target pretrained on synthetic code

def tiny_docs(n: int, seed: int = 0):
    """``n`` small synthetic Python files (``train.corpus.Doc``) for a tokenizer and a target to learn."""
    import numpy as np

    from eagle3lab.train.corpus import Doc

    rng = np.random.default_rng(seed)
    return [Doc(f"m{i}.py", "".join(f"def f{j}(self, x):\n    return x + {j}\n\n" for j in rng.integers(0, 40, 24)))
            for i in range(n)]


TINY_TARGET = dict(hidden_size=32, num_hidden_layers=6, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=64, max_position_embeddings=128, seq_len=32, batch_size=8,
                   warmup_steps=4, eval_every=20, eval_windows=4, lr=5e-3, min_lr=5e-4)
TINY_DOCS, TINY_TRAIN_DOCS = 48, 40        # docs[:40] train the tokenizer and the target, docs[40:] are held out


def tiny_tokenizer():
    from eagle3lab.train.tokenizer import train_tokenizer

    return train_tokenizer(tiny_docs(TINY_DOCS)[:TINY_TRAIN_DOCS], vocab_size=300)


def tiny_streams(tok):
    """(train stream, held-out stream): the tiny docs as ``tok`` tokenizes them."""
    from eagle3lab.train.pretrain_target import tokenize_docs

    docs = tiny_docs(TINY_DOCS)
    return tokenize_docs(tok, docs[:TINY_TRAIN_DOCS]), tokenize_docs(tok, docs[TINY_TRAIN_DOCS:])


def pretrain_tiny(tok, run_dir: str | Path, layers: int = 6, steps: int = 40):
    """A tiny Llama pretrained on the tiny docs: the ``pretrain_target`` result (``.model``, ``.log``...)."""
    from eagle3lab.train.pretrain_target import TargetTrainConfig, pretrain_target

    docs = tiny_docs(TINY_DOCS)
    torch.manual_seed(0)
    cfg = TargetTrainConfig(steps=steps, **{**TINY_TARGET, "num_hidden_layers": layers})
    return pretrain_target(cfg, tok, docs[:TINY_TRAIN_DOCS], docs[TINY_TRAIN_DOCS:], run_dir, progress=False)


def trained_tiny_draft(tiny8, run_dir: str | Path, wiring, nbr, ids, steps=150, seed=0):
    """A draft for ``tiny8`` = (target, train stream, held-out stream) trained in ``run_dir`` on ``wiring``
    (resid points) with ``norm_before_residual=nbr``, shipped with ``ids`` (None: missing) and no residual
    flag: what a checkpoint we did not make looks like."""
    from eagle3lab.train.train_draft import DraftTrainConfig, train_draft

    target, train, heldout = tiny8
    cfg = DraftTrainConfig(aux_resid=tuple(wiring), norm_before_residual=nbr, draft_vocab_size=128, ttt_steps=3,
                           seq_len=32, batch_size=8, steps=steps, warmup_steps=3, eval_every=steps,
                           eval_windows=2, lr=5e-3, seed=seed)
    draft = train_draft(cfg, target, train, heldout, run_dir, progress=False).draft
    draft.config.aux_layer_ids = ids     # shipped as the case says; the search never reads the training record
    draft.config.norm_before_residual = None
    return draft.eval().requires_grad_(False).bound(num_target_layers=target.num_layers)
