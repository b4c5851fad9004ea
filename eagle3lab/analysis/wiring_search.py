"""Which target states, and which first-layer rule, were a draft's weights trained on? Found from the
weights and measurements alone, with intervals, and said plainly when the answer is only a set.

Every state a draft could be fed is captured once (``models.state_bank``); a hypothesis (fc wiring,
switch settings) then costs only draft passes (``decoding.evaluate.evaluate_on_bank``), scored by
the cross-entropy of the draft against the target over the draft vocabulary (low variance, what
training minimised) and by teacher-forced chain tau. The search is coordinate descent: from every
engine's reading of the written ids and from the engines' default, one slot at a time is moved to
whichever point (resid[0..N] or the final post-norm state) scores best, and the switches
(``Eagle3Draft.variants``) are re-chosen at each wiring, until nothing improves. A cycle costs
``variants + num_aux * (N + 1)`` evaluations, so the search grows linearly in N where brute force
grows as ``(N + 2) ** num_aux``. The result holds every hypothesis within noise of the best (paired
bootstrap over prompts of cross-entropy and of tau: a hypothesis whose tau is not below the best's
within noise is not ranked below it; each hypothesis is tested at the given level with no correction for
how many are compared, so the set leans large, never small), each slot's sensitivity, how each engine serves the checkpoint, and the ids
each engine needs to serve the best wiring.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace

import pandas as pd
from tqdm.auto import tqdm

from eagle3lab.analysis.switches import SWITCHES, cannot_apply, config_key
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio, bootstrap_ratio_difference
from eagle3lab.engines.layer_ids import default_resid, nearest_servable
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.errors import Eagle3LabError, bad_input
from eagle3lab.models.state_bank import FINAL_NORMED, StateBank, capture_bank, point_name

# sequences per draft batch: the bank's sequences differ in length (a long prompt beside a short one), and
# small batches of similar length pad little (2 per batch: 2.3x faster than 8 on the bundled case's bank)
EVAL_BATCH = 2
NO_AUX = ()   # no aux states: the final post-norm state fed past fc (EAGLE algorithm on an EAGLE-3 draft)
SERVERS = ("sglang", "vllm")


def wiring_text(wiring) -> str:
    if wiring == NO_AUX:
        return "no aux states (final post-norm, fc skipped)"
    return "[" + ", ".join(point_name(p) for p in wiring) + "]"


def settings_text(variant: dict) -> str:
    on = [k for k in SWITCHES if k != "recycle_postnorm" and variant.get(k)]
    on.append("recycle post-norm" if variant.get("recycle_postnorm") else "recycle pre-norm")
    return ", ".join(on)


def key_of(wiring, variant) -> tuple:
    """A hypothesis' key: (wiring, sorted switch items), the same whatever order a variant was written in."""
    return tuple(wiring), tuple(sorted(variant.items()))


class Scorer:
    """The one scorer of wirings: memoised (wiring, variant) -> ``BankScore`` of ``draft`` on one bank
    (teacher-forced chain acceptance, ``decoding.evaluate.evaluate_on_bank``); ``evaluations`` counts draft
    evaluations. The strategies sit beside it: a named list (``diagnosis.score_wirings``,
    ``hypotheses.compare_wirings``), a search (``search_wiring``) and doctor's choice (``doctor.fix_choice``).

    ``into``: a dict each new score is also written to (doctor keeps the served view's scores over the
    search's there). :meth:`grown` scores the same draft on a bank grown by more prompts, each hypothesis
    scored before re-evaluated on the added prompts only."""

    def __init__(self, bank: StateBank, draft, num_steps: int, progress=None, *, into: dict | None = None):
        self.bank, self.draft, self.num_steps, self.progress = bank, draft, num_steps, progress
        self.scores: dict = {}
        self.evaluations = 0
        self.into = into
        self._before: dict = {}
        self._added = None

    def __call__(self, wiring, variant):
        key = key_of(wiring, variant)
        if key not in self.scores:
            self.scores[key] = self._evaluate(key)
            self.evaluations += 1
            if self.into is not None:
                self.into[key] = self.scores[key]
            if self.progress is not None:
                self.progress.update(1)
        return self.scores[key]

    def _evaluate(self, key):
        from eagle3lab.decoding.evaluate import evaluate_on_bank

        wiring, draft = key[0], self.draft.rewired(**dict(key[1]))
        if key in self._before:    # scored on the smaller bank: only the added prompts
            return joined(self._before[key], evaluate_on_bank(self._added, draft, wiring, self.num_steps,
                                                              batch_size=EVAL_BATCH))
        return evaluate_on_bank(self.bank, draft, wiring, self.num_steps, batch_size=EVAL_BATCH)

    def grown(self, bank: StateBank, added: StateBank, *, into: dict | None = None) -> Scorer:
        """This draft on ``bank``: this scorer's bank followed by the prompts of ``added``."""
        out = Scorer(bank, self.draft, self.num_steps, self.progress, into=into)
        out._before, out._added = self.scores, added
        return out

    def ce(self, wiring, variant) -> float:
        return self(wiring, variant).ce


def joined(first, added):
    """One hypothesis' scores over two sets of prompts (a prompt's score does not depend on the others in the
    bank: right padding, and the draft sees one sequence at a time), in bank order."""
    return replace(first, ce_sum=first.ce_sum + added.ce_sum, ce_n=first.ce_n + added.ce_n,
                   accept=first.accept + added.accept)


def settings_of(d) -> dict:
    """The switches a draft view runs with, as ``rewired`` keywords (what a variant is: the draft family's
    own switches, ``d.variants()``, e.g. a Qwen3 draft's q/k norms)."""
    return {k: getattr(d.settings, k) for k in d.variants()[0]}


def served_views(draft, num_layers: int, arch: str | None = None, engine_versions: dict | None = None,
                 engine_platforms: dict | None = None) -> dict:
    """Profile name -> the draft as that engine runs it, for every engine that feeds it ``num_aux`` states.

    ``engine_versions``: profile name -> the build whose reading of the ids to use (layer_ids'
    ``engine_version``); a profile not named reads them as the newest code read. ``engine_platforms``:
    profile name -> "cpu" or "cuda" (vLLM's runner follows it), where the profiles know the platform."""
    out = {}
    for name, profile in PROFILES.items():
        if (engine_versions or {}).get(name) is not None:
            profile = replace(profile, engine_version=engine_versions[name])
        if (engine_platforms or {}).get(name) is not None and hasattr(profile, "engine_platform"):
            profile = replace(profile, engine_platform=engine_platforms[name])
        d = draft.under(profile).bound(num_target_layers=num_layers, target_arch=arch)
        try:
            wiring = tuple(d.aux_resid)
        except (ValueError, Eagle3LabError):   # this engine cannot serve the written ids at all
            continue
        if len(wiring) == draft.config.num_aux:
            out[name] = d
    return out


def served_hypotheses(draft, bank: StateBank, arch: str | None = None) -> dict[str, tuple]:
    """Profile name -> (wiring, settings) that engine runs the checkpoint with (restricted to the points
    the bank holds)."""
    return {name: (tuple(d.aux_resid), settings_of(d)) for name, d in served_views(draft, bank.num_layers, arch).items()
            if all(p in bank.states for p in d.aux_resid)}


def _descend(score: Scorer, wiring, variant, points, variants, max_cycles: int, budget: int | None = None):
    """Coordinate descent from (wiring, variant) on cross-entropy; returns the local optimum (or where it
    stood when ``score.evaluations`` reached ``budget``)."""
    best = score.ce(wiring, variant)
    for _ in range(max_cycles):
        if budget is not None and score.evaluations >= budget:
            break
        moved = False
        for v in variants:
            if (c := score.ce(wiring, v)) < best:
                best, variant, moved = c, v, True
        for slot in range(len(wiring)):
            for p in points:
                trial = wiring[:slot] + (p,) + wiring[slot + 1:]
                if (c := score.ce(trial, variant)) < best:
                    best, wiring, moved = c, trial, True
        if not moved:
            break
    return wiring, variant


@dataclass
class WiringSearch:
    """What ``search_wiring`` found. ``table``: every hypothesis scored, best first, with intervals and
    whether it is within noise of the best; ``slots``: each slot's sensitivity at the best; ``served``:
    how each engine profile runs the checkpoint; ``fixes``: what each server must be given."""

    table: pd.DataFrame
    slots: pd.DataFrame
    served: pd.DataFrame
    fixes: pd.DataFrame
    best: dict
    identifiable: bool
    reason: str
    evaluations: int
    brute_force: int
    num_layers: int
    source: str
    level: float
    extra: dict = field(default_factory=dict)

    @property
    def best_set(self) -> pd.DataFrame:
        return self.table[self.table["within_noise"]]

    def summary(self) -> str:
        b = self.best
        verdict = "identified" if self.identifiable else "NOT identifiable"
        return (f"{verdict}: best {wiring_text(b['wiring'])} with {settings_text(b['variant'])}, "
                f"tau {b['tau']}, cross-entropy {b['ce']}; {self.reason} "
                f"({self.evaluations} draft evaluations, brute force {self.brute_force}; states from {self.source})")


def _diffs(s, b, level: float):
    """Paired intervals (same prompts resampled) of cross-entropy and tau, hypothesis minus best."""
    return (bootstrap_ratio_difference(s.ce_sum, s.ce_n, b.ce_sum, b.ce_n, level=level),
            bootstrap_ratio_difference(*s.tau_sums, *b.tau_sums, level=level))


def close_to(s, b, level: float = 0.95) -> bool:
    """Score ``s`` within noise of the best's ``b``: its cross-entropy not above the best's, or its tau not
    below it (paired intervals)."""
    if s is b:
        return True
    d_ce, d_tau = _diffs(s, b, level)
    return d_ce.low <= 0.0 or d_tau.high >= 0.0


def _close(score: Scorer, best_key, wiring, variant, level: float) -> bool:
    if key_of(wiring, variant) == best_key:
        return True
    return close_to(score(wiring, variant), score.scores[best_key], level)


def _row(score: Scorer, wiring, variant, best_key, level: float, why: str) -> dict:
    s = score(wiring, variant)
    tau = bootstrap_ratio(*s.tau_sums, level=level)
    ce = bootstrap_ratio(s.ce_sum, s.ce_n, level=level)
    diff, d_tau = _diffs(s, score.scores[best_key], level)
    stats = s.stats
    row = {"wiring": wiring_text(wiring), "aux": tuple(wiring), "settings": settings_text(variant), "variant": dict(variant),
           **{k: variant[k] for k in SWITCHES},
           "ce": ce.value, "ce_low": ce.low, "ce_high": ce.high, "tau": tau.value, "tau_low": tau.low,
           "tau_high": tau.high, "ce_minus_best_low": diff.low, "ce_minus_best_high": diff.high,
           "tau_minus_best_low": d_tau.low, "tau_minus_best_high": d_tau.high,
           "within_noise": _close(score, best_key, wiring, variant, level), "why": why}
    row.update({f"c{k}": c for k, c in enumerate(stats.conditional, start=1)})
    return row


def search_wiring(target_or_bank, draft, sequences=None, *, prompt_lens=None, num_steps: int = 3,
                  max_cycles: int = 4, level: float = 0.95, max_set: int = 5, max_combinations: int = 64,
                  min_tau_gain: float = 0.05, arch: str | None = None, progress: bool = True,
                  max_evaluations: int | None = None) -> WiringSearch:
    """Search fc wirings and switch settings for the one ``draft``'s weights were trained on.

    ``target_or_bank``: a ``StateBank`` (from ``capture_bank`` or ``bank_from_dump``), or a target with
    ``sequences`` (token ids: prompt + the target's own continuation, e.g. ``greedy_dataset``) and
    ``prompt_lens``. Reads weights, config shapes and measurements only, never a training record.
    ``max_evaluations`` (default ``4 x N x num_aux``) bounds the search: the descents stop at three quarters
    of it, the combinations of equivalent points are scored only within it.
    ``identifiable`` is False when the best draft barely works (tau's interval does not clear
    1 + ``min_tau_gain``: an untrained draft) or when more than ``max_set`` wirings are within noise.
    """
    bank = _bank_for(target_or_bank, sequences, prompt_lens, progress)
    if max_cycles < 1:
        raise bad_input("search_wiring", "max_cycles", "at least 1", max_cycles)
    arch = arch or draft.target_arch     # DeepSeek-family targets read ids by another rule
    n, num_aux = bank.num_layers, draft.config.num_aux
    budget = max_evaluations or 4 * n * num_aux
    points = (*bank.points, FINAL_NORMED)
    variants = draft.variants()
    bar = tqdm(desc="wiring search (draft evaluations)", disable=not progress)
    score = Scorer(bank, draft, num_steps, progress=bar)
    served = served_hypotheses(draft, bank, arch)
    why = _starts(served, bank, num_aux, points, variants)
    for (wiring, items) in list(why):
        # the descents from every start share three quarters of the budget; the best's neighbourhood and
        # its equivalent combinations get the rest
        found = _descend(score, wiring, dict(items), points, variants, max_cycles, budget * 3 // 4)
        why.setdefault(key_of(*found), []).append("local optimum of the descent")
    if draft.config.hidden_size == bank.hidden_size:
        for v in variants:
            if v["norm_before_fc"] or v["fc_norm"]:   # fc is skipped: its norms cannot matter
                continue
            why.setdefault(key_of(NO_AUX, v), []).append("EAGLE algorithm flag: no aux states")
            score(NO_AUX, v)
    best_key, combos = _around_the_best(score, points, variants, max_cycles, max_combinations, budget, level)
    bar.close()

    by_key = {k: _row(score, k[0], dict(k[1]), best_key, level, "; ".join(why.get(k, ["descent step"])))
              for k in score.scores}
    table = pd.DataFrame(list(by_key.values())).sort_values("ce", kind="stable", ignore_index=True)
    best = by_key[best_key]
    best_wiring, best_variant = best_key[0], dict(best_key[1])
    identifiable, reason = _verdict(table, best, combos, min_tau_gain=min_tau_gain, max_set=max_set,
                                    max_combinations=max_combinations)
    best_info = {"wiring": best_wiring, "variant": best_variant,
                 "tau": Interval(best["tau"], best["tau_low"], best["tau_high"], level, len(bank.lengths)),
                 "ce": Interval(best["ce"], best["ce_low"], best["ce_high"], level, len(bank.lengths))}
    return WiringSearch(
        table=table, slots=_slots(by_key, best_wiring, best_variant, points), served=_served(by_key, served),
        fixes=_fixes(best_wiring, best_variant, n, arch), best=best_info, identifiable=identifiable,
        reason=reason, evaluations=score.evaluations, brute_force=len(variants) * len(points) ** num_aux,
        num_layers=n, source=bank.source, level=level, extra={"scores": score.scores, "best_key": best_key})


def _bank_for(target_or_bank, sequences, prompt_lens, progress: bool) -> StateBank:
    if isinstance(target_or_bank, StateBank):
        return target_or_bank
    if sequences is None:
        raise bad_input("search_wiring", "sequences", "token sequences to score on (with a target)", None,
                        "Pass greedy_dataset(target, prompts) output, or a StateBank.")
    return capture_bank(target_or_bank, sequences, prompt_lens, progress=progress)


def _starts(served: dict, bank: StateBank, num_aux: int, points, variants) -> dict[tuple, list[str]]:
    """Where the descents start, each with why: every engine's reading of the written ids, the engines'
    default, else points spread evenly."""
    starts: dict[tuple, list[str]] = {}
    for name, (wiring, variant) in served.items():
        starts.setdefault(key_of(wiring, variant), []).append(f"served by {name}")
    default = tuple(default_resid(bank.num_layers))
    if len(default) == num_aux and all(p in bank.states for p in default):
        starts.setdefault(key_of(default, variants[0]), []).append("engines' default")
    if not starts:
        first = tuple(points[min(i * len(points) // num_aux, len(points) - 1)] for i in range(num_aux))
        starts[key_of(first, variants[0])] = ["evenly spread start"]
    return starts


def _around_the_best(score: Scorer, points, variants, max_cycles: int, max_combinations: int, budget: int,
                     level: float) -> tuple[tuple, int]:
    """Score the best's neighbourhood and the combinations of its equivalent points until nothing better
    turns up: (the best key, how many combinations the last round's equivalent points make)."""
    for _ in range(max_cycles):   # until the best's neighbourhood holds nothing better
        best_key = min(score.scores, key=lambda k: score.scores[k].ce)
        best_wiring, best_variant = best_key[0], dict(best_key[1])
        _descend(score, best_wiring, best_variant, points, variants, 1)   # every neighbour of the best is scored
        # Slots rarely matter one at a time only: every combination of the points found equivalent in
        # each slot is scored too, so the set within noise is measured, not inferred.
        per_slot = [[p for p in points if _close(score, best_key, best_wiring[:i] + (p,) + best_wiring[i + 1:],
                                                 best_variant, level)] for i in range(len(best_wiring))]
        combos = math.prod(len(c) for c in per_slot)
        if 1 < combos <= max_combinations and score.evaluations + combos <= budget:
            for wiring in itertools.product(*per_slot):
                score(tuple(wiring), best_variant)
        if min(score.scores, key=lambda k: score.scores[k].ce) == best_key:
            return best_key, combos
    # out of cycles with a better hypothesis just found: report that one, its neighbourhood as scored
    return min(score.scores, key=lambda k: score.scores[k].ce), combos


def _verdict(table: pd.DataFrame, best: dict, combos: int, *, min_tau_gain: float, max_set: int,
             max_combinations: int) -> tuple[bool, str]:
    """Whether the search identified the wiring, and why (or why not), with how far the settings are known."""
    near = table[table["within_noise"]]
    wirings_near = sorted(set(near["aux"]), key=str)
    tau_low = float(best["tau_low"])
    rules = sorted({settings_text(dict(zip(SWITCHES, r))) for r in near[list(SWITCHES)].itertuples(index=False)})
    rule_note = f"; settings identifiable only up to {rules}" if len(rules) > 1 else "; settings identified"
    if tau_low <= 1.0 + min_tau_gain:
        identifiable, reason = False, (f"the best hypothesis barely drafts (tau interval low {tau_low:.3f} <= "
                                       f"{1 + min_tau_gain:.2f}): an untrained or broken draft, or states unlike "
                                       "any it was trained on")
    elif combos > max_combinations:
        identifiable, reason = False, (f"the slots' equivalent points combine into {combos} wirings (more than "
                                       f"{max_combinations} scored); see `slots` for which slot choices matter")
    elif len(wirings_near) > max_set:
        identifiable, reason = False, (f"{len(wirings_near)} wirings are within noise of the best (more than "
                                       f"{max_set}); see `slots` for which slot choices matter")
    else:
        identifiable, reason = True, f"{len(wirings_near)} wiring(s) within noise of the best"
    return identifiable, reason + rule_note


def _slots(by_key: dict, wiring, variant, points) -> pd.DataFrame:
    """Per slot of the best wiring: the points within noise of the best there, and the tau range."""
    rows = []
    for slot in range(len(wiring)):
        subs = [(p, by_key[k]) for p in points
                if (k := key_of(wiring[:slot] + (p,) + wiring[slot + 1:], variant)) in by_key]
        equal = [point_name(p) for p, r in subs if bool(r["within_noise"])]
        taus = [float(r["tau"]) for _, r in subs]
        rows.append({"slot": slot, "best": point_name(wiring[slot]), "equivalent": equal,
                     "tau_best": max(taus), "tau_worst": min(taus), "tau_drop": max(taus) - min(taus),
                     "tau_by_point": {point_name(p): round(float(r["tau"]), 4) for p, r in subs}})
    return pd.DataFrame(rows, columns=["slot", "best", "equivalent", "tau_best", "tau_worst", "tau_drop",
                                       "tau_by_point"]).set_index("slot")


def _served(by_key: dict, served: dict) -> pd.DataFrame:
    rows = []
    for name, (wiring, variant) in served.items():
        r = by_key[key_of(wiring, variant)]
        rows.append({"profile": name, "engine": PROFILES[name].label, "wiring": wiring_text(wiring), "aux": tuple(wiring),
                     "settings": settings_text(variant), "tau": r["tau"], "tau_low": r["tau_low"],
                     "tau_high": r["tau_high"], "ce": r["ce"], "within_noise_of_best": bool(r["within_noise"])})
    return pd.DataFrame(rows, columns=["profile", "engine", "wiring", "aux", "settings", "tau", "tau_low", "tau_high", "ce",
                                       "within_noise_of_best"]).set_index("profile")


def _fixes(wiring, variant, num_layers: int, arch: str | None) -> pd.DataFrame:
    """What each server must be given to run the best hypothesis, or why it cannot, as its newest code read
    answers (a build can differ: SGLang's llama.py feeds resid[0] only from 0.5.22; doctor's
    ``engine_version`` answers for one build)."""
    rows = []
    for name in SERVERS:
        profile = PROFILES[name]
        ignored = [k if k != "recycle_postnorm" else f"{config_key(k)} (recycle the post-norm state)"
                   for k in cannot_apply(profile, variant)]
        if wiring == NO_AUX or FINAL_NORMED in wiring:
            ids, nearest, note = None, None, "the final post-norm state is not an aux capture point here"
        else:
            ascending = tuple(sorted(wiring))
            try:
                nearest, ids = nearest_servable(profile.id_engine, list(ascending), num_layers, arch=arch)
                note = "exact" if tuple(nearest) == ascending else f"nearest servable: {wiring_text(nearest)}"
            except Eagle3LabError as err:
                ids, nearest, note = None, None, str(err)
            if tuple(wiring) != ascending:
                note = ("engines concatenate states in ascending order: permute the fc weight's input columns "
                        "to ascending order, then " + note)
        rows.append({"engine": profile.label, "profile": name, "ids": ids, "key": profile.id_keys[0] if profile.id_keys
                     else None, "wiring": note, "cannot_apply": ignored})
    return pd.DataFrame(rows).set_index("profile")
