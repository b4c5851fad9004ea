"""SGLang's speculative-decoding flag rules, reproduced in the order the engine applies them.

Read in sgl-project/sglang: ``python/sglang/srt/server_args.py`` (``_handle_speculative_decoding``,
``auto_choose_speculative_params``; 2025 versions) and its 2026 successor
``python/sglang/srt/arg_groups/speculative_hook.py`` (``_handle_eagle_family``,
``_auto_choose_speculative_params``); ``model_executor/model_runner.py`` (aux layer ids);
``configs/model_config.py`` (``_derive_context_length``); ``speculative/eagle_utils.py``
(``organize_draft_results``); ``scripts/playground/bench_speculative.py``. The overlap scheduler's
eras are ``sglang_overlap.py``. The order:

    NEXTN -> EAGLE; --speculative-adaptive (topk 1, steps from its candidates, draft tokens steps + 1);
    max_running_requests := 48; overlap / mixed chunk; DeepSeek-family draft path (every EAGLE-family
    algorithm); auto (steps, topk, draft tokens) when steps is unset and not adaptive; topk == 1 ->
    draft tokens := steps + 1; the context-length checks (target, then the draft's).

Each finding's ``engine_logs`` / ``engine_error`` say what SGLang logs or raises while resolving;
``tests/oracles/test_sglang_flags_parity.py`` checks them, and the settings, against SGLang's own resolver in
the newest release read, ``SGLANG_NEWEST_READ`` (``eagle3lab/oracle/``).
"""

from __future__ import annotations

import difflib
import json
from pathlib import Path

from eagle3lab.engines.context_rules import TARGET, context_length
from eagle3lab.engines.flags.cmdline import FlagSpec, env_bool, parse_command
from eagle3lab.engines.flags.common import (
    Inputs,
    aux_needs_layers,
    aux_unknown,
    draft_window_finding,
    translator_findings,
)
from eagle3lab.engines.flags.configs import config_value, first_arch, written_aux_ids
from eagle3lab.engines.flags.result import flag_finding
from eagle3lab.engines.flags.sglang_overlap import CHANGES as OVERLAP_RECORDS
from eagle3lab.engines.flags.sglang_overlap import overlap_findings
from eagle3lab.engines.layer_ids import CHANGES as ID_CHANGES
from eagle3lab.engines.layer_ids import SGLANG_NEWEST_READ
from eagle3lab.engines.verify_width import ADJUSTED_LOG, POOL_RULE, verify_width
from eagle3lab.engines.versions import Change, place_in_order
from eagle3lab.errors import bad_input
from eagle3lab.findings import Finding

CURRENT = "SGLang release (main as read in 2026, python/sglang/srt/arg_groups/speculative_hook.py)"
HOOK = "python/sglang/srt/server_args.py (2025) / arg_groups/speculative_hook.py (2026)"
ALL = "all versions read (2025-03 .. 2026-09)"

_SPECS = [
    FlagSpec("--model-path", "str", "target_model", ("--model",)),
    FlagSpec("--speculative-algorithm", "str", "algorithm"),
    FlagSpec("--speculative-draft-model-path", "str", "draft_model", ("--speculative-draft-model",)),
    FlagSpec("--speculative-num-steps", "int", "num_steps"),
    FlagSpec("--speculative-eagle-topk", "int", "topk"),
    FlagSpec("--speculative-num-draft-tokens", "int", "num_draft_tokens"),
    FlagSpec("--speculative-token-map", "str", "token_map"),
    FlagSpec("--max-running-requests", "int", "max_running_requests"),
    FlagSpec("--disable-overlap-schedule", "bool", "overlap_schedule"),
    FlagSpec("--enable-mixed-chunk", "bool", "mixed_chunk"),
    FlagSpec("--context-length", "int", "context_length"),
    FlagSpec("--tp-size", "int", None, ("--tp",)),
    FlagSpec("--device", "str"),
    FlagSpec("--speculative-draft-model-revision", "str"),
    FlagSpec("--speculative-accept-threshold-single", "float"),
    FlagSpec("--speculative-accept-threshold-acc", "float"),
    FlagSpec("--speculative-draft-window-size", "int"),
    FlagSpec("--speculative-adaptive", "bool"),
    FlagSpec("--trust-remote-code", "bool"),
    FlagSpec("--disable-cuda-graph", "bool"),
    FlagSpec("--enable-two-batch-overlap", "bool"),
]
SPECS = {s.name: s for s in _SPECS}

# Real SGLang flags this tool does not model: not reported as unknown, and part of the prefix check.
KNOWN = (
    "--host", "--port", "--dtype", "--quantization", "--mem-fraction-static", "--chunked-prefill-size",
    "--cuda-graph-max-bs", "--cuda-graph-bs", "--dp-size", "--dp", "--ep-size",
    "--enable-dp-attention", "--enable-dp-lm-head", "--kv-cache-dtype", "--served-model-name", "--tokenizer-path",
    "--tokenizer-mode", "--revision", "--load-format", "--log-level", "--log-requests", "--schedule-policy",
    "--disable-radix-cache", "--enable-torch-compile", "--nnodes", "--node-rank", "--dist-init-addr", "--api-key",
    "--chat-template", "--reasoning-parser", "--tool-call-parser", "--max-total-tokens", "--max-prefill-tokens",
    "--stream-interval", "--random-seed", "--watchdog-timeout", "--decode-log-interval", "--pp-size",
    "--base-gpu-id", "--skip-server-warmup", "--enable-cache-report", "--enable-metrics", "--page-size",
    "--attention-backend", "--prefill-attention-backend", "--decode-attention-backend", "--sampling-backend",
    "--grammar-backend", "--json-model-override-args", "--config", "--disaggregation-mode", "--moe-a2a-backend",
    "--moe-runner-backend", "--speculative-draft-load-format", "--speculative-attention-mode",
    "--speculative-draft-attention-backend", "--speculative-moe-runner-backend", "--speculative-moe-a2a-backend",
    "--speculative-use-rejection-sampling", "--speculative-ngram-min-match-window-size",
    "--speculative-ngram-max-match-window-size", "--speculative-ngram-min-bfs-breadth",
    "--speculative-ngram-max-bfs-breadth", "--speculative-ngram-match-type", "--speculative-ngram-branch-length",
    "--speculative-ngram-capacity", "--speculative-dflash-block-size", "--speculative-adaptive-config",
    "--enable-multi-layer-eagle", "--decrypted-config-file", "--decrypted-draft-config-file",
    "--enable-deterministic-inference", "--model-loader-extra-config", "--enable-hierarchical-cache",
    "--torch-compile-max-bs", "--enable-ep-moe", "--enable-deepep-moe", "--deepep-mode", "--max-micro-batch-size",
)

ALGORITHMS = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
OTHER_ALGORITHMS = ("NGRAM", "DFLASH", "DSPARK", "FROZEN_KV_MTP")

# _auto_choose_speculative_params (current main); Grok as Llama; "else" branch below.
AUTO_LONG = ("LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM")
AUTO_CHAIN = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM", "GptOssForCausalLM",
              "Glm4MoeForCausalLM", "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM",
              "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM",
              "PixtralForConditionalGeneration", "MiMoV2ForCausalLM", "MiMoV2FlashForCausalLM")
# _handle_eagle_family: these targets get the MTP draft path = model path when none is given.
MTP_ARCHS = ("DeepseekV32ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "Glm4MoeForCausalLM",
             "Glm4MoeLiteForCausalLM", "GlmMoeDsaForCausalLM", "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM",
             "BailingMoeV2_5ForCausalLM", "MistralLarge3ForCausalLM", "PixtralForConditionalGeneration",
             "HYV3ForCausalLM")
MTP_ARCHS_0520 = ("HYV4ForCausalLM", "Qwen4ExpForConditionalGeneration")  # CHANGES["mtp-archs-0520"]
# ... of which these two get the draft path but no "DeepSeek MTP does not require ..." line (every build
# that lists them: 0.5.10 .. SGLANG_NEWEST_READ read).
MTP_SILENT = ("MistralLarge3ForCausalLM", "PixtralForConditionalGeneration")

# The lines SGLang logs while resolving (arg_groups/speculative_hook.py, configs/model_config.py; SGLANG_NEWEST_READ run).
MRR_LOG = ("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
           "setting --max-running-requests.")
MTP_LOG = "DeepSeek MTP does not require setting speculative_draft_model_path."
MIXED_LOG_OLD = "Mixed chunked prefill is disabled because of using eagle speculative decoding."
CONTEXT_LOG = ("Warning: {who} context_length ({asked}) is greater than the derived context_length ({derived}). "
               "This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may "
               "differ from max_position_embeddings in the model's config.")
DRAFT_MPE_LOG = "Overriding the draft model's max_position_embeddings to {n}."
ADAPTIVE_OFF_LOG = "speculative_adaptive disabled: {reason}. Falling back to static speculative params."

CHANGES = {
    # An early-2025 server_args.py (reads config.json itself) gives DeepSeek (5, 4, 8); PR #9470's
    # diff (2025-08-22) already shows DeepSeek at (3, 1, 4).
    "auto-deepseek": Change("sglang", "auto (3, 1, 4) for DeepseekV2/V3 instead of (5, 4, 8)", None, None, "0.4.3",
                            "0.5.0"),
    "auto-gptoss": Change("sglang", "auto (3, 1, 4) for GptOssForCausalLM", 9470, "2025-08-22", "0.4.10", "0.5.2"),
    # A late-2025 server_args.py (spec-v2 env era) still gives other architectures (5, 4, 8);
    # 2026 speculative_hook.py gives them (3, 1, 4).
    "auto-others": Change("sglang", "auto (3, 1, 4) for every architecture not listed (was (5, 4, 8))", None,
                          None, "0.5.4", None),
    **OVERLAP_RECORDS,  # the changes to the overlap scheduler: sglang_overlap.py
    # Read in the sglang wheels (arg_groups/speculative_hook.py, speculative/spec_info.py,
    # speculative/adaptive_spec_params.py); no PR was traced, so releases bound them.
    "mixed-chunk-eagle": Change("sglang", "EAGLE/EAGLE3 keep --enable-mixed-chunk "
                                "(SpeculativeAlgorithm.supports_mixed_chunk); only STANDALONE switches it off",
                                None, None, "0.5.18", "0.5.19"),
    "mtp-archs-0520": Change("sglang", "HYV4ForCausalLM and Qwen4ExpForConditionalGeneration get the MTP draft path",
                             None, None, "0.5.19", "0.5.20"),
    "adaptive-flag": Change("sglang", "--speculative-adaptive exists", None, None, "0.5.10", "0.5.11"),
    "adaptive-params": Change("sglang", "--speculative-adaptive sets the static parameters (topk 1, steps from the "
                              "adaptive config's candidates, draft tokens steps + 1) and skips the auto-choice and "
                              "its assert", None, None, "0.5.13", "0.5.14"),
    "adaptive-steps-5": Change("sglang", "the default adaptive config adds 5 to batch size 1's candidate steps",
                               None, None, "0.5.19", "0.5.20"),
    "deepseek-ids": ID_CHANGES["sglang#25454"],  # one record: the layer-id translator places it too
}


def parse(args):
    return parse_command("sglang", args, SPECS, KNOWN, underscores=False, abbreviations=True)


def model_path(parsed):
    return parsed.values.get("--model-path")


def draft_path(parsed):
    return parsed.values.get("--speculative-draft-model-path")


def _algorithm(raw: str, written: str) -> str:
    algo = raw.strip().upper()
    if algo in ALGORITHMS:
        return algo
    if algo in OTHER_ALGORITHMS:
        raise bad_input(f"`{written}`", None, f"an EAGLE-family algorithm ({', '.join(ALGORITHMS)})", repr(raw),
                        "eagle3lab flags resolves EAGLE-family flags only; NGRAM/DFLASH/DSPARK follow other rules.")
    close = difflib.get_close_matches(algo, ALGORITHMS + OTHER_ALGORITHMS, n=1)
    raise bad_input(f"`{written}`", None, f"one of {', '.join(ALGORITHMS + OTHER_ALGORITHMS)}", repr(raw),
                    f"Did you mean {close[0]}?" if close else "SGLang's argparse rejects it.")


def auto_params(arch: str | None, algorithm: str, place):
    """(steps, topk, draft tokens) SGLang picks when none are given, the rule, an older variant if unsure,
    and the ``CHANGES`` keys this architecture's rule read.

    ``place``: Change -> 'before' / 'after' / 'uncertain' for the build (``Inputs.place``). Only the
    changes the rule reads are placed, so a Llama target never hears about the DeepSeek change.
    """
    states = {}

    def has(key: str, sure: bool) -> bool:  # sure: count an uncertain build as lacking the change
        if key not in states:
            states[key] = place(CHANGES[key])
        return states[key] == "after" if sure else states[key] != "before"

    def pick(sure: bool):
        if algorithm == "STANDALONE":
            return (3, 1, 4), "STANDALONE -> (3, 1, 4)"
        if arch in AUTO_LONG:
            return (5, 4, 8), f"{arch} -> (5, 4, 8)"
        if arch in ("DeepseekV3ForCausalLM", "DeepseekV2ForCausalLM"):
            return ((3, 1, 4) if has("auto-deepseek", sure) else (5, 4, 8)), f"{arch} (DeepSeek branch)"
        if arch == "GptOssForCausalLM" and has("auto-gptoss", sure):
            return (3, 1, 4), f"{arch} (DeepSeek/gpt-oss branch, PR #9470)"
        if has("auto-others", sure):
            listed = arch in AUTO_CHAIN
            return (3, 1, 4), f"{arch} ({'listed' if listed else 'not listed: else branch'}) -> (3, 1, 4)"
        return (5, 4, 8), f"{arch} (else branch of older versions) -> (5, 4, 8)"

    newer, why = pick(sure=False)
    older, _ = pick(sure=True)
    return newer, why, (older if older != newer else None), tuple(states)


def _f(code, severity, message, rule, versions=ALL, fix=None, setting=None, logs=(), error=None) -> Finding:
    return flag_finding(code, severity, message, rule, versions, fix, setting, tuple(logs), error)


def resolve(inp: Inputs):
    arch = inp.target_arch
    out: list[Finding] = []
    draft_cfg = inp.draft
    ids_top, ids_nested = written_aux_ids(draft_cfg)
    eagle_cfg = (draft_cfg or {}).get("eagle_config")
    as_given = _as_given(inp, ids_top, ids_nested)
    eff = dict(as_given)
    if as_given["algorithm"] is None:
        _no_algorithm(as_given, eff, out)
        return as_given, eff, out
    algo = _chosen_algorithm(inp, as_given["algorithm"], out)
    eff["algorithm"] = algo

    # Side effects of the EAGLE family, before the step arithmetic (same order as the engine).
    _side_effects(inp, algo, eff, out)
    _draft_model(inp, algo, arch, eff, out)
    _steps(inp, algo, _adaptive(inp, algo, as_given, out), eff, out)
    if algo == "EAGLE3":
        if as_given["token_map"] is not None:
            eff["token_map"] = None
            out.append(_f("SGL_TOKEN_MAP_IGNORED", "warning",
                          "--speculative-token-map is ignored for EAGLE3: the draft's own d2t maps draft ids to target "
                          "ids (log: 'Speculative token map specified, but EAGLE3 models already have this').",
                          "python/sglang/srt/speculative/eagle_worker*.py init_token_map",
                          fix="Remove --speculative-token-map; check the draft's d2t instead.", setting="token_map"))
        _aux(inp, as_given, ids_top, ids_nested, eagle_cfg, eff, out)
        # llama_eagle3.py applies only --speculative-draft-window-size (0.5.12 on), never the config's window
        out += [f for f in [draft_window_finding(inp, eff["draft_window_size"], "draft_window_size")] if f]
    _context(inp, eff, out)
    return as_given, eff, out


def _as_given(inp: Inputs, ids_top, ids_nested) -> dict:
    """The settings as the command and configs state them, before any SGLang rule (None = not given)."""
    v, draft_cfg = inp.parsed.values, inp.draft
    return {
        "algorithm": v.get("--speculative-algorithm"), "num_steps": v.get("--speculative-num-steps"),
        "topk": v.get("--speculative-eagle-topk"), "num_draft_tokens": v.get("--speculative-num-draft-tokens"),
        "target_model": v.get("--model-path"), "target_arch": inp.target_arch, "num_target_layers": inp.num_layers,
        "draft_model": v.get("--speculative-draft-model-path"),
        "aux_layer_ids": ids_nested if ids_nested is not None else ids_top,
        "max_running_requests": v.get("--max-running-requests"),
        "overlap_schedule": False if v.get("--disable-overlap-schedule") else None,
        "mixed_chunk": True if v.get("--enable-mixed-chunk") else None,
        "token_map": v.get("--speculative-token-map"), "context_length": v.get("--context-length"),
        "draft_window_size": v.get("--speculative-draft-window-size"),
        "draft_max_position_embeddings": config_value(draft_cfg, "max_position_embeddings"),
    }


def _no_algorithm(as_given: dict, eff: dict, out: list):
    """No --speculative-algorithm: SGLang decodes one token per step, whatever other speculative flags say."""
    spec_flags = [k for k in ("num_steps", "topk", "num_draft_tokens", "draft_model") if as_given[k] is not None]
    eff.update(algorithm=None, max_accept_length=1, num_steps=None, topk=None, num_draft_tokens=None)
    if spec_flags:
        out.append(_f("SGL_NO_ALGORITHM", "warning",
                      f"Speculative flags are given ({', '.join(spec_flags)}) but no --speculative-algorithm: "
                      "SGLang ignores them and decodes one token per step.", HOOK,
                      fix="Add --speculative-algorithm EAGLE3.", setting="algorithm"))


def _chosen_algorithm(inp: Inputs, raw: str, out: list) -> str:
    """The algorithm SGLang runs (NEXTN is EAGLE), and an error when an EAGLE-3 head is run as plain EAGLE."""
    written = inp.parsed.written["--speculative-algorithm"]
    algo = _algorithm(raw, written)
    if algo == "NEXTN":
        out.append(_f("SGL_NEXTN_IS_EAGLE", "info", "NEXTN is an alias: SGLang runs it as EAGLE.",
                      f"{HOOK}: NEXTN -> EAGLE", setting="algorithm"))
        algo = "EAGLE"
    draft_arch = first_arch(inp.draft) or ""
    if draft_arch.endswith("Eagle3") and algo != "EAGLE3":
        out.append(_f("SGL_EAGLE3_DRAFT_WITH_EAGLE", "error",
                      f"The draft is an EAGLE-3 head ({draft_arch}) but the algorithm is {algo}: SGLang feeds it the "
                      "last hidden state instead of the concatenated aux states, so its fc input does not match.",
                      f"{HOOK}; speculative/spec_info.py is_eagle3()", fix="--speculative-algorithm EAGLE3",
                      setting="algorithm"))
    return algo


def _draft_model(inp: Inputs, algo: str, arch: str | None, eff: dict, out: list):
    """The draft path SGLang loads: DeepSeek-family targets default it to the target itself (MTP), others need one."""
    inner = (inp.target or {}).get("text_config")
    inner_arch = first_arch(inner) if isinstance(inner, dict) else None
    if arch and inner_arch and inner_arch != arch:
        out.append(_f("SGL_ARCH_IS_WRAPPER", "info",
                      f"SGLang matches architectures[0] = {arch} of the top-level config, not the text model's "
                      f"{inner_arch}: the DeepSeek-family defaults (MTP draft path, auto (3, 1, 4)) key on the "
                      "top-level name.", f"{HOOK}: get_model_config().hf_config.architectures[0]",
                      setting="target_arch"))
    if _mtp_arch(inp, arch):  # every EAGLE-family algorithm, STANDALONE included, goes through this check
        rule = f"{HOOK}: _handle_eagle_family, model_arch in [DeepseekV3ForCausalLM, ...]"
        if eff["draft_model"] is None:
            eff["draft_model"] = eff["target_model"]
            what = {"EAGLE3": ", which is not an EAGLE-3 head: the EAGLE3 worker fails to load it.",
                    "STANDALONE": ": the full target drafts for itself, a target-sized forward per draft token."}
            out.append(_f("SGL_DEEPSEEK_DRAFT_IS_TARGET", {"EAGLE3": "error", "STANDALONE": "warning"}.get(algo, "info"),
                          f"{arch}: with no --speculative-draft-model-path SGLang uses the target checkpoint as the "
                          f"{algo} draft" + what.get(algo, " (its built-in MTP layer)."), rule,
                          fix=None if algo == "EAGLE" else "--speculative-draft-model-path /path/to/draft",
                          setting="draft_model"))
        elif arch in MTP_SILENT:
            out.append(_f("SGL_DEEPSEEK_MTP_LOG_LINE", "info",
                          f"{arch} is on SGLang's MTP list, but for it SGLang does not log 'DeepSeek MTP does not "
                          "require setting speculative_draft_model_path.'; the path you gave is used.", rule,
                          setting="draft_model"))
        else:
            out.append(_f("SGL_DEEPSEEK_MTP_LOG_LINE", "info",
                          f"SGLang logs '{MTP_LOG}' for {arch}; for an EAGLE-3 draft the warning is spurious and the "
                          "path you gave is used.", rule, setting="draft_model", logs=(MTP_LOG,)))
    elif eff["draft_model"] is None:
        out.append(_f("SGL_NO_DRAFT_MODEL", "error", f"{algo} needs --speculative-draft-model-path for a "
                      f"{arch or 'non-DeepSeek'} target; SGLang cannot build the draft worker without it.",
                      f"{HOOK}; speculative/eagle_worker*.py", fix="--speculative-draft-model-path /path/to/draft",
                      setting="draft_model"))


def _mtp_arch(inp: Inputs, arch: str | None) -> bool:
    """Does SGLang give this target the MTP draft path (the target itself) when none is given?"""
    if arch in MTP_ARCHS:
        return True
    return arch in MTP_ARCHS_0520 and inp.place(CHANGES["mtp-archs-0520"]) != "before"


def _candidate_steps(inp: Inputs, out: list) -> list[int] | None:
    """The adaptive config's candidate steps, all batch sizes together (adaptive_spec_params.py
    resolve_candidate_steps_from_config); None when the config file cannot be read here."""
    path = inp.parsed.values.get("--speculative-adaptive-config")
    if path is None:
        batch1 = [1, 3, 5, 7] if inp.place(CHANGES["adaptive-steps-5"]) != "before" else [1, 3, 7]
        return sorted({*batch1, 0})   # the default config's other batch sizes add 0
    try:
        cfg = json.loads(Path(str(path)).expanduser().read_text())
        steps = sorted({s for key, entry in cfg.items() if str(key).isdigit() for s in entry["candidate_steps"]})
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        steps = []
    if not steps:
        out.append(_f("SGL_ADAPTIVE_CONFIG_UNREAD", "warning", f"--speculative-adaptive-config {path} cannot be read "
                      "here (or names no candidate_steps): the steps SGLang starts from are unknown.",
                      f"{HOOK}: _init_adaptive_speculative_params", CHANGES["adaptive-params"].span(),
                      fix="Run this where the adaptive config file is, or give --speculative-num-steps.",
                      setting="num_steps"))
        return None
    return steps


def _adaptive(inp: Inputs, algo: str, given: dict, out: list) -> dict:
    """``--speculative-adaptive``: the (steps, topk, draft tokens) SGLang resolves before the EAGLE-family rules.

    From 0.5.14 SGLang first checks adaptive can run (else it falls back to the static flags, with one
    warning), then sets topk 1, steps (the middle candidate) and draft tokens := steps + 1, and skips the
    auto-choice with its assert. Returns ``given`` with the steps rules should see.
    """
    if not inp.parsed.values.get("--speculative-adaptive"):
        return given
    rule = f"{HOOK}: handle_speculative_decoding -> _maybe_disable_adaptive, _init_adaptive_speculative_params"
    if inp.place(CHANGES["adaptive-flag"]) == "before":
        out.append(_f("SGL_FLAG_NOT_IN_BUILD", "error", "--speculative-adaptive does not exist in this build: "
                      "argparse stops with 'unrecognized arguments'.", "argparse", CHANGES["adaptive-flag"].span(),
                      fix="Drop --speculative-adaptive.", error="SystemExit"))
        return given
    if inp.place(CHANGES["adaptive-params"]) == "before":
        out.append(_f("SGL_ADAPTIVE_STATIC", "info", "--speculative-adaptive: this build resolves the static flags "
                      "as if it were absent (the auto-choice and the topk 1 adjustment included) and adapts the "
                      "steps only at run time.", rule, CHANGES["adaptive-params"].span(), setting="num_steps"))
        return given
    topk = given["topk"]
    reason = (f"speculative_algorithm={algo} (only EAGLE/EAGLE3 are supported)" if algo not in ("EAGLE", "EAGLE3")
              else f"speculative_eagle_topk={topk} (only topk=1 is supported)" if topk not in (None, 1)
              else "enable_multi_layer_eagle=True is not supported (MultiLayerEagleWorkerV2 does not implement "
                   "adaptive)" if inp.parsed.values.get("--enable-multi-layer-eagle") else None)
    if reason:
        log = ADAPTIVE_OFF_LOG.format(reason=reason)
        out.append(_f("SGL_ADAPTIVE_DISABLED", "warning", f"--speculative-adaptive is switched off: SGLang logs "
                      f"'{log}'", rule, CHANGES["adaptive-params"].span(), fix="Drop --speculative-adaptive, or use "
                      "EAGLE/EAGLE3 with --speculative-eagle-topk 1.", setting="num_steps", logs=(log,)))
        return given
    candidates = _candidate_steps(inp, out)
    if candidates is None:
        return {**given, "num_steps": None, "topk": 1, "num_draft_tokens": None, "adaptive_unknown": True}
    steps = given["num_steps"] if given["num_steps"] is not None else candidates[len(candidates) // 2]
    versions = "; ".join(f"{k}: {CHANGES[k].span()}" for k in ("adaptive-params", "adaptive-steps-5"))
    if steps not in candidates:
        out.append(_f("SGL_ADAPTIVE_STEPS_NOT_CANDIDATE", "error", f"--speculative-num-steps={steps} is not in the "
                      f"adaptive config's candidate_steps {candidates}: SGLang stops at start-up (ValueError).", rule,
                      versions, fix=f"Pass one of {candidates}, or drop --speculative-num-steps.", setting="num_steps",
                      error="ValueError"))
        return {**given, "num_steps": None, "topk": 1, "num_draft_tokens": None, "adaptive_unknown": True}
    out.append(_f("SGL_ADAPTIVE_PARAMS", "info", f"--speculative-adaptive: SGLang starts at steps {steps}, topk 1, "
                  f"draft tokens {steps + 1} (steps + 1, whatever --speculative-num-draft-tokens says) and moves the "
                  f"steps among {candidates} at run time, up to {max(candidates) + 1} tokens per verify step.", rule,
                  versions, setting="num_steps"))
    return {**given, "num_steps": steps, "topk": 1, "num_draft_tokens": steps + 1}


def _side_effects(inp: Inputs, algo: str, eff: dict, out: list):
    v = inp.parsed.values
    if eff["max_running_requests"] is None:
        eff["max_running_requests"] = 48
        msg = ("--max-running-requests is not set: SGLang resets it to 48 for speculative decoding, so at most 48 "
               "requests decode at once and a benchmark at higher concurrency queues the rest.")
        if inp.target_arch == "DeepseekV4ForCausalLM":
            eff["max_running_requests"] = 256
            msg = ("DeepseekV4ForCausalLM: the model hook sets max_running_requests to 256 before the speculative "
                   "hook runs, so the usual reset to 48 does not happen (issue #33199).")
        out.append(_f("SGL_MAX_RUNNING_REQUESTS", "warning", msg, f"{HOOK}: 'Max running requests is reset to 48'",
                      fix="Set --max-running-requests N to the concurrency you mean to serve.",
                      setting="max_running_requests",
                      logs=() if inp.target_arch == "DeepseekV4ForCausalLM" else (MRR_LOG,)))
    out.extend(overlap_findings(inp, algo, eff))
    eff["mixed_chunk"] = False
    if v.get("--enable-mixed-chunk"):
        kept = algo != "STANDALONE" and inp.place(CHANGES["mixed-chunk-eagle"]) != "before"
        span = CHANGES["mixed-chunk-eagle"].span()
        if kept:
            eff["mixed_chunk"] = True
            out.append(_f("SGL_MIXED_CHUNK_KEPT", "info", f"--enable-mixed-chunk stays on with {algo}: from "
                          f"{CHANGES['mixed-chunk-eagle'].first_with} SGLang switches it off only for algorithms "
                          "that cannot mix (STANDALONE).",
                          f"{HOOK}: _handle_eagle_family, SpeculativeAlgorithm.supports_mixed_chunk", span,
                          setting="mixed_chunk"))
        else:
            new = algo == "STANDALONE" and inp.place(CHANGES["mixed-chunk-eagle"]) != "before"
            log = (f"Mixed chunked prefill is disabled: {algo} speculative decoding does not support it." if new
                   else MIXED_LOG_OLD)
            out.append(_f("SGL_MIXED_CHUNK_DISABLED", "warning", f"--enable-mixed-chunk is switched off for {algo} "
                          f"(log: '{log}').", HOOK, span, fix="Drop --enable-mixed-chunk; it has no effect here.",
                          setting="mixed_chunk", logs=(log,)))


def _steps(inp: Inputs, algo: str, given: dict, eff: dict, out: list):
    """(steps, topk, draft tokens) after SGLang's rules, in its order: the auto-choice when steps is unset, the topk 1
    adjustment, then the tree's checks; ``max_accept_length`` only when the triple can run."""
    steps, topk, ndt = given["num_steps"], given["topk"], given["num_draft_tokens"]
    w = inp.parsed.written
    eff["max_accept_length"] = None
    if given.get("adaptive_unknown"):  # adaptive, but its starting steps cannot be known here
        eff.update(num_steps=None, topk=1, num_draft_tokens=None)
        return
    if steps is None:
        chosen = _auto_steps(inp, algo, topk, ndt, out)
        if chosen is None:
            return
        steps, topk, ndt = chosen
    elif topk is None:
        out.append(_f("SGL_TOPK_MISSING", "error",
                      f"`{w['--speculative-num-steps']}` without --speculative-eagle-topk: topk stays None and the "
                      "server fails at start-up with TypeError: '>' not supported between 'NoneType' and 'int'.",
                      f"{HOOK}: speculative_eagle_topk > 1 comparisons after the auto-choice is skipped",
                      fix=f"Add --speculative-eagle-topk 1 --speculative-num-draft-tokens {steps + 1} for a chain.",
                      setting="topk", error="TypeError"))
        eff.update(num_steps=steps)
        return
    for name, value in (("num_steps", steps), ("topk", topk)):
        if value == 0:
            out.append(_f("SGL_ZERO", "error", f"{name} = 0: EAGLE drafting needs at least one step and one "
                          "candidate per step; the draft worker cannot run.", HOOK,
                          fix="Use >= 1, or drop --speculative-algorithm to turn speculation off.", setting=name))
            eff.update(num_steps=steps, topk=topk, num_draft_tokens=ndt)
            return
    width = verify_width(steps, topk, ndt)
    _chain_draft_tokens(inp, steps, topk, ndt, width, out)
    ndt = width.num_draft_tokens
    if topk > 1 and not _tree_runs(steps, topk, ndt, width, eff, out):
        return
    if ndt < 2:
        out.append(_f("SGL_NO_DRAFT_TOKENS", "warning", f"num_draft_tokens = {ndt}: no draft token is verified, "
                      "every step emits one token at the cost of a draft pass.", HOOK,
                      fix="Use --speculative-num-draft-tokens >= 2.", setting="num_draft_tokens"))
    eff.update(num_steps=steps, topk=topk, num_draft_tokens=ndt,
               max_accept_length=min(steps, max(ndt - 1, 0)) + 1)


def _auto_steps(inp: Inputs, algo: str, topk, ndt, out: list) -> tuple[int, int, int] | None:
    """No --speculative-num-steps: the triple SGLang auto-chooses, or None when it cannot be known here (topk or
    draft tokens given alone trip SGLang's assert; an unknown architecture leaves the choice open)."""
    w = inp.parsed.written
    if topk is not None or ndt is not None:
        got = " ".join(w[f] for f in ("--speculative-eagle-topk", "--speculative-num-draft-tokens") if f in w)
        out.append(_f("SGL_PARTIAL_FLAGS", "error",
                      f"`{got}` without --speculative-num-steps: SGLang asserts that topk and draft tokens are "
                      "unset whenever steps is unset, and the server stops with a bare AssertionError (no message).",
                      f"{HOOK}: assert speculative_eagle_topk is None and speculative_num_draft_tokens is None",
                      fix="Give all three (e.g. --speculative-num-steps 3 --speculative-eagle-topk 1 "
                          "--speculative-num-draft-tokens 4) or none of them.", setting="num_steps",
                      error="AssertionError"))
        return None
    if inp.target_arch is None and algo != "STANDALONE":
        out.append(_f("SGL_AUTO_PARAMS_UNKNOWN_ARCH", "warning",
                      "No steps/topk/draft tokens given and the target architecture is unknown: SGLang picks "
                      "them by architectures[0] (LlamaForCausalLM: 5, 4, 8 -> up to 6 tokens per round; "
                      "most others: 3, 1, 4 -> up to 4).", f"{HOOK}: _auto_choose_speculative_params",
                      fix="Pass the target config (--target-config) or --target-arch, or give all three flags.",
                      setting="num_steps"))
        return None
    triple, why, older, read = auto_params(inp.target_arch, algo, inp.place)
    steps, topk, ndt = triple
    older_txt = (f" Older builds (see versions) choose {older} for this target." if older else "")
    out.append(_f("SGL_AUTO_PARAMS", "info",
                  f"No --speculative-num-steps/--speculative-eagle-topk/--speculative-num-draft-tokens: SGLang "
                  f"chooses (steps, topk, draft tokens) = {triple} for {why}." + older_txt,
                  f"{HOOK}: _auto_choose_speculative_params",
                  "; ".join(f"{k}: {CHANGES[k].span()}" for k in read) or ALL,
                  fix=f"Pin them: --speculative-num-steps {steps} --speculative-eagle-topk {topk} "
                      f"--speculative-num-draft-tokens {ndt}", setting="num_steps"))
    return steps, topk, ndt


# the findings whose rule caps accept length below the chain the command asks for: callers match these codes
CHAIN_CAP_CODES = frozenset({"SGL_TOPK1_DRAFT_TOKENS_ADJUSTED"})


def _chain_draft_tokens(inp: Inputs, steps: int, topk: int, ndt, width, out: list):
    """topk 1 (a chain): SGLang sets draft tokens := steps + 1, filling in a missing value or overriding another."""
    w = inp.parsed.written
    if topk == 1 and ndt is None:
        out.append(_f("SGL_TOPK1_DRAFT_TOKENS_SET", "info", f"--speculative-num-draft-tokens not given: with "
                      f"topk 1 SGLang sets it to steps + 1 = {steps + 1} (and logs '{ADJUSTED_LOG}').",
                      f"{HOOK}: topk == 1 adjustment", setting="num_draft_tokens", logs=(ADJUSTED_LOG,)))
    elif width.adjusted_from is not None:
        out.append(_f("SGL_TOPK1_DRAFT_TOKENS_ADJUSTED", "warning",
                      f"`{w['--speculative-num-draft-tokens']}` is overridden: with topk 1 (a chain) SGLang sets "
                      f"num_draft_tokens := steps + 1 = {steps + 1}, so it verifies {steps + 1} tokens per round, "
                      f"not {ndt}, and accept length is capped at {steps + 1}. The only trace is one log line: "
                      f"'{ADJUSTED_LOG}'.",
                      f"{HOOK}: if speculative_eagle_topk == 1 and num_draft_tokens != num_steps + 1",
                      fix=f"For a {ndt}-token chain pass --speculative-num-steps {max(ndt - 1, 1)} "
                          f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {max(ndt, 2)}; to keep "
                          f"{steps} step(s) write --speculative-num-draft-tokens {steps + 1} so the command says "
                          "what runs.", setting="num_draft_tokens", logs=(ADJUSTED_LOG,)))


def _tree_runs(steps: int, topk: int, ndt, width, eff: dict, out: list) -> bool:
    """topk > 1 (a tree): False, with the settings as given, when SGLang cannot run it (draft tokens missing, or
    more than the candidate pool holds); a warning when bench_speculative.py would skip it."""
    if ndt is None:
        out.append(_f("SGL_TREE_DRAFT_TOKENS_MISSING", "error",
                      f"topk {topk} (a tree) without --speculative-num-draft-tokens: SGLang does not fill it in "
                      "and the first draft step fails (num_draft_token - 1 with None) in organize_draft_results.",
                      POOL_RULE, fix=f"Add --speculative-num-draft-tokens {min(steps * topk + 1, 8)}.",
                      setting="num_draft_tokens"))
        eff.update(num_steps=steps, topk=topk, num_draft_tokens=None)
        return False
    pool = width.pool
    if width.over_pool:
        out.append(_f("SGL_TREE_POOL_TOO_SMALL", "error",
                      f"The tree keeps the best num_draft_tokens - 1 = {ndt - 1} of a candidate pool of "
                      f"topk + (steps-1)*topk^2 = {pool}: torch.topk fails ('selected index k out of range') at "
                      "the first decode; SGLang checks this at start-up only in adaptive mode (PR #24054).", POOL_RULE,
                      fix=f"Use --speculative-num-draft-tokens {pool + 1} or fewer, or raise steps/topk.",
                      setting="num_draft_tokens"))
        eff.update(num_steps=steps, topk=topk, num_draft_tokens=ndt)
        return False
    if steps * topk + 1 < ndt:
        out.append(_f("SGL_BENCH_WOULD_SKIP", "warning",
                      f"steps*topk + 1 = {steps * topk + 1} < num_draft_tokens = {ndt}: "
                      "scripts/playground/bench_speculative.py skips such configs; the extra tokens mostly sit "
                      "deep in unlikely branches and add verification cost.",
                      "scripts/playground/bench_speculative.py: if steps * topk + 1 < num_draft_tokens: continue",
                      fix=f"Try --speculative-num-draft-tokens {steps * topk + 1} or fewer.",
                      setting="num_draft_tokens"))
    return True


def _aux(inp: Inputs, given: dict, ids_top, ids_nested, eagle_cfg, eff: dict, out: list):
    """Where SGLang reads the aux layer ids (eagle_config only) and which resid points they select."""
    from eagle3lab.engines.layer_ids import is_deepseek_family, resolve_aux_layers, to_engine_ids

    src = "draft config.json -> eagle_config -> eagle_aux_hidden_state_layer_ids"
    rule = "python/sglang/srt/model_executor/model_runner.py: eagle_config[...] inside a bare try/except"
    if inp.draft is None:
        out.append(aux_unknown("SGL", rule, ALL, eff))
        return
    if isinstance(eagle_cfg, dict) and eagle_cfg.get("use_aux_hidden_state") is False:
        out.append(_f("SGL_AUX_NOT_USED", "info", "eagle_config.use_aux_hidden_state is false: SGLang feeds the "
                      "draft the last hidden state only (EAGLE-1 style), no aux layers.", rule, setting="aux_resid"))
        eff.update(aux_layer_ids=None, aux_source="not used (use_aux_hidden_state false)", aux_resid=None)
        return
    ids = ids_nested
    eff["aux_layer_ids"] = ids
    eff["aux_source"] = src if ids is not None else "SGLang default (nothing found under eagle_config)"
    if ids is None and ids_top is not None:
        trained = sorted(set(ids_top))
        fix = "Add eagle_config.eagle_aux_hidden_state_layer_ids in SGLang numbering (see `eagle3lab ids`)."
        if inp.num_layers:
            try:
                sg = to_engine_ids("sglang", trained, inp.num_layers, arch=inp.target_arch,
                                   engine_version=inp.engine_version)
                fix = ('Add "eagle_config": {"eagle_aux_hidden_state_layer_ids": ' + str(sg) + "} to the draft's "
                       "config.json (SGLang numbering of the same resid points).")
            except ValueError as err:
                fix = f"SGLang cannot capture the same points: {err}"
        out.append(_f("SGL_AUX_IDS_TOP_LEVEL_IGNORED", "error",
                      f"The draft config has top-level eagle_aux_hidden_state_layer_ids = {ids_top} (speculators/vLLM "
                      f"numbering: resid{trained}), but SGLang reads ids only under eagle_config: the key is ignored "
                      "and the defaults are used with no log line.", rule, fix=fix, setting="aux_source"))
    if inp.num_layers is None:
        out.extend(aux_needs_layers("SGL", ids, rule, ALL, eff))
        return
    res = resolve_aux_layers("sglang", ids, inp.num_layers, arch=inp.target_arch, engine_version=inp.engine_version)
    eff["aux_resid"] = list(res.resid)
    eff["aux_label"] = res.label
    versions = CHANGES["deepseek-ids"].span() if inp.target_arch and is_deepseek_family(inp.target_arch) else ALL
    out.extend(translator_findings("SGL", res, versions, "Check what the draft was trained on: eagle3lab ids / "
                                                         "notebook 02."))
    if not res.warnings:
        out.append(_f("SGL_AUX_IDS", "info", f"SGLang reads {ids} from {src} and feeds fc {res.label}.", res.rule,
                      setting="aux_resid"))
    _graph_ids(inp, ids, res, out)
    _two_batch_overlap(inp, res, out)


def _two_batch_overlap(inp: Inputs, res, out: list):
    """deepseek_v2.py's DeepseekV2Model.forward (release wheels 0.5.5-0.5.23 read): in a batch run with two-batch
    overlap (forward_batch.can_run_tbo) its capture loop stops at first_k_dense_replace and the later layers run
    through model_forward_stages, which captures nothing: aux points at or past it are missing in those batches."""
    from eagle3lab.engines.layer_ids import sglang_model_file

    if not inp.parsed.values.get("--enable-two-batch-overlap") or sglang_model_file(inp.target_arch) != "deepseek_v2.py":
        return
    dense = config_value(inp.target, "first_k_dense_replace")
    missing = [k for k in res.resid if dense is None or k >= int(dense)]
    if not missing:
        return
    where = (f"layer {dense} (first_k_dense_replace)" if dense is not None else
             "first_k_dense_replace (not in the target config: every point counted as past it)")
    check, error = ID_CHANGES["sglang-aux-count-assert"], ID_CHANGES["sglang-aux-count-error"]
    out.append(_f("SGL_TBO_SKIPS_AUX_CAPTURE", "error",
                  f"--enable-two-batch-overlap: in every batch SGLang runs with two-batch overlap, deepseek_v2.py "
                  f"captures only before {where}; resid{missing} are not captured there, so fc gets fewer states "
                  f"than it reads ({check.first_with}-{error.last_without}: an assert 'captured i of n aux hidden "
                  f"states'; {error.first_with} on: RuntimeError; before {check.first_with} no check).",
                  "python/sglang/srt/models/deepseek_v2.py DeepseekV2Model.forward: normal_end_layer = "
                  "first_k_dense_replace when forward_batch.can_run_tbo",
                  f"release wheels {ID_CHANGES['sglang#12319'].first_with}-{SGLANG_NEWEST_READ} read",
                  fix="Drop --enable-two-batch-overlap for an EAGLE-3 launch on this target.", setting="aux_resid"))


def _graph_ids(inp: Inputs, ids, res, out: list):
    """Builds before PR #22836 (0.5.4-0.5.10 read) capture their CUDA graphs with the DEFAULT ids: CudaGraphRunner's
    __init__ calls set_eagle3_layers_to_capture() with none, and ModelRunner sets the configured ids only after
    init_device_graphs, so eager forwards (prefill, extend) feed the configured points and every graph-replayed
    forward (decode and verify up to --cuda-graph-max-bs) the default ones."""
    from eagle3lab.engines.layer_ids import default_resid

    change = ID_CHANGES["sglang#22836"]
    if ids is None or res.fatal or inp.parsed.values.get("--disable-cuda-graph") or \
            (inp.parsed.values.get("--device") or "cuda") != "cuda":
        return
    # PRs #25454, #25464 and #27964 landed after it: a mark for one of them places this build too
    later = [ID_CHANGES["sglang#25454"], OVERLAP_RECORDS["spec-v1-retired"], OVERLAP_RECORDS["spec-v2-env-removed"]]
    era, sure = place_in_order([change, *later], inp.engine_version)
    if sure >= 1 or era >= 1 and inp.place(change) != "before":   # has the fix (or, unplaced, the newest code)
        return
    default = default_resid(inp.num_layers)
    if tuple(res.resid) == default:
        return
    out.append(_f("SGL_CUDA_GRAPH_DEFAULT_IDS", "warning",
                  f"This build captures its CUDA graphs with the default aux ids (resid{list(default)}), not the "
                  f"configured {ids} (resid{list(res.resid)}): those reach only eager forwards (prefill, extend), so "
                  "the graph-replayed decode and verify steps feed the draft states it was not trained on, while "
                  "prefill feeds the right ones. Nothing is logged.",
                  "python/sglang/srt/model_executor/cuda_graph_runner.py CudaGraphRunner.__init__ "
                  "set_eagle3_layers_to_capture(); model_runner.py sets the configured ids after init_device_graphs",
                  change.span(), fix=f"Upgrade to SGLang {change.first_with} or later (PR #{change.pr}), or add "
                  "--disable-cuda-graph (slower, but every forward feeds the configured ids).", setting="aux_resid"))


def derived_context_length(cfg: dict | None) -> int | None:
    """SGLang's get_context_length of a config (None: no config): context_rules' LENGTH rule, the one reading."""
    return context_length("sglang", TARGET, cfg)


def _context(inp: Inputs, eff: dict, out: list):
    """The serving context (--context-length, or the target's derived one) and the draft's, which inherits it.

    ModelConfig._derive_context_length: a context length asked for above the derived one stops start-up
    with a ValueError, unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 turns it into a warning (for
    the draft: and overrides its max_position_embeddings). Asked of the target by --context-length, of
    the draft by the target's context, which the draft worker passes on.
    """
    rule = "python/sglang/srt/configs/model_config.py _derive_context_length (is_draft_model)"
    versions = ("all versions read (the draft worker takes the target's context length, eagle_worker*.py); the "
                "override of the draft's max_position_embeddings is in 2026 model_config.py")
    allow = env_bool(inp.parsed.env, "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN")  # an EnvBool in SGLang
    asked, target_ctx = eff.get("context_length"), derived_context_length(inp.target)
    if asked and target_ctx and asked > target_ctx:
        log = CONTEXT_LOG.format(who="User-specified", asked=asked, derived=target_ctx)
        out.append(_f("SGL_CONTEXT_LENGTH_OVER_TARGET", "warning" if allow else "error",
                      f"--context-length {asked} is above the target's derived context length {target_ctx}: " +
                      ("with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 SGLang serves it anyway, logging "
                       f"'{log}'" if allow else
                       f"SGLang stops at start-up (ValueError: '{log} To allow overriding this maximum, set the env "
                       "var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1')."), rule, versions,
                      fix=f"Use --context-length {target_ctx} or less.", setting="context_length",
                      logs=(log,) if allow else (), error=None if allow else "ValueError"))
        if not allow:
            return
    serving = asked or target_ctx
    draft_mpe = derived_context_length(inp.draft)
    eff["context_length"] = serving
    if not serving or not draft_mpe or serving <= draft_mpe:
        return
    log = CONTEXT_LOG.format(who="Target model's", asked=serving, derived=draft_mpe)
    if allow:
        eff["draft_max_position_embeddings"] = serving
        out.append(_f("SGL_DRAFT_MAX_POSITION_OVERRIDDEN", "warning",
                      f"The draft's max_position_embeddings ({draft_mpe}) is below the serving context ({serving}); "
                      "with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 SGLang overrides it to "
                      f"{serving}. Positions beyond {draft_mpe} were never seen in training if the trainer sized RoPE "
                      "by it (SpecForge #249 / PR #271): acceptance on long prompts may drop.", rule, versions,
                      fix=f"Set max_position_embeddings to {serving} in the draft's config.json.",
                      setting="draft_max_position_embeddings", logs=(log, DRAFT_MPE_LOG.format(n=serving))))
    else:
        out.append(_f("SGL_DRAFT_CONTEXT_TOO_SHORT", "error",
                      f"The draft's max_position_embeddings is {draft_mpe} but the target serves {serving} tokens: "
                      f"SGLang stops at start-up with \"Target model's context_length ({serving}) is greater than the "
                      f"derived context_length ({draft_mpe})\".", rule, versions,
                      fix=f"Set max_position_embeddings to {serving} in the draft's config.json, or prefix the "
                          "command with SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, or pass "
                          f"--context-length {draft_mpe}.", setting="draft_max_position_embeddings",
                      error="ValueError"))
