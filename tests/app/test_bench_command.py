"""eagle3lab bench: its --json object, what-if overrides and the message when models are missing."""

from __future__ import annotations

import json

import pytest
from helpers.tiny_models import prompts, tiny_pair

from eagle3lab.app.cli import main as cli_main
from eagle3lab.decoding.lossless import TIE_ULPS
from eagle3lab.errors import Eagle3LabError


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
    assert out["lossless"] == {"identical_to_generate": 2, "prompts": 2, "tie_flips": 0, "bugs": 0, "dtype": "float32",
                               "tie_ulps": TIE_ULPS, "divergences": []}
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
    # wiring changes acceptance, never output
    assert out["lossless"] == {"identical_to_generate": 1, "prompts": 1, "tie_flips": 0, "bugs": 0, "dtype": "float32",
                               "tie_ulps": TIE_ULPS, "divergences": []}
    for bad in ("0,x,2", "0,1", "0,1,99"):          # not a number, wrong count, past the last layer
        assert cli_main(base + ["--aux-resid", bad]) == 2
        assert "--aux-resid" in capsys.readouterr().err


def test_bench_without_bundled_models_says_what_to_do(tmp_path, capsys):
    from eagle3lab.app.cli import model_path

    with pytest.raises(Eagle3LabError, match="make data"):
        model_path(None, tmp_path / "models" / "target", "--target")
    rc = cli_main(["bench", "--target", str(tmp_path / "nope"), "--draft", str(tmp_path / "nope")])
    assert rc == 2 and "nope" in capsys.readouterr().err


def test_bench_profile_follows_the_engine_build(tmp_path, capsys):
    """--profile vllm --engine-version V --engine-platform P: the ids the build's model runner reads feed fc."""
    from eagle3lab.models.checkpoint import save_draft

    target, draft = tiny_pair()
    target.model.save_pretrained(tmp_path / "target")
    # ids under eagle_config in SGLang numbering ([0, 1, 2] for resid[1, 2, 3]); the tiny target has N = 4
    save_draft(draft.rewired(aux_resid=[1, 2, 3]), tmp_path / "draft", format="sglang")
    nested = json.loads((tmp_path / "draft" / "config.json").read_text())["eagle_config"]
    ids = nested["eagle_aux_hidden_state_layer_ids"]
    ps = tmp_path / "prompts.jsonl"
    ps.write_text(json.dumps({"ids": prompts(1)[0]}) + "\n")
    base = ["bench", "--target", str(tmp_path / "target"), "--draft", str(tmp_path / "draft"), "--prompts", str(ps),
            "--num-steps", "1", "--max-new-tokens", "8", "--repeats", "1", "--device", "cpu", "--json",
            "--profile", "vllm", "--engine-version", "0.32.0"]
    assert cli_main(base + ["--engine-platform", "cpu"]) == 0
    cpu = json.loads(capsys.readouterr().out)
    assert cpu["aux_resid"] == sorted(ids) and cpu["engine_build"]["model_runner"] == "V1"
    assert [n["code"] for n in cpu["engine_build"]["aux_notes"]] == ["VLLM_AUX_IDS_NESTED_READ"]
    assert ids == [0, 1, 2] and cpu["engine_build"]["engine_platform"] == "cpu"   # resid[0, 1, 2], not [1, 2, 3]
    # (a CUDA build of 0.32.0 runs V2, which ignores these ids: tests/engines/test_vllm_runner.py, test_inspect_*)
    assert cli_main(base[:-4] + ["--engine-platform", "cpu"]) == 2   # a build needs --profile
    assert "--profile" in capsys.readouterr().err
