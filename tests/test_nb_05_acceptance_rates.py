"""Notebook 05's claims, and the sweep / log-line / speedup-plot helpers it calls.

On the bundled models the claims are relations with margins (the drafts can be retrained); no
timing is asserted (speed claims belong to benchmarks/), only acceptance, losslessness and the
cost model's arithmetic.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import json  # noqa: E402

import pytest  # noqa: E402
from conftest import hand_costs, notebook_claims, one_thread, prompts, tiny_pair  # noqa: E402

import eagle3lab  # noqa: E402
from eagle3lab import bundled  # noqa: E402
from eagle3lab.analysis.benchmark import decode_sweep, recorded_benchmarks
from eagle3lab.analysis.cost_model import equivalent_alpha, leviathan_tokens_per_step, verdict
from eagle3lab.analysis.plots import plot_speedup_vs_c
from eagle3lab.analysis.roofline import here_and_served, price_on_served
from eagle3lab.engines.acceptance import acceptance_stats, compare_definitions, engine_log_lines  # noqa: E402
from eagle3lab.errors import Eagle3LabError  # noqa: E402
from eagle3lab.models.checkpoint import load_draft  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield


# ------------------------------------------------------------------------------------------ helpers


def test_equivalent_alpha_inverts_leviathan():
    for alpha, gamma in [(0.3, 1), (0.8, 5), (0.95, 15)]:
        tau = leviathan_tokens_per_step(alpha, gamma)
        assert equivalent_alpha(tau, gamma) == pytest.approx(alpha, abs=1e-6)
    assert equivalent_alpha(1.0, 4) == 0.0 and equivalent_alpha(5.0, 4) == 1.0
    with pytest.raises(Eagle3LabError, match="tau"):
        equivalent_alpha(6.0, 4)        # more tokens than a 4-draft round can emit


def test_engine_log_lines_by_hand():
    st = acceptance_stats([2, 0, 3], num_positions=3)   # 5 accepted in 3 rounds of 3 drafts
    lines = engine_log_lines(st, elapsed_s=2.0)
    assert "accept len: 2.67, " in lines["SGLang before 2025-10"]
    assert "accept rate" not in lines["SGLang before 2025-10"]
    # 2025-10 .. #23530: (accepted + rounds) / (rounds * 4 verified) = 8/12; after: drafts only, 5/9
    assert "accept rate: 0.67," in lines["SGLang 2025-10 to PR #23530"]
    assert "accept rate: 0.56," in lines["SGLang from PR #23530"]
    vllm = lines["vLLM V1"]
    assert "Mean acceptance length: 2.67," in vllm and "Accepted: 5 tokens, Drafted: 9 tokens" in vllm
    assert "Per-position acceptance rate: 0.667, 0.667, 0.333," in vllm     # survival, not conditional
    assert "Avg Draft acceptance rate: 55.6%" in vllm and "Accepted throughput: 2.50 tokens/s" in vllm
    # a tree verifies more than depth + 1 tokens: SGLang divides by the verify width
    tree = engine_log_lines(st, num_draft_tokens=8)
    assert "accept rate: 0.33," in tree["SGLang 2025-10 to PR #23530"]      # 8 / (3 * 8)
    assert "Accepted throughput: ? tokens/s" in tree["vLLM V1"]


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


# ------------------------------------------------------------------------------------------ the bundled models


# ------------------------------------------------------------------ the notebook's claims, from its run


@pytest.fixture(scope="module")
def nb(bundled_models):
    return notebook_claims("05_acceptance_rates.ipynb")


def test_greedy_speculation_is_token_identical_to_generate(nb):
    assert nb["lossless"] == nb["greedy_settings"] >= 10


def test_healthy_acceptance_per_position_and_chain_length(nb):
    assert nb["tau"] == pytest.approx(nb["tau_from_survival"]) == pytest.approx(nb["vllm_mean"])
    assert min(nb["conditional"][:3]) > 0.5, "the healthy draft's first positions are accepted most of the time"
    assert all(a >= b for a, b in zip(nb["survival_all"], nb["survival_all"][1:]))
    ks, taus = nb["chain_ks"], nb["chain_taus"]
    assert ks == sorted(ks) and nb["tau_shortest"] == taus[0] <= 2 and nb["tau_longest"] == taus[-1] > taus[0] + 1
    by_k = dict(zip(ks, taus))
    assert by_k[1] < by_k[3] < by_k[5]                                # the chains the old sweep compared
    assert all(a < b + 0.1 for a, b in zip(taus, taus[1:]))           # a longer chain never accepts much less
    # the longest chain's survival predicts each shorter chain's tau (a prediction, so a margin)
    for k, tau in zip(ks, taus):
        assert 1 + sum(nb["survival_all"][:k]) == pytest.approx(tau, abs=0.4), k


def test_tree_and_sampling(nb):
    assert 1.5 < nb["tau_best_tree"] <= 6
    assert nb["tree_draft_tokens_per_round"] == [m - 1 for m in nb["tree_verified"]]   # every verified node counted
    assert 1.5 < nb["tau_sampled"] < nb["tau"] + 0.5, "sampling at T=1 accepts about as much as greedy, or less"


def test_seed_case_caps_and_collapse(nb):
    assert nb["case_verified"] == 2 and nb["case_most_accepted"] <= 1    # SGLang's topk-1 rule caps the launch
    assert nb["case_tau"] < 1.5 and nb["retry_tau"] < 1.5, "the case draft served as shipped is rejected at position 1"
    assert nb["retry_verdict"] == verdict(nb["retry_measured"], 1.0)    # the words follow the measured number


def test_half_fixed_case_is_bad_not_useless(nb):
    """Section 9: trained wiring restored, SGLang's residual rule kept -> a 1-step tau between the two."""
    assert nb["case_tau"] + 0.1 < nb["half_tau"] < 1.6
    assert nb["half_verdict_here"] == verdict(nb["half_measured_here"], 1.0)
    # at SGLang's 48 requests the stated costs need more than this tau ...
    assert nb["half_verdict_served_batch_48"] == "loses"
    # ... and it no longer loses once the engine overlaps its CPU work (spec V2): the overhead decided it
    assert nb["half_verdict_served_batch_48_overlap_on"] != "loses"
    if "recorded_measured" in nb:
        assert nb["recorded_verdict"] == verdict(nb["recorded_measured"], 1.0)


def test_offline_acc_matches_the_loop_definitions(nb):
    acc = nb["specforge_acc"]
    assert len(acc) == len(nb["conditional"]) and min(acc) > 0.4
    # unconditional acc_i vs the loop's conditional: same order of magnitude, both from one draft
    assert abs(nb["specforge_simulated"] - (nb["tau"] - 1)) < 1.5


def test_sglang_ignores_the_half_fixed_drafts_residual_rule(bundled_models):
    trained = bundled.recorded_resid(bundled.DRAFT_CASE)
    target = eagle3lab.load_target(bundled.TARGET, device="cpu")
    d = load_draft(bundled.DRAFT_CASE, target=target, device="cpu").rewired(aux_resid=trained).under("sglang")
    assert d.aux_resid == tuple(trained) and d.settings.norm_before_residual is False   # facts section 3


def test_compare_definitions_on_a_round_log():
    st = acceptance_stats([0, 1, 3, 3], num_positions=3)
    defs = compare_definitions(st)["value"]
    assert defs["SpecForge simulated_acc_len (loop c_k)"] == pytest.approx(st.tau - 1)


def test_seed_symptom_arithmetic():
    """tau ~ 1 on a 15-step chain cannot pay: the round costs 14 draft steps and a 16-token verify."""
    cm = hand_costs()
    st = acceptance_stats([0] * 9 + [1], num_positions=15)      # tau 1.1
    proj = cm.project(st, num_steps=15)
    extend = 0.9 * cm.extend_s[1] + 0.1 * cm.extend_s[2]
    assert proj.round_cost == pytest.approx(extend + 14 * cm.c + cm.v(16))
    assert proj.tau == pytest.approx(1.1) and proj.speedup < 0.5


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


def test_here_and_served_measured_here_priced_there():
    cases = {"bad": {"tau": 1.43, "num_steps": 1, "num_draft_tokens": 2, "break_even_here": 1.42, "measured_here": 1.01},
             "useless": {"tau": 1.05, "num_steps": 1, "num_draft_tokens": 2, "break_even_here": 1.33,
                         "measured_here": 0.8}}
    where = here_and_served(cases, c=0.1, overhead=0.2, batch=48)
    assert list(where.index) == ["bad", "useless"]
    assert where.loc["bad", "verdict here"] == "breaks even" and where.loc["useless", "verdict here"] == "loses"
    for label, overhead, batch in (("batch 1", 0.2, 1), ("batch 48", 0.2, 48), ("batch 48, overlap on", 0.0, 48)):
        table = price_on_served({"bad": cases["bad"]}, c=0.1, overhead=overhead, batches=(batch,))
        be = float(table.break_even_tau.iloc[0])
        assert where.loc["bad", f"break-even served, {label}"] == pytest.approx(be)
        assert where.loc["bad", f"verdict served, {label}"] == verdict(1.43, be)
    # the overlap scheduler removes the per-round overhead, nothing else
    assert where.loc["bad", "break-even served, batch 48"] - where.loc["bad", "break-even served, batch 48, overlap on"] \
        == pytest.approx(0.2)
