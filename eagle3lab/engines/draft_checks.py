"""Static checks of a draft's config against one engine build, from the config alone (pure Python, no weights run):
flags the build does not read where they are written, a sliding window it runs otherwise than the trainer, aux ids
that do not fit the fc the weights hold. Each problem (``config_problem``, a ``Finding``) carries a code, what the
build does, the release range (from the rows of eagle3lab.engines.profiles; the window's from WINDOW_ROWS, which dates
and PR marks place too) and the fix in the engine's own syntax; ``inspect`` lists them and doctor's static findings
(eagle3lab.doctor.config_checks) are made from them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from packaging.version import Version

from eagle3lab.engines.config_view import Rope, Window, read_rope
from eagle3lab.engines.profiles import (
    BY_FLAG,
    BY_LAYER_TYPES,
    FLAG,
    FLAGS,
    NUM_AUX_KEY,
    SGLANG_DRAFT_WINDOW,
    EngineProfile,
    get_profile,
    place_key,
    rows_at,
    written_places,
)
from eagle3lab.findings import Finding, Severity


@dataclass(frozen=True)
class OnBuild:
    """What a config problem (a ``Finding`` whose ``detail`` this is) adds: the engine build it concerns (the
    profile's label) and the fix as config.json edits (dotted key -> value; None: not a config edit)."""

    engine: str
    config_fix: dict | None = None

    def json_of(self, f: Finding) -> dict:
        """inspect's ``findings`` item (docs/cli/inspect.md), keys in their old order."""
        return {"code": f.code, "severity": str(f.severity), "engine": self.engine, "title": f.title,
                "evidence": f.text, "fix": f.fix, "config_fix": self.config_fix}


def config_problem(code: str, severity: str, engine: str, title: str, evidence: str, fix: str,
                   config_fix: dict | None = None) -> Finding:
    """One thing an engine build (``engine``: the profile's label) does with this config other than its trainer
    did: ``severity`` "critical" (it does not load or run) or "warning" (it runs other arithmetic); ``evidence``
    (the finding's text) what is written, what the build does, its release range and source; ``fix`` in the
    engine's syntax (a config key, a launch flag, a release)."""
    return Finding(code, Severity(severity).worded(Severity.CRITICAL), evidence, fix, title=title,
                   detail=OnBuild(engine, config_fix))


def _first_honouring(profile: EngineProfile, flag: str) -> str | None:
    """The release from which ``profile``'s engine honours ``flag`` where this build does not (None: no later row)."""
    if profile.release is None:
        return None
    later = [nxt for held, nxt in rows_at(profile.id_engine, FLAG, profile.release).get(flag, [])
             if (held is None or not held.value) and nxt is not None]
    if not later:
        return None
    row = max(later, key=lambda r: Version(r.since))
    return f"{row.since}" + (f" ({row.source})" if row.source else "") + (f", {row.reader}" if row.reader else "")


def flag_problems(config, profile: str | EngineProfile, fmt: str | None) -> list[Finding]:
    """Each flag written true that this build does not apply: its family's draft model never reads it, the build
    predates the release that reads it, or it is written only where the build does not look."""
    profile, out = get_profile(profile), []
    kind = getattr(config, "attention", "llama")
    for flag in FLAGS:
        places = written_places(config, flag)
        value, at = places.at(("nested", "top"))
        if not value:
            continue
        key, label = place_key(flag, at), profile.label
        unread = profile.family_ignores.get(kind, {}).get(flag)
        since = _first_honouring(profile, flag) if flag not in profile.honours else None
        if unread:
            out.append(config_problem(
                "FLAG_UNREAD_FOR_FAMILY", "warning", label, f"{profile.engine} never applies {flag} to this draft family",
                f"{key} = true; {label} serves a {kind} draft with {unread}, which never reads {flag} (every release "
                f"read): fc reads the aux states without that norm, other arithmetic than trained",
                f"Serve it where {flag} is applied to a {kind} draft (none of {profile.engine}'s releases read), or "
                f"retrain without {flag}."))
        elif since:
            out.append(config_problem(
                "FLAG_UNREAD_BY_BUILD", "warning", label, f"this {profile.engine} build does not apply {flag}",
                f"{key} = true; {label} ignores it (runs the draft as if false; a norm weight it has no module for "
                f"is not loaded); {profile.engine} applies it from {since}",
                f"Serve with {profile.engine} >= {since.split(' ')[0]}."))
        elif flag in profile.honours and places.at(profile.flag_places(flag, fmt))[0] is None:
            reads = " or ".join(place_key(flag, p) for p in profile.flag_places(flag, fmt))
            how = profile.flag_keys_how.get(flag, "")
            out.append(config_problem(
                "FLAG_WRITTEN_WHERE_UNREAD", "warning", label, f"{flag} is written where {profile.engine} does not "
                f"read it", f"{key} = true only; {label} reads {reads}" + (f" ({how})" if how else "")
                + f": it runs the draft with {flag} missing (defaulted)",
                f"Also write {flag}: true at the top level of config.json (every build that applies it reads the "
                "top level; those that read eagle_config read it first, so the two agree)."))
    return out


def _window_layers(rule: str, window: Window, num_layers: int, launch_window: int | None) -> tuple[int | None, tuple]:
    """(window size, layers it applies to) for a window rule."""
    if rule == BY_LAYER_TYPES:
        return window.size, window.by_layer_types(num_layers)
    if rule == BY_FLAG and launch_window:
        return launch_window, tuple(range(num_layers))
    return None, ()


def window_problem(window: Window, num_layers: int, trainer: str | EngineProfile, profile: str | EngineProfile,
                   launch_window: int | None = None) -> Finding | None:
    """A draft's sliding window as its trainer ran it vs as this build runs it (``launch_window``: SGLang's
    --speculative-draft-window-size on the launch line, when known)."""
    trainer, profile = get_profile(trainer), get_profile(profile)
    if not window.written:
        return None
    trained = _window_layers(trainer.draft_window, window, num_layers, None)
    served = _window_layers(profile.draft_window, window, num_layers, launch_window)
    if (trained[1] and trained) == (served[1] and served):
        return None
    words = lambda s: f"a {s[0]}-token window on layer(s) {list(s[1])}" if s[1] else "full attention"
    if profile.draft_window == BY_FLAG:
        fix = (f"Launch with --speculative-draft-window-size {trained[0]}" if trained[1] else
               "Launch without --speculative-draft-window-size")
    elif trained[1]:
        fix = (f"Serve with SGLang >= {SGLANG_DRAFT_WINDOW.first_with} and --speculative-draft-window-size "
               f"{trained[0]}, or with vLLM (it applies the window through layer_types)")
    else:
        fix = "Remove sliding_window / layer_types from the draft's config (it was trained with full attention)"
    return config_problem(
        "DRAFT_WINDOW", "warning", profile.label, f"{profile.engine} runs the draft's sliding window otherwise than "
        "its trainer", f"sliding_window {window.size}, layer_types {list(window.layer_types or []) or 'not written'}: "
        f"trained ({trainer.label}, {trainer.draft_window_how}) with {words(trained)}; served ({profile.label}, "
        f"{profile.draft_window_how}) with {words(served)}. Past the window the draft attends otherwise than "
        "trained (speculators#684: tau 2.30 at 2k -> 1.08 at 20k without it)", fix + ".")


def aux_fc_problem(count: int, count_key: str, fc_in: int, target_hidden: int,
                   profiles=()) -> Finding | None:
    """``count`` aux ids (or num_aux_hidden_states) written at ``count_key`` while fc.weight takes ``fc_in`` inputs,
    a whole multiple of ``target_hidden`` other than ``count``: the fc was built for another number of states
    (vllm#54526, #54598). ``profiles``: the engines to say what each does."""
    if not target_hidden or fc_in % target_hidden or fc_in // target_hidden == count:
        return None
    built = fc_in // target_hidden
    lines = []
    for profile in map(get_profile, profiles):
        if not profile.id_keys:
            continue   # hard-coded capture points: no ids read
        keys = profile.families.num_aux_keys.get("llama") or ()
        lines.append(f"{profile.label}: " + (
            f"sizes fc for {count} from {count_key}: loading fails (shape mismatch)"
            if count_key.removeprefix("transformer_layer_config.") in keys else
            f"builds fc for 3 and feeds it {count} captured states: the first forward fails"))
    return config_problem(
        "AUX_IDS_FC_WIDTH", "critical", "every engine", f"{count} aux ids, an fc built for {built}",
        f"{count_key} gives {count} aux states, but fc.weight takes {fc_in} inputs = {built} x {target_hidden} (the "
        f"target's hidden size): the fc was trained on {built} states. " + "; ".join(lines),
        f"Write the {built} ids the fc was trained on at {count_key}" + (
            f" (and {NUM_AUX_KEY}: {built} where it is written)" if NUM_AUX_KEY not in count_key else "")
        + "; `eagle3lab doctor` searches which states fit the weights.")


def config_rope(cfg) -> Rope:
    """A draft's RoPE from its ``DraftConfig`` (theta, scaling, max_position_embeddings), through the one reader."""
    return read_rope({"rope_theta": cfg.rope_theta, "rope_scaling": cfg.rope_scaling,
                      "max_position_embeddings": cfg.max_position_embeddings})


def rope_fix(rope: Rope, prefix: str) -> dict:
    """``rope`` written so that transformers 4 and 5 (and so every engine) read exactly it: rope_scaling (transformers 5
    prefers it to rope_parameters; null = plain), rope_theta, and rope_parameters as transformers 5 writes them, the
    scaling's original_max_position_embeddings filled as transformers fills it (so it holds under any context)."""
    scaling = rope.filled_scaling()
    if scaling is not None:
        # the type as written, rope_type else the legacy type: transformers 5's standardize_rope_params (5.19,
        # 5.24: setdefault("rope_type", get("type", "default"))) and its validate_rope; a legacy
        # "mrope" spelled as transformers 5 spells it (Qwen2VLConfig.convert_rope_params_to_dict: default with
        # mrope_section, which rope_type_of reads as mrope)
        kind = str(scaling.get("rope_type", scaling.get("type", "default")))
        kind = "default" if kind == "mrope" else kind
        # a legacy type kept, set alike: transformers 4's LlamaConfig.__init__ copies type over rope_type
        scaling = {**scaling, "rope_type": kind, **({"type": kind} if "type" in scaling else {})}
    params = {k: v for k, v in (scaling or {"rope_type": "default"}).items() if k != "type"}
    return {prefix + "rope_scaling": scaling, prefix + "rope_theta": rope.theta,
            prefix + "rope_parameters": {**params, "rope_theta": rope.theta}}


def _edit_words(fix: dict) -> str:
    return "In the draft's config.json: " + ", ".join(f"{k}: {json.dumps(v)}" for k, v in fix.items())


def rope_problem(mine: Rope, theirs: Rope, prefix: str, where: str) -> Finding | None:
    """The draft's RoPE (``mine``) against the target's, by what each computes (``Rope.computes``); an info note, no
    fix, where either could not be read as one full-attention layer's (``Rope.unclear``)."""
    if mine.unclear or theirs.unclear:
        return config_problem(
            "ROPE_NOT_COMPARED", "info", "every engine", "the draft's RoPE was not compared with the target's",
            f"{where}: {mine.words()}; target {theirs.words()}",
            "Check by hand that the draft's rope_theta and rope_scaling are those of the target's full-attention "
            "layers.")
    if mine.computes() == theirs.computes():
        return None
    code, what = (("ROPE_THETA", "rope_theta") if mine.computes()[1:] == theirs.computes()[1:] else
                  ("ROPE_SCALING", "RoPE scaling"))
    fix = rope_fix(theirs, prefix)
    return config_problem(
        code, "warning", "every engine", f"the draft's {what} differs from the target's",
        f"{where}: {mine.words()}; target {theirs.words()}. Positions rotate differently wherever they differ "
        "(speculators#574: a converter dropped rope_scaling; SpecForge PR #742: an export kept only rope_parameters)",
        _edit_words(fix) + " (every transformers, and so every engine, reads these)", fix)


def context_problem(mine: Rope, target: Rope, prefix: str, where: str) -> Finding | None:
    """A draft context (max_position_embeddings) shorter than the target's (``target.max_positions``). Where the
    draft's RoPE fills its original context from max_position_embeddings, the fix also writes the target's RoPE with
    that filled in, so that raising the context changes no frequency the target does not use."""
    d_ctx, target_positions = mine.max_positions, target.max_positions
    if not (target_positions and d_ctx and d_ctx < target_positions):
        return None
    fix = {prefix + "max_position_embeddings": target_positions}
    if mine.scaling is not None and mine.filled_scaling() != mine.scaling:   # original_max was filled from it
        # a target RoPE not read: the draft's own, filled, so that raising the context changes nothing it computes
        fix.update(rope_fix(mine if target.unclear else target, prefix))
    return config_problem(
        "DRAFT_CONTEXT_SHORT", "warning", "every engine", "the draft's context is shorter than the target's",
        f"{where}: max_position_embeddings {d_ctx}; target {target_positions}. Past {d_ctx} tokens the draft runs "
        "outside its positions (sglang#6783: prompts over 2k slower than no speculation)",
        _edit_words(fix) + " (SGLang: also --context-length applies to both)", fix)
