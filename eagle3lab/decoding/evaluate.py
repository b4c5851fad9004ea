"""Offline acceptance: one target pass plus k draft passes over a dataset, no generation.

For a greedy chain the decoding loop accepts draft position k at anchor t iff the draft's top-1
equals the target's argmax *given that positions 1..k-1 matched*. When they matched, the draft read
exactly the true tokens, so the loop's decision is a teacher-forced computation:

    pass 1   rows (f_t, x_{t+1}) at position t, causal over pass 1       -> predicts x_{t+2}
    pass k   rows (h_{k-1,t}, x_{t+k}) at position t+k-1, attending to pass-1 rows <= t and to
             row t of passes 2..k (the same cache the loop builds while drafting) -> x_{t+k+1}

with ``h_{k-1,t}`` the draft's recycled state from pass k-1 (the profile's recurrence) and the
target's argmax ``g`` from the one target pass as the reference. On text the target itself wrote
greedily (``greedy_dataset``) this reproduces the loop round by round (``OfflineEval.replay``);
averaged over every anchor (``OfflineEval.stats``) it is the low-variance estimate that the
diagnosis tools search with. The two can differ by several percent either way: the loop only
visits the anchors right after each rejection, a biased subset of all positions. SpecForge's training metric ``acc_i`` (``specforge_acc``) is the same
match at depth i *without* the condition on earlier depths (SpecForge ``OnlineEagle3Model``: top-1
agreement per TTT step over loss-masked positions).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import torch
from tqdm.auto import tqdm

from eagle3lab.decoding.speculative import draft_for, eos_ids, greedy_config, prompt_ids, target_greedy
from eagle3lab.engines.acceptance import AcceptanceStats, acceptance_stats, simulated_acc_len
from eagle3lab.errors import bad_input
from eagle3lab.models.target import as_target


def pass_mask(rows: int, k: int, device=None, window: tuple[int, int] | None = None) -> torch.Tensor:
    """Bool ``[1, 1, rows, k*rows]`` for pass k >= 2: pass-1 rows <= t, and row t of passes 2..k.

    ``window`` (t0, t1): passes 2..k hold only rows t0..t1-1, so the mask is ``[1, 1, W, rows + (k-1)*W]``
    (W = t1 - t0): row t0 + i attends pass-1 rows <= t0 + i and row i of each later pass."""
    t0, t1 = window or (0, rows)
    w = t1 - t0
    allow = torch.zeros(w, rows + (k - 1) * w, dtype=torch.bool, device=device)
    allow[:, :rows] = torch.ones(rows, rows, dtype=torch.bool, device=device).tril()[t0:t1]
    eye = torch.eye(w, dtype=torch.bool, device=device)
    for j in range(1, k):
        allow[:, rows + (j - 1) * w:rows + j * w] = eye
    return allow[None, None]


def draft_passes(draft, input_ids: torch.Tensor, aux: torch.Tensor, num_steps: int, pad_id: int = 0,
                 skip_fc: bool = False, logits_at: torch.Tensor | None = None) -> list:
    """Teacher-forced unroll: ``num_steps`` draft passes -> list of ``DraftOutput`` (pass k at index k-1).

    ``input_ids`` [B, L] and ``aux`` [B, L, F] (fc input at every position). Row t of pass k reads
    token ``x_{t+k}`` (``pad_id`` past the end; such rows are never attended by valid ones). Runs
    with gradients when enabled, so a trainer can use it for multi-step (TTT-style) losses.
    ``skip_fc``: pass 1 reads ``aux`` [B, L, H] as a state past fc, as SGLang's plain EAGLE path
    does when the fed state is as wide as the draft (sglang#21272). ``logits_at`` ([B, L-1] bool): every
    pass's logits only at those rows, ``[N, V]`` (the draft's ``logits_at``); passes 2.. then run only on the
    window t0..t1-1 of rows that holds them (a later pass's row is attended by no other row: nothing else
    needs it), so their ``hidden`` is ``[B, W, H]``, and pass 1 computes only keys and values at the rows
    before t0 (later rows attend them; nothing else reads them), so its ``hidden`` starts at row t0 (for a
    length-dependent RoPE whose frequencies those shorter forwards would change, every pass runs on every row).
    """
    from eagle3lab.models.draft import DraftCache

    B, L = input_ids.shape
    rows = L - 1
    if rows < 1:
        raise bad_input("sequences", None, "at least 2 tokens per sequence", L)
    cache = DraftCache()
    key = "recycled_hidden" if skip_fc else "aux_hidden_states"
    t0, t1, at = 0, rows, logits_at
    if logits_at is not None:
        used = logits_at.any(0).nonzero().flatten()
        w0, w1 = (int(used[0]), int(used[-1]) + 1) if len(used) else (0, 1)
        # a RoPE that depends on the length (dynamic, longrope) picks its frequencies per forward: rows are
        # left out only where every shorter forward picks the same set as the passes over every row
        ends = [(w0, rows)] + [(w1 + k - 1, rows + k - 1) for k in range(2, num_steps + 1)]
        if all(draft.rope.regime(a) == draft.rope.regime(b) for a, b in ends):
            t0, t1, at = w0, w1, logits_at[:, w0:w1]
    if t0 > 0:   # rows before the first logit read (the prompt): only their keys and values are ever used
        draft(input_ids[:, 1:t0 + 1], **{key: aux[:, :t0]}, cache=cache, keys_only=True)
    outs = [draft(input_ids[:, t0 + 1:], **{key: aux[:, t0:-1]}, cache=cache,
                  logits_at=None if logits_at is None else logits_at[:, t0:])]
    pad = torch.full((B, num_steps), pad_id, dtype=input_ids.dtype, device=input_ids.device)
    ids_ext = torch.cat([input_ids, pad], dim=1)
    recycled = outs[-1].hidden[:, :t1 - t0]
    for k in range(2, num_steps + 1):
        pos = (torch.arange(t0, t1, device=input_ids.device) + k - 1)[None]
        mask = pass_mask(rows, k, input_ids.device, window=(t0, t1) if logits_at is not None else None)
        outs.append(draft(ids_ext[:, k + t0:k + t1], recycled_hidden=recycled, position_ids=pos,
                          attention_mask=mask, cache=cache, logits_at=at))
        recycled = outs[-1].hidden
    return outs


@dataclass
class OfflineEval:
    """Per-anchor greedy-chain acceptance from teacher forcing.

    ``matches`` [B, R, K] bool: draft top-1 == target argmax at depth k for anchor row t (row t's
    first draft predicts position t+2). ``valid`` [B, R, K]: that position exists in the sequence.
    ``prompt_lens``: rows before ``prompt_len - 1`` are prompt-internal and excluded from ``stats``.
    """

    num_steps: int
    matches: torch.Tensor
    valid: torch.Tensor
    lengths: list[int]
    prompt_lens: list[int]

    @property
    def accept_lengths(self) -> torch.Tensor:
        """[B, R] accepted drafts per anchor (leading matches); -1 where not all K depths exist."""
        acc = self.matches.long().cumprod(-1).sum(-1)
        return torch.where(self.valid.all(-1), acc, torch.full_like(acc, -1))

    def _anchors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(batch, row) of every anchor after the prompt whose K draft positions lie inside the sequence."""
        rows = torch.arange(self.valid.shape[1])[None]
        start = torch.tensor([max(p - 1, 0) for p in self.prompt_lens])[:, None]
        return torch.nonzero(self.valid.all(-1) & (rows >= start), as_tuple=True)

    @property
    def stats(self) -> AcceptanceStats:
        """Acceptance over every anchor after the prompt (all K positions inside the sequence)."""
        b, t = self._anchors()
        if len(b) == 0:
            raise bad_input("sequences", None, f"continuations longer than num_steps={self.num_steps} tokens",
                            "none", "Give longer sequences (prompt + target continuation).")
        return acceptance_stats(self.accept_lengths[b, t].tolist(), num_positions=self.num_steps)

    @property
    def specforge_acc(self) -> list[float]:
        """SpecForge ``acc_i``: unconditional top-1 agreement at depth i over the same anchors."""
        b, t = self._anchors()
        return self.matches[b, t].float().mean(0).tolist() if len(b) else [float("nan")] * self.num_steps

    @property
    def specforge_simulated_acc_len(self) -> float:
        return simulated_acc_len(self.specforge_acc)

    def replay(self, max_new_tokens: int | None = None) -> AcceptanceStats:
        """Walk the anchors a greedy chain loop visits (anchor t -> t + accepted + 1).

        Exact for text the target wrote greedily from each prompt (same rounds as the loop), as long
        as the sequence extends ``num_steps`` tokens past ``max_new_tokens`` (default: as far as it goes).
        """
        counts = []
        for b, n in enumerate(self.lengths):
            p = self.prompt_lens[b]
            budget = (n - p) if max_new_tokens is None else max_new_tokens
            t = p - 1
            while t + 2 - p < budget:            # tokens emitted so far: x_p .. x_{t+1}
                if not bool(self.valid[b, t].all()):
                    break
                a = int(self.matches[b, t].long().cumprod(0).sum())
                counts.append(a)
                t += a + 1
        return acceptance_stats(counts, num_positions=self.num_steps)

    def to_frame(self) -> pd.DataFrame:
        """Per position: conditional and survival over all anchors, and SpecForge's acc_i."""
        df = self.stats.to_frame()
        df["specforge_acc"] = self.specforge_acc
        return df


@torch.no_grad()
def evaluate_offline(target, draft, sequences, num_steps: int = 5, *, prompt_lens=None, profile=None,
                     batch_size: int = 8, progress: bool = False) -> OfflineEval:
    """Teacher-forced greedy-chain acceptance of ``draft`` (run as ``profile``) on ``sequences``.

    ``sequences``: token-id lists (prompt + continuation). ``prompt_lens`` (default: 1 each) marks
    where the continuation starts; anchors inside the prompt are skipped.
    """
    from eagle3lab.models.capture import ResidCapture, build_fc_input, check_prompt_lens

    tgt = as_target(target)
    d = draft_for(draft, tgt, profile)
    seqs = [list(map(int, s)) for s in sequences]
    if not seqs:
        raise bad_input("sequences", None, "at least one sequence", "none")
    prompt_lens = check_prompt_lens(prompt_lens, [len(s) for s in seqs])
    points, K, dev = list(d.aux_resid), int(num_steps), tgt.device
    Lmax = max(len(s) for s in seqs)
    matches = torch.zeros(len(seqs), Lmax - 1, K, dtype=torch.bool)
    valid = torch.zeros_like(matches)
    batches = range(0, len(seqs), batch_size)
    for start in tqdm(batches, desc="offline eval", disable=not progress):
        chunk = seqs[start:start + batch_size]
        L = max(len(s) for s in chunk)
        ids = torch.zeros(len(chunk), L, dtype=torch.long)
        mask = torch.zeros(len(chunk), L, dtype=torch.long)
        for i, s in enumerate(chunk):          # right padding: real positions never see pads
            ids[i, :len(s)] = torch.tensor(s)
            mask[i, :len(s)] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        with ResidCapture(tgt.model, sorted(set(points)), offload=False) as cap:
            greedy = tgt.model(input_ids=ids, attention_mask=mask, use_cache=False).logits.argmax(-1)
        aux = build_fc_input(cap.states, points).tensor.to(d.fc.weight.dtype)
        outs = draft_passes(d, ids, aux, K)
        R = L - 1
        greedy_ext = torch.cat([greedy, torch.full((len(chunk), K), -1, device=dev, dtype=greedy.dtype)], dim=1)
        lens = torch.tensor([len(s) for s in chunk], device=dev)
        rows = torch.arange(R, device=dev)
        for k, out in enumerate(outs, start=1):
            proposal = d.to_target_ids(out.logits.argmax(-1))               # [b, R] target ids
            # pass k row t proposes position t+k+1; the target's argmax for it sits at index t+k
            matches[start:start + len(chunk), :R, k - 1] = (proposal == greedy_ext[:, k:k + R]).cpu()
            valid[start:start + len(chunk), :R, k - 1] = (rows[None] + k <= lens[:, None] - 1).cpu()
    return OfflineEval(num_steps=K, matches=matches & valid, valid=valid, lengths=[len(s) for s in seqs],
                       prompt_lens=prompt_lens)


def greedy_dataset(target, prompts, max_new_tokens: int = 64, eos_token_id="auto", progress: bool = False,
                   batch_size: int = 1) -> tuple[list[list[int]], list[int]]:
    """Prompts + the target's own greedy continuation -> (sequences, prompt_lens) for ``evaluate_offline``.

    ``batch_size`` > 1 decodes that many prompts at once (``transformers`` ``generate``, left-padded, on the
    attention mask): several times faster on a CPU, where a small target's step is mostly overhead. A padded
    batch runs other matrix shapes, so a near-tie can break the other way than alone: any continuation is
    the target's own text, and the states are captured afterwards from it (``capture_bank``)."""
    tgt = as_target(target)
    ids = [prompt_ids(tgt, p) for p in prompts]
    if batch_size <= 1:
        conts = [target_greedy(tgt, x, max_new_tokens=max_new_tokens, eos_token_id=eos_token_id).tokens
                 for x in tqdm(ids, desc="greedy continuations", disable=not progress)]
    else:
        conts = []
        for start in tqdm(range(0, len(ids), batch_size), desc=f"greedy continuations ({batch_size} at once)",
                          disable=not progress):
            conts += greedy_batch(tgt, ids[start:start + batch_size], max_new_tokens, eos_ids(tgt, eos_token_id))
    return [x + c for x, c in zip(ids, conts)], [len(x) for x in ids]


@torch.inference_mode()
def greedy_batch(tgt, ids: list[list[int]], max_new_tokens: int, stop: set[int]) -> list[list[int]]:
    """Each prompt's greedy continuation, up to and with its first stop token, decoded together."""
    config = greedy_config(max_new_tokens, stop)
    width, pad = max(len(x) for x in ids), config.pad_token_id
    x = torch.tensor([[pad] * (width - len(r)) + r for r in ids], device=tgt.device)
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in ids], device=tgt.device)
    out = tgt.model.generate(input_ids=x, attention_mask=mask, generation_config=config)[:, width:].tolist()
    conts = []
    for row in out:
        end = next((i + 1 for i, t in enumerate(row) if t in stop), len(row))
        conts.append(row[:end])
    return conts


@dataclass
class BankScore:
    """One (wiring, settings) hypothesis scored on a ``StateBank``, per sequence, for bootstrap intervals.

    Anchors as in ``OfflineEval.stats``: after the prompt, all ``num_steps`` positions inside the
    sequence. ``ce_sum[b]`` / ``ce_n[b]``: soft cross-entropy of the draft against the target's
    distribution over the draft vocabulary (renormalised), summed over anchors and passes where the
    target's top-1 lies in the draft vocabulary; ``accept[b]``: leading top-1 matches per anchor.
    """

    num_steps: int
    ce_sum: list[float]
    ce_n: list[int]
    accept: list[list[int]]

    @property
    def ce(self) -> float:
        return sum(self.ce_sum) / max(1, sum(self.ce_n))

    @property
    def stats(self) -> AcceptanceStats:
        return acceptance_stats([a for seq in self.accept for a in seq], num_positions=self.num_steps)

    @property
    def tau_sums(self) -> tuple[list[int], list[int]]:
        """Per sequence: tokens over its rounds (accepted + bonus) and rounds, tau's numerator and denominator."""
        return [sum(a) + len(a) for a in self.accept], [len(a) for a in self.accept]


# hook points the fused fc path passes by (it feeds fc's output where the recycled state enters): with a hook
# on one of them the exact path runs, so the hook sees what it always saw
_FC_HOOKS = ("hook_fc_in", "hook_fc_normed", "hook_fc_out", "hook_recycled_in")


def fc_is_linear(draft) -> bool:
    """fc's output is the sum of its slots' projections for this draft as it runs: no norm before fc
    (``norm_before_fc``, ``fc_norm``: a norm over the whole input or per slot is not linear in a slot) and
    no hook on the way in or out of fc."""
    s = draft.settings
    return not (s.norm_before_fc or s.fc_norm or draft.fc.bias is not None
                or any(draft.hook_points[n].fns for n in _FC_HOOKS if n in draft.hook_points))


def _fc_feed(bank, draft, wiring, fuse_fc: bool):
    """(rows, length) -> (what pass 1 reads, whether it is fc's output already). Fused: the sum of the slots'
    projections cached in the bank (``StateBank.fc_projection``), summed in fp32 and rounded once to the
    draft's dtype, as one fc product is; else the wiring's states side by side, through fc in the draft."""
    from eagle3lab.models.state_bank import FINAL_NORMED

    dev, dtype = draft.fc.weight.device, draft.fc.weight.dtype
    if wiring and fuse_fc and fc_is_linear(draft):
        slots = [bank.fc_projection(draft.fc.weight, i, p) for i, p in enumerate(wiring)]

        def fused(sl, length):
            idx = sl.to(dev)
            h = slots[0][idx, :length]
            for proj in slots[1:]:
                h = h + proj[idx, :length]
            return h.to(dtype), True
        return fused
    aux = bank.fc_input(wiring) if wiring else bank.states[FINAL_NORMED]
    if not wiring and aux.shape[-1] != draft.config.hidden_size:
        raise bad_input("wiring", None, f"aux states for a draft {draft.config.hidden_size} wide",
                        f"no aux states with a {aux.shape[-1]}-wide target state", "fc cannot be skipped here.")
    return lambda sl, length: (aux[sl, :length].to(dev, dtype), not wiring)


@torch.inference_mode()
def evaluate_on_bank(bank, draft, wiring, num_steps: int = 3, batch_size: int = 8, fuse_fc: bool = True) -> BankScore:
    """Teacher-forced chain acceptance and cross-entropy of ``draft`` fed ``wiring`` from ``bank``.

    ``wiring``: bank points in fc order (resid indices or ``FINAL_NORMED``); ``()``: no aux states, the
    final post-norm state fed past fc (the EAGLE algorithm flag on an EAGLE-3 draft). The draft runs
    with its own settings (``draft.rewired(...)`` chooses them); only draft passes run, no target.
    ``fuse_fc``: where fc is linear in each slot (``fc_is_linear``), its output is summed from the bank's
    cached slot projections, computed once per (slot, point) for every wiring a search scores; False
    runs fc on the concatenation (the same numbers up to float rounding; tests hold them within 1e-6).
    """
    K, dev = int(num_steps), draft.fc.weight.device
    vocab_ids = None if draft.d2t is None else draft.to_target_ids(torch.arange(draft.config.draft_vocab_size,
                                                                                device=draft.d2t.device)).cpu()
    p_target = bank.label_probs(vocab_ids)
    feed = _fc_feed(bank, draft, wiring, fuse_fc)
    n_seq = len(bank.lengths)
    ce_sum, ce_n, accept = [0.0] * n_seq, [0] * n_seq, [[] for _ in range(n_seq)]
    by_length = sorted(range(n_seq), key=lambda b: bank.lengths[b])   # batches of similar length: little padding
    for start in range(0, n_seq, batch_size):
        idx = by_length[start:start + batch_size]
        L = max(bank.lengths[b] for b in idx)
        sl = torch.tensor(idx)
        ids = bank.input_ids[sl, :L].to(dev)
        B = len(idx)
        R = L - 1
        pad = torch.full((B, K), -1, dtype=torch.long)
        top_ext = torch.cat([bank.top1[sl, :L], pad], 1).to(dev)
        p_b = p_target[sl, :L].to(dev)
        in_vocab = (torch.ones_like(top_ext, dtype=torch.bool) if draft.t2d is None
                    else draft.t2d[top_ext.clamp(min=0)] & (top_ext >= 0))
        rows = torch.arange(R, device=dev)[None]
        lens = torch.tensor([bank.lengths[b] for b in idx], device=dev)[:, None]
        first = torch.tensor([bank.prompt_lens[b] - 1 for b in idx], device=dev)[:, None]
        anchor = (rows >= first) & (rows + K <= lens - 1)               # [B, R]
        seq, row = anchor.nonzero(as_tuple=True)                         # the anchors, in row order
        lead = torch.ones(len(seq), dtype=torch.long, device=dev)
        n_acc = torch.zeros(len(seq), dtype=torch.long, device=dev)
        ce_b = torch.zeros(B, device=dev)
        n_b = torch.zeros(B, dtype=torch.long, device=dev)
        fc_in, past_fc = feed(sl, L)
        # logits only at the anchors (about a fifth of the rows behind long prompts): the LM head and the
        # cross-entropy over the vocabulary were most of a pass
        for k, out in enumerate(draft_passes(draft, ids, fc_in, K, skip_fc=past_fc, logits_at=anchor), start=1):
            # pass k row t proposes position t+k+1, whose target distribution sits at index t+k (inside the
            # sequence at every anchor)
            hit = draft.to_target_ids(out.logits.argmax(-1)) == top_ext[seq, row + k]
            lead = lead * hit.long()
            n_acc += lead
            ce = -(p_b[seq, row + k] * out.logits.float().log_softmax(-1)).sum(-1)
            used = in_vocab[seq, row + k]
            ce_b.index_add_(0, seq, ce * used)
            n_b.index_add_(0, seq, used.long())
        for j, b in enumerate(idx):
            ce_sum[b], ce_n[b], accept[b] = float(ce_b[j]), int(n_b[j]), n_acc[seq == j].tolist()
    return BankScore(K, ce_sum, ce_n, accept)
