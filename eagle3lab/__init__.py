"""eagle3lab: find and prove why an EAGLE-3 draft makes serving slower.

This module is the public API: notebooks and users import from here (``import eagle3lab as e3``).
The package is in layers, each a folder that imports only the ones below it:

    engines/    what SGLang / vLLM / speculators / SpecForge / EAGLE do, as data (no torch):
                flags (launch commands), layer_ids (ids -> resid[k]), versions, profiles,
                verify_width, acceptance (each engine's definition), context_rules, counters
    oracle/     the installed engines themselves, run in their own Python by path (vLLM serve,
                dump, synthetic acceptance; SGLang's flag resolver) and cross_check, which reads them
    models/     torch: target (load, hook points), capture (resid[k]), hidden_dump, draft
                (the EAGLE-3 head; draft_attention, rope, norms), families (the draft families'
                registry) and draft_family (a config's family, RoPE, aux count), checkpoint
                (+ checkpoint_formats), vocab, device
    decoding/   running drafts: speculative (lossless chain / tree decoding), tree, evaluate
                (teacher-forced offline acceptance)
    analysis/   measurement and statistics: verdicts, cost_model, timing, roofline (served targets),
                benchmark (the side-by-side harness), diagnosis and wiring_search, tracks, plots
    doctor/     the doctor pipeline: run (run_doctor), evidence, config_checks, fix_choice, fixes,
                ladder, findings, write_fixed, serve_check
    readings/   each notebook's numbers in words, one module per notebook (nb01_... to nb07_...)
    app/        the face: cli + commands/, workbook runner, environment report, widgets
    train/      rebuilds the bundled models in data/ (beside app, at the top)

The foundation under all of them: ``errors``, ``findings`` (the one ``Finding``: code, severity, text, fix),
``atomic`` (whole-or-nothing writes) and ``bundled`` (what ships in ``data/``). Public names are imported lazily
so that ``import eagle3lab`` stays cheap.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_HOMES = {
    # foundation
    "eagle3lab.errors": ("Eagle3LabError",),
    "eagle3lab.findings": ("Finding", "Severity"),
    "eagle3lab.bundled": ("load_prompts", "recorded_resid", "TRACKS", "TRACK_MODELS", "apply_track"),
    # engine knowledge
    "eagle3lab.engines.flags": ("resolve_flags", "sglang_what_if", "SEED_COMMAND", "SEED_TARGET_CONFIG",
                                "SEED_DRAFT_CONFIG"),
    "eagle3lab.engines.layer_ids": ("resolve_aux_layers", "to_engine_ids", "nearest_servable", "compare_engines",
                                    "resid_name", "resid_label"),
    "eagle3lab.engines.profiles": ("PROFILES", "get_profile", "resolve_settings", "serving_problems"),
    "eagle3lab.oracle.cross_check": ("cross_check", "CROSS_CHECK_ENGINES"),
    "eagle3lab.engines.acceptance": ("acceptance_stats", "expected_tau", "compare_definitions", "engine_log_lines",
                                     "bootstrap_ratio", "bootstrap_ratio_difference", "tau_interval"),
    # models
    "eagle3lab.models.device": ("resolve_device", "resolve_dtype"),
    "eagle3lab.models.target": ("load_target", "tiny_target", "Target"),
    "eagle3lab.models.capture": ("ResidCapture", "capture_resid", "build_fc_input", "fc_input_difference",
                                 "paths_agreement", "resid_similarity"),
    "eagle3lab.models.hidden_dump": ("HiddenDump", "dump_hidden_states"),
    "eagle3lab.models.state_bank": ("StateBank", "capture_bank", "bank_from_dump", "TargetHead", "FINAL_NORMED"),
    "eagle3lab.models.draft": ("Eagle3Draft", "DraftConfig", "DraftCache"),
    "eagle3lab.models.families": ("ATTENTION_KINDS", "DRAFT_FAMILIES", "DraftFamily", "detect_family"),
    "eagle3lab.models.checkpoint": ("load_draft", "save_draft", "inspect_checkpoint", "trained_resid"),
    # running drafts
    "eagle3lab.decoding.speculative": ("speculative_generate", "target_greedy", "hf_generate"),
    "eagle3lab.decoding.evaluate": ("evaluate_offline", "evaluate_on_bank", "greedy_dataset"),
    # analysis
    "eagle3lab.analysis.cost_model": ("implied_round_cost", "explain"),
    "eagle3lab.analysis.timing": ("measure_costs",),
    "eagle3lab.analysis.roofline": ("SERVED", "price_on_served", "here_and_served"),
    "eagle3lab.analysis.benchmark": ("decode_sweep", "run_benchmark", "recorded_benchmarks"),
    "eagle3lab.analysis.diagnosis": ("score_wirings", "slot_scan", "wiring_neighbourhood"),
    "eagle3lab.analysis.wiring_search": ("search_wiring", "WiringSearch"),
    "eagle3lab.analysis.tracks": ("measure_track", "side_by_side"),
    "eagle3lab.analysis.tensor_diff": ("tensor_diff", "save_trace", "load_trace"),
    "eagle3lab.analysis.plots": ("plot_acceptance", "plot_break_even", "plot_here_and_served",
                                 "plot_speedup_vs_c", "plot_tokens_per_round", "plot_slot_scan", "plot_rms_halves",
                                 "plot_residual_balance", "plot_survival_by_rule", "plot_residual_scale",
                                 "plot_chain_vs_tree", "plot_wiring_search", "plot_tracks", "plot_tensor_diff"),
    # doctor
    "eagle3lab.doctor.run": ("run_doctor",),
    "eagle3lab.doctor.write_fixed": ("write_fixed",),
    "eagle3lab.doctor.vocab_behaviour": ("vocab_from_behaviour", "prenorm_labels_check"),
    "eagle3lab.doctor.config_checks": ("config_findings",),
    "eagle3lab.doctor.server_evidence": ("parse_server_evidence", "compare_with_prediction"),
    "eagle3lab.doctor.serve_check": ("vllm_installed",),
    # training data
    "eagle3lab.train.chat_data": ("heldout_chat_requests", "chat_prompt", "raw_prompt"),
    # the face
    "eagle3lab.app.environment": ("environment_report", "bundled_models", "notebook_map"),
    "eagle3lab.app.widgets": ("flags_widget", "token_view", "token_view_html", "token_rounds", "fc_ordering_widget",
                              "measure_ordering"),
    "eagle3lab.app.session": ("Session", "diff_sessions"),
    "eagle3lab.app.rerun": ("rerun",),
    "eagle3lab.app.workbook": ("summary",),
}
_EXPORTS = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'eagle3lab' has no attribute {name!r}")
