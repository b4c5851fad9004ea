"""A resolved launch command: settings as given vs. effective, and the findings that explain them.

``FlagsResult`` is what ``resolve_flags`` returns (``to_dict`` is the ``eagle3lab flags --json`` object);
Each finding (``flag_finding``: an ``eagle3lab.findings.Finding`` whose ``detail`` is an ``EngineRule``) is one
thing the engine will do or refuse, with the rule behind it and a fix in the engine's own syntax. Pure Python (pandas only inside ``table()``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from eagle3lab.engines.versions import Change
from eagle3lab.findings import Finding, Severity

SEVERITIES = ("error", "warning", "info")
SCHEMA_VERSION = 1
VERSION_UNPLACED = "ENGINE_VERSION_UNPLACED"  # a build that cannot be placed relative to a change (either engine)


@dataclass(frozen=True)
class EngineRule:
    """What a flag finding (an ``eagle3lab.findings.Finding``, this its ``detail``) adds: the engine rule behind it
    (file, function, PR), where it applies (e.g. "all versions read (2025-03 .. 2026-09)"), and what the engine
    itself says while it resolves the arguments, before it loads weights (checked against the engine's own resolver
    by `eagle3lab flags --cross-check`): the log lines, in order, and the exception type that stops start-up there
    (e.g. "AssertionError"; argparse: "SystemExit"). ``change``: an ``ENGINE_VERSION_UNPLACED`` notice's change (the
    build cannot be placed by it), so one change is one notice (``flags.one_notice_per_change``)."""

    rule: str
    engine_versions: str
    engine_logs: tuple[str, ...] = ()
    engine_error: str | None = None
    change: Change | None = None

    def json_of(self, f: Finding) -> dict:
        return flag_dict(f)


def flag_finding(code: str, severity: str, message: str, rule: str, engine_versions: str, fix: str | None = None,
                 setting: str | None = None, engine_logs=(), engine_error: str | None = None,
                 change: Change | None = None, data: dict | None = None) -> Finding:
    """One thing the engine will do (or refuse to do) with this command, and how to fix it: ``code`` stable (e.g.
    "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED"), ``severity`` "error" (the engine fails or runs something broken), "warning"
    or "info", ``fix`` in the engine's own syntax, ``setting`` (the finding's ``where``) the ``effective`` key it
    explains, ``change`` the one an ``ENGINE_VERSION_UNPLACED`` notice is about, ``data`` stable keys (a layer-id
    note's own code: ``note_code``)."""
    return Finding(code, Severity(severity).worded(Severity.ERROR), message, fix, setting, dict(data or {}),
                   detail=EngineRule(rule, engine_versions, tuple(engine_logs), engine_error, change))


def flag_dict(f: Finding) -> dict:
    """A flag finding as ``eagle3lab flags --json`` prints it (docs/cli/flags.md), keys in their old order."""
    return {"code": f.code, "severity": str(f.severity), "message": f.text, "rule": f.rule,
            "engine_versions": f.engine_versions, "fix": f.fix, "setting": f.where,
            "engine_logs": list(f.engine_logs), "engine_error": f.engine_error}


# Rows of the before/after table, in reading order (keys of `as_given` / `effective`).
TABLE_ROWS = (
    "algorithm", "num_steps", "topk", "num_draft_tokens", "num_speculative_tokens", "max_accept_length",
    "target_model", "target_arch", "num_target_layers", "draft_model", "draft_tensor_parallel_size",
    "aux_layer_ids", "aux_source", "aux_resid", "draft_norm_flags", "max_running_requests",
    "overlap_schedule", "mixed_chunk", "token_map", "context_length", "draft_max_position_embeddings",
    "draft_window_size",
)
_NOT_IN_TABLE = ("engine", "engine_version", "aux_label")


@dataclass
class FlagsResult:
    """Settings as given vs. what the engine runs, and why (``findings``)."""

    engine: str
    engine_version: str | None
    version_note: str
    command: str
    as_given: dict
    effective: dict
    findings: list[Finding] = field(default_factory=list)
    sources: dict = field(default_factory=dict)
    unknown_flags: list[dict] = field(default_factory=list)

    @property
    def max_accept_length(self) -> int | None:
        """Most tokens one verify step can emit (accepted drafts + the bonus token); None if it cannot run."""
        return self.effective.get("max_accept_length")

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity.blocking]

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def finding(self, code: str) -> Finding | None:
        return next((f for f in self.findings if f.code == code), None)

    def to_dict(self) -> dict:
        """The ``eagle3lab flags --json`` object (schema in docs/cli/flags.md)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "version_note": self.version_note,
            "command": self.command,
            "as_given": self.as_given,
            "effective": self.effective,
            "max_accept_length": self.max_accept_length,
            "findings": [f.to_dict() for f in self.findings],
            "counts": {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES},
            "unknown_flags": self.unknown_flags,
            "sources": self.sources,
        }

    def table(self):
        """Before/after pandas DataFrame: one row per setting, with the finding codes that explain it."""
        import pandas as pd

        keys = [k for k in TABLE_ROWS if k in self.effective or k in self.as_given]
        keys += [k for k in self.effective if k not in keys and k not in _NOT_IN_TABLE]
        why = {}
        for f in self.findings:
            if f.where:
                why.setdefault(f.where, []).append(f.code)
        rows = []
        for k in keys:
            given, eff = self.as_given.get(k), self.effective.get(k)
            rows.append({"setting": k, "as_given": _show(given, "(not set)"), "effective": _show(eff, "-"),
                         "changed": k in self.as_given and given is not None and given != eff,
                         "why": ", ".join(why.get(k, []))})
        return pd.DataFrame(rows).set_index("setting")

    def findings_table(self):
        import pandas as pd

        cols = ["severity", "code", "message", "fix", "engine_versions", "rule"]
        rows = [f.to_dict() for f in sorted(self.findings, key=lambda f: f.severity.rank)]
        return pd.DataFrame(rows, columns=["setting", *cols])[cols]

    def report(self) -> str:
        """Plain-text report: the before/after table, then every finding with its fix."""
        lines = [f"{self.engine} {self.engine_version or ''}".rstrip() + f"  ({self.version_note})", ""]
        t = self.table()
        width = max(len(k) for k in t.index)
        lines.append(f"{'setting':<{width}}  {'as given':<24}  effective")
        for k, row in t.iterrows():
            mark = "  <- " + row["why"] if row["why"] else ""
            lines.append(f"{k:<{width}}  {str(row['as_given'])[:24]:<24}  {row['effective']}{mark}")
        cap = self.max_accept_length
        lines += ["", f"max accept length per verify step: {cap if cap is not None else 'n/a (does not run as given)'}",
                  ""]
        for f in sorted(self.findings, key=lambda f: f.severity.rank):
            lines.append(f"[{f.severity}] {f.code}: {f.text}")
            if f.fix:
                lines.append(f"    fix: {f.fix}")
            lines.append(f"    rule: {f.rule} ({f.engine_versions})")
        return "\n".join(lines)

    def __str__(self) -> str:  # print(result) in a notebook shows the report
        return self.report()


def _show(value, empty: str) -> str:
    if value is None:
        return empty
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value) if isinstance(value, dict) else str(list(value))
    return str(value)
