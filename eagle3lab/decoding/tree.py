"""EAGLE-2/3 draft trees: grow candidates by cumulative log-probability, verify them in one pass.

Growing (what SGLang's EAGLE worker does with ``--speculative-eagle-topk K`` and ``--speculative-num-steps S``):
the first draft forward gives the K best tokens (depth 1); each of the S-1 further forwards feeds the
K current frontier nodes at once, each attending to the committed prefix plus its own ancestors, and
proposes K children per node; the K best of those K*K children (by cumulative log-probability) form
the next frontier. The pool holds ``K + (S-1)*K*K`` candidates (facts section 6); the
``num_draft_tokens - 1`` best by cumulative log-probability go to the target. A child never scores
above its parent (log-probabilities are <= 0), so the best-n set always contains every ancestor of
its members: the selected nodes form a tree rooted at the last committed token.

Verifying: the target reads ``[root, node_1, ...]`` at positions ``prefix + depth`` with a 4D mask in
which each node sees the prefix, its ancestors and itself (``tree_attention_mask``). Attention and
RoPE then give every node exactly the logits of its own root-to-node path.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class DraftTree:
    """Selected draft nodes in verify order (parents before children). Index -1 is the root."""

    tokens: list[int]        # target ids
    parents: list[int]       # index of each node's parent in this list, -1 for children of the root
    depths: list[int]        # 1 = child of the root
    scores: list[float]      # cumulative draft log-probability of the root-to-node path
    pool_size: int           # candidates the selection chose from

    @property
    def children(self) -> dict[int, list[int]]:
        """parent index (-1 = root) -> its children, best score first."""
        out: dict[int, list[int]] = {}
        for i, p in enumerate(self.parents):
            out.setdefault(p, []).append(i)
        for kids in out.values():
            kids.sort(key=lambda i: -self.scores[i])
        return out

    @property
    def max_depth(self) -> int:
        return max(self.depths, default=0)


def path_to_root(parents: list[int], node: int) -> list[int]:
    """``node`` and its ancestors, up to (not including) the root (-1)."""
    path = []
    while node >= 0:
        path.append(node)
        node = parents[node]
    return path


def ancestor_mask(parents: list[int], prefix_len: int, device=None) -> torch.Tensor:
    """Bool ``[n, prefix_len + n]``: node i may see the prefix, its ancestors and itself."""
    n = len(parents)
    allow = torch.zeros(n, prefix_len + n, dtype=torch.bool)
    allow[:, :prefix_len] = True
    for i in range(n):
        allow[i, [prefix_len + j for j in path_to_root(parents, i)]] = True
    return allow.to(device)


def tree_attention_mask(parents: list[int], prefix_len: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """Additive float mask ``[1, 1, n, prefix_len + n]`` for a Hugging Face target (0 = attend).

    ``parents`` uses indices into the verified sequence itself (the root has parent -1). Float, not
    bool, because the eager attention path adds the mask to the scores; SDPA accepts both.
    """
    allow = ancestor_mask(parents, prefix_len, device)
    mask = torch.zeros(allow.shape, dtype=dtype, device=device)
    mask.masked_fill_(~allow, torch.finfo(dtype).min)
    return mask[None, None]


@torch.no_grad()
def grow_tree(draft, cache, first_logits: torch.Tensor, first_hidden: torch.Tensor, *, num_steps: int,
              topk: int, num_nodes: int) -> tuple[DraftTree, int]:
    """Grow and select a draft tree; returns ``(tree, draft_forwards)``.

    ``first_logits`` [draft_vocab] and ``first_hidden`` [H] come from the draft's last committed row
    (position ``cache.seq_len - 1``). The draft cache is extended by the frontier rows of every step;
    the caller crops it back to the committed prefix after verification.
    """
    prefix = cache.seq_len
    device = first_logits.device
    logp = torch.log_softmax(first_logits.float(), dim=-1)
    top = logp.topk(topk)
    # node table: draft-vocab token, parent node (-1 = root), depth, score, cache row once fed
    tok = top.indices.tolist()
    parent = [-1] * topk
    depth = [1] * topk
    score = top.values.tolist()
    row: list[int | None] = [None] * topk
    frontier = list(range(topk))
    frontier_hidden = first_hidden[None].expand(topk, -1)   # state each frontier node is fed with
    forwards = 0
    for step in range(2, num_steps + 1):
        base = cache.seq_len
        for i, node in enumerate(frontier):
            row[node] = base + i
        allow = torch.zeros(len(frontier), base + len(frontier), dtype=torch.bool)
        allow[:, :prefix] = True
        for i, node in enumerate(frontier):
            allow[i, [row[j] for j in path_to_root(parent, node)]] = True
        ids = draft.to_target_ids(torch.tensor(tok, device=device)[frontier])
        pos = torch.full((1, len(frontier)), prefix - 1 + step - 1, device=device)
        out = draft(ids[None], recycled_hidden=frontier_hidden[None], position_ids=pos,
                    attention_mask=allow.to(device)[None, None], cache=cache)
        forwards += 1
        child = torch.log_softmax(out.logits[0].float(), dim=-1).topk(topk)        # [F, K]
        cand = (torch.tensor([score[n] for n in frontier], device=device)[:, None] + child.values).flatten()
        first_new = len(tok)
        for i, node in enumerate(frontier):
            for j in range(topk):
                tok.append(int(child.indices[i, j]))
                parent.append(node)
                depth.append(step)
                score.append(float(cand[i * topk + j]))
                row.append(None)
        best = cand.topk(topk).indices                                              # next frontier
        frontier = [first_new + int(b) for b in best]
        frontier_hidden = out.hidden[0][best // topk]
    # best num_nodes by score; ties go to the shallower node so that parents are never dropped
    order = sorted(range(len(tok)), key=lambda n: (-score[n], depth[n], n))[:num_nodes]
    order.sort(key=lambda n: (depth[n], n))
    index = {n: i for i, n in enumerate(order)}
    ids = draft.to_target_ids(torch.tensor([tok[n] for n in order], device=device)).tolist()
    tree = DraftTree(tokens=ids, parents=[index[parent[n]] if parent[n] >= 0 else -1 for n in order],
                     depths=[depth[n] for n in order], scores=[score[n] for n in order], pool_size=len(tok))
    return tree, forwards
