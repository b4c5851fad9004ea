"""The acceptance profile: its numbers from round logs and from counters, its file layout, and the engines' settings."""

from __future__ import annotations

import json
import math

import pytest

from eagle3lab import bundled
from eagle3lab.analysis import accept_profile as ap
from eagle3lab.engines.acceptance import acceptance_stats
from eagle3lab.engines.counters import CHANGES, synthetic_rates
from eagle3lab.errors import Eagle3LabError

K = 3
# three prompts' rounds (accepted drafts per round): a strong prompt, a weak one, a middling one
ROUNDS = [[3, 3, 2, 3], [0, 1, 0], [2, 3, 1, 0, 3]]


def conditions(**kw) -> ap.ProfileConditions:
    base = dict(prompt_source="test", prompt_lengths=(5, 6, 7), output_lengths=(16, 4, 14), max_new_tokens=16,
                temperature=0.0, topology="chain", topk=1, num_draft_tokens=K + 1, engine="vllm",
                engine_version="0.32.0", engine_platform="cpu", measured_by="emulated", device="cpu", dtype="float32")
    return ap.ProfileConditions(**{**base, **kw})


@pytest.fixture(scope="module")
def profile() -> ap.AcceptanceProfile:
    return ap.profile_from_rounds(ROUNDS, K, conditions())


def test_rates_are_the_round_logs(profile):
    stats = acceptance_stats([a for p in ROUNDS for a in p], num_positions=K)
    assert [x.value for x in profile.marginal] == pytest.approx(stats.survival)
    assert [x.value for x in profile.conditional] == pytest.approx(stats.conditional)
    assert profile.tau.value == pytest.approx(stats.tau) == pytest.approx(1 + sum(stats.survival))
    assert profile.histogram == (3, 2, 2, 5) and profile.rounds == 12
    # per request: each prompt's tau, then their mean (weights prompts alike, unlike tau)
    assert profile.tau_per_request == pytest.approx((1 + 11 / 4 + 1 + 1 / 3 + 1 + 9 / 5) / 3)
    assert profile.tau_per_request != pytest.approx(profile.tau.value)


def test_intervals_resample_prompts(profile):
    assert all(x.units == 3 and x.low <= x.value <= x.high for x in (*profile.marginal, *profile.conditional))
    assert profile.tau.low < profile.tau.value < profile.tau.high   # prompts this different: a wide interval
    one_prompt = ap.profile_from_rounds([sum(ROUNDS, [])], K, conditions())
    assert one_prompt.tau.single and one_prompt.tau.low == one_prompt.tau.high == pytest.approx(profile.tau.value)


def test_file_layout_is_model_optimizers(profile):
    data = profile.to_json()
    assert data["schema_version"] == "1.0" and data["measured"] is True and data["num_speculative_tokens"] == K
    # marginal[i] = P(length >= i + 2), conditional[i] = P(length >= i + 2) / P(length >= i + 1) (PR #2247)
    hist = {int(n): c for n, c in data["acceptance_length_histogram"].items()}
    at_least = lambda n: sum(c for length, c in hist.items() if length >= n) / sum(hist.values())  # noqa: E731
    assert data["marginal_accept_rates"] == pytest.approx([at_least(i + 2) for i in range(K)], abs=1e-6)
    assert data["conditional_accept_rates"] == pytest.approx(
        [at_least(i + 2) / at_least(i + 1) for i in range(K)], abs=1e-6)
    assert data["mean_accept_length"] == pytest.approx(1 + sum(data["marginal_accept_rates"]), abs=1e-5)
    assert data["accept_length_model"] == "chain_analytic"
    assert data["measurement_conditions"]["num_samples"] == 3 and data["measurement_conditions"]["osl"] == 16
    assert data["eagle3lab"]["conditions"]["measured_by"] == "emulated"


def test_json_round_trip(profile):
    text = json.dumps(profile.to_json())
    again = ap.AcceptanceProfile.from_json(json.loads(text))
    assert again.to_json() == profile.to_json()
    assert again.conditions == profile.conditions and again.histogram == profile.histogram
    assert again.tau.low == pytest.approx(profile.tau.low, abs=1e-6)


def test_another_producers_profile_reads_without_intervals(profile):
    foreign = {k: v for k, v in profile.to_json().items() if k != "eagle3lab"}
    read = ap.AcceptanceProfile.from_json(foreign)
    assert [x.value for x in read.marginal] == pytest.approx([x.value for x in profile.marginal], abs=1e-6)
    assert all(x.units == 0 and x.low == x.high == x.value for x in read.marginal)
    with pytest.raises(Eagle3LabError, match="schema_version"):
        ap.AcceptanceProfile.from_json({**foreign, "schema_version": None})
    with pytest.raises(Eagle3LabError, match="measured"):
        ap.AcceptanceProfile.from_json({**foreign, "measured": False})
    with pytest.raises(Eagle3LabError, match="acceptance_length_histogram"):
        ap.AcceptanceProfile.from_json({**foreign, "acceptance_length_histogram": {"9": 1}})


def test_vllm_synthetic_config_passes_vllms_own_checks(profile):
    spec = profile.vllm_speculative_config("draft-dir")
    assert spec["rejection_sample_method"] == "synthetic" and spec["num_speculative_tokens"] == K
    # engines.counters.synthetic_rates is vLLM's _resolve_synthetic_acceptance_rates (0.20.0-0.32.0)
    assert synthetic_rates(spec) == pytest.approx([x.value for x in profile.marginal], abs=1e-6)
    by_length = profile.vllm_speculative_config("draft-dir", by_length=True)
    assert 1 + sum(synthetic_rates(by_length)) == pytest.approx(profile.tau.value, abs=1e-6)
    assert CHANGES["synthetic"].first_with == ap.VLLM_SYNTHETIC_SINCE


def test_rates_a_position_never_reached_are_zero():
    never = ap.profile_from_rounds([[0, 0], [1, 0]], K, conditions())
    assert math.isnan(never.conditional[2].value)          # no round reached position 3: no conditional rate
    assert ap.synthetic_rates(never) == [0.25, 0.0, 0.0]    # vLLM's rates stay in [0, 1] and non-increasing


def test_sglang_simulates_the_mean(profile):
    env = profile.sglang_simulation()
    assert float(env["SGLANG_SIMULATE_ACC_LEN"]) == pytest.approx(profile.tau.value, abs=1e-4)
    assert env["SGLANG_SIMULATE_ACC_METHOD"] == "match-expected"
    assert profile.sglang_launch() == (f"--speculative-num-steps {K} --speculative-eagle-topk 1 "
                                       f"--speculative-num-draft-tokens {K + 1}")
    assert profile.to_json()["eagle3lab"]["sglang_launch"] == profile.sglang_launch()


def test_counters_give_the_same_profile(profile):
    """vLLM's aggregate counters fix the histogram; per-request histograms also fix the intervals."""
    stats = acceptance_stats([a for p in ROUNDS for a in p], num_positions=K)
    real = ap.profile_from_counters(stats.rounds, stats.accepted_per_pos, conditions())
    assert real.conditions.measured_by == "real" and real.histogram == profile.histogram
    assert [x.value for x in real.marginal] == [x.value for x in profile.marginal]
    assert real.tau.single
    # one unit (aggregate counters): no interval written, null bounds, read back as the point from one unit
    written = json.loads(json.dumps(real.to_json()))
    assert written["eagle3lab"]["intervals"]["mean_accept_length"] == [None, None]
    assert all(b == [None, None] for b in written["eagle3lab"]["intervals"]["marginal"])
    back = ap.AcceptanceProfile.from_json(written)
    assert back.tau.single and back.tau.low == back.tau.high == pytest.approx(real.tau.value)
    per_request = [[sum(a == j for a in p) for j in range(K + 1)] for p in ROUNDS]
    real = ap.profile_from_counters(stats.rounds, stats.accepted_per_pos, conditions(),
                                    per_request_histograms=per_request)
    assert (real.tau.low, real.tau.high) == (profile.tau.low, profile.tau.high)
    assert ap.compare_profiles(profile, real)["b_in_a_interval"].all()
    with pytest.raises(Eagle3LabError, match="per_request_histograms"):
        ap.profile_from_counters(stats.rounds, stats.accepted_per_pos, conditions(),
                                 per_request_histograms=per_request[:2])
    with pytest.raises(Eagle3LabError, match="accepted_per_pos"):
        ap.profile_from_counters(3, [1, 2, 0], conditions())
    served = {"vllm:spec_decode_num_drafts": 12, "vllm:spec_decode_num_accepted_tokens_per_pos": [9, 7]}
    assert ap.vllm_counter_values(served, K) == (12, [9, 7, 0])


def test_tables_have_stable_column_names_and_display_labels(profile):
    assert list(profile.to_frame().columns) == ["conditional", "conditional_low", "conditional_high", "marginal",
                                                "marginal_low", "marginal_high"]
    table = ap.compare_profiles(profile, profile)
    assert list(table.columns) == ["a", "a_low", "a_high", "b", "b_minus_a", "b_in_a_interval"]
    assert "b in a's interval" in table.rename(columns=ap.LABELS).columns


def test_compare_profiles_finds_a_different_draft(profile):
    other = ap.profile_from_rounds([[0, 0, 0], [0, 0], [0, 0, 0]], K, conditions())
    table = ap.compare_profiles(profile, other)
    assert not table.loc["tau", "b_in_a_interval"] and table.loc["tau", "b_minus_a"] < -1
    assert "vllm 0.32.0 cpu (emulated)" in table.attrs["title"]


def test_bad_rounds_are_refused():
    with pytest.raises(Eagle3LabError, match="accepted_per_prompt"):
        ap.profile_from_rounds([[4]], K, conditions())
    with pytest.raises(Eagle3LabError, match="measured_by"):
        ap.profile_from_rounds(ROUNDS, K, conditions(measured_by="guessed"))


def test_measured_on_the_bundled_case(bundled_models):
    """The bundled healthy draft as vLLM 0.32.0's CPU build runs it: the profile is the decode loop's round log."""
    from eagle3lab.decoding.speculative import speculative_generate
    from eagle3lab.engines.profiles import for_build
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    target = load_target(str(bundled.TARGET), device="cpu")
    draft = load_draft(str(bundled.DRAFT_HEALTHY), target=target, device="cpu")
    prompts = bundled.load_prompts(kind="code", n=3)
    prof = ap.measure_profile(target, draft, prompts, num_steps=K, max_new_tokens=24, engine="vllm",
                              engine_version="0.32.0", engine_platform="cpu", draft_path=bundled.DRAFT_HEALTHY,
                              prompt_source="bundled code prompts")
    rounds = [speculative_generate(target, draft, p, num_steps=K, max_new_tokens=24, eos_token_id=None,
                                   profile=for_build("vllm", "0.32.0", "cpu")).rounds for p in prompts]
    assert prof.histogram == tuple(sum(r.accepted == j for r in sum(rounds, [])) for j in range(K + 1))
    stats = acceptance_stats(sum(rounds, []), num_positions=K)
    assert prof.rounds == stats.rounds and prof.tau.value == pytest.approx(stats.tau)
    c = prof.conditions
    assert c.output_lengths == (24, 24, 24) and c.prompts == 3 and (c.engine, c.engine_platform) == ("vllm", "cpu")
    assert c.draft == "data/models/draft-healthy" and c.topology == "chain" and c.measured_by == "emulated"
    assert prof.to_frame().attrs["title"].startswith("Acceptance profile: vllm 0.32.0 cpu (emulated), cpu float32")
