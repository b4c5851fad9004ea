"""How many tokens one SGLang verify step reads for (steps, topk, draft tokens): the one home of the rule.

- A chain (topk 1): SGLang sets ``num_draft_tokens := num_steps + 1`` whatever was written, and says
  so in one log line (``ADJUSTED_LOG``; server_args.py / arg_groups/speculative_hook.py, every
  version read). The seed case's ``--speculative-num-steps 1 ... --speculative-num-draft-tokens 16``
  verifies 2 tokens.
- A tree (topk > 1): the draft grows ``topk`` candidates at its first step and ``topk^2`` at each later
  one; the best ``num_draft_tokens - 1`` of that pool are verified with the root
  (``eagle_utils.py organize_draft_results``). Asking for more than the pool fails at the first
  decode (``torch.topk``: selected index k out of range); SGLang checks it at start-up only in
  adaptive mode (PR #24054).

The flag resolver (``eagle3lab.engines.flags.sglang``) and the tree decoder
(``eagle3lab.decoding.speculative``) both read this module.
"""

from __future__ import annotations

from dataclasses import dataclass

ADJUSTED_LOG = ("speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
                "speculative_eagle_topk == 1")
POOL_RULE = "python/sglang/srt/speculative/eagle_utils.py organize_draft_results"


def pool_size(num_steps: int, topk: int) -> int:
    """SGLang's tree candidate pool: topk at the first step, topk^2 at each later one."""
    return topk + (num_steps - 1) * topk * topk


@dataclass(frozen=True)
class VerifyWidth:
    """What SGLang verifies for one (steps, topk, written draft tokens)."""

    num_draft_tokens: int | None   # tokens per verify step, root included (None: a tree left it unset)
    adjusted_from: int | None      # a chain's written value that SGLang replaced by steps + 1
    pool: int | None               # a tree's candidate pool

    @property
    def over_pool(self) -> bool:
        """A tree asks for more candidates than its pool holds (fails at the first decode)."""
        return self.pool is not None and self.num_draft_tokens is not None and self.num_draft_tokens - 1 > self.pool


def verify_width(num_steps: int, topk: int, num_draft_tokens: int | None) -> VerifyWidth:
    """SGLang's verify width for ``num_steps`` >= 1 and ``topk`` >= 1 (``num_draft_tokens`` as written)."""
    if topk == 1:
        used = num_steps + 1
        changed = num_draft_tokens is not None and num_draft_tokens != used
        return VerifyWidth(used, num_draft_tokens if changed else None, None)
    return VerifyWidth(num_draft_tokens, None, pool_size(num_steps, topk))
