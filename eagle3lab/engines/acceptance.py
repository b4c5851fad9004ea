"""Acceptance metrics from a speculative-decoding round log, in each engine's own definition.

A *round* is one draft-then-verify cycle: the draft proposes tokens, the target verifies them in
one forward pass, the longest agreeing prefix is accepted and the target adds one token of its
own (the bonus). Every engine counts the same events but prints different numbers:

- tau, "accept length" (SGLang scheduler: ``(accepted + rounds) / rounds``; EAGLE maintainers,
  SafeAILab/EAGLE #195): mean over rounds of ``accepted + 1``; it includes the bonus token.
- vLLM (``vllm/v1/spec_decode/metrics.py``, ``SpecDecodingLogging``): counters ``num_drafts``,
  ``num_draft_tokens``, ``num_accepted_tokens`` and ``num_accepted_tokens_per_pos``; prints
  "Mean acceptance length" ``1 + accepted / drafts`` (= tau), "Per-position acceptance rate"
  ``accepted_per_pos[k] / drafts`` (= the survival a_k below, NOT conditional) and
  "Avg Draft acceptance rate" ``accepted / draft_tokens``.
- conditional acceptance c_k = P(draft k accepted | drafts 1..k-1 accepted) and survival
  a_k = P(at least k accepted) = prod_{j<=k} c_j; on any log ``tau = 1 + sum_k a_k`` exactly.
- SpecForge (``scripts/train_eagle3*.py``): ``acc_i`` = unconditional top-1 agreement at unroll
  depth i, measured teacher-forced in training (see ``eagle3lab.decoding.evaluate``), and
  ``simulated_acc_len = sum_k prod_{j<=k} acc_j``, which excludes the bonus token and treats the
  unconditional ``acc_j`` as if they were the conditional c_j.

Positions are 1-based here (position 1 = first draft token), as in the papers; vLLM's counters are
0-based in code (``per_pos[0]`` is position 1).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

import pandas as pd


def _accepted_counts(rounds) -> list[int]:
    """Accept either plain ints or round-log objects with an ``accepted`` attribute."""
    return [int(getattr(r, "accepted", r)) for r in rounds]


@dataclass(frozen=True)
class AcceptanceStats:
    """Every engine's acceptance numbers computed from one round log.

    ``num_positions`` is the longest chain that could be accepted in a round (num_steps for a chain,
    the tree depth for a tree). Per-position lists have one entry per position 1..num_positions.
    """

    num_positions: int
    rounds: int
    num_draft_tokens: int            # vLLM: sum of drafted tokens (tree: all nodes sent to verify)
    num_accepted_tokens: int         # vLLM / SGLang: accepted draft tokens, bonus excluded
    accepted_per_pos: tuple[int, ...]  # vLLM num_accepted_tokens_per_pos: rounds with >= k accepted
    reached_per_pos: tuple[int, ...]   # rounds that got to try position k (>= k-1 accepted)
    conditional: tuple[float, ...]     # c_k = accepted_per_pos[k] / reached_per_pos[k]
    survival: tuple[float, ...]        # a_k = accepted_per_pos[k] / rounds (= vLLM per-position rate)

    @property
    def tau(self) -> float:
        """SGLang / EAGLE #195 accept length: tokens per verify step, bonus included."""
        return (self.num_accepted_tokens + self.rounds) / self.rounds if self.rounds else float("nan")

    @property
    def vllm_mean_acceptance_length(self) -> float:
        """vLLM ``1 + accepted / drafts``: the same number as tau, computed from vLLM's counters."""
        return 1 + self.num_accepted_tokens / self.rounds if self.rounds else 1.0

    @property
    def vllm_draft_acceptance_rate(self) -> float:
        """vLLM "Avg Draft acceptance rate": accepted / drafted (a fraction, vLLM prints percent)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else float("nan")

    @property
    def tau_from_survival(self) -> float:
        """1 + sum_k a_k: equals tau on the same log (a check of the bookkeeping, not an estimate)."""
        return 1.0 + sum(self.survival)

    @property
    def specforge_simulated_acc_len(self) -> float:
        """SpecForge's formula applied to the loop's conditional rates (bonus excluded)."""
        return simulated_acc_len(self.conditional)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(tau=self.tau, vllm_mean_acceptance_length=self.vllm_mean_acceptance_length,
                 vllm_draft_acceptance_rate=self.vllm_draft_acceptance_rate,
                 tau_from_survival=self.tau_from_survival,
                 specforge_simulated_acc_len=self.specforge_simulated_acc_len)
        for k in ("accepted_per_pos", "reached_per_pos", "conditional", "survival"):
            d[k] = list(d[k])
        return d

    def to_frame(self) -> pd.DataFrame:
        """One row per draft position: counts, c_k, a_k (= vLLM's per-position rate)."""
        return pd.DataFrame({
            "position": range(1, self.num_positions + 1),
            "reached": self.reached_per_pos,
            "accepted": self.accepted_per_pos,
            "conditional_c": self.conditional,
            "survival_a": self.survival,
        }).set_index("position")


def acceptance_stats(rounds: Iterable, num_positions: int | None = None,
                     draft_tokens_per_round: Sequence[int] | int | None = None) -> AcceptanceStats:
    """Compute :class:`AcceptanceStats` from accepted counts (ints or round-log objects).

    ``num_positions`` defaults to the rounds' ``max_accept`` attribute, else to the largest count.
    ``draft_tokens_per_round`` defaults to each round's ``len(drafted)`` (vLLM's ``num_draft_tokens``),
    else to ``num_positions`` per round (a chain).
    """
    rounds = list(rounds)
    accepted = _accepted_counts(rounds)
    if num_positions is None:
        caps = [getattr(r, "max_accept", None) for r in rounds]
        num_positions = max([c for c in caps if c is not None] or accepted or [0])
    if any(a < 0 or a > num_positions for a in accepted):
        raise ValueError(f"accepted counts must lie in [0, {num_positions}] (num_positions); found "
                         f"{sorted(set(a for a in accepted if a < 0 or a > num_positions))}")
    if draft_tokens_per_round is None:
        drafted = [len(r.drafted) if hasattr(r, "drafted") else num_positions for r in rounds]
    elif isinstance(draft_tokens_per_round, int):
        drafted = [draft_tokens_per_round] * len(rounds)
    else:
        drafted = list(draft_tokens_per_round)
    n = len(accepted)
    acc_pos = [sum(a >= k for a in accepted) for k in range(1, num_positions + 1)]
    reached = [n] + acc_pos[:-1]
    cond = [a / r if r else float("nan") for a, r in zip(acc_pos, reached)]
    surv = [a / n if n else float("nan") for a in acc_pos]
    return AcceptanceStats(num_positions=num_positions, rounds=n, num_draft_tokens=int(sum(drafted)),
                           num_accepted_tokens=int(sum(accepted)), accepted_per_pos=tuple(acc_pos),
                           reached_per_pos=tuple(reached), conditional=tuple(cond), survival=tuple(surv))


# ---------------------------------------------------------------------------- uncertainty
# Acceptance varies far more between prompts than between rounds of one prompt (code vs prose, a
# repeated boilerplate block), so intervals resample prompts, never rounds: a percentile bootstrap
# over the units given, ratios of sums (tau = tokens / rounds) recomputed per resample.

@dataclass(frozen=True)
class Interval:
    """A point estimate and its bootstrap interval at ``level`` over ``units`` resampled units."""

    value: float
    low: float
    high: float
    level: float
    units: int

    def __contains__(self, x: float) -> bool:
        return self.low <= x <= self.high

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"

    @property
    def single(self) -> bool:
        """Resampled from one unit: the bootstrap collapses to the point, and the interval supports no ranking."""
        return self.units is not None and self.units < 2

    def sign(self) -> int:
        """+1 / -1 when the whole interval lies above / below 0, else 0 (within noise; also from a single unit)."""
        if self.single:
            return 0
        return 1 if self.low > 0 else -1 if self.high < 0 else 0


@functools.lru_cache(maxsize=64)
def _weights(units: int, resamples: int, seed: int):
    """The bootstrap's resample counts [R, units]: a function of its arguments alone, so drawn once (doctor
    compares thousands of pairs on the same prompts) and handed out read-only."""
    import numpy as np
    rng = np.random.default_rng(seed)
    w = rng.multinomial(units, [1.0 / units] * units, size=resamples).astype(float)
    w.flags.writeable = False
    return w


def _in_canonical_order(*arrays):
    """The units sorted by their values: the same prompts listed in another order (another draw that ends
    on the same pool) then get the same resamples, so an interval depends on the prompts, not their order."""
    import numpy as np

    order = np.lexsort(arrays[::-1])
    return [a[order] for a in arrays]


def bootstrap_ratio(num: Sequence[float], den: Sequence[float], *, level: float = 0.95, resamples: int = 2000,
                    seed: int = 0) -> Interval:
    """``sum(num) / sum(den)`` with a bootstrap interval over the units (one entry per prompt)."""
    import numpy as np

    num, den = np.asarray(num, float), np.asarray(den, float)
    if num.shape != den.shape or num.ndim != 1 or len(num) == 0 or den.sum() <= 0:
        raise ValueError(f"bootstrap_ratio needs equal-length, non-empty per-unit sums with a positive total "
                         f"denominator; found {num.shape} and {den.shape} (denominator total {den.sum()})")
    num, den = _in_canonical_order(num, den)
    w = _weights(len(num), resamples, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = (w @ num) / (w @ den)
    lo, hi = np.nanquantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(num.sum() / den.sum()), float(lo), float(hi), level, len(num))


def _paired(stat, arrays, name: str, level: float, resamples: int, seed: int) -> Interval:
    """``stat(num_a, den_a, num_b, den_b)`` of the unit sums, with every resample drawing the same units for
    a and b (paired)."""
    import numpy as np

    arrays = [np.asarray(x, float) for x in arrays]
    if len({a.shape for a in arrays}) != 1 or arrays[0].ndim != 1 or len(arrays[0]) == 0:
        raise ValueError(f"{name} needs four equal-length per-unit arrays (the same units)")
    arrays = _in_canonical_order(*arrays)
    w = _weights(len(arrays[0]), resamples, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        boot = stat(*(w @ a for a in arrays))
    lo, hi = np.nanquantile(boot, [(1 - level) / 2, (1 + level) / 2])
    return Interval(float(stat(*(a.sum() for a in arrays))), float(lo), float(hi), level, len(arrays[0]))


def bootstrap_ratio_difference(num_a, den_a, num_b, den_b, *, level: float = 0.95, resamples: int = 2000,
                               seed: int = 0) -> Interval:
    """``ratio_a - ratio_b`` measured on the same units (paired: each resample draws the same prompts for
    both), which separates two hypotheses far better than comparing their separate intervals."""
    return _paired(lambda na, da, nb, db: na / da - nb / db, (num_a, den_a, num_b, den_b),
                   "bootstrap_ratio_difference", level, resamples, seed)


def bootstrap_rate_ratio(num_a, den_a, num_b, den_b, *, level: float = 0.95, resamples: int = 2000,
                         seed: int = 0) -> Interval:
    """``(sum(num_a) / sum(den_a)) / (sum(num_b) / sum(den_b))`` on the same units (paired): a speedup
    of rate a over rate b (tokens over seconds), each unit one prompt decoded by both side by side."""
    return _paired(lambda na, da, nb, db: (na / da) / (nb / db), (num_a, den_a, num_b, den_b),
                   "bootstrap_rate_ratio", level, resamples, seed)


def tau_interval(accepted_per_prompt: Sequence[Iterable], **kw) -> Interval:
    """tau with a bootstrap interval over prompts; ``accepted_per_prompt``: each prompt's rounds
    (accepted counts or round-log objects)."""
    counts = [_accepted_counts(r) for r in accepted_per_prompt]
    return bootstrap_ratio([sum(c) + len(c) for c in counts], [len(c) for c in counts], **kw)


def tau_difference(rounds_a: Sequence[Iterable], rounds_b: Sequence[Iterable], **kw) -> Interval:
    """tau(a) - tau(b) over the same prompts (paired bootstrap); each argument: each prompt's rounds."""
    a = [_accepted_counts(r) for r in rounds_a]
    b = [_accepted_counts(r) for r in rounds_b]
    return bootstrap_ratio_difference([sum(c) + len(c) for c in a], [len(c) for c in a],
                                      [sum(c) + len(c) for c in b], [len(c) for c in b], **kw)


def survival_from_conditional(conditional: Sequence[float]) -> list[float]:
    """a_k = prod_{j<=k} c_j."""
    out, run = [], 1.0
    for c in conditional:
        run *= c
        out.append(run)
    return out


def expected_tau(conditional: Sequence[float]) -> float:
    """E[tau] = 1 + sum_k prod_{j<=k} c_j (bonus token included)."""
    return 1.0 + sum(survival_from_conditional(conditional))


def simulated_acc_len(acc: Sequence[float]) -> float:
    """SpecForge ``simulated_acc_len = acc_0 + acc_0*acc_1 + ...``: bonus token NOT included.

    SpecForge feeds its unconditional per-depth accuracies ``acc_i`` here; some forks start the sum
    at 1 (bonus included), so compare like with like: ``1 + simulated_acc_len`` is the tau scale.
    """
    return sum(survival_from_conditional(acc))


def compare_definitions(stats: AcceptanceStats, specforge_acc: Sequence[float] | None = None) -> pd.DataFrame:
    """One table of the headline number as each engine would print it for the same log."""
    rows = [
        ("SGLang accept length", stats.tau, "(accepted + rounds) / rounds; bonus included"),
        ("EAGLE #195 accept length", stats.tau, "mean(accepted + 1) per verify step"),
        ("vLLM mean acceptance length", stats.vllm_mean_acceptance_length, "1 + accepted / num_drafts"),
        ("vLLM avg draft acceptance rate", stats.vllm_draft_acceptance_rate,
         "accepted / drafted tokens (printed in percent)"),
        ("1 + sum survival", stats.tau_from_survival, "identity check: equals tau on the same log"),
        ("SpecForge simulated_acc_len (loop c_k)", stats.specforge_simulated_acc_len,
         "sum prod c_j: bonus excluded, so tau - 1"),
    ]
    if specforge_acc is not None:
        rows.append(("SpecForge simulated_acc_len (acc_i)", simulated_acc_len(specforge_acc),
                     "from unconditional teacher-forced acc_i"))
    return pd.DataFrame(rows, columns=["definition", "value", "formula"]).set_index("definition")


def engine_log_lines(stats: AcceptanceStats, num_draft_tokens: int | None = None,
                     elapsed_s: float | None = None) -> dict[str, str]:
    """The acceptance part of each engine's periodic log line, as it would read for this log.

    Compare with your server's log to know which number is which. ``num_draft_tokens``: tokens
    verified per round, root included (SGLang's ``--speculative-num-draft-tokens``; default
    ``num_positions + 1``, a chain). ``elapsed_s``: the logging interval, for vLLM's throughputs.

    - SGLang ``Decode batch`` line (``scheduler.py``, later ``scheduler_metrics_mixin.py``):
      ``accept len`` = tau in every version. ``accept rate`` (added 2025-10, PRs #11441 / #11572)
      was ``(accepted + rounds) / (rounds * num_draft_tokens)`` = tau / num_draft_tokens until
      PR #23530 (2026-04) made it ``accepted / (rounds * (num_draft_tokens - 1))``, drafts only.
    - vLLM V1 ``SpecDecoding metrics`` line (``vllm/v1/spec_decode/metrics.py``): mean acceptance
      length = tau, per-position rates = survival a_k (not conditional), draft acceptance in percent.
    """
    m = num_draft_tokens if num_draft_tokens is not None else stats.num_positions + 1
    n, acc = stats.rounds, stats.num_accepted_tokens
    old_rate = (acc + n) / (n * m) if n else 0.0
    new_rate = acc / (n * (m - 1)) if n and m > 1 else 0.0
    sglang = f"Decode batch ... accept len: {stats.tau:.2f}, "
    rate = (lambda x: f"{x / elapsed_s:.2f}") if elapsed_s else (lambda x: "?")
    per_pos = ", ".join(f"{a:.3f}" for a in stats.survival)
    vllm = (f"SpecDecoding metrics: Mean acceptance length: {stats.vllm_mean_acceptance_length:.2f}, "
            f"Accepted throughput: {rate(acc)} tokens/s, Drafted throughput: {rate(stats.num_draft_tokens)} "
            f"tokens/s, Accepted: {acc} tokens, Drafted: {stats.num_draft_tokens} tokens, "
            f"Per-position acceptance rate: {per_pos}, "
            f"Avg Draft acceptance rate: {100 * stats.vllm_draft_acceptance_rate:.1f}%")
    return {
        "SGLang before 2025-10": sglang + "gen throughput (token/s): ...",
        "SGLang 2025-10 to PR #23530": sglang + f"accept rate: {old_rate:.2f}, gen throughput (token/s): ...",
        "SGLang from PR #23530": sglang + f"accept rate: {new_rate:.2f}, gen throughput (token/s): ...",
        "vLLM V1": vllm,
    }
