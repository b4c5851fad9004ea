"""The benchmark harness: plain and speculative decoding timed side by side in one run (machine noise
hits every case alike), each output checked against ``generate(do_sample=False)``.

Two speed definitions, both reported and named: **end to end** (every new token over prefill +
decoding, as ``generate`` is timed) and **decode** (tokens after the first over the rounds' time,
what the cost model prices). ``decode_sweep`` runs many cases over prompts (notebooks 05 and 06);
``run_benchmark`` one case with its cost model measured in the same window (``eagle3lab bench``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

import pandas as pd
import torch
from tqdm.auto import tqdm

from eagle3lab.analysis.cost_model import CostModel, break_even_tau, equivalent_alpha
from eagle3lab.analysis.timing import measure_costs
from eagle3lab.bundled import display_path
from eagle3lab.decoding.lossless import LosslessCheck, lossless_check
from eagle3lab.decoding.speculative import (
    draft_for,
    hf_generate,
    speculative_generate,
    target_greedy,
    tree_settings,
)
from eagle3lab.engines.acceptance import (
    Interval,
    acceptance_stats,
    bootstrap_rate_ratio,
    tau_difference,
    tau_interval,
)
from eagle3lab.errors import bad_input
from eagle3lab.models.target import as_target


def finite_json(obj):
    """NaN / inf (e.g. c_k at a position no round reached) -> None, so the object dumps to strict JSON."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def pooled_speed_ratios(sweeps, case: str) -> dict:
    """``case`` over no speculation, decode and end to end, with the paired interval over prompts: every
    repetition's units in one sweep (``DecodeSweep.speed_ratio`` sums a prompt's repetitions into one unit)."""
    first = sweeps[0]
    pooled = replace(first, timed={kind: {n: [u for sw in sweeps for u in sw.timed[kind][n]] for n in names}
                                   for kind, names in first.timed.items()})
    return {kind: pooled.speed_ratio(case, kind=kind) for kind in ("decode", "e2e")}


def run_benchmark(target, draft, prompts, *, num_steps: int = 5, topk: int = 1, num_draft_tokens: int | None = None,
                  profile=None, max_new_tokens: int = 64, repeats: int = 3, measure_repeats: int = 5,
                  progress: bool = False) -> dict:
    """Baseline and speculative decoding timed side by side in one run, plus the cost model.

    Each repetition is one ``decode_sweep`` (``transformers`` ``generate(do_sample=False)``, the plain
    greedy loop and the speculative loop, interleaved so that machine noise hits all three alike),
    then the cost model measured in the same time window, which projects that repetition's decode
    speedup. Reported numbers are medians over repetitions (rates: tokens / seconds summed over
    prompts); ``projection.error`` is the median of the per-repetition errors. ``speed_ratio`` (decode and
    e2e) is the speedup over the greedy loop with its paired bootstrap interval over prompts, every
    repetition pooled (``DecodeSweep.speed_ratio``), and ``acceptance.tau_low`` / ``tau_high`` tau's
    interval over prompts: what a verdict is worded from (``verdicts.speed_word``), never a median.
    """
    tgt = as_target(target)
    d = draft_for(draft, tgt, profile)
    settings, warnings = tree_settings(num_steps, topk, num_draft_tokens)
    K, k, M = settings["num_steps"], settings["topk"], settings["num_draft_tokens"]
    prompts = list(prompts)
    case = {"speculative": dict(draft=d, num_steps=K, topk=k, num_draft_tokens=M)}
    sizes = sorted({1, 2, 3, 4, 6, 8, 12, 16, K + 1, M})
    sweeps, projections = [], []
    for rep in tqdm(range(repeats), desc="benchmark", disable=not progress):
        sw = decode_sweep(tgt, case, prompts, max_new_tokens=max_new_tokens, progress=False)
        if rep == 0:  # greedy: every repetition produces the same rounds
            stats = sw.stats("speculative")
            rounds = [r for out in sw.results["speculative"] for r in out.rounds]
            emitted = sum(len(r.emitted) for r in rounds) / len(rounds) if rounds else 1.0
        costs = measure_costs(tgt, d, context_len=sw.context_len, verify_sizes=sizes, settings=((K, k, M),),
                              repeats=measure_repeats)
        proj = costs.project(stats, K, k, M, tokens_per_round=emitted)
        sweeps.append(sw)
        projections.append((costs, proj, sw.decode_speedup("speculative")))
    med = statistics.median
    tps = {"generate": med(sw.generate_tps for sw in sweeps),
           "greedy": med(sw.e2e_tps[NO_SPECULATION] for sw in sweeps),
           "greedy_decode": med(sw.decode_tps[NO_SPECULATION] for sw in sweeps),
           "spec": med(sw.e2e_tps["speculative"] for sw in sweeps),
           "spec_decode": med(sw.decode_tps["speculative"] for sw in sweeps)}
    measured_speedup = med(m for _, _, m in projections)
    context = sweeps[0].context_len
    speed = pooled_speed_ratios(sweeps, "speculative")
    tau = sweeps[0].tau_interval("speculative")
    return {
        "target": display_path(tgt.path), "profile": d.profile.name, "aux_resid": list(d.aux_resid),
        "norm_before_residual": d.settings.norm_before_residual,
        "device": str(tgt.device), "dtype": str(tgt.dtype).replace("torch.", ""), "threads": torch.get_num_threads(),
        "settings": {**settings, "max_new_tokens": max_new_tokens, "prompts": len(prompts), "repeats": repeats},
        "warnings": [w.text for w in warnings],   # tree_settings' (codes in SpecResult.warnings), the words printed
        "tokens_per_s": {"generate": tps["generate"], "greedy_loop": tps["greedy"],
                         "greedy_loop_decode": tps["greedy_decode"], "speculative": tps["spec"],
                         "speculative_decode": tps["spec_decode"]},
        "speedup": {"vs_generate": tps["spec"] / tps["generate"], "vs_greedy_loop": tps["spec"] / tps["greedy"],
                    "decode_vs_greedy_loop": measured_speedup},
        # over the plain greedy loop, paired bootstrap over prompts (DecodeSweep.speed_ratio), per speed definition
        "speed_ratio": {kind: {"value": i.value, "low": i.low, "high": i.high, "level": i.level, "units": i.units}
                        for kind, i in speed.items()},
        # identical / tie flips / bugs against generate (decoding.lossless; to_json names the fields)
        "lossless": sweeps[0].lossless("speculative").to_json(),
        "acceptance": {"tau": stats.tau, "tau_low": tau.low, "tau_high": tau.high, "tau_level": tau.level,
                       "vllm_mean_acceptance_length": stats.vllm_mean_acceptance_length,
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


GENERATE = "generate"   # ``transformers`` ``generate``'s (tokens, seconds) units in ``DecodeSweep.timed["e2e"]``
NO_SPECULATION = "no speculation"   # the plain greedy loop's case name: its key in the rates, its row's label


@dataclass
class DecodeSweep:
    """Output of :func:`decode_sweep`: every case's decoding of every prompt, timed side by side.

    Rates are medians over repetitions of tokens / seconds summed over prompts, under both speed
    definitions: ``e2e_tps`` (every new token over prefill + decoding) and ``decode_tps`` (tokens after
    the first over decoding time, what the cost model prices). Both hold "no speculation" (the plain
    greedy loop) too; ``generate_tps`` is ``transformers`` ``generate`` timed whole, in the same rounds.
    """

    results: dict[str, list]          # case -> SpecResult per prompt (first repetition)
    reference: list[list[int]]        # transformers generate(do_sample=False) tokens per prompt
    decode_tps: dict[str, float]      # case and "no speculation" -> median decode tokens/s
    e2e_tps: dict[str, float]         # case and "no speculation" -> median end-to-end tokens/s
    context_len: int                  # mean prompt length + half the new tokens: where rounds ran
    generate_tps: float = float("nan")  # transformers generate(do_sample=False), end to end, interleaved too
    # kind ("decode" / "e2e") -> case -> (tokens, seconds) of each (repetition, prompt), repetition by
    # repetition, in the same order for every case: what a speed interval resamples, per prompt
    timed: dict | None = None
    # greedy case -> its outputs against the reference: identical, tie flips, bugs (decoding.lossless)
    checks: dict[str, LosslessCheck] | None = None

    def settings(self, name: str) -> dict:
        return self.results[name][0].settings

    def stats(self, name: str):
        """Acceptance of one case, pooled over prompts (``AcceptanceStats``)."""
        res = self.results[name]
        return acceptance_stats([r for out in res for r in out.rounds], num_positions=self.settings(name)["num_steps"])

    def tau_interval(self, name: str, level: float = 0.95):
        """tau of one case with a bootstrap interval over prompts (``engines.acceptance.Interval``)."""
        return tau_interval([out.rounds for out in self.results[name]], level=level)

    def tau_difference(self, a: str, b: str, level: float = 0.95):
        """tau(a) - tau(b) with a paired bootstrap interval over the prompts both decoded."""
        return tau_difference([o.rounds for o in self.results[a]], [o.rounds for o in self.results[b]], level=level)

    def identical(self, name: str) -> int | None:
        """Prompts whose output equals ``generate(do_sample=False)`` token for token; None when sampled."""
        if self.settings(name)["temperature"] > 0:
            return None
        return sum(out.tokens == ref for out, ref in zip(self.results[name], self.reference))

    def lossless(self, name: str) -> LosslessCheck | None:
        """The lossless check of a greedy case (identical, tie flips, bugs); None when sampled or not checked."""
        return (self.checks or {}).get(name)

    def decode_speedup(self, name: str) -> float:
        """Over the plain greedy loop; NaN for a sweep run without it (``baseline=False``)."""
        return self.decode_tps[name] / self.decode_tps.get(NO_SPECULATION, float("nan"))

    def e2e_speedup(self, name: str) -> float:
        return self.e2e_tps[name] / self.e2e_tps.get(NO_SPECULATION, float("nan"))

    def speed_ratio(self, a: str, b: str = NO_SPECULATION, kind: str = "decode", level: float = 0.95) -> Interval:
        """rate(a) / rate(b) (a speedup when b is "no speculation") with a paired bootstrap interval over the
        prompts both decoded side by side; ``kind``: "decode" or "e2e" (``b = GENERATE``, ``transformers``
        ``generate`` timed whole, is end to end only). A prompt's repetitions decode the same
        tokens, so they are one unit (their tokens and seconds summed), not independent draws."""
        if not self.timed or a not in self.timed[kind] or b not in self.timed[kind]:
            raise bad_input("decode_sweep", f"case {a!r} / {b!r}", f"cases timed in this sweep ({kind})",
                            sorted(self.timed[kind]) if self.timed else "no per-prompt timings")
        (tok_a, sec_a), (tok_b, sec_b) = (self._per_prompt(self.timed[kind][n]) for n in (a, b))
        return bootstrap_rate_ratio(tok_a, sec_a, tok_b, sec_b, level=level)

    def _per_prompt(self, units: list) -> tuple[list, list]:
        """(tokens, seconds) per prompt, summed over repetitions (``timed`` lists repetition by repetition)."""
        n = len(self.reference)
        return ([sum(u[0] for u in units[i::n]) for i in range(n)], [sum(u[1] for u in units[i::n]) for i in range(n)])

    def table(self) -> pd.DataFrame:
        """One row per case: settings, tau (and its cap), both rates and speedups, lossless count."""
        rows = []
        for name in self.results:
            s, st, same = self.settings(name), self.stats(name), self.identical(name)
            rows.append({"case": name, "profile": s["profile"], "num_steps": s["num_steps"], "topk": s["topk"],
                         "verified": s["num_draft_tokens"], "temperature": s["temperature"], "rounds": st.rounds,
                         "tau": st.tau, "max_tau": s["num_steps"] + 1,
                         "e2e_tps": self.e2e_tps[name], "e2e_speedup": self.e2e_speedup(name),
                         "decode_tps": self.decode_tps[name], "decode_speedup": self.decode_speedup(name),
                         "identical": "sampled" if same is None else f"{same}/{len(self.reference)}",
                         **self._divergence_counts(name)})
        return pd.DataFrame(rows).set_index("case")

    def _divergence_counts(self, name: str) -> dict:
        """A greedy case's outputs that differ from the reference: tie flips and bugs (None: sampled)."""
        check = self.lossless(name)
        return {"tie_flips": len(check.ties) if check else None, "bugs": len(check.bugs) if check else None}

    def rates(self) -> pd.DataFrame:
        """Both rates of "no speculation" and of every case, side by side (tokens/s)."""
        return pd.DataFrame({"e2e_tps": self.e2e_tps, "decode_tps": self.decode_tps}).rename_axis("case")

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
                         "measured_speedup": self.decode_speedup(name)})
        df = pd.DataFrame(rows).set_index("case")
        df["error_%"] = 100 * (df.projected_speedup / df.measured_speedup - 1)
        return df


def decode_sweep(target, cases: dict[str, dict], prompts, *, max_new_tokens: int = 48, repeats: int = 1,
                 baseline: bool = True, progress: bool = True) -> DecodeSweep:
    """Decode every prompt with plain greedy decoding and with every case, interleaved.

    ``cases``: name -> keyword arguments of ``speculative_generate`` (``draft`` required; ``num_steps``,
    ``topk``, ``num_draft_tokens``, ``temperature``, ``profile``, ``seed``). Interleaving per prompt
    makes machine noise hit every case alike; decode rates (tokens after the first over the rounds'
    time) and end-to-end rates (every token over prefill + decoding) are medians over ``repeats``
    (``DecodeSweep.rates``), ``generate(do_sample=False)`` timed in the same rounds. The first
    repetition's outputs are kept, with ``generate``'s as the lossless reference, and each greedy case's are
    checked against it (``DecodeSweep.lossless``: identical, tie flips, bugs; one target forward per differing
    prompt). ``baseline=False`` skips the plain greedy loop ("no speculation": about a quarter of the time of a
    two-case sweep) when only the cases and ``generate``'s rate are wanted; its speedups are then NaN.
    """
    tgt = as_target(target)
    prompts = list(prompts)
    if not prompts or not cases:
        raise bad_input("decode_sweep", "prompts / cases", "at least one prompt and one case",
                        f"{len(prompts)} prompts, {len(cases)} cases")
    taken = {GENERATE, NO_SPECULATION} & set(cases)
    if taken:   # the sweep's own rows: a case of that name would share their timings
        raise bad_input("decode_sweep", "cases", f"case names other than {GENERATE!r} and 'no speculation'",
                        sorted(taken))
    hf_generate(tgt, prompts[0], 8)    # warm-up: first calls pay one-off allocation costs
    if baseline:
        target_greedy(tgt, prompts[0], 8)
    for kw in cases.values():
        speculative_generate(tgt, prompt=prompts[0], **{**kw, "max_new_tokens": 8})
    reference: list[list[int]] = []
    results: dict[str, list] = {name: [] for name in cases}
    names = [NO_SPECULATION, *cases] if baseline else list(cases)
    rates: dict[str, dict[str, list[float]]] = {"decode": {n: [] for n in names}, "e2e": {n: [] for n in names}}
    timed: dict[str, dict[str, list[tuple[int, float]]]] = {kind: {n: [] for n in names} for kind in rates}
    timed["e2e"][GENERATE] = []        # generate is timed whole: end to end only
    generate_rates: list[float] = []
    bar = tqdm(total=repeats * len(prompts), desc="decode sweep", disable=not progress)
    for rep in range(repeats):
        done = {kind: dict.fromkeys(names, (0, 0.0)) for kind in rates}
        generated = (0, 0.0)
        for prompt in prompts:
            ref = hf_generate(tgt, prompt, max_new_tokens)    # timed whole, prefill included
            generated = _add(generated, len(ref.tokens), ref.decode_s)
            timed["e2e"][GENERATE].append((len(ref.tokens), ref.decode_s))   # speed_ratio(case, GENERATE, "e2e")
            outs = {NO_SPECULATION: target_greedy(tgt, prompt, max_new_tokens)} if baseline else {}
            for name, kw in cases.items():
                outs[name] = speculative_generate(tgt, prompt=prompt, **{**kw, "max_new_tokens": max_new_tokens})
            if rep == 0:
                reference.append(ref.tokens)
                for name in cases:
                    results[name].append(outs[name])
            for name, out in outs.items():
                unit = {"decode": (len(out.tokens) - 1, out.decode_s),
                        "e2e": (len(out.tokens), out.prefill_s + out.decode_s)}
                for kind, (n, secs) in unit.items():
                    done[kind][name] = _add(done[kind][name], n, secs)
                    timed[kind][name].append((n, secs))
            bar.update()
        for kind, per_name in done.items():
            for name, (n, secs) in per_name.items():
                rates[kind][name].append(n / secs if secs > 0 else float("nan"))
        generate_rates.append(generated[0] / generated[1] if generated[1] > 0 else float("nan"))
    bar.close()
    checks = {name: lossless_check(tgt, [o.prompt_ids for o in outs], [o.tokens for o in outs], reference)
              for name, outs in results.items() if outs[0].settings["temperature"] == 0}
    first = next(iter(results.values()))
    context = round(statistics.mean(len(o.prompt_ids) + len(o.tokens) / 2 for o in first))
    med = {kind: {name: statistics.median(v) for name, v in per_name.items()} for kind, per_name in rates.items()}
    return DecodeSweep(results=results, reference=reference, context_len=context, decode_tps=med["decode"],
                       e2e_tps=med["e2e"], generate_tps=statistics.median(generate_rates), timed=timed,
                       checks=checks)


def _add(acc: tuple[int, float], tokens: int, seconds: float) -> tuple[int, float]:
    return acc[0] + tokens, acc[1] + seconds


def recorded_benchmarks(model_dir, aux_resid=None, num_steps: int | None = None) -> list[dict]:
    """Runs that ``benchmarks/bench_decode.py --record`` wrote to ``bench.json`` beside a draft, optionally
    only the what-if with these ``aux_resid`` overrides and this chain length; [] when there is no file."""
    import json
    from pathlib import Path

    path = Path(model_dir) / "bench.json"
    if not path.exists():
        return []
    try:
        runs = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise bad_input(path, None, "the JSON object bench_decode.py --record writes", f"unreadable ({err})") from None
    if not isinstance(runs, dict):
        raise bad_input(path, None, "a JSON object of runs by case name", type(runs).__name__)
    return [r for r in runs.values()
            if (aux_resid is None or r.get("overrides", {}).get("aux_resid") == [int(k) for k in aux_resid])
            and (num_steps is None or r.get("settings", {}).get("num_steps") == num_steps)]
