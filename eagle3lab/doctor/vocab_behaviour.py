"""The draft vocabulary's map (d2t) and the target's labels, read from the draft's behaviour on a bank of
target states: slots that point at the wrong tokens (a regenerated, absolute or missing map), and a draft
trained on the target's distribution without its final norm."""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass

import pandas as pd
import torch

from eagle3lab.doctor.findings import doctor_finding
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio_difference
from eagle3lab.errors import bad_input
from eagle3lab.findings import Finding
from eagle3lab.models.state_bank import FINAL_NORMED, StateBank


@dataclass
class VocabCheck:
    """Per draft-vocabulary slot: how often the draft chose it (first pass, teacher-forced), how often the
    target's top-1 was the token the map sends it to, and which target token it most often was."""

    table: pd.DataFrame          # slot, mapped, chosen, agree, mode, mode_count, suspect
    suspects: list[int]
    min_count: int

    @property
    def checked(self) -> int:
        return int((self.table.mode_count >= self.min_count).sum())

    def suggested_d2t(self, d2t: torch.Tensor) -> torch.Tensor:
        """``d2t`` with each suspect slot pointed at the token the target agreed with (offsets: id - slot)."""
        fixed = d2t.clone()
        for s in self.suspects:
            fixed[s] = int(self.table.loc[s, "mode"]) - s
        return fixed


@torch.inference_mode()
def vocab_from_behaviour(bank: StateBank, draft, wiring, *, sequences=None, min_count: int = 3,
                         ratio: float = 4.0) -> VocabCheck:
    """Which draft-vocabulary slots point at the wrong target tokens, read from behaviour.

    ``draft`` runs with its own settings on ``wiring`` over the bank's ``sequences`` (default all). A
    slot is *suspect* when the target's top-1, at the positions the draft chose it, was one other token
    at least ``min_count`` times and at least ``ratio`` times as often as the mapped token, and that
    token is also the most common one in each half of the sequences (odd and even): the draft means it
    by this slot, the map sends it elsewhere. A weak draft's honest confusions agree with the mapped
    token some of the time and scatter; a slot pointed at an unrelated token almost never agrees.
    Slots chosen too rarely are not checked (``VocabCheck.checked`` counts the others).
    """
    rows_of = list(range(len(bank.lengths))) if sequences is None else sorted(sequences)
    half_of = {b: k % 2 for k, b in enumerate(rows_of)}
    halves: tuple[dict, dict] = ({}, {})             # slot -> Counter of the target's top-1, per half
    for b, slots in _first_pass(bank, draft, wiring, rows_of).items():
        truth = bank.top1[b, 1:bank.lengths[b]].tolist()      # row t proposes position t + 2, labelled at t + 1
        for s, y in zip(slots, truth):
            halves[half_of[b]].setdefault(s, Counter())[y] += 1
    n_slots = draft.config.draft_vocab_size
    mapped = draft.to_target_ids(torch.arange(n_slots, device=draft.fc.weight.device)).cpu().tolist()
    rows = []
    for s in range(n_slots):
        parts = [h.get(s, Counter()) for h in halves]
        seen = parts[0] + parts[1]
        chosen = sum(seen.values())
        mode, mode_count = seen.most_common(1)[0] if seen else (-1, 0)
        agree = seen.get(mapped[s], 0)
        replicated = all(p and p.most_common(1)[0][0] == mode for p in parts)
        suspect = (mode != mapped[s] and mode_count >= min_count and mode_count >= ratio * max(agree, 0.5)
                   and replicated)
        rows.append({"slot": s, "mapped": mapped[s], "chosen": chosen, "agree": agree, "mode": mode,
                     "mode_count": mode_count, "suspect": suspect})
    table = pd.DataFrame(rows).set_index("slot")
    return VocabCheck(table, [int(s) for s in table.index[table.suspect]], min_count)


@torch.inference_mode()
def _first_pass(bank: StateBank, draft, wiring, rows, batch_size: int = 2) -> dict[int, list[int]]:
    """Sequence -> the draft's first-pass top-1 slot at every row (teacher-forced, ``wiring`` from ``bank``)."""
    from eagle3lab.decoding.evaluate import draft_passes

    dev, dtype = draft.fc.weight.device, draft.fc.weight.dtype
    aux = bank.fc_input(wiring) if wiring else bank.states[FINAL_NORMED]
    out = {}
    for start in range(0, len(rows), batch_size):
        idx = list(rows[start:start + batch_size])
        L = max(bank.lengths[b] for b in idx)
        sl = torch.tensor(idx)
        first = draft_passes(draft, bank.input_ids[sl, :L].to(dev), aux[sl, :L].to(dev, dtype), 1, skip_fc=not wiring)[0]
        slots = first.logits.argmax(-1).cpu()
        for j, b in enumerate(idx):
            out[b] = slots[j, :bank.lengths[b] - 1].tolist()
    return out


def prenorm_labels_check(bank: StateBank, draft, wiring) -> tuple[Interval, float, float]:
    """speculators#313: was the draft trained on the target's distribution built from pre-final-norm states?

    Compares, over the same positions, how often the draft's first proposal equals the target's real
    top-1 (from the final post-norm state) and the top-1 of ``lm_head(resid[N])`` without the norm.
    Returns the paired difference (pre-norm minus real agreement, bootstrap over prompts) and both rates.
    """
    n = bank.num_layers
    if n not in bank.states:
        raise bad_input("bank", f"resid[{n}]", "the last layer's output (every dump holds it)", "absent")
    rows = list(range(len(bank.lengths)))
    choice = _first_pass(bank, draft, wiring, rows)
    real, pre, count = [], [], []
    ids = torch.arange(draft.config.draft_vocab_size, device=draft.fc.weight.device)
    mapped = draft.to_target_ids(ids).cpu()
    for b in rows:
        L = bank.lengths[b]
        raw = bank.head.logits(bank.states[n][b:b + 1, 1:L].float())[0].argmax(-1).cpu()
        proposed = mapped[torch.tensor(choice[b])]
        real.append(float((proposed == bank.top1[b, 1:L]).sum()))
        pre.append(float((proposed == raw).sum()))
        count.append(float(L - 1))
    diff = bootstrap_ratio_difference(pre, count, real, count)
    return diff, sum(real) / sum(count), sum(pre) / sum(count)


def t2d_of(d2t: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """The ``t2d`` mask a ``d2t`` of offsets implies (target ids ``i + d2t[i]`` marked), order kept as is."""
    t2d = torch.zeros(vocab_size, dtype=torch.bool, device=d2t.device)
    t2d[torch.arange(len(d2t), device=d2t.device) + d2t] = True
    return t2d


@contextlib.contextmanager
def vocab_map(draft, d2t: torch.Tensor):
    """Run ``draft`` with another ``d2t`` (offsets) inside the block; ``t2d`` follows."""
    old_d2t, old_t2d = draft.d2t.clone(), draft.t2d.clone()
    try:
        draft.d2t.copy_(d2t)
        draft.t2d.copy_(t2d_of(d2t, len(old_t2d)))
        yield draft
    finally:
        draft.d2t.copy_(old_d2t)
        draft.t2d.copy_(old_t2d)


def absolute_ids(draft, where) -> Finding | None:
    """verl-SpeCo#67: d2t written as absolute target ids, not offsets. When ``i + d2t[i]`` leaves the target
    vocabulary but ``d2t[i] - i`` is a valid offset map, the draft's map is rewritten in place (it is this
    process's copy) and the finding says so; a map that is neither stops doctor with a clear error."""
    if draft.d2t is None:
        return None
    vocab = draft.config.vocab_size
    slots = torch.arange(len(draft.d2t), device=draft.d2t.device)
    mapped = slots + draft.d2t
    if bool(((mapped >= 0) & (mapped < vocab)).all()):
        return None
    ids = draft.d2t                     # read as absolute target ids
    offsets = ids - slots
    if not (bool(((ids >= 0) & (ids < vocab)).all()) and bool((ids[1:] > ids[:-1]).all())):
        raise bad_input(where, "d2t", f"offsets with i + d2t[i] in 0..{vocab - 1}",
                        f"{int(((mapped < 0) | (mapped >= vocab)).sum())} slots outside the vocabulary",
                        "Neither offsets nor absolute ids: restore the map the draft was trained with.")
    bad = int(((mapped < 0) | (mapped >= vocab)).sum())
    with torch.no_grad():
        draft.t2d.copy_(t2d_of(offsets, vocab))
        draft.d2t.copy_(offsets)
    return doctor_finding("VOCAB_ABSOLUTE_IDS", "critical", "d2t holds absolute target ids, not offsets",
                          f"{where}: i + d2t[i] leaves the {vocab}-token vocabulary at {bad} of {len(slots)} slots, "
                          "while d2t[i] read as the target id is a valid increasing map (verl-SpeCo#67)",
                          "write d2t[i] = target_id[i] - i (--write-fixed does it)", "vocab")


def crossfit_vocab(bank: StateBank, draft, state: dict, before) -> Interval:
    """Gain of the map read from behaviour, each half of the prompts scored with the map read from the
    other half (reading and scoring on the same prompts would favour any change); paired with ``before`` (a
    ``doctor.Rung``: its chain length and per-prompt scores)."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank

    wiring = state["wiring"] if state["aux"] else ()
    view = draft.rewired(**state["variant"])
    seqs = list(range(len(bank.lengths)))
    folds = (seqs[0::2], seqs[1::2])
    num, den = [0] * len(seqs), [0] * len(seqs)
    for read, scored in (folds, folds[::-1]):
        found = vocab_from_behaviour(bank, view, wiring, sequences=read)
        with vocab_map(view, found.suggested_d2t(draft.d2t)):
            score = evaluate_on_bank(bank, view, wiring, before.num_steps, batch_size=2)
        n_b, d_b = score.tau_sums
        for b in scored:
            num[b], den[b] = n_b[b], d_b[b]
    return bootstrap_ratio_difference(num, den, *before.score.tau_sums)
