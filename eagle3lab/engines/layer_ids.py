"""Aux layer ids as each engine writes them, translated to the canonical ``resid[k]``.

``resid[k]`` is the residual stream entering decoder layer ``k`` (0 = embedding output, N = last
layer output before the final norm). The same written id means different ``resid`` points in
different engines, and SGLang changed its meaning for DeepSeek-family targets in 2026:

    engine (file)                                id k means          default (ids absent)
    vLLM / speculators (EagleModelMixin)         resid[k]            resid[2, N//2, N-3]
    vLLM deepseek_v2.py (0.18.0 on)              resid[k]; id 0 TypeError, id N only since PR #46973 (0.25.0)
    SGLang (models/llama.py, qwen2.py, ...)      resid[k+1]          resid[2, N//2, N-3]
    SGLang deepseek_v2.py after PR #25454        resid[k+1] if the first id is 1, else resid[k]
      (and glm4_moe_lite.py, same code)
    SGLang gpt_oss.py since PR #32334 (0.5.17)   resid[k] if the largest id is N, else resid[k+1]
    SGLang id -1 (+1 rule: loop index 0)         resid[0] in qwen2.py / qwen2_moe.py, and from a release
                                                 per file (llama.py 0.5.22, deepseek_v2.py 0.5.14, ...);
                                                 TypeError before it; other files: "not confirmed"
    SpecForge (captures through SGLang)          as SGLang           ids [1, N//2-1, N-4]
    SafeAILab/EAGLE (modeling_llama_kv.py)       ids ignored         resid[2, N//2, N-3]
    TransformerLens                              blocks.k.hook_resid_pre = resid[k]

Every engine captures while walking the layers, so the states reach fc in ascending layer order
whatever the order of the id list, and a repeated id is captured once. ``resolve_aux_layers``
returns what the engine really captures (fewer points when an id is never reached) plus notes, each
saying whether it was read in the engine's source (``confirmed``); ``to_engine_ids`` is the inverse.
Which config key vLLM reads the ids from (and what it logs on falling back) follows its model runner,
V1 or V2, which the build and the platform decide (``eagle3lab.engines.vllm_runner``; ``key=`` and
``engine_platform=`` here).
What each engine's model file does with an id list in each release range is a rule (``RULES``, one
``eagle3lab.engines.versions.Rule`` shape): per SGLang model file and the ``Change`` from which it holds (CAPTURE:
offset, what loop index 0 captures, whether loop index N is, what an id past the layers does, the rule's words), per
target whether SGLang has the hook at all (HOOK) and what a short capture does (COUNT), and vLLM's DeepSeek-family
loops (FILE, CAPTURE), all found by one lookup (``versions.rule_at``: dates, PR marks and releases place a build). A
rule's words are a template filled from its range and its ``Change`` ({since}, {until}, {pr}, {merged}, {newest}), so
no release boundary is typed beside the row that holds it. Adding a release's rule is one row holding its ``Change``
(``tests/engines/test_release_rows.py`` shows it); ``SGLANG_NEWEST_READ`` / ``VLLM_NEWEST_READ`` fill every sentence
that names the newest release read. Each note carries a stable code (``NOTE_CODES``): callers match the code, never the text.
Pure Python: no torch import, so ``eagle3lab ids`` starts fast.
"""

from __future__ import annotations

import operator
import re
from dataclasses import asdict, dataclass

from eagle3lab.engines.versions import Change, Rule, parse_engine_version, place, rule_at, rule_field
from eagle3lab.engines.vllm_runner import (
    IDS_NESTED,
    RELEASES_READ,
    VLLM_NEWEST_READ,
    check_platform,
    vllm_runner,
)
from eagle3lab.errors import Eagle3LabError, UncapturablePoints, bad_input
from eagle3lab.findings import Finding, Severity

ID_CONVENTIONS = ("sglang", "vllm", "speculators", "specforge", "eagle", "transformerlens")

# Changes in meaning; eagle3lab.engines.versions places a build (engine_version) before or after each.
CHANGES = {
    # PR #25454 (opened 2026-05-16) reached main as f5049709b323 on 2026-05-18. v0.5.12 was published
    # 2026-05-16, before it. v0.5.13 (2026-06-13) was cut from main after 2026-06-08: its notes list PR #25464
    # (Spec V1 deprecated), which reached main that day (eagle3lab.engines.flags.sglang), so it carries #25454 too
    # (nothing read reverts it). v0.5.12.post1 cherry-picked fixes onto the 0.5.12 branch: not placed.
    "sglang#25454": Change("sglang", "DeepSeek-family aux ids (deepseek_v2.py): +1 only if the first id is 1",
                           25454, "2026-05-18", last_without="0.5.12", first_with="0.5.13"),
    # vLLM: read in the release wheels 0.17.0 to VLLM_NEWEST_READ (every release), vllm/model_executor/models/deepseek_v2.py,
    # config/speculative.py and model_executor/models/registry.py.
    "vllm-deepseek-eagle3": Change("vllm", "EAGLE-3 on DeepSeek-family targets (deepseek_v2.py SupportsEagle3; "
                                   "config/speculative.py aux_hidden_states_supported gains deepseek_v2/v3, kimi_k2/"
                                   "k25)", last_without="0.17.1", first_with="0.18.0"),
    "vllm#46973": Change("vllm", "deepseek_v2 backbone: id N (final layer output) captured", 46973, "2026-06-28",
                         last_without="0.24.0", first_with="0.25.0"),
    "vllm-deepseek-v32": Change("vllm", "DeepseekV32ForCausalLM and GlmMoeDsaForCausalLM served by vllm/models/"
                                "deepseek_v32 on CUDA (registry.py), not deepseek_v2.py", last_without="0.28.0",
                                first_with="0.29.0"),
    "vllm-eagle3-any-model-type": Change("vllm", "config/speculative.py drops aux_hidden_states_supported, the "
                                         "model_type list eagle3 targets had to match", last_without="0.21.0",
                                         first_with="0.22.0"),
    "vllm#50170": Change("vllm", "a warning when the aux layers fall back to the default ids", 50170,
                         landed=False),  # open as of 2026-07-28
    # SGLang's capture at loop index 0 (before layer 0, where the residual is still None), read per model file in the
    # release wheels 0.5.4 to SGLANG_NEWEST_READ (sglang/srt/models/*.py) and run on CPU in that one (tests/oracles/
    # test_layer_ids_sglang.py): `aux_hidden_states.append(hidden_states + residual)` raises TypeError there until
    # the file captures the residual its layer prepares (which before layer 0 is the embedding output, resid[0]).
    "sglang-llama-boundary": Change("sglang", "llama.py captures in the layer boundary (capture_output="
                                    "AuxHiddenStateList.capture): loop index 0 = resid[0]",
                                    last_without="0.5.21", first_with="0.5.22"),
    "sglang-deepseek-capture": Change("sglang", "deepseek_v2.py captures the residual each layer's prepare_attn returns "
                                      "(captured_last_layer_outputs; the layer boundary from 0.5.21): loop index 0 = "
                                      "resid[0]", last_without="0.5.13", first_with="0.5.14"),
    "sglang-glm4-lite-boundary": Change("sglang", "glm4_moe_lite.py captures in the layer boundary: loop index 0 = "
                                        "resid[0]", last_without="0.5.20", first_with="0.5.21"),
    # qwen3.py, read in the 0.5.20 wheel (Qwen3Model only passes its layer class to Qwen2Model.__init__) and the 0.5.21
    # one (Qwen3Model.forward of its own, capturing through AuxHiddenStateList at the layer boundary)
    "sglang-qwen3-forward": Change("sglang", "qwen3.py: Qwen3Model gets a forward of its own instead of running "
                                   "Qwen2Model's", last_without="0.5.20", first_with="0.5.21"),
    # SGLang release wheels 0.5.4-0.5.10 (sglang/srt/models/deepseek_v2.py, kimi_k25.py): which DeepSeek-family
    # targets have set_eagle3_layers_to_capture at all. 0.5.4's deepseek_v2.py has none (PR #12319 adds it; 0.5.5 on);
    # kimi_k25.py first ships in 0.5.9 without it and gains it with PR #19689 (0.5.10).
    # on_main_by: the build stamp of the first release wheel with it (sglang/version.py in the wheel's zip)
    "sglang#12319": Change("sglang", "deepseek_v2.py gains set_eagle3_layers_to_capture (EAGLE-3 on DeepSeek-family "
                           "targets)", 12319, last_without="0.5.4", first_with="0.5.5", on_main_by="2025-11-06"),
    "sglang-kimi-k25": Change("sglang", "kimi_k25.py: KimiK25ForConditionalGeneration (no EAGLE-3 hook yet)",
                              last_without="0.5.8", first_with="0.5.9", on_main_by="2026-02-23"),
    "sglang#19689": Change("sglang", "KimiK25ForConditionalGeneration.set_eagle3_layers_to_capture", 19689,
                           last_without="0.5.9", first_with="0.5.10", on_main_by="2026-04-05"),
    # model_executor/model_runner.py and cuda_graph_runner.py, wheels 0.5.4-0.5.11: CudaGraphRunner.__init__ calls
    # set_eagle3_layers_to_capture() with no ids (the default [2, N//2, N-3]) and captures the graphs with it; the
    # configured ids are set after init_device_graphs, so only eager forwards use them. PR #22836 (merged
    # 2026-04-15) sets the configured ids before the graphs are captured (0.5.11 on).
    "sglang#22836": Change("sglang", "CUDA graphs captured with the configured aux ids (init_aux_hidden_state_capture "
                           "before init_device_graphs)", 22836, "2026-04-15", last_without="0.5.10",
                           first_with="0.5.11"),
    # layers/aux_hidden_states.py (deepseek_v2.py packs its captures there from 0.5.17): finalize checks the count,
    # an assert in 0.5.17-0.5.19, a RuntimeError from 0.5.20 (wheels 0.5.16, 0.5.17, 0.5.19, 0.5.20, 0.5.23 read)
    "sglang-aux-count-assert": Change("sglang", "deepseek_v2.py: an assert 'captured i of n aux hidden states'",
                                      last_without="0.5.16", first_with="0.5.17", on_main_by="2026-08-08"),
    "sglang-aux-count-error": Change("sglang", "the aux count check raises RuntimeError (not an assert)",
                                     last_without="0.5.19", first_with="0.5.20", on_main_by="2026-09-18"),
    # gpt_oss.py set_eagle3_layers_to_capture and GptOssModel.forward, wheels 0.5.16 (+1, `hidden_states + residual`)
    # and 0.5.17 on (boundaries 0..N); PR number from SGLang's own comment trail (profiles.py, llama_eagle3.py).
    "sglang#32334": Change("sglang", "gpt_oss.py: ids whose largest is N are boundary indices as written, other "
                           "lists +1; boundary 0 (resid[0]) and boundary N (after the last layer) captured", 32334,
                           last_without="0.5.16", first_with="0.5.17"),
}
_PR46973 = CHANGES["vllm#46973"]

# Which model file holds a target's capture loop in SGLang (sgl-project/sglang, python/sglang/srt/models).
# Only architectures whose file was read are listed; anything else is "not read" (None), never guessed
# from its name: DeepseekV4ForCausalLM (deepseek_v4.py), KimiLinearForCausalLM (kimi_linear.py, whose
# version read has no EAGLE-3 hook) and Kimi-K3 (kimi_k3.py, a KimiLinear backbone) are not deepseek_v2.py.
_SGLANG_FILE = {  # architecture (lower case) -> (file with the capture loop, how the architecture gets there)
    "llamaforcausallm": ("llama.py", ""),
    "mistralforcausallm": ("llama.py", "mistral.py: MistralForCausalLM(LlamaForCausalLM), no code of its own"),
    "phi3forcausallm": ("llama.py", ""),
    "internlm3forcausallm": ("llama.py", ""),
    "iquestcoderforcausallm": ("llama.py", ""),
    "deepseekv2forcausallm": ("deepseek_v2.py", ""),
    "deepseekv3forcausallm": ("deepseek_v2.py", ""),  # also Kimi-K2's architecture
    "deepseekv32forcausallm": ("deepseek_v2.py", ""),
    "kimik25forconditionalgeneration": ("deepseek_v2.py", "kimi_k25.py wraps DeepseekV3ForCausalLM"),
    # sglang wheels: 0.5.12 Glm4MoeLiteForCausalLM subclasses DeepseekV2ForCausalLM (deepseek_v2.py's rule and loop);
    # 0.5.13 and SGLANG_NEWEST_READ glm4_moe_lite.py has its own class with PR #25454's first-id rule copied verbatim
    "glm4moeliteforcausallm": ("glm4_moe_lite.py", f"up to {CHANGES['sglang#25454'].last_without} a subclass of "
                                                   "deepseek_v2.py's classes; since "
                                                   f"{CHANGES['sglang#25454'].first_with} a file of its own with PR "
                                                   f"#{CHANGES['sglang#25454'].pr}'s first-id rule"),
    "qwen2forcausallm": ("qwen2.py", ""),
    "qwen3forcausallm": ("qwen2.py", f"Qwen3Model extends Qwen2Model and runs its forward up to "
                                     f"{CHANGES['sglang-qwen3-forward'].last_without}; from "
                                     f"{CHANGES['sglang-qwen3-forward'].first_with} a forward of its own, capturing "
                                     "the same way"),
    "qwen3moeforcausallm": ("qwen2_moe.py", "Qwen3MoeModel extends Qwen2MoeModel"),
    "gptossforcausallm": ("gpt_oss.py", ""),
}

# SGLang: what each model file does with an id list, one row per (file, the change from which it holds), in the
# order the changes landed; ``_Rules`` finds a build's rule (eagle3lab.engines.versions.rule_at). Every file
# read adds the offset with no check and no sort, and ModelRunner passes eagle_config's ids unchanged. Loop index 0
# is tested before layer 0 runs, where the residual is still None (PP first rank): a file captures resid[0] there
# ("bare": it appends the bare hidden states; "prepared": the residual its layer prepares, the embedding output) or
# computes `hidden_states + residual` and raises TypeError ('Tensor' + 'NoneType') at the first forward.
SGLANG_NEWEST_READ = "0.5.23"   # the newest SGLang release whose model files were read (and run on CPU, the oracle)
PLUS_ONE, FIRST_ID, LARGEST_N = "+1", "+1 if the first id is 1", "+1 unless the largest id is N"


# What a rule governs (``Rule.kind``; eagle3lab.engines.versions): CAPTURE, what a model file (the key) does with an
# id list (a ``Capture``); HOOK, whether a target architecture (lower case) has set_eagle3_layers_to_capture at all
# ("yes", "missing": ModelRunner's call raises AttributeError at start-up, "no class": the architecture is not
# served); COUNT, what a file does when fewer aux states are captured than configured (layers/aux_hidden_states.py:
# "none", "assert", "RuntimeError"); FILE, which file serves a target architecture (vLLM).
CAPTURE, HOOK, COUNT, FILE = "capture", "hook", "count-check", "file"


@dataclass(frozen=True)
class Capture:
    """A CAPTURE rule's value: the ``offset`` added to every id (PLUS_ONE, FIRST_ID, LARGEST_N, AS_WRITTEN), what loop
    index 0 captures (``index0``: "bare", "prepared", "TypeError", "platform" or "unknown"), whether loop index N
    (after the last layer) is captured (``final``), what a loop index past the layers does (``past_end``: "missing",
    or "IndexError" at start-up), and whether the engine serves an EAGLE-3 draft on such a target at all."""

    offset: str
    index0: str
    final: bool
    past_end: str = "missing"
    eagle3: bool = True


def _rows(file, *rows, past_end="missing"):
    return tuple(Rule("sglang", CAPTURE, file, since and CHANGES[since], Capture(offset, index0, final, past_end),
                      note) for since, offset, index0, final, note in rows)


_PR25454 = CHANGES["sglang#25454"]
_RULE_PLUS_ONE = ("SGLang (python/sglang/srt/models/llama.py, qwen3.py, qwen3_moe.py, deepseek_v2.py before PR "
                  "#25454, and qwen2.py's hook from PR #9216: set_eagle3_layers_to_capture adds 1 in every version "
                  "read): config id k is stored as loop index k+1 and captured before layer k+1 runs, so id k = "
                  "resid[k+1] (the output of layer k).")
_RULE_DEEPSEEK_OLD = ("SGLang DeepSeek-family (python/sglang/srt/models/deepseek_v2.py, before PR "
                      f"#{_PR25454.pr} merged {_PR25454.merged}): config id k = resid[k+1], as in llama.py.")
_RULE_DEEPSEEK_NEW = ("SGLang DeepSeek-family (python/sglang/srt/models/deepseek_v2.py, since PR #25454 "
                      f"merged {_PR25454.merged}; read in releases {_PR25454.first_with} and {{newest}}): +1 only when "
                      "the FIRST id is 1 (id k = resid[k+1]); otherwise ids are loop indices used as-is (id k = resid[k]).")
_RULE_GLM4 = ("SGLang Glm4MoeLiteForCausalLM (python/sglang/srt/models/glm4_moe_lite.py): the same "
              f"set_eagle3_layers_to_capture as deepseek_v2.py in the releases read ({_PR25454.last_without}: a "
              f"subclass, +1 always; {_PR25454.first_with} and {{newest}}: PR #25454's first-id rule, copied), so "
              "builds are placed by PR #25454. deepseek_v2.py's rule: ")
_RULE_GPT_OSS = ("SGLang GptOssForCausalLM (python/sglang/srt/models/gpt_oss.py, since PR #{pr}, release "
                 "{since}; read up to {newest}): ids whose largest is N are boundary indices as written (id k = "
                 "resid[k], N = the last layer's output, captured at the final norm); any other list gets the "
                 "+1 (id k = resid[k+1], so id N-1 = resid[N]).")
_KIMI_K25 = "kimik25forconditionalgeneration"
_HOOK_WORDS = {
    "missing": ("{arch} has no set_eagle3_layers_to_capture in this build: ModelRunner calls it for every EAGLE3 "
                "launch, so start-up fails with AttributeError (nothing is served)"),
    "no class": ("this build has no {arch} class (kimi_k25.py first ships in " + CHANGES["sglang-kimi-k25"].first_with
                 + "): the target does not load"),
}
_SGLANG_RULES = (
    # `aux_hidden_states.append(hidden_states + residual)`, unguarded, up to 0.5.21; the layer boundary from 0.5.22
    *_rows("llama.py", (None, PLUS_ONE, "TypeError", False, _RULE_PLUS_ONE),
           ("sglang-llama-boundary", PLUS_ONE, "prepared", False, _RULE_PLUS_ONE)),
    # unguarded, in both branches of PR #14280's EP change, up to 0.5.13; the prepared residual from 0.5.14
    *_rows("deepseek_v2.py", (None, PLUS_ONE, "TypeError", False, _RULE_DEEPSEEK_OLD),
           ("sglang#25454", FIRST_ID, "TypeError", False, _RULE_DEEPSEEK_NEW),
           ("sglang-deepseek-capture", FIRST_ID, "prepared", False, _RULE_DEEPSEEK_NEW)),
    # 0.5.12 runs deepseek_v2.py's loop; 0.5.13-0.5.20 `aux_hidden_states.append(hidden_states + residual)`
    *_rows("glm4_moe_lite.py", (None, PLUS_ONE, "TypeError", False, _RULE_GLM4 + _RULE_DEEPSEEK_OLD),
           ("sglang#25454", FIRST_ID, "TypeError", False, _RULE_GLM4 + _RULE_DEEPSEEK_NEW),
           ("sglang-glm4-lite-boundary", FIRST_ID, "prepared", False, _RULE_GLM4 + _RULE_DEEPSEEK_NEW)),
    *_rows("gpt_oss.py", (None, PLUS_ONE, "TypeError", False,
                          _RULE_PLUS_ONE + " (gpt_oss.py up to release {until}, before PR #32334.)"),
           ("sglang#32334", LARGEST_N, "prepared", True, _RULE_GPT_OSS)),
    # `hidden_states + residual if residual is not None else hidden_states`; the layer boundary from 0.5.22
    *_rows("qwen2.py", (None, PLUS_ONE, "bare", False, _RULE_PLUS_ONE)),
    # Qwen2MoeModel.set_eagle3_layers_to_capture marks self.layers[k+1]: an id past the layers is an IndexError
    *_rows("qwen2_moe.py", (None, PLUS_ONE, "bare", False, _RULE_PLUS_ONE), past_end="IndexError"),
    # a target whose file was not read: the +1 rule of every file read (notes say it is not confirmed)
    *_rows(None, (None, PLUS_ONE, "unknown", False, _RULE_PLUS_ONE)),
    # SGLang release wheels 0.5.4-0.5.10: which DeepSeek-family targets have set_eagle3_layers_to_capture at all
    *(Rule("sglang", HOOK, arch, since, hook, _HOOK_WORDS.get(hook, "")) for arch in (
        "deepseekv2forcausallm", "deepseekv3forcausallm", "deepseekv32forcausallm")
      for since, hook in ((None, "missing"), (CHANGES["sglang#12319"], "yes"))),
    Rule("sglang", HOOK, _KIMI_K25, None, "no class", _HOOK_WORDS["no class"]),
    Rule("sglang", HOOK, _KIMI_K25, CHANGES["sglang-kimi-k25"], "missing", _HOOK_WORDS["missing"]),
    Rule("sglang", HOOK, _KIMI_K25, CHANGES["sglang#19689"], "yes"),
    # layers/aux_hidden_states.py (deepseek_v2.py packs its captures there from 0.5.17): finalize checks the count
    Rule("sglang", COUNT, "deepseek_v2.py", None, "none", "no check counts them (release wheels up to {until}): the "
         "target returns fewer states than fc reads and nothing names the ids; the draft's fc (Linear(3 * H_target, "
         "H), llama_eagle3.py) then gets a narrower input and raises RuntimeError at the draft's first forward (read, "
         "not run)"),
    Rule("sglang", COUNT, "deepseek_v2.py", CHANGES["sglang-aux-count-assert"], "assert", "deepseek_v2.py packs them "
         "in layers/aux_hidden_states.py, whose finalize asserts 'captured i of n aux hidden states': AssertionError "
         "at the first forward ({since}-{until}; skipped under python -O)"),
    Rule("sglang", COUNT, "deepseek_v2.py", CHANGES["sglang-aux-count-error"], "RuntimeError", "deepseek_v2.py packs "
         "them in layers/aux_hidden_states.py, whose finalize raises RuntimeError 'captured i of n aux hidden "
         "states' at the first forward ({since} on)"),
)


# Changes every file's rows are placed after (a build before PR #25454, 0.5.13, lacks each file's later change).
_SGLANG_LANDED_AFTER = {"llama.py": (_PR25454,), "gpt_oss.py": (_PR25454,)}
# The oldest SGLang release whose model files were read here: ids written for the newest code are checked
# against it (save_draft warns when that build reads them otherwise).
SGLANG_OLDEST_READ = "0.5.4"

# The versions of each file read (said in the notes about loop index 0); each release boundary is its row's.
_LLAMA, _DEEPSEEK = CHANGES["sglang-llama-boundary"], CHANGES["sglang-deepseek-capture"]
_GLM4_LITE, _GPT_OSS = CHANGES["sglang-glm4-lite-boundary"], CHANGES["sglang#32334"]
_SGLANG_READ = {
    "llama.py": (f"00239548f1cd and bf7a0e237e8d (2025 main), the release wheels {SGLANG_OLDEST_READ}-" + _LLAMA.last_without
                 + ", and " + _LLAMA.first_with + "-{newest} (layer boundary; {newest} run on CPU)"),
    "deepseek_v2.py": ("up to Dec 2025: 3e4a39ee7330 (with PR #12319's hook) and PR #14280's diff; the "
                       f"release wheels {_PR25454.last_without} (before PR #25454) and {_PR25454.first_with} (since "
                       f"it); {_DEEPSEEK.first_with}-{{newest}} capture the prepared residual"),
    "glm4_moe_lite.py": (f"release wheels {_PR25454.first_with}-{_GLM4_LITE.last_without} ({_PR25454.last_without} "
                         "runs deepseek_v2.py's loop) and "
                         + _GLM4_LITE.first_with + "-{newest} (layer boundary)"),
    "gpt_oss.py": (f"release wheels {SGLANG_OLDEST_READ}-" + _GPT_OSS.last_without + ", and " + _GPT_OSS.first_with
                   + "-{newest} (boundary 0 guarded, then the layer boundary)"),
    "qwen2.py": ("the hook came with PR #9216 (Aug 2025, modelled on Qwen3's PR #7745); its capture line "
                 "was read in the fork copy Fridge003/sglang@40cef40f2757, qwen3.py at 28aa91cd0565, the "
                 f"release wheels {SGLANG_OLDEST_READ}-{{newest}} ({{newest}} run on CPU)"),
    "qwen2_moe.py": ("0115497da8f2 (qwen2_moe.py), e3d8e9aec2c7 (qwen3_moe.py), the release wheels 0.5.12-"
                     "{newest} ({newest} run on CPU)"),
}

_INDEX0_READ = (f"llama.py (up to {_LLAMA.last_without}), deepseek_v2.py (up to {_DEEPSEEK.last_without}), "
                f"glm4_moe_lite.py ({_PR25454.first_with}-{_GLM4_LITE.last_without}) and gpt_oss.py (up to {_GPT_OSS.last_without}) "
                "raise TypeError there, later releases of each capture resid[0]; qwen2.py "
                "(Qwen2, Qwen3) and qwen2_moe.py (Qwen3-MoE) append the bare hidden states, i.e. resid[0]")


# How a note asks for the target architecture or the build, in every caller's words.
_PASS_ARCH = ("pass the target architecture (--arch in `eagle3lab ids`, --target-arch in `eagle3lab flags`, "
              "arch= in Python)")
_PASS_VERSION = "pass --engine-version, or engine_version= in Python, to choose"

_RULES = {  # the rules that are not release rules (the others are notes of RULES)
    "sglang-default": ("SGLang (set_eagle3_layers_to_capture with layer_ids None, every version read): loop "
                       "indices [2, N//2, N-3] with no +1, i.e. resid[2], resid[N//2], resid[N-3]. Ids are read "
                       "only from config.json -> eagle_config -> eagle_aux_hidden_state_layer_ids."),
    "vllm": ("vLLM (model_executor/models, EagleModelMixin._maybe_add_hidden_state via "
             "set_aux_hidden_state_layers, since PR #36063; older model files captured layer inputs, the same "
             "points for k < N): id k = resid[k]; 0 = embedding output, N = last layer output before the final norm."),
    "vllm-default": ("vLLM (get_eagle3_aux_hidden_state_layers when the draft config has no ids vLLM reads): "
                     "(2, N//2, N-3) = resid[2], resid[N//2], resid[N-3]."),
    "speculators": ("speculators (eagle_aux_hidden_state_layer_ids, vLLM convention; served by vLLM): id k = "
                    "resid[k]; its data generation also appends id N (verifier_last_hidden_states) for the "
                    "training target."),
    "speculators-default": ("speculators served by vLLM without eagle_aux_hidden_state_layer_ids: vLLM's "
                            "default (2, N//2, N-3) = resid[2], resid[N//2], resid[N-3]."),
    "specforge": ("SpecForge (specforge/algorithms/model_providers.py; captures through SGLang's "
                  "set_eagle3_layers_to_capture, so SGLang's rule for this target applies): id k = resid[k+1]. "
                  "Its old HF backend took hidden_states[k+1], the same point for k+1 < N."),
    "specforge-default": ("SpecForge default ids [1, N//2-1, N-4] (config id convention of SGLang) = "
                          "resid[2], resid[N//2], resid[N-3]."),
    "eagle": ("SafeAILab/EAGLE (eagle/model/modeling_llama_kv.py): hard-coded, no ids read; captures the "
              "input of layers 2, N//2 and N-3 = resid[2], resid[N//2], resid[N-3]."),
    "transformerlens": ("TransformerLens: blocks.k.hook_resid_pre = resid[k]; blocks.k.hook_resid_post = "
                        "resid[k+1]; an integer k is read as blocks.k.hook_resid_pre."),
}


# vLLM: the DeepSeek-family capture loops (every other file is EagleModelMixin's, id k = resid[k]), as rules of the
# same shape: which file serves an architecture from which change (FILE), and what each file does (CAPTURE; offset
# "as written", index0 "TypeError" or "platform": CUDA's nvidia/model.py captures resid[0], ROCm's amd/model.py and
# other platforms raise TypeError).
AS_WRITTEN = "as written"
# vLLM's DeepSeek-family targets (registry.py, read in the wheels 0.18.0-0.32.0): the architectures whose class is, or
# subclasses, deepseek_v2.py's DeepseekV2ForCausalLM and so runs its loop, not EagleModelMixin's. DeepseekForCausalLM
# and GlmMoeDsaForCausalLM are classes of deepseek_v2.py; mistral_large_3.py's MistralLarge3ForCausalLM subclasses
# its DeepseekV3ForCausalLM; kimi_k25.py wraps DeepseekV3ForCausalLM.
_VLLM_DEEPSEEK_ARCHS = frozenset({"deepseekforcausallm", "deepseekv2forcausallm", "deepseekv3forcausallm",
                                  "deepseekv32forcausallm", "kimik25forconditionalgeneration",
                                  "mistrallarge3forcausallm", "glmmoedsaforcausallm"})
# vLLM 0.18.0-0.21.0 config/speculative.py serves eagle3 only for a target whose model_type CONTAINS one of
# aux_hidden_states_supported (llama, qwen, ..., deepseek_v2, deepseek_v3, kimi_k2, kimi_k25): these architectures'
# model_type matches none and the launch raises ValueError; 0.22.0 drops the list (SupportsEagle3 decides).
VLLM_EAGLE3_MODEL_TYPES = {"deepseekforcausallm": "deepseek", "glmmoedsaforcausallm": "glm_moe_dsa"}
_VLLM_EAGLE3, _VLLM_V32 = CHANGES["vllm-deepseek-eagle3"], CHANGES["vllm-deepseek-v32"]
_VLLM_ANY_TYPE = CHANGES["vllm-eagle3-any-model-type"]
_RULE_VLLM_DEEPSEEK = ("vLLM DeepSeek-family (model_executor/models/deepseek_v2.py DeepseekV2Model.forward, its own "
                       f"loop, not EagleModelMixin; every release read, {_VLLM_EAGLE3.first_with}-{{newest}}): appends "
                       "`hidden_states + residual` before layer k runs, so id k = resid[k] for k < N, and id N after "
                       f"the last layer since PR #{_PR46973.pr} (release {_PR46973.first_with}); id 0 meets residual "
                       "None there (TypeError).")
_RULE_VLLM_V32 = (f"vLLM DeepseekV32ForCausalLM and GlmMoeDsaForCausalLM on CUDA since release {_VLLM_V32.first_with} "
                  "(registry.py -> vllm/models/deepseek_v32; CUDA: nvidia/model.py, ROCm: amd/model.py, CPU and "
                  "XPU: deepseek_v2.py, whose rule then applies; read up to {newest}): captures before layer k runs, "
                  "so id k = resid[k] for k < N; id N is never captured; id 0 depends on the platform.")


def _vllm(file, since, index0, final, note, eagle3=True):
    return Rule("vllm", CAPTURE, file, since, Capture(AS_WRITTEN, index0, final, eagle3=eagle3), note)


_VLLM_RULES = (
    _vllm("deepseek_v2.py", None, "TypeError", False, _RULE_VLLM_DEEPSEEK, eagle3=False),
    _vllm("deepseek_v2.py", _VLLM_EAGLE3, "TypeError", False, _RULE_VLLM_DEEPSEEK),
    _vllm("deepseek_v2.py", _PR46973, "TypeError", True, _RULE_VLLM_DEEPSEEK),
    _vllm("deepseek_v32", None, "platform", False, _RULE_VLLM_V32, eagle3=False),
    _vllm("deepseek_v32", _VLLM_EAGLE3, "platform", False, _RULE_VLLM_V32),
    # DeepseekV32ForCausalLM and GlmMoeDsaForCausalLM (the same DSA model, registry.py) come from vllm/models/
    # deepseek_v32 from 0.29.0, whose __init__.py picks nvidia/model.py on CUDA (amd/model.py on ROCm from 0.30.0;
    # deepseek_v2.py there in 0.29.0) and deepseek_v2.py's classes on CPU and XPU: the CPU build runs deepseek_v2.py's
    # loop in every release.
    *(rule for arch in ("deepseekv32forcausallm", "glmmoedsaforcausallm") for rule in (
        Rule("vllm", FILE, arch, None, "deepseek_v2.py"),
        Rule("vllm", FILE, arch, _VLLM_V32, "deepseek_v32", platform="cuda"))),
)
# Every release rule of the translator, one shape (eagle3lab.engines.versions.Rule), found by one lookup (_Rules).
RULES = (*_SGLANG_RULES, *_VLLM_RULES)


@dataclass(frozen=True)
class AuxDetail:
    """What a layer-id note (a ``Finding`` whose ``detail`` this is) says about a resolution.

    kind: defaulted (the engine uses its default or fixed points instead of ids from the config), breaks (the
    engine crashes or a state is missing), version (the build cannot be placed relative to ``change``: it
    behaves as the newest code), note (anything else worth knowing). ``confirmed`` is False when what the note
    is about was not read in the engine's source for this target (its model file, or the architecture itself is
    unknown): the points shown are an assumption.
    """

    kind: str
    change: Change | None = None  # kind "version": the change the build cannot be placed by
    confirmed: bool = True


_KIND_SEVERITY = {"breaks": Severity.ERROR, "defaulted": Severity.WARNING, "version": Severity.WARNING,
                  "note": Severity.INFO}


def aux_note(kind: str, text: str, change: Change | None = None, confirmed: bool = True, code: str = "") -> Finding:
    """A note on a resolution: ``code`` a key of NOTE_CODES (callers match it, never the text), severity by kind."""
    return Finding(code, _KIND_SEVERITY[kind], text, detail=AuxDetail(kind, change, confirmed))


# The stable codes of the notes (callers and notebooks match these, never the text; docs/cli/ids.md lists them).
NOTE_CODES = {
    "ENGINE_VERSION_UNPLACED": "the build cannot be placed relative to a change: the newest behaviour is shown",
    "AUX_IDS_OUT_OF_RANGE": "ids past the last layer: never reached, those states are missing",
    "AUX_IDS_REPEATED": "a point asked for more than once is captured once",
    "AUX_IDS_REORDERED": "ids not ascending: fc gets the states in ascending layer order",
    "AUX_IDS_WIDTH_CHANGED": "fewer states come back than asked for: fc's input width no longer matches",
    "AUX_IDS_NUM_LAYERS_NEEDED": "num_layers not given: range and final-layer checks skipped",
    "EAGLE_IDS_IGNORED": "SafeAILab/EAGLE ignores written ids",
    "SGLANG_AUX_IDS_DEFAULTED": "no ids where SGLang reads them: its default, silently",
    "SPECFORGE_AUX_IDS_DEFAULTED": "no ids: SpecForge's default ids",
    "SGLANG_AUX_IDS_VERSION_DEPENDENT": "what the ids capture depends on the build (PR #25454's first-id rule)",
    "SGLANG_AUX_IDS_ARCH_NEEDED": "the target architecture decides what the ids capture (not given)",
    "SGLANG_AUX_IDS_NUM_LAYERS_NEEDED": "gpt_oss.py's rule needs N (not given)",
    "SGLANG_FILE_NOT_READ": "the target's SGLang model file was not read: the +1 rule assumed",
    "SGLANG_NO_EAGLE3_HOOK": "this SGLang build cannot start EAGLE-3 on the target (no hook, or no class)",
    "SGLANG_ID_MINUS1_RESID0": "id -1 (loop index 0) captures resid[0] in this file and build",
    "SGLANG_ID_MINUS1_TYPEERROR": "id -1 (loop index 0) raises TypeError in this file and build",
    "SGLANG_ID_MINUS1_UNCONFIRMED": "what id -1 does depends on a model file not read (or no arch given)",
    "SGLANG_ID_MINUS1_UNREACHED": "ids used as written: loop index -1 is never reached; the draft's fc fails on the "
                                  "narrower input",
    "SGLANG_ID_MINUS1_STOPPED": "ids used as written: -1 never reached, and the aux count check stops the first forward",
    "SGLANG_INDEX0_TYPEERROR": "loop index 0 as written raises TypeError in this file and build",
    "SGLANG_PAST_END_INDEXERROR": "qwen2_moe.py: an id past the layers raises IndexError at start-up",
    "SGLANG_FINAL_UNREACHED": "loop index N is never reached: resid[N] is missing and the draft's fc fails",
    "SPECFORGE_HF_FINAL_NORM": "SpecForge's old HF backend trained on norm(resid[N]) for id N-1",
    "SPECFORGE_IDS_REJECTED": "SpecForge takes exactly three non-negative ids: training refuses these (-1 included)",
    "VLLM_AUX_IDS_DEFAULTED": "no ids where vLLM reads them: its default (2, N//2, N-3)",
    "VLLM_AUX_IDS_NESTED_IGNORED": "ids at a key this build's model runner does not read: its default",
    "VLLM_AUX_IDS_NESTED_READ": "nested (SGLang-numbered) ids read as vLLM ids: one point lower",
    "VLLM_MODEL_RUNNER": "which model runner this build runs and where it reads ids",
    "VLLM_DEEPSEEK_NO_EAGLE3": f"vLLM before {_VLLM_EAGLE3.first_with} serves no EAGLE-3 draft on a DeepSeek-family target",
    "VLLM_DEEPSEEK_ID0_TYPEERROR": "deepseek_v2.py: id 0 raises TypeError",
    "VLLM_DEEPSEEK_FINAL_UNREACHED": "deepseek_v2.py before PR #46973: id N is never captured; the draft's fc fails",
    "VLLM_DEEPSEEK_V32_ID0_PLATFORM": "deepseek_v32: what id 0 does depends on the platform",
    "VLLM_DEEPSEEK_V32_FINAL_UNREACHED": "deepseek_v32: id N is never captured; the draft's fc fails",
    "VLLM_ID0_ARCH_NEEDED": "id 0 crashes vLLM if the target is DeepSeek-family (arch not given)",
}


# The notes after which nothing is served, and when the engine stops: callers say "crashes" from these codes.
# A state short of the configured count: the concatenation is narrower than the draft's fc (Linear(k * H_target, H)),
# which vLLM's llama_eagle3.py always applies and SGLang's llama_eagle3.py / kimi_k25_eagle3.py apply whenever the input
# is wider than the embedding, so the draft raises RuntimeError (shapes cannot be multiplied) at its first forward
# (read in the vLLM 0.32.0 and SGLang 0.5.23 wheels and in an older SGLang main, not run). Only one state left of a
# target as wide as the draft would skip SGLang's fc; no id list in the field loses two.
AT_DRAFT_FC = "at the draft's first forward (its fc gets a narrower input than it reads)"
STOPS = {"SGLANG_NO_EAGLE3_HOOK": "at start-up", "SGLANG_PAST_END_INDEXERROR": "at start-up",
         "VLLM_DEEPSEEK_NO_EAGLE3": "at start-up", "SPECFORGE_IDS_REJECTED": "before training",
         "SGLANG_ID_MINUS1_TYPEERROR": "at the first forward", "SGLANG_INDEX0_TYPEERROR": "at the first forward",
         "SGLANG_ID_MINUS1_STOPPED": "at the first forward", "VLLM_DEEPSEEK_ID0_TYPEERROR": "at the first forward",
         **dict.fromkeys(("SGLANG_ID_MINUS1_UNREACHED", "SGLANG_FINAL_UNREACHED", "VLLM_DEEPSEEK_FINAL_UNREACHED",
                          "VLLM_DEEPSEEK_V32_FINAL_UNREACHED"), AT_DRAFT_FC)}


@dataclass(frozen=True)
class AuxResolution:
    """Which ``resid`` points an engine feeds the draft's fc for the ids as written."""

    engine: str
    ids_as_written: tuple | None
    resid: tuple[int, ...]  # in the order the engine concatenates them into fc
    rule: str
    notes: tuple[Finding, ...] = ()
    defaulted: bool = False
    num_layers: int | None = None
    arch: str | None = None
    engine_version: str | None = None
    engine_platform: str | None = None   # vLLM: "cuda" or "cpu" as given (None: a CUDA build assumed)
    runner: str | None = None            # vLLM: the model runner whose reading was used ("V1", "V2"), when it mattered

    @property
    def warnings(self) -> tuple[str, ...]:
        """Every note as text, in the order found."""
        return tuple(n.text for n in self.notes)

    @property
    def codes(self) -> tuple[str, ...]:
        """Every note's code (NOTE_CODES), in the order found: what callers match instead of the text."""
        return tuple(n.code for n in self.notes)

    @property
    def fatal(self) -> tuple[str, ...]:
        """The notes that break the engine (a crash or a missing state), as text."""
        return tuple(n.text for n in self.notes if n.kind == "breaks")

    @property
    def fatal_codes(self) -> tuple[str, ...]:
        """The codes (NOTE_CODES) of the notes that break the engine, in the order found."""
        return tuple(n.code for n in self.notes if n.kind == "breaks")

    @property
    def stops(self) -> str | None:
        """When the engine stops for these ids (a value of STOPS: nothing is served), None when it runs."""
        return next((STOPS[c] for c in self.fatal_codes if c in STOPS), None)

    @property
    def unconfirmed(self) -> tuple[str, ...]:
        """The notes whose subject was not read in the engine's source for this target, as text."""
        return tuple(n.text for n in self.notes if not n.confirmed)

    @property
    def label(self) -> str:
        return resid_label(self.resid)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["notes"] = [{"kind": n.kind, "code": n.code, "text": n.text} for n in self.notes]  # the change is in the text
        out["ids_as_written"] = list(self.ids_as_written) if self.ids_as_written is not None else None
        out["resid"] = list(self.resid)
        out["warnings"] = list(self.warnings)
        out["fatal"] = list(self.fatal)
        out["unconfirmed"] = list(self.unconfirmed)
        out["confirmed"] = not self.unconfirmed
        out["label"] = self.label
        return out


def resid_name(k: int, num_layers: int | None = None) -> str:
    """``resid[k]`` with a reminder of what the ends are."""
    if k == 0:
        return "resid[0] (embedding)"
    if num_layers is not None and k == num_layers:
        return f"resid[{k}] (final, pre-norm)"
    return f"resid[{k}]"


def resid_label(points, num_layers: int | None = None) -> str:
    """``[resid[0] (embedding), resid[3], ...]``: a list of points as the fc input reads them."""
    return "[" + ", ".join(resid_name(k, num_layers) for k in points) + "]"


def default_resid(num_layers: int) -> tuple[int, ...]:
    """The points every engine's default lands on: resid[2], resid[N//2], resid[N-3] (deduplicated)."""
    return tuple(sorted({2, num_layers // 2, num_layers - 3}))


def sglang_model_file(arch: str | None) -> str | None:
    """SGLang's model file with the capture loop for ``arch`` (``config.json`` architectures[0]), or None
    where no file was read for it. Exact names only: a name that sounds DeepSeek- or Kimi-like is not enough."""
    return _SGLANG_FILE.get((arch or "").strip().lower(), (None,))[0]


def is_deepseek_family(arch: str | None) -> bool:
    """Served by deepseek_v2.py in SGLang and vLLM: DeepseekV2/V3/V32ForCausalLM (Kimi-K2 is V3) and
    KimiK25ForConditionalGeneration, which wraps it in both engines (vLLM from 0.29.0 serves V32 from a file of
    its own). DeepSeek-V4, Kimi-Linear and Kimi-K3 have files of their own: False."""
    return sglang_model_file(arch) == "deepseek_v2.py"


def sglang_first_id_rule(arch: str | None) -> bool:
    """SGLang reads this target's ids with PR #25454's first-id rule (deepseek_v2.py, and glm4_moe_lite.py,
    which carries the same code since it became a file of its own in 0.5.13)."""
    file = sglang_model_file(arch)
    return any(r.value.offset == FIRST_ID for r in RULES if (r.engine, r.kind, r.key) == ("sglang", CAPTURE, file))



# ----------------------------------------------------------------------------- id parsing

_TL_HOOK = re.compile(r"^blocks\.(\d+)\.hook_resid_(pre|post|mid)$")


def _as_int(where: str, x) -> int:
    if isinstance(x, bool):
        raise bad_input(where, None, "integer layer ids", repr(x))
    try:
        return operator.index(x)
    except TypeError:
        if isinstance(x, str) and re.fullmatch(r"-?\d+", x.strip()):
            return int(x)
        raise bad_input(where, None, "integer layer ids", repr(x)) from None


def _tl_point(x) -> int:
    """A TransformerLens hook name (or integer) -> its resid index."""
    if isinstance(x, str) and not re.fullmatch(r"-?\d+", x.strip()):
        m = _TL_HOOK.match(x.strip())
        if not m or m.group(2) == "mid":
            raise bad_input("transformerlens", None,
                            "'blocks.K.hook_resid_pre', 'blocks.K.hook_resid_post' or an integer K",
                            repr(x), "hook_resid_mid is inside a block (after attention), not a residual-stream "
                            "point any engine feeds the draft.")
        return int(m.group(1)) + (1 if m.group(2) == "post" else 0)
    return _as_int("transformerlens", x)


def _check_engine(engine: str) -> str:
    name = str(engine).strip().lower()
    if name not in ID_CONVENTIONS:
        raise bad_input("engine", None, f"one of {', '.join(ID_CONVENTIONS)}", repr(engine))
    return name


def _check_num_layers(num_layers) -> int | None:
    if num_layers is None:
        return None
    n = _as_int("num_layers", num_layers)
    if n < 1:
        raise bad_input("num_layers", None, "the number of target decoder layers (>= 1)", n)
    return n


# ----------------------------------------------------------------------------- the translator

class _Notes:
    """Notes collected while resolving, each with its kind, and the build's placement per change."""

    def __init__(self, engine_version):
        self.engine_version = engine_version
        self.items: list[Finding] = []

    def add(self, text: str, kind: str = "note", change: Change | None = None, confirmed: bool = True,
            code: str = "") -> None:
        self.items.append(aux_note(kind, text, change, confirmed, code))

    def add_once(self, text: str, kind: str = "note", change: Change | None = None, code: str = "") -> None:
        if all(n.text != text for n in self.items):
            self.add(text, kind, change, code=code)

    def after(self, key: str) -> bool:
        """Does this build have ``CHANGES[key]``? An unplaceable build is the newest code, with a note."""
        where = place(CHANGES[key], self.engine_version)
        if where.warning:
            self.add_once(where.warning, "version", CHANGES[key], code="ENGINE_VERSION_UNPLACED")
        return where.after

    @property
    def breaks(self) -> bool:
        return any(n.kind == "breaks" for n in self.items)


def _eagle_points(written, n, notes):
    if written is not None:
        notes.add(f"SafeAILab/EAGLE ignores layer ids: {list(written)} has no effect; it always captures "
                  f"resid[2], resid[N//2], resid[N-3] = {list(default_resid(n))}.", "defaulted", code="EAGLE_IDS_IGNORED")
    return _RULES["eagle"], [2, n // 2, n - 3]


def _transformerlens_points(written, n, notes):
    if written is None:
        return _RULES["transformerlens"] + " (no EAGLE-3 default; shown: resid[2, N//2, N-3].)", [2, n // 2, n - 3]
    points = [_tl_point(x) for x in written]
    for p in points:
        if p < 0:
            raise bad_input("transformerlens", None, "hook indices >= 0", p,
                            "There are no negative block indices; resid[0] is blocks.0.hook_resid_pre.")
    return _RULES["transformerlens"], points


# What vLLM logs on falling back to its default ids follows the model runner (eagle3lab.engines.vllm_runner: the V2
# runner logs INFO 'Using Eagle3 auxiliary layers from model: ...', V1 nothing). PR #50170 (open) turns the V2 line
# into a warning_once; its text is in the copy of eagle3_utils.py at vllm-project/vllm 0cfdd2e15d69, in no release read.


def vllm_deepseek_family(arch: str | None) -> bool:
    """vLLM serves ``arch`` with deepseek_v2.py's classes (or, for DSA targets on CUDA from 0.29.0, deepseek_v32's)."""
    return (arch or "").strip().lower() in _VLLM_DEEPSEEK_ARCHS


def _vllm_deepseek_file(arch, notes, platform=None) -> str | None:
    """vLLM's file with the capture loop for a DeepSeek-family ``arch`` on ``platform`` (None: a CUDA build, as
    vllm_runner assumes): 'deepseek_v2.py', 'deepseek_v32' (DSA targets on CUDA since 0.29.0) or None."""
    if not vllm_deepseek_family(arch):
        return None
    key, where = arch.strip().lower(), platform or "cuda"
    if not _has("vllm", FILE, key):
        return "deepseek_v2.py"
    return _Rules(notes, "vllm", FILE, key, [r for r in RULES if r.platform in (None, where)]).get("value")


def _vllm_default_note(n, runner, notes) -> None:
    """The note for a draft config with no ids vLLM reads: its default, and what this build's runner logs about it."""
    warns = notes.after("vllm#50170")
    if runner is None:
        log = ("the V2 model runner (eagle3_utils.py) logs it only as INFO 'Using Eagle3 auxiliary layers from "
               "model: (...)', the V1 runner (gpu_model_runner.py) says nothing")
    else:
        log = (f"the {runner.runner} model runner of a {runner.label.replace(', ' + runner.runner + ' model runner', '')}"
               + (f" ({runner.assumptions} assumed)" if runner.assumptions else "")
               + f" ({runner.reads.where.split()[0]}) "
               + (f"logs it only as {runner.reads.default_log}" if runner.reads.default_log else "says nothing"))
    notes.add("Default ids used: the draft config has no ids vLLM reads, so vLLM falls back to (2, N//2, N-3) = "
              f"{list(default_resid(n))}"
              + (" and warns once (PR #50170)." if warns else
                 f"; {log}, and no release read ({RELEASES_READ[0]}-{VLLM_NEWEST_READ}) warns (PR #50170 adds a warning; open as of "
                 "2026-07-28).")
              + " If the draft was trained on other states, acceptance collapses while output stays correct.",
              "defaulted", code="VLLM_AUX_IDS_DEFAULTED")


def _vllm_points(engine, written, n, arch, notes, runner=None, platform=None):
    """vLLM and speculators (served by vLLM): id k = resid[k], with DeepSeek-family exceptions. ``runner``: the
    ``vllm_runner`` choice whose fallback log the default note names (None: both runners' are named)."""
    deepseek = _vllm_deepseek_file(arch, notes, platform)
    rows = _Rules(notes, "vllm", CAPTURE, deepseek) if deepseek else None
    model_type = VLLM_EAGLE3_MODEL_TYPES.get((arch or "").strip().lower())
    if rows and not rows.get("eagle3"):
        notes.add(rows.say("vLLM before {later} serves no EAGLE-3 draft on {arch}: config/speculative.py raises "
                           "ValueError ('eagle3 is only supported for [...] models'; DeepSeek model types join the list "
                           "in {later}) and deepseek_v2.py has no capture hook.", arch=arch), "breaks",
                  code="VLLM_DEEPSEEK_NO_EAGLE3")
    elif model_type and not notes.after("vllm-eagle3-any-model-type"):
        notes.add(f"vLLM {_VLLM_EAGLE3.first_with}-{_VLLM_ANY_TYPE.last_without} serves no EAGLE-3 draft on {arch}: "
                  "config/speculative.py raises ValueError ('eagle3 is only supported for [...] models') because its "
                  f"model_type {model_type!r} contains none of aux_hidden_states_supported ({_VLLM_ANY_TYPE.first_with} "
                  "drops the list).", "breaks", code="VLLM_DEEPSEEK_NO_EAGLE3")
    if written is None:
        _vllm_default_note(n, runner, notes)
        return _RULES[f"{engine}-default"], [2, n // 2, n - 3]
    points = [_as_int(engine, x) for x in written]
    for p in points:
        if p < 0:
            raise bad_input(engine, "eagle_aux_hidden_state_layer_ids", "ids in 0..N (vLLM convention)", p,
                            "vLLM tests `idx in layers` while walking the layers, so a negative id is never matched "
                            "and that state is silently missing. Use 0 for the embedding output (resid[0]).")
    rule = _RULES[engine]
    if rows:
        rows.get("note")
        rule = rows.say() + (" Served by vLLM: " + _RULES["speculators"] if engine == "speculators" else "")
    if rows and rows.get("index0") == "TypeError":
        if 0 in points:
            notes.add(f"Id 0 (resid[0], the embedding output) crashes vLLM on {arch}: deepseek_v2.py's "
                      "DeepseekV2Model.forward appends `hidden_states + residual` before layer 0, where the residual "
                      "is still None, and raises TypeError ('Tensor' + 'NoneType') at the target's first forward "
                      f"(every release read, {_VLLM_EAGLE3.first_with}-{VLLM_NEWEST_READ}; read, not run). Use resid[1] "
                      "instead.", "breaks", code="VLLM_DEEPSEEK_ID0_TYPEERROR")
        if n is not None and n in points and not rows.get("final"):
            # the last rule without id N says its range: the releases that miss it
            notes.add(rows.say("id {n} (final layer output) is never captured by vLLM's deepseek_v2.py before PR "
                               "#{next_pr} (merged {next_merged}; releases {since}-{until} capture ids up to {below}): "
                               "one state fewer comes back than configured.", row=rows.last("final", False), n=n,
                               below=n - 1, next_pr=_PR46973.pr, next_merged=_PR46973.merged), "breaks",
                      code="VLLM_DEEPSEEK_FINAL_UNREACHED")
            points = [p for p in points if p != n]
    elif rows:   # deepseek_v32: id 0 depends on the platform
        if 0 in points:
            notes.add(f"Id 0 on {arch} (vLLM {_VLLM_V32.first_with} on, vllm/models/deepseek_v32, releases read up to "
                      f"{VLLM_NEWEST_READ}) depends on the platform: CUDA's nvidia/model.py appends the bare hidden "
                      "states when the residual is None (resid[0]); ROCm's amd/model.py (and deepseek_v2.py on other "
                      "platforms) computes `hidden_states + residual` and raises TypeError at the first forward.",
                      code="VLLM_DEEPSEEK_V32_ID0_PLATFORM")
        if n is not None and n in points and not rows.get("final"):
            notes.add(f"id {n} (final layer output) is never captured by vLLM's vllm/models/deepseek_v32 on CUDA "
                      f"({_VLLM_V32.first_with}-{VLLM_NEWEST_READ} read): it captures before each layer only; one state fewer comes "
                      "back than configured. The CPU build falls back to deepseek_v2.py's classes, which capture it"
                      + (" (a CUDA build assumed: engine_platform not given)." if platform is None else "."),
                      "breaks", code="VLLM_DEEPSEEK_V32_FINAL_UNREACHED")
            points = [p for p in points if p != n]
    elif arch is None and 0 in points:
        notes.add("If the target is DeepSeek-family (DeepseekV2/V3/V32, Kimi-K2/K2.5, DeepseekForCausalLM, "
                  "MistralLarge3ForCausalLM, GlmMoeDsaForCausalLM), id 0 crashes vLLM: "
                  f"deepseek_v2.py adds a None residual at layer 0 (TypeError, releases {_VLLM_EAGLE3.first_with}-"
                  f"{VLLM_NEWEST_READ}). Other model "
                  f"files (EagleModelMixin) capture resid[0]. To decide, {_PASS_ARCH}.", code="VLLM_ID0_ARCH_NEEDED")
    return rule, points


def _has(engine: str, kind: str, key) -> bool:
    """Is there a release rule of ``engine``'s ``kind`` for ``key`` (a file or architecture that was read)?"""
    return any((r.engine, r.kind, r.key) == (engine, kind, key) for r in RULES)


class _Rules:
    """One key's release rules as this build reads them (the one lookup, eagle3lab.engines.versions.rule_at):
    ``get(field)`` is the newest possible rule's value, with a version note when the build cannot be placed by a
    change at which that field changes; ``say`` fills a note template from the rule's range."""

    def __init__(self, notes, engine: str, kind: str, key, rules=None, earlier=(), later=()):
        self.notes = notes
        newest = SGLANG_NEWEST_READ if engine == "sglang" else VLLM_NEWEST_READ
        self.found = rule_at(RULES if rules is None else rules, notes.engine_version, engine=engine, kind=kind,
                             key=key, newest=newest, earlier=earlier, later=later)

    def get(self, field: str):
        return self.found.get(field, lambda text, change: self.notes.add_once(text, "version", change,
                                                                              code="ENGINE_VERSION_UNPLACED"))

    def change_to(self, field: str, value) -> Change | None:
        """The change from which ``field`` first has ``value`` (None: every rule has it from the start)."""
        return self.found.change_to(field, value)

    def last(self, field: str, value) -> Rule:
        """The last rule whose ``field`` is ``value``: the one whose range a note about that value names."""
        return [r for r in self.found.rows if rule_field(r, field) == value][-1]

    def say(self, template: str | None = None, row: Rule | None = None, **more) -> str:
        return self.found.say(template, row, **more)

    def captures_index0(self) -> bool:
        return self.get("index0") != "TypeError"


# SpecForge 0.2.0 (the release read), specforge/algorithms/model_providers.py resolve_eagle_capture_layers.
_SPECFORGE_CHECK = ("specforge/algorithms/model_providers.py resolve_eagle_capture_layers (SpecForge 0.2.0, the release "
                    "read) raises ValueError 'resolved EAGLE capture layers must contain exactly three non-negative "
                    "integers' before training starts")


def _sglang_hook(arch, notes) -> None:
    """A 'breaks' note when this SGLang build cannot start an EAGLE-3 launch on ``arch`` at all (the HOOK rules;
    every rule's change landed before PR #25454, so a mark after it places them)."""
    key = (arch or "").strip().lower()
    if not _has("sglang", HOOK, key):
        return
    rows = [r for r in RULES if (r.kind, r.key) == (HOOK, key)]
    mark = re.match(r"^(pre|post)-?#?(\d+)$", (notes.engine_version or "").lower())
    # a mark for another PR says nothing about these; the ones this project asks for (#22836, #25454, #25464,
    # #32334, ...) all landed after both hooks, so it is read as having them
    if mark and int(mark.group(2)) not in {r.since.pr for r in rows[1:]}:
        return
    hook = _Rules(notes, "sglang", HOOK, key, later=(_PR25454,))
    if hook.get("value") != "yes":
        fixed = rows[-1].since
        notes.add(hook.say(arch=arch) + f" (SGLang release wheels read; PR #{fixed.pr}, release "
                  f"{fixed.first_with} on, serves EAGLE-3 on it).", "breaks", code="SGLANG_NO_EAGLE3_HOOK")


def _sglang_points(engine, written, n, arch, notes):
    """SGLang, and SpecForge (which captures through SGLang's hook): the row of the target's model file for this
    build (its CAPTURE rules) applied to the ids, with a note for everything that breaks or is assumed."""
    file = sglang_model_file(arch)
    if engine == "sglang":
        _sglang_hook(arch, notes)
    if written is None:
        return _sglang_default_points(engine, n, notes)
    ids = _sglang_written_ids(engine, written)
    rule = _Rules(notes, "sglang", CAPTURE, file, earlier=_SGLANG_LANDED_AFTER.get(file, ()))
    offset = rule.get("offset") if file is not None else PLUS_ONE
    rule.get("note")
    text = rule.say()
    family = sglang_first_id_rule(arch)
    _sglang_offset_notes(ids, n, arch, file, rule, offset, family, notes)
    if engine == "specforge":
        text = _RULES["specforge"] + " SGLang rule for this target: " + text
    plus_one = (offset == PLUS_ONE or offset == FIRST_ID and ids[0] == 1
                or offset == LARGEST_N and (n is None or max(ids) != n))
    points = [i + 1 for i in ids] if plus_one else list(ids)
    points = _sglang_reachable(ids, points, n, arch, file, rule, plus_one, family, notes)
    if engine == "specforge":
        _specforge_notes(ids, n, notes)
    return text, points


def _sglang_default_points(engine, n, notes):
    """No ids written: SpecForge writes its own defaults, SGLang silently falls back to its loop indices."""
    if engine == "specforge":
        ids = [1, n // 2 - 1, n - 4]
        notes.add(f"Default ids used: SpecForge writes [1, N//2-1, N-4] = {ids} (SGLang convention) when "
                  "none are given.", "defaulted", code="SPECFORGE_AUX_IDS_DEFAULTED")
        return _RULES["specforge-default"], [i + 1 for i in ids]
    notes.add("Default ids used silently: SGLang reads ids only from config.json -> eagle_config -> "
              "eagle_aux_hidden_state_layer_ids; a missing eagle_config (or a top-level key in speculators "
              f"style) is swallowed and loop indices [2, N//2, N-3] = {list(default_resid(n))} are used, "
              "with no log line.", "defaulted", code="SGLANG_AUX_IDS_DEFAULTED")
    return _RULES["sglang-default"], [2, n // 2, n - 3]


def _sglang_written_ids(engine, written) -> list[int]:
    """The written ids as integers; an id below -1 is refused (SGLang never reaches it, and says nothing)."""
    ids = [_as_int(engine, x) for x in written]
    for i in ids:
        if i < -1:
            raise bad_input(engine, "eagle_aux_hidden_state_layer_ids", "ids >= -1 (SGLang convention)", i,
                            "SGLang adds 1 and tests `i in layers_to_capture` while walking the layers: this id is "
                            "never reached and the state is silently missing. -1 is the only negative id with a "
                            "meaning (the embedding output, resid[0]).")
    return ids


def _sglang_offset_notes(ids, n, arch, file, rule, offset, family, notes) -> None:
    """A note when the +1 offset applied to the ids is not certain: it moved in a PR (first-id rule), the
    architecture, the layer count or the model file is unknown."""
    if family:
        change = rule.change_to("offset", FIRST_ID)
        old, new = [i + 1 for i in ids], ([i + 1 for i in ids] if ids[0] == 1 else list(ids))
        if old != new:
            notes.add(f"Version-dependent (SGLang PR #{change.pr}, merged {change.merged}, {file}): the "
                      f"first id is {ids[0]}, not 1, so builds before it capture loop indices {old} and builds since "
                      f"capture {new}. Shown: {'since' if offset == FIRST_ID else 'before'} PR #{change.pr}"
                      + (f" ({_PASS_VERSION})." if notes.engine_version is None else "."),
                      code="SGLANG_AUX_IDS_VERSION_DEPENDENT")
    elif arch is None:
        if ids[0] != 1:
            notes.add("If the target is DeepSeek-family (DeepseekV2/V3, Kimi-K2) or Glm4MoeLiteForCausalLM and SGLang "
                      "includes PR #25454 "
                      f"(merged {_PR25454.merged}), these ids are used as-is: loop indices {ids}. To decide, "
                      f"{_PASS_ARCH}.", confirmed=False, code="SGLANG_AUX_IDS_ARCH_NEEDED")
    elif offset == LARGEST_N and n is None:
        notes.add("gpt_oss.py uses the ids as written when the largest is N, else adds 1: num_layers not "
                  "given, the +1 is shown.", code="SGLANG_AUX_IDS_NUM_LAYERS_NEEDED")
    elif file is None:
        notes.add(f"Not confirmed for {arch}: its SGLang model file was not read here. Shown: the +1 rule of every "
                  "file read (llama.py, qwen2.py, qwen2_moe.py; deepseek_v2.py before PR #25454); check "
                  f"set_eagle3_layers_to_capture in the file that serves {arch} (GPT-OSS, for one, reads its ids "
                  "as boundary indices since PR #32334).", confirmed=False, code="SGLANG_FILE_NOT_READ")


def _sglang_reachable(ids, points, n, arch, file, rule, plus_one, family, notes) -> list[int]:
    """The loop indices the capture loop actually reaches (0..N-1, and index 0 only where the file prepares it),
    with a note for each point it drops or crashes on."""
    if plus_one and -1 in ids:
        text_0, kind = _index0_note(arch, rule)
        notes.add(text_0, kind, confirmed=file is not None, code=_INDEX0_CODES[kind, file is not None])
    if not plus_one and -1 in points:
        as_is = f"since PR #{rule.change_to('offset', FIRST_ID).pr}" if family else "by gpt_oss.py, whose largest id is N"
        notes.add(f"Loop index -1 is never reached (ids used as-is {as_is}: the capture loop tests "
                  "`i in layers_to_capture` for i = 0..N-1 only): the embedding state is not captured, so fc gets "
                  "fewer states than it reads" + (f" ({_count_check(file, notes)})" if family else "") + ".",
                  "breaks", code="SGLANG_ID_MINUS1_STOPPED" if family and _count_checked(file, notes)
                  else "SGLANG_ID_MINUS1_UNREACHED")
        points = [p for p in points if p >= 0]
    if not plus_one and 0 in points and not rule.captures_index0():
        change = rule.change_to("index0", "prepared")
        notes.add(f"Loop index 0, where the residual is still None: {file} computes `hidden_states + "
                  f"residual` there and raises TypeError at the target's first forward (releases <= "
                  f"{change.last_without}; from {change.first_with} it captures resid[0]; read {_SGLANG_READ[file].format(newest=SGLANG_NEWEST_READ)}"
                  ").", "breaks", code="SGLANG_INDEX0_TYPEERROR")
    if n is not None and any(p >= n for p in points) and rule.get("past_end") == "IndexError":
        missing = sorted({p for p in points if p >= n})
        notes.add(f"Loop indices {missing} (written ids {[p - 1 for p in missing]}) do not exist: qwen2_moe.py's "
                  "Qwen2MoeModel.set_eagle3_layers_to_capture marks self.layers[k+1] for each id k, so SGLang raises "
                  f"IndexError while it sets up the target (start-up fails; release wheels {_PR25454.last_without}-"
                  f"{SGLANG_NEWEST_READ} read, {SGLANG_NEWEST_READ} run).", "breaks", code="SGLANG_PAST_END_INDEXERROR")
        points = [p for p in points if p < n]
    if n is not None and n in points and not rule.get("final"):
        notes.add(f"Loop index {n} (written id {n - 1 if plus_one else n}) is never reached: SGLang captures before "
                  f"each layer, for loop indices 0..N-1 only, so resid[{n}] (final layer output) is silently missing "
                  "and the fc input is narrower than the draft expects (vLLM fixed the analogous case in PR #46973; "
                  "SGLang fixed GPT-OSS only, PR #32334).", "breaks", code="SGLANG_FINAL_UNREACHED")
        points = [p for p in points if p != n]
    return points


def _specforge_notes(ids, n, notes) -> None:
    """What SpecForge itself says about ids it trains on (beyond the SGLang rule it captures through)."""
    if n is not None and (n - 1) in ids:
        notes.add(f"SpecForge's old HF backend took hidden_states[{n}] for id {n - 1}: HF applies the final norm to "
                  "that entry, so training saw norm(resid[N]), not resid[N].", code="SPECFORGE_HF_FINAL_NORM")
    if len(ids) != 3 or min(ids) < 0:
        notes.add(f"SpecForge refuses {ids}: {_SPECFORGE_CHECK}. Under the +1 rule it cannot express resid[0] (id "
                  "-1): train on resid[1] (id 0) instead, or train with speculators, whose id 0 is resid[0].",
                  "breaks", code="SPECFORGE_IDS_REJECTED")


def _count_rule(file, notes) -> _Rules | None:
    """This build's COUNT rules for ``file`` (value "none", "assert", "RuntimeError"); None: not read."""
    return _Rules(notes, "sglang", COUNT, file, earlier=(_PR25454,)) if _has("sglang", COUNT, file) else None


def _count_checked(file, notes) -> bool:
    """Does this build stop the first forward when fewer aux states come back (the newest read does, per file)?"""
    rule = _count_rule(file, notes)
    return rule is None or rule.get("value") in ("assert", "RuntimeError")


def _count_check(file, notes) -> str:
    """What this build says when fewer aux states come back (the COUNT rules), in words."""
    rule = _count_rule(file, notes)
    if rule is None:
        return (f"the count check was read for {file} only in SGLang {SGLANG_NEWEST_READ}, where it packs them in "
                "layers/aux_hidden_states.py: RuntimeError 'captured i of n aux hidden states' at the first forward")
    rule.get("value")
    return rule.say()


# The codes of the notes on SGLang id -1 under the +1 rule, by (kind, whether the target's file was read).
_INDEX0_CODES = {("note", True): "SGLANG_ID_MINUS1_RESID0", ("breaks", True): "SGLANG_ID_MINUS1_TYPEERROR",
                 ("note", False): "SGLANG_ID_MINUS1_UNCONFIRMED"}
# every note SGLang's reading of id -1 can carry (loop index 0 under the +1 rule, or -1 never reached / stopped since
# #25454): a reader picks the one a resolution holds by exact code
ID_MINUS1_CODES = frozenset(_INDEX0_CODES.values()) | {"SGLANG_ID_MINUS1_UNREACHED", "SGLANG_ID_MINUS1_STOPPED"}


def _index0_note(arch, rule):
    """(text, kind) for SGLang id -1 under the +1 rule: loop index 0, before layer 0, residual None.
    Read files say what their capture does there in this build (resid[0], or TypeError); others say it is unknown."""
    head = "Id -1 is loop index 0, tested before layer 0 runs, where the residual is still None: "
    file = sglang_model_file(arch)
    if file is None:
        which = (f"not confirmed for {arch}, whose SGLang model file was not read" if arch else
                 f"what SGLang does depends on the target's model file (to decide, {_PASS_ARCH})")
        return head + f"{which}. Read: {_INDEX0_READ}.", "note"
    via = _SGLANG_FILE[arch.strip().lower()][1]
    where = f"SGLang's {file}" + (f" ({via})" if via else "")
    read = f" (read: {_SGLANG_READ[file].format(newest=SGLANG_NEWEST_READ)})"
    index0 = rule.get("index0")
    if index0 != "TypeError":
        how = ("appends the bare hidden states there" if index0 == "bare" else
               f"captures the residual the layer prepares there (from release {rule.change_to('index0', index0).first_with} on)")
        return head + f"{where} {how}, i.e. resid[0] (the embedding output), so -1 works for this target{read}.", "note"
    change = rule.change_to("index0", "prepared")
    return (head + f"{where} computes `hidden_states + residual` there and raises TypeError ('Tensor' + 'NoneType') "
            f"at the target's first forward (releases <= {change.last_without}; from {change.first_with} "
            f"it captures resid[0]): -1 cannot feed resid[0] in this build{read}."), "breaks"


def resolve_aux_layers(engine: str, ids=None, num_layers: int | None = None, arch: str | None = None,
                       engine_version: str | None = None, *, engine_platform: str | None = None,
                       key: str | None = None) -> AuxResolution:
    """What ``engine`` captures for ``ids`` as written (``None`` = that engine's default).

    Never silent: defaults, dropped ids, reordering, crashes in the engine and version-dependent
    meanings all come back as ``notes`` (each with its kind; ``warnings`` is their text, ``fatal``
    the text of the ones that break the engine, ``unconfirmed`` the text of the ones about a file or
    target that was not read, where the points shown are an assumption). ``engine_version``: see
    ``eagle3lab.engines.versions``; one that cannot be placed relative to a change here gives the newest
    behaviour and a "version" note; one that is not a date, PR mark or release raises ``Eagle3LabError``.

    vLLM only (``engine`` "vllm"): ``key`` is where the ids are written in the draft's config.json
    (``eagle_aux_hidden_state_layer_ids`` or ``eagle_config.eagle_aux_hidden_state_layer_ids``; None = ids vLLM
    reads, as given); whether vLLM reads them there depends on its model runner, which the build
    (``engine_version``, ``engine_platform`` "cuda" or "cpu", None = a CUDA build assumed) and the target
    (``arch``) decide (``eagle3lab.engines.vllm_runner``); the fallback log named in a default note follows
    the runner too. Other engines ignore both (their profiles' ``id_keys`` say where they read).
    """
    engine = _check_engine(engine)
    platform = check_platform(engine_platform)
    n = _check_num_layers(num_layers)
    written = tuple(ids) if ids is not None else None
    if written is not None and len(written) == 0:
        raise bad_input(engine, "eagle_aux_hidden_state_layer_ids", "a non-empty list of layer ids", "[]",
                        "Remove the key to get the engine's default, or write the ids the draft was trained on.")
    notes = _Notes(parse_engine_version(engine_version, "engine_version"))
    runner = None
    # the runner decides what is read and logged; a default with no build named says what both runners log
    if engine == "vllm" and (key is not None or written is None and (platform or engine_version)):
        runner = vllm_runner(engine_version, platform, arch=arch)
        written = _vllm_key(runner, written, key, notes)
    if n is None and (written is None or engine == "eagle"):
        raise bad_input(engine, "num_layers", "the target's num_hidden_layers", None,
                        "The default ids depend on N (pass --num-layers / num_layers=).")
    # points: the loop indices the engine tests, in the order written (dedup and sort come below)
    if engine == "eagle":
        rule, points = _eagle_points(written, n, notes)
    elif engine == "transformerlens":
        rule, points = _transformerlens_points(written, n, notes)
    elif engine in ("vllm", "speculators"):
        rule, points = _vllm_points(engine, written, n, arch, notes, runner, platform)
    else:
        rule, points = _sglang_points(engine, written, n, arch, notes)
    defaulted = written is None or engine == "eagle"
    wanted = 3 if defaulted else len(written)

    if n is not None and any(p > n for p in points):  # beyond the last layer: no capture loop reaches it
        notes.add(f"Ids selecting resid{[p for p in points if p > n]} are out of range for N = {n} (valid resid "
                  f"points 0..{n}): the engine never reaches them and those states are silently missing.", "breaks",
                  code="AUX_IDS_OUT_OF_RANGE")
        points = [p for p in points if p <= n]
    dups = sorted({p for p in points if points.count(p) > 1})
    if dups:
        notes.add(f"resid{dups} requested more than once: the engine captures each layer once (`idx in layers`), "
                  "so fewer states come back than ids were written.", "note" if defaulted else "breaks",
                  code="AUX_IDS_REPEATED")
    ordered = tuple(sorted(set(points)))
    if list(dict.fromkeys(points)) != list(ordered):
        notes.add(f"Ids are not in ascending layer order: the engine appends states while walking the layers, so "
                  f"fc receives {list(ordered)} in ascending order, not in the written order.", code="AUX_IDS_REORDERED")
    if len(ordered) != wanted and not notes.breaks:
        notes.add(f"{len(ordered)} states come back where {wanted} were asked for: the fc input width no longer "
                  "matches num_aux * hidden_size.", code="AUX_IDS_WIDTH_CHANGED")
    if n is None:
        notes.add("num_layers not given: range and final-layer checks skipped.", code="AUX_IDS_NUM_LAYERS_NEEDED")
    return AuxResolution(engine=engine, ids_as_written=written, resid=ordered, rule=rule, notes=tuple(notes.items),
                         defaulted=defaulted, num_layers=n, arch=arch, engine_version=notes.engine_version,
                         engine_platform=platform, runner=runner.runner if runner else None)


def _vllm_key(runner, written, key, notes):
    """The ids vLLM's ``runner`` reads when they are written at ``key`` (None: not read, its default follows), with
    notes: which runner and why, and what it makes of a nested SGLang-style list."""
    if key is not None and written is not None and key not in runner.id_keys:
        notes.add(f"The ids {list(written)} at {key} are not read: the {runner.runner} model runner reads "
                  f"{' or '.join(runner.id_keys)} only ({runner.reads.where}), so vLLM uses its default ids. "
                  + runner.describe(), "note", code="VLLM_AUX_IDS_NESTED_IGNORED")
        return None
    if key == IDS_NESTED and written is not None:
        notes.add(f"The ids {list(written)} at {key} (SGLang/SpecForge numbering, where id k = resid[k+1]) are read "
                  f"by the {runner.runner} model runner as vLLM ids, id k = resid[k], silently ({runner.reads.where}): "
                  "one point below what SGLang feeds for them. " + runner.describe(), "note",
                  code="VLLM_AUX_IDS_NESTED_READ")
        return written
    if key is not None:
        notes.add(runner.describe(), "note", code="VLLM_MODEL_RUNNER", confirmed=not runner.assumed)
    return written


def plus_one_ids(resid) -> list[int]:
    """The ids SGLang's documented convention gives for these points (id k captures resid[k + 1], so the
    embedding output is id -1): what a team writes by hand, whether or not a given build captures them
    (``resolve_aux_layers`` says what it does with them)."""
    return [_as_int("resid", k) - 1 for k in resid]


def to_engine_ids(engine: str, resid, num_layers: int, arch: str | None = None,
                  engine_version: str | None = None, *, engine_platform: str | None = None) -> list:
    """The ids to WRITE so that ``engine`` captures exactly these ``resid`` points, in this order.

    Raises ``Eagle3LabError`` when the engine cannot express them (resid[0] in SGLang except where the
    target's model file is read to capture it, resid[0] in vLLM on a DeepSeek-family target (deepseek_v2.py
    crashes on it), resid[N] in SGLang, any non-ascending order, SafeAILab/EAGLE's fixed choice). Ids for a
    target whose SGLang file was not read follow the +1 rule of every file read (``resolve_aux_layers`` says
    so in an unconfirmed note).
    """
    engine = _check_engine(engine)
    n = _check_num_layers(num_layers)
    if n is None:
        raise bad_input(engine, "num_layers", "the target's num_hidden_layers", None)
    target = [_as_int("resid", k) for k in resid]
    if not target:
        raise bad_input("resid", None, "at least one resid point", "[]")
    bad = [k for k in target if not 0 <= k <= n]
    if bad:
        raise bad_input("resid", None, f"points in 0..{n} (N = {n})", bad)
    if target != sorted(set(target)):
        raise bad_input("resid", None, "distinct points in ascending order", target,
                        f"Every engine concatenates captured states in ascending layer order, so {engine} cannot "
                        "feed fc in this order; a draft trained on another order needs its fc columns permuted.")
    if engine == "transformerlens":
        return [f"blocks.{k}.hook_resid_pre" if k < n else f"blocks.{k - 1}.hook_resid_post" for k in target]
    if engine == "eagle":
        candidates = [None]
    elif engine in ("vllm", "speculators"):
        candidates = [list(target)]
    else:
        candidates = [plus_one_ids(target), list(target)]
        if target[0] == 1 and len(target) > 1:
            # Since SGLang #25454 (DeepSeek-family) a first id of 1 switches +1 on; the capture loop sorts anyway.
            candidates.append(target[1:] + target[:1])
    tried = []
    for ids in candidates:
        res = resolve_aux_layers(engine, ids, n, arch=arch, engine_version=engine_version,
                                 engine_platform=engine_platform)
        # SGLang id -1 is offered only where the target's file was read to capture resid[0] there
        unsure = [n.text for n in res.notes if n.code == "SGLANG_ID_MINUS1_UNCONFIRMED"]
        if list(res.resid) == target and not res.fatal and not unsure:
            return list(res.resid) if ids is None else ids
        # SpecForge's own refusal comes first: no SGLang build can make it train on those ids
        why = [n.text for n in res.notes if n.code == "SPECFORGE_IDS_REJECTED"] or list(res.fatal[:1]) or unsure[:1]
        tried.append(f"{ids if ids is not None else '(hard-coded)'} -> {res.label}" + (f" ({why[0]})" if why else ""))
    raise UncapturablePoints(
        f"{engine}: cannot capture {[resid_name(k, n) for k in target]} for N = {n}"
        + (f", arch {arch}" if arch else "") + ". Tried: " + "; ".join(tried), tuple(tried),
        "Choose other points (e.g. resid[1] instead of resid[0] where the target's model file cannot capture "
        "the embedding, resid[N-1] instead of resid[N]), or patch the engine's capture loop.")


def _moves(slots: int, distance: int):
    """Every way to move ``slots`` points by ``distance`` in total (signed moves, sum of |move| = distance)."""
    if slots == 1:
        yield from {(distance,), (-distance,)}
        return
    for first in range(-distance, distance + 1):
        for rest in _moves(slots - 1, distance - abs(first)):
            yield (first, *rest)


def nearest_servable(engine: str, resid, num_layers: int, arch: str | None = None,
                     engine_version: str | None = None, *,
                     engine_platform: str | None = None) -> tuple[tuple[int, ...], list]:
    """The wiring closest to ``resid`` that ``engine`` can feed, and the ids to write for it.

    ``resid`` itself when the engine can express it; else the ascending wiring at the smallest total
    distance (sum of |moves|, then the smallest single move, then the inner point on a tie) that the
    engine can capture as a whole (SGLang's llama.py, vLLM's deepseek_v2.py: resid[0] -> resid[1]; SGLang:
    resid[N] -> resid[N-1]; a DeepSeek-family rule where only a whole list decides the convention is tried
    as a whole).
    Raises ``Eagle3LabError`` when none is within ``2 * len(resid) + 2`` moves (EAGLE's fixed choice).
    """
    def ids_for(points):
        try:
            return to_engine_ids(engine, list(points), num_layers, arch=arch, engine_version=engine_version,
                                 engine_platform=engine_platform)
        except Eagle3LabError:
            return None

    resid = tuple(_as_int("resid", k) for k in resid)
    n = _check_num_layers(num_layers)
    if n is None:
        raise bad_input(engine, "num_layers", "the target's num_hidden_layers", None)
    reach = 2 * len(resid) + 2   # the moves a real fix needs are few; further is no longer "near"
    for distance in range(0, min(n, reach) + 1):
        near = [tuple(k + d for k, d in zip(resid, moves)) for moves in _moves(len(resid), distance)]
        near = [w for w in near if all(0 <= k <= n for k in w) and list(w) == sorted(set(w))]
        near.sort(key=lambda w: (max(abs(a - b) for a, b in zip(w, resid)), sum(abs(k - n / 2) for k in w)))
        for wiring in near:
            if (ids := ids_for(wiring)) is not None:
                return wiring, ids
    raise Eagle3LabError(f"{engine}: no wiring within {reach} moves of {resid_label(resid, n)} can be fed for "
                         f"N = {n}" + (f", arch {arch}" if arch else "") + " (EAGLE's choice is fixed; other engines "
                         "need other points or a patched capture loop).")


def compare_engines(ids=None, num_layers: int | None = None, arch: str | None = None,
                    engine_version: str | None = None, engines=ID_CONVENTIONS, *, engine_platform: str | None = None):
    """One row per engine: what the same written ids mean there (a pandas DataFrame)."""
    import pandas as pd

    rows = []
    for engine in engines:
        try:
            res = resolve_aux_layers(engine, ids, num_layers, arch=arch, engine_version=engine_version,
                                     engine_platform=engine_platform)
            rows.append({"engine": engine, "resid": list(res.resid), "label": res.label,
                         "defaulted": res.defaulted, "breaks": bool(res.fatal), "warnings": len(res.warnings),
                         "rule": res.rule})
        except Eagle3LabError as err:
            rows.append({"engine": engine, "resid": None, "label": f"error: {err}", "defaulted": False,
                         "breaks": True, "warnings": 0, "rule": ""})
    return pd.DataFrame(rows).set_index("engine")
