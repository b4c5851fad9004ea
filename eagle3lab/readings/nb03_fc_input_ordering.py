"""Notebook 03's readings of the fc input: around one wiring, the contrast of two drafts, and ``search_wiring``.

:func:`scan_neighbourhood` scores every one-slot change and reordering of a wiring (what +-1 and the noise
mean there); :func:`contrast_drafts` sets each draft as trained beside as an engine serves it;
:func:`read_search` says what ``search_wiring`` found, why it stopped where it did, and whether the trained
wiring lies in its set; :func:`fc_order_summary` is the notebook's summary, its words from its claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import permutations

import pandas as pd

from eagle3lab.analysis.hypotheses import (
    Hypothesis,
    WiringComparison,
    compare_wirings,
    make_scorer,
    served_hypothesis,
    settings_for,
)
from eagle3lab.analysis.verdicts import (
    AGAINST,
    WORDS,
    Verdict,
    Verdicts,
    compare,
    short,
    signed_text,
    word_of,
)
from eagle3lab.engines.acceptance import bootstrap_ratio_difference
from eagle3lab.engines.layer_ids import resid_label, resid_name
from eagle3lab.readings.numbers import interval_claims

# ------------------------------------------------------------------ around one wiring

def word_counts(verdicts) -> dict:
    """How many of ``verdicts`` earn each word (``verdicts.WORDS``)."""
    chosen = list(verdicts)
    return {w: sum(v.word == w for v in chosen) for w in WORDS}


OTHERS_WITHIN = "other points within noise"   # the slot table's count: the trained point is not among them


@dataclass
class NeighbourhoodScan:
    """Every one-slot change and every reordering of ``trained`` (one residual rule), each against it."""

    trained: tuple
    rule: bool
    num_layers: int
    verdicts: Verdicts       # labelled by each wiring's ``short`` text, for tables and claims
    wirings: dict            # name -> wiring
    why: dict                # name -> list of reasons
    by_wiring: dict = field(default_factory=dict)    # wiring -> Verdict (read by wiring, never by label)

    @property
    def reference(self) -> str:
        return short(self.trained)

    def grid(self) -> pd.DataFrame:
        """Row i = slot i of the trained wiring, column k = tau when that slot alone is fed resid[k]."""
        by = {w: v.value.value for w, v in self.by_wiring.items()}
        t = self.trained
        rows = [[by.get(t[:i] + (k,) + t[i + 1:], float("nan")) for k in range(self.num_layers + 1)]
                for i in range(len(t))]
        return pd.DataFrame(rows, index=[f"slot {i} ({resid_name(k)})" for i, k in enumerate(t)],
                            columns=[f"resid[{k}]" for k in range(self.num_layers + 1)])

    def orders(self) -> pd.DataFrame:
        """The trained states in every order (the trained order included), worst first, with intervals."""
        rows = [{"aux_resid": w, "tau": v.value.value, "tau_low": v.value.low, "tau_high": v.value.high,
                 "verdict": v.word} for w, v in self.by_wiring.items() if sorted(w) == sorted(self.trained)]
        return pd.DataFrame(rows).sort_values("tau", ignore_index=True)

    def neighbours(self) -> list[tuple[int, int, Verdict]]:
        """(slot, point, verdict) for each slot fed the point one layer before or after its trained one."""
        out = []
        for i, t in enumerate(self.trained):
            for k in (t - 1, t + 1):
                w = self.trained[:i] + (k,) + self.trained[i + 1:]
                if 0 <= k <= self.num_layers and w in self.by_wiring:
                    out.append((i, k, self.by_wiring[w]))
        return out

    def one_slot_changes(self) -> list[tuple[int, int, Verdict]]:
        """(slot, point, verdict) for every scanned wiring that differs from the trained one in one slot."""
        return [(i, k, self.by_wiring[w]) for i in range(len(self.trained)) for k in range(self.num_layers + 1)
                if (w := self.trained[:i] + (k,) + self.trained[i + 1:]) != self.trained and w in self.by_wiring]

    def slots(self) -> pd.DataFrame:
        """Per slot: its +-1 neighbours' verdicts, the worst point with its verdict, and how many other points are
        within noise of the trained one (the trained point not counted, as the words count)."""
        rows = []
        for i, t in enumerate(self.trained):
            subs = [(k, self.by_wiring[w]) for k in range(self.num_layers + 1)
                    if (w := self.trained[:i] + (k,) + self.trained[i + 1:]) != self.trained]
            worst_k, worst = min(subs, key=lambda kv: kv[1].value.value)
            near = [f"resid[{k}]: {v.value.value:.2f}, {v.word}" for s, k, v in self.neighbours() if s == i]
            rows.append({"slot": f"slot {i} ({resid_name(t)})", "+-1 neighbours": "; ".join(near),
                         "worst point": f"resid[{worst_k}]", "worst tau": round(worst.value.value, 3),
                         "worst minus trained": signed_text(worst.diff),
                         "worst verdict": worst.word,
                         OTHERS_WITHIN: sum(v.word == "within noise" for _, v in subs)})
        return pd.DataFrame(rows).set_index("slot")

    def worst_slot(self) -> int:
        """The slot whose worst substitute costs the most tau."""
        g = self.grid()
        return int((g.apply(lambda row: self.by_wiring[self.trained].value.value - row.min(), axis=1)).to_numpy().argmax())

    def noise(self) -> dict:
        """Median half-widths: of tau's own interval over the scanned wirings, and of the paired difference
        for the +-1 neighbours (the small differences a reader is tempted to rank)."""
        import statistics

        near = [v for _, _, v in self.neighbours()] or self.verdicts.others()
        return {"tau_half_width": statistics.median(v.half_width for v in self.verdicts),
                "paired_half_width": statistics.median((v.diff.high - v.diff.low) / 2 for v in near),
                "prompts": self.verdicts.units,
                "chance_crossings": (1 - self.verdicts.level) / 2 * len(self.verdicts.others())}

    def highest(self) -> tuple:
        """The wiring with the highest tau scanned (the first in scan order on a tie)."""
        return max(self.by_wiring, key=lambda w: self.by_wiring[w].value.value)

    def words(self) -> str:
        ref, others = self.by_wiring[self.trained], self.verdicts.others()
        c = self.verdicts.counts()
        top = self.by_wiring[self.highest()]
        noise = self.noise()
        near = self.neighbours()
        nc = word_counts(v for _, _, v in near)
        worst_order = self.by_wiring[tuple(self.orders().aux_resid.iloc[0])]
        one = sum(v.word == "within noise" for _, _, v in self.one_slot_changes())
        lines = [
            f"- **Rank means little inside the noise.** As trained {ref.measured()}. Of the {len(others)} other "
            f"wirings scanned, {c['beats']} beat it, {c['within noise']} are within noise of it ({one} one-slot "
            f"changes, the slot table's '{OTHERS_WITHIN}', and {c['within noise'] - one} reorderings) and "
            f"{c['loses']} lose (paired {self.verdicts.level:.0%} intervals over {noise['prompts']} prompts; with "
            f"{len(others)} comparisons, about {noise['chance_crossings']:.1f} would cross 0 on each side by chance "
            "alone). "
            + ("The trained wiring scores highest." if top is ref else
               f"The highest tau scanned, {top.name} ({top.value.value:.2f}), {top.against()}."),
            f"- **One layer away (+-1)**: {nc['within noise']} of {len(near)} neighbours are within noise of the "
            f"trained point, {nc['loses']} lose, {nc['beats']} beat it: "
            + "; ".join(f"slot {s} fed resid[{k}] {v.value.value:.2f} ({v.word})" for s, k, v in near) + ".",
            f"- **Noise.** tau's own {self.verdicts.level:.0%} interval is about +-{noise['tau_half_width']:.2f} "
            f"here (median half-width over {noise['prompts']} prompts); the difference between a +-1 neighbour and "
            f"the trained point, measured on the same prompts, about +-{noise['paired_half_width']:.2f}. Smaller "
            "differences are not read as a ranking; more prompts narrow both (about as 1/sqrt(prompts)).",
            f"- **Order.** The worst reordering of the trained states, {worst_order.name}, {worst_order.against()}.",
        ]
        return "\n".join(lines)

    def claims(self) -> dict:
        c, noise, near = self.verdicts.counts(), self.noise(), self.neighbours()
        nc = word_counts(v for _, _, v in near)
        orders = self.orders()
        worst_order = self.by_wiring[tuple(orders.aux_resid.iloc[0])]
        top_wiring = self.highest()
        top = self.by_wiring[top_wiring]
        g = self.grid()
        i = self.worst_slot()
        worst_k = int(g.iloc[i].to_numpy().argmin())
        worst = self.by_wiring[self.trained[:i] + (worst_k,) + self.trained[i + 1:]]
        one = sum(v.word == "within noise" for _, _, v in self.one_slot_changes())
        return {"scanned": len(self.verdicts), "beats": c["beats"], "within_noise": c["within noise"],
                "within_noise_one_slot": one, "within_noise_orders": c["within noise"] - one,
                "loses": c["loses"], "tau_trained": self.by_wiring[self.trained].value.value,
                "highest": list(top_wiring), "highest_tau": top.value.value,
                "highest_word": top.word, "neighbours": len(near), "neighbours_within_noise": nc["within noise"],
                "neighbours_lose": nc["loses"], "neighbours_beat": nc["beats"],
                "neighbour_tau": {f"slot {s} resid[{k}]": v.value.value for s, k, v in near},
                "neighbour_word": {f"slot {s} resid[{k}]": v.word for s, k, v in near},
                **noise, "worst_order": list(orders.aux_resid.iloc[0]), "worst_order_tau": worst_order.value.value,
                "worst_order_word": worst_order.word, "worst_order_by": worst_order.claims().get("by"),
                "worst_order_by_high": worst_order.claims().get("by_high"),
                "worst_slot": i, "worst_slot_point": worst_k, "worst_slot_cost": -worst.diff.value,
                "worst_slot_word": worst.word, "tau_best_scanned": top.value.value,
                "slot_substitute_best": [float(g.iloc[s].drop(f"resid[{t}]").max()) for s, t in enumerate(self.trained)],
                "verdicts": self.verdicts.claims()}


def scan_neighbourhood(bank, draft, trained, rule: bool, *, num_steps: int, scorer=None,
                       level: float = 0.95) -> NeighbourhoodScan:
    """Score every reordering of ``trained`` and each slot alone fed every resid[k] (``rule`` held), each
    against ``trained`` (paired over the bank's prompts)."""
    trained = tuple(int(k) for k in trained)
    n = bank.num_layers
    why: dict = {short(trained): ["as given"]}
    wirings = {short(trained): trained}
    for order in permutations(trained):
        wirings.setdefault(short(order), order)
        why.setdefault(short(order), ["reordered"])
    for i in range(len(trained)):
        for k in range(n + 1):
            w = trained[:i] + (k,) + trained[i + 1:]
            if w != trained:
                wirings.setdefault(short(w), w)
                why.setdefault(short(w), []).append(f"slot {i} fed resid[{k}]")
    comp = compare_wirings(bank, draft, {w: Hypothesis(w, rule, name) for name, w in wirings.items()}, trained,
                           num_steps=num_steps, scorer=scorer, level=level)
    return NeighbourhoodScan(trained, bool(rule), n, comp.verdicts, wirings, why, comp.by_key)


# ------------------------------------------------------------------ reading search_wiring

# The search's end point is where its descent stopped (the lowest cross-entropy it scored), not a "best": wirings
# within noise of it are as good by the intervals (glossary: "best" only with a paired "beats").
STOPPED = "where the search stopped"
STOPPED_LABEL = "search stopped (lowest cross-entropy)"


# search_wiring's ``slots`` as shown: its "best" column is the point where the descent stopped in that slot (ranked by
# cross-entropy, not a tau that beats the others), and "tau_best" the highest tau any point scored there
SEARCH_SLOT_LABELS = {"best": "stopped at", "equivalent": "within noise of it (itself included)",
                      "tau_best": "highest tau here", "tau_worst": "lowest tau here", "tau_drop": "tau range"}


def search_slots_table(found) -> pd.DataFrame:
    """Section 6's slot table: per slot, where the search stopped and the points within noise of it, with the tau
    range over the points scored there; no column named "best" (nothing in it beats its equivalents)."""
    return found.slots[list(SEARCH_SLOT_LABELS)].round(3).rename(columns=SEARCH_SLOT_LABELS)


def ce_word(diff) -> str:
    """The paired word of a cross-entropy difference (hypothesis minus reference): lower is better, so an interval
    wholly above 0 "loses" and one wholly below "beats" (``word_of``'s rule, read the other way round)."""
    word = word_of(diff)
    return {"beats": "loses", "loses": "beats"}.get(word, word)


def settings_said(variant: Mapping) -> str:
    """A search variant in words, the residual rule always with its value: "norm_before_residual=True, recycle
    post-norm" (any other switch named when on)."""
    on = [k for k, v in sorted(variant.items()) if v and k not in ("norm_before_residual", "recycle_postnorm")]
    return ", ".join([f"norm_before_residual={bool(variant.get('norm_before_residual'))}", *on,
                      "recycle post-norm" if variant.get("recycle_postnorm") else "recycle pre-norm"])


# how read_search scored the trained wiring: with the draft's own settings and the trained rule (what sections 2 to 5
# call "as trained"), or, with no draft to read them from, with the settings the search tried that gave it the lowest
# cross-entropy
AS_TRAINED, LOWEST_CE = "as trained", "lowest cross-entropy"


def _ce_said(reading) -> str:
    """", and in cross-entropy" with the paired word, when the trained wiring's cross-entropy was compared."""
    d = reading.ce_diff.get("trained")
    return "" if d is None else f" ({AGAINST[ce_word(d)]} it in cross-entropy, {signed_text(d, 3)})"


@dataclass
class SearchReading:
    """What ``search_wiring`` found, in words: identified or a set, the rule, where it stopped and why, and
    the trained wiring (when known) against its best."""

    found: object
    trained: tuple | None
    trained_rule: bool | None
    vs_best: Verdicts            # labelled for display and claims: the search's best (reference), the highest tau it
                                 # scored, the trained wiring
    highest: str                 # the label of the highest-tau hypothesis in vs_best
    equivalent: list             # per slot: the points within noise of the best there
    rules_in_set: list           # norm_before_residual values among the hypotheses within noise
    ce: dict = field(default_factory=dict)   # role -> cross-entropy
    ce_diff: dict = field(default_factory=dict)   # role -> paired cross-entropy difference to the best (Interval)
    by_role: dict = field(default_factory=dict)   # "best", "highest", "trained" -> Verdict ("highest" is "best"'s
                                                  # when the best scored the highest tau)
    labels: dict = field(default_factory=dict)    # role -> its label in vs_best
    highest_wiring: tuple = ()                    # the highest-tau hypothesis's wiring
    trained_variant: dict = field(default_factory=dict)   # the settings the trained wiring was scored with
    trained_scoring: str = AS_TRAINED             # AS_TRAINED or LOWEST_CE: why those settings

    def trained_settings_said(self) -> str:
        """Which settings the trained wiring's tau and cross-entropy are on, in words."""
        how = ("the draft's own settings with the trained rule, as sections 2 to 5 score 'as trained'"
               if self.trained_scoring == AS_TRAINED else
               "the settings the search tried on it that gave the lowest cross-entropy")
        return f"{settings_said(self.trained_variant)}: {how}"

    @property
    def in_sets(self) -> bool | None:
        from eagle3lab.models.state_bank import point_name

        if self.trained is None:
            return None
        return all(point_name(p) in eq for p, eq in zip(self.trained, self.equivalent))

    def words(self) -> str:
        from eagle3lab.analysis.wiring_search import wiring_text

        f, best = self.found, self.by_role["best"]
        rule = (f"every hypothesis within noise of where it stopped runs norm_before_residual="
                f"{self.rules_in_set[0]}, so the rule is found" if len(self.rules_in_set) == 1 else
                f"hypotheses within noise run norm_before_residual in {self.rules_in_set}: the rule is not found")
        sizes = ", ".join(f"slot {i}: {len(eq)}" for i, eq in enumerate(self.equivalent))
        lines = [f"- **{'One wiring' if f.identifiable else 'A set, not one wiring'}.** search_wiring "
                 f"{'identifies the wiring' if f.identifiable else 'does NOT identify one wiring'} "
                 f"({f.evaluations} draft evaluations; brute force {f.brute_force}): {f.reason}. Points within noise "
                 f"of where it stopped, per slot: {sizes}; {rule}."]
        high, at = self.by_role["highest"], wiring_text(self.highest_wiring)
        lines.append(
            f"- **Where it stopped.** The descent moves a slot only while the cross-entropy falls; it stopped at "
            f"{wiring_text(f.best['wiring'])} with {settings_said(f.best['variant'])} (cross-entropy "
            f"{self.ce['best']:.3f}, {best.measured(3)}). "
            + ("That is also the highest tau it scored." if high is best else
               f"The highest tau it scored, {high.value.value:.3f} at {at}, "
               f"{high.against(3, reference=STOPPED)}, "
               f"with cross-entropy {self.ce['highest']:.3f}: it ranks by cross-entropy (what training "
               "minimised, less noisy than tau), and a tau that much higher is inside the noise."
               if high.word != "beats" else
               f"The highest tau it scored, {high.value.value:.3f} at {at}, "
               f"{high.against(3, reference=STOPPED)}: "
               "cross-entropy and tau disagree here beyond noise."))
        if self.trained is not None:
            t = self.by_role["trained"]
            d = self.ce_diff["trained"]
            lines.append(f"- **The trained wiring** {resid_label(self.trained)}, scored with "
                         f"{self.trained_settings_said()}: {t.measured(3)}, {t.against(3, reference=STOPPED)}; "
                         f"cross-entropy {self.ce['trained']:.3f}, {signed_text(d, 3)} ({ce_word(d)}) against that "
                         "point's (lower is better). It lies "
                         f"{'inside' if self.in_sets else 'OUTSIDE'} the per-slot sets. The weights narrow the "
                         f"wiring {'to it' if f.identifiable and self.in_sets else 'to a set that holds it' if self.in_sets else 'to a set that misses it'}.")
        return "\n".join(lines)

    def claims(self) -> dict:
        f = self.found
        out = {"identifiable": bool(f.identifiable), "evaluations": int(f.evaluations),
               "brute_force": int(f.brute_force), "best": list(f.best["wiring"]),
               "best_rule": bool(f.best["variant"]["norm_before_residual"]), "rules_in_set": self.rules_in_set,
               "equivalent_sizes": [len(e) for e in self.equivalent], "in_sets": self.in_sets,
               "ce": {self.labels[r]: ce for r, ce in self.ce.items()}, "vs_best": self.vs_best.claims(),
               "highest": self.highest,
               "ce_diff": {self.labels[r]: {**interval_claims(d), "word": ce_word(d)} for r, d in self.ce_diff.items()},
               "best_settings": settings_said(f.best["variant"]),
               "tau_drops": [float(x) for x in f.slots.tau_drop]}
        if self.trained is not None:
            out.update(trained_settings=settings_said(self.trained_variant), trained_scoring=self.trained_scoring)
        return out


def read_search(found, trained=None, trained_rule: bool | None = None, *, bank=None, draft=None,
                num_steps: int | None = None) -> SearchReading:
    """Read a ``WiringSearch``. The trained wiring, when given, is compared with the search's best on the same
    prompts (scored here if the search did not score it: pass ``bank``, ``draft`` and ``num_steps``)."""
    from eagle3lab.analysis.wiring_search import key_of, wiring_text

    scores, best_key = found.extra["scores"], found.extra["best_key"]
    table = found.table
    hi = table.loc[table.tau.idxmax()]
    highest_key = (tuple(hi["aux"]), tuple(sorted(hi["variant"].items())))
    # roles are the keys; labels name them in the table, the words' references and the claims
    labels = {"best": STOPPED_LABEL, "highest": f"highest tau: {wiring_text(hi['aux'])}", "trained": "trained wiring"}
    measured = {"best": scores[best_key]}
    if highest_key != best_key:
        measured["highest"] = scores[highest_key]
    trained_variant, scoring = {}, AS_TRAINED
    if trained is not None:
        trained = tuple(int(k) for k in trained)
        if draft is not None:       # like with like: the hypothesis sections 2 to 5 call "as trained"
            trained_variant = settings_for(draft, bool(trained_rule))
            key = key_of(trained, trained_variant)
            if key in scores:
                measured["trained"] = scores[key]
            elif bank is None or num_steps is None:
                raise ValueError("read_search: the search did not score the trained wiring with the draft's own "
                                 "settings; pass bank and num_steps to score it")
            else:
                measured["trained"] = make_scorer(bank, draft, num_steps)(trained, trained_variant)
        else:                       # no draft to read its settings from: the variant the search found lowest
            mine = [k for k in scores if k[0] == trained and dict(k[1]).get("norm_before_residual") == trained_rule]
            if not mine:
                raise ValueError("read_search: the search did not score the trained wiring; pass bank, draft and "
                                 "num_steps to score it")
            key = min(mine, key=lambda k: scores[k].ce)
            measured["trained"], trained_variant, scoring = scores[key], dict(key[1]), LOWEST_CE
    near = table[table["within_noise"]]
    rules = sorted({bool(r) for r in near["norm_before_residual"]})
    b = measured["best"]
    ce_diff = {role: bootstrap_ratio_difference(s.ce_sum, s.ce_n, b.ce_sum, b.ce_n, level=found.level)
               for role, s in measured.items() if role != "best"}
    vs_best = compare({labels[r]: s for r, s in measured.items()}, labels["best"], level=found.level)
    by_role = dict(zip(measured, vs_best))     # compare keeps the order given
    by_role.setdefault("highest", by_role["best"])
    return SearchReading(found, trained, trained_rule, vs_best, labels["highest" if "highest" in measured else "best"],
                         list(found.slots.equivalent), rules, {r: s.ce for r, s in measured.items()}, ce_diff,
                         by_role, {r: labels[r] for r in measured}, tuple(hi["aux"]), trained_variant, scoring)


def fc_input_words(chunks) -> str:
    """Section 1 of notebook 03 in words, from ``fc_input_difference``'s table (rows: slots, then the whole)."""
    import math

    slots = chunks.iloc[:-1]
    moved = [name for name, r in slots.iterrows() if not r["cosine"] > 0.999]
    i = int(slots["cosine"].to_numpy().argmin())
    r = slots.iloc[i]
    scale = abs(math.log(max(float(r["norm_ratio"]), 1e-12))) > math.log(2)
    return (f"{len(moved)} of {len(slots)} slots hold another state than in training. {slots.index[i]} changes "
            f"the most: cosine {r['cosine']:.2f}, norm ratio {r['norm_ratio']:.2f}, so the block of fc's columns "
            f"trained on it multiplies a vector of another direction{' and scale' if scale else ''}. "
            "Section 2 measures what that costs.")


@dataclass
class DraftContrast:
    """Per draft: as trained, as ``engine`` serves it and every reordering of its trained states (hypotheses
    keyed ``"trained"``, ``"served"`` and ``("reordered", wiring)``)."""

    engine: str
    rows: dict                   # draft name -> WiringComparison
    trained: dict                # draft name -> wiring
    served: dict                 # draft name -> wiring the engine feeds

    def _worst(self, name: str) -> tuple[tuple, Verdict]:
        """The reordering of ``name``'s trained states with the lowest tau: (its wiring, its verdict)."""
        orders = [(key[1], v) for key, v in self.rows[name].by_key.items() if key[0] == "reordered"]
        return min(orders, key=lambda wv: wv[1].value.value)

    def worst_order(self, name: str) -> Verdict:
        return self._worst(name)[1]

    def served_verdict(self, name: str) -> Verdict:
        return self.rows[name].verdict("served")

    def table(self) -> pd.DataFrame:
        out = {}
        for name, comp in self.rows.items():
            ref, srv, (order, worst) = comp.verdict("trained"), self.served_verdict(name), self._worst(name)
            out[name] = {"trained on": resid_label(self.trained[name]), f"{self.engine} feeds": resid_label(self.served[name]),
                         "tau as trained": f"{ref.value.value:.2f} [{ref.value.low:.2f}, {ref.value.high:.2f}]",
                         f"tau as {self.engine} serves it": f"{srv.value.value:.2f} [{srv.value.low:.2f}, {srv.value.high:.2f}]",
                         "served vs trained": srv.word,
                         "worst reordering": f"{short(order)}: {worst.value.value:.2f}, {worst.word}"}
        return pd.DataFrame.from_dict(out, orient="index")

    def words(self) -> str:
        return "\n".join(f"- {name} (trained on {resid_label(self.trained[name])}, {self.engine} feeds "
                         f"{resid_label(self.served[name])}): as {self.engine} serves it, "
                         f"{self.served_verdict(name).measured()}, {self.served_verdict(name).against()}; "
                         f"its worst reordering, {short(self._worst(name)[0])}, "
                         f"{self.worst_order(name).against()}." for name in self.rows)

    def claims(self) -> dict:
        return {name: {"trained": list(self.trained[name]), "served": list(self.served[name]),
                       "served_as_trained": tuple(self.trained[name]) == tuple(self.served[name]),
                       "as_trained": comp.verdict("trained").claims(), "as_served": self.served_verdict(name).claims(),
                       "worst_order": self.worst_order(name).claims()} for name, comp in self.rows.items()}


def contrast_drafts(bank, drafts: Mapping, engine_profile: str, *, num_steps: int, level: float = 0.95) -> DraftContrast:
    """``drafts``: name -> (draft, trained wiring, trained rule). Each: as trained, as ``engine_profile`` serves it,
    and every reordering of its trained states, against as trained."""
    from eagle3lab.engines.profiles import PROFILES

    engine = PROFILES[engine_profile].engine
    rows, trained, served = {}, {}, {}
    for name, (d, wiring, rule) in drafts.items():
        wiring = tuple(int(k) for k in wiring)
        hyp = {"trained": Hypothesis(wiring, rule, "as trained"),
               "served": Hypothesis(*served_hypothesis(d, engine_profile), f"as {engine} serves it")}
        hyp.update({("reordered", o): Hypothesis(o, rule, f"reordered {short(o)}")
                    for o in dict.fromkeys(permutations(wiring)) if o != wiring})
        rows[name] = compare_wirings(bank, d, hyp, "trained", num_steps=num_steps, level=level)
        trained[name], served[name] = wiring, tuple(hyp["served"].wiring)
    return DraftContrast(engine, rows, trained, served)


def _trained_scored(search_claims: dict) -> str:
    """How the summary names the trained wiring's scoring in the search's comparison (its settings said)."""
    settings = search_claims["trained_settings"]
    return (f"as trained ({settings}, the hypothesis scored above)" if search_claims["trained_scoring"] == AS_TRAINED
            else f"with the settings the search found lowest in cross-entropy for it ({settings})")


def fc_order_summary(*, draft: str, engine: str, trained, served, chunks, pair: WiringComparison,
                     scan: NeighbourhoodScan, servable: WiringComparison, builds: dict, contrast: DraftContrast | None,
                     reading: SearchReading, num_steps: int, anchors: int) -> tuple[str, dict]:
    """Notebook 03's summary: (text, claims), every number and verdict in the text taken from the claims.
    ``pair``'s hypotheses are keyed ``"trained"``, ``"served_wiring"`` (the served wiring, the trained residual
    rule) and ``"served"``; ``servable``'s ``(build, "trained_rule")`` and ``(build, "engine_rule")`` per build."""
    cos = [float(c) for c in chunks["cosine"].iloc[:-1]]
    t, sw, sv = pair.verdict("trained"), pair.verdict("served_wiring"), pair.verdict("served")
    sc = scan.claims()
    text = (f"{draft} was trained on {resid_label(trained)}; its checkpoint ids make {engine} feed {resid_label(served)}: "
            "same shape, per-slot cosine to the trained states " + ", ".join(f"{c:.2f}" for c in cos)
            + f". Teacher-forced on {anchors} tokens of {t.value.units} prompts ({num_steps}-step chains), as trained "
            f"{t.measured()}; with only the wiring changed the draft {sw.against(reference='as trained')}; as "
            f"{engine} serves it (wiring and residual rule) it {sv.against(reference='as trained')}. ")
    c = scan.verdicts.counts()
    text += (f"Of {len(scan.verdicts.others())} one-slot changes and reorderings of the trained wiring, {c['beats']} "
             f"beat it, {c['within noise']} are within noise and {c['loses']} lose; of its {sc['neighbours']} +-1 "
             f"neighbours {sc['neighbours_within_noise']} are within noise and {sc['neighbours_lose']} lose; the "
             f"worst reordering {scan.by_wiring[tuple(sc['worst_order'])].against(reference='as trained')}; the most "
             f"sensitive slot is slot {sc['worst_slot']} ({resid_name(trained[sc['worst_slot']])}): fed "
             f"resid[{sc['worst_slot_point']}] it loses {sc['worst_slot_cost']:.2f}. ")
    parts = []
    for v, (wiring, ids) in builds.items():
        tr, er = servable.verdict((v, "trained_rule")), servable.verdict((v, "engine_rule"))
        what = ("feeds the trained wiring itself" if tuple(wiring) == tuple(trained) else
                f"cannot feed it and serves at nearest {resid_label(wiring)}")
        parts.append(f"{engine} {v} {what} (ids {list(ids)}): with the trained rule it {tr.against(reference='as trained')}, "
                     f"with {engine}'s own rule it {er.against(reference='as trained')}")
    text += "Per build: " + "; ".join(parts) + ". "
    if contrast is not None:
        name = list(contrast.rows)[-1]
        v = contrast.served_verdict(name)
        text += (f"The contrast draft {name}, served what it was trained on, has as trained "
                 f"{contrast.rows[name].verdict('trained').measured()}; as {engine} serves it it {v.against(reference='as trained')}. ")
    r = reading.claims()
    vt = reading.by_role.get("trained")
    best = reading.by_role["best"]
    text += (f"Without the training log, search_wiring ({r['evaluations']} draft evaluations, brute force "
             f"{r['brute_force']}) {'identifies one wiring' if r['identifiable'] else 'does not identify one wiring'}: "
             f"it stopped (lowest cross-entropy) at {resid_label(r['best'])} with {r['best_settings']}, "
             f"{best.measured(3)}"
             + (f"; the trained wiring {_trained_scored(r)}, {vt.measured(3)}, {vt.against(3, reference='that point')} "
                f"in tau{_ce_said(reading)} and lies "
                f"{'inside' if reading.in_sets else 'OUTSIDE'} the per-slot sets" if vt is not None else "")
             + ".")
    claims = dict(trained=list(trained), served=list(served), slot_cosines=cos,
                  slot_distances=[float(x) for x in chunks["relative_distance"].iloc[:-1]], anchors=anchors,
                  num_steps=num_steps, pair=pair.claims(), scan=sc, servable=servable.claims(),
                  builds={v: {"wiring": list(w), "ids": list(i)} for v, (w, i) in builds.items()},
                  contrast=None if contrast is None else contrast.claims(), search=r,
                  c1_trained=pair.scores["trained"].stats.conditional[0])
    return text, claims


# ------------------------------------------------------------------ config-only mode: no states to score on

def served_ids_summary(*, draft: str, engine: str, trained, served, builds: dict, num_layers: int,
                       arch: str | None) -> tuple[str, dict]:
    """``builds``: engine build -> (the nearest wiring it can serve, the ids to write for it)."""
    trained, served = tuple(trained), tuple(served)
    same = served == trained
    parts = [f"{engine} {v} " + ("feeds the trained wiring itself" if tuple(w) == trained else
                                 f"can serve at nearest {resid_label(w)}") + f" (ids {list(ids)})"
             for v, (w, ids) in builds.items()]
    text = (f"{draft} was trained on {resid_label(trained)}; its checkpoint ids make {engine} feed "
            f"{resid_label(served)}: {'the trained states' if same else 'other states than training fed'}. "
            f"From the config alone ({arch or 'architecture not given'}, N = {num_layers}) nothing was scored. "
            f"Per build: {'; '.join(parts)}. What each costs in acceptance needs states: the target loaded here, "
            "or a hidden-state dump of it (DUMP_DIR).")
    claims = dict(mode="config-only", trained=list(trained), served=list(served), served_as_trained=same,
                  builds={v: {"wiring": list(w), "ids": list(i)} for v, (w, i) in builds.items()})
    return text, claims
