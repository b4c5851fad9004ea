"""What both trainers share: the schedule fields, batches drawn as a function of the step, the warmup +
cosine learning rate, and the resumable loop (atomic checkpoints; a stopped run continues exactly)."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from eagle3lab.atomic import atomic_file


@dataclass
class Schedule:
    """Batches, learning rate, evaluation and checkpoint cadence (each trainer sets its own defaults)."""

    seq_len: int = 512
    batch_size: int = 4
    steps: int = 500
    lr: float = 3e-3
    min_lr: float = 3e-4
    warmup_steps: int = 30
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    seed: int = 0
    eval_every: int = 100
    eval_windows: int = 16
    ckpt_every_s: float = 120.0
    extra: dict = field(default_factory=dict)


def batch_at(stream: np.ndarray, step: int, batch_size: int, seq_len: int, seed: int) -> torch.Tensor:
    """Random windows of ``seq_len + 1`` tokens; a pure function of (seed, step)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    starts = torch.randint(0, len(stream) - seq_len - 1, (batch_size,), generator=g).tolist()
    return torch.from_numpy(np.stack([stream[s:s + seq_len + 1] for s in starts]).astype(np.int64))


def eval_windows(stream: np.ndarray, n: int, seq_len: int) -> torch.Tensor:
    """``n`` evenly spaced held-out windows (fixed: the same every evaluation)."""
    n = min(n, (len(stream) - 1) // (seq_len + 1))
    starts = np.linspace(0, len(stream) - seq_len - 1, n).astype(np.int64)
    return torch.from_numpy(np.stack([stream[s:s + seq_len + 1] for s in starts]).astype(np.int64))


def lr_at(step: int, cfg: Schedule) -> float:
    """Linear warmup, then cosine to ``min_lr``."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    frac = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * min(1.0, frac)))


def atomic_torch_save(obj, path: Path) -> None:
    """A training checkpoint (our own, read back with weights_only=True), never half-written."""
    with atomic_file(path) as tmp:
        torch.save(obj, tmp)


@dataclass
class LoopResult:
    """Where ``run_loop`` stopped; each trainer's result extends it with what it trained."""

    step: int
    done: bool
    log: list[dict]
    train_seconds: float
    tokens_per_s: float

    def last(self, key: str):
        """The latest logged value of ``key`` (an evaluation's), None before the first."""
        return next((entry[key] for entry in reversed(self.log) if key in entry), None)


def run_loop(cfg: Schedule, run_dir, modules: dict[str, torch.nn.Module], opt, params,
             loss_at: Callable[[int], tuple], evaluate: Callable[[], tuple[str, object, str]], *,
             stop_after_s: float | None = None, progress: bool = True, desc: str = "train") -> LoopResult:
    """Train (or resume) in ``run_dir`` until ``cfg.steps`` are done or ``stop_after_s`` has passed.

    ``modules``: what the checkpoint holds, by name. ``loss_at(step)`` -> (loss, tokens it read, extra
    log fields, progress-bar fields); ``evaluate()`` -> (log key, value, line to print), every
    ``cfg.eval_every`` steps and at the end.
    """
    from tqdm.auto import tqdm

    ckpt_path = Path(run_dir) / "ckpt.pt"
    ckpt_path.parent.mkdir(parents=True, exist_ok=True)
    config = json.dumps(asdict(cfg))
    step, log, train_seconds = 0, [], 0.0
    if ckpt_path.exists():
        state = torch.load(ckpt_path, weights_only=True)
        saved = state["config"]   # a JSON string; checkpoints before train/loop.py stored a dict
        if (json.loads(saved) if isinstance(saved, str) else json.loads(json.dumps(saved))) != json.loads(config):
            raise ValueError(f"{ckpt_path}: checkpoint was made with a different {type(cfg).__name__}; "
                             "use another run_dir or delete the checkpoint to start over.")
        for name, module in modules.items():
            module.load_state_dict(state[name])
        opt.load_state_dict(state["optim"])
        step, log, train_seconds = state["step"], json.loads(state["log"]), state["train_seconds"]

    def checkpoint():
        atomic_torch_save({**{name: m.state_dict() for name, m in modules.items()}, "optim": opt.state_dict(),
                           "step": step, "config": config, "log": json.dumps(log),
                           "train_seconds": train_seconds}, ckpt_path)

    for module in modules.values():
        module.train()
    t_start = t_last = time.time()
    tokens = 0
    bar = tqdm(total=cfg.steps, initial=step, desc=desc, disable=not progress, mininterval=10)
    while step < cfg.steps:
        t0 = time.time()
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        loss, read, extra, postfix = loss_at(step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        opt.step()
        step += 1
        tokens += read
        train_seconds += time.time() - t0
        entry = {"step": step, "loss": round(loss.item(), 4), **extra}
        bar.update(1)
        bar.set_postfix(loss=f"{loss.item():.3f}", **postfix, refresh=False)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            key, value, line = evaluate()
            entry[key] = value
            if progress:
                bar.write(f"{desc} step {step}: loss {loss.item():.3f}  {line}")
        log.append(entry)
        now = time.time()
        if now - t_last >= cfg.ckpt_every_s or step == cfg.steps:
            checkpoint()
            t_last = now
        if stop_after_s is not None and now - t_start >= stop_after_s:
            checkpoint()
            break
    bar.close()
    for module in modules.values():
        module.eval()
    elapsed = time.time() - t_start
    return LoopResult(step=step, done=step >= cfg.steps, log=log, train_seconds=train_seconds,
                      tokens_per_s=tokens / elapsed if elapsed else 0.0)
