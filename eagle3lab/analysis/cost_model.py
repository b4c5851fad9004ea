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

``eagle3lab.analysis.timing.measure_costs`` times the very methods the decoding loop runs (``SpeculativeRun``): the target's
one-token step (the baseline), its verify cost curve v(M), one draft step (c), the extend, and a
whole draft phase, at a given context length on the current device.
"""


from __future__ import annotations

from dataclasses import asdict, dataclass, field

import pandas as pd

from eagle3lab.errors import bad_input

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
        key = setting_key(num_steps, topk, num_draft_tokens)
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
        # below the axes: a long label inside them sat on the ticks and the curve
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
        ax.figure.tight_layout()
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


def setting_key(num_steps: int, topk: int = 1, num_draft_tokens: int | None = None) -> str:
    return f"K={num_steps}" if topk == 1 else f"K={num_steps},topk={topk},M={num_draft_tokens}"


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
