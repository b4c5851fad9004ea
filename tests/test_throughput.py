"""The cost model: formulas against hand computation, measured costs, the bench command end to end."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import hand_costs, one_thread, prompts, tiny_pair

from eagle3lab.analysis.cost_model import (
    break_even_tau,
    explain,
    implied_round_cost,
    leviathan_speedup,
    leviathan_tokens_per_step,
    tokens_per_round,
)
from eagle3lab.analysis.roofline import ROOFLINE_EXAMPLES, Roofline
from eagle3lab.analysis.timing import measure_costs
from eagle3lab.app.cli import main as cli_main
from eagle3lab.engines.acceptance import acceptance_stats
from eagle3lab.errors import Eagle3LabError


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    with one_thread():
        yield


def test_leviathan_formulas_by_hand():
    assert leviathan_tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8 ** 5) / 0.2)  # 3.3616
    assert leviathan_speedup(0.8, 4, 0.1) == pytest.approx(3.3616 / 1.4)
    assert leviathan_tokens_per_step(1.0, 4) == 5
    # per-position generalisation: i.i.d. survival alpha^k gives Leviathan's number back
    assert tokens_per_round([0.8 ** k for k in range(1, 5)]) == pytest.approx(3.3616)
    assert break_even_tau(1.7) == 1.7
    # the seed: 90 tok/s plain, 56.8 with speculation; at tau 1.3 a round cost 2.06 target steps
    assert implied_round_cost(1.3, 90, 56.8) == pytest.approx(1.3 * 90 / 56.8)


def test_cost_model_projection_by_hand():
    cm = hand_costs()
    assert cm.c == pytest.approx(0.1)
    assert cm.v(3) == pytest.approx(1.2)          # interpolated
    assert cm.v(12) == pytest.approx(2.1)         # last slope extrapolated
    stats = acceptance_stats([0, 1, 3, 3], num_positions=3)   # tau = 11/4
    proj = cm.project(stats, num_steps=3)
    # P(a) = 1/4 each for a = 0, 1, 3 twice -> extend rows 1, 2, 4, 4
    extend = (0.1 + 0.12 + 0.16 + 0.16) / 4
    round_s = extend + 2 * 0.1 + 1.3              # 2 recycled draft steps, verify of 4 tokens
    assert proj.pieces["round_s"] == pytest.approx(round_s)
    assert proj.round_cost == pytest.approx(round_s)
    assert proj.speedup == pytest.approx(2.75 / round_s)
    assert proj.spec_tps == pytest.approx(2.75 / round_s) and proj.baseline_tps == 1.0
    assert cm.project(stats, num_steps=3, tokens_per_round=2.5).speedup == pytest.approx(2.5 / round_s)


def test_explain_table_by_hand():
    df = explain([{"name": "cpu, case, K=1", "tau": 1.3, "c": 0.15, "num_steps": 1, "v": 1.1},
                  {"name": "long chain", "tau": 1.3, "c": 0.15, "num_steps": 15, "v": 1.6, "measured_speedup": 0.4}])
    assert df.loc["cpu, case, K=1", "round_cost"] == pytest.approx(0.15 + 1.1)
    assert df.loc["cpu, case, K=1", "projected_speedup"] == pytest.approx(1.3 / 1.25)
    assert df.loc["long chain", "round_cost"] == pytest.approx(0.15 * 15 + 1.6)
    assert df.loc["long chain", "projected_speedup"] < 1
    served = explain([{"name": "served", "tau": 1.3, "c": 0.1, "num_steps": 1, "v": 1.05, "overhead": 0.2}])
    assert served.loc["served", "round_cost"] == pytest.approx(0.1 + 1.05 + 0.2)
    assert served.loc["served", "overhead"] == 0.2 and df.loc["long chain", "overhead"] == 0


def test_roofline_moe_reads_more_experts_for_more_tokens():
    dense = ROOFLINE_EXAMPLES["llama-3.1-8b bf16, 1 GPU (H100-class)"]
    moe = ROOFLINE_EXAMPLES["kimi-k2 fp8, 8 GPUs (H200-class)"]
    assert dense.touched_experts(16) == 0
    assert moe.touched_experts(1) == pytest.approx(8)
    assert 8 < moe.touched_experts(16) < 16 * 8 and moe.touched_experts(10_000) == pytest.approx(384)
    dense_v = dense.verify_curve((1, 2, 16))["target_steps"]
    moe_v = moe.verify_curve((1, 2, 16))["target_steps"]
    assert dense_v.loc[1] == 1.0 and dense_v.loc[16] == pytest.approx(1.0)   # memory-bound: verify is ~free
    assert moe_v.loc[16] > moe_v.loc[2] > 1.0                                  # MoE: it is not
    toy = Roofline(name="toy", dense_params=1e9, expert_params=0, bytes_per_param=1, active_params=1e9,
                   mem_bw=1e12, flops=1e14)
    assert toy.forward_s(1) == pytest.approx(1e-3)            # 1 GB / 1 TB/s
    assert toy.forward_s(100) == pytest.approx(2e-3)          # 2 * 1e9 * 100 flop / 1e14: compute-bound


def test_measure_costs_on_the_loop_steps():
    target, draft = tiny_pair()
    cm = measure_costs(target, draft, context_len=20, verify_sizes=(1, 2, 4), settings=((3, 1, None), (3, 2, 5)),
                       repeats=2, warmup=1)
    assert set(cm.verify_s) == {1, 2, 4} and set(cm.extend_s) == {1, 2, 3, 4}
    assert cm.target_step_s > 0 and cm.draft_step_s > 0 and cm.c > 0
    assert set(cm.draft_phase_s) == set(cm.setting_verify_s) == {"K=3", "K=3,topk=2,M=5"}
    assert list(cm.verify_frame().columns) == ["seconds", "target_steps"]
    d = cm.to_dict()
    assert d["c"] == pytest.approx(cm.c) and set(d["verify_target_steps"]) == {1, 2, 4}


def test_bench_command_json(tmp_path, capsys):
    from eagle3lab.models.checkpoint import save_draft

    target, draft = tiny_pair()
    target.model.save_pretrained(tmp_path / "target")
    save_draft(draft, tmp_path / "draft", format="speculators")
    ps = tmp_path / "prompts.jsonl"
    ps.write_text("".join(json.dumps({"ids": p}) + "\n" for p in prompts(2)))
    rc = cli_main(["bench", "--target", str(tmp_path / "target"), "--draft", str(tmp_path / "draft"),
                   "--prompts", str(ps), "--num-steps", "3", "--max-new-tokens", "16", "--repeats", "1",
                   "--device", "cpu", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["lossless"] == {"identical_to_generate": 2, "prompts": 2}
    assert out["settings"]["num_draft_tokens"] == 4 and out["profile"] == "speculators"
    assert set(out["tokens_per_s"]) == {"generate", "greedy_loop", "greedy_loop_decode", "speculative",
                                        "speculative_decode"}
    acc = out["acceptance"]
    assert acc["tau"] == pytest.approx(1 + sum(acc["survival"]))
    assert len(acc["conditional"]) == 3 and set(out["cost_model"]["verify_target_steps"]) >= {"1", "4"}
    pr = out["projection"]
    assert pr["break_even_tau"] == pr["round_cost"]
    assert pr["speedup"] == pytest.approx(pr["tokens_per_round"] / pr["round_cost"])
    assert 1 <= pr["tokens_per_round"] <= acc["tau"]


def test_verdict_has_a_noise_band():
    from eagle3lab.analysis.cost_model import verdict

    assert verdict(1.50, 1.30) == "wins" and verdict(1.20, 1.30) == "loses"
    assert verdict(1.33, 1.30) == "breaks even" == verdict(1.27, 1.30)
    assert verdict(1.33, 1.30, margin=0.0) == "wins"


def test_price_on_served_uses_the_roofline_and_stated_costs():
    from eagle3lab.analysis.roofline import SERVED, price_on_served

    roof = ROOFLINE_EXAMPLES[SERVED["roofline"]]
    table = price_on_served({"one step": {"tau": 1.4, "num_steps": 1, "num_draft_tokens": 2}}, batches=(1, 48))
    assert list(table.index) == ["one step | served, batch 1", "one step | served, batch 48"]
    for b in (1, 48):
        row = table.loc[f"one step | served, batch {b}"]
        v = roof.forward_s(2 * b) / roof.forward_s(b)
        assert row.v_verify == pytest.approx(v) and row.overhead == SERVED["overhead"]
        assert row.break_even_tau == pytest.approx(SERVED["c"] + v + SERVED["overhead"])
    # a busier server pays more for the second token: a second token per sequence reads more routed experts
    assert table.break_even_tau.iloc[1] > table.break_even_tau.iloc[0] > 1


def test_bench_what_if_overrides(tmp_path, capsys):
    """--aux-resid / --norm-before-residual replace the profile's choice, and the output says so."""
    from eagle3lab.models.checkpoint import save_draft

    target, draft = tiny_pair()
    target.model.save_pretrained(tmp_path / "target")
    save_draft(draft, tmp_path / "draft", format="speculators")
    ps = tmp_path / "prompts.jsonl"
    ps.write_text(json.dumps({"ids": prompts(1)[0]}) + "\n")
    base = ["bench", "--target", str(tmp_path / "target"), "--draft", str(tmp_path / "draft"), "--prompts", str(ps),
            "--num-steps", "1", "--max-new-tokens", "8", "--repeats", "1", "--device", "cpu", "--json"]
    assert cli_main(base) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["overrides"] == {} and plain["norm_before_residual"] is False
    assert cli_main(base + ["--aux-resid", "0,1,2", "--norm-before-residual", "true"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert plain["aux_resid"] != [0, 1, 2]
    assert out["aux_resid"] == [0, 1, 2] and out["norm_before_residual"] is True
    assert out["overrides"] == {"aux_resid": [0, 1, 2], "norm_before_residual": True}
    assert out["lossless"] == {"identical_to_generate": 1, "prompts": 1}   # wiring changes acceptance, never output
    for bad in ("0,x,2", "0,1", "0,1,99"):          # not a number, wrong count, past the last layer
        assert cli_main(base + ["--aux-resid", bad]) == 2
        assert "--aux-resid" in capsys.readouterr().err


def test_bench_without_bundled_models_says_what_to_do(tmp_path, capsys):
    from eagle3lab.app.commands.bench import _resolve

    with pytest.raises(Eagle3LabError, match="make data"):
        _resolve(None, tmp_path / "models" / "target", "--target")
    rc = cli_main(["bench", "--target", str(tmp_path / "nope"), "--draft", str(tmp_path / "nope")])
    assert rc == 2 and "nope" in capsys.readouterr().err


def test_tree_projection_uses_measured_tree_phases():
    target, draft = tiny_pair()
    cm = measure_costs(target, draft, context_len=20, verify_sizes=(1, 2, 5), settings=((3, 2, 5),), repeats=2,
                       warmup=1)
    proj = cm.project(2.0, num_steps=3, topk=2, num_draft_tokens=5)
    assert proj.pieces["draft_s"] == cm.draft_phase_s["K=3,topk=2,M=5"]
    assert proj.pieces["verify_s"] == cm.setting_verify_s["K=3,topk=2,M=5"]
    assert torch.isfinite(torch.tensor(proj.speedup))


def test_plots_return_figures():
    import matplotlib

    matplotlib.use("Agg")
    from eagle3lab.analysis.plots import plot_break_even

    fig = hand_costs().plot_verify_curve()
    assert list(fig.axes[0].lines[0].get_ydata()) == pytest.approx([1.0, 1.1, 1.3, 1.7])
    table = explain([{"name": "a", "tau": 2.0, "c": 0.1, "num_steps": 3, "v": 1.2},
                     {"name": "b", "tau": 1.1, "c": 0.1, "num_steps": 15, "v": 1.6}])
    fig = plot_break_even(table)
    assert len(fig.axes[0].collections) >= 2
