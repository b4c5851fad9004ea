"""How an engine decides acceptance and what its counters mean: rows with their source and release range.

Two kinds of engine knowledge that change a prediction or a reading of the server's numbers:

- **vLLM's rejection method** (``--speculative-config`` keys ``rejection_sample_method``,
  ``draft_sample_method``, ``synthetic_acceptance_rates`` / ``synthetic_acceptance_length``; read in
  vLLM 0.32.0's ``vllm/config/speculative.py``, ``vllm/v1/sample/rejection_sampler.py`` (runner V1) and
  ``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py`` (runner V2), and the configs of 0.18.0,
  0.20.0, 0.22.0-0.25.0, 0.28.0-0.31.0). eagle3lab's emulation is greedy: it predicts the engine's
  counters for a temperature-0 request under the standard (or strict, or block) rule, where every one of
  them accepts a draft token exactly when it equals the target's argmax. ``synthetic`` accepts with a
  fixed probability per position whatever the draft proposes: the counters then replay those rates and
  say nothing of the draft. At temperature > 0 the rule decides (one-hot draft ``u < p(x)``, full draft
  ``u < p(x) / q(x)``, block verification), and the greedy prediction does not apply.
- **the meaning of each per-request counter** an engine reports (SGLang's ``meta_info`` keys, renamed
  three times; vLLM's ``metrics.speculative_decoding``): drafts-only counts (bonus excluded) convert to tau
  as ``1 + drafts / rounds``; bonus-included ones as ``tokens / rounds``. ``COUNTERS`` says which
  key means which, in which releases: one ``versions.Rule`` per key and release it holds from, read by the one
  lookup (``counter_at``; read in the SGLang wheels ``SGLANG_READ``: ``managers/tokenizer_manager.py``
  ``_calculate_spec_decoding_metrics``; vLLM's installed wheel: ``vllm/v1/metrics/stats.py``
  ``RequestSpecDecodeMetrics.to_dict``).

Pure Python: no torch.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from eagle3lab.engines.layer_ids import SGLANG_NEWEST_READ
from eagle3lab.engines.versions import ENGINE_NAMES, Change, InForce, Rule, place, rule_at
from eagle3lab.engines.vllm_runner import VLLM_WHEEL_READ
from eagle3lab.errors import bad_input

CHANGES = {
    "mrv2-strict-default": Change(
        "vllm", "Model Runner V2's default rejection_sample_method 'strict' (accept only a draft equal to the "
        "target's sampled token) replaced by 'standard' (the draft treated as one-hot, u < p(x), as V1 does) "
        "and draft_sample_method greedy/probabilistic (vLLM #40551 reported worse EAGLE-3 acceptance on MRv2)",
        40651, None, "0.20.0", "0.22.0", opened="2026-04-22"),
    "synthetic": Change(
        "vllm", "rejection_sample_method 'synthetic' (#38045, MRv2) with per-position synthetic_acceptance_rates "
        "or synthetic_acceptance_length, for runners V1 and V2", 40662, None, "0.18.0", "0.20.0",
        opened="2026-04-23"),
    "block-v2": Change(
        "vllm", "rejection_sample_method 'block' (block verification, Sun et al. 2024) in Model Runner V2; V1's "
        "rejection_sampler.py never reads it (V1 block verification, #40819, open)", 46781, None, "0.24.0",
        "0.25.0", opened="2026-06-26"),
    "vllm-per-request": Change(
        "vllm", "--per-request-spec-decode-metrics none|summary|detailed: metrics.speculative_decoding per "
        "request (acceptance_histogram, num_spec_steps, num_accepted_draft_tokens)", 48915, None, "0.28.0",
        "0.29.0"),
    "sglang-sglext-spec": Change(
        "sglang", "OpenAI responses carry sglext.spec_tokens_details with return_spec_tokens_details (0.5.21 and "
        "0.5.22 not read)", 33518, None, "0.5.20", "0.5.23"),
}

REJECTION_METHODS = ("standard", "synthetic", "block")     # vLLM 0.22.0 - 0.32.0
OLD_REJECTION_METHODS = ("strict", "probabilistic")       # vLLM 0.18.0 - 0.20.0 ('synthetic' too from 0.20.0)
DRAFT_SAMPLE_METHODS = ("greedy", "probabilistic")
_SPEC = "--speculative-config"
# The launch flag of #48915 (vllm/engine/arg_utils.py in 0.29.0-0.32.0) and the spelling some docs give;
# a launch line may carry either, and the evidence is read the same way.
PER_REQUEST_FLAGS = ("--per-request-spec-decode-metrics", "--per-request-spec-decode-stats")


COUNTER = "counter"       # Rule.kind: a per-request counter key an engine reports; Rule.value: its meaning
LOG_COUNTER = "log line"  # Rule.kind: a number in an engine's log line
# Meanings (Rule.value; None: the key is no longer reported from the row's release on).
DRAFTS = "drafts"                      # accepted drafts, bonus excluded
TOKENS_PER_ROUND = "tokens_per_round"  # bonus included, per round (SGLang: completion_tokens / verify rounds)
ROUNDS = "rounds"                      # verify rounds
HISTOGRAM = "histogram"                # index j = rounds that accepted exactly j drafts
DRAFTS_PER_ROUND = "drafts_per_round"  # accepted drafts at each round
PROPOSED = "proposed"                  # drafted tokens
# The releases whose counter keys were read: SGLang's wheels 0.5.4-0.5.20 and the newest (0.5.21, 0.5.22 not
# read); vLLM's installed wheel.
SGLANG_READ = (*(f"0.5.{i}" for i in range(4, 21)), SGLANG_NEWEST_READ)
NEWEST = {"sglang": SGLANG_NEWEST_READ, "vllm": VLLM_WHEEL_READ}
READ = {"sglang": SGLANG_READ, "vllm": (VLLM_WHEEL_READ,)}
_TM = "tokenizer_manager.py"
_STATS = "vllm/v1/metrics/stats.py"
_PER_REQUEST = CHANGES["vllm-per-request"]


def _gone(row: Rule, since: str) -> Rule:
    """The rule that ends ``row``'s key: from release ``since`` (the first read without it) it is not reported."""
    return Rule(row.engine, row.kind, row.key, since, None, source=row.source)


_NUM_CORRECT = Rule("sglang", COUNTER, "spec_num_correct_drafts", "0.5.12", DRAFTS,
                    source=f"{_TM} (PR #23962's split: drafts-only vs spec_num_accept_tokens, bonus included)")
_ACCEPTED_DRAFTS = Rule("sglang", COUNTER, "spec_accepted_drafts", "0.5.11", DRAFTS,
                        source=f"{_TM} (PR #23530's rename; an alias of {_NUM_CORRECT.key} from {_NUM_CORRECT.since})")
_ACCEPT_TOKEN_NUM = Rule("sglang", COUNTER, "spec_accept_token_num", "0.5.6", DRAFTS,
                         source=f"{_TM}: req.spec_accepted_tokens += accepted_draft_tokens (drafts only, whatever "
                         "its name says)")
_ACCEPT_HISTOGRAM = Rule("sglang", COUNTER, "spec_accept_histogram", "0.5.9", HISTOGRAM, source=_TM)

# One rule per (key, release from which it holds), newest keys first within a meaning (the order a reader should
# prefer them); a key that is no longer reported ends with a rule whose value is None (``_gone``).
COUNTERS = (
    Rule("sglang", COUNTER, "spec_verify_ct", "0.5.4", ROUNDS, source=_TM),
    _NUM_CORRECT,
    _ACCEPTED_DRAFTS, _gone(_ACCEPTED_DRAFTS, "0.5.23"),          # 0.5.21 and 0.5.22 not read
    _ACCEPT_TOKEN_NUM, _gone(_ACCEPT_TOKEN_NUM, _ACCEPTED_DRAFTS.since),   # renamed (PR #23530)
    Rule("sglang", COUNTER, "spec_correct_drafts_histogram", "0.5.12", HISTOGRAM, source=_TM),
    _ACCEPT_HISTOGRAM, _gone(_ACCEPT_HISTOGRAM, "0.5.23"),
    Rule("sglang", COUNTER, "spec_accept_length", "0.5.4", TOKENS_PER_ROUND,
         source=f"{_TM}: completion_tokens / spec_verify_ct (every output token, the first one from prefill and a "
         "last round cut by max_tokens included)"),
    Rule("vllm", COUNTER, "num_spec_steps", _PER_REQUEST, ROUNDS, source=_STATS + " (PR #{pr})"),
    Rule("vllm", COUNTER, "num_accepted_draft_tokens", _PER_REQUEST, DRAFTS, source=_STATS),
    Rule("vllm", COUNTER, "acceptance_histogram", _PER_REQUEST, HISTOGRAM, source=_STATS),
    Rule("vllm", COUNTER, "histogram", _PER_REQUEST, HISTOGRAM, source=_STATS + " RequestSpecDecodeMetrics (offline: "
         "RequestOutput.outputs[i].spec_decode_metrics)"),
    Rule("vllm", COUNTER, "per_step_accepted", _PER_REQUEST, DRAFTS_PER_ROUND,
         source=_STATS + " (the 'detailed' level only)"),
    Rule("vllm", COUNTER, "num_draft_tokens", _PER_REQUEST, PROPOSED, source=_STATS),
)

# SGLang's scheduler log line: 'accept len' = spec_num_accept_tokens / spec_num_forward_ct, the bonus included,
# in every release read (scheduler_metrics_mixin.py, later scheduler_components/metrics_reporter.py).
SGLANG_LOG_ACCEPT_LEN = Rule("sglang", LOG_COUNTER, "accept len", "0.5.4", TOKENS_PER_ROUND,
                             source="scheduler_metrics_mixin.py / metrics_reporter.py 'Decode batch' line")


def counter_at(engine: str, key: str, engine_version=None, kind: str = COUNTER) -> InForce:
    """The rules of ``engine``'s counter ``key`` as build ``engine_version`` reads them (the one lookup,
    ``versions.rule_at``): ``.get("value")`` is the key's meaning (None: not reported by that build)."""
    return rule_at((*COUNTERS, SGLANG_LOG_ACCEPT_LEN), engine_version, engine=engine, kind=kind, key=key,
                   newest=NEWEST[engine], read=READ[engine])


def fields(engine: str, meaning: str | None = None) -> tuple[Rule, ...]:
    """The rules of ``engine``'s keys with ``meaning`` (None: any), newest key first (the order a reader should prefer
    them)."""
    return tuple(r for r in COUNTERS if r.engine == engine and r.value is not None and meaning in (None, r.value))


def counter_span(row: Rule) -> tuple[str, str | None]:
    """(first, last release read) in which ``row``'s key has its meaning; last None: still in the newest read."""
    rules = counter_at(row.engine, row.key, kind=row.kind)
    span = rules.fields(row)
    return span["since"], (span["until"] if rules.rows[-1] is not row else None)


def field_span(row: Rule) -> str:
    """'spec_accept_token_num (SGLang 0.5.6-0.5.10: drafts; tokenizer_manager.py: ...)' in words."""
    since, until = counter_span(row)
    source = counter_at(row.engine, row.key, kind=row.kind).say(row.source, row)
    return f"{row.key} ({ENGINE_NAMES[row.engine]} {since}{f'-{until}' if until else ' on'}: {row.value}; {source})"


def tau_from_drafts(drafts: float, rounds: float) -> float:
    """Drafts-only counts (bonus excluded): tau = 1 + drafts / rounds."""
    return 1.0 + drafts / rounds if rounds else float("nan")


def tau_from_tokens(tokens: float, rounds: float) -> float:
    """Bonus-included counts: tau = tokens / rounds."""
    return tokens / rounds if rounds else float("nan")


def per_request_flag(values: dict) -> tuple[str, str] | None:
    """``(flag, level)`` when a parsed vLLM launch asks for per-request statistics (either spelling), else None.
    ``values``: flag -> value as a launch parser gives them."""
    for flag in PER_REQUEST_FLAGS:
        level = values.get(flag)
        if level is not None and str(level).lower() != "none":
            return flag, str(level)
    return None


# ------------------------------------------------------------------ vLLM's rejection method


@dataclass(frozen=True)
class RejectionReading:
    """What vLLM's rejection method does to eagle3lab's (greedy) acceptance prediction for one launch."""

    method: str                  # rejection_sample_method as the launch sets it (or the build's default)
    draft_sample: str            # draft_sample_method ("greedy" default; before #40651 there is no such key)
    runs_as: str                 # the rule the build applies ('block' on runner V1 runs 'standard')
    prediction: str              # "exact": the greedy emulation predicts the counters; "replayed": the counters
    #                              replay synthetic rates; "not modelled": temperature > 0
    temperature: float
    synthetic_survival: tuple[float, ...] | None   # the unconditional per-position rates synthetic replays
    words: str
    sources: tuple[str, ...]

    @property
    def measures_draft(self) -> bool:
        """False when the counters come from synthetic rates: they say nothing of the draft."""
        return self.prediction != "replayed"

    @property
    def synthetic_tau(self) -> float | None:
        """The tau synthetic rates aim at: 1 + sum of the unconditional rates."""
        return None if self.synthetic_survival is None else 1.0 + sum(self.synthetic_survival)

    def to_dict(self) -> dict:
        return {**asdict(self), "measures_draft": self.measures_draft, "synthetic_tau": self.synthetic_tau}


def synthetic_rates(spec: dict, where: str = _SPEC) -> tuple[float, ...]:
    """vLLM's ``_resolve_synthetic_acceptance_rates`` (0.20.0-0.32.0): exactly one of the per-position
    unconditional rates (length num_speculative_tokens, in [0, 1], non-increasing) or a mean acceptance
    length in [1, n + 1], spread by ``_acceptance_length_to_rates`` (all 1.0, one fraction, then 0.0)."""
    rates, length = spec.get("synthetic_acceptance_rates"), spec.get("synthetic_acceptance_length")
    if (rates is None) == (length is None):
        raise bad_input(where, "synthetic_acceptance_rates", "exactly one of synthetic_acceptance_rates and "
                        "synthetic_acceptance_length with rejection_sample_method 'synthetic'",
                        "both" if rates is not None else "neither", "vLLM raises the same at start-up.")
    n = spec.get("num_speculative_tokens", len(rates) if rates is not None else None)
    if not isinstance(n, int) or n < 1:
        raise bad_input(where, "num_speculative_tokens", "an integer >= 1 beside synthetic_acceptance_length", n)
    if rates is not None:
        ok = (isinstance(rates, list) and len(rates) == n and all(isinstance(r, (int, float)) and 0 <= r <= 1
                                                                   for r in rates))
        if not ok or any(rates[i] > rates[i - 1] for i in range(1, len(rates))):
            raise bad_input(where, "synthetic_acceptance_rates", f"{n} non-increasing rates in [0, 1] (one per "
                            "speculative token)", rates)
        return tuple(float(r) for r in rates)
    if not isinstance(length, (int, float)) or not 1 <= length <= n + 1:
        raise bad_input(where, "synthetic_acceptance_length", f"a number in [1, {n + 1}]", length)
    drafts = float(length) - 1
    full = int(drafts)
    return tuple(([1.0] * full + [drafts - full] + [0.0] * (n - full - 1))[:n])


def _method(spec: dict, engine_version, where: str) -> tuple[str, str]:
    """The written (or default) rejection and draft-sample methods, checked against the build's choices."""
    era = place(CHANGES["mrv2-strict-default"], engine_version).state
    method = spec.get("rejection_sample_method", "strict" if era == "before" else "standard")
    draft = spec.get("draft_sample_method", "greedy")
    known = {"before": OLD_REJECTION_METHODS + ("synthetic",), "after": REJECTION_METHODS}.get(
        era, REJECTION_METHODS + OLD_REJECTION_METHODS)
    if method not in known:
        raise bad_input(where, "rejection_sample_method", f"one of {', '.join(known)} for this build "
                        f"({CHANGES['mrv2-strict-default'].span()})", repr(method))
    if draft not in DRAFT_SAMPLE_METHODS:
        raise bad_input(where, "draft_sample_method", " or ".join(DRAFT_SAMPLE_METHODS), repr(draft))
    return method, draft


_EXACT = ("at temperature 0 vLLM accepts a draft token exactly when it equals the target's argmax ({how}), "
          "which is what eagle3lab's greedy emulation does: the prediction holds for the counters.")
_HOT = {
    "standard": "standard rejection sampling with the draft treated as one-hot (draft_sample_method greedy: u < p(x)) or its full distribution "
                "(probabilistic: u < p(x) / q(x))",
    "strict": "strict: a draft accepted only when the target's sampled token equals the draft (MRv2's default before #40651; "
              "vLLM #40551 measured worse EAGLE-3 acceptance with it)",
    "probabilistic": "probabilistic: u < p(x) / q(x) with cached draft logits",
    "block": "block verification (#46781): a prefix judged jointly, at least as many accepted in expectation",
}


def rejection_reading(spec: dict | None, *, temperature: float = 0.0, runner: str | None = None,
                      engine_version=None, where: str = _SPEC) -> RejectionReading:
    """How vLLM's rejection method changes the acceptance prediction for a launch whose
    ``--speculative-config`` is ``spec`` (None: no such key written), at request ``temperature``, on model
    runner ``runner`` ("V1"/"V2"; None: not known) of build ``engine_version``."""
    spec = spec or {}
    method, draft = _method(spec, engine_version, where)
    runs_as = "standard" if method == "block" and runner == "V1" else method
    sources = ["vllm/config/speculative.py", CHANGES["mrv2-strict-default"].span()]
    if method == "synthetic":
        rates = synthetic_rates(spec, where)
        sources.append(CHANGES["synthetic"].span())
        words = (f"rejection_sample_method 'synthetic': vLLM accepts draft k with the conditional rate derived "
                 f"from the unconditional rates {', '.join(f'{r:.3f}' for r in rates)} (u < rate), whatever the "
                 f"draft proposes, so its counters replay those rates (tau {1 + sum(rates):.2f}) and the draft was "
                 "not measured: the prediction does not apply. Relaunch without 'synthetic' to measure the draft.")
        return RejectionReading(method, draft, runs_as, "replayed", temperature, rates, words, tuple(sources))
    if method == "block":
        sources.append(CHANGES["block-v2"].span())
    if runs_as != method:
        note = " Runner V1 never reads 'block' (vllm/v1/sample/rejection_sampler.py): it runs 'standard'."
    else:
        note = ""
    if temperature == 0:
        how = "argmax match; draft_sample_method has no effect on a greedy request" if runs_as == "standard" \
            else "the greedy path of every rule"
        return RejectionReading(method, draft, runs_as, "exact", temperature, None,
                                f"rejection_sample_method '{method}': " + _EXACT.format(how=how) + note,
                                tuple(sources))
    words = (f"rejection_sample_method '{method}' at temperature {temperature:g}: the rule is "
             f"{_HOT[runs_as]}. eagle3lab's emulation is greedy and does not model sampled acceptance: the "
             "prediction does not apply; compare at temperature 0." + note)
    return RejectionReading(method, draft, runs_as, "not modelled", temperature, None, words, tuple(sources))


def spec_config_of(values: dict) -> dict | None:
    """The ``--speculative-config`` mapping of a parsed vLLM launch (``flags.vllm.parse(...).values``), or None."""
    spec = values.get(_SPEC)
    return spec if isinstance(spec, dict) else None

