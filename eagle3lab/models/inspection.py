"""What ``inspect_checkpoint`` returns: a typed inspection whose field names are the JSON keys docs/cli/inspect.md
documents, and ``to_dict()`` the JSON ``eagle3lab inspect --json`` prints.

Every error, warning and unchecked item is a ``Finding`` (``inspect_note``) with a stable code (``NOTE_CODES``; a
warning load_draft reported keeps its own, ``WARNING_CODES``: ``load_warning``), every finding keeps its
code (``eagle3lab.engines.draft_checks.config_problem``), every aux row its engine notes (``Finding``s, with codes):
callers match codes, never text. ``save_draft`` returns a ``SavedDraft``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from eagle3lab.engines.profiles import Decision, EngineProfile
from eagle3lab.errors import Eagle3LabError
from eagle3lab.findings import Finding, Severity
from eagle3lab.models.draft_family import DraftDescription
from eagle3lab.models.vocab import vocab_dict

# the code of an inspection note (inspect_note) -> what it says; the stage of inspect that wrote it
NOTE_CODES = {
    "CONFIG_INVALID": "config.json cannot describe a draft (config_to_draft refused it)",
    "TARGET_MISMATCH": "the target's sizes do not fit the draft's, or the target cannot be read",
    "WEIGHTS_INVALID": "the weights do not load (keys, shapes, dtypes, NaN/inf, no profile can run them)",
    "VOCAB_MAP_INVALID": "the d2t/t2d map breaks an invariant (an error among the vocab findings)",
    "CHECKS_FAILED": "the static checks of the config against the engines could not run",
    "TARGET_CONFIG": "the config is a target's, not a draft's",
    "NOT_A_DRAFT": "nothing EAGLE-3 specific was checked: the config is no EAGLE-3 draft",
    "NO_WEIGHTS": "no weight files: keys, shapes and values unchecked",
    "NO_VOCAB_MAP": "no weight files: the vocab map unchecked",
    "NO_TARGET_LAYERS": "the target's layer count is unknown: resid points and range checks unchecked",
}


# The code of each warning load_draft and save_draft report (``load_warning``; inspect's warnings carry them too)
WARNING_CODES = {
    "WEIGHT_IGNORED": "a stored weight no engine reads at inference, dropped on loading",
    "NUM_AUX_FROM_FC": "num_aux read from fc.weight's width (no aux ids written)",
    "TARGET_HIDDEN_INFERRED": "target_hidden_size inferred from fc.weight (missing in config.json; engines fail)",
    "MIXED_DTYPES": "float tensors stored in another dtype than the others, cast on loading",
    "PROFILE_PASSED_OVER": "run as the first profile that can run the draft; why each one before it cannot",
    "IDS_NOT_SEEN": "aux ids written where the profile that runs the draft does not read them",
    "NOT_SERVABLE": "what keeps a profile from running the draft as written (engines.profiles.serving_problems)",
    "OLDER_SGLANG_READING": "the ids written feed other points (or crash) in the oldest SGLang build read",
    "TRAINER_REFUSES_IDS": "SpecForge, the sglang format's trainer, refuses the ids written",
    "STATED_FLAG_CHANGED": "a norm flag written as the draft's trainer ran it, not as the source config states",
    "STATED_FLAG_KEPT": "a norm flag kept as the source config states it (keep_stated_flags), not as trained",
    "SERVED_FLAG_IGNORED": "the format's server does not honour a norm flag written",
    "SERVED_RECYCLE_DIFFERS": "the format's server recycles the other (pre- or post-norm) state than trained",
    "SERVED_FINAL_NORM_DIFFERS": "the format's server norms lm_head's input; the draft was trained without it",
    "SPECULATORS_NO_EMBEDDING": "no embedding written: speculators' own loader leaves it uninitialised",
    "SPECULATORS_NO_VERIFIER": "no verifier named: speculators' own loader fails without it",
}

# The list each code goes in, by severity: errors are critical (inspect's word), unchecked items information.
_NOTE_SEVERITY = {"TARGET_CONFIG": Severity.WARNING, "NOT_A_DRAFT": Severity.INFO,
                  "NO_WEIGHTS": Severity.INFO, "NO_VOCAB_MAP": Severity.INFO, "NO_TARGET_LAYERS": Severity.INFO}


def inspect_note(code: str, text: str) -> Finding:
    """One error, warning or unchecked item of an inspection: a stable code (NOTE_CODES) and the sentence."""
    assert code in NOTE_CODES, code
    return Finding(code, _NOTE_SEVERITY.get(code, Severity.CRITICAL), text)


def load_warning(code: str, text: str) -> Finding:
    """A warning of ``load_draft`` or ``save_draft``: a stable code (WARNING_CODES) and the sentence printed."""
    assert code in WARNING_CODES, code
    return Finding(code, Severity.WARNING, text)


def _texts(notes: list[Finding]) -> list[str]:
    return [n.text for n in notes]


class _Record:
    """A part of the inspection whose JSON is its fields, in field order (values as they are)."""

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class TargetLike(_Record):
    """``target_like``: the geometry of a config that is no draft."""

    num_hidden_layers: object
    hidden_size: object
    vocab_size: object


@dataclass(frozen=True)
class Defaulted(_Record):
    """A field missing from the checkpoint, the value it was given and the rule that decided it."""

    field: str
    value: object
    rule: str


@dataclass(frozen=True)
class WeightsCheck(_Record):
    """``weights``: the files, whether they loaded, and when they did the embedding's source, dtype and size."""

    files: list[str]
    checked: bool
    embedding: str | None = None        # checkpoint | target | missing
    dtype: str | None = None
    num_parameters: int | None = None

    def to_dict(self) -> dict:
        return super().to_dict() if self.checked else {"files": self.files, "checked": self.checked}


@dataclass(frozen=True)
class VocabCheck:
    """``vocab``: whether the d2t/t2d map was read, and its findings."""

    checked: bool
    findings: list[Finding] = field(default_factory=list)   # vocab.check_vocab_map's

    def to_dict(self) -> dict:
        return {"checked": self.checked, "findings": [vocab_dict(f) for f in self.findings]}


@dataclass(frozen=True)
class Sizes(_Record):
    """``sizes``: the draft's geometry as it runs (config fitted to the weights)."""

    hidden_size: int
    target_hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    draft_vocab_size: int
    num_aux: int
    rope_theta: float
    rope_scaling: object
    max_position_embeddings: int
    hidden_act: str

    @classmethod
    def of(cls, cfg) -> Sizes:
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class AuxRow:
    """One engine's reading of the aux ids (``aux_ids.by_engine.<profile>``): the ids it sees, the resid points it
    feeds fc, its notes (with codes), or the error that stopped the resolution. ``engine_version`` /
    ``engine_platform`` / ``runner`` only for a build asked (``--engine``)."""

    engine: str
    ids_seen: list[int] | None
    note: str | None
    resid: list[int] | None = None
    label: str | None = None
    defaulted: bool = False
    rule: str | None = None
    notes: tuple[Finding, ...] = ()
    error: str | None = None
    engine_version: str | None = None
    engine_platform: str | None = None
    runner: str | None = None

    @classmethod
    def read(cls, profile: EngineProfile, ids, key: str | None, num_layers: int | None, arch: str | None,
             build: bool = False) -> AuxRow:
        """``profile``'s row; ``build``: a build asked (ids seen for the target's arch, version, platform, runner)."""
        seen, why = profile.visible_ids(ids, key, arch) if build else profile.visible_ids(ids, key)
        head = dict(engine=profile.label, ids_seen=list(seen) if seen is not None else None, note=why)
        if build:
            head.update(engine_version=profile.engine_version, engine_platform=profile.engine_platform)
        try:
            res = profile.aux_resolution(ids, key, num_layers, arch)
        except Eagle3LabError as err:
            return cls(**head, error=str(err))
        return cls(**head, resid=list(res.resid), label=res.label, defaulted=res.defaulted, rule=res.rule,
                   notes=tuple(res.notes), runner=res.runner if build else None)

    @property
    def warnings(self) -> list[str]:
        return [n.text for n in self.notes]

    @property
    def fatal(self) -> list[str]:
        return [n.text for n in self.notes if n.kind == "breaks"]

    @property
    def codes(self) -> list[str]:
        return [n.code for n in self.notes if n.code]

    def to_dict(self) -> dict:
        row = {"engine": self.engine, "ids_seen": self.ids_seen, "note": self.note}
        if self.engine_version or self.engine_platform:
            row.update(engine_version=self.engine_version, engine_platform=self.engine_platform)
        if self.error is not None:
            return {**row, "resid": None, "label": None, "error": self.error}
        row.update(resid=self.resid, label=self.label, defaulted=self.defaulted, rule=self.rule,
                   warnings=self.warnings, fatal=self.fatal)
        if self.runner:
            row.update(runner=self.runner, codes=self.codes)
        return row


@dataclass
class AuxIds:
    """``aux_ids``: the ids as written, where, and each profile's reading; ``builds`` when ``--engine`` named one."""

    as_written: list[int] | None
    key: str | None
    num_target_layers: int | None
    target_arch: str | None
    by_engine: dict[str, AuxRow]
    builds: dict[str, dict] | None = None

    def with_builds(self, builds: dict[str, EngineProfile]) -> None:
        """Each build's row redone as that build reads the ids (profile name -> EngineProfile)."""
        if not builds:
            return
        for name, profile in builds.items():
            self.by_engine[name] = AuxRow.read(profile, self.as_written, self.key, self.num_target_layers,
                                               self.target_arch, build=True)
        self.builds = {name: {"engine_version": p.engine_version, "engine_platform": p.engine_platform}
                       for name, p in builds.items()}

    def to_dict(self) -> dict:
        out = {"as_written": self.as_written, "key": self.key, "num_target_layers": self.num_target_layers,
               "target_arch": self.target_arch, "by_engine": {n: r.to_dict() for n, r in self.by_engine.items()}}
        return out if self.builds is None else {**out, "builds": self.builds}


@dataclass(frozen=True)
class Serving(_Record):
    """``serving.<profile>``: why that engine cannot run this draft as written (empty: it can)."""

    engine: str
    problems: list[str]


@dataclass(frozen=True)
class NormFlag:
    """``norm_flags.<flag>``: the value written (None: missing) and each profile's ``Decision(value, how)``."""

    written: object
    by_engine: dict[str, Decision] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"written": self.written, "by_engine": {n: d._asdict() for n, d in self.by_engine.items()}}


@dataclass
class Inspection:
    """Everything ``eagle3lab inspect`` reports (see docs/cli/inspect.md for each key). A field that does not apply
    (``target_like`` for a draft, everything past ``family`` when the config cannot describe one) is None."""

    path: str
    config_file: str
    kind: str
    is_eagle3_draft: bool
    format_reason: str
    errors: list[Finding] = field(default_factory=list)
    warnings: list[Finding] = field(default_factory=list)
    not_checked: list[Finding] = field(default_factory=list)
    family: DraftDescription | None = None
    target_like: TargetLike | None = None
    format: str | None = None
    defaulted: list[Defaulted] | None = None
    weights: WeightsCheck | None = None
    vocab: VocabCheck | None = None
    sizes: Sizes | None = None
    aux_ids: AuxIds | None = None
    serving: dict[str, Serving] | None = None
    findings: list[Finding] | None = None    # draft_checks.config_problem's
    norm_flags: dict[str, NormFlag] | None = None

    def codes(self, *, of: str = "errors") -> list[str]:
        """The codes of ``errors``, ``warnings`` or ``not_checked``, in order."""
        return [n.code for n in getattr(self, of)]

    def to_dict(self) -> dict:
        """The JSON ``eagle3lab inspect --json`` prints, keys in the order it has always printed them."""
        out = {"path": self.path, "config_file": self.config_file, "kind": self.kind,
               "is_eagle3_draft": self.is_eagle3_draft, "format_reason": self.format_reason,
               "errors": _texts(self.errors), "warnings": _texts(self.warnings), "not_checked": _texts(self.not_checked)}
        # a checked load filled vocab before weights; otherwise weights came first (and vocab only without files)
        checks = ("vocab", "weights") if self.weights is not None and self.weights.checked else ("weights", "vocab")
        for key in ("family", "target_like", "format", "defaulted", *checks, "sizes", "aux_ids", "serving",
                    "findings", "norm_flags"):
            value = getattr(self, key)
            if value is not None:
                out[key] = _json(value)
        return out


def _json(value):
    if isinstance(value, dict):
        return {k: _json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json(v) for v in value]
    return value.to_dict() if hasattr(value, "to_dict") else value


@dataclass
class SavedDraft(_Record):
    """What ``save_draft`` wrote: the folder, the format, the aux ids (None: none written), the resid points the draft
    was trained on (None: the engines' defaults), the norm flags, whether the embedding is in it, the warnings;
    ``source`` (path, format) when ``convert_draft`` wrote it."""

    path: str
    format: str
    aux_ids_written: list[int] | None
    trained_resid: list[int] | None
    flags_written: dict[str, bool]
    embedding_written: bool
    warnings: list[Finding]   # load_warning's, with codes (to_dict: their texts)
    source: dict | None = None

    def to_dict(self) -> dict:
        out = {**super().to_dict(), "warnings": _texts(self.warnings)}
        if self.source is None:
            del out["source"]
        return out
