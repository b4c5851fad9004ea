"""engines.counters: vLLM's rejection method in the acceptance prediction, and each counter key's meaning."""

import pytest

from eagle3lab.engines.counters import (
    COUNTERS,
    counter_span,
    field_span,
    fields,
    per_request_flag,
    rejection_reading,
    synthetic_rates,
    tau_from_drafts,
    tau_from_tokens,
)
from eagle3lab.errors import Eagle3LabError


def test_default_launch_at_temperature_0_is_predicted_exactly():
    r = rejection_reading(None)
    assert (r.method, r.draft_sample, r.runs_as, r.prediction) == ("standard", "greedy", "standard", "exact")
    assert r.measures_draft and r.synthetic_tau is None
    # a probabilistic draft sampler changes nothing for a greedy request (llm_base_proposer all_greedy path)
    p = rejection_reading({"draft_sample_method": "probabilistic"})
    assert p.prediction == "exact" and "no effect on a greedy request" in p.words


def test_synthetic_replays_its_rates_and_says_the_draft_was_not_measured():
    by_rates = rejection_reading({"method": "eagle3", "num_speculative_tokens": 3,
                                  "rejection_sample_method": "synthetic", "synthetic_acceptance_rates": [0.9, 0.5, 0.2]})
    assert by_rates.prediction == "replayed" and not by_rates.measures_draft
    assert by_rates.synthetic_survival == (0.9, 0.5, 0.2) and by_rates.synthetic_tau == pytest.approx(2.6)
    assert "draft was not measured" in by_rates.words
    # vLLM's _acceptance_length_to_rates: the minimum-variance schedule (all 1.0, one fraction, then 0.0)
    assert synthetic_rates({"num_speculative_tokens": 4, "synthetic_acceptance_length": 2.6}) == pytest.approx(
        (1.0, 0.6, 0.0, 0.0))
    assert synthetic_rates({"num_speculative_tokens": 2, "synthetic_acceptance_length": 3}) == (1.0, 1.0)


@pytest.mark.parametrize("spec, key", [
    ({"rejection_sample_method": "synthetic", "num_speculative_tokens": 3}, "synthetic_acceptance_rates"),
    ({"rejection_sample_method": "synthetic", "num_speculative_tokens": 3, "synthetic_acceptance_rates": [0.5, 0.6, 0.1]},
     "synthetic_acceptance_rates"),
    ({"rejection_sample_method": "synthetic", "num_speculative_tokens": 2, "synthetic_acceptance_length": 3.5},
     "synthetic_acceptance_length"),
    ({"rejection_sample_method": "typical"}, "rejection_sample_method"),
    ({"draft_sample_method": "topk"}, "draft_sample_method"),
])
def test_what_vllm_refuses_is_bad_input_naming_the_key(spec, key):
    with pytest.raises(Eagle3LabError, match=key):
        rejection_reading(spec)


def test_block_on_runner_v1_runs_standard_and_temperature_above_0_is_not_modelled():
    v1 = rejection_reading({"rejection_sample_method": "block"}, runner="V1")
    assert v1.runs_as == "standard" and v1.prediction == "exact" and "never reads 'block'" in v1.words
    assert rejection_reading({"rejection_sample_method": "block"}, runner="V2").runs_as == "block"
    hot = rejection_reading(None, temperature=0.7)
    assert hot.prediction == "not modelled" and hot.measures_draft and "does not apply" in hot.words


def test_the_method_a_build_knows_follows_its_release():
    # before #40651 (<= 0.20.0) MRv2 defaulted to 'strict' and had no 'standard'; from 0.22.0 'strict' is refused
    assert rejection_reading(None, engine_version="0.20.0").method == "strict"
    with pytest.raises(Eagle3LabError, match="rejection_sample_method"):
        rejection_reading({"rejection_sample_method": "standard"}, engine_version="0.20.0")
    with pytest.raises(Eagle3LabError, match="rejection_sample_method"):
        rejection_reading({"rejection_sample_method": "strict"}, engine_version="0.32.0")
    assert rejection_reading({"rejection_sample_method": "strict"}, engine_version="0.20.0").prediction == "exact"


def test_counter_keys_carry_their_meaning_and_releases():
    drafts = {f.key: f for f in fields("sglang", "drafts")}
    # 0.5.6-0.5.10 named the drafts-only count spec_accept_token_num: not the bonus-included count its name suggests
    assert counter_span(drafts["spec_accept_token_num"]) == ("0.5.6", "0.5.10")
    assert counter_span(drafts["spec_accepted_drafts"])[1] == "0.5.20" and counter_span(
        drafts["spec_num_correct_drafts"])[1] is None
    assert {f.key for f in COUNTERS if f.value == "tokens_per_round"} == {"spec_accept_length"}
    assert field_span(drafts["spec_accept_token_num"]).startswith("spec_accept_token_num (SGLang 0.5.6-0.5.10: drafts;")
    # vLLM's keys hold from PR #48915's first release, filled from its Change
    assert field_span(fields("vllm", "rounds")[0]) == ("num_spec_steps (vLLM 0.29.0 on: rounds; vllm/v1/metrics/"
                                                       "stats.py (PR #48915))")
    assert tau_from_drafts(12, 7) == pytest.approx(19 / 7) == tau_from_tokens(19, 7)


def test_per_request_flag_accepts_both_spellings():
    assert per_request_flag({"--per-request-spec-decode-metrics": "summary"}) == (
        "--per-request-spec-decode-metrics", "summary")
    assert per_request_flag({"--per-request-spec-decode-stats": "detailed"})[0] == "--per-request-spec-decode-stats"
    assert per_request_flag({"--per-request-spec-decode-metrics": "none"}) is None
    assert per_request_flag({}) is None
