"""The cost model's numbers measured on this device: every piece of a round timed with the decoding
loop's own methods (``SpeculativeRun``), in the order the loop runs them."""

from __future__ import annotations

import statistics
import time

import torch
from tqdm.auto import tqdm

from eagle3lab.analysis.cost_model import CostModel, setting_key
from eagle3lab.decoding.speculative import (
    SpeculativeRun,
    draft_for,
    keep_cache_positions,
    sync_device,
    tree_settings,
)
from eagle3lab.decoding.tree import DraftTree
from eagle3lab.models.target import as_target


class Clock:
    """Accumulates timed samples by name; ``keep=False`` runs a piece untimed (the caller's warm-up)."""

    def __init__(self, device):
        self.device, self.samples = device, {}

    def time(self, name, fn, keep: bool = True):
        sync_device(self.device)
        t0 = time.perf_counter()
        out = fn()
        sync_device(self.device)
        if keep:
            self.samples.setdefault(name, []).append(time.perf_counter() - t0)
        return out

    def median(self, name) -> float:
        return statistics.median(self.samples[name])


class _Loop:
    """One ``SpeculativeRun`` prefilled with ``context_len`` random tokens, rolled back after every round."""

    def __init__(self, tgt, d, context_len: int):
        self.tgt, self.d, self.dev = tgt, d, tgt.device
        self.gen = torch.Generator().manual_seed(0)
        self.vocab = min(tgt.vocab_size, getattr(tgt.tokenizer, "vocab_size", tgt.vocab_size) or tgt.vocab_size)
        self.run = run = SpeculativeRun(tgt, d, temperature=0.0)
        with run.capture:
            run.prefill(self.rand(context_len))
        self.n0, self.root, self.last = run.n, run.root, (run.last_logits, run.last_hidden)

    def rand(self, n: int) -> list[int]:
        return torch.randint(0, self.vocab, (n,), generator=self.gen).tolist()

    def reset(self):
        run = self.run
        keep_cache_positions(run.cache, self.n0, [])
        run.dcache.crop(self.n0)
        run.n, run.root = self.n0, self.root
        run.last_logits, run.last_hidden = self.last

    def chain_of(self, n: int) -> DraftTree:
        return DraftTree(tokens=self.rand(n - 1), parents=list(range(-1, n - 2)), depths=list(range(1, n)),
                         scores=[0.0] * (n - 1), pool_size=n - 1)

    def verify_once(self, tree, chain: bool = True):  # verify + accept + commit, as one round of the loop
        logits, aux = self.run.verify(tree, chain=chain)
        path, bonus = self.run.accept(tree, logits)
        self.run.commit(path, bonus)
        return aux

    def burst(self, n: int = 8):
        """``n`` one-token target steps, no capture hooks (what target_greedy runs)."""
        tok, kw = self.root, {self.run.cache_kw: self.run.cache}
        for _ in range(n):
            ids = torch.tensor([[tok]], device=self.dev)
            tok = int(self.tgt.model(input_ids=ids, use_cache=True, **kw).logits[0, -1].argmax())


@torch.no_grad()
def measure_costs(target, draft, *, context_len: int = 128, verify_sizes=(1, 2, 3, 4, 6, 8, 12, 16),
                  settings=((5, 1, None),), repeats: int = 7, warmup: int = 2, profile=None,
                  progress: bool = False) -> CostModel:
    """Time each piece of a round on this device with the decoding loop's own methods.

    Pieces are timed in the loop's order (draft phase -> verify + accept + commit -> extend), so
    each starts with the caches as the loop leaves them: on a CPU the target's weights evict the
    draft's from the processor caches, and a draft step timed back-to-back in isolation would look
    up to twice as cheap as it is inside the loop. The baseline step is timed back-to-back, as the
    plain loop runs it. ``settings``: (num_steps, topk, num_draft_tokens) whose draft phase and verify
    are timed. KV caches are rolled back after every round, so all see ``context_len`` tokens.
    """
    tgt = as_target(target)
    loop = _Loop(tgt, draft_for(draft, tgt, profile), context_len)
    clock = Clock(tgt.device)
    rounds = warmup + repeats
    for i in range(rounds):   # baseline: bursts of one-token target steps
        clock.time("target_burst", loop.burst, keep=i >= warmup)
        loop.reset()
    max_rows = max(verify_sizes)
    specs = []
    for steps, topk, m in settings:
        s, _ = tree_settings(steps, topk, m)
        specs.append((setting_key(s["num_steps"], s["topk"], s["num_draft_tokens"]), s))
        max_rows = max(max_rows, s["num_steps"] + 1)
    total = (max_rows + len(specs) - 1 + len(verify_sizes) + 1) * rounds
    bar = tqdm(total=total, desc="measuring costs", disable=not progress)
    with loop.run.capture:
        _time_rounds(clock, loop, specs, max_rows, rounds, warmup, bar)
        _time_curve(clock, loop, specs[0][1], verify_sizes, rounds, warmup, bar)
        _time_draft_step(clock, loop, rounds, warmup, bar)
    bar.close()
    return CostModel(
        device=str(tgt.device), context_len=context_len, target_step_s=clock.median("target_burst") / 8,
        draft_step_s=clock.median("draft_step"), verify_s={n: clock.median(f"curve {n}") for n in verify_sizes},
        extend_s={r: clock.median(f"extend {r}") for r in range(1, max_rows + 1)},
        draft_phase_s={k: clock.median(f"phase {k}") for k, _ in specs},
        setting_verify_s={k: clock.median(f"verify {k}") for k, _ in specs})


def _time_rounds(clock: Clock, loop: _Loop, specs, max_rows: int, rounds: int, warmup: int, bar):
    """Whole rounds: draft phase, verify + accept + commit, extend by 1..``max_rows`` rows (the extend costs do
    not depend on the setting: timed with the first only)."""
    run = loop.run
    for j, (key, s) in enumerate(specs):
        chain = s["topk"] == 1
        for r in range(1, max_rows + 1) if j == 0 else (1,):
            for i in range(rounds):
                keep = i >= warmup
                tree, _, _ = clock.time(f"phase {key}", lambda s=s: run.draft_phase(s), keep)
                aux = clock.time(f"verify {key}", lambda tree=tree, chain=chain: loop.verify_once(tree, chain), keep)
                rows = aux[:1].repeat(r, 1)
                clock.time(f"extend {r}", lambda r=r, rows=rows: run.draft_extend(loop.rand(r), rows), keep and j == 0)
                loop.reset()
                bar.update()


def _time_curve(clock: Clock, loop: _Loop, first_setting: dict, verify_sizes, rounds: int, warmup: int, bar):
    """The verify-cost curve, each after the first setting's draft phase."""
    for n in verify_sizes:
        tree = loop.chain_of(n)
        for i in range(rounds):
            loop.run.draft_phase(first_setting)
            clock.time(f"curve {n}", lambda tree=tree: loop.verify_once(tree), i >= warmup)
            loop.reset()
            bar.update()


def _time_draft_step(clock: Clock, loop: _Loop, rounds: int, warmup: int, bar):
    """One recycled draft step, where step 2 of a chain sits: after verify + extend."""
    run, step_ids = loop.run, torch.tensor([[loop.root]], device=loop.dev)
    for i in range(rounds):
        _, aux = run.verify(loop.chain_of(2), chain=True)
        run.commit([], loop.root)
        run.draft_extend([loop.root], aux[:1])
        h = run.last_hidden[None, None]
        clock.time("draft_step", lambda h=h: loop.d(step_ids, recycled_hidden=h, cache=run.dcache).logits[0, -1].argmax(),
                   i >= warmup)
        loop.reset()
        bar.update()
