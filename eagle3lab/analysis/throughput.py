"""When speculation pays: the cost model, and its costs measured on this device.

A round of speculative decoding emits tau tokens (accepted drafts + the bonus) and costs

    round = extend(accepted + 1 rows) + draft forwards + verify(M tokens)    (+ bookkeeping)

while plain decoding pays one target step per token. In units of one target step t:

    speedup = tau / (extend/t + (K-1) * c + v(M))        c = draft step / t,  v(M) = verify(M) / t

Leviathan et al. 2023 (arXiv 2211.17192, section 3.2) is the special case of i.i.d. acceptance
alpha, gamma = K drafts, v(M) = 1 and no separate extend:
E[tokens per round] = (1 - alpha^(gamma+1)) / (1 - alpha), speedup = that / (gamma*c + 1).
With per-position rates the expected tokens per round is 1 + sum_k a_k (survival a_k, see
``eagle3lab.engines.acceptance``). Speculation loses whenever tau is below the round cost in target steps
(``break_even_tau``): a long chain multiplies c, a verify curve that rises with M (big batches,
MoE layers that touch more experts for more tokens) raises v(M).

``measure_costs`` times the very methods the decoding loop runs (``SpeculativeRun``): the target's
one-token step (the baseline), its verify cost curve v(M), one draft step (c), the extend, and a
whole draft phase, at a given context length on the current device.
"""

from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch
from tqdm.auto import tqdm

from eagle3lab.decoding.speculative import (
    SpeculativeRun,
    draft_for,
    hf_generate,
    keep_cache_positions,
    speculative_generate,
    sync_device,
    target_greedy,
    tree_settings,
)
from eagle3lab.decoding.tree import DraftTree
from eagle3lab.engines.acceptance import acceptance_stats
from eagle3lab.errors import bad_input
from eagle3lab.models.target import as_target

# ------------------------------------------------------------------------------------------ formulas


def leviathan_tokens_per_step(alpha: float, gamma: int) -> float:
    """E[tokens per round] with i.i.d. acceptance ``alpha`` and ``gamma`` drafts (bonus included)."""
    if alpha >= 1.0:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def leviathan_speedup(alpha: float, gamma: int, c: float) -> float:
    """Leviathan et al.'s walltime improvement (1 - a^(g+1)) / ((1 - a)(g c + 1))."""
    return leviathan_tokens_per_step(alpha, gamma) / (gamma * c + 1)


def tokens_per_round(survival) -> float:
    """Generalised to per-position rates: 1 + sum_k a_k."""
    return 1.0 + float(sum(survival))


def speedup(tau: float, round_cost: float) -> float:
    """tau tokens per round over a round costing ``round_cost`` target steps."""
    return tau / round_cost


def break_even_tau(round_cost: float) -> float:
    """Speculation is faster than plain decoding only if tau exceeds the round cost (target steps)."""
    return round_cost


def implied_round_cost(tau: float, baseline_tps: float, spec_tps: float) -> float:
    """What a round must have cost, in target steps, for these measured rates (e.g. a served deployment)."""
    return tau * baseline_tps / spec_tps


# ------------------------------------------------------------------------------------------ measured costs


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


@dataclass
class CostModel:
    """Measured costs (seconds) of every piece of a round, at ``context_len`` tokens of KV cache."""

    device: str
    context_len: int
    target_step_s: float                     # baseline: one token through the target on its KV cache
    draft_step_s: float                      # one draft forward of one recycled row
    verify_s: dict[int, float]               # chain verify (target forward + capture + accept + commit) of n tokens
    extend_s: dict[int, float]               # draft re-reading r committed rows (fc on target features)
    draft_phase_s: dict[str, float] = field(default_factory=dict)   # "K=5" / "K=5,topk=4,M=8" -> whole draft phase
    setting_verify_s: dict[str, float] = field(default_factory=dict)  # same keys -> verify + accept + commit

    @property
    def c(self) -> float:
        """Cost ratio draft step / target step (Leviathan's c)."""
        return self.draft_step_s / self.target_step_s

    def v(self, n: int) -> float:
        """Verify cost of n tokens in target steps, linearly interpolated on the measured curve."""
        xs = sorted(self.verify_s)
        if n <= xs[0]:
            return self.verify_s[xs[0]] / self.target_step_s
        for lo, hi in zip(xs, xs[1:]):
            if n <= hi:
                w = (n - lo) / (hi - lo)
                return ((1 - w) * self.verify_s[lo] + w * self.verify_s[hi]) / self.target_step_s
        lo, hi = xs[-2], xs[-1]  # extrapolate the last slope
        slope = (self.verify_s[hi] - self.verify_s[lo]) / (hi - lo)
        return (self.verify_s[hi] + slope * (n - hi)) / self.target_step_s

    def _extend(self, rows: int) -> float:
        xs = sorted(self.extend_s)
        return self.extend_s[min(xs, key=lambda x: abs(x - rows))]

    def round_seconds(self, accept_dist, num_steps: int, topk: int = 1, num_draft_tokens: int | None = None) -> dict:
        """Expected seconds per round, by piece. ``accept_dist[a]`` = P(a drafts accepted)."""
        key = _key(num_steps, topk, num_draft_tokens)
        extend = sum(p * self._extend(a + 1) for a, p in enumerate(accept_dist))
        if key in self.draft_phase_s:
            draft = self.draft_phase_s[key]
        else:  # chain estimate from single steps
            draft = (num_steps - 1) * self.draft_step_s
        if key in self.setting_verify_s:
            verify = self.setting_verify_s[key]
        else:  # from the chain verify curve
            verify = self.v(num_steps + 1 if topk == 1 else num_draft_tokens or num_steps * topk + 1) * self.target_step_s
        return {"extend_s": extend, "draft_s": draft, "verify_s": verify, "round_s": extend + draft + verify}

    def project(self, stats, num_steps: int, topk: int = 1, num_draft_tokens: int | None = None,
                tokens_per_round: float | None = None) -> Projection:
        """Projected tokens/s and speedup for an acceptance profile (``AcceptanceStats`` or a tau).

        ``tokens_per_round`` (default tau): tokens a round really emits. Finite generations emit
        fewer than tau (the last round is cut at EOS or the token budget); pass the log's mean to
        compare with a measured run.
        """
        if hasattr(stats, "survival"):  # P(a accepted) = a_a - a_{a+1}
            tau, surv = stats.tau, list(stats.survival)
            probs = [1 - surv[0]] + [surv[i] - surv[i + 1] for i in range(len(surv) - 1)] + [surv[-1]]
        else:  # a bare tau: the extend cost is taken at the mean accepted count
            tau = float(stats)
            probs = [0.0] * int(round(tau - 1)) + [1.0]
        pieces = self.round_seconds(probs, num_steps, topk, num_draft_tokens)
        round_cost = pieces["round_s"] / self.target_step_s
        emitted = tau if tokens_per_round is None else float(tokens_per_round)
        return Projection(tau=tau, tokens_per_round=emitted, c=self.c, v_verify=pieces["verify_s"] / self.target_step_s,
                          round_cost=round_cost, baseline_tps=1 / self.target_step_s,
                          spec_tps=emitted / pieces["round_s"], speedup=speedup(emitted, round_cost), pieces=pieces)

    def verify_frame(self) -> pd.DataFrame:
        """The target's verify-cost curve: seconds and target steps vs verified tokens."""
        n = sorted(self.verify_s)
        return pd.DataFrame({"tokens": n, "seconds": [self.verify_s[i] for i in n],
                             "target_steps": [self.verify_s[i] / self.target_step_s for i in n]}).set_index("tokens")

    def plot_verify_curve(self, ax=None, label: str | None = None):
        """v(M): verify cost in target steps vs tokens verified (flat = verification is free)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(6, 3.5))
        df = self.verify_frame()
        ax.plot(df.index, df["target_steps"], marker="o", label=label or f"{self.device}, context {self.context_len}")
        ax.axhline(1.0, color="grey", lw=0.8, ls="--")
        ax.set_xlabel("tokens verified in one target forward (M)")
        ax.set_ylabel("cost in target steps v(M)")
        ax.set_title(f"verify-cost curve (c = draft step / target step = {self.c:.3f})")
        ax.legend(fontsize=8)
        return ax.figure

    def to_dict(self) -> dict:
        d = asdict(self)
        d["c"] = self.c
        d["verify_target_steps"] = {n: self.v(n) for n in sorted(self.verify_s)}
        return d


@dataclass
class Projection:
    tau: float
    tokens_per_round: float  # tau, or what a finite run really emitted per round
    c: float
    v_verify: float          # verify cost of this setting, in target steps
    round_cost: float        # whole round, in target steps (= break-even tau)
    baseline_tps: float
    spec_tps: float
    speedup: float
    pieces: dict

    def to_dict(self) -> dict:
        return asdict(self)


def _key(num_steps: int, topk: int = 1, num_draft_tokens: int | None = None) -> str:
    return f"K={num_steps}" if topk == 1 else f"K={num_steps},topk={topk},M={num_draft_tokens}"


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
        specs.append((_key(s["num_steps"], s["topk"], s["num_draft_tokens"]), s))
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


# ------------------------------------------------------------------------------------------ served targets


@dataclass(frozen=True)
class Roofline:
    """A forward pass bounded by weight reads or by flops, plus a fixed per-forward overhead.

    For an MoE target, the routed experts a forward must read grow with the number of tokens it
    processes (uniform routing: E * (1 - (1 - k/E)^tokens) distinct experts per layer), so verifying
    M tokens per sequence reads more weights than decoding one: v(M) rises even at batch size 1.
    Every number is an assumption to state, not a measurement; ``verify_curve`` is what to compare
    with ``CostModel.verify_frame`` measured on a real machine.
    """

    name: str
    dense_params: float          # weights every forward reads (attention, shared experts, embeddings, head)
    expert_params: float         # one routed expert, summed over the MoE layers (0 for a dense model)
    num_experts: int = 0
    experts_per_token: int = 0
    bytes_per_param: float = 2.0
    active_params: float = 0.0   # per token, for flops (2 * active per token)
    mem_bw: float = 3.35e12      # bytes/s, all GPUs together
    flops: float = 7.0e14        # achievable flop/s, all GPUs together
    overhead_s: float = 0.0      # launches, scheduling, communication per forward
    assumptions: str = ""

    def touched_experts(self, tokens: int) -> float:
        if not self.num_experts:
            return 0.0
        return self.num_experts * (1 - (1 - self.experts_per_token / self.num_experts) ** tokens)

    def forward_s(self, tokens: int) -> float:
        weights = (self.dense_params + self.touched_experts(tokens) * self.expert_params) * self.bytes_per_param
        return max(weights / self.mem_bw, 2 * self.active_params * tokens / self.flops) + self.overhead_s

    def verify_curve(self, sizes=(1, 2, 4, 8, 16), batch: int = 1) -> pd.DataFrame:
        """v(M) for ``batch`` sequences each verifying M tokens, in units of their one-token step."""
        base = self.forward_s(batch)
        return pd.DataFrame({"tokens": list(sizes),
                             "target_steps": [self.forward_s(batch * m) / base for m in sizes]}).set_index("tokens")


# Illustrative shapes (public model cards); bandwidth and flops are round hardware numbers, and the
# fixed overhead is calibrated so that plain decoding matches a published single-stream rate.
ROOFLINE_EXAMPLES = {
    "llama-3.1-8b bf16, 1 GPU (H100-class)": Roofline(
        name="llama-3.1-8b", dense_params=8.03e9, expert_params=0.0, bytes_per_param=2, active_params=8.03e9,
        mem_bw=3.35e12, flops=7.0e14, overhead_s=1.54e-3,
        assumptions="dense 8B, bf16, 3.35 TB/s, 700 TFLOP/s achievable; 1.54 ms fixed per forward so that "
                    "plain decoding gives the 158 tok/s of SGLang's docs (facts section 7)"),
    "kimi-k2 fp8, 8 GPUs (H200-class)": Roofline(
        name="kimi-k2", dense_params=11e9, expert_params=2.64e9, num_experts=384, experts_per_token=8,
        bytes_per_param=1, active_params=32e9, mem_bw=8 * 4.8e12, flops=8 * 1.4e15, overhead_s=10.3e-3,
        assumptions="61 layers (60 MoE), 384 experts of 3*7168*2048 weights, 8 routed per token, ~11B "
                    "always-read weights, fp8, 8 x 4.8 TB/s; 10.3 ms fixed per forward so that plain decoding "
                    "gives the seed's 90 tok/s"),
}


# What a round costs on a served target beyond its forwards (stated assumptions, not measurements):
# c: a one-layer draft against a 61-layer target, launches included; overhead: the CPU work a plain
# decoding step hides behind the GPU with the overlap scheduler, paid in every speculative round when
# EAGLE runs without it (SGLang <= 0.5.10.post1; from 0.5.11, PR #21062, a chain keeps it on unless
# SGLANG_ENABLE_SPEC_V2=0 or --disable-overlap-schedule: pass overhead=0 there; `eagle3lab flags`
# places a build); batch: SGLang's EAGLE default max_running_requests (48).
SERVED = {"roofline": "kimi-k2 fp8, 8 GPUs (H200-class)", "c": 0.1, "overhead": 0.2, "batch": 48}


def verdict(tau: float, break_even: float, margin: float = 0.05) -> str:
    """'wins' / 'loses' beyond ``margin`` of the break-even tau; within it, 'breaks even' (one run's noise)."""
    if tau > break_even * (1 + margin):
        return "wins"
    return "loses" if tau < break_even * (1 - margin) else "breaks even"


def price_on_served(cases: dict[str, dict], roofline: str | Roofline = SERVED["roofline"], c: float = SERVED["c"],
                    overhead: float = SERVED["overhead"], batches=(1, SERVED["batch"])) -> pd.DataFrame:
    """The same acceptance on a served target: ``{name: {tau, num_steps, num_draft_tokens}}`` -> ``explain`` table.

    One row per case and batch size (``"name | served, batch b"``); v(M) comes from the roofline's
    verify curve at that batch (M = ``num_draft_tokens`` per sequence, a tree's width included), c and
    the per-round engine overhead are the stated assumptions; a tree's draft levels are priced as
    chain steps.
    """
    roof = ROOFLINE_EXAMPLES[roofline] if isinstance(roofline, str) else roofline
    rows = []
    for name, case in cases.items():
        for b in batches:
            v = float(roof.verify_curve((case["num_draft_tokens"],), batch=b)["target_steps"].iloc[0])
            rows.append({"name": f"{name} | served, batch {b}", "tau": case["tau"], "c": c,
                         "num_steps": case["num_steps"], "v": v, "overhead": overhead})
    return explain(rows)


def plot_break_even(table: pd.DataFrame, ax=None):
    """Each case's tau against its break-even tau (round cost): above the diagonal, speculation wins."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 4.5))
    top = max(table["tau"].max(), table["break_even_tau"].max()) * 1.1
    ax.plot([1, top], [1, top], color="grey", lw=0.8, ls="--")
    ax.fill_between([1, top], [1, top], [top, top], color="tab:green", alpha=0.08)
    for name, row in table.iterrows():
        ax.scatter(row["break_even_tau"], row["tau"])
        ax.annotate(f"{name} ({row['projected_speedup']:.2f}x)", (row["break_even_tau"], row["tau"]), fontsize=7,
                    xytext=(4, 2), textcoords="offset points")
    ax.set_xlabel("round cost in target steps (= break-even tau)")
    ax.set_ylabel("tau (tokens per round)")
    ax.set_title("speculation pays above the diagonal")
    return ax.figure


def explain(cases: list[dict]) -> pd.DataFrame:
    """One row per case: tau, c, v(M), round cost (= break-even tau) and the speedup they imply.

    Each case is a dict with ``name``, ``tau``, ``c``, ``num_steps``, ``v`` (verify cost in target
    steps) and optionally ``extend`` (target steps, default c), ``overhead`` (engine work per round
    outside the forwards, target steps, default 0) and ``measured_speedup``.
    """
    rows = []
    for case in cases:
        extend, overhead = case.get("extend", case["c"]), case.get("overhead", 0.0)
        cost = extend + (case["num_steps"] - 1) * case["c"] + case["v"] + overhead
        row = {"case": case["name"], "tau": case["tau"], "c": case["c"], "num_steps": case["num_steps"],
               "v_verify": case["v"], "overhead": overhead, "round_cost": cost, "break_even_tau": break_even_tau(cost),
               "projected_speedup": speedup(case["tau"], cost)}
        if "measured_speedup" in case:
            row["measured_speedup"] = case["measured_speedup"]
        rows.append(row)
    return pd.DataFrame(rows).set_index("case")


# ------------------------------------------------------------------------------------------ benchmark


def finite_json(obj):
    """NaN / inf (e.g. c_k at a position no round reached) -> None, so the object dumps to strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def run_benchmark(target, draft, prompts, *, num_steps: int = 5, topk: int = 1, num_draft_tokens: int | None = None,
                  profile=None, max_new_tokens: int = 64, repeats: int = 3, measure_repeats: int = 5,
                  progress: bool = False) -> dict:
    """Baseline and speculative decoding timed side by side in one run, plus the cost model.

    Each repetition decodes every prompt with ``transformers`` ``generate(do_sample=False)``, the
    plain greedy loop and the speculative loop, interleaved so that machine noise hits all three
    alike, then measures the cost model in the same time window and projects that repetition's
    speedup from it. Reported numbers are medians over repetitions (rates: tokens / seconds summed
    over prompts); ``projection.error`` is the median of the per-repetition errors.
    """
    tgt = as_target(target)
    d = draft_for(draft, tgt, profile)
    settings, warnings = tree_settings(num_steps, topk, num_draft_tokens)
    K, k, M = settings["num_steps"], settings["topk"], settings["num_draft_tokens"]
    prompts = list(prompts)
    # warm-up on a whole prompt: first calls pay one-off allocation and dispatch costs
    speculative_generate(tgt, d, prompts[0], num_steps=K, topk=k, num_draft_tokens=M, max_new_tokens=max_new_tokens)
    target_greedy(tgt, prompts[0], max_new_tokens)
    hf_generate(tgt, prompts[0], max_new_tokens)
    sizes = sorted({1, 2, 3, 4, 6, 8, 12, 16, K + 1, M})
    reps: dict[str, list[float]] = {}
    rounds, identical, prompt_lens, projections = [], 0, [], []
    for rep in tqdm(range(repeats), desc="benchmark", disable=not progress):
        tot = {m: [0, 0.0] for m in ("generate", "greedy", "greedy_decode", "spec", "spec_decode")}
        for text in prompts:
            ref = hf_generate(tgt, text, max_new_tokens)
            base = target_greedy(tgt, text, max_new_tokens)
            spec = speculative_generate(tgt, d, text, num_steps=K, topk=k, num_draft_tokens=M,
                                        max_new_tokens=max_new_tokens)
            for name, n, sec in (("generate", len(ref.tokens), ref.decode_s),
                                 ("greedy", len(base.tokens), base.prefill_s + base.decode_s),
                                 ("greedy_decode", len(base.tokens) - 1, base.decode_s),
                                 ("spec", len(spec.tokens), spec.prefill_s + spec.decode_s),
                                 ("spec_decode", len(spec.tokens) - 1, spec.decode_s)):
                tot[name][0] += n
                tot[name][1] += sec
            if rep == 0:  # greedy: every repetition produces the same rounds
                rounds += spec.rounds
                identical += spec.tokens == ref.tokens
                prompt_lens.append(len(spec.prompt_ids) + len(spec.tokens) // 2)
        for name, (n, sec) in tot.items():
            reps.setdefault(name, []).append(n / sec)
        if rep == 0:
            stats = acceptance_stats(rounds, num_positions=K)
            context = int(round(statistics.mean(prompt_lens)))
            emitted = sum(len(r.emitted) for r in rounds) / len(rounds) if rounds else 1.0
        costs = measure_costs(tgt, d, context_len=context, verify_sizes=sizes, settings=((K, k, M),),
                              repeats=measure_repeats)
        proj = costs.project(stats, K, k, M, tokens_per_round=emitted)
        measured = reps["spec_decode"][-1] / reps["greedy_decode"][-1]
        projections.append((costs, proj, measured))
    med = statistics.median
    tps = {name: med(v) for name, v in reps.items()}
    measured_speedup = med(m for _, _, m in projections)
    return {
        "target": tgt.path, "profile": d.profile.name, "aux_resid": list(d.aux_resid),
        "norm_before_residual": d.settings.norm_before_residual,
        "device": str(tgt.device), "dtype": str(tgt.dtype).replace("torch.", ""), "threads": torch.get_num_threads(),
        "settings": {**settings, "max_new_tokens": max_new_tokens, "prompts": len(prompts), "repeats": repeats},
        "warnings": warnings,
        "tokens_per_s": {"generate": tps["generate"], "greedy_loop": tps["greedy"],
                         "greedy_loop_decode": tps["greedy_decode"], "speculative": tps["spec"],
                         "speculative_decode": tps["spec_decode"]},
        "speedup": {"vs_generate": tps["spec"] / tps["generate"], "vs_greedy_loop": tps["spec"] / tps["greedy"],
                    "decode_vs_greedy_loop": measured_speedup},
        "lossless": {"identical_to_generate": identical, "prompts": len(prompts)},
        "acceptance": {"tau": stats.tau, "vllm_mean_acceptance_length": stats.vllm_mean_acceptance_length,
                       "vllm_draft_acceptance_rate": stats.vllm_draft_acceptance_rate,
                       "conditional": list(stats.conditional), "survival": list(stats.survival),
                       "accepted_per_pos": list(stats.accepted_per_pos), "num_drafts": stats.rounds,
                       "num_draft_tokens": stats.num_draft_tokens, "num_accepted_tokens": stats.num_accepted_tokens,
                       "specforge_simulated_acc_len": stats.specforge_simulated_acc_len},
        "cost_model": {"context_len": context, "target_step_s": med(c.target_step_s for c, _, _ in projections),
                       "draft_step_s": med(c.draft_step_s for c, _, _ in projections),
                       "c": med(c.c for c, _, _ in projections),
                       "verify_target_steps": {str(n): med(c.v(n) for c, _, _ in projections) for n in sizes},
                       "round_pieces_s": {key: med(p.pieces[key] for _, p, _ in projections)
                                          for key in projections[0][1].pieces}},
        "projection": {"tokens_per_round": emitted, "round_cost": med(p.round_cost for _, p, _ in projections),
                       "break_even_tau": med(p.round_cost for _, p, _ in projections),
                       "v_verify": med(p.v_verify for _, p, _ in projections),
                       "decode_tps": med(p.spec_tps for _, p, _ in projections),
                       "baseline_decode_tps": med(p.baseline_tps for _, p, _ in projections),
                       "speedup": med(p.speedup for _, p, _ in projections), "measured_speedup": measured_speedup,
                       "error": med(p.speedup / m - 1 for _, p, m in projections)},
    }


# ------------------------------------------------------------------------------------------ sweeps


def equivalent_alpha(tau: float, gamma: int) -> float:
    """The i.i.d. acceptance alpha that gives ``tau`` tokens per round with ``gamma`` drafts (Leviathan's model)."""
    if not 1.0 <= tau <= gamma + 1:
        raise bad_input("tau", None, f"a value in [1, {gamma + 1}] (gamma = {gamma} drafts)", tau)
    if tau in (1.0, gamma + 1.0):
        return 0.0 if tau == 1.0 else 1.0
    lo, hi = 0.0, 1.0
    for _ in range(60):  # tokens per round rises monotonically with alpha
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if leviathan_tokens_per_step(mid, gamma) < tau else (lo, mid)
    return (lo + hi) / 2


@dataclass
class DecodeSweep:
    """Output of :func:`decode_sweep`: every case's decoding of every prompt, timed side by side."""

    results: dict[str, list]          # case -> SpecResult per prompt (first repetition)
    reference: list[list[int]]        # transformers generate(do_sample=False) tokens per prompt
    decode_tps: dict[str, float]      # case and "no speculation" -> median decode tokens/s
    context_len: int                  # mean prompt length + half the new tokens: where rounds ran

    def settings(self, name: str) -> dict:
        return self.results[name][0].settings

    def stats(self, name: str):
        """Acceptance of one case, pooled over prompts (``AcceptanceStats``)."""
        res = self.results[name]
        return acceptance_stats([r for out in res for r in out.rounds], num_positions=self.settings(name)["num_steps"])

    def identical(self, name: str) -> int | None:
        """Prompts whose output equals ``generate(do_sample=False)`` token for token; None when sampled."""
        if self.settings(name)["temperature"] > 0:
            return None
        return sum(out.tokens == ref for out, ref in zip(self.results[name], self.reference))

    def speedup(self, name: str) -> float:
        return self.decode_tps[name] / self.decode_tps["no speculation"]

    def table(self) -> pd.DataFrame:
        """One row per case: settings, tau (and its cap), decode tokens/s, speedup, lossless count."""
        rows = []
        for name in self.results:
            s, st, same = self.settings(name), self.stats(name), self.identical(name)
            rows.append({"case": name, "profile": s["profile"], "num_steps": s["num_steps"], "topk": s["topk"],
                         "verified": s["num_draft_tokens"], "temperature": s["temperature"], "rounds": st.rounds,
                         "tau": st.tau, "max_tau": s["num_steps"] + 1, "decode_tps": self.decode_tps[name],
                         "speedup": self.speedup(name),
                         "identical": "sampled" if same is None else f"{same}/{len(self.reference)}"})
        return pd.DataFrame(rows).set_index("case")

    def projection(self, costs: CostModel, names=None) -> pd.DataFrame:
        """Each case's acceptance priced with measured costs, next to its measured speedup.

        ``c_round``: the draft phase (extend + drafting) per draft forward, in target steps: the c a
        round really pays (a chain of K tokens runs K draft forwards, the extend included; a tree one
        per level). ``alpha_equiv``: Leviathan's i.i.d. alpha with the same tau.
        """
        rows = []
        for name in names or self.results:
            s, st = self.settings(name), self.stats(name)
            K = s["num_steps"]
            p = costs.project(st, K, s["topk"], s["num_draft_tokens"])
            draft_phase = (p.pieces["extend_s"] + p.pieces["draft_s"]) / costs.target_step_s
            rows.append({"case": name, "tau": st.tau, "num_steps": K, "verified": s["num_draft_tokens"],
                         "alpha_equiv": equivalent_alpha(st.tau, K), "c": costs.c, "c_round": draft_phase / K,
                         "draft_phase": draft_phase, "v_verify": p.v_verify, "round_cost": p.round_cost,
                         "break_even_tau": break_even_tau(p.round_cost), "projected_speedup": p.speedup,
                         "measured_speedup": self.speedup(name)})
        df = pd.DataFrame(rows).set_index("case")
        df["error_%"] = 100 * (df.projected_speedup / df.measured_speedup - 1)
        return df


def decode_sweep(target, cases: dict[str, dict], prompts, *, max_new_tokens: int = 48, repeats: int = 1,
                 progress: bool = True) -> DecodeSweep:
    """Decode every prompt with plain greedy decoding and with every case, interleaved.

    ``cases``: name -> keyword arguments of ``speculative_generate`` (``draft`` required; ``num_steps``,
    ``topk``, ``num_draft_tokens``, ``temperature``, ``profile``, ``seed``). Interleaving per prompt
    makes machine noise hit every case alike; decode rates (tokens after the first over the rounds'
    time) are medians over ``repeats``. The first repetition's outputs are kept, with
    ``generate(do_sample=False)`` of each prompt as the lossless reference.
    """
    tgt = as_target(target)
    prompts = list(prompts)
    if not prompts or not cases:
        raise bad_input("decode_sweep", "prompts / cases", "at least one prompt and one case",
                        f"{len(prompts)} prompts, {len(cases)} cases")
    target_greedy(tgt, prompts[0], 8)  # warm-up: first calls pay one-off allocation costs
    for kw in cases.values():
        speculative_generate(tgt, prompt=prompts[0], **{**kw, "max_new_tokens": 8})
    reference = [hf_generate(tgt, p, max_new_tokens).tokens for p in prompts]
    results: dict[str, list] = {name: [] for name in cases}
    rates: dict[str, list[float]] = {"no speculation": []} | {name: [] for name in cases}
    bar = tqdm(total=repeats * len(prompts), desc="decode sweep", disable=not progress)
    for rep in range(repeats):
        done = dict.fromkeys(rates, (0, 0.0))
        for prompt in prompts:
            base = target_greedy(tgt, prompt, max_new_tokens)
            done["no speculation"] = _add_decode(done["no speculation"], base)
            for name, kw in cases.items():
                out = speculative_generate(tgt, prompt=prompt, **{**kw, "max_new_tokens": max_new_tokens})
                done[name] = _add_decode(done[name], out)
                if rep == 0:
                    results[name].append(out)
            bar.update()
        for name, (n, secs) in done.items():
            rates[name].append(n / secs if secs > 0 else float("nan"))
    bar.close()
    first = next(iter(results.values()))
    context = round(statistics.mean(len(o.prompt_ids) + len(o.tokens) / 2 for o in first))
    return DecodeSweep(results=results, reference=reference, context_len=context,
                       decode_tps={name: statistics.median(v) for name, v in rates.items()})


def _add_decode(acc: tuple[int, float], result) -> tuple[int, float]:
    return acc[0] + len(result.tokens) - 1, acc[1] + result.decode_s


def plot_speedup_vs_c(table: pd.DataFrame, ax=None, c_max: float | None = None):
    """Speedup against the draft cost c, one curve per case, with the measured points on them.

    ``table``: rows of :meth:`DecodeSweep.projection`. Solid: this cost model, tau / (K c + v(M)) with
    the measured tau and verify cost; dotted: Leviathan et al.'s model with the same tau, verification
    free (v = 1). Hollow marker: the projection at the measured c; filled: the measured speedup.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5))
    c_max = c_max or max(0.5, 1.3 * float(table.c_round.max()))
    cs = [c_max * i / 200 for i in range(201)]
    for i, (name, row) in enumerate(table.iterrows()):
        color, K = f"C{i}", int(row.num_steps)
        ax.plot(cs, [row.tau / (K * c + row.v_verify) for c in cs], color=color,
                label=f"{name}: tau {row.tau:.2f}, K {K}, v({int(row.verified)}) {row.v_verify:.2f}")
        ax.plot(cs, [row.tau / (K * c + 1) for c in cs], color=color, ls=":", lw=1)
        ax.scatter([row.c_round], [row.projected_speedup], s=60, facecolors="none", edgecolors=color, zorder=3)
        ax.scatter([row.c_round], [row.measured_speedup], s=30, color=color, zorder=4)
    ax.axhline(1.0, color="grey", lw=0.8, ls="--")
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], color="k", ls=":", lw=1, label="Leviathan, same tau, verify free (v = 1)"),
                Line2D([], [], marker="o", ls="", mfc="none", mec="k", label="projected at the measured c"),
                Line2D([], [], marker="o", ls="", color="k", label="measured")]
    ax.legend(handles=handles, fontsize=7)
    ax.set_xlim(0, c_max)
    ax.set_ylim(0, None)
    ax.set_xlabel("c = draft forward / target step (per forward, as the round pays it)")
    ax.set_ylabel("speedup over plain decoding")
    ax.set_title("speedup vs draft cost: above the dashed line speculation pays")
    return ax.figure
