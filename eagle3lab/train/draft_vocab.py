"""The draft vocabulary: the most frequent target tokens, as ``d2t`` offsets and a ``t2d`` mask.

Conventions every engine reads (facts §4): ``d2t`` is int64 of length ``draft_vocab_size`` holding
OFFSETS (target id = i + d2t[i]); ``t2d`` is bool of length ``vocab_size`` marking the chosen
tokens; the chosen ids are sorted ascending. Ties in frequency go to the smaller id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class DraftVocab:
    d2t: torch.Tensor  # int64 [draft_vocab_size], offsets
    t2d: torch.Tensor  # bool  [vocab_size]
    coverage: float    # share of the counted tokens that fall in the draft vocabulary

    @property
    def draft_ids(self) -> torch.Tensor:
        """Target id of each draft id (ascending)."""
        return torch.arange(len(self.d2t)) + self.d2t


def token_counts(token_streams, vocab_size: int) -> np.ndarray:
    counts = np.zeros(vocab_size, dtype=np.int64)
    for ids in token_streams:
        counts += np.bincount(np.asarray(ids, dtype=np.int64), minlength=vocab_size)[:vocab_size]
    return counts


def select_draft_vocab(counts, draft_vocab_size: int) -> DraftVocab:
    """Top ``draft_vocab_size`` tokens by count -> (d2t offsets, t2d mask)."""
    counts = np.asarray(counts, dtype=np.int64)
    vocab_size = len(counts)
    if not 0 < draft_vocab_size <= vocab_size:
        raise ValueError(f"draft_vocab_size must be in 1..{vocab_size} (the target vocabulary), "
                         f"found {draft_vocab_size}")
    # Stable sort on -count: equal counts keep ascending id order, so the choice is deterministic.
    chosen = np.sort(np.argsort(-counts, kind="stable")[:draft_vocab_size])
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[torch.from_numpy(chosen)] = True
    d2t = torch.from_numpy(chosen) - torch.arange(draft_vocab_size)
    coverage = float(counts[chosen].sum() / max(1, counts.sum()))
    return DraftVocab(d2t=d2t.to(torch.int64), t2d=t2d, coverage=coverage)


def check_draft_vocab(d2t: torch.Tensor, t2d: torch.Tensor) -> None:
    """The invariants of facts §4; raises ValueError naming the first one broken."""
    ids = torch.arange(len(d2t)) + d2t
    if int(t2d.sum()) != len(d2t):
        raise ValueError(f"t2d marks {int(t2d.sum())} tokens but d2t has {len(d2t)} entries")
    if len(ids) > 1 and not bool((ids[1:] > ids[:-1]).all()):
        raise ValueError("arange + d2t is not strictly increasing (absolute ids stored as offsets?)")
    if int(ids.min()) < 0 or int(ids.max()) >= len(t2d):
        raise ValueError(f"arange + d2t leaves the target vocabulary 0..{len(t2d) - 1}")
    if not bool(t2d[ids].all()):
        raise ValueError("t2d is False at some target id that d2t maps to")
