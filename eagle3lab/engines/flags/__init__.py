"""What SGLang or vLLM will really run for a launch command, and every silent override.

``resolve_flags(engine, args, target_config=None, draft_config=None, engine_version=None)`` reads a
real command line (``python -m sglang.launch_server ...``, ``vllm serve ... --speculative-config
'{...}'``) or a dict of flags and returns a :class:`FlagsResult`: the settings as given, the
settings the engine ends up with (``effective``), the cap on accept length they imply, and a list of
:class:`Finding` (stable code, severity, message, the engine rule behind it, the engine versions it
applies to, and a fix written in the engine's own flag syntax).

Engine rules live in ``sglang.py`` (the overlap scheduler's eras: ``sglang_overlap.py``) and
``vllm.py`` as data plus one short function each; they import ``common`` (inputs, shared findings),
``cmdline`` (parsing), ``configs`` (config reading) and ``result``, never this module, which only
dispatches. ``eagle3lab.engines.versions`` places an ``engine_version`` relative to the changes those
rules depend on. Pure Python (pandas only for ``FlagsResult.table()``): no torch import.
"""

from __future__ import annotations

import difflib
import shlex

from eagle3lab.engines.flags import sglang, vllm
from eagle3lab.engines.flags.cmdline import parse_count
from eagle3lab.engines.flags.common import Inputs, unplaced_finding
from eagle3lab.engines.flags.configs import (
    config_value,
    first_arch,
    is_speculators,
    load_config,
    local_config,
    verifier_arch,
)
from eagle3lab.engines.flags.result import VERSION_UNPLACED, Finding, FlagsResult
from eagle3lab.engines.versions import Change, parse_engine_version
from eagle3lab.engines.vllm_runner import check_platform
from eagle3lab.errors import bad_input

__all__ = ["SERVING_ENGINES", "Finding", "FlagsResult", "SEED_COMMAND", "SEED_DRAFT_CONFIG", "SEED_FLAGS", "SEED_TARGET_CONFIG",
           "change_key", "one_notice_per_change", "resolve_flags", "sglang_what_if"]

# The seed case: Kimi-K2.5 (moonshotai/Kimi-K2.5: KimiK25ForConditionalGeneration, the name SGLang matches, around a
# DeepSeek-V3 language model of 61 layers) served by SGLang with an EAGLE-3 draft trained with norm_before_residual on;
# one flag caps every verify step at 2 tokens (eagle3-facts.md sections 2 and 6). SGLang serves EAGLE-3 on this class
# from 0.5.10 (kimi_k25.py from 0.5.9, its capture hook PR #19689) and on the configured ids in every forward from
# 0.5.11 (PR #22836): notebook 01 resolves it at 0.5.11, 06 answers for 0.5.11 and later builds.
SEED_COMMAND = (
    "python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 --trust-remote-code "
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path ./kimi-k25-eagle3 "
    "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16"
)
# the seed's flags with its checkpoints as placeholders: doctor reads the checkpoints from --target / --draft
SEED_FLAGS = " ".join({"moonshotai/Kimi-K2.5": "TARGET", "./kimi-k25-eagle3": "DRAFT"}.get(t, t)
                      for t in SEED_COMMAND.split())
# moonshotai/Kimi-K2.5's config.json trimmed to the keys the resolvers read (architectures, depth, the context and
# its RoPE scaling, the dense/MoE split, the experts); tests/engines/test_flags_seed.py holds it to the published one.
SEED_TARGET_CONFIG = {
    "architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
    "text_config": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", "num_hidden_layers": 61,
                    "hidden_size": 7168, "first_k_dense_replace": 1, "n_routed_experts": 384,
                    "max_position_embeddings": 262144,
                    "rope_scaling": {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                                     "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0}}}
# SpecForge's Kimi-K2.5 draft template (PR #476) with max_position_embeddings raised to the target's 262144: its
# 131072 stops SGLang at start-up on this target (SGL_DRAFT_CONTEXT_TOO_SHORT), and the team's launch served.
SEED_DRAFT_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
                     "hidden_size": 7168, "max_position_embeddings": 262144, "draft_vocab_size": 32000,
                     "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True}}

_RULES = {"sglang": sglang, "vllm": vllm}   # the engines with a flag resolver
SERVING_ENGINES = tuple(_RULES)


def resolve_flags(engine: str, args, target_config=None, draft_config=None, engine_version=None,
                  target_arch: str | None = None, num_target_layers: int | None = None, *,
                  engine_platform: str | None = None) -> FlagsResult:
    """Resolve a launch command the way ``engine`` will: effective settings, accept-length cap, findings.

    ``args``: a command line string, a token list, or a dict of flags (``{"speculative_num_steps": 1}``;
    for vLLM ``{"model": ..., "speculative_config": {...}}``). ``target_config`` / ``draft_config``: a dict,
    a config.json path or a checkpoint folder (read from the command's own paths when those exist
    locally). ``engine_version``: ``0.5.4``, a build date ``YYYY-MM-DD`` or ``pre-#N``/``post-#N``;
    None = the current release (said so in ``version_note``); a build that cannot be placed relative to a
    change behaves as the newest code and gets an ``ENGINE_VERSION_UNPLACED`` finding. ``target_arch``
    overrides the config's ``architectures[0]``. ``engine_platform`` (vLLM): "cuda" or "cpu" (vLLM's CPU build),
    which with the release decides vLLM's model runner and so where it reads aux ids; None = a CUDA build
    assumed (said in the VLLM_MODEL_RUNNER finding).
    """
    name = str(engine).strip().lower()
    if name not in SERVING_ENGINES:
        close = difflib.get_close_matches(name, SERVING_ENGINES, n=1)
        raise bad_input("engine", None, f"one of {', '.join(SERVING_ENGINES)}", repr(engine),
                        f"Did you mean '{close[0]}'?" if close else None)
    version = parse_engine_version(engine_version, "engine_version")  # the CLI checks --engine-version first
    rules = _RULES[name]
    parsed = rules.parse(args)
    target, target_src = load_config(target_config, "target_config")
    draft, draft_src = load_config(draft_config, "draft_config")
    sources = {"target_config": target_src, "draft_config": draft_src}
    if target is None:
        target, target_src = local_config(rules.model_path(parsed))
        sources["target_config"] = target_src and f"{target_src} (from the command's model path)"
    if draft is None:
        draft, draft_src = local_config(rules.draft_path(parsed))
        sources["draft_config"] = draft_src and f"{draft_src} (from the command's draft path)"
    served_speculator = is_speculators(target) and draft is None
    if served_speculator:  # the command serves a speculators checkpoint itself (`vllm serve SPECULATOR`)
        draft, target = target, None
        sources["draft_config"], sources["target_config"] = sources["target_config"], None
    arch = target_arch or first_arch(target) or verifier_arch(draft)
    sources["target_arch"] = ("--target-arch" if target_arch else "target config architectures[0]") if arch else None
    layers = num_target_layers if num_target_layers is not None else config_value(target, "num_hidden_layers")
    if layers is not None:
        layers = parse_count("num_target_layers", layers, minimum=1)
    platform = check_platform(engine_platform)
    if platform is not None and name != "vllm":
        raise bad_input("engine_platform", None, "vllm as the engine (the platform decides vLLM's model runner)",
                        repr(engine))
    inputs = Inputs(name, version, parsed, target, draft, arch, layers, sources, served_speculator,
                    engine_platform=platform)
    as_given, effective, findings = rules.resolve(inputs)
    findings = one_notice_per_change([unplaced_finding(c, version) for c in inputs.unplaced], findings)
    note = (f"engine_version {version}" if version else
            f"engine_version not given: assumed the current {rules.CURRENT}")
    effective = {"engine": name, "engine_version": version or "current", **effective}
    return FlagsResult(engine=name, engine_version=version, version_note=note, command=parsed.text,
                       as_given=as_given, effective=effective, findings=parsed.notes + findings,
                       sources=sources, unknown_flags=parsed.unknown)


def change_key(notice: Finding) -> Change:
    """The change an ``ENGINE_VERSION_UNPLACED`` notice is about (``common.unplaced_finding`` builds every one and
    keeps it on the finding): equal keys are one change, and two changes never share one, even worded alike (the text
    alone would merge two that differ only in ``landed``)."""
    return notice.change


def one_notice_per_change(placed: list[Finding], findings: list[Finding]) -> list[Finding]:
    """``placed`` (the notices for the changes the rules placed, in order) and the version notices among
    ``findings`` (the layer-id translator's: same builder, so a change placed on both paths gives equal ones), one per
    change (``change_key``) and first, then the other findings in order."""
    notices: dict = {}
    for f in placed + [f for f in findings if f.code == VERSION_UNPLACED]:
        notices.setdefault(change_key(f), f)
    return list(notices.values()) + [f for f in findings if f.code != VERSION_UNPLACED]


def sglang_what_if(num_steps=None, topk=None, num_draft_tokens=None, target_config=None, draft_config=None,
                   engine_version=None, target_arch=None, extra: str = "") -> FlagsResult:
    """SGLang's view of an EAGLE3 launch with these three flags (None = flag left out)."""
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", "TARGET", "--speculative-algorithm", "EAGLE3",
           "--speculative-draft-model-path", "DRAFT"]
    for flag, value in (("--speculative-num-steps", num_steps), ("--speculative-eagle-topk", topk),
                        ("--speculative-num-draft-tokens", num_draft_tokens)):
        if value is not None:
            cmd += [flag, str(value)]
    cmd += shlex.split(extra)
    return resolve_flags("sglang", cmd, target_config=target_config, draft_config=draft_config,
                         engine_version=engine_version, target_arch=target_arch)
