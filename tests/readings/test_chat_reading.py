"""Notebook 07's readings (eagle3lab.readings.nb07_chat_template) on synthetic sweeps: both gaps are paired differences
over the same requests, worded by their own interval (beats / within noise / loses), and stored whole."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from eagle3lab.analysis.benchmark import GENERATE, DecodeSweep
from eagle3lab.engines.acceptance import bootstrap_ratio_difference
from eagle3lab.readings import nb07_chat_template as cr

ROUNDS = 10
SETTINGS = {"num_steps": 2, "temperature": 0.0, "profile": "specforge"}


def _out(accepted):
    rounds = [SimpleNamespace(accepted=a) for a in accepted]
    return SimpleNamespace(rounds=rounds, tokens=[7] * 20, settings=SETTINGS)   # every output the reference


def _sweep(per_draft: dict) -> DecodeSweep:
    """``per_draft``: label -> each request's accepted counts; every output equals the reference, the drafts
    timed 1 s and generate 2 s per request (end to end)."""
    n = len(next(iter(per_draft.values())))
    results = {label: [_out(a) for a in reqs] for label, reqs in per_draft.items()}
    reference = [o.tokens for o in results[cr.CHAT_DRAFT]]
    timed = {"decode": {}, "e2e": {label: [(len(o.tokens), 1.0) for o in outs] for label, outs in results.items()}}
    timed["e2e"][GENERATE] = [(len(r), 2.0) for r in reference]
    assert all(len(v) == n for v in per_draft.values())
    return DecodeSweep(results=results, reference=reference, decode_tps={}, e2e_tps={}, context_len=10, timed=timed)


def _requests(base, minus):
    """One request per base accept count (10 rounds each), ``minus`` of its rounds one lower."""
    return [[b - (i < minus) for i in range(ROUNDS)] for b in base]


BASE = [1, 2, 1, 2, 2, 1]     # requests that differ a lot from one another: wide separate intervals


@pytest.fixture
def reversed_gap():
    """The chat-trained draft accepts 3 fewer drafts in 10 rounds on every chat-templated request than on the same
    request raw (a worse chat rendering, by 0.30 tau on each request); on chat-templated requests it beats the
    raw-text draft by 0.50 on each."""
    chat = _sweep({cr.CHAT_DRAFT: _requests(BASE, 3), cr.RAW_DRAFT: [[b - 1] * 5 + [b - 1] * 3 + [b] * 2
                                                                        for b in BASE]})
    raw = _sweep({cr.CHAT_DRAFT: _requests(BASE, 0), cr.RAW_DRAFT: _requests(BASE, 5)})
    return {cr.CHAT: chat, cr.RAW: raw}


def test_the_rendering_gap_is_paired_over_the_same_requests(reversed_gap):
    gaps = cr.paired_gaps(reversed_gap)
    g = gaps["rendering"]
    assert g.value == pytest.approx(-0.3) and g.high < 0 and g.units == len(BASE)
    num = {r: [sum(x.accepted for x in o.rounds) + ROUNDS for o in reversed_gap[r].results[cr.CHAT_DRAFT]]
           for r in (cr.CHAT, cr.RAW)}
    assert g == bootstrap_ratio_difference(num[cr.CHAT], [ROUNDS] * 6, num[cr.RAW], [ROUNDS] * 6)
    assert gaps["drafts"] == reversed_gap[cr.CHAT].tau_difference(cr.CHAT_DRAFT, cr.RAW_DRAFT)
    with pytest.raises(ValueError, match="same requests"):
        cr.paired_gaps({cr.CHAT: reversed_gap[cr.CHAT], cr.RAW: _sweep({cr.CHAT_DRAFT: [[1] * 10], cr.RAW_DRAFT: [[1]]})})


def test_a_worse_chat_rendering_loses_though_the_separate_intervals_overlap(reversed_gap):
    """The old one-sided rule (chat's low above raw's high) called this "inside the noise" and "leads it by -0.30";
    the paired difference over the same requests shows it loses."""
    table = cr.rendering_table(reversed_gap, [cr.CHAT_DRAFT, cr.RAW_DRAFT], prompts=len(BASE))
    text, claims = cr.rendering_summary(table, cr.paired_gaps(reversed_gap), prompts=len(BASE), num_steps=2,
                                        device="cpu")
    chat, raw = claims["chat_interval"], claims["raw_interval"]
    assert chat["low"] < raw["high"] and raw["low"] < chat["high"]        # the separate intervals overlap
    gap = claims["gap"]
    assert gap["word"] == "loses" and gap["high"] < 0
    assert gap["value"] == pytest.approx(claims["tau_chat_chat"] - claims["tau_chat_raw"]) == pytest.approx(-0.3)
    for key in ("gap", "drafts_gap", "chat_interval", "raw_interval"):     # stored whole by a session
        assert {"value", "low", "high", "level", "units"} <= set(claims[key]), key
        assert claims[key]["level"] == 0.95 and claims[key]["units"] == len(BASE), key
    assert (f"rendered with the chat template it loses to the raw rendering ({gap['value']:+.2f} "
            f"[{gap['low']:+.2f}, {gap['high']:+.2f}], paired over the same requests)") in text
    d = claims["drafts_gap"]
    assert d["word"] == "beats" and d["low"] > 0 and d["value"] == pytest.approx(0.5)
    assert f"the chat-trained draft beats it ({d['value']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]" in text
    assert "leads it by" not in text and "inside the noise" not in text
    assert "Every output was token-identical to generate: True." in text
    for name, g in claims["vs_generate"].items():     # 1 s against generate's 2 s on every request
        assert g["value"] == pytest.approx(2.0) and g["word"] == "faster", name


def test_a_gap_inside_its_paired_interval_is_within_noise():
    up_down = [[1] * 5 + [2] * 5, [2] * 10, [1] * 10, [2] * 10]   # chat-templated: one request up, one down, raw
    chat = _sweep({cr.CHAT_DRAFT: up_down, cr.RAW_DRAFT: up_down})
    raw = _sweep({cr.CHAT_DRAFT: [[1] * 10, [2] * 10, [2] * 5 + [1] * 5, [2] * 10], cr.RAW_DRAFT: up_down})
    sweeps = {cr.CHAT: chat, cr.RAW: raw}
    table = cr.rendering_table(sweeps, [cr.CHAT_DRAFT, cr.RAW_DRAFT], prompts=4)
    text, claims = cr.rendering_summary(table, cr.paired_gaps(sweeps), prompts=4, num_steps=2, device="cpu")
    assert claims["gap"]["value"] == pytest.approx(0.0) and claims["gap"]["word"] == "within noise"
    assert claims["drafts_gap"]["word"] == "identical"      # the same rounds: a zero-width interval at 0 (verdicts' one rule)
    assert "it is within noise of the raw rendering" in text and "the chat-trained draft is identical to it" in text
