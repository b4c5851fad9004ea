"""Notebook 08's readings: does the draft hold up on long prompts, and what to change, in words that follow from
the context curve's intervals (``eagle3lab.analysis.context_curve``) and the engine rules' note codes
(``eagle3lab.engines.context_rules``).

    limits = draft_limits(curve, trained_length(DRAFT))      # the positions marked on the figure
    reading = read_curve(curve, trained)                      # typed: the first drop, held against the trained length
    changes = what_to_change(curve, trained, rules=...)       # typed Change(code, engine, text), one per finding
    text, claims = summary(...)                               # the summary's words and the numbers they state

A curve "falls" where a bin's paired change from the bin before is "loses" (its whole interval below 0,
``context_curve.word_of_curve``), never from the points alone; it falls *past its trained length* only where a bin
past that length loses to the last bin inside it (``context_curve.past_trained``, paired over documents): a dip that
stays at or above that level is not a fall retraining would restore. Measured on fewer than ``MIN_DOCUMENTS``
documents a curve is "unworded" (no verdict either way). The changes a reader can make, each generated only when the
numbers or rules call for it (``CHANGE_CODES``): retrain on longer sequences, raise ``max_position_embeddings`` (or
serve a build that does), set SGLang's window flag, remove a window the draft was not trained with, write the
target's ``rope_scaling``.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, replace
from pathlib import Path

from eagle3lab.analysis.context_curve import (
    TOO_FEW,
    ContextCurve,
    CurveOfEngine,
    Documents,
    PastTrained,
    PositionBin,
    bin_label,
    past_trained,
)
from eagle3lab.engines import context_rules as cr
from eagle3lab.readings.numbers import fmt, interval_record, signed

# the verdicts of read_curve: FALLS_PAST_TRAINED, a bin past the trained length loses to the last bin inside it;
# HOLDS_PAST_TRAINED, a bin loses to the bin before past the trained length, yet none there to the level inside it;
# FALLS_WITHIN_TRAINED, the first loss to the bin before lies inside it; FALLS, a loss with no trained length to
# hold it against (not recorded, or no bin wholly inside and past it)
HOLDS, FALLS_PAST_TRAINED, FALLS_WITHIN_TRAINED, FALLS = "holds", "falls past trained", "falls within trained", "falls"
HOLDS_PAST_TRAINED = "holds past trained"
UNWORDED = "unworded"      # fewer documents than a change is worded from (context_curve.MIN_DOCUMENTS)
CHANGE_CODES = {
    "RETRAIN_LONGER": "tau past the sequence length the draft was trained on is below its level inside it, beyond "
                      "noise",
    "NAME_TRAINED_LENGTH": "tau falls beyond noise, and no trained length (or no bin inside and past it) to tell "
                           "whether retraining longer would restore it",
    "RAISE_MAX_POSITIONS": "an engine cannot serve positions from the draft's max_position_embeddings on",
    "SET_WINDOW_FLAG": "an engine drops the window the draft was trained with",
    "REMOVE_WINDOW": "an engine applies a window the draft was not trained with, and tau loses past it",
    "FIX_ROPE_SCALING": "the draft's RoPE computes other angles than the target's",
    "MORE_DOCUMENTS": "the curve is unworded: too few documents for a verdict on any change",
    "NOTHING": "the draft holds up and every engine runs it as trained",
}
# The trainers' sequence-length settings, read in the installed wheels (.venv-engines): speculators 0.9.0
# train/config/schema.py total_seq_len (--total-seq-len, default 8192); SpecForge 0.2.0 config/schema.py
# DataConfig.max_length (default 2048); eagle3lab's trainer: training.json config.seq_len.
TRAINER_LENGTH_KEYS = "eagle3lab's seq_len, speculators' --total-seq-len, SpecForge's data.max_length"


# ----------------------------------------------------------------------------- the draft's limits

def trained_length(draft_dir) -> int | None:
    """The sequence length the draft was trained on, from the ``training.json`` eagle3lab's trainer writes beside
    it (``config.seq_len``); None when there is no such record (give it as a parameter)."""
    facts = Path(draft_dir) / "training.json"
    if not facts.exists():
        return None
    seq_len = (json.loads(facts.read_text()).get("config") or {}).get("seq_len")
    return int(seq_len) if seq_len else None


@dataclass(frozen=True)
class Limit:
    """A position marked on the curve: what it is and where it was read."""

    label: str
    position: int
    source: str


def draft_limits(curve: ContextCurve, trained: int | None) -> tuple[Limit, ...]:
    """The trained length, the draft's max_position_embeddings and window, and the target's context, in order."""
    out = []
    if trained:
        out.append(Limit(f"trained on {trained}-token sequences", trained, "training record"))
    out.append(Limit(f"draft max_position_embeddings {curve.draft_max_positions}", curve.draft_max_positions,
                     "draft config.json"))
    if curve.draft_window:
        out.append(Limit(f"draft sliding_window {curve.draft_window}", curve.draft_window, "draft config.json"))
    if curve.target_max_positions:
        out.append(Limit(f"target max_position_embeddings {curve.target_max_positions}", curve.target_max_positions,
                         "target config.json"))
    merged: dict[int, Limit] = {}     # limits at one position share a line: "a = b"
    for lim in sorted(out, key=lambda x: x.position):
        was = merged.get(lim.position)
        merged[lim.position] = lim if was is None else Limit(f"{was.label} = {lim.label}", lim.position,
                                                             f"{was.source}, {lim.source}")
    return tuple(merged.values())


def limited_copy(draft, *, sliding_window: int | None = None, max_position_embeddings: int | None = None):
    """The same weights (shared, not copied) with a config that declares limits the draft was not trained with:
    ``sliding_window`` on every layer (``layer_types`` all "sliding_attention", as speculators writes a window) and
    ``max_position_embeddings``, so each engine's rule for them shows on a small model. In memory only."""
    extra = dict(draft.config.extra)
    if sliding_window is not None:
        extra |= {"sliding_window": int(sliding_window),
                  "layer_types": ["sliding_attention"] * draft.config.num_hidden_layers}
    twin = copy.copy(draft)    # nn.Module's own dicts shared: only the config (and what the profile derives) differs
    twin.config = replace(draft.config, extra=extra, max_position_embeddings=int(
        max_position_embeddings or draft.config.max_position_embeddings))
    return twin.under(draft.profile)   # RoPE and settings re-derived from the new config


# ----------------------------------------------------------------------------- reading one curve

@dataclass(frozen=True)
class CurveReading:
    """One curve read: its first and last bins with a tau, the first bin that loses to the bin before (None: none
    does), the bins past the trained length held against the level inside it (``past``: None without a trained
    length or a bin inside and past it), and the verdict (module constants)."""

    first: PositionBin
    last: PositionBin
    first_drop: PositionBin | None
    trained_length: int | None
    verdict: str
    unworded: PositionBin | None = None      # the first bin whose change has too few documents to be worded
    past: PastTrained | None = None

    def words(self) -> str:
        a, b = self.first, self.last
        head = f"tau {fmt(a.tau)} at {a.label} and {fmt(b.tau)} at {b.label}"
        if self.verdict == UNWORDED:
            b = self.unworded
            diff = b.change if b.change_word == TOO_FEW else self.past.difference(b)
            return f"{head}: the curve is unworded, {b.said(TOO_FEW, diff)}"
        d = self.first_drop
        steps = (f"no bin loses to the bin before beyond noise (it holds up to {b.hi} tokens)" if d is None else
                 f"it falls beyond noise from {d.lo} on ({d.label}: {signed(d.change)} from the bin before)")
        return f"{head}; {steps}{self._against_trained()}"

    def _against_trained(self) -> str:
        """What the bins past the trained length do against the level inside it (the verdict's ground)."""
        n, p = self.trained_length, self.past
        if n is None:
            return " (its training length is not recorded)" if self.first_drop is not None else ""
        if p is None and self.last.hi <= n:
            return f", inside the {n}-token sequences it was trained on" if self.first_drop is not None else ""
        if p is None:
            return (f"; no bin lies wholly inside and another wholly past the {n}-token sequences it was trained on, "
                    "to hold one against the other")
        each = ", ".join(f"{b.label} {signed(p.difference(b))}" for b in p.past)
        loss = p.first_loss
        if loss is not None:
            return (f"; past the {n}-token sequences it was trained on it falls below its level inside them "
                    f"({p.within.label}: {fmt(p.within.tau)}) beyond noise from {loss.lo} on (against "
                    f"{p.within.label}: {each})")
        return (f"; past the {n}-token sequences it was trained on no bin is below its level inside them "
                f"({p.within.label}: {fmt(p.within.tau)}) beyond noise (against {p.within.label}: {each})")


def _verdict(drop: PositionBin | None, unworded: PositionBin | None, past: PastTrained | None,
             trained: int | None) -> str:
    if past is not None and past.first_loss is not None:
        return FALLS_PAST_TRAINED
    if unworded is not None:
        return UNWORDED
    if drop is None:
        return HOLDS
    if past is not None:
        return FALLS_WITHIN_TRAINED if drop.lo < trained else HOLDS_PAST_TRAINED
    return FALLS_WITHIN_TRAINED if trained is not None and drop.hi <= trained else FALLS


def read_curve(curve: CurveOfEngine, trained: int | None) -> CurveReading:
    measured = [b for b in curve.bins if b.tau is not None]
    if not measured:
        raise ValueError(f"read_curve: the curve '{curve.label}' has no bin with a tau (no anchor served)")
    drop = next((b for b in measured if b.change_word == "loses"), None)
    past = past_trained(curve, trained) if trained else None
    unworded = next((b for b in measured if b.change_word == TOO_FEW), None) or (past and past.unworded) or None
    return CurveReading(measured[0], measured[-1], drop, trained, _verdict(drop, unworded, past, trained),
                        unworded, past)


# ----------------------------------------------------------------------------- one engine's rule, read

@dataclass(frozen=True)
class RuleReading:
    """How one engine ran the draft, from its rule and its curve: the window it applied (None) or dropped, the bins
    past that window and their words against the reference, and the first position it does not serve."""

    curve: CurveOfEngine
    window_dropped: bool
    past_window: tuple[PositionBin, ...]       # bins whose anchors attend past the applied window, with a tau
    not_served: tuple[PositionBin, ...]

    @property
    def rule(self) -> cr.ContextRule:
        return self.curve.rule

    @property
    def window_losses(self) -> tuple[PositionBin, ...]:
        """The bins past the applied window that lose to the reference beyond noise."""
        return tuple(b for b in self.past_window if b.vs_reference_word == "loses")

    def words(self) -> str:
        r, name = self.rule, self.rule.label
        parts = []
        if r.window is not None:
            past = "; ".join(f"{b.label} {signed(b.vs_reference)} ({b.vs_reference_word})" for b in self.past_window)
            parts.append(f"{name} applies a window of {r.window} keys on layers {list(r.window_layers)}: against full "
                         f"attention, " + (past or "no bin reaches past it"))
        elif self.window_dropped:
            parts.append(f"{name} drops the draft's window (full attention: the no-limit curve's numbers)")
        if r.fails_from is not None:
            gone = _gone(self.not_served)
            parts.append(f"{name} refuses to start while the target's context is longer than the draft's "
                         f"{r.fails_from} (launched with --context-length {r.fails_from}: {gone} not served)"
                         if r.positions == cr.REFUSES else f"{name} sizes the draft's RoPE cache by its "
                         f"max_position_embeddings: requests reaching position {r.fails_from} fail ({gone} not served)")
        if r.rope_same_as_target is False:
            parts.append(f"{name} rotates the draft by its own RoPE, not the target's")
        return "; ".join(parts) or f"{name} {RUNS_AS_IT_IS}"


RUNS_AS_IT_IS = "runs the draft as it is, to every position measured"


def _gone(bins) -> str:
    return ", ".join(f"{b.label}{' partly' if b.status == 'partly served' else ''}" for b in bins)


def read_rule(curve: CurveOfEngine) -> RuleReading:
    if curve.rule is None:
        raise ValueError(f"read_rule: '{curve.label}' is the no-limit curve, not an engine's")
    codes = curve.rule.codes()
    # the bins that lie wholly past the applied window (a bin whose last rounds reach it is mostly inside)
    window = curve.rule.window
    past = tuple(b for b in curve.bins if window is not None and b.lo >= window and b.vs_reference is not None)
    gone = tuple(b for b in curve.bins if b.status in ("not served", "partly served"))
    return RuleReading(curve, "CONTEXT_WINDOW_DROPPED" in codes, past, gone)


# ----------------------------------------------------------------------------- what to change

@dataclass(frozen=True)
class Change:
    code: str             # a key of CHANGE_CODES
    engine: str | None    # the engine build's label it concerns (None: the draft itself)
    text: str


def _fixed_from(engine: str) -> cr.Change | None:
    """The change from which ``engine`` extends the draft's limit on a plain launch, else with its setting."""
    for key in (None, cr.SGLANG_ENV):
        for row in cr.ROWS:
            if (row.engine, row.kind, row.key, row.value) == (engine, cr.MAX_POSITIONS, key, cr.EXTENDS):
                return row.since
    return None


def _position_change(r: RuleReading) -> Change:
    rule = r.rule
    since = _fixed_from(rule.engine)
    target = rule.target_max_positions
    also = ""
    if rule.positions == cr.REFUSES:
        also = f", or launch with {cr.SGLANG_ENV}"
    elif since is not None:
        also = f", or serve a build with PR #{since.pr} ({since.first_with} read with it)"
    return Change("RAISE_MAX_POSITIONS", rule.label,
                  f"{rule.label}: write max_position_embeddings {target} (the target's) in the draft's config.json"
                  f"{also}; as it stands, context from position {rule.fails_from} on is not served "
                  f"({_gone(r.not_served)}).")


def _window_change(r: RuleReading, trained_window: int | None) -> Change | None:
    rule = r.rule
    if rule.window is None and r.window_dropped and trained_window:
        flag = f"launch with {cr.SGLANG_FLAG} {trained_window}" if rule.engine == "sglang" else \
            "write layer_types naming the draft's sliding_attention layers"
        return Change("SET_WINDOW_FLAG", rule.label, f"{rule.label}: {flag}; it runs the draft with full attention "
                      f"where it was trained with a window of {trained_window} (the no-limit curve is what it gets).")
    if rule.window is not None and not trained_window and r.window_losses:
        lost = ", ".join(f"{b.label} {signed(b.vs_reference)}" for b in r.window_losses)
        return Change("REMOVE_WINDOW", rule.label, f"{rule.label}: remove sliding_window and layer_types from the "
                      f"draft's config.json: the draft was trained with full attention, and the window it applies "
                      f"loses beyond noise ({lost}).")
    return None


def what_to_change(reading: CurveReading, rules: list[RuleReading], *, trained_window: int | None = None
                   ) -> list[Change]:
    """The changes the numbers call for (``CHANGE_CODES``), each once per engine build. ``trained_window``: the window
    the draft was trained with (None: full attention)."""
    out = []
    if reading.verdict == UNWORDED:
        out.append(Change("MORE_DOCUMENTS", None, f"measure on more documents: {reading.words()}."))
    if reading.verdict == FALLS_PAST_TRAINED:
        p = reading.past
        out.append(Change("RETRAIN_LONGER", None, f"retrain on sequences as long as the prompts served "
                          f"({TRAINER_LENGTH_KEYS}): past the {p.trained_length}-token sequences it was trained on, "
                          f"tau falls below its {p.within.label} level beyond noise from {p.first_loss.lo} on "
                          f"({p.first_loss.label}: {signed(p.difference(p.first_loss))})."))
    if reading.verdict == FALLS:
        out.append(Change("NAME_TRAINED_LENGTH", None, f"give the sequence length the draft was trained on "
                          f"(TRAINED_LENGTH; {TRAINER_LENGTH_KEYS}) and bins with an edge at it: tau falls from "
                          f"{reading.first_drop.lo} on, and retraining longer helps only where tau past that length "
                          f"is below its level inside it."))
    for r in rules:
        if r.rule.fails_from is not None:
            out.append(_position_change(r))
        window = _window_change(r, trained_window)
        if window is not None:
            out.append(window)
        if r.rule.rope_same_as_target is False:
            note = next(n.text for n in r.rule.notes if n.code == "CONTEXT_ROPE_DIFFERS")
            out.append(Change("FIX_ROPE_SCALING", r.rule.label, f"write the target's rope_scaling in the draft's "
                              f"config.json if the draft was trained with the target's RoPE: {note}"))
    return out or [Change("NOTHING", None, "nothing to change: " + CHANGE_CODES["NOTHING"] + ".")]


# ----------------------------------------------------------------------------- figure, claims, summary

def plot_curves(curves: list[CurveOfEngine], limits: tuple[Limit, ...], *, title: str, num_steps: int, ax=None):
    """tau per bin with its interval (error bars) for each curve, bins not served marked x at tau = 1, and the
    limits as dashed lines; x: the context position of the round's first drafted token (log 2 scale)."""
    import matplotlib.pyplot as plt

    fig, ax = (ax.figure, ax) if ax is not None else plt.subplots(figsize=(8.5, 4.2))
    bins = curves[0].bins
    centre = {(b.lo, b.hi): (b.lo + b.hi) / 2 for b in bins}
    for i, c in enumerate(curves):
        shift = 1 + 0.04 * (i - (len(curves) - 1) / 2)       # side by side, not on top of each other
        done = [b for b in c.bins if b.tau is not None]
        line = ax.errorbar([centre[(b.lo, b.hi)] * shift for b in done], [b.tau.value for b in done],
                           yerr=[[b.tau.value - b.tau.low for b in done], [b.tau.high - b.tau.value for b in done]],
                           marker="o", capsize=4, label=c.label)
        gone = [b for b in c.bins if b.status == "not served"]
        if gone:
            ax.plot([centre[(b.lo, b.hi)] * shift for b in gone], [1.0] * len(gone), "x", ms=10,
                    color=line[0].get_color(), label=f"{c.label}: not served")
    end = bins[-1].hi
    for lim in (x for x in limits if x.position <= end):
        ax.axvline(lim.position, ls="--", lw=0.9, color="grey")
        ax.annotate(lim.label, (lim.position, 1.0), xycoords=("data", "axes fraction"), rotation=90, va="top",
                    ha="right", fontsize=8, color="dimgrey")
    beyond = [x.label for x in limits if x.position > end]
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(centre.values()), [bin_label(*k) for k in centre], rotation=30)
    ax.set_xlabel("context position of the round's first drafted token (tokens; bins)"
                  + (f"; past the documents: {', '.join(beyond)}" if beyond else ""))
    ax.set_ylabel(f"tau, tokens per round (K={num_steps}, accepted + 1)")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="best")
    return fig


def bins_table(curve: ContextCurve, reading: CurveReading):
    """Section 2's table: one row per bin of the no-limit curve, only what a reader weighs (the full record:
    ``curve.to_frame()``): tau, its change from the bin before and, past the trained length, its difference from
    the level inside it, each with its word; columns no bin fills are left out."""
    import pandas as pd

    p = reading.past
    against = f"vs {p.within.label} (trained level)" if p is not None else None
    rows = []
    for b in curve.reference.bins:
        row = {"bin": b.label, "anchors": b.anchors, "documents": b.documents, "status": b.status,
               "tau (tokens per round)": fmt(b.tau) if b.tau is not None else None,
               "change from the bin before": signed(b.change) if b.change is not None else None,
               "word": b.said(b.change_word, b.change)}
        if p is not None and b in p.past:
            diff = p.difference(b)
            row |= {against: signed(diff) if diff is not None else None,
                    "word vs trained level": b.said(p.words[p.past.index(b)], diff)}
        rows.append(row)
    frame = pd.DataFrame(rows).dropna(axis=1, how="all").fillna("")   # a cell with nothing to say stays blank
    if set(frame["status"]) == {"served"}:
        frame = frame.drop(columns="status")
    frame.attrs["title"] = curve.title()
    return frame


def this_draft(rule: cr.ContextRule) -> str:
    """What ``rule``'s engine does with this draft's max_position_embeddings (the rule only bites on a draft whose
    limit is below the target's context)."""
    if rule.fails_from is None:
        return RUNS_AS_IT_IS
    if rule.positions == cr.REFUSES:
        return f"refuses to start at the target's context; {rule.launch}, positions from {rule.fails_from} on not served"
    return f"requests reaching position {rule.fails_from} fail"


def limits_table(curve: ContextCurve):
    """Section 2's engine table (``curve.limits_frame()`` as shown): what each engine does with this draft, beside
    its rule for a draft whose max_position_embeddings is below the target's context, so a rule that cannot bite
    here does not read as what happens."""
    frame = curve.limits_frame()
    frame.insert(1, "this draft's positions", [this_draft(c.rule) for c in curve.engines.values()])
    return frame.rename(columns={"positions": "rule for a draft shorter than the target"})


def figure_title(curve: ContextCurve, what: str) -> str:
    return (f"{what}: tau per context position, {curve.level:.0%} intervals over {len(curve.documents.ids)} "
            f"documents; engines emulated on {curve.device}, {curve.dtype}")


def _bin_claims(b: PositionBin) -> dict:
    out = {"label": b.label, "lo": b.lo, "hi": b.hi, "status": b.status, "anchors": b.anchors}
    if b.tau is not None:
        out["tau"] = interval_record(b.tau, "tokens per round")
    if b.change is not None:
        out |= {"change": interval_record(b.change, "tokens per round"), "change_word": b.change_word}
    if b.vs_reference is not None:
        out |= {"vs_reference": interval_record(b.vs_reference, "tokens per round"),
                "vs_reference_word": b.vs_reference_word}
    return out


def track_claims(curve: ContextCurve, reading: CurveReading) -> dict:
    """One track's curve as the summary states it: documents, limits, bins, the first drop, the bins past the trained
    length against the level inside it, and the verdict."""
    return {"documents": curve.documents.source, "kind": curve.documents.kind, "n_documents": len(curve.documents.ids),
            "length": curve.max_length, "device": curve.device, "dtype": curve.dtype, "num_steps": curve.num_steps,
            "trained_length": reading.trained_length, "draft_max_positions": curve.draft_max_positions,
            "target_max_positions": curve.target_max_positions, "draft_window": curve.draft_window,
            "bins": [_bin_claims(b) for b in curve.reference.bins], "verdict": reading.verdict,
            "first_drop": None if reading.first_drop is None else reading.first_drop.lo,
            "past_trained": _past_claims(reading.past),
            "rules": {e: list(c.rule.codes()) for e, c in curve.engines.items()}}


def _past_claims(p: PastTrained | None) -> dict | None:
    """The bins past the trained length against the last bin inside it (the RETRAIN_LONGER verdict's ground)."""
    if p is None:
        return None
    return {"trained_length": p.trained_length, "within": p.within.label,
            "first_loss": None if p.first_loss is None else p.first_loss.lo,
            "bins": [{"label": b.label, "lo": b.lo, "word": w,
                      **({} if d is None else {"vs_within": interval_record(d, "tokens per round")})}
                     for b, d, w in zip(p.past, p.differences, p.words)]}


def rule_claims(readings: list[RuleReading], *, window: int, max_positions: int) -> dict:
    return {"window": window, "max_positions": max_positions,
            "engines": {r.rule.engine: {"label": r.rule.label, "version": r.rule.engine_version,
                                        "window": r.rule.window, "window_dropped": r.window_dropped,
                                        "fails_from": r.rule.fails_from, "positions": r.rule.positions,
                                        "codes": list(r.rule.codes()),
                                        "window_losses": [b.label for b in r.window_losses],
                                        "bins": [_bin_claims(b) for b in r.curve.bins]} for r in readings}}


def prefixes(documents: Documents, length: int) -> Documents:
    """The first ``length`` tokens of each document (section 3 runs the copy on these)."""
    return Documents(tuple(d[:length] for d in documents.ids), f"the first {length} tokens of each of "
                     f"{documents.source}", documents.kind)


def _changes_words(changes: list[Change]) -> str:
    return " ".join(f"({i}) {c.text}" for i, c in enumerate(changes, start=1))


def summary(tracks: dict[str, tuple[ContextCurve, CurveReading, list[Change]]], rules: list[RuleReading],
            copy_changes: list[Change], *, window: int, max_positions: int) -> tuple[str, dict]:
    """(text, claims): each track's curve, verdict and changes; the engines' rules on the limited copy and what
    they call for."""
    said = []
    for name, (curve, reading, changes) in tracks.items():
        said.append(f"On the {name} track ({curve.documents.source}; K = {curve.num_steps}, {curve.device} "
                    f"{curve.dtype}, teacher-forced), {reading.words()}. What to change: {_changes_words(changes)}")
    said.append(f"On a copy of the draft declaring sliding_window {window} and max_position_embeddings "
                f"{max_positions} (limits it was not trained with), as each engine runs it (emulated): "
                + "; ".join(r.words() for r in rules) + f". What that calls for: {_changes_words(copy_changes)}")
    claims = {"tracks": {name: {**track_claims(c, r), "changes": [ch.code for ch in chs]}
                         for name, (c, r, chs) in tracks.items()},
              "rule": {**rule_claims(rules, window=window, max_positions=max_positions),
                       "changes": [{"code": c.code, "engine": c.engine} for c in copy_changes]}}
    return " ".join(said), claims
