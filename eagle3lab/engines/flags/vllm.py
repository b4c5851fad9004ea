"""vLLM's speculative-decoding flag rules for EAGLE / EAGLE-3.

Read in vllm-project/vllm: ``vllm/config/speculative.py`` (``SpeculativeConfig.__post_init__``,
``_verify_args``, ``_verify_and_get_draft_tp``, ``_maybe_override_draft_max_position_embeddings``),
``vllm/transformers_utils/config.py`` (``maybe_override_with_speculators``),
``vllm/transformers_utils/configs/speculators/{base,algos}.py`` (speculators checkpoints and the
defaults for missing keys) and ``vllm/v1/worker/gpu_model_runner.py``
(``_get_eagle3_aux_layers_from_config``). A launch is ``vllm serve TARGET --speculative-config
'{"method": "eagle3", "model": DRAFT, "num_speculative_tokens": k}'`` or, for a speculators-format
checkpoint, ``vllm serve SPECULATOR`` (the verifier and k come from its config.json).
"""

from __future__ import annotations

import difflib
import json

from eagle3lab.engines.flags.cmdline import FlagSpec, parse_command, parse_count
from eagle3lab.engines.flags.common import (
    Inputs,
    aux_needs_layers,
    aux_unknown,
    draft_window_finding,
    translator_findings,
)
from eagle3lab.engines.flags.configs import config_value, first_arch, is_speculators, written_aux_ids
from eagle3lab.engines.flags.result import flag_finding
from eagle3lab.engines.versions import Change
from eagle3lab.engines.vllm_runner import IDS_NESTED, config_at, read_ids, reads_since, vllm_runner
from eagle3lab.errors import bad_input
from eagle3lab.findings import Finding

CURRENT = "vLLM release (main as read in 2026, vllm/config/speculative.py)"
SPEC = "vllm/config/speculative.py SpeculativeConfig"
ALL = "all versions read (2025-04 .. 2026-09)"

_SPECS = [
    FlagSpec("--model", "str", "target_model"),
    FlagSpec("--speculative-config", "json", None),
    FlagSpec("--tensor-parallel-size", "int", "tensor_parallel_size", ("-tp",)),
    FlagSpec("--max-model-len", "size", "context_length"),
    FlagSpec("--trust-remote-code", "bool"),
    FlagSpec("--tokenizer", "str"),
    # launch features that decide vLLM's model runner (eagle3lab.engines.vllm_runner FEATURES)
    FlagSpec("--pipeline-parallel-size", "int", None, ("-pp",)),
    FlagSpec("--distributed-executor-backend", "str"),
    FlagSpec("--enable-dbo", "bool"),
    FlagSpec("--prefill-context-parallel-size", "int", None, ("-pcp",)),
    FlagSpec("--async-scheduling", "bool"),
    FlagSpec("--attention-config", "json", None, ("-ac",)),
    # Removed by PR #15466 (2025-03): the old top-level speculative flags.
    FlagSpec("--speculative-model", "str", "draft_model"),
    FlagSpec("--num-speculative-tokens", "int", "num_speculative_tokens"),
    FlagSpec("--speculative-draft-tensor-parallel-size", "int", "draft_tensor_parallel_size"),
]
SPECS = {s.name: s for s in _SPECS}
REMOVED = {"--speculative-model": "model", "--num-speculative-tokens": "num_speculative_tokens",
           "--speculative-draft-tensor-parallel-size": "draft_tensor_parallel_size"}

KNOWN = (
    "--host", "--port", "--dtype", "--gpu-memory-utilization", "--max-num-seqs", "--max-num-batched-tokens",
    "--enable-prefix-caching", "--no-enable-prefix-caching", "--enable-chunked-prefill", "--served-model-name",
    "--api-key", "--quantization", "--kv-cache-dtype", "--enforce-eager", "--disable-log-requests",
    "--data-parallel-size", "-dp", "--enable-expert-parallel", "--seed",
    "--tokenizer-mode", "--chat-template", "--generation-config", "--revision", "--download-dir", "--load-format",
    "--swap-space", "--block-size", "--compilation-config", "-O", "--enable-auto-tool-choice",
    "--tool-call-parser", "--reasoning-parser", "--hf-overrides", "--limit-mm-per-prompt", "--max-logprobs",
    "--disable-custom-all-reduce", "--uvicorn-log-level", "--config",
    "--hf-config-path", "--max-cudagraph-capture-size", "--attention-backend",
)

# SpeculativeConfig fields (vllm/config/speculative.py, 2025-2026); older builds had a few more.
SPEC_KEYS = (
    "method", "model", "num_speculative_tokens", "draft_tensor_parallel_size", "quantization", "moe_backend",
    "attention_backend", "kv_cache_dtype", "max_model_len", "revision", "code_revision", "enforce_eager",
    "index_share_for_mtp_iteration", "disable_padded_drafter_batch", "disable_eagle_block_drop",
    "use_local_argmax_reduction", "use_heterogeneous_vocab", "prompt_lookup_max", "prompt_lookup_min",
    "parallel_drafting", "num_speculative_tokens_per_batch_size", "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests", "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob",
    "draft_load_config", "rejection_sample_method", "synthetic_acceptance_rates", "synthetic_acceptance_length",
    "enable_adaptive_verification", "draft_sample_method", "dspark_draft_topk", "speculative_token_tree",
    "disable_by_batch_size", "disable_logprobs", "acceptance_method", "posterior_threshold", "posterior_alpha",
)
EAGLE_METHODS = ("eagle3", "eagle")
OTHER_METHODS = ("ngram", "medusa", "mlp_speculator", "draft_model", "suffix", "custom_class", "mtp", "dflash",
                 "dspark", "ngram_gpu", "extract_hidden_states", "deepseek_mtp")

CHANGES = {
    "removed-flags": Change("vllm", "--speculative-model / --num-speculative-tokens removed; use "
                            "--speculative-config", 15466, "2025-03-31", "0.8.2", "0.8.3"),
    "aux-from-config": Change("vllm", "capture ids read from the draft config's top-level "
                              "eagle_aux_hidden_state_layer_ids (before: always the default 2, N//2, N-3)", 25961,
                              "2025-10-01", "0.11.0", "0.11.1"),
    "draft-mpe-raised": Change("vllm", "EAGLE draft max_position_embeddings raised to the target's max_model_len "
                               "(issue #48894)"),
}


def parse(args):
    return parse_command("vllm", args, SPECS, KNOWN, underscores=True, abbreviations=False,
                         positional_model=True, nested_json=("--speculative-config",))


def model_path(parsed):
    return parsed.values.get("--model") or (parsed.positionals[0] if parsed.positionals else None)


def draft_path(parsed):
    spec = parsed.values.get("--speculative-config")
    return spec.get("model") if isinstance(spec, dict) else parsed.values.get("--speculative-model")


def _f(code, severity, message, rule, versions=ALL, fix=None, setting=None) -> Finding:
    return flag_finding(code, severity, message, rule, versions, fix, setting)


def _spec_json(spec: dict) -> str:
    return "--speculative-config '" + json.dumps(spec) + "'"


def resolve(inp: Inputs):
    v, out = inp.parsed.values, []
    target, draft = inp.target, inp.draft
    model = model_path(inp.parsed)
    spec = v.get("--speculative-config")
    # `vllm serve SPECULATOR`: the checkpoint names its verifier and k. Assumed when the served folder is
    # one, or when a speculators draft config comes with no JSON naming another draft.
    direct = not any(f in v for f in REMOVED) and (inp.served_speculator or (
        is_speculators(draft) and (spec is None or "model" not in spec)))
    tp = v.get("--tensor-parallel-size") or 1
    as_given = {"algorithm": None, "num_speculative_tokens": None, "target_model": model,
                "target_arch": inp.target_arch,
                "num_target_layers": inp.num_layers, "draft_model": None, "draft_tensor_parallel_size": None,
                "tensor_parallel_size": v.get("--tensor-parallel-size"),
                "aux_layer_ids": _written_ids(draft), "context_length": v.get("--max-model-len"),
                "draft_max_position_embeddings": config_value(draft, "max_position_embeddings")}
    if isinstance(spec, dict):
        as_given.update(algorithm=spec.get("method"), num_speculative_tokens=spec.get("num_speculative_tokens"),
                        draft_model=spec.get("model"),
                        draft_tensor_parallel_size=spec.get("draft_tensor_parallel_size"))
    spec = _removed_flags(inp, spec, as_given, out)
    eff = dict(as_given, tensor_parallel_size=tp)

    if direct:
        spec = _served_directly(inp, model, draft, spec, eff, out)
        if spec is None:
            return as_given, eff, out
    elif spec is None:
        eff.update(algorithm=None, num_speculative_tokens=None, max_accept_length=1)
        out.append(_f("VLLM_NO_SPECULATIVE_CONFIG", "warning", "No --speculative-config: vLLM decodes one token "
                      "per step (no draft).", SPEC, fix=_spec_json({"method": "eagle3", "model": "/path/to/draft",
                                                                   "num_speculative_tokens": 3}),
                      setting="algorithm"))
        return as_given, eff, out
    for key in spec:
        if key == "tensor_parallel_size":
            out.append(_f("VLLM_SPEC_CONFIG_TP_KEY", "error", "\"tensor_parallel_size\" inside --speculative-config "
                          "is rejected: \"'tensor_parallel_size' is not a valid argument in the speculative_config\".",
                          f"{SPEC}._verify_args", fix='Use "draft_tensor_parallel_size" (1 or the target\'s TP).',
                          setting="draft_tensor_parallel_size"))
        elif key not in SPEC_KEYS:
            close = difflib.get_close_matches(key, SPEC_KEYS, n=1, cutoff=0.7)
            out.append(_f("VLLM_SPEC_CONFIG_UNKNOWN_KEY", "error" if close else "warning",
                          f"\"{key}\" is not a SpeculativeConfig field" + (f"; did you mean \"{close[0]}\"?" if close
                                                                           else ".")
                          + " vLLM rejects unknown fields when it validates the config (or the setting is lost).",
                          SPEC, fix=f'Rename it to "{close[0]}".' if close else "Remove it.", setting=None))

    method = _method(inp, spec, draft, eff, out)
    if method is None:
        return as_given, eff, out
    if eff["draft_model"] is None and not direct:
        out.append(_f("VLLM_NO_DRAFT_MODEL", "error", f"method {method} without \"model\": vLLM stops with "
                      "'num_speculative_tokens was provided but without speculative model'.", f"{SPEC}.__post_init__",
                      fix=_spec_json({**spec, "model": "/path/to/draft"}), setting="draft_model"))
    k = _num_tokens(spec, draft, eff, out)
    _draft_tp(spec, tp, eff, out)
    eff["max_accept_length"] = k + 1 if k else (1 if k == 0 else None)
    if k:
        eff.update(num_steps=k, topk=1, num_draft_tokens=k + 1)
    if method == "eagle3":
        _norm_flags(draft, eff, out)
        _aux(inp, draft, eff, out, spec)
        out += [f for f in [draft_window_finding(inp)] if f]   # vLLM applies it through layer_types only
    _positions(inp, target, draft, eff, out)
    return as_given, eff, out


def _written_ids(draft):
    top, nested = written_aux_ids(draft)
    return top if top is not None else nested


def _removed_flags(inp: Inputs, spec, as_given: dict, out: list):
    v = inp.parsed.values
    old = {REMOVED[f]: v[f] for f in REMOVED if f in v}
    if not old:
        return spec
    state = inp.place(CHANGES["removed-flags"])
    written = " ".join(inp.parsed.written[f] for f in REMOVED if f in v)
    new = {"method": "eagle3", **old} if "model" in old else old
    if state == "before" and spec is None:
        as_given.update({("draft_model" if k == "model" else k): val for k, val in old.items()})
        out.append(_f("VLLM_DEPRECATED_FLAGS", "warning", f"`{written}`: deprecated speculative flags, still "
                      "accepted by this build and turned into a speculative config.", "vllm/engine/arg_utils.py",
                      CHANGES["removed-flags"].span(), fix=_spec_json(new), setting="algorithm"))
        return new
    out.append(_f("VLLM_REMOVED_FLAGS", "error", f"`{written}`: these flags were removed (PR #15466); vLLM's "
                  "argparse rejects them and speculation has to be configured with --speculative-config.",
                  "vllm/engine/arg_utils.py", CHANGES["removed-flags"].span(), fix=_spec_json(new),
                  setting="algorithm"))
    return spec


def _served_directly(inp: Inputs, model, draft: dict, spec, eff: dict, out: list):
    sc = draft.get("speculators_config") or {}
    try:
        k = sc["proposal_methods"][0]["speculative_tokens"]
        verifier = sc["verifier"]["name_or_path"]
        algo = draft["speculators_model_type"]
    except (KeyError, IndexError, TypeError):
        out.append(_f("VLLM_SPECULATORS_INVALID", "error", "The speculators config lacks speculators_config."
                      "proposal_methods[0].speculative_tokens, verifier.name_or_path or speculators_model_type: vLLM "
                      "stops with 'Invalid speculators config structure'.",
                      "vllm/transformers_utils/configs/speculators/base.py validate_speculators_config",
                      fix="Re-save the checkpoint with speculators, or fill those keys.", setting="algorithm"))
        return None
    if not isinstance(draft.get("transformer_layer_config"), dict):
        out.append(_f("VLLM_SPECULATORS_INVALID", "error", "The speculators config has no transformer_layer_config "
                      "dict: vLLM stops with 'Must provide transformer_layer_config'.",
                      "vllm/transformers_utils/configs/speculators/base.py validate_speculators_config",
                      setting="algorithm"))
        return None
    k = parse_count('speculators_config.proposal_methods[0]."speculative_tokens"', k)
    out.append(_f("VLLM_SPECULATORS_SERVED_DIRECTLY", "info",
                  f"A speculators checkpoint served directly: vLLM serves the verifier {verifier} as the target, "
                  f"the checkpoint as the {algo} draft, and num_speculative_tokens = {k} from "
                  "proposal_methods[0].speculative_tokens.",
                  "vllm/transformers_utils/config.py maybe_override_with_speculators", setting="target_model"))
    if spec is not None:
        out.append(_f("VLLM_SPECULATORS_REPLACES_SPEC_CONFIG", "warning",
                      f"--speculative-config {json.dumps(spec)} is given too, but for a speculators checkpoint vLLM "
                      "builds the speculative config from the checkpoint: in the versions read your JSON is "
                      "replaced, not merged (a later fix keeps user overrides such as attention_backend).",
                      "vllm/transformers_utils/config.py maybe_override_with_speculators",
                      "versions read up to 2026-09 (the merge fix is newer)",
                      fix=f"Change speculative_tokens in the checkpoint's config.json, or serve the verifier: vllm "
                          f"serve {verifier} " + _spec_json({"method": algo, "model": model,
                                                             **{kk: vv for kk, vv in spec.items() if kk != 'model'}}),
                      setting="num_speculative_tokens"))
    eff.update(target_model=verifier, draft_model=model)
    return {"method": algo, "model": model, "num_speculative_tokens": k}


def _method(inp: Inputs, spec: dict, draft, eff: dict, out: list):
    raw = spec.get("method")
    model = str(spec.get("model") or "")
    draft_is_eagle3 = (first_arch(draft) or "").endswith("Eagle3") or (
        is_speculators(draft) and draft.get("speculators_model_type") == "eagle3")
    if raw is None:
        low = model.lower()
        method = "eagle" if "eagle-" in low else ("eagle3" if "eagle3" in low else "draft_model")
        if method == "eagle3":
            out.append(_f("VLLM_METHOD_FROM_NAME", "info", f"No \"method\": vLLM picks eagle3 because the draft path "
                          f"'{model}' contains 'eagle3'.", f"{SPEC}.__post_init__ (method detection by name)",
                          fix=_spec_json({"method": "eagle3", **spec}), setting="algorithm"))
        else:
            out.append(_f("VLLM_METHOD_GUESSED", "error" if draft_is_eagle3 or draft is None else "warning",
                          f"No \"method\" and the draft path '{model}' contains neither 'eagle3' nor 'eagle-': vLLM "
                          f"treats it as method '{method}' (a standalone draft LM), not an EAGLE-3 head."
                          + (" The draft config is EAGLE-3: it will not load or run as intended." if draft_is_eagle3
                             else ""), f"{SPEC}.__post_init__ (method detection by name)",
                          fix=_spec_json({"method": "eagle3", **spec}), setting="algorithm"))
            eff["algorithm"] = method
            return None
    else:
        method = str(raw).strip().lower()
        if method in OTHER_METHODS:
            raise bad_input(f"`--speculative-config` \"method\": \"{raw}\"", None,
                            "an EAGLE method (eagle3 or eagle)", repr(raw),
                            "eagle3lab flags resolves EAGLE / EAGLE-3 launches only.")
        if method not in EAGLE_METHODS:
            close = difflib.get_close_matches(method, EAGLE_METHODS + OTHER_METHODS, n=1)
            raise bad_input(f"`--speculative-config` \"method\": \"{raw}\"", None,
                            f"one of {', '.join(EAGLE_METHODS + OTHER_METHODS)}", repr(raw),
                            f"Did you mean \"{close[0]}\"?" if close else None)
    if method == "eagle" and draft_is_eagle3:
        out.append(_f("VLLM_EAGLE3_DRAFT_WITH_EAGLE", "error", "method \"eagle\" with an EAGLE-3 draft: vLLM feeds it "
                      "the last hidden state instead of the concatenated aux states.", f"{SPEC}.__post_init__",
                      fix=_spec_json({**spec, "method": "eagle3"}), setting="algorithm"))
    eff["algorithm"] = method
    return method


def _num_tokens(spec: dict, draft, eff: dict, out: list):
    raw = spec.get("num_speculative_tokens")
    if raw is None:
        from_ckpt = None
        if is_speculators(draft):
            methods = draft["speculators_config"].get("proposal_methods") or [{}]
            from_ckpt = methods[0].get("speculative_tokens")
        out.append(_f("VLLM_NUM_SPEC_TOKENS_MISSING", "error", "No \"num_speculative_tokens\": vLLM stops with "
                      "'A speculative model was provided, but `num_speculative_tokens` was not provided' (EAGLE "
                      "drafts carry no n_predict; PR #44566 to default it from a speculators config is open as of "
                      "2026-09).", f"{SPEC}.__post_init__ / _verify_args",
                      fix=_spec_json({**spec, "num_speculative_tokens": from_ckpt or 3}),
                      setting="num_speculative_tokens"))
        eff["num_speculative_tokens"] = None
        return None
    k = parse_count(f'`--speculative-config` "num_speculative_tokens": {json.dumps(raw)}', raw)
    eff["num_speculative_tokens"] = k
    if k == 0:
        out.append(_f("VLLM_NUM_SPEC_TOKENS_NOT_POSITIVE", "error", "num_speculative_tokens = 0: vLLM rejects it "
                      "('Expected num_speculative_tokens to be greater than zero').", f"{SPEC}._verify_args (gt=0)",
                      fix=_spec_json({**spec, "num_speculative_tokens": 3}), setting="num_speculative_tokens"))
    return k


def _draft_tp(spec: dict, tp: int, eff: dict, out: list):
    raw = spec.get("draft_tensor_parallel_size")
    if raw is None:
        eff["draft_tensor_parallel_size"] = tp
        return
    dtp = parse_count(f'`--speculative-config` "draft_tensor_parallel_size": {json.dumps(raw)}', raw, minimum=1)
    eff["draft_tensor_parallel_size"] = dtp
    if dtp not in (1, tp):
        out.append(_f("VLLM_DRAFT_TP_INVALID", "error", f"draft_tensor_parallel_size = {dtp} with target "
                      f"--tensor-parallel-size {tp}: vLLM accepts only 1 or the target's TP "
                      "(\"cannot be other value than 1 or target model tensor_parallel_size\").",
                      f"{SPEC}._verify_and_get_draft_tp", fix=_spec_json({**spec, "draft_tensor_parallel_size": 1}),
                      setting="draft_tensor_parallel_size"))


def _norm_flags(draft, eff: dict, out: list):
    """The draft's norm switches as vLLM reads them; speculators' missing keys get vLLM's defaults."""
    if not draft:
        eff["draft_norm_flags"] = None
        return
    rule = "vllm/transformers_utils/configs/speculators/algos.py update_eagle3"
    if is_speculators(draft):
        defaults = {"norm_before_residual": True, "norm_before_fc": False, "fc_norm": False, "norm_output": False}
        flags = {k: draft.get(k, d) for k, d in defaults.items()}
        missing = [k for k in defaults if k not in draft]
        if "norm_before_residual" in missing:
            out.append(_f("VLLM_SPECULATORS_NORM_BEFORE_RESIDUAL_DEFAULT", "warning",
                          "The speculators config has no norm_before_residual: vLLM treats the missing key as True "
                          "(speculators' own config default is False). A draft trained with False is then served "
                          "with hidden_norm(h) as the residual: output stays correct, acceptance drops.", rule,
                          fix='Write "norm_before_residual": false (or true) explicitly in the config.json.',
                          setting="draft_norm_flags"))
        if set(missing) - {"norm_before_residual"}:
            out.append(_f("VLLM_SPECULATORS_DEFAULTS", "info", f"Missing speculators keys default to False in vLLM: "
                          f"{', '.join(k for k in missing if k != 'norm_before_residual')}.", rule,
                          setting="draft_norm_flags"))
    else:
        flags = {k: bool(draft.get(k, False)) for k in ("norm_before_residual", "norm_before_fc", "fc_norm",
                                                        "norm_output")}
    eff["draft_norm_flags"] = flags


def runner_features(inp: Inputs, spec) -> list[str]:
    """The launch's features that the V2 model runner lacks in some release (``vllm_runner.FEATURES`` names)."""
    v, spec = inp.parsed.values, spec if isinstance(spec, dict) else {}
    pp = (v.get("--pipeline-parallel-size") or 1) > 1
    return [name for name, used in (
        ("parallel_drafting", bool(spec.get("parallel_drafting"))),
        ("heterogeneous_vocab", bool(spec.get("use_heterogeneous_vocab"))),
        ("eagle3_pipeline_parallel", pp and spec.get("method") == "eagle3"),
        ("external_launcher_pp", pp and v.get("--distributed-executor-backend") == "external_launcher"),
        ("dbo", bool(v.get("--enable-dbo"))),
        ("prefill_context_parallel", (v.get("--prefill-context-parallel-size") or 1) > 1),
        ("adaptive_verification", bool(spec.get("enable_adaptive_verification"))),
        ("pp_async_scheduling", pp and bool(v.get("--async-scheduling"))),
        ("hisparse", (v.get("--attention-config") or {}).get("hisparse_config") is not None)) if used]


# What to do when vLLM refuses the launch at start-up, by the runner note that says why (vllm_runner.REFUSALS).
_REFUSAL_FIX = {
    "VLLM_RUNNER_ENV_REFUSED": "Unset VLLM_USE_V2_MODEL_RUNNER, or drop the feature V2 lacks.",
    "VLLM_RUNNER_NO_TRITON": "Unset VLLM_USE_V2_MODEL_RUNNER (the CPU wheel runs V1), or serve from an image with "
                             "triton-cpu (vLLM's docker/Dockerfile.cpu).",
    "VLLM_RUNNER_V1_REFUSED": "Let V2 run (unset VLLM_USE_V2_MODEL_RUNNER=0; a build with Triton), or drop the "
                              "feature V1 lacks.",
}


def _target_moe(target) -> bool | None:
    """Experts or quantization in the target config (vLLM's model_config.is_moe / is_quantized), None if unknown."""
    if not target:
        return None
    text = target.get("text_config") if isinstance(target.get("text_config"), dict) else target
    experts = any((text.get(k) or 0) > 0 for k in ("num_experts", "n_routed_experts", "num_local_experts"))
    return experts or "quantization_config" in target or "quantization_config" in text


def _runner(inp: Inputs, spec, eff: dict, out: list):
    """vLLM's model runner for this build and launch, as a finding (where it reads ids follows it)."""
    env = inp.parsed.env.get("VLLM_USE_V2_MODEL_RUNNER")
    use_v2 = None if env in (None, "") else str(env).strip().lower() in ("1", "true")
    runner = vllm_runner(inp.engine_version, inp.engine_platform, arch=inp.target_arch, moe=_target_moe(inp.target),
                         features=runner_features(inp, spec), use_v2_env=use_v2)
    eff["model_runner"] = runner.runner
    refused = [_REFUSAL_FIX[n.code] for n in runner.notes if n.code in _REFUSAL_FIX]
    out.append(_f("VLLM_RUNNER_REFUSED" if refused else "VLLM_MODEL_RUNNER", "error" if refused else "info",
                  runner.describe(), "eagle3lab.engines.vllm_runner (vllm/config/vllm.py use_v2_model_runner)",
                  f"vLLM {runner.release}", fix=" ".join(dict.fromkeys(refused)) or None, setting="model_runner"))
    return runner


def _aux(inp: Inputs, draft, eff: dict, out: list, spec=None):
    """Which ids vLLM's model runner reads (V2: the top-level key; V1 also eagle_config's since 0.22.0) and which
    resid points they select."""
    from eagle3lab.engines.layer_ids import resolve_aux_layers, to_engine_ids

    rule = ("vllm/v1/worker/gpu/spec_decode/eagle/eagle3_utils.py (V2 runner: top-level key only); "
            "vllm/v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config (V1: eagle_config too since "
            f"{reads_since('V1', IDS_NESTED)})")
    if draft is None:
        out.append(aux_unknown("VLLM", rule, ALL, eff))
        return
    runner = _runner(inp, spec, eff, out)
    engine = "speculators" if is_speculators(draft) else "vllm"
    top, nested = written_aux_ids(draft)
    top = top or None  # [] is treated as no ids: the default applies
    nested_read = top is None and nested is not None and IDS_NESTED in runner.id_keys
    state = inp.place(CHANGES["aux-from-config"])
    ids = (top if top is not None else nested if nested_read else None) if state != "before" else None
    other = read_ids(runner, draft) if ids is None and state != "before" else None
    if other is not None:   # V2 (0.27.0 on): a DFlash / DSpark / drafter key stands in for EAGLE-3's
        key, ids = other
        out.append(_f("VLLM_AUX_IDS_OTHER_KEY", "warning", f"The {runner.runner} model runner reads the aux ids from "
                      f"{key} ({config_at(draft, key)} as written) and feeds vLLM ids {ids}"
                      + (" (it adds 1: that key counts layer outputs)" if key in runner.reads.plus_one else "")
                      + f": not eagle_aux_hidden_state_layer_ids, which this draft leaves out ({runner.reads.where}).",
                      rule, f"vLLM {runner.release}", fix="Write the trained points as a top-level "
                      "eagle_aux_hidden_state_layer_ids (vLLM numbering), which every runner reads first.",
                      setting="aux_source"))
    eff["aux_layer_ids"] = ids
    eff["aux_source"] = ("draft config.json -> eagle_aux_hidden_state_layer_ids (top level)" if top is not None
                         and ids is not None else f"draft config.json -> {other[0]} ({runner.runner} runner)"
                         if other is not None else f"draft config.json -> {IDS_NESTED} ({runner.runner} runner)"
                         if ids is not None else "vLLM default (2, N//2, N-3)")
    if top is not None and state == "before":
        out.append(_f("VLLM_AUX_IDS_NOT_READ", "error", f"This build predates PR #25961: the draft's ids {top} are not "
                      "read and vLLM captures its default (2, N//2, N-3).", rule, CHANGES["aux-from-config"].span(),
                      fix="Upgrade vLLM, or train on the default layers.", setting="aux_source"))
    if top is None and nested is not None and other is None:
        fix = "Add a top-level eagle_aux_hidden_state_layer_ids in vLLM numbering (see `eagle3lab ids`)."
        meant = None
        if inp.num_layers:
            try:
                meant = resolve_aux_layers("sglang", nested, inp.num_layers, arch=inp.target_arch).resid
                fix = (f'Add "eagle_aux_hidden_state_layer_ids": {to_engine_ids("vllm", meant, inp.num_layers)} at '
                       f"the top level of the draft's config.json (vLLM numbering of the resid{list(meant)} that "
                       "SGLang/SpecForge read from eagle_config; both runners read it first).")
            except ValueError as err:
                fix = f"vLLM cannot capture the same points: {err}"
        as_vllm = f"resid{list(nested)}" + (f", not the resid{list(meant)} SGLang reads" if meant else "")
        if nested_read:   # V1 (0.22.0+): read, silently, as vLLM ids
            out.append(_f("VLLM_AUX_IDS_NESTED_READ", "warning",
                          f"The ids {nested} sit under eagle_config (SGLang/SpecForge numbering). This build's "
                          f"{runner.runner} model runner reads them there, silently, as vLLM ids ({as_vllm}): fc "
                          "is fed one point below what the draft was trained on.", rule, f"vLLM {runner.release}",
                          fix=fix, setting="aux_source"))
        else:
            out.append(_f("VLLM_AUX_IDS_NESTED_IGNORED", "warning",
                          f"The ids {nested} sit under eagle_config (SGLang/SpecForge numbering). This build's "
                          f"{runner.runner} model runner reads {' or '.join(runner.id_keys)} only and captures its "
                          f"default layers (the V1 runner would read the nested key since "
                          f"{reads_since('V1', IDS_NESTED)}, as vLLM ids: "
                          f"{as_vllm}). Either way fc is not fed what the draft was trained on.", rule,
                          f"vLLM {runner.release}", fix=fix, setting="aux_source"))
    if inp.num_layers is None:
        out.extend(aux_needs_layers("VLLM", ids, rule, ALL, eff))
        return
    res = resolve_aux_layers(engine, ids, inp.num_layers, arch=inp.target_arch, engine_version=inp.engine_version,
                             engine_platform=inp.engine_platform)
    eff["aux_resid"] = list(res.resid)
    eff["aux_label"] = res.label
    out.extend(translator_findings("VLLM", res, ALL, "Write the ids the draft was trained on (eagle3lab ids / "
                                                     "notebook 02)."))
    if not res.warnings:
        out.append(_f("VLLM_AUX_IDS", "info", f"vLLM reads {ids} and feeds fc {res.label}.", res.rule,
                      setting="aux_resid"))


def _positions(inp: Inputs, target, draft, eff: dict, out: list):
    serving = eff.get("context_length") or config_value(target, "max_position_embeddings")
    draft_mpe = eff.get("draft_max_position_embeddings")
    eff["context_length"] = serving
    if not serving or not draft_mpe or serving <= draft_mpe:
        return
    state = inp.place(CHANGES["draft-mpe-raised"])
    if state != "before":  # an unplaced build is the newest code, which raises it
        eff["draft_max_position_embeddings"] = serving
    out.append(_f("VLLM_DRAFT_MAX_POSITION", "info" if state == "after" else "warning",
                  f"The draft's max_position_embeddings ({draft_mpe}) is below the target's max_model_len ({serving}). "
                  f"Current vLLM raises it to {serving} ('EAGLE drafts share the target's positional space'); older "
                  "builds sized the draft's rotary cache by it and positions beyond it went out of bounds (issue "
                  "#48894).", f"{SPEC}._maybe_override_draft_max_position_embeddings",
                  "current main (2026); older builds: out-of-range positions",
                  fix=f"Set max_position_embeddings to {serving} in the draft's config.json.",
                  setting="draft_max_position_embeddings"))
