"""Doctor: every reason a draft accepts less when served than it should, each proven by measurement.

A draft is checked four ways and each problem becomes a ``eagle3lab.findings.Finding`` (``findings.doctor_finding``) (a code, a severity,
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

``run_doctor`` runs stages that hand each other typed values: the evidence (``Case``: states, configs) and the
launch command (``Launch``) -> how the engine build reads the checkpoint (``Served``) -> the search
(``Searched``) -> the fixes (``fixes.Fix``) -> one ladder measurement (``ladder``) -> findings -> the report,
with the checkpoint ``write_fixed`` writes (``CheckpointPlan``).

Measured findings form a ladder of single fixes on one bank of target states (teacher-forced, chain
acceptance): as launched -> right algorithm -> the trained wiring -> the trained rule -> the map from
behaviour (these at the served chain length) -> the chain the command asked for. Each rung's tau carries a
bootstrap interval over prompts and its gain a paired one. "Critical" = the engine refuses, silently
skips fc, or a measured fix gains a cost a user would notice (``findings.Cost``: the interval's low end at
least 0.1 tokens per round and 5% of tau); measurable but smaller is a warning that says so.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from eagle3lab.analysis.switches import SWITCHES, ignores
from eagle3lab.analysis.wiring_search import WiringSearch, close_to, key_of, wiring_text
from eagle3lab.doctor.config_checks import config_findings, engine_findings, text_config
from eagle3lab.doctor.evidence import Evidence, draw_prompts, from_pool_bank
from eagle3lab.doctor.findings import Cost, doctor_finding
from eagle3lab.doctor.fix_choice import Build, FixChoice, settle
from eagle3lab.doctor.fixes import (
    ENGINE_FORMAT,
    Fix,
    RunState,
    algorithm_fix,
    chain_fix,
    kept_in_checkpoint,
    map_fix,
    rule_fix,
    unreadable_ids,
    wiring_fix,
)
from eagle3lab.doctor.ladder import Ladder, Meter, Rung, TeacherForced, measure_ladder
from eagle3lab.doctor.vocab_behaviour import (
    VocabCheck,
    absolute_ids,
    prenorm_labels_check,
    vocab_from_behaviour,
    vocab_map,
)
from eagle3lab.engines.acceptance import Interval
from eagle3lab.engines.flags.sglang import CHAIN_CAP_CODES
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.engines.versions import parse_engine_version
from eagle3lab.engines.vllm_runner import check_platform
from eagle3lab.errors import bad_input
from eagle3lab.findings import Finding, Severity
from eagle3lab.models.state_bank import StateBank

# flag findings whose effect doctor measures itself (the flag finding then carries the measured taus)
_ALGORITHM = {"SGL_EAGLE3_DRAFT_WITH_EAGLE", "VLLM_EAGLE3_DRAFT_WITH_EAGLE"}
# what write_fixed writes besides the ladder's fixes: d2t as offsets, the target's context
_WRITTEN_BESIDE_THE_FIXES = {"VOCAB_ABSOLUTE_IDS", "DRAFT_CONTEXT_SHORT"}

MAX_PROMPTS = 48    # the default cap of the sequential rule (fix_choice.settle): the bundled pool
PROMPT_STEP = 8
# prompts decoded at once for the evidence (greedy_bank): the same step as the bank grows by
GREEDY_BATCH = PROMPT_STEP


# ------------------------------------------------------------------ the report


@dataclass
class CheckpointPlan:
    """What ``write_fixed`` writes and what the written checkpoint should then measure, as the engine build
    runs it (the launch command's fixes assumed)."""

    predicted: Rung           # every fix the build runs once written, measured on the bank
    stated_variant: dict      # the rule the config states (``_stated_variant``): the trained one where it is written
    config_keys: dict         # config keys findings ask for (the target's context)
    build: Build
    draft: object = field(repr=False)            # the loaded draft, whose weights are written
    bank: StateBank = field(repr=False)          # the states the written checkpoint is measured on
    target_source: object = field(repr=False)    # what load_draft reads the embedding from
    left_out: tuple[str, ...] = ()               # codes of fixes not written: not critical, or measured as a loss


@dataclass
class DoctorReport:
    """What ``doctor`` found: findings ordered by measured impact, the ladder of single fixes, the
    wiring search and the vocabulary check behind them."""

    draft: str
    target: str
    engine: str
    engine_version: str | None
    device: str
    findings: list[Finding]
    ladder: list[Rung]
    search: WiringSearch
    vocab: VocabCheck | None
    flags: object = None           # engines.flags.FlagsResult when a launch command was given
    notes: list[str] = field(default_factory=list)
    fixes: list[Fix] = field(default_factory=list)   # the ladder's fixes, in its order
    choice: FixChoice | None = None   # the wiring and rule handed to the user, chosen from the search's set
    engine_platform: str | None = None
    checkpoint: CheckpointPlan | None = field(default=None, repr=False)   # what write_fixed writes

    @property
    def written_fix(self) -> Rung | None:
        """What a checkpoint written by write_fixed should measure (engine's view)."""
        return None if self.checkpoint is None else self.checkpoint.predicted

    @property
    def model(self):
        """The draft as loaded (its weights are what write_fixed writes)."""
        return None if self.checkpoint is None else self.checkpoint.draft

    @property
    def bank(self) -> StateBank | None:
        """The states every finding was measured on."""
        return None if self.checkpoint is None else self.checkpoint.bank

    @property
    def target_source(self):
        return None if self.checkpoint is None else self.checkpoint.target_source

    @property
    def prompts_used(self) -> int:
        """Prompts the findings rest on (the sequential rule may have added some to the first ones)."""
        return len(self.bank.lengths) if self.bank is not None else 0

    def remaining_after_write(self) -> list[Finding]:
        """Critical findings a written checkpoint cannot fix: the launch command's, a rule the engine
        ignores, a checkpoint made for another target, and a fix left out of it for a measured loss."""
        left_out = self.checkpoint.left_out if self.checkpoint is not None else ()
        fixed = _WRITTEN_BESIDE_THE_FIXES | {f.code for f in self.fixes if f.fixed_by_checkpoint and f.code not in left_out}
        return [f for f in self.critical if f.code not in fixed]

    @property
    def critical(self) -> list[Finding]:
        return [f for f in self.findings if f.severity.blocking]

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def finding(self, code: str) -> Finding | None:
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
                "settings": ", ".join(k for k in SWITCHES if r.variant.get(k)) or "all off",
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


# ------------------------------------------------------------------ stage 1: the evidence


@dataclass
class Case:
    """The evidence: the draft as loaded, the target's states over a set of prompts that can grow, the
    target's config, and where the checks and loads read the target from."""

    draft_path: object
    draft: object
    evidence: Evidence
    target_config: dict
    target_name: str
    target_source: object     # what load_draft reads the embedding from: the Target, or with a dump its folder
    inspect_target: object    # what inspect_checkpoint checks the draft against: the target as given, or the folder
    cap: int                  # the most prompts the evidence may grow to

    @property
    def bank(self) -> StateBank:
        return self.evidence.bank


def _check_arguments(engine: str, engine_version, engine_platform, target, prompt_step: int = PROMPT_STEP) -> None:
    """Bad input named before any model loads."""
    if not isinstance(prompt_step, int) or prompt_step < 1:
        raise bad_input("--prompt-step", None, "a whole number of prompts, at least 1", repr(prompt_step))
    if engine not in ENGINE_FORMAT:
        raise bad_input("--engine", None, f"one of {', '.join(ENGINE_FORMAT)}", repr(engine))
    parse_engine_version(engine_version, "--engine-version")
    check_platform(engine_platform, "--engine-platform")
    if target is None:
        raise bad_input("doctor", "--target", "the target (a folder or short name; with --dump, its folder for the "
                        "config and the head)", None)


def gather_evidence(draft_path, target, *, dump=None, dump_layer_ids=None, prompts=None, num_prompts=None,
                    max_prompts=None, seed=None, bank=None, max_new_tokens: int = 48, device: str = "cpu",
                    dtype="auto", progress: bool = True) -> Case:
    """The draft and the target's states: from a ``dump`` (``target`` its folder, read for its config and
    head), from a pool ``bank`` already captured, or decoded by the live ``target`` (see ``run_doctor``)."""
    from eagle3lab.bundled import load_prompts
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.state_bank import TargetHead, bank_from_dump

    if prompts is None:
        pool, first_n = load_prompts(), num_prompts or 8
    else:
        pool, first_n = list(prompts), num_prompts or len(prompts)
    cap = max(first_n, max_prompts if max_prompts is not None else MAX_PROMPTS)
    if dump is None:
        return _live_case(draft_path, target, pool, first_n, cap, seed=seed, bank=bank,
                          max_new_tokens=max_new_tokens, device=device, dtype=dtype, progress=progress)
    from eagle3lab.models.hidden_dump import HiddenDump

    target_dir = str(target)
    target_config = json.loads((Path(target_dir) / "config.json").read_text())
    n_layers = text_config(target_config).get("num_hidden_layers")
    evidence = Evidence(bank_from_dump(HiddenDump(dump, vllm_layer_ids=dump_layer_ids, num_layers=n_layers),
                                       TargetHead.from_folder(target_dir), num_layers=n_layers))
    draft = load_draft(draft_path, target=target_dir, device=device, dtype=dtype, check_vocab=False)
    return Case(draft_path, draft, evidence, target_config, f"{target_dir} (states from the dump {dump})",
                target_dir, target_dir, cap)


def _live_case(draft_path, target, pool, first_n: int, cap: int, *, seed, bank, max_new_tokens: int, device: str,
               dtype, progress: bool) -> Case:
    from eagle3lab.decoding.greedy_bank import greedy_bank
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import Target, load_target

    tgt = target if isinstance(target, Target) else load_target(target, device=device, dtype=dtype)
    target_config = tgt.model.config.to_dict()
    draft = load_draft(draft_path, target=tgt, device=device, dtype=dtype, check_vocab=False)
    if bank is not None:
        evidence = from_pool_bank(bank, first_n, seed)
    else:
        def decode(some):
            return greedy_bank(tgt, some, max_new_tokens=max_new_tokens, batch_size=GREEDY_BATCH, progress=progress)

        order = draw_prompts(pool, seed)
        evidence = Evidence(decode(order[:first_n]), pool=order[first_n:cap], decode=decode)
    return Case(draft_path, draft, evidence, target_config, str(getattr(tgt, "name", None) or target), tgt, target,
                cap)


def check_checkpoint(case: Case, engine: str, engine_version=None, engine_platform=None,
                     launch: Launch | None = None) -> tuple[list[Finding], list[str]]:
    """The checkpoint and the configs, unmeasured: (findings, notes), for the build asked and, where the launch
    line sets one, its draft window. The draft was loaded even with a broken map: its behaviour is read later."""
    from eagle3lab.models.checkpoint import inspect_checkpoint

    findings, notes = [], []
    absolute = absolute_ids(case.draft, case.draft_path)
    if absolute is not None:
        findings.append(absolute)
        notes.append("every rung is measured with d2t read as offsets: as written, the engine indexes outside the "
                     "target vocabulary")
    for err in inspect_checkpoint(case.draft_path, target=case.inspect_target).errors:
        findings.append(doctor_finding("CHECKPOINT_ERROR", "critical", "the checkpoint does not load cleanly", err.text,
                                       source="config", data={"code": err.code}))
    findings += config_findings(case.draft, case.target_config, f"{case.draft_path}/config.json")
    flags = launch.flags if launch is not None else None
    window = flags.effective.get("draft_window_size") if flags is not None else None
    on_launch = {f.code for f in launch.findings} if launch is not None else set()
    # a finding the launch stage already reports from the same rule (DRAFT_WINDOW with the launch's window) once
    findings += [f for f in engine_findings(case.draft, engine, engine_version=engine_version,
                                            engine_platform=engine_platform, launch_window=window)
                 if f.code not in on_launch]
    return findings, notes


# ------------------------------------------------------------------ stage 2: the launch command


@dataclass
class Launch:
    """The launch command as the engine resolves it: the chain it serves and the one asked for, the flag
    findings reported as they are, and those doctor measures as fixes."""

    flags: object | None            # engines.flags.FlagsResult; None without a command
    served_steps: int
    intended_steps: int
    notes: list[str]
    findings: list[Finding]   # reported as the resolver found them
    algorithm_wrong: bool = False   # an EAGLE-3 draft launched with the EAGLE algorithm
    fc_skipped: bool = False        # ... and the widths match, so nothing fails: fc is silently skipped
    algorithm_flag: Finding | None = None   # measured as the EAGLE-3 algorithm fix (when fc is skipped)
    cap_flag: Finding | None = None         # measured as the chain fix (when the chain was capped)


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
    cap = next((f for f in flags.findings if f.code in CHAIN_CAP_CODES), None)
    asked = flags.as_given.get("num_draft_tokens")
    if cap is not None and isinstance(asked, int) and asked - 1 > served:
        intended = asked - 1
    return served, intended, notes


def read_launch(case: Case, engine: str, engine_args, engine_version, num_steps: int) -> Launch:
    """``engine_args`` through the engine's flag resolver; without them a chain of ``num_steps`` is assumed."""
    from eagle3lab.engines.flags import resolve_flags

    if not engine_args:
        return Launch(None, num_steps, num_steps, [f"no launch command given: a chain of {num_steps} draft tokens "
                                                   "assumed"], [])
    flags = resolve_flags(engine, engine_args, target_config=case.target_config, draft_config=str(case.draft_path),
                          engine_version=engine_version, num_target_layers=case.bank.num_layers)
    served, intended, notes = _served_chain(flags, engine, num_steps)
    # a flag finding's first sentence is its title, without the full stop (doctor's titles have none)
    found = [doctor_finding(f.code, f.severity, f.headline.removesuffix("."), f.text, f.fix, "flags",
                            data={"rule": f.rule})
             for f in flags.findings if f.code in CHAIN_CAP_CODES | _ALGORITHM or f.severity is not Severity.INFO]
    algorithm_wrong = any(f.code in _ALGORITHM for f in flags.findings)
    fc_skipped = algorithm_wrong and case.draft.config.hidden_size == case.bank.hidden_size
    algorithm = next(f for f in found if f.code in _ALGORITHM) if fc_skipped else None
    cap = next(f for f in found if f.code in CHAIN_CAP_CODES) if intended != served else None
    return Launch(flags, served, intended, notes, [f for f in found if f is not algorithm and f is not cap],
                  algorithm_wrong, fc_skipped, algorithm, cap)


# ------------------------------------------------------------------ stage 3: the search


@dataclass
class Served:
    """How the engine build runs the checkpoint: the view every rung runs (its embedding and RoPE choices;
    a fix forces only the switches and the wiring), its switches, and the wiring it reads."""

    view: object
    variant: dict
    wiring: tuple | None    # None: the build reads no ids it can serve

    @property
    def key(self) -> tuple | None:
        return None if self.wiring is None else key_of(self.wiring, self.variant)


def served_reading(draft, build: Build) -> Served:
    """The checkpoint as ``build`` reads its ids and switches."""
    from eagle3lab.analysis.wiring_search import served_views, settings_of

    n = build.num_layers
    views = served_views(draft, n, build.arch, engine_versions={build.engine: build.version},
                         engine_platforms={build.engine: build.platform})
    view = views.get(build.engine) or draft.under(PROFILES[build.engine]).bound(num_target_layers=n,
                                                                                target_arch=build.arch)
    return Served(view, settings_of(view), tuple(view.aux_resid) if build.engine in views else None)


@dataclass
class Searched:
    """What the weights fit (the search's set), the fix chosen from it, and whether the engine's reading is
    within noise of the best (then nothing is called a fault)."""

    found: WiringSearch
    choice: FixChoice
    served_ok: bool
    notes: list[str]

    @property
    def wiring(self) -> tuple:
        """What the ladder measures: the chosen member, or (none servable) the set's best."""
        return self.choice.wiring if self.choice.cost is None else self.choice.search_best[0]

    @property
    def variant(self) -> dict:
        return dict(self.choice.variant)


def _stated_switches(draft) -> dict:
    """The switches as the checkpoint states them: its config's keys where written, else as its own
    format's trainer runs them."""
    from eagle3lab.analysis.wiring_search import settings_of

    stated = settings_of(draft)
    return {k: (v if getattr(draft.config, k, None) is None else bool(getattr(draft.config, k)))
            for k, v in stated.items()}


def _stated_wiring(draft, build: Build) -> tuple | None:
    """The points the checkpoint's written ids name, as its own format reads them (None: no ids written)."""
    from eagle3lab.errors import Eagle3LabError

    try:
        return tuple(draft.bound(num_target_layers=build.num_layers, target_arch=build.arch).aux_resid)
    except (ValueError, Eagle3LabError):
        return None


def _evidence_note(found, choice: FixChoice, cap: int) -> str:
    """How many prompts the answer rests on, and why doctor stopped adding them."""
    how = ("every rival told apart" if choice.settled else
           f"the cap of {cap} prompts (or the pool) reached with a rival still within noise")
    return (f"the wiring search ran on {found.best['tau'].units} prompts; "
            f"the fix rests on {choice.prompts} ({how}): {choice.statement}")


def in_float32(draft):
    """``draft`` with its weights in fp32, or ``draft`` itself when they are fp32 already. Each parameter and
    buffer is converted once (no intermediate copy in the served dtype); both embeddings (its own and the
    target's) are shared as they are, their rows upcast as they are looked up (``Eagle3Draft.forward``): on a
    163840-token vocabulary an fp32 copy of an embedding would be GBs."""
    import copy

    import torch

    if draft.fc.weight.dtype == torch.float32:
        return draft
    memo = {}
    for name, t in [*draft.named_parameters(), *draft.named_buffers()]:
        if name == "embed_tokens.weight":
            memo[id(t)] = t
        elif t.is_floating_point():
            memo[id(t)] = torch.nn.Parameter(t.detach().float(), t.requires_grad) if isinstance(
                t, torch.nn.Parameter) else t.float()
    if draft.target_embedding is not None:
        memo[id(draft.target_embedding)] = draft.target_embedding
    return copy.deepcopy(draft, memo)


def search(case: Case, served: Served, build: Build, *, num_steps: int, prompt_step: int, progress: bool) -> Searched:
    """The wiring search, then the fix chosen from its set and settled on as many prompts as it needs (the
    evidence grows: every later stage reads the grown bank).

    Which states the weights were trained on is a property of the weights, not of the dtype they are served
    in: the search runs the draft in fp32 whatever ``--dtype`` (the states as captured, upcast). bf16 rounding
    inside a small draft moves its tau by up to 0.1 (the bundled case), more than the candidates differ, and
    names another member of a wider set (issue 33); the ladder measures every rung in the dtype asked."""
    from eagle3lab.analysis.wiring_search import search_wiring

    draft = in_float32(case.draft)
    if draft is not case.draft:
        served = served_reading(draft, build)
    # A wrong map misleads the search's labels: read the map first from the draft as served, and search
    # with the slots it re-points pointed back
    first = None if draft.d2t is None or served.wiring is None else vocab_from_behaviour(case.bank, served.view,
                                                                                         served.wiring)
    repointed = bool(first and first.suspects) and _repointing_helps(case.bank, draft, served, num_steps)
    with vocab_map(draft, first.suggested_d2t(draft.d2t)) if repointed else contextlib.nullcontext():
        found = search_wiring(case.bank, draft, num_steps=num_steps, arch=build.arch, progress=progress)
        choice, scores = settle(case.evidence, served.view, found, build, _stated_switches(draft), served.key,
                                num_steps=num_steps, max_prompts=case.cap, step=prompt_step,
                                stated_wiring=_stated_wiring(draft, build))
    notes = [f"the wiring search ran with {len(first.suspects)} slots re-pointed as read from the draft as served"
             ] if repointed else [
        f"{len(first.suspects)} slots looked re-pointed in the draft as served, but pointing back the slots read on "
        "half the prompts did not raise its tau beyond noise on the other half: the search ran with the map as "
        "written"] if first and first.suspects else []
    notes.append(_evidence_note(found, choice, case.cap))
    if draft is not case.draft:
        notes.append(f"the wiring search and the fix's choice ran with the draft in fp32 (served in "
                     f"{str(case.draft.fc.weight.dtype).replace('torch.', '')}): their tau and cross-entropy "
                     "differences are fp32's; the ladder's are in the dtype asked")
    top = min(scores, key=lambda k: scores[k].ce)
    served_ok = served.key is not None and served.key in scores and close_to(scores[served.key], scores[top])
    return Searched(found, choice, served_ok, notes)


def _repointing_helps(bank: StateBank, draft, served: Served, num_steps: int) -> bool:
    """Do the slots read as re-pointed on half the prompts raise the served draft's tau beyond noise on the
    other half when pointed back? A draft fed the wrong states behaves badly in every slot, so on a few
    prompts some slots' most frequent target token differs from the mapped one by chance, and pointing them
    "back" fits those very prompts; only a map that holds on prompts it was not read from steers the search
    (otherwise the search's answer rides on the prompt draw). Under four prompts the read is trusted."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank
    from eagle3lab.doctor.evidence import take_rows
    from eagle3lab.engines.acceptance import bootstrap_ratio_difference

    rows = len(bank.lengths)
    if rows < 4:
        return True
    read_on, held_out = take_rows(bank, range(0, rows, 2)), take_rows(bank, range(1, rows, 2))
    read = vocab_from_behaviour(read_on, served.view, served.wiring)
    if not read.suspects:
        return False
    as_written = evaluate_on_bank(held_out, served.view, served.wiring, num_steps)
    with vocab_map(draft, read.suggested_d2t(draft.d2t)):
        pointed_back = evaluate_on_bank(held_out, served.view, served.wiring, num_steps)
    # tau counts target tokens accepted, whatever the map (cross-entropy is over each map's own vocabulary)
    return bootstrap_ratio_difference(*pointed_back.tau_sums, *as_written.tau_sums).low > 0


# ------------------------------------------------------------------ stage 4: the fixes


@dataclass
class Proposed:
    """The fixes in ladder order from the state as launched, and what proposing them found and noted."""

    start: RunState
    fixes: list[Fix]
    findings: list[Finding]    # unmeasured: ids the build cannot read, a weak draft's confusions
    notes: list[str]
    vocab: VocabCheck | None

    @property
    def every_fix(self) -> RunState:
        return self.start.changed(*(f.change for f in self.fixes))


def propose_fixes(case: Case, launch: Launch, served: Served, searched: Searched, build: Build,
                  meter: Meter) -> Proposed:
    """Each fix one change to what runs, in ladder order; the map is read with every other fix applied."""
    findings, notes = [], []
    wiring = served.wiring
    if wiring is None:
        findings.append(unreadable_ids(case.draft_path, case.draft, build, searched.choice))
        wiring = searched.wiring    # the as-launched rung: the ids it can read already given
    start = RunState(not launch.fc_skipped, wiring, served.variant, launch.served_steps, engine=build.engine,
                     build=build.version)
    fixes = [algorithm_fix(launch.algorithm_flag)] if launch.fc_skipped else []
    if launch.algorithm_wrong and not launch.fc_skipped:
        notes.append("the algorithm flag makes the engine feed fc a state of the wrong width: it refuses to load")
    if searched.served_ok and (searched.wiring != wiring or searched.variant != served.variant):
        notes.append(f"{build.engine}'s wiring and rule are within noise of the search's best: not called a fault")
    fixes += [f for f in (wiring_fix(searched, start, build), rule_fix(searched, start, served, build, case.bank))
              if f is not None]
    vocab_fix, vocab, confusions = map_fix(case.draft, meter, start.changed(*(f.change for f in fixes)))
    fixes += [vocab_fix] if vocab_fix is not None else []
    if launch.cap_flag is not None:
        fixes.append(chain_fix(launch.cap_flag, launch.served_steps, launch.intended_steps))
    return Proposed(start, fixes, findings + confusions, notes, vocab)


# ------------------------------------------------------------------ stage 5: the findings


def labels_cost(gap: Interval, score) -> Cost:
    """The agreement gap of the labels check in tokens per round: were the first proposal's agreement with
    the target raised by ``gap`` (retrained on the right labels), with every later step's conditional
    acceptance in ``score`` (the draft with every fix) held, tau would rise by ``gap`` times
    1 + c2 + c2 c3 + ... (tau = 1 + a1 (1 + c2 + c2 c3 + ...)). An estimate: said so."""
    scale, run = 1.0, 1.0
    for c in score.stats.conditional[1:]:
        run *= c
        scale += run
    estimate = Interval(gap.value * scale, gap.low * scale, gap.high * scale, gap.level, gap.units)
    return Cost(estimate, score.stats.tau, estimated=True)


def labels_check(meter: Meter, state: RunState) -> list[Finding]:
    """speculators#313: labels from pre-final-norm states (the draft then agrees with the wrong target). The
    gap is a share of positions: its severity rests on what it would cost in tokens per round (``labels_cost``)."""
    pre_gap, real_rate, pre_rate = prenorm_labels_check(meter.bank, meter.view.rewired(**state.variant), state.fed)
    if pre_gap.sign() != 1:
        return []
    cost = labels_cost(pre_gap, meter("every fix", state).score)
    critical = cost.severity.blocking
    title = ("the draft was trained on the target's distribution without its final norm" if critical else
             "the draft agrees slightly more with the target's distribution without its final norm")
    fix = ("Retrain with labels from the final post-norm state; no serving setting fixes it." if critical else
           "Nothing to change for serving; if you retrain, take labels from the final post-norm state.")
    return [doctor_finding(
        "TARGET_DISTRIBUTION_PRENORM", cost.severity, title, f"its first proposal equals the top-1 of "
        f"lm_head(resid[{meter.bank.num_layers}]) (no final norm) at {100 * pre_rate:.1f}% of positions and the "
        f"target's real top-1 at {100 * real_rate:.1f}% (speculators#313: the trainer built the target's "
        f"distribution from pre-norm states); the gap, {pre_gap.value:+.4f} [{pre_gap.low:+.4f}, {pre_gap.high:+.4f}] "
        f"of positions, were retraining to close it: {cost.words}", fix, "wiring",
        gain=cost.gain, cost=cost, data={"agree_real": real_rate, "agree_prenorm": pre_rate, "agreement_gap": {
            "value": pre_gap.value, "low": pre_gap.low, "high": pre_gap.high, "level": pre_gap.level}})]


def _rejection(engine: str, engine_args, engine_version):
    """vLLM's rejection method for the launch (engines.counters.rejection_reading): whether the server's counters
    measure the draft at all (a 'synthetic' launch replays given rates). None for SGLang or without a command."""
    from eagle3lab.engines.counters import rejection_reading, spec_config_of
    from eagle3lab.engines.flags.vllm import parse

    if engine_args is None or PROFILES[engine].id_engine != "vllm":
        return None
    return rejection_reading(spec_config_of(parse(engine_args).values), engine_version=engine_version)


def _server_finding(server_log: str, served: Rung, rejection=None) -> Finding:
    from eagle3lab.doctor.server_evidence import compare_with_prediction, parse_server_evidence

    evidence = parse_server_evidence(server_log)
    cmp = compare_with_prediction(evidence, served.tau, rejection=rejection)
    if cmp["agrees"] is None:   # the counters do not measure this draft (synthetic rates, a sampled run)
        return doctor_finding("SERVER_NOT_COMPARABLE", "info", "the server's counters do not measure this draft",
                              cmp["message"], None, "server", data=cmp)
    if cmp["agrees"]:
        return doctor_finding("SERVER_AGREES", "info", "the server's acceptance matches the as-served prediction",
                              cmp["message"], None, "server", data=cmp)
    return doctor_finding("SERVER_MISMATCH", "warning", "the server's acceptance differs from the as-served prediction",
                          cmp["message"] + " The emulation or the deployment differs (flags, ids, build, prompts).",
                          "Check the launch command and engine version given to doctor against the server's.",
                          "server", data=cmp)


def by_impact(findings: list[Finding]) -> list[Finding]:
    """Critical, warning, info; within a severity by measured impact (the larger of gain and undone)."""
    return sorted(findings, key=lambda f: (f.severity.rank, -max(f.gain.value if f.gain else 0.0,
                                                                 f.undone.value if f.undone else 0.0)))


# ------------------------------------------------------------------ stage 6: the written checkpoint


def _stated_variant(start: RunState, kept: list[Fix], engine: str, shipped: dict) -> dict:
    """The rule the written config states (``draft.rewired`` switches for ``save_draft``): a kept fix's trained
    rule, even where the engine ignores it; else each key the engine honours as it ran it from the shipped
    config (what the plan predicts), each it ignores as the checkpoint states it (``shipped``): a rule fix left
    out changes no key."""
    profile = PROFILES[engine]
    stated = {k: shipped[k] if ignores(profile, k) else v for k, v in start.variant.items()}
    for fix in kept:
        stated.update(fix.change.get("variant", {}))
    return stated


def plan_checkpoint(case: Case, build: Build, meter: Meter, start: RunState, ladder: Ladder,
                    static: list[Finding]) -> CheckpointPlan:
    """What a checkpoint written for this build runs: every fix as the build applies it once written (the
    engine's own for a rule it ignores, the nearest points it captures), a measured loss and a checkpoint fix
    that is not critical (no cost a user notices) left out (``fixes.kept_in_checkpoint``); the rule its config
    states follows the fixes kept, never the ladder's last rung (which carries every fix)."""
    writable = [(fix, found) for fix, found in zip(ladder.fixes, ladder.findings) if fix.as_written is not None]
    kept = [fix for fix, found in writable if kept_in_checkpoint(fix, found.severity, found.gain)]
    config_keys = {}
    if any(f.code == "DRAFT_CONTEXT_SHORT" for f in static):
        config_keys["max_position_embeddings"] = text_config(case.target_config).get("max_position_embeddings")
    stated = _stated_variant(start, kept, build.engine, _stated_switches(case.draft))
    return CheckpointPlan(meter("written checkpoint", start.changed(*(fix.as_written for fix in kept))), stated,
                          config_keys, build, case.draft, case.bank, case.target_source,
                          left_out=tuple(fix.code for fix, _ in writable if fix not in kept))


# ------------------------------------------------------------------ the whole check


def run_doctor(draft_path, *, target=None, dump=None, dump_layer_ids=None, engine: str = "sglang", engine_version=None,
               engine_platform: str | None = None, engine_args=None, server_log: str | None = None, prompts=None,
               num_prompts: int | None = None, max_prompts: int | None = None, prompt_step: int = PROMPT_STEP,
               seed: int | None = None, bank: StateBank | None = None, max_new_tokens: int = 48,
               num_steps: int = 3, device: str = "cpu", dtype="auto", progress: bool = True) -> DoctorReport:
    """Check ``draft_path`` as ``engine`` serves it (see the module docstring).

    States come from a live ``target`` (a folder, a short name or a ``Target``; ``prompts`` decoded
    greedily for ``max_new_tokens``) or from a hidden-state ``dump`` (``models.hidden_dump``), in which
    case ``target`` is a folder read only for its config and head (``dump_layer_ids``: the ids a bare vLLM
    ``extract_hidden_states`` folder was dumped with; an eagle3lab dump names its points), or from ``bank``,
    states already captured from ``target`` (one row per prompt: a pool shared by several runs).
    The evidence starts with ``num_prompts`` of the prompts (default 8; all of an explicit ``prompts`` list),
    taken in the order ``seed`` draws (None: as given), and grows by ``prompt_step`` up to ``max_prompts``
    (default 48, at most the pool) while the fix is not told apart from its rivals (``fix_choice.settle``).
    ``engine_args``: the launch command (resolved by ``engines.flags``); without it a chain of
    ``num_steps`` is assumed. ``server_log``: the server's own acceptance lines or metrics text, compared
    with the as-served prediction. ``engine_platform``: "cpu" or "cuda", the build (vLLM's runner follows it).
    ``dtype``: what the draft (and a target loaded here) runs in: "auto" (fp32 on CPU, bf16 on CUDA), a dtype
    or its name; a ``bank`` or dump keeps its own, cast to the draft's where they meet.
    """
    _check_arguments(engine, engine_version, engine_platform, target, prompt_step)
    case = gather_evidence(draft_path, target, dump=dump, dump_layer_ids=dump_layer_ids, prompts=prompts,
                           num_prompts=num_prompts, max_prompts=max_prompts, seed=seed, bank=bank,
                           max_new_tokens=max_new_tokens, device=device, dtype=dtype, progress=progress)
    launch = read_launch(case, engine, engine_args, engine_version, num_steps)
    static, notes = check_checkpoint(case, engine, engine_version, engine_platform, launch)
    build = Build(engine, engine_version, engine_platform, case.bank.num_layers, case.draft.target_arch)
    served = served_reading(case.draft, build)
    searched = search(case, served, build, num_steps=num_steps, prompt_step=prompt_step, progress=progress)
    meter = TeacherForced(case.bank, served.view)     # the grown bank
    proposed = propose_fixes(case, launch, served, searched, build, meter)
    labels = labels_check(meter, proposed.every_fix)
    ladder = measure_ladder(meter, proposed.start, proposed.fixes, max(num_steps, launch.served_steps))
    checkpoint = plan_checkpoint(case, build, meter, proposed.start, ladder, static)
    server = ([_server_finding(server_log, ladder.rungs[0], _rejection(engine, engine_args, engine_version))]
              if server_log is not None else [])
    findings = by_impact([*static, *launch.findings, *proposed.findings, *labels, *ladder.findings, *server])
    return DoctorReport(draft=str(draft_path), target=case.target_name, engine=engine, engine_version=engine_version,
                        device=str(case.draft.fc.weight.device), findings=findings, ladder=ladder.rungs,
                        search=searched.found, vocab=proposed.vocab, flags=launch.flags,
                        notes=[*notes, *launch.notes, *searched.notes, *proposed.notes], fixes=proposed.fixes,
                        choice=searched.choice, engine_platform=engine_platform, checkpoint=checkpoint)
