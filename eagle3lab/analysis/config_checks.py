"""Static checks of a draft's config against its target's ``config.json`` and against the serving engine: the
doctor findings that need no measurement (fc width, sizes, context length, RoPE, sliding window, dtype; a draft
family or RoPE the engine does not run as trained)."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import torch

from eagle3lab.analysis.findings import DoctorFinding
from eagle3lab.engines.profiles import get_profile, serving_problems
from eagle3lab.models.families import ATTENTION_KINDS


def text_config(raw: dict) -> dict:
    return raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw


def _sliding_window(cfg: dict):
    if cfg.get("use_sliding_window") is False:
        return None
    if "layer_types" in cfg and not any("sliding" in str(t) for t in cfg["layer_types"] or ()):
        return None
    return cfg.get("sliding_window")


def _rope_key(scaling) -> tuple | None:
    """rope_scaling as what it computes: the type (``rope_type`` or the older ``type``) and its numbers."""
    if not scaling:
        return None
    kind = scaling.get("rope_type", scaling.get("type"))
    return (kind, *sorted((k, v) for k, v in scaling.items() if k not in ("type", "rope_type")))


def config_findings(draft, target_config: dict, where: str = "draft config.json") -> list[DoctorFinding]:
    """Static checks of a loaded draft's config against the target's ``config.json`` (a dict)."""
    out = []
    cfg, tgt = draft.config, text_config(target_config)
    t_hidden, t_vocab = tgt.get("hidden_size"), tgt.get("vocab_size")
    fc_in = draft.fc.weight.shape[1]
    width = replace(cfg, target_hidden_size=t_hidden).fc_width if t_hidden else None   # the rule: DraftConfig.fc_width
    if t_hidden and fc_in != width:
        out.append(DoctorFinding(
            "FC_WIDTH", "critical", "fc input width is not num_aux x target hidden size",
            f"fc.weight takes {fc_in} inputs; {cfg.num_aux} aux states of a {t_hidden}-wide target give "
            f"{width}", "Retrain or reconvert: the draft was made for another target.", "config"))
    if t_hidden and cfg.target_hidden_size != t_hidden:
        out.append(DoctorFinding(
            "TARGET_HIDDEN_SIZE", "critical", "draft target_hidden_size differs from the target's hidden_size",
            f"{where}: target_hidden_size {cfg.target_hidden_size}; target hidden_size {t_hidden}",
            f"config key target_hidden_size: {t_hidden}", "config"))
    if t_vocab and cfg.vocab_size != t_vocab:
        out.append(DoctorFinding(
            "VOCAB_SIZE", "critical", "draft vocab_size differs from the target's",
            f"{where}: vocab_size {cfg.vocab_size}; target {t_vocab}", f"config key vocab_size: {t_vocab}", "config"))
    t_ctx, d_ctx = tgt.get("max_position_embeddings"), cfg.max_position_embeddings
    if t_ctx and d_ctx and d_ctx < t_ctx:
        out.append(DoctorFinding(
            "DRAFT_CONTEXT_SHORT", "warning", "the draft's context is shorter than the target's",
            f"{where}: max_position_embeddings {d_ctx}; target {t_ctx}. Past {d_ctx} tokens the draft runs outside "
            "its positions (sglang#6783: prompts over 2k slower than no speculation)",
            f"config key max_position_embeddings: {t_ctx} (SGLang: also --context-length applies to both)", "config"))
    t_rope, d_rope = tgt.get("rope_scaling"), cfg.rope_scaling
    if _rope_key(t_rope) != _rope_key(d_rope):
        out.append(DoctorFinding(
            "ROPE_SCALING", "warning", "the draft's rope_scaling differs from the target's",
            f"{where}: rope_scaling {json.dumps(d_rope)}; target {json.dumps(t_rope)} (speculators#574: a converter "
            "dropped it; positions past the original context then rotate differently)",
            f"config key rope_scaling: {json.dumps(t_rope)}", "config"))
    t_theta = tgt.get("rope_theta")
    if t_theta and cfg.rope_theta and float(t_theta) != float(cfg.rope_theta):
        out.append(DoctorFinding(
            "ROPE_THETA", "warning", "the draft's rope_theta differs from the target's",
            f"{where}: rope_theta {cfg.rope_theta}; target {t_theta}", f"config key rope_theta: {t_theta}", "config"))
    window = _sliding_window(tgt)
    if window:
        out.append(DoctorFinding(
            "TARGET_SLIDING_WINDOW", "info", "the target uses a sliding window; the draft attends to everything",
            f"target sliding_window {window}. Acceptance can fall on prompts longer than the window "
            "(speculators#684: tau 2.30 at 2k -> 1.08 at 20k)", "Measure acceptance by prompt length.", "config"))
    t_dtype = tgt.get("torch_dtype") or tgt.get("dtype")
    d_dtype = str(draft.fc.weight.dtype).replace("torch.", "")
    if t_dtype and str(t_dtype) not in (d_dtype, "auto") and draft.load_report is not None:
        out.append(DoctorFinding(
            "DTYPE", "info", "the draft is loaded in another dtype than the target's",
            f"draft {d_dtype} here; target {t_dtype}", None, "config"))
    return out


def engine_findings(draft, engine: str) -> list[DoctorFinding]:
    """What the serving ``engine`` (a profile name) cannot run as written, and a RoPE it applies otherwise than
    the draft's trainer (``draft.profile``, the format's trainer) did: both silent in the server's log."""
    served = get_profile(engine)
    out = [DoctorFinding(
        "ENGINE_CANNOT_RUN_DRAFT", "critical", f"{served.engine} has no model for this draft as written", problem,
        "Serve it with an engine that builds this draft family (eagle3lab inspect lists them under 'runs in'), or "
        "convert / retrain it for one this engine builds.", "config") for problem in serving_problems(draft.config, served, ATTENTION_KINDS)]
    twin = draft.under(served)
    trained, run = draft.settings, twin.settings
    # compared by what they compute (frequencies, cos/sin scale, which length picks them), not by the dicts
    same = (draft.rope.inv_freq.shape == twin.rope.inv_freq.shape and
            torch.allclose(draft.rope.inv_freq, twin.rope.inv_freq, rtol=1e-6, atol=0) and
            math.isclose(draft.rope.attention_scaling, twin.rope.attention_scaling, rel_tol=1e-6) and
            draft.rope.kind == twin.rope.kind and trained.rope_length == run.rope_length)
    if not same:
        how = lambda s: s.decisions.get("rope_scaling", ("default", "plain RoPE"))[1]
        out.append(DoctorFinding(
            "ROPE_SERVED_DIFFERENTLY", "warning", f"{served.engine} rotates positions otherwise than the trainer",
            f"trained ({draft.profile.label}): {how(trained)}, frequencies by {trained.rope_length}; served: "
            f"{how(run)}, frequencies by {run.rope_length}. Attention scores differ at every position the "
            "scaling touches (past the original context, or everywhere for a changed yarn scale).",
            "Serve with an engine version that applies the trained RoPE (see inspect's RoPE lines), or retrain "
            "with the served one.", "config"))
    return out
