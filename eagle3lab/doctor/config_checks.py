"""Static checks of a draft's config against its target's ``config.json`` and against the serving engine: the
doctor findings that need no measurement (fc width and the aux count, sizes, context length, RoPE, sliding window,
dtype; a draft family, flag, window or RoPE the engine build does not run as trained). Both configs are read
through one reader (eagle3lab.engines.config_view): RoPE is compared by what it computes, and every fix is written
in the keys the draft's format and its engines read (``data["config_fix"]``: dotted config.json key -> value)."""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from eagle3lab.doctor.findings import doctor_finding
from eagle3lab.engines.config_view import WINDOW_KEYS, Window, read_target, read_window
from eagle3lab.engines.config_view import text_config as text_config  # doctor reads it from here
from eagle3lab.engines.draft_checks import (
    aux_fc_problem,
    config_rope,
    context_problem,
    flag_problems,
    rope_problem,
    window_problem,
)
from eagle3lab.engines.profiles import for_build, get_profile, serving_problems
from eagle3lab.findings import Finding
from eagle3lab.models.families import ATTENTION_KINDS


def read_draft_window(draft) -> Window:
    """A loaded draft's sliding window (kept in its config's extra as written), through the one reader."""
    return read_window({k: draft.config.extra[k] for k in WINDOW_KEYS if k in draft.config.extra})


def layer_prefix(draft) -> str:
    """Where the draft's format keeps the layer's keys (speculators: transformer_layer_config)."""
    return "transformer_layer_config." if getattr(draft, "format", None) == "speculators" else ""


def _rope_findings(draft, target, where: str) -> list[Finding]:
    found = rope_problem(config_rope(draft.config), target.rope, layer_prefix(draft), where)
    return [_from_problem(found)] if found else []


def _context_finding(draft, target, where: str) -> list[Finding]:
    found = context_problem(config_rope(draft.config), target.rope, layer_prefix(draft), where)
    return [_from_problem(found)] if found else []


def config_findings(draft, target_config: dict, where: str = "draft config.json") -> list[Finding]:
    """Static checks of a loaded draft's config against the target's ``config.json`` (a dict)."""
    out = []
    cfg, tgt = draft.config, read_target(target_config)
    t_hidden, t_vocab = tgt.hidden_size, tgt.vocab_size
    fc_in = draft.fc.weight.shape[1]
    width = replace(cfg, target_hidden_size=t_hidden).fc_width if t_hidden else None   # the rule: DraftConfig.fc_width
    count = aux_fc_problem(cfg.num_aux, _count_key(cfg), fc_in, t_hidden or 0, ("vllm", "sglang")) \
        if cfg.aux_layer_ids is not None or "num_aux_hidden_states" in cfg.extra else None
    if count is not None:
        out.append(_from_problem(count))
    elif t_hidden and fc_in != width:
        out.append(doctor_finding(
            "FC_WIDTH", "critical", "fc input width is not num_aux x target hidden size",
            f"fc.weight takes {fc_in} inputs; {cfg.num_aux} aux states of a {t_hidden}-wide target give "
            f"{width}", "Retrain or reconvert: the draft was made for another target.", "config"))
    if t_hidden and cfg.target_hidden_size != t_hidden and count is None:
        out.append(doctor_finding(
            "TARGET_HIDDEN_SIZE", "critical", "draft target_hidden_size differs from the target's hidden_size",
            f"{where}: target_hidden_size {cfg.target_hidden_size}; target hidden_size {t_hidden}",
            f"config key target_hidden_size: {t_hidden}", "config", data={"config_fix": {"target_hidden_size": t_hidden}}))
    if t_vocab and cfg.vocab_size != t_vocab:
        key = layer_prefix(draft) + "vocab_size"
        out.append(doctor_finding(
            "VOCAB_SIZE", "critical", "draft vocab_size differs from the target's",
            f"{where}: vocab_size {cfg.vocab_size}; target {t_vocab}", f"config key {key}: {t_vocab}", "config",
            data={"config_fix": {key: t_vocab}}))
    out += _context_finding(draft, tgt, where) + _rope_findings(draft, tgt, where)
    sliding = tgt.window.sliding_layers(tgt.num_layers or 0)
    if sliding:
        out.append(doctor_finding(
            "TARGET_SLIDING_WINDOW", "info", "the target uses a sliding window; the draft attends to everything",
            f"target sliding_window {tgt.window.size} on {len(sliding)} of {tgt.num_layers} layers. Acceptance can "
            "fall on prompts longer than the window (speculators#684: tau 2.30 at 2k -> 1.08 at 20k)",
            "Measure acceptance by prompt length.", "config"))
    d_dtype = str(draft.fc.weight.dtype).replace("torch.", "")
    if tgt.dtype and str(tgt.dtype) not in (d_dtype, "auto") and draft.load_report is not None:
        out.append(doctor_finding(
            "DTYPE", "info", "the draft is loaded in another dtype than the target's",
            f"draft {d_dtype} here; target {tgt.dtype}", None, "config"))
    return out


def _count_key(cfg) -> str:
    """Where the draft's aux count is written: num_aux_hidden_states, else the key of its ids."""
    return "num_aux_hidden_states" if "num_aux_hidden_states" in cfg.extra else cfg.aux_ids_key


def _from_problem(p: Finding) -> Finding:
    """A ``draft_checks.config_problem`` as a doctor finding (its engine and config edits in ``data``)."""
    data = {"engine": p.engine, **({"config_fix": p.config_fix} if p.config_fix else {})}
    return doctor_finding(p.code, p.severity, p.title, p.text, p.fix, "config", data=data)


def engine_findings(draft, engine, engine_version=None, engine_platform=None,
                    launch_window: int | None = None) -> list[Finding]:
    """What the serving ``engine`` (a profile name or an ``EngineProfile``; with ``engine_version`` /
    ``engine_platform`` the profile of that build, ``for_build``) cannot run as written, a flag or sliding window it
    runs otherwise, and a RoPE it applies otherwise than the draft's trainer (``draft.profile``, the format's
    trainer) did: all silent in the server's log. ``launch_window``: SGLang's --speculative-draft-window-size."""
    served = (for_build(engine, engine_version, engine_platform) if engine_version or engine_platform
              else get_profile(engine))
    out = [doctor_finding(
        "ENGINE_CANNOT_RUN_DRAFT", "critical", f"{served.engine} has no model for this draft as written", problem,
        "Serve it with an engine that builds this draft family (eagle3lab inspect lists them under 'runs in'), or "
        "convert / retrain it for one this engine builds.", "config") for problem in serving_problems(draft.config, served, ATTENTION_KINDS)]
    out += [_from_problem(p) for p in flag_problems(draft.config, served, draft.format)]
    window = read_draft_window(draft)
    problem = window_problem(window, draft.config.num_hidden_layers, draft.profile, served, launch_window)
    if problem is not None:
        out.append(_from_problem(problem))
    twin = draft.under(served)
    trained, run = draft.settings, twin.settings
    # compared by what they compute (frequencies, cos/sin scale, which length picks them), not by the dicts
    same = (draft.rope.inv_freq.shape == twin.rope.inv_freq.shape and
            torch.allclose(draft.rope.inv_freq, twin.rope.inv_freq, rtol=1e-6, atol=0) and
            math.isclose(draft.rope.attention_scaling, twin.rope.attention_scaling, rel_tol=1e-6) and
            draft.rope.kind == twin.rope.kind and trained.rope_length == run.rope_length)
    if not same:
        how = lambda s: s.decisions.get("rope_scaling", ("default", "plain RoPE"))[1]
        out.append(doctor_finding(
            "ROPE_SERVED_DIFFERENTLY", "warning", f"{served.engine} rotates positions otherwise than the trainer",
            f"trained ({draft.profile.label}): {how(trained)}, frequencies by {trained.rope_length}; served: "
            f"{how(run)}, frequencies by {run.rope_length}. Attention scores differ at every position the "
            "scaling touches (past the original context, or everywhere for a changed yarn scale).",
            "Serve with an engine version that applies the trained RoPE (see inspect's RoPE lines), or retrain "
            "with the served one.", "config"))
    return out
