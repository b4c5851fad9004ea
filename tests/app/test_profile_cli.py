"""eagle3lab profile: the file it writes, what it prints, and bad input."""

from __future__ import annotations

import json

import pytest

from eagle3lab.analysis.accept_profile import AcceptanceProfile
from eagle3lab.app.cli import main as cli_main
from eagle3lab.engines.counters import synthetic_rates

ARGS = ["profile", "--num-prompts", "2", "--max-new-tokens", "16", "--num-steps", "3", "--device", "cpu",
        "--engine", "vllm", "--engine-version", "0.32.0", "--engine-platform", "cpu"]


@pytest.fixture(scope="module")
def written(tmp_path_factory, bundled_models):
    out = tmp_path_factory.mktemp("profile") / "speculation_profile.json"
    assert cli_main([*ARGS, "--out", str(out), "--json"]) == 0
    return out


def test_writes_the_documented_file(written, capsys):
    data = json.loads(written.read_text())
    assert data["schema_version"] == "1.0" and data["num_speculative_tokens"] == 3
    assert sum(data["acceptance_length_histogram"].values()) == data["eagle3lab"]["rounds"]
    c = data["eagle3lab"]["conditions"]
    assert (c["engine"], c["engine_version"], c["engine_platform"], c["measured_by"]) == ("vllm", "0.32.0", "cpu",
                                                                                       "emulated")
    assert c["output_lengths"] == [16, 16] and c["draft"] == "data/models/draft-healthy"
    assert c["prompt_source"].startswith("bundled data/prompts/prompts.jsonl")
    profile = AcceptanceProfile.from_json(data)
    spec = data["eagle3lab"]["vllm_speculative_config"]
    assert synthetic_rates(spec) == pytest.approx([x.value for x in profile.marginal], abs=1e-6)


def test_prints_the_replay_settings(written, tmp_path, capsys):
    capsys.readouterr()
    out = tmp_path / "again.json"
    assert cli_main([*ARGS, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert json.loads(out.read_text()) == json.loads(written.read_text())   # the same measurement, run twice
    profile = AcceptanceProfile.from_json(json.loads(out.read_text()))
    spec = text.split("--speculative-config '", 1)[1].split("'", 1)[0]
    assert json.loads(spec) == profile.vllm_speculative_config()
    assert f"SGLANG_SIMULATE_ACC_LEN={profile.tau.value:.4f}" in text
    assert "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4" in text


def test_bad_input_names_the_flag(tmp_path, capsys):
    assert cli_main([*ARGS[:-2], "--engine-platform", "cpu", "--engine", "sglang",
                     "--out", str(tmp_path / "x.json")]) == 2
    assert "engine_platform" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
