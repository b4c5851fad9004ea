"""The benchmark harness (decode_sweep, its projection, recorded benchmarks) on a tiny real target + draft pair."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
from helpers.tiny_models import hand_costs, prompts, tiny_pair

from eagle3lab.analysis.benchmark import GENERATE, decode_sweep, recorded_benchmarks
from eagle3lab.analysis.plots import plot_speedup_vs_c
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.target import tiny_target

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def tiny_sweep():
    target, draft = tiny_pair()
    cases = {"chain 3": dict(draft=draft, num_steps=3), "tree 3/2/5": dict(draft=draft, num_steps=3, topk=2,
                                                                          num_draft_tokens=5),
             "capped": dict(draft=draft, num_steps=1, num_draft_tokens=16),
             "sampled": dict(draft=draft, num_steps=3, temperature=1.0)}
    return decode_sweep(target, cases, prompts(n=2), max_new_tokens=10, repeats=2, progress=False)


def test_decode_sweep_is_lossless_and_tabulates_every_case(tiny_sweep):
    sw = tiny_sweep
    df = sw.table()
    assert list(df.index) == ["chain 3", "tree 3/2/5", "capped", "sampled"]
    assert list(df.identical) == ["2/2", "2/2", "2/2", "sampled"]
    for name in ("chain 3", "tree 3/2/5", "capped"):      # fp32 on a CPU: identical, nothing to classify
        check = sw.lossless(name)
        assert (check.identical, check.prompts, check.divergences, check.dtype) == (2, 2, (), "float32")
        assert (df.loc[name, "tie_flips"], df.loc[name, "bugs"]) == (0, 0)
    assert sw.lossless("sampled") is None and pd.isna(df.loc["sampled", "bugs"])
    assert df.loc["capped", "verified"] == 2 and df.loc["capped", "max_tau"] == 2      # SGLang's topk-1 rule
    assert df.loc["tree 3/2/5", "verified"] == 5
    assert (df.tau >= 1).all() and (df.tau <= df.max_tau).all()
    for name in sw.results:
        st = sw.stats(name)
        assert st.rounds == sum(len(o.rounds) for o in sw.results[name])
        assert st.tau == pytest.approx(st.tau_from_survival)
        assert all(len(o.tokens) == 10 for o in sw.results[name])
    assert set(sw.decode_tps) == {"no speculation", *sw.results} and all(v > 0 for v in sw.decode_tps.values())
    assert sw.decode_speedup("chain 3") == pytest.approx(sw.decode_tps["chain 3"] / sw.decode_tps["no speculation"])
    assert set(sw.e2e_tps) == set(sw.decode_tps) and all(v > 0 for v in sw.e2e_tps.values())
    assert sw.e2e_speedup("chain 3") == pytest.approx(sw.e2e_tps["chain 3"] / sw.e2e_tps["no speculation"])
    assert sw.context_len == 6 + 5


def test_projection_prices_each_case_with_the_cost_model(tiny_sweep):
    cm = hand_costs()      # target step 1 s, draft step 0.1 s, verify curve up to 8 tokens
    proj = tiny_sweep.projection(cm, names=["chain 3", "capped"])
    assert list(proj.index) == ["chain 3", "capped"]
    for name, row in proj.iterrows():
        p = cm.project(tiny_sweep.stats(name), row.num_steps)
        assert row.round_cost == pytest.approx(p.round_cost) == pytest.approx(row.break_even_tau)
        assert row.projected_speedup == pytest.approx(row.tau / row.round_cost)
        assert row.c_round * row.num_steps == pytest.approx(row.draft_phase)
        assert row.draft_phase + row.v_verify == pytest.approx(row.round_cost)   # the curve passes the point
        assert row.measured_speedup == pytest.approx(tiny_sweep.decode_speedup(name))
    assert proj.loc["capped", "v_verify"] == pytest.approx(1.1)      # 2 tokens verified, whatever was asked
    fig = plot_speedup_vs_c(proj)
    ax = fig.axes[0]
    assert len(ax.lines) == 2 * 2 + 1 and len(ax.collections) == 2 * 2   # solid + dotted per case, break-even
    y = ax.lines[0].get_ydata()
    assert y[0] == pytest.approx(proj.tau.iloc[0] / proj.v_verify.iloc[0])   # c = 0: only the verify is paid


def test_decode_sweep_needs_prompts_and_cases():
    target, draft = tiny_pair()
    with pytest.raises(Eagle3LabError, match="prompt"):
        decode_sweep(target, {"x": dict(draft=draft)}, [], progress=False)


def test_recorded_benchmarks_picks_the_what_if(tmp_path):
    """Section 9 quotes bench.json's run of the same what-if: the reader must pick it, and only it."""
    assert recorded_benchmarks(tmp_path) == []                      # no file: nothing recorded
    runs = {"as shipped": {"overrides": {}, "settings": {"num_steps": 1}},
            "half fixed": {"overrides": {"aux_resid": [0, 3, 7]}, "settings": {"num_steps": 1}},
            "half fixed, chain 4": {"overrides": {"aux_resid": [0, 3, 7]}, "settings": {"num_steps": 4}}}
    (tmp_path / "bench.json").write_text(json.dumps(runs))
    assert recorded_benchmarks(tmp_path, aux_resid=(0, 3, 7), num_steps=1) == [runs["half fixed"]]
    assert len(recorded_benchmarks(tmp_path, aux_resid=[0, 3, 7])) == 2 and len(recorded_benchmarks(tmp_path)) == 3
    (tmp_path / "bench.json").write_text("[1, 2]")
    with pytest.raises(Eagle3LabError, match="bench.json"):
        recorded_benchmarks(tmp_path)


def test_decode_sweep_on_a_tiny_target_is_lossless_and_reports_caps_and_both_speeds():
    torch.manual_seed(0)
    target = tiny_target("llama", num_layers=4, hidden_size=32)
    cfg = DraftConfig(hidden_size=32, intermediate_size=48, num_attention_heads=4, vocab_size=target.vocab_size,
                      aux_layer_ids=(1, 2, 3))
    draft = Eagle3Draft(cfg)
    draft.num_target_layers = 4
    prompts = [[5, 6, 7, 8], [9, 10, 11]]
    sw = decode_sweep(target, {"chain 3": dict(draft=draft, num_steps=3),
                               "capped": dict(draft=draft, num_steps=1, topk=1, num_draft_tokens=16)},
                      prompts, max_new_tokens=6, repeats=1, progress=False)
    df = sw.table()
    assert list(df.index) == ["chain 3", "capped"]
    assert list(df.identical) == ["2/2", "2/2"]
    assert df.loc["capped", "max_tau"] == 2 and df.loc["chain 3", "max_tau"] == 4   # SGLang's topk-1 rule
    assert (df.tau >= 1).all() and (df.tau <= df.max_tau).all()
    rates = sw.rates()
    assert list(rates.index) == ["no speculation", "chain 3", "capped"] and (rates > 0).all().all()
    for name in ("chain 3", "capped"):   # both speed definitions, each against the baseline in its own sense
        assert df.loc[name, "e2e_speedup"] == pytest.approx(rates.e2e_tps[name] / rates.e2e_tps["no speculation"])
        assert df.loc[name, "decode_speedup"] == pytest.approx(rates.decode_tps[name] / rates.decode_tps["no speculation"])


def test_decode_sweep_keeps_the_two_speed_definitions_apart(monkeypatch):
    """Stub decoders with known times: e2e = every token over prefill + decode, decode = the rest over decode."""
    from types import SimpleNamespace

    from eagle3lab.analysis import benchmark

    def result(prefill_s, decode_s, n=5):
        return SimpleNamespace(tokens=list(range(n)), prompt_ids=[0, 0], prefill_s=prefill_s, decode_s=decode_s,
                               rounds=[], settings={"num_steps": 1, "temperature": 0.0})

    monkeypatch.setattr(benchmark, "as_target", lambda t: t)
    monkeypatch.setattr(benchmark, "hf_generate", lambda t, p, n: result(0.0, 2.0))
    monkeypatch.setattr(benchmark, "target_greedy", lambda t, p, n: result(1.0, 4.0))
    monkeypatch.setattr(benchmark, "speculative_generate", lambda t, prompt, **kw: result(1.0, 1.0))
    monkeypatch.setattr(benchmark, "lossless_check", lambda t, p, outs, refs: None)   # no target to read
    sw = decode_sweep(object(), {"spec": {}}, [[1, 2]] * 3, max_new_tokens=5, progress=False)
    assert sw.e2e_tps == {"no speculation": 5 / 5.0, "spec": 5 / 2.0}       # 5 tokens over prefill + decode
    assert sw.decode_tps == {"no speculation": 4 / 4.0, "spec": 4 / 1.0}    # the 4 after the first, over decode
    assert sw.generate_tps == 5 / 2.0                                        # generate is timed whole
    assert sw.e2e_speedup("spec") == 2.5 and sw.decode_speedup("spec") == 4.0
    assert sw.identical("spec") == 3 and sw.context_len == 2 + 2            # 2 prompt tokens + half of 5, rounded
    # every (repetition, prompt) unit took the same times: the speed intervals have no width
    e2e = sw.speed_ratio("spec", kind="e2e")
    assert (e2e.value, e2e.low, e2e.high, e2e.units) == (pytest.approx(2.5),) * 3 + (3,)
    assert sw.speed_ratio("spec").value == pytest.approx(4.0)
    assert sw.speed_ratio("no speculation", "spec").value == pytest.approx(0.25)
    with pytest.raises(Eagle3LabError, match="'absent'"):
        sw.speed_ratio("absent")
    # a prompt's repetitions decode the same tokens: one unit, not two
    twice = decode_sweep(object(), {"spec": {}}, [[1, 2]] * 3, max_new_tokens=5, repeats=2, progress=False)
    assert twice.speed_ratio("spec").units == 3 and twice.speed_ratio("spec").value == pytest.approx(4.0)


def test_a_sweep_counts_an_output_that_leaves_the_target_as_a_bug(monkeypatch):
    """An accept that takes the first draft unchecked: the sweep's check and table call it a bug, not a tie."""
    from eagle3lab.decoding import speculative

    target, draft = tiny_pair()
    accept = speculative.SpeculativeRun.accept

    def accept_unchecked(self, tree, logits, draft_probs=None):
        path, bonus = accept(self, tree, logits, draft_probs)
        return (path, bonus) if path else ([0], int(logits[1].argmax()))

    monkeypatch.setattr(speculative.SpeculativeRun, "accept", accept_unchecked)
    sw = decode_sweep(target, {"chain 2": dict(draft=draft, num_steps=2)}, prompts(n=2), max_new_tokens=10,
                      baseline=False, progress=False)
    check = sw.lossless("chain 2")
    assert check.identical == 0 and len(check.bugs) == 2 and not check.ties
    assert (sw.table().loc["chain 2", "tie_flips"], sw.table().loc["chain 2", "bugs"]) == (0, 2)


def test_a_case_may_not_take_a_name_the_sweep_uses_for_its_own_rows():
    target, draft = tiny_pair()
    for name in (GENERATE, "no speculation"):
        with pytest.raises(Eagle3LabError, match="case names other than"):
            decode_sweep(target, {name: dict(draft=draft, num_steps=2)}, [[1, 2, 3]], max_new_tokens=4)
