"""Doctor: every reason a draft accepts less when served than it should, each proven by measurement.

A draft is checked four ways and each problem becomes a ``findings.DoctorFinding`` (a code, a severity,
the evidence, the fix in the engine's own syntax):

- the **launch command** through the engine's flag resolver (``engines.flags``): caps, algorithm,
  silently replaced ids;
- the **configs** (``config_checks``): fc width vs ``num_aux x`` target hidden, hidden and vocab sizes,
  context length, RoPE (theta, scaling), sliding window, dtype;
- the **wiring and first-layer rule** the weights were trained on (``wiring_search``) against what
  the engine feeds the draft;
- the **vocabulary map and the labels from behaviour** (``vocab_behaviour``): per draft-vocabulary slot,
  whether the target agrees with the token the map sends it to; whether the draft learned the target's
  distribution without its final norm.

``write_fixed`` writes what a checkpoint can carry of the fixes and measures it.

Measured findings form a ladder of single fixes on one bank of target states (teacher-forced, chain
acceptance): as launched -> right algorithm -> the trained wiring -> the trained rule -> the map from
behaviour (these at the served chain length) -> the chain the command asked for. Each rung's tau carries a
bootstrap interval over prompts and its gain a paired one. "Critical" = the engine refuses, silently
skips fc, or a measured fix raises tau beyond the noise.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch

from eagle3lab.analysis.config_checks import config_findings, engine_findings, text_config
from eagle3lab.analysis.evidence import Evidence, draw_prompts, from_pool_bank
from eagle3lab.analysis.findings import SEVERITIES, DoctorFinding
from eagle3lab.analysis.fix_choice import Build, FixChoice, key_of, servable_wiring, settle
from eagle3lab.analysis.vocab_behaviour import (
    VocabCheck,
    absolute_ids,
    crossfit_vocab,
    prenorm_labels_check,
    vocab_from_behaviour,
    vocab_map,
)
from eagle3lab.analysis.wiring_search import close_to, wiring_text
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio, bootstrap_ratio_difference
from eagle3lab.engines.layer_ids import resolve_aux_layers
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.engines.versions import parse_engine_version
from eagle3lab.errors import bad_input
from eagle3lab.models.state_bank import FINAL_NORMED, StateBank

_FLAG_SEVERITY = {"error": "critical", "warning": "warning", "info": "info"}
# flag findings whose effect doctor measures itself (the flag finding then carries the measured taus)
_CHAIN_CAPS = {"SGL_TOPK1_DRAFT_TOKENS_ADJUSTED"}
_ALGORITHM = {"SGL_EAGLE3_DRAFT_WITH_EAGLE", "VLLM_EAGLE3_DRAFT_WITH_EAGLE"}


# ------------------------------------------------------------------ the ladder


@dataclass
class Rung:
    """One state of the ladder: what runs (wiring, switch settings, chain length, map) and its score."""

    name: str
    wiring: tuple
    variant: dict
    num_steps: int
    d2t: torch.Tensor | None = None
    score: object = None       # decoding.evaluate.BankScore

    @property
    def tau(self) -> Interval:
        return bootstrap_ratio(*self.score.tau_sums)


def _measure(bank: StateBank, draft, rung: Rung) -> Rung:
    from eagle3lab.analysis.wiring_search import EVAL_BATCH
    from eagle3lab.decoding.evaluate import evaluate_on_bank

    view = draft.rewired(**rung.variant)
    ctx = vocab_map(view, rung.d2t) if rung.d2t is not None else contextlib.nullcontext()
    with ctx:
        rung.score = evaluate_on_bank(bank, view, rung.wiring, rung.num_steps, batch_size=EVAL_BATCH)
    return rung


def _gain(before: Rung, after: Rung) -> Interval:
    return bootstrap_ratio_difference(*after.score.tau_sums, *before.score.tau_sums)


def _rule_divergence(bank: StateBank, draft, wiring, served: dict, trained: dict):
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


# ------------------------------------------------------------------ the whole check

ENGINE_FORMAT = {"sglang": "sglang", "vllm": "speculators"}   # the checkpoint family each engine loads
_RULE_KEYS = ("norm_before_residual", "norm_before_fc", "fc_norm", "recycle_postnorm")
_WRITABLE = {"WIRING", "FIRST_LAYER_RULE", "VOCAB_MAP", "VOCAB_ABSOLUTE_IDS", "DRAFT_CONTEXT_SHORT"}   # what write_fixed writes


@dataclass
class DoctorReport:
    """What ``doctor`` found: findings ordered by measured impact, the ladder of single fixes, the
    wiring search and the vocabulary check behind them."""

    draft: str
    target: str
    engine: str
    engine_version: str | None
    device: str
    findings: list[DoctorFinding]
    ladder: list[Rung]
    search: object                 # analysis.wiring_search.WiringSearch
    vocab: VocabCheck | None
    flags: object = None           # engines.flags.FlagsResult when a launch command was given
    notes: list[str] = field(default_factory=list)
    written_fix: Rung | None = None   # what a checkpoint written by write_fixed should measure (engine's view)
    model: object = field(default=None, repr=False)   # the loaded draft and the bank, for write_fixed
    bank: StateBank | None = field(default=None, repr=False)
    target_config: dict = field(default_factory=dict, repr=False)
    target_source: object = field(default=None, repr=False)   # what load_draft reads the embedding from
    choice: FixChoice | None = None   # the wiring and rule handed to the user, chosen from the search's set
    engine_platform: str | None = None

    @property
    def prompts_used(self) -> int:
        """Prompts the findings rest on (the sequential rule may have added some to the first ones)."""
        return len(self.bank.lengths) if self.bank is not None else 0

    def remaining_after_write(self) -> list[DoctorFinding]:
        """Critical findings a written checkpoint cannot fix: the launch command's, a rule the engine
        ignores, a checkpoint made for another target."""
        def fixed(f):
            if f.code == "WIRING":
                return f.data.get("servable") == f.data.get("wiring")
            return f.code in _WRITABLE and not f.data.get("cannot_apply")
        return [f for f in self.critical if not fixed(f)]

    @property
    def critical(self) -> list[DoctorFinding]:
        return [f for f in self.findings if f.severity == "critical"]

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def finding(self, code: str) -> DoctorFinding | None:
        return next((f for f in self.findings if f.code == code), None)

    def table(self) -> pd.DataFrame:
        rows = []
        for f in self.findings:
            rows.append({"code": f.code, "severity": f.severity, "title": f.title,
                         "tau before": None if f.tau_before is None else round(f.tau_before.value, 3),
                         "tau after": None if f.tau_after is None else round(f.tau_after.value, 3),
                         "gain [95%]": None if f.gain is None else f"{f.gain.value:+.2f} [{f.gain.low:+.2f}, {f.gain.high:+.2f}]",
                         "fix": f.fix})
        return pd.DataFrame(rows)

    def ladder_table(self) -> pd.DataFrame:
        rows = []
        for r in self.ladder:
            tau = r.tau
            rows.append({"rung": r.name, "wiring": wiring_text(r.wiring),
                "settings": ", ".join(k for k in _RULE_KEYS if r.variant.get(k)) or "all off",
                "num_steps": r.num_steps, "tau": tau.value, "tau_low": tau.low, "tau_high": tau.high})
        return pd.DataFrame(rows).set_index("rung")

    def to_dict(self) -> dict:
        """The ``eagle3lab doctor --json`` object (docs/cli/doctor.md)."""
        return {"schema_version": 1, "draft": self.draft, "target": self.target, "engine": self.engine,
                "engine_version": self.engine_version, "device": self.device,
                "critical": len(self.critical), "findings": [f.to_dict() for f in self.findings],
                "ladder": self.ladder_table().reset_index().to_dict("records"),
                "search": self.search.summary(), "notes": self.notes, "prompts_used": self.prompts_used,
                "fix_choice": None if self.choice is None else {
                    "wiring": [str(p) for p in self.choice.wiring], "variant": self.choice.variant,
                    "servable": self.choice.servable, "within_noise": self.choice.members,
                    "statement": self.choice.statement, "settled": self.choice.settled,
                    "separations": self.choice.separations}}

    def summary(self) -> str:
        first, last = self.ladder[0].tau, self.ladder[-1].tau
        crit = ", ".join(f.code for f in self.critical) or "none"
        return (f"{len(self.findings)} findings ({len(self.critical)} critical: {crit}). As {self.engine} serves it "
                f"tau {first.value:.2f} [{first.low:.2f}, {first.high:.2f}]; with every fix "
                f"{last.value:.2f} [{last.low:.2f}, {last.high:.2f}] (teacher-forced chain of {self.ladder[-1].num_steps}).")


def _served_chain(flags, engine: str, default: int) -> tuple[int, int, list[str]]:
    """(chain length served, chain length the command asked for, notes) from a resolved command. The asked
    length differs only where the resolver found the cap; a command the engine refuses, or leaves
    without a chain length, is scored at ``default`` steps and said so."""
    eff, key = flags.effective, ("num_steps" if engine == "sglang" else "num_speculative_tokens")
    notes = []
    served = eff.get(key)
    if not isinstance(served, int) or served < 1 or flags.errors:
        notes.append(f"the command gives no chain the engine would run ({key} {served!r}"
                     + (f"; {', '.join(f.code for f in flags.errors)}" if flags.errors else "")
                     + f"): scored as a chain of {default}")
        served = default
    if (eff.get("topk") or 1) > 1:
        notes.append(f"topk {eff.get('topk')}: the engine drafts a tree; doctor scores chains of the same depth")
    intended = served
    cap = next((f for f in flags.findings if f.code in _CHAIN_CAPS), None)
    asked = flags.as_given.get("num_draft_tokens")
    if cap is not None and isinstance(asked, int) and asked - 1 > served:
        intended = asked - 1
    return served, intended, notes


def _algorithm_wrong(flags) -> bool:
    return bool(flags is not None and any(f.code in _ALGORITHM for f in flags.findings))


def _ids_fix(engine: str, ids) -> str:
    key = PROFILES[engine].id_keys[0]
    return f"config key {key}: {list(ids)}"


def _id_notes(engine: str, ids, num_layers: int, arch: str | None, engine_version: str | None) -> str:
    """What the layer-id translator says about ``ids`` in that build (e.g. the release from which SGLang's
    id -1 feeds the embedding), as a parenthesis for a fix; empty when it says nothing."""
    res = resolve_aux_layers(PROFILES[engine].id_engine, list(ids), num_layers, arch=arch, engine_version=engine_version)
    notes = [n.text for n in res.notes if n.kind in ("note", "version")]
    return f" ({'; '.join(notes)})" if notes else ""


def _stated_switches(draft) -> dict:
    """The switches as the checkpoint states them: its config's keys where written, else as its own
    format's trainer runs them."""
    from eagle3lab.analysis.wiring_search import settings_of

    stated = settings_of(draft)
    return {k: (v if getattr(draft.config, k, None) is None else bool(getattr(draft.config, k)))
            for k, v in stated.items()}


def _evidence_note(found, choice: FixChoice, cap: int) -> str:
    """How many prompts the answer rests on, and why doctor stopped adding them."""
    how = ("every rival told apart" if choice.settled else
           f"the cap of {cap} prompts (or the pool) reached with a rival still within noise")
    return (f"the wiring search ran on {found.best['tau'].units} prompts; "
            f"the fix rests on {choice.prompts} ({how}): {choice.statement}")


def _unreadable_ids(draft_path, draft, build: Build, choice: FixChoice) -> DoctorFinding:
    """The engine reads no ids it can serve from the checkpoint as written: a finding with its fix (the
    ids of the chosen wiring, in the engine's key), never an early exit."""
    profile = PROFILES[build.engine]
    _, ids, why = build.servable(choice.wiring)
    fix = (f"write {_ids_fix(build.engine, ids)} (--write-fixed writes the {ENGINE_FORMAT[build.engine]} format)"
           if ids is not None else f"no ids {build.label} can capture for {wiring_text(choice.wiring)} ({why})")
    return DoctorFinding(
        "AUX_IDS_UNREADABLE", "critical", f"{build.label} reads no aux ids it can serve from this checkpoint",
        f"{draft_path}: {build.label} reads ids at {', '.join(profile.id_keys) or 'no key'} and would not feed fc "
        f"{draft.config.num_aux} states as written (it refuses the checkpoint or feeds its default). The wiring "
        f"search ran anyway: the weights fit {wiring_text(choice.wiring)}.", fix, "wiring",
        data={"ids": ids, "wiring": list(choice.wiring)})


MAX_PROMPTS = 24    # the default cap of the sequential rule (fix_choice.settle)
PROMPT_STEP = 8


def run_doctor(draft_path, *, target=None, dump=None, dump_layer_ids=None, engine: str = "sglang", engine_version=None,
               engine_platform: str | None = None, engine_args=None, server_log: str | None = None, prompts=None,
               num_prompts: int | None = None, max_prompts: int | None = None, prompt_step: int = PROMPT_STEP,
               seed: int | None = None, bank: StateBank | None = None, max_new_tokens: int = 48,
               num_steps: int = 3, device: str = "cpu", progress: bool = True) -> DoctorReport:
    """Check ``draft_path`` as ``engine`` serves it (see the module docstring).

    States come from a live ``target`` (a folder, a short name or a ``Target``; ``prompts`` decoded
    greedily for ``max_new_tokens``) or from a hidden-state ``dump`` (``models.hidden_dump``), in which
    case ``target`` is a folder read only for its config and head (``dump_layer_ids``: the ids a bare vLLM
    ``extract_hidden_states`` folder was dumped with; an eagle3lab dump names its points), or from ``bank``,
    states already captured from ``target`` (one row per prompt: a pool shared by several runs).
    The evidence starts with ``num_prompts`` of the prompts (default 8; all of an explicit ``prompts`` list),
    taken in the order ``seed`` draws (None: as given), and grows by ``prompt_step`` up to ``max_prompts``
    (default 24, at most the pool) while the fix is not told apart from its rivals (``fix_choice.settle``).
    ``engine_args``: the launch command (resolved by ``engines.flags``); without it a chain of
    ``num_steps`` is assumed. ``server_log``: the server's own acceptance lines or metrics text, compared
    with the as-served prediction. ``engine_platform``: "cpu" or "cuda", the build (vLLM's runner follows it).
    """
    from eagle3lab.analysis.wiring_search import NO_AUX, search_wiring, served_views, settings_of
    from eagle3lab.bundled import load_prompts
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.engines.flags import resolve_flags
    from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft
    from eagle3lab.models.state_bank import TargetHead, bank_from_dump, capture_bank
    from eagle3lab.models.target import Target, load_target

    if engine not in ENGINE_FORMAT:
        raise bad_input("--engine", None, f"one of {', '.join(ENGINE_FORMAT)}", repr(engine))
    parse_engine_version(engine_version, "--engine-version")   # bad input named before any model loads
    if engine_platform not in (None, "cpu", "cuda"):
        raise bad_input("--engine-platform", None, "cpu or cuda", repr(engine_platform))
    if target is None:
        raise bad_input("doctor", "--target", "the target (a folder or short name; with --dump, its folder for the "
                        "config and the head)", None)
    notes: list[str] = []
    if prompts is None:
        pool, first_n = load_prompts(), num_prompts or 8
    else:
        pool, first_n = list(prompts), num_prompts or len(prompts)
    cap = max(first_n, max_prompts if max_prompts is not None else MAX_PROMPTS)
    if dump is not None:
        from eagle3lab.models.hidden_dump import HiddenDump

        target_dir = str(target)
        target_config = json.loads((Path(target_dir) / "config.json").read_text())
        n_layers = text_config(target_config).get("num_hidden_layers")
        evidence = Evidence(bank_from_dump(HiddenDump(dump, vllm_layer_ids=dump_layer_ids, num_layers=n_layers),
                                           TargetHead.from_folder(target_dir), num_layers=n_layers))
        draft = load_draft(draft_path, target=target_dir, device=device, check_vocab=False)
        target_name = f"{target_dir} (states from the dump {dump})"
    else:
        tgt = target if isinstance(target, Target) else load_target(target, device=device)
        target_config = tgt.model.config.to_dict()
        draft = load_draft(draft_path, target=tgt, device=device, check_vocab=False)
        target_name = str(getattr(tgt, "name", None) or target)
        if bank is not None:
            evidence = from_pool_bank(bank, first_n, seed)
        else:
            def decode(some):
                seqs, lens = greedy_dataset(tgt, some, max_new_tokens=max_new_tokens, progress=progress)
                return capture_bank(tgt, seqs, lens, progress=progress)

            order = draw_prompts(pool, seed)
            evidence = Evidence(decode(order[:first_n]), pool=order[first_n:cap], decode=decode)
    bank = evidence.bank
    n, arch = bank.num_layers, draft.target_arch
    findings: list[DoctorFinding] = []
    absolute = absolute_ids(draft, draft_path)
    if absolute is not None:
        findings.append(absolute)
        notes.append("every rung is measured with d2t read as offsets: as written, the engine indexes outside the "
                     "target vocabulary")

    # the checkpoint and the configs (the draft was loaded even with a broken map: its behaviour is read below)
    inspected = inspect_checkpoint(draft_path, target=target if dump is None else target_dir)
    for err in inspected["errors"]:
        findings.append(DoctorFinding("CHECKPOINT_ERROR", "critical", "the checkpoint does not load cleanly", err,
                                      source="config"))
    findings += config_findings(draft, target_config, f"{draft_path}/config.json")
    findings += engine_findings(draft, engine)

    # the launch command
    flags = None
    served_steps, intended_steps = num_steps, num_steps
    if engine_args:
        flags = resolve_flags(engine, engine_args, target_config=target_config, draft_config=str(draft_path),
                              engine_version=engine_version, num_target_layers=n)
        served_steps, intended_steps, chain_notes = _served_chain(flags, engine, num_steps)
        notes += chain_notes
        for f in flags.findings:
            if f.code in _CHAIN_CAPS | _ALGORITHM or f.severity != "info":
                findings.append(DoctorFinding(f.code, _FLAG_SEVERITY[f.severity], f.message.split(". ")[0],
                                              f.message, f.fix, "flags", data={"rule": f.rule}))
    else:
        notes.append(f"no launch command given: a chain of {num_steps} draft tokens assumed")

    # the ladder of single fixes, measured on the bank
    build = Build(engine, engine_version, engine_platform, n, arch)
    views = served_views(draft, n, arch, engine_versions={engine: engine_version},
                         engine_platforms={engine: engine_platform})   # ids as that build reads them
    # every rung runs the weights as the engine does (its embedding and RoPE choices); only the switches
    # and the wiring a fix changes are forced
    served_view = views.get(engine) or draft.under(PROFILES[engine]).bound(num_target_layers=n, target_arch=arch)
    served_variant = settings_of(served_view)
    served_wiring = tuple(served_view.aux_resid) if engine in views else None   # None: it cannot read the ids
    # A wrong map misleads the search's labels: read the map first from the draft as served, and search
    # with the slots it re-points pointed back
    first = None if draft.d2t is None or served_wiring is None else vocab_from_behaviour(bank, served_view,
                                                                                         served_wiring)
    with vocab_map(draft, first.suggested_d2t(draft.d2t)) if first and first.suspects else contextlib.nullcontext():
        found = search_wiring(bank, draft, num_steps=num_steps, arch=arch, progress=progress)
        # the fix, chosen from the set within noise (servable first), settled on as many prompts as it needs
        served_key = None if served_wiring is None else key_of(served_wiring, served_variant)
        choice, scores = settle(evidence, served_view, found, build, _stated_switches(draft), served_key, num_steps=num_steps, max_prompts=cap,
                                step=prompt_step)
    bank = evidence.bank
    if first and first.suspects:
        notes.append(f"the wiring search ran with {len(first.suspects)} slots re-pointed as read from the draft as served")
    notes.append(_evidence_note(found, choice, cap))
    # the ladder measures what the weights fit: the chosen member, or (none servable) the set's best
    best_wiring = choice.wiring if choice.cost is None else choice.search_best[0]
    best_variant = dict(choice.variant)
    if served_wiring is None:
        findings.append(_unreadable_ids(draft_path, draft, build, choice))
        served_wiring = best_wiring    # the as-launched rung: the ids it can read already given

    algorithm_wrong = _algorithm_wrong(flags)
    fc_skipped = algorithm_wrong and draft.config.hidden_size == bank.hidden_size

    # The fixes, each one change to what runs. The ladder applies them in order; each finding also
    # says what undoing that fix alone costs with every other fix kept (fixes can need each other:
    # the trained wiring helps little while the first-layer rule is still wrong).
    start = {"aux": not fc_skipped, "wiring": served_wiring, "variant": served_variant, "num_steps": served_steps,
             "d2t": None}
    fixes: list[tuple[str, dict, dict]] = []          # (rung name, change, finding fields)
    if fc_skipped:
        flag = findings.pop(next(i for i, f in enumerate(findings) if f.code in _ALGORITHM))
        fixes.append(("EAGLE-3 algorithm", {"aux": True}, dict(
            code=flag.code, severity="critical", title="fc silently skipped: wrong algorithm", source="flags",
            evidence=flag.evidence + " The widths match, so nothing fails: the draft reads the last hidden state "
            "past fc (sglang#21272).", fix=flag.fix)))
    elif algorithm_wrong:
        notes.append("the algorithm flag makes the engine feed fc a state of the wrong width: it refuses to load")
    # the served hypothesis within noise of the best: nothing to fix (the search's best is then one of a set)
    top = min(scores, key=lambda k: scores[k].ce)
    served_ok = served_key is not None and served_key in scores and close_to(scores[served_key], scores[top])
    if served_ok and (best_wiring != served_wiring or best_variant != served_variant):
        notes.append(f"{engine}'s wiring and rule are within noise of the search's best: not called a fault")
    servable, ids, why = build.servable(best_wiring)
    if choice.cost is not None:    # none in the set is servable: the nearest, measured
        servable, ids = choice.wiring, build.servable(choice.wiring)[1]
    if best_wiring != served_wiring and not served_ok:
        order_note = "" if servable is None or list(servable) == sorted(servable) else (
            "; the engine concatenates in ascending order, so fc's input columns must be permuted "
            "(--write-fixed does it)")
        if servable == best_wiring:
            fix = _ids_fix(engine, ids) + _id_notes(engine, ids, n, arch, engine_version) + order_note
        else:   # the trained points are measured as they are; the engine gets the nearest it can capture
            # the other engines' builds are not known: their newest code read answers, and so does this engine's
            others = [(e, e) for e in ENGINE_FORMAT if e != engine]
            if engine_version:
                others.append((f"{engine}'s newest code read", engine))
            exact = [f"{label} captures them exactly ({_ids_fix(e, o[1])})" for label, e in others
                     if (o := servable_wiring(best_wiring, e, n, arch))[0] == best_wiring]
            cost = "" if choice.cost is None else (f" (tau {choice.cost.value:+.3f} [{choice.cost.low:+.3f}, "
                                                   f"{choice.cost.high:+.3f}] against the trained points)")
            fix = (f"{build.label} cannot capture {wiring_text(best_wiring)} ({why or 'not every point'}); nearest it "
                   f"can: " + (f"{wiring_text(servable)} with {_ids_fix(engine, ids)}{order_note}{cost}" if servable
                               else "none") + ("; " + "; ".join(exact) if exact else ""))
        fixes.append(("trained wiring", {"wiring": best_wiring}, dict(
            code="WIRING", title="fc is fed other target states than in training", source="wiring",
            evidence=f"{engine} feeds {wiring_text(served_wiring)}; the weights fit {found.summary()}. "
            f"{choice.statement}" + "".join(f"; {x}" for x in choice.separations),
            fix=fix, data={"ids": ids, "wiring": list(best_wiring), "servable": list(servable) if servable else None,
                          "within_noise": choice.members, "servable_by": build.label, "prompts": choice.prompts,
                          "settled": choice.settled, "separations": choice.separations})))
    if best_variant != served_variant and not served_ok:
        changed = [k for k in _RULE_KEYS if best_variant.get(k) != served_variant.get(k)]
        profile = PROFILES[engine]
        cannot = [
            k for k in changed if (k not in profile.honours if k != "recycle_postnorm" else
                                   "norm_output" not in profile.honours or not profile.norm_output_recycles_postnorm)]
        keys = ", ".join(f"{k if k != 'recycle_postnorm' else 'norm_output'}: {str(best_variant[k]).lower()}"
                         for k in changed)
        divergence = _rule_divergence(bank, served_view, best_wiring, served_variant, best_variant)
        fixes.append(("trained rule", {"variant": best_variant}, dict(
            code="FIRST_LAYER_RULE", title=f"the first decoder layer runs another rule than in training "
            f"({', '.join(changed)})", source="wiring",
            evidence=f"trained with {', '.join(f'{k}={best_variant[k]}' for k in changed)}; {engine} runs "
            f"{', '.join(f'{k}={served_variant.get(k)}' for k in changed)}. Same fc input through both: the first "
            f"hook point that differs is {divergence.first_divergence}",
            fix=f"config keys {keys}" if not cannot else (
                f"{engine} ignores {', '.join(cannot)}: serve with an engine that honours it (vLLM honours "
                "norm_before_residual) or retrain with the engine's rule"),
            data={"changed": changed, "cannot_apply": cannot, "first_divergence": divergence.first_divergence})))

    def state_of(changes) -> dict:
        state = dict(start)
        for change in changes:
            state.update(change)
        return state

    scored: dict = {}

    def measure(name, state) -> Rung:
        wiring = state["wiring"] if state["aux"] else NO_AUX
        # the only map a state ever carries is the one read from behaviour, so "has a map" identifies it
        key = (wiring, tuple(sorted(state["variant"].items())), state["num_steps"], state["d2t"] is not None)
        if key not in scored:
            scored[key] = _measure(bank, served_view, Rung(name, wiring, dict(state["variant"]), state["num_steps"],
                                                     state["d2t"]))
        r = scored[key]
        return Rung(name, r.wiring, r.variant, r.num_steps, r.d2t, r.score)

    # the vocabulary map, read from behaviour with every other fix applied
    vocab = None
    if draft.d2t is not None:
        best_state = state_of(c for _, c, _ in fixes)
        vocab = vocab_from_behaviour(bank, served_view.rewired(**best_state["variant"]),
                                     best_state["wiring"] if best_state["aux"] else NO_AUX)
        if vocab.suspects:
            shown = ", ".join(f"{s} -> {int(vocab.table.loc[s, 'mode'])}" for s in vocab.suspects[:12])
            share = len(vocab.suspects) / max(1, vocab.checked)
            absolute = sum(int(vocab.table.loc[s, "mode"]) == int(draft.d2t[s]) for s in vocab.suspects)
            hint = (" Most point where d2t read as absolute ids would: d2t holds absolute ids."
                    if absolute > len(vocab.suspects) / 2 else
                    " Most of the map disagrees: a regenerated or missing d2t (SpecForge#534)." if share > 0.5 else "")
            seen = (f"{len(vocab.suspects)} of {vocab.checked} slots the draft used enough agree with the target on "
                    f"one other token, never or rarely on the map's, in both halves of the prompts (slot -> token: "
                    f"{shown}).")
            data = {"slots": vocab.suspects, "tokens": [int(vocab.table.loc[s, "mode"]) for s in vocab.suspects]}
            gain = crossfit_vocab(bank, served_view, best_state, measure("before the map", best_state))
            if gain.sign() == 1:
                fixes.append(("map from behaviour (in-sample)", {"d2t": vocab.suggested_d2t(draft.d2t)}, dict(
                    crossfit=lambda before, st=best_state: crossfit_vocab(bank, served_view, st, before),
                    code="VOCAB_MAP", title=f"{len(vocab.suspects)} draft-vocabulary slots point at the wrong target "
                    "tokens", source="vocab", fix="rewrite d2t for those slots (--write-fixed does it)",
                    evidence=seen + hint, data=data)))
            else:
                findings.append(DoctorFinding(
                    "VOCAB_CONFUSIONS", "info", f"{len(vocab.suspects)} slots look re-pointed, but re-pointing them "
                    "does not raise tau on prompts they were not read from", seen + " Likely a weak draft's confusions, "
                    "not a wrong map.", None, "vocab", gain=gain, data=data))

    # speculators#313: labels from pre-final-norm states (the draft then agrees with the wrong target)
    best_state = state_of(c for _, c, _ in fixes)
    pre_gap, real_rate, pre_rate = prenorm_labels_check(bank, served_view.rewired(**best_state["variant"]),
                                                        best_state["wiring"] if best_state["aux"] else NO_AUX)
    if pre_gap.sign() == 1:
        findings.append(DoctorFinding(
            "TARGET_DISTRIBUTION_PRENORM", "critical", "the draft was trained on the target's distribution without "
            "its final norm", f"its first proposal equals the top-1 of lm_head(resid[{n}]) (no final norm) at "
            f"{100 * pre_rate:.1f}% of positions and the target's real top-1 at {100 * real_rate:.1f}% "
            "(speculators#313: the trainer built the target's distribution from pre-norm states)",
            "Retrain with labels from the final post-norm state; no serving setting fixes it.", "wiring",
            gain=pre_gap, data={"agree_real": real_rate, "agree_prenorm": pre_rate}))

    if intended_steps != served_steps:
        flag = findings.pop(next(i for i, f in enumerate(findings) if f.code in _CHAIN_CAPS))
        fixes.append((f"chain of {intended_steps}", {"num_steps": intended_steps}, dict(
            code=flag.code, title=f"the chain is capped at {served_steps}", evidence=flag.evidence, fix=flag.fix,
            source="flags", severity="warning")))   # a longer chain always accepts more: never critical by itself

    ladder = [measure("as launched", start)]
    for i, (name, _, _) in enumerate(fixes):
        ladder.append(measure(name, state_of(c for _, c, _ in fixes[:i + 1])))
    final = ladder[-1]
    # undoing one fix is compared at a chain the bank measures steadily (a long chain's tau is noisy);
    # the chain fix itself at the final length
    steady = min(final.num_steps, max(num_steps, served_steps))
    for i, (name, _, info) in enumerate(fixes):
        before, after = ladder[i], ladder[i + 1]
        crossfit = info.pop("crossfit", None)
        gain = crossfit(before) if crossfit else _gain(before, after)
        others = [c for j, (_, c, _) in enumerate(fixes) if j != i]
        if info["code"] in _CHAIN_CAPS:
            undone = _gain(measure(f"all but {name}", state_of(others)), final)
        else:
            everything = measure("every fix, steady chain", {**state_of(c for _, c, _ in fixes), "num_steps": steady})
            without = measure(f"all but {name}, steady chain", {**state_of(others), "num_steps": steady})
            if crossfit:     # the map read from the same prompts it is scored on: cross-fitted
                undone = crossfit(without)
            else:
                undone = _gain(without, everything)
        forced = info.pop("severity", None)
        severity = forced or ("critical" if gain.sign() == 1 or undone.sign() == 1 else "info")
        findings.append(DoctorFinding(severity=severity, tau_before=before.tau, tau_after=after.tau, gain=gain,
                                      undone=undone, **info))

    # what a checkpoint written for this engine runs: every fix, but a rule the engine ignores stays its own
    writable = []
    hurts = {f.code for f in findings if f.gain is not None and f.gain.sign() == -1}
    for name, change, info in fixes:
        if info["code"] in hurts:     # a measured loss is not written
            continue
        if name == "trained wiring":   # what the engine can capture
            if info["data"]["servable"] is None:
                continue
            change = {"wiring": tuple(info["data"]["servable"])}
        if name == "trained rule":    # the keys the engine honours take effect, the others stay the engine's
            ignored = info["data"]["cannot_apply"]
            change = {"variant": {k: (served_variant if k in ignored else best_variant)[k] for k in best_variant}}
        writable.append(change)
    written_fix = measure("written checkpoint", state_of(writable))

    if server_log is not None:
        findings.append(_server_finding(server_log, ladder[0]))
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: (order[f.severity], -max(f.gain.value if f.gain else 0.0,
                                                          f.undone.value if f.undone else 0.0)))
    return DoctorReport(draft=str(draft_path), target=target_name, engine=engine, engine_version=engine_version,
                        device=str(draft.fc.weight.device), findings=findings, ladder=ladder, search=found,
                        vocab=vocab, flags=flags, notes=notes, written_fix=written_fix, model=draft, bank=bank,
                        target_config=target_config, target_source=target_dir if dump is not None else tgt,
                        choice=choice, engine_platform=engine_platform)


def _server_finding(server_log: str, served: Rung) -> DoctorFinding:
    from eagle3lab.analysis.server_evidence import compare_with_prediction, parse_server_evidence

    evidence = parse_server_evidence(server_log)
    cmp = compare_with_prediction(evidence, served.tau)
    if cmp["agrees"]:
        return DoctorFinding("SERVER_AGREES", "info", "the server's acceptance matches the as-served prediction",
                             cmp["message"], None, "server", data=cmp)
    return DoctorFinding("SERVER_MISMATCH", "warning", "the server's acceptance differs from the as-served prediction",
                         cmp["message"] + " The emulation or the deployment differs (flags, ids, build, prompts).",
                         "Check the launch command and engine version given to doctor against the server's.",
                         "server", data=cmp)
