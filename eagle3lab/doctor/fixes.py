"""doctor's fixes: each one change to what runs, proposed from the evidence, then measured as a ladder rung
(``ladder``).

A ``Fix`` says which finding it becomes (its code), what it changes (fields of a ``RunState``), whether the
engine build can run it as measured, where it is written (the checkpoint ``write_fixed`` writes, or the
launch command) and what the build runs of it once written, how it is written up (title, evidence, the fix
in the engine's syntax) and how it is measured. The proposals below each read typed stage values, never
display text: the EAGLE-3 algorithm, the trained wiring, the trained first-layer rule, the vocabulary map
read from behaviour, the chain the command asked for, in ladder order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import Enum

import torch

from eagle3lab.analysis.switches import SWITCHES, cannot_apply, config_key
from eagle3lab.analysis.wiring_search import NO_AUX, wiring_text
from eagle3lab.doctor.findings import cost_of, costliest, doctor_finding
from eagle3lab.doctor.fix_choice import servable_wiring
from eagle3lab.doctor.vocab_behaviour import vocab_from_behaviour
from eagle3lab.engines.layer_ids import resolve_aux_layers
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.findings import Finding, Severity
from eagle3lab.models.state_bank import FINAL_NORMED

ENGINE_FORMAT = {"sglang": "sglang", "vllm": "speculators"}   # the checkpoint family each engine loads


KNOBS = ("engine", "flags", "wiring", "rule", "map")   # what a rung turns; ids count by the points they feed (a new
# engine writes the same wiring in its own numbering)


@dataclass(frozen=True, eq=False)
class RunState:
    """What one rung of the ladder runs (doctor's and notebook 06's alike).

    The draft's side: fc fed the aux states (``aux``; False: the EAGLE algorithm feeds the final state past fc),
    the canonical resid points the build feeds (``wiring``), the first layer's switches (``variant``, e.g.
    ``norm_before_residual``), the chain (``num_steps``, ``num_draft_tokens`` verified a round; None: one more),
    the vocabulary map (None: the draft's own). The build's side: the engine (a profile name) and build (None:
    newest), the ids written, the checkpoint format, and whether the build can run it at all (``runs``)."""

    aux: bool
    wiring: tuple
    variant: dict
    num_steps: int
    d2t: torch.Tensor | None = None
    engine: str | None = None
    build: str | None = None
    num_draft_tokens: int | None = None
    ids: tuple = ()
    checkpoint: str | None = None
    runs: bool = True

    @property
    def fed(self) -> tuple:
        """The states fc is fed."""
        return self.wiring if self.aux else NO_AUX

    @property
    def chain(self) -> int:
        """The chain a round can accept: ``num_steps``, capped by what the flag line verifies."""
        return self.num_steps if self.num_draft_tokens is None else min(self.num_steps, self.num_draft_tokens - 1)

    @property
    def rule(self) -> bool | None:
        """norm_before_residual as this rung runs it (None: not set)."""
        return self.variant.get("norm_before_residual")

    def changed(self, *changes: dict) -> RunState:
        """This state with each change applied in turn."""
        state = self
        for change in changes:
            state = replace(state, **change)
        return state

    def knobs(self) -> dict:
        """What a user turns, by :data:`KNOBS` (the map by identity: one tensor per map read)."""
        return {"engine": (self.engine, self.build, self.checkpoint),
                "flags": (self.aux, self.num_steps, self.num_draft_tokens),
                "wiring": self.wiring, "rule": tuple(sorted(self.variant.items())), "map": id(self.d2t)}

    def turned(self, before: RunState) -> tuple[str, ...]:
        """The knobs that differ from ``before``, in :data:`KNOBS` order."""
        mine, theirs = self.knobs(), before.knobs()
        return tuple(k for k in KNOBS if mine[k] != theirs[k])

    def key(self) -> tuple:
        """Two states with one key run alike (ids matter only through the points they feed; the only map a state
        carries is one read from behaviour, so "has a map" identifies it)."""
        return (self.engine, self.fed, tuple(sorted(self.variant.items())), self.num_steps, self.num_draft_tokens,
                self.d2t is not None)

    def claims(self) -> dict:
        """The state as JSON values (a map as whether one is set)."""
        return {"engine": self.engine, "build": self.build, "num_steps": self.num_steps,
                "num_draft_tokens": self.num_draft_tokens, "ids": list(self.ids), "fed": list(self.fed),
                "rule": self.rule, "checkpoint": self.checkpoint, "runs": self.runs, "aux": self.aux,
                "variant": dict(self.variant), "map": self.d2t is not None}


class FixKind(Enum):
    """What a fix changes, in ladder order."""

    ALGORITHM = "algorithm"
    WIRING = "wiring"
    RULE = "rule"
    VOCAB_MAP = "vocab map"
    CHAIN = "chain"


class WrittenIn(Enum):
    """Where a fix is written."""

    CHECKPOINT = "checkpoint"          # write_fixed writes it
    LAUNCH_COMMAND = "launch command"  # no checkpoint carries it: the written checkpoint's measurement assumes it


class Measure(Enum):
    """How a fix's gain and the tau lost undoing it (every other fix kept) are measured, both paired over prompts."""

    PAIRED = "paired"            # rung before vs after; undone at a chain the bank measures steadily
    CROSSFIT = "cross-fitted"    # read from half of the prompts, scored on the other half; undone likewise
    FULL_CHAIN = "full chain"    # the chain length itself: undone at the final length


@dataclass(frozen=True, eq=False)
class Fix:
    """One change to what runs, proposed from the evidence; the ladder measures it and it becomes a finding."""

    kind: FixKind
    code: str                  # the finding it becomes (the resolver's code for a launch command's fix)
    rung: str                  # its rung's name in the ladder
    change: dict               # the RunState fields it sets
    applicable: bool           # the engine build runs it exactly as measured
    written_in: WrittenIn
    as_written: dict | None    # the RunState fields the build runs once it is written (None: none of it)
    title: str
    evidence: str
    fix: str | None            # what to do, in the engine's syntax
    source: str                # flags / wiring / vocab
    data: dict = field(default_factory=dict)
    measure: Measure = Measure.PAIRED
    severity: str | None = None             # set by what it is; None: from what it costs (findings.Cost)
    read_from: RunState | None = None       # Measure.CROSSFIT: the state the map is read and scored in

    @property
    def fixed_by_checkpoint(self) -> bool:
        """The fix goes into the checkpoint and the build runs it as measured: what
        ``DoctorReport.remaining_after_write`` counts as fixed, unless ``doctor.plan_checkpoint`` left it out
        (``kept_in_checkpoint``: not critical, or a loss measured on the ladder; ``CheckpointPlan.left_out``)."""
        return self.written_in is WrittenIn.CHECKPOINT and self.applicable

    def finding(self, before, after, gain, undone, undone_between) -> Finding:
        """The finding, measured: ``before`` and ``after`` rungs, the paired ``gain`` and ``undone`` intervals
        (``undone_between``: the two rungs undoing it compares). Its severity is what the larger of the two
        costs (``findings.Cost``), unless the fix is of a kind whose severity is set by what it is."""
        cost = costliest(cost_of(gain, before.tau, after.tau), cost_of(undone, *(r.tau for r in undone_between)))
        severity = self.severity or cost.severity
        evidence = self.evidence + ("" if self.severity else f" Severity (the larger of gain and undone): {cost.words}.")
        # what --write-fixed does with it is known only now, with the severity and the gain measured
        words = write_fixed_words(self, severity, gain)
        fix = f"{self.fix.rstrip('.')}. {words}" if self.fix and words else self.fix or words or None
        return doctor_finding(self.code, severity, self.title, evidence, fix, self.source,
                              tau_before=before.tau, tau_after=after.tau, gain=gain, undone=undone, data=self.data,
                              cost=cost)


def kept_in_checkpoint(fix: Fix, severity: str, gain) -> bool:
    """Whether the checkpoint ``--write-fixed`` writes runs ``fix`` (its ``as_written``), from its measured finding's
    ``severity`` and ``gain`` (issue 32): a launch command's fix is assumed as given; a checkpoint's is written only
    for a critical finding (a measurable but small gain read on these prompts is no reason to rewrite a checkpoint
    that may be right); neither when it measures as a loss on the ladder."""
    return (fix.as_written is not None and gain.sign() != -1
            and (fix.written_in is WrittenIn.LAUNCH_COMMAND or Severity(severity).blocking))


def write_fixed_words(fix: Fix, severity: str, gain) -> str:
    """The one sentence a checkpoint fix's text says about ``--write-fixed`` (``kept_in_checkpoint``); empty for a
    launch command's fix and for one no checkpoint carries."""
    if fix.written_in is not WrittenIn.CHECKPOINT or fix.as_written is None:
        return ""
    if kept_in_checkpoint(fix, severity, gain):
        return "--write-fixed writes it (a critical finding)" + ("." if fix.applicable else
                                                                "; this build does not run all of it.")
    why = ("it measures as a loss on this ladder" if gain.sign() == -1 else
           f"the finding is {severity}, not critical: a gain this small is no reason to rewrite the checkpoint")
    return f"--write-fixed leaves it out: {why}."


# ------------------------------------------------------------------ the fixes' words in the engine's syntax


def ids_fix(engine: str, ids) -> str:
    key = PROFILES[engine].id_keys[0]
    return f"config key {key}: {list(ids)}"


def id_notes(engine: str, ids, num_layers: int, arch: str | None, engine_version: str | None) -> str:
    """What the layer-id translator says about ``ids`` in that build (e.g. the release from which SGLang's
    id -1 feeds the embedding), as a parenthesis for a fix; empty when it says nothing."""
    res = resolve_aux_layers(PROFILES[engine].id_engine, list(ids), num_layers, arch=arch, engine_version=engine_version)
    notes = [n.text for n in res.notes if n.kind in ("note", "version")]
    return f" ({'; '.join(notes)})" if notes else ""


def unreadable_ids(draft_path, draft, build, choice) -> Finding:
    """The engine reads no ids it can serve from the checkpoint as written: a finding with its fix (the
    ids of the chosen wiring, in the engine's key), never an early exit."""
    profile = PROFILES[build.engine]
    _, ids, why = build.servable(choice.wiring)
    # write_fixed always writes ids in the engine's key, those of the wiring it writes (the WIRING finding says
    # whether that is this one)
    fix = (f"write {ids_fix(build.engine, ids)} (--write-fixed writes the ids of the wiring it writes, in the "
           f"{ENGINE_FORMAT[build.engine]} format)"
           if ids is not None else f"no ids {build.label} can capture for {wiring_text(choice.wiring)} ({why})")
    return doctor_finding(
        "AUX_IDS_UNREADABLE", "critical", f"{build.label} reads no aux ids it can serve from this checkpoint",
        f"{draft_path}: {build.label} reads ids at {', '.join(profile.id_keys) or 'no key'} and would not feed fc "
        f"{draft.config.num_aux} states as written (it refuses the checkpoint or feeds its default). The wiring "
        f"search ran anyway: the weights fit {wiring_text(choice.wiring)}.", fix, "wiring",
        data={"ids": ids, "wiring": list(choice.wiring)})


# ------------------------------------------------------------------ the proposals, in ladder order


def algorithm_fix(flag: Finding) -> Fix:
    """sglang#21272: an EAGLE-3 draft launched as EAGLE, fc silently skipped (the widths match)."""
    return Fix(FixKind.ALGORITHM, flag.code, "EAGLE-3 algorithm", {"aux": True}, True, WrittenIn.LAUNCH_COMMAND,
               {"aux": True}, "fc silently skipped: wrong algorithm", flag.text + " The widths match, so nothing "
               "fails: the draft reads the last hidden state past fc (sglang#21272).", flag.fix, "flags",
               severity="critical")


def _nearest_text(best, servable, ids, why, choice, build, order_note: str) -> str:
    """The wiring fix where the build cannot capture the trained points: the nearest it can, with its measured
    cost, and which other builds capture them exactly (their newest code read answers, and so does this
    engine's)."""
    engine, n, arch = build.engine, build.num_layers, build.arch
    others = [(e, e) for e in ENGINE_FORMAT if e != engine]
    if build.version:
        others.append((f"{engine}'s newest code read", engine))
    exact = [f"{label} captures them exactly ({ids_fix(e, o[1])})" for label, e in others
             if (o := servable_wiring(best, e, n, arch))[0] == best]
    cost = "" if choice.cost is None else (f" (tau {choice.cost.value:+.3f} [{choice.cost.low:+.3f}, "
                                           f"{choice.cost.high:+.3f}] against the trained points)")
    return (f"{build.label} cannot capture {wiring_text(best)} ({why or 'not every point'}); nearest it "
            f"can: " + (f"{wiring_text(servable)} with {ids_fix(engine, ids)}{order_note}{cost}" if servable
                        else "none") + ("; " + "; ".join(exact) if exact else ""))


def wiring_fix(searched, start: RunState, build) -> Fix | None:
    """fc fed other target states than in training: the trained points measured as they are; the build is
    given the nearest it can capture."""
    best, choice = searched.wiring, searched.choice
    if best == start.wiring or searched.served_ok:
        return None
    servable, ids, why = build.servable(best)
    if choice.cost is not None:    # none in the set is servable: the nearest, measured
        servable, ids = choice.wiring, build.servable(choice.wiring)[1]
    order_note = "" if servable is None or list(servable) == sorted(servable) else (
        "; the engine concatenates in ascending order, so fc's input columns must be permuted")
    if servable == best:
        fix = (ids_fix(build.engine, ids) + id_notes(build.engine, ids, build.num_layers, build.arch, build.version)
               + order_note)
    else:
        fix = _nearest_text(best, servable, ids, why, choice, build, order_note)
    found = searched.found
    return Fix(
        FixKind.WIRING, "WIRING", "trained wiring", {"wiring": best}, bool(servable) and tuple(servable) == best,
        WrittenIn.CHECKPOINT, {"wiring": tuple(servable)} if servable else None,
        "fc is fed other target states than in training",
        f"{build.engine} feeds {wiring_text(start.wiring)}; the weights fit {found.summary()}. "
        f"{choice.statement}" + "".join(f"; {x}" for x in choice.separations), fix, "wiring",
        data={"ids": ids, "wiring": list(best), "servable": list(servable) if servable else None,
              "within_noise": choice.members, "servable_by": build.label, "prompts": choice.prompts,
              "settled": choice.settled, "separations": choice.separations})


def _rule_divergence(bank, draft, wiring, served: dict, trained: dict):
    """``analysis.tensor_diff`` of the draft run with the engine's switches vs the trained ones, on the same
    fc input (one sequence of the bank): the hook point where the engine's arithmetic departs."""
    from eagle3lab.analysis.tensor_diff import tensor_diff

    n = bank.lengths[0]
    dev, dtype = draft.fc.weight.device, draft.fc.weight.dtype
    inputs = {"input_ids": bank.input_ids[:1, 1:n].to(dev)}
    if wiring:
        inputs["aux_hidden_states"] = bank.fc_input(wiring)[:1, :n - 1].to(dev, dtype)
    else:
        inputs["recycled_hidden"] = bank.states[FINAL_NORMED][:1, :n - 1].to(dev, dtype)
    return tensor_diff(draft.rewired(**served), draft.rewired(**trained), labels=("as served", "as trained"), **inputs)


def rule_fix(searched, start: RunState, served, build, bank) -> Fix | None:
    """The first decoder layer runs another rule than in training; the keys the engine honours take effect
    once written, the others stay the engine's."""
    best, served_variant, engine = searched.variant, start.variant, build.engine
    if best == served_variant or searched.served_ok:
        return None
    changed = [k for k in SWITCHES if best.get(k) != served_variant.get(k)]
    cannot = cannot_apply(PROFILES[engine], best, changed)
    keys = ", ".join(f"{config_key(k)}: {str(best[k]).lower()}" for k in changed)
    divergence = _rule_divergence(bank, served.view, searched.wiring, served_variant, best)
    return Fix(
        FixKind.RULE, "FIRST_LAYER_RULE", "trained rule", {"variant": best}, not cannot, WrittenIn.CHECKPOINT,
        {"variant": {k: (served_variant if k in cannot else best)[k] for k in best}},
        f"the first decoder layer runs another rule than in training ({', '.join(changed)})",
        f"trained with {', '.join(f'{k}={best[k]}' for k in changed)}; {engine} runs "
        f"{', '.join(f'{k}={served_variant.get(k)}' for k in changed)}. Same fc input through both: the first "
        f"hook point that differs is {divergence.first_divergence}",
        f"config keys {keys}" if not cannot else (
            f"{engine} ignores {', '.join(cannot)}: serve with an engine that honours it (vLLM honours "
            "norm_before_residual) or retrain with the engine's rule"), "wiring",
        data={"changed": changed, "cannot_apply": cannot, "first_divergence": divergence.first_divergence})


def map_fix(draft, meter, state: RunState):
    """SpecForge#534: the vocabulary map read from behaviour with every other fix applied (``state``). Returns
    (the fix or None, the check or None, the findings it leaves: re-pointing that does not raise tau on
    prompts it was not read from is a weak draft's confusions, not a wrong map)."""
    if draft.d2t is None:
        return None, None, []
    vocab = vocab_from_behaviour(meter.bank, meter.view.rewired(**state.variant), state.fed)
    if not vocab.suspects:
        return None, vocab, []
    modes = [int(vocab.table.loc[s, "mode"]) for s in vocab.suspects]
    shown = ", ".join(f"{s} -> {m}" for s, m in zip(vocab.suspects[:12], modes))
    share = len(vocab.suspects) / max(1, vocab.checked)
    absolute = sum(m == int(draft.d2t[s]) for s, m in zip(vocab.suspects, modes))
    hint = (" Most point where d2t read as absolute ids would: d2t holds absolute ids."
            if absolute > len(vocab.suspects) / 2 else
            " Most of the map disagrees: a regenerated or missing d2t (SpecForge#534)." if share > 0.5 else "")
    seen = (f"{len(vocab.suspects)} of {vocab.checked} slots the draft used enough agree with the target on "
            f"one other token, never or rarely on the map's, in both halves of the prompts (slot -> token: "
            f"{shown}).")
    data = {"slots": vocab.suspects, "tokens": modes}
    gain = meter.crossfit(state, meter("before the map", state))
    if gain.sign() != 1:
        return None, vocab, [doctor_finding(
            "VOCAB_CONFUSIONS", "info", f"{len(vocab.suspects)} slots look re-pointed, but re-pointing them "
            "does not raise tau on prompts they were not read from", seen + " Likely a weak draft's confusions, "
            "not a wrong map.", None, "vocab", gain=gain, data=data)]
    d2t = vocab.suggested_d2t(draft.d2t)
    return Fix(FixKind.VOCAB_MAP, "VOCAB_MAP", "map from behaviour (in-sample)", {"d2t": d2t}, True,
               WrittenIn.CHECKPOINT, {"d2t": d2t},
               f"{len(vocab.suspects)} draft-vocabulary slots point at the wrong target tokens", seen + hint,
               "rewrite d2t for those slots", "vocab", data=data, measure=Measure.CROSSFIT,
               read_from=state), vocab, []


def chain_fix(flag: Finding, served_steps: int, intended_steps: int) -> Fix:
    """The chain the resolver found capped, at the length the command asked for: a longer chain always accepts
    more, so never critical by itself."""
    return Fix(FixKind.CHAIN, flag.code, f"chain of {intended_steps}", {"num_steps": intended_steps}, True,
               WrittenIn.LAUNCH_COMMAND, {"num_steps": intended_steps}, f"the chain is capped at {served_steps}",
               flag.text, flag.fix, "flags", measure=Measure.FULL_CHAIN, severity="warning")

