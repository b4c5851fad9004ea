"""What every engine module shares: its inputs (parsed command, configs, version placement) and the
findings both engines build the same way. Engine modules import this, never the package ``__init__``."""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3lab.engines.flags.cmdline import ParsedCommand
from eagle3lab.engines.flags.result import VERSION_UNPLACED, flag_finding
from eagle3lab.engines.versions import Change, unplaced_warning
from eagle3lab.engines.versions import place as place_change
from eagle3lab.findings import Finding


@dataclass
class Inputs:
    """What an engine module receives: the parsed command, configs and version placement."""

    engine: str
    engine_version: str | None
    parsed: ParsedCommand
    target: dict | None
    draft: dict | None
    target_arch: str | None
    num_layers: int | None
    sources: dict
    served_speculator: bool = False   # the served model's own config is a speculators checkpoint
    engine_platform: str | None = None  # vLLM: "cuda" or "cpu" (None: a CUDA build assumed)
    unplaced: list = field(default_factory=list)  # the Changes this build cannot be placed by, in order

    def place(self, change: Change) -> str:
        """'before', 'after' or 'uncertain' (which behaves as 'after'); uncertain ones become findings."""
        where = place_change(change, self.engine_version)
        if where.warning and change not in self.unplaced:
            self.unplaced.append(change)
        return where.state


def unplaced_finding(change: Change, engine_version: str) -> Finding:
    """The one shape of ``ENGINE_VERSION_UNPLACED``, whichever rule or translator placed the build: the
    newest behaviour is shown; ``engine_versions`` is the change's span, ``setting`` is ``engine_version``, and the
    finding keeps the ``change`` (``finding.change``)."""
    return flag_finding(VERSION_UNPLACED, "warning", unplaced_warning(change, engine_version),
                        "eagle3lab.engines.versions.place", change.span(), setting="engine_version", change=change)


def translator_findings(prefix: str, res, versions: str, fix: str) -> list[Finding]:
    """Findings from an ``eagle3lab.engines.layer_ids.AuxResolution``, one per note, by the note's kind; each keeps
    the note's own code (NOTE_CODES) as ``data["note_code"]``, what callers match beside the finding's code."""
    codes = {"breaks": (f"{prefix}_AUX_BREAKS", "error"), "defaulted": (f"{prefix}_AUX_IDS_DEFAULTED", "warning"),
             "note": (f"{prefix}_AUX_NOTE", "warning")}
    out = [unplaced_finding(n.change, res.engine_version) if n.kind == "version" else
           flag_finding(*codes[n.kind], n.text, res.rule, versions, fix, "aux_resid", data={"note_code": n.code})
           for n in res.notes]
    if res.defaulted and not any(n.kind == "defaulted" for n in res.notes):
        out.insert(0, flag_finding(f"{prefix}_AUX_IDS_DEFAULTED", "warning", f"No aux layer ids where the engine reads "
                                   f"them: it captures its default {res.label}, silently.", res.rule, versions, fix,
                                   "aux_resid"))
    return out


def aux_unknown(prefix: str, rule: str, versions: str, eff: dict) -> Finding:
    """No draft config: which target layers feed the draft cannot be known (either engine)."""
    eff.update(aux_layer_ids=None, aux_source="unknown (no draft config)", aux_resid=None)
    return flag_finding(f"{prefix}_AUX_UNKNOWN", "info", "Which target layers feed the draft depends on the draft's "
                        "config.json, which was not given.", rule, versions, "Pass --draft-config DRAFT/config.json.",
                        "aux_resid")


def aux_needs_layers(prefix: str, ids, rule: str, versions: str, eff: dict) -> list[Finding]:
    """No target layer count: the ids (or the engine's N-dependent default) cannot be placed on resid[k]."""
    eff["aux_resid"] = None
    out = []
    if ids is None:
        out.append(flag_finding(f"{prefix}_AUX_IDS_DEFAULTED", "warning", "No aux layer ids where this engine reads them: "
                                "it captures its default resid[2], resid[N//2], resid[N-3] (N = target layers), silently.",
                                rule, versions, None, "aux_resid"))
    out.append(flag_finding(f"{prefix}_AUX_NEEDS_LAYERS", "info", "The target's num_hidden_layers is unknown, so the ids "
                            "cannot be placed on resid[k].", rule, versions, "Pass --target-config TARGET/config.json.",
                            "aux_resid"))
    return out


def window_rows(engine: str) -> str:
    """How ``engine``'s releases apply a draft's sliding window, from its rules (profiles.WINDOW_ROWS, by the one
    lookup ``window_rules``; a rule held from a change reads from the change's first release)."""
    from eagle3lab.engines.profiles import BY_FLAG, BY_LAYER_TYPES, NO_WINDOW, window_rules

    how = {NO_WINDOW: "never applied", BY_LAYER_TYPES: "applied through the config's layer_types",
           BY_FLAG: "applied only through the launch flag"}
    rules = window_rules(engine)
    return "; ".join(("every release read" if r.since is None else f"from {rules.fields(r)['since']}") +
                     f": {how[r.value]}" for r in rules.rows)


def draft_window_finding(inp: Inputs, launch_window: int | None = None, setting: str | None = None) -> Finding | None:
    """DRAFT_WINDOW: the draft config's sliding window as its trainer (by the config's format) ran it vs as this build
    runs it (``launch_window``: SGLang's --speculative-draft-window-size), by draft_checks.window_problem, the rule
    inspect and doctor use; None when they agree or no draft config was read."""
    from eagle3lab.engines.config_view import draft_format, read_draft
    from eagle3lab.engines.draft_checks import window_problem
    from eagle3lab.engines.profiles import FLAGS, FORMAT_PROFILE, for_build

    if not inp.draft:
        return None
    view = read_draft(inp.draft, FLAGS, inp.sources.get("draft_config") or "draft config.json")
    served = for_build(inp.engine, inp.engine_version, inp.engine_platform)
    problem = window_problem(view.window, view.num_layers, FORMAT_PROFILE[draft_format(inp.draft)], served,
                             launch_window)
    if problem is None:
        return None
    return flag_finding(problem.code, problem.severity, f"{problem.title}: {problem.text}",
                        f"{served.engine}: {served.draft_window_how}", window_rows(inp.engine), problem.fix, setting)
