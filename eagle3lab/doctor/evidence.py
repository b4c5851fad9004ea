"""doctor's evidence: the bank of target states over a growing set of prompts.

doctor starts from ``num_prompts`` prompts and, where the candidates it must choose between are still
within noise of each other, adds ``step`` more (decoded and captured only then) up to a cap
(``fix_choice.settle``). A prompt's greedy continuation and its captured states do not depend on the other
prompts in the bank (right padding: real positions never see pads), so a bank over more prompts is the
concatenation of the banks over each part, and a prompt draw over a captured pool is a choice of its rows.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

import torch

from eagle3lab.models.state_bank import StateBank


def draw_prompts(prompts: list, seed: int | None) -> list:
    """The prompts in the order doctor takes them: as given (``seed`` None), else a seeded shuffle."""
    order = list(prompts)
    if seed is not None:
        random.Random(seed).shuffle(order)
    return order


def _pad(t: torch.Tensor, length: int) -> torch.Tensor:
    if t.shape[1] >= length:
        return t[:, :length]
    shape = (t.shape[0], length - t.shape[1], *t.shape[2:])
    return torch.cat([t, t.new_zeros(shape)], dim=1)


def take_rows(bank: StateBank, rows) -> StateBank:
    """The bank over the sequences ``rows`` (in that order), cropped to their longest."""
    rows = list(rows)
    idx = torch.tensor(rows)
    length = max(bank.lengths[r] for r in rows)
    return replace(bank, input_ids=bank.input_ids[idx, :length], lengths=[bank.lengths[r] for r in rows],
                   prompt_lens=[bank.prompt_lens[r] for r in rows], top1=bank.top1[idx, :length],
                   states={k: v[idx, :length] for k, v in bank.states.items()}, _labels={})


def join_banks(first: StateBank, second: StateBank) -> StateBank:
    """One bank over the sequences of both (the same target and points)."""
    if set(first.states) != set(second.states) or first.num_layers != second.num_layers:
        raise ValueError("join_banks: the banks hold other points or come from other targets")
    length = max(first.input_ids.shape[1], second.input_ids.shape[1])
    cat = lambda a, b: torch.cat([_pad(a, length), _pad(b, length)], dim=0)
    return replace(first, input_ids=cat(first.input_ids, second.input_ids), lengths=first.lengths + second.lengths,
                   prompt_lens=first.prompt_lens + second.prompt_lens, top1=cat(first.top1, second.top1),
                   states={k: cat(v, second.states[k]) for k, v in first.states.items()}, _labels={})


@dataclass
class Evidence:
    """The bank doctor measures on and how to grow it: the rest of the prompt pool and what decodes it.

    ``more(k)`` returns the bank over ``k`` more prompts (None when the pool or the source is exhausted: a
    dump holds only its own sequences)."""

    bank: StateBank
    pool: list = field(default_factory=list)          # prompts not yet in the bank, in draw order
    decode: object = None                             # prompts -> StateBank of their greedy continuations
    pool_bank: StateBank | None = None                # a captured pool: rows not yet used, in draw order
    pool_rows: list = field(default_factory=list)

    @property
    def num_prompts(self) -> int:
        return len(self.bank.lengths)

    def can_grow(self) -> bool:
        return bool(self.pool_rows) or (bool(self.pool) and self.decode is not None)

    def more(self, k: int) -> StateBank | None:
        if self.pool_bank is not None and self.pool_rows:
            rows, self.pool_rows = self.pool_rows[:k], self.pool_rows[k:]
            extra = take_rows(self.pool_bank, rows)
        elif self.pool and self.decode is not None:
            prompts, self.pool = self.pool[:k], self.pool[k:]
            extra = self.decode(prompts)
        else:
            return None
        self.bank = join_banks(self.bank, extra)
        return self.bank


def from_pool_bank(pool_bank: StateBank, num_prompts: int, seed: int | None = None) -> Evidence:
    """Evidence over rows of an already captured pool (a test's or a benchmark's shared capture): the draw
    ``seed`` orders the rows, the first ``num_prompts`` start, the others can be added."""
    rows = draw_prompts(list(range(len(pool_bank.lengths))), seed)
    return Evidence(take_rows(pool_bank, rows[:num_prompts]), pool_bank=pool_bank, pool_rows=rows[num_prompts:])
