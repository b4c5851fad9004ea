"""Notebook 05 without a loaded target: what a hidden-state dump or a config alone still answers, in words.

A dump (``models.target_source``, dump mode) holds the target's states for prompts and their continuations:
enough to score a draft **teacher-forced** (``decoding.evaluate.evaluate_on_bank``: the accept decisions a
greedy chain makes at every anchor, no target forward), so tau against chain length and the case draft's tau as
its engine serves it come with their intervals over prompts (``engines.acceptance.tau_interval`` /
``tau_difference``, worded by ``verdicts.word_of``). Nothing decodes and nothing is timed, so every measured
speed is skipped and said to be. A served target's costs are stated assumptions (``analysis.roofline``): they
price a round in any mode, and a tau interval, where the dump gives one, is placed against that price
("projected", ``verdicts.projected_word``). Config-only mode has the price and no tau.

:class:`SkipLog` records the sections a mode skips (each printed by ``TargetSource.skip``) for the summary;
:func:`offline_summary` writes it: the mode, what ran, what was skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from eagle3lab.analysis.speed_reading import (
    ChainReading,
    ServedCosts,
    fmt,
    interval_claims,
    served_round_costs,
)
from eagle3lab.analysis.verdicts import projected_word
from eagle3lab.engines.acceptance import Interval, tau_difference, tau_interval


@dataclass
class SkipLog:
    """``skips(what)``: True (and ``source.skip``'s line) when the section needs the loaded target; kept in order."""

    source: object
    skipped: list = field(default_factory=list)

    def __call__(self, what: str) -> bool:
        if self.source.skip(what):
            self.skipped.append(what)
            return True
        return False


@dataclass(frozen=True)
class ScoredFrom:
    """Where a dump's teacher-forced anchors lie, from what the dump states (``models.hidden_dump.HiddenDump``):
    ``prompt_len`` per sample (its manifest's samples; a bare vLLM dump has no manifest, so none) says where the
    continuation starts, and the manifest's ``continuation: "greedy"`` that the target wrote it greedily. Without
    prompt_len the bank anchors from the second token on (``check_prompt_lens``' default), the prompt and any chat
    template scored as if answered; a continuation not stated greedy is scored on text the target may not have
    written, so past the first position a chain is not what a greedy decoding would accept."""

    dump: str                # the dump's folder, as the words name it
    prompt_lens: bool        # every sample states its prompt_len
    greedy: bool             # the manifest states continuation "greedy"

    @property
    def what(self) -> str:
        if not self.prompt_lens:
            return "every position (no prompt_len)"
        return "the greedy answers" if self.greedy else "the answers (continuation not stated greedy)"

    def words(self) -> str:
        """One sentence: what the anchors cover, and for a dump that does not say, which field it lacks."""
        if self.prompt_lens and self.greedy:
            return f"Scored from each sample's prompt_len on: the target's greedy answers (the dump {self.dump} states both)."
        parts = []
        if not self.prompt_lens:
            parts.append(f"The dump {self.dump} states no prompt_len per sample (a bare vLLM dump has no manifest.json), so "
                         "every position from the second token on is an anchor: the prompt (and any chat template) is "
                         "scored with the answer, and these taus are not the answers' alone")
        if not self.greedy:
            parts.append(("it" if parts else f"The dump {self.dump}") + " does not state its continuation as the "
                         "target's greedy output (no continuation: \"greedy\" in a manifest), so each chain is scored on "
                         "text the target may not have written, not on what a greedy decoding of these prompts would "
                         "accept")
        return "; ".join(parts) + "."

    def claims(self) -> dict:
        return {"scored_from": self.what, "prompt_lens_stated": self.prompt_lens, "continuation_greedy": self.greedy}


def scored_from(dump) -> ScoredFrom:
    """What ``dump`` (a ``HiddenDump``) states about where its anchors lie (:class:`ScoredFrom`)."""
    return ScoredFrom(dump.path.name, dump.prompt_lens is not None, dump.continuation == "greedy")


def chain_name(k: int) -> str:
    return f"chain {k}"


def teacher_forced_chains(bank, draft, ks, *, level: float = 0.95) -> tuple[ChainReading, dict]:
    """tau per chain length K, teacher-forced on ``bank`` with the draft's own wiring and settings: each K's
    interval over the bank's prompts, each K's gain over the next shorter one paired over the same prompts, and
    the longest chain's 1 + sum a_k as the prediction. Returns the reading and each K's ``BankScore``."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank

    ks = sorted(set(int(k) for k in ks))
    names = [chain_name(k) for k in ks]
    scores = {n: evaluate_on_bank(bank, draft, tuple(draft.aux_resid), num_steps=k) for n, k in zip(names, ks)}
    tau = {n: tau_interval(scores[n].accept, level=level) for n in names}
    gain = {b: tau_difference(scores[b].accept, scores[a].accept, level=level) for a, b in zip(names, names[1:])}
    span = tau_difference(scores[names[-1]].accept, scores[names[0]].accept, level=level) if len(names) > 1 else None
    survival = scores[names[-1]].stats.survival
    return ChainReading(names, ks, tau, [1 + sum(survival[:k]) for k in ks], gain, span), scores


def plot_teacher_forced_chains(chains: ChainReading, where: str):
    """``plots.plot_tau_vs_chain``, titled as what it is: teacher-forced on ``where``'s states, not decoded."""
    from eagle3lab.analysis.plots import plot_tau_vs_chain

    fig = plot_tau_vs_chain(chains.plot_table())
    fig.axes[0].set_title(f"tau against chain length, teacher-forced on {where}\n(no decoding: the accept "
                          "decisions a greedy chain makes at every anchor)", fontsize=9)
    return fig


@dataclass
class ServedPrice:
    """One setting priced on a served target from stated costs, and its teacher-forced tau (dump mode) or none."""

    name: str
    num_steps: int
    verified: int
    served: ServedCosts          # round costs in target steps (= the break-even tau), projected
    assumptions: dict
    tau: Interval | None = None  # teacher-forced on a dump, with its interval over prompts

    def words_for(self, cost: float) -> str:
        """The verdict of this tau against a round ``cost`` (one of ``served``'s)."""
        return "no tau here to place against it" if self.tau is None else projected_word(self.tau, cost)

    def table(self) -> pd.DataFrame:
        rows = [{"where": f"{label}, projected", "round cost = break-even tau (target steps)": round(be, 3),
                 "tau 95% (teacher-forced)": fmt(self.tau) if self.tau is not None else "not measured here",
                 "verdict": self.words_for(be)} for label, be in self.served.labelled().items()]
        return pd.DataFrame(rows).set_index("where")

    def words(self) -> str:
        a = self.assumptions
        served = "; ".join(f"{label}: round {be:.2f} target steps, {self.words_for(be)}" for label, be in self.served.labelled().items())
        tau = f"teacher-forced tau {fmt(self.tau)}" if self.tau is not None else "no tau measured here"
        return (f"{self.name} ({self.num_steps}-step chain, {self.verified} verified; {tau}). Priced on the served "
                f"{a['roofline']} (c = {a['c']}, overhead {a['overhead']} target steps per round; stated assumptions, "
                f"projected): {served}.")

    def claims(self) -> dict:
        out = {"num_steps": self.num_steps, "verified": self.verified, "assumptions": dict(self.assumptions),
               "served": {label: {"round_cost": be, "word": self.words_for(be)} for label, be in self.served.labelled().items()}}
        if self.tau is not None:
            out["tau"] = interval_claims(self.tau)
        return out


def price_served(name: str, num_steps: int, verified: int, *, roofline: str, c: float, overhead: float, batch: int,
                 tau: Interval | None = None) -> ServedPrice:
    """``name``'s round on ``roofline`` at batch 1, at ``batch`` and at ``batch`` with the overlap scheduler on
    (``speed_reading.served_round_costs``, the rule ``speed_reading.what_if`` prices with)."""
    served = served_round_costs(num_steps, verified, roofline=roofline, c=c, overhead=overhead, batch=batch)
    return ServedPrice(name, int(num_steps), int(verified), served,
                       {"roofline": roofline, "c": c, "overhead": overhead, "batch": batch}, tau)


def teacher_forced_tau(bank, draft, num_steps: int, *, level: float = 0.95) -> Interval:
    """``draft`` (as its engine runs it: ``draft.under(profile)``) teacher-forced on ``bank``: tau and its interval."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank

    return tau_interval(evaluate_on_bank(bank, draft, tuple(draft.aux_resid), num_steps=num_steps).accept, level=level)


def offline_summary(*, source, skipped, chains: ChainReading | None = None, prices: dict | None = None,
                    half_ids: dict | None = None, case_engine: str | None = None,
                    batch: int | None = None) -> tuple[str, dict]:
    """Notebook 05's summary in dump or config-only mode: (text, claims). States the mode and the source, what
    ran (teacher-forced tau against chain length, the case draft's tau as served, the served prices, the ids
    each build has for the half fix) and every section skipped."""
    prices = prices or {}
    text = f"{source.mode.capitalize()} mode ({source.name}; no target loaded here, nothing decoded or timed). "
    claims = {"mode": source.mode, "num_layers": source.num_layers, "arch": source.arch, "skipped": list(skipped)}
    if source.dump is not None:   # what the anchors cover, before any tau scored on them
        where = scored_from(source.dump)
        text += where.words() + " "
        claims.update(where.claims())
    if chains is not None:
        b = source.dump
        text += f"Teacher-forced on the dump's {len(b)} prompts (the draft's own wiring): {chains.words()} "
        claims["teacher_forced"] = chains.claims()
    if half_ids:
        ids = "; ".join(f"{case_engine} {v}: " + (f"ids {i}" if i is not None else "no ids feed it")
                        for v, i in half_ids.items())
        text += f"For the half fix (the trained wiring) at N = {source.num_layers}: {ids}. "
        claims["half_ids"] = half_ids
    for name, p in prices.items():
        where = f"on the served {p.assumptions['roofline']} at batch {batch}, under stated costs (projected)"
        if p.tau is None:
            text += (f"{name}: {where}, a {p.num_steps}-step round costs {p.served.at_batch:.2f} target steps, "
                     f"{p.served.overlapped:.2f} with the overlap scheduler on: the tau it must exceed "
                     "to pay there (no tau measured here to place against it). ")
            continue
        text += (f"{name} (teacher-forced tau {fmt(p.tau)}): {where}, a round costs {p.served.at_batch:.2f} target "
                 f"steps ({p.words_for(p.served.at_batch)}), {p.served.overlapped:.2f} with the overlap scheduler on "
                 f"({p.words_for(p.served.overlapped)}). ")
    if prices:
        claims["served"] = {name: p.claims() for name, p in prices.items()}
    text += ("Skipped, for want of the loaded target: " + "; ".join(skipped) + "." if skipped else "Nothing was skipped.")
    return text, claims
