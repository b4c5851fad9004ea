"""The target's greedy continuations and its states at every position, from one decode.

``greedy_dataset`` then ``capture_bank`` run the target twice over the same text: ``generate`` for the
continuation, then a full forward for the states. Here ``generate`` runs once with ``ResidCapture`` on
every forward it makes: the prompt's states come from the prefill, each new token's from the step that
reads it. One token more than is kept is decoded, so the last kept token is read too; the final norm and
LM head then give the post-norm state and the argmax at every position, prompt included. The states are
the incremental decode's (what a serving engine computes while decoding), equal to one full forward's
within float rounding.
"""

from __future__ import annotations

import torch
from tqdm.auto import tqdm

from eagle3lab.decoding.speculative import eos_ids, greedy_config, prompt_ids
from eagle3lab.models.capture import ResidCapture
from eagle3lab.models.state_bank import FINAL_NORMED, StateBank, TargetHead, capture_bank, check_prompt_lens
from eagle3lab.models.target import as_target


@torch.inference_mode()
def greedy_bank(target, prompts, max_new_tokens: int = 48, eos_token_id="auto", batch_size: int = 8,
                progress: bool = False) -> StateBank:
    """Prompts -> a ``StateBank`` of prompt + the target's greedy continuation (up to and with its first stop
    token), every resid point captured. ``batch_size`` prompts decode together (left-padded, as
    ``greedy_dataset(batch_size=)``: the same continuations). A batch whose rows all stopped before the last
    one's stop token was read is captured by ``capture_bank`` from the text decoded (its states are then a
    full forward's: two target passes for that batch, the decode and the capture)."""
    tgt = as_target(target)
    ids = [prompt_ids(tgt, p) for p in prompts]
    stop = eos_ids(tgt, eos_token_id)
    head = TargetHead.from_target(tgt)
    n = tgt.num_layers
    seqs, per_seq = [], []
    for start in tqdm(range(0, len(ids), batch_size), desc=f"greedy continuations and states ({batch_size} at once)",
                      disable=not progress):
        batch = ids[start:start + batch_size]
        got, conts = _decode_capturing(tgt, batch, max_new_tokens, stop)
        if got is None:   # every row stopped before its stop token was read: read the text once more
            bank = capture_bank(tgt, [x + c for x, c in zip(batch, conts)], [len(x) for x in batch])
            got = [(x + c, {k: bank.states[k][i, :len(x) + len(c)] for k in range(n + 1)})
                   for i, (x, c) in enumerate(zip(batch, conts))]
        for seq, states in got:
            seqs.append(seq)
            per_seq.append(states)
    L = max(map(len, seqs))
    input_ids = torch.zeros(len(seqs), L, dtype=torch.long)
    states = {k: torch.zeros(len(seqs), L, per_seq[0][k].shape[-1], dtype=per_seq[0][k].dtype) for k in range(n + 1)}
    for i, (seq, mine) in enumerate(zip(seqs, per_seq)):   # right padding, as capture_bank's
        input_ids[i, :len(seq)] = torch.tensor(seq)
        for k in range(n + 1):
            states[k][i, :len(seq)] = mine[k]
    states[FINAL_NORMED] = head.normed(states[n].to(tgt.device)).cpu()
    lengths = [len(s) for s in seqs]
    top1 = torch.zeros(len(seqs), L, dtype=torch.long)
    for i, length in enumerate(lengths):   # the LM head row by row: [T, vocab] logits at a time
        top1[i, :length] = head.logits(states[FINAL_NORMED][i:i + 1, :length].to(tgt.device)).argmax(-1).cpu()
    return StateBank(input_ids, lengths, check_prompt_lens([len(x) for x in ids], lengths), states, top1, head, n,
                     source=f"live target {tgt.arch}")


def _decode_capturing(tgt, batch: list[list[int]], max_new_tokens: int, stop: set[int]):
    """([(prompt + continuation, {k: [T, H]})], continuations) for one left-padded batch; the first is None
    when a kept token was never read (every row stopped before the last)."""
    config = greedy_config(max_new_tokens + 1, stop)   # one more: the last kept token is read by a step
    width, pad = max(len(x) for x in batch), config.pad_token_id
    x = torch.tensor([[pad] * (width - len(r)) + r for r in batch], device=tgt.device)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in batch], device=tgt.device)
    forwards: list[dict] = []
    with ResidCapture(tgt.model, range(tgt.num_layers + 1), offload="cpu") as cap:
        # each forward generate makes (the prefill, then one per new token): its states, kept in order
        hook = cap.stack.register_forward_hook(lambda *_: forwards.append(dict(cap.states)))
        try:
            out = tgt.model.generate(input_ids=x, attention_mask=mask, generation_config=config)[:, width:].tolist()
        finally:
            hook.remove()
    conts = []
    for row in out:
        row = row[:max_new_tokens]
        end = next((i + 1 for i, t in enumerate(row) if t in stop), len(row))
        conts.append(row[:end])
    read = width + len(forwards) - 1          # positions the forwards covered (the prefill is `width` wide)
    if any(width + len(c) > read for c in conts):
        return None, conts
    joined = {k: torch.cat([f[k] for f in forwards], dim=1) for k in forwards[0]}   # [B, read, H]
    return [(r + c, {k: s[i, width - len(r):width + len(c)] for k, s in joined.items()})
            for i, (r, c) in enumerate(zip(batch, conts))], conts
