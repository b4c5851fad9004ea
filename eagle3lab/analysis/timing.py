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
    d = draft_for(draft, tgt, profile)
    dev = tgt.device
    gen = torch.Generator().manual_seed(0)
    vocab = min(tgt.vocab_size, getattr(tgt.tokenizer, "vocab_size", tgt.vocab_size) or tgt.vocab_size)
    rand = lambda n: torch.randint(0, vocab, (n,), generator=gen).tolist()
    run = SpeculativeRun(tgt, d, temperature=0.0)
    with run.capture:
        run.prefill(rand(context_len))
    n0, root, last = run.n, run.root, (run.last_logits, run.last_hidden)

    def reset():
        keep_cache_positions(run.cache, n0, [])
        run.dcache.crop(n0)
        run.n, run.root = n0, root
        run.last_logits, run.last_hidden = last

    def chain_of(n):
        return DraftTree(tokens=rand(n - 1), parents=list(range(-1, n - 2)), depths=list(range(1, n)),
                         scores=[0.0] * (n - 1), pool_size=n - 1)

    def verify_once(tree, chain=True):  # verify + accept + commit, as one round of the loop
        logits, aux = run.verify(tree, chain=chain)
        path, bonus = run.accept(tree, logits)
        run.commit(path, bonus)
        return aux

    clock = Clock(dev)
    rounds = warmup + repeats
    # baseline: bursts of one-token target steps, no capture hooks (what target_greedy runs)
    step_ids = torch.tensor([[root]], device=dev)
    kw = {run.cache_kw: run.cache}

    def burst(n=8):
        tok = root
        for _ in range(n):
            tok = int(tgt.model(input_ids=torch.tensor([[tok]], device=dev), use_cache=True, **kw).logits[0, -1].argmax())
    for i in range(rounds):
        clock.time("target_burst", burst, keep=i >= warmup)
        reset()
    max_rows = max(verify_sizes)
    specs = []
    for steps, topk, m in settings:
        s, _ = tree_settings(steps, topk, m)
        specs.append((setting_key(s["num_steps"], s["topk"], s["num_draft_tokens"]), s))
        max_rows = max(max_rows, s["num_steps"] + 1)
    total = (max_rows + len(specs) - 1 + len(verify_sizes) + 1) * rounds
    bar = tqdm(total=total, desc="measuring costs", disable=not progress)
    with run.capture:
        for j, (key, s) in enumerate(specs):  # whole rounds: draft phase, verify + accept + commit, extend
            chain = s["topk"] == 1
            for r in range(1, max_rows + 1) if j == 0 else (1,):  # extend costs do not depend on the setting
                for i in range(rounds):
                    keep = i >= warmup
                    tree, _, _ = clock.time(f"phase {key}", lambda s=s: run.draft_phase(s), keep)
                    aux = clock.time(f"verify {key}", lambda tree=tree, chain=chain: verify_once(tree, chain), keep)
                    rows = aux[:1].repeat(r, 1)
                    clock.time(f"extend {r}", lambda r=r, rows=rows: run.draft_extend(rand(r), rows), keep and j == 0)
                    reset()
                    bar.update()
        s0 = specs[0][1]
        for n in verify_sizes:  # the verify-cost curve, each after the first setting's draft phase
            tree = chain_of(n)
            for i in range(rounds):
                run.draft_phase(s0)
                clock.time(f"curve {n}", lambda tree=tree: verify_once(tree), i >= warmup)
                reset()
                bar.update()
        for i in range(rounds):  # one recycled draft step, where step 2 of a chain sits: after verify + extend
            _, aux = run.verify(chain_of(2), chain=True)
            run.commit([], root)
            run.draft_extend([root], aux[:1])
            h = run.last_hidden[None, None]
            clock.time("draft_step", lambda h=h: d(step_ids, recycled_hidden=h, cache=run.dcache).logits[0, -1].argmax(),
                       i >= warmup)
            reset()
            bar.update()
    bar.close()
    return CostModel(
        device=str(dev), context_len=context_len, target_step_s=clock.median("target_burst") / 8,
        draft_step_s=clock.median("draft_step"), verify_s={n: clock.median(f"curve {n}") for n in verify_sizes},
        extend_s={r: clock.median(f"extend {r}") for r in range(1, max_rows + 1)},
        draft_phase_s={k: clock.median(f"phase {k}") for k, _ in specs},
        setting_verify_s={k: clock.median(f"verify {k}") for k, _ in specs})
