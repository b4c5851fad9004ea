"""Target features captured once and reused across epochs, for training a draft against a target
that costs more per step than the draft does (a real 30-layer target on this CPU: 3 s for a 4 x 512
forward, against 2 s for the draft's training step).

For a fixed set of training windows the cache holds what every TTT step reads from the target: the
fc input in the draft's order (fp16), the target's final-norm output (fp16; its logits over any
vocabulary are ``normed @ lm_head[ids].T``, so the draft vocabulary's share is recomputed cheaply)
and its top-1 over the full vocabulary (for the skip rule and the agreement count). One
safetensors file plus its metadata, written atomically; batches are drawn from it as a function of
the step, so a resumed run continues exactly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from eagle3lab.atomic import atomic_file
from eagle3lab.errors import bad_input
from eagle3lab.models.capture import ResidCapture, concat_aux
from eagle3lab.train.loop import batch_at

FORMAT = "eagle3lab-feature-cache/1"


@dataclass
class FeatureCache:
    windows: torch.Tensor     # [W, T] int64: the token windows
    aux: torch.Tensor         # [W, T, num_aux * H] fp16: the fc input, in aux_resid order
    normed: torch.Tensor      # [W, T, H] fp16: the target's final-norm output
    top1: torch.Tensor        # [W, T] int64: the target's argmax over its full vocabulary
    aux_resid: tuple[int, ...]
    loss_mask: torch.Tensor | None = None   # [W, T] bool: positions the loss counts (chat: the answers)

    def batch(self, step: int, batch_size: int, seed: int) -> torch.Tensor:
        """Window indices of step ``step``: a pure function of (seed, step), like ``loop.batch_at``."""
        g = torch.Generator().manual_seed(seed * 1_000_003 + step)
        return torch.randint(0, len(self.windows), (batch_size,), generator=g)

    def labels(self, index: torch.Tensor, lm_rows: torch.Tensor, device="cpu"):
        """``(input_ids, fc_in, label_logits, target_top, loss_mask or None)`` for those windows; ``lm_rows``:
        the target's LM-head rows of the draft vocabulary ([draft_vocab, H]), so label_logits are
        [B, T, draft_vocab]."""
        normed = self.normed[index].to(device).float()
        mask = None if self.loss_mask is None else self.loss_mask[index].to(device)
        return (self.windows[index].to(device), self.aux[index].to(device).float(),
                normed @ lm_rows.to(device).float().T, self.top1[index].to(device), mask)

    def save(self, path) -> Path:
        path = Path(path)
        meta = {"format": FORMAT, "aux_resid": json.dumps(list(self.aux_resid))}
        with atomic_file(path) as tmp:
            tensors = {"windows": self.windows, "aux": self.aux, "normed": self.normed, "top1": self.top1}
            if self.loss_mask is not None:
                tensors["loss_mask"] = self.loss_mask
            save_file(tensors, str(tmp), metadata=meta)
        return path


def load_features(path) -> FeatureCache:
    """A cache written by ``FeatureCache.save`` (safetensors: nothing is unpickled)."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise bad_input(path, None, "a feature cache (.safetensors)", "no such file")
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    if meta.get("format") != FORMAT:
        raise bad_input(path, "format", FORMAT, meta.get("format"), "Capture it with capture_features().")
    t = load_file(str(path))
    return FeatureCache(t["windows"], t["aux"], t["normed"], t["top1"], tuple(json.loads(meta["aux_resid"])),
                        t.get("loss_mask"))


@torch.no_grad()
def capture_features(target, stream: np.ndarray | None, aux_resid, num_windows: int, seq_len: int, seed: int = 0,
                     batch_size: int = 4, progress: bool = True, windows: torch.Tensor | None = None,
                     loss_mask: torch.Tensor | None = None) -> FeatureCache:
    """Run the target once over ``num_windows`` windows of ``seq_len`` tokens drawn from ``stream``, or over
    the given ``windows`` ``[W, seq_len]`` (one conversation each, with its ``loss_mask``)."""
    from tqdm.auto import tqdm

    aux_resid = tuple(int(k) for k in aux_resid)
    num_windows = len(windows) if windows is not None else num_windows
    n = target.num_layers
    points = sorted(set(aux_resid) | {n})
    parts = {"windows": [], "aux": [], "normed": [], "top1": []}
    bar = tqdm(total=num_windows, desc="target features", disable=not progress)
    for start in range(0, num_windows, batch_size):
        b = min(batch_size, num_windows - start)
        ids = (windows[start:start + b] if windows is not None
               else batch_at(stream, start, b, seq_len, seed)[:, :-1]).to(target.device)
        with ResidCapture(target.model, points, offload="keep") as cap:
            logits = target.model(input_ids=ids).logits
            states = dict(cap.states)
        parts["windows"].append(ids.cpu())
        parts["aux"].append(concat_aux(states, aux_resid).half().cpu())
        parts["normed"].append(target.final_norm(states[n]).half().cpu())
        parts["top1"].append(logits.argmax(-1).cpu())
        bar.update(b)
    bar.close()
    return FeatureCache(*(torch.cat(parts[k]) for k in ("windows", "aux", "normed", "top1")), aux_resid, loss_mask)
