"""`eagle3lab doctor` on the bundled models: the seed case found and proven, the healthy draft clean."""

from __future__ import annotations

import json

import pytest

from eagle3lab import bundled
from eagle3lab.app.cli import main
from eagle3lab.engines.flags import SEED_FLAGS


def doctor(capsys, *args):
    # one thread: make test runs two workers on two cores (two threads each made these runs about 10x slower
    # than alone), and the setting stays with the worker's process for its later tests
    code = main(["doctor", "--target", str(bundled.TARGET), "--engine", "sglang", "--threads", "1", "--json", *args])
    return code, json.loads(capsys.readouterr().out)


@pytest.mark.timeout(600)
def test_the_bundled_seed_case(bundled_models, capsys, tmp_path):
    # an SGLang build of the seed's kind: llama.py cannot capture the embedding output up to 0.5.21
    code, out = doctor(capsys, "--draft", str(bundled.DRAFT_CASE), "--engine-args", SEED_FLAGS,
                       "--engine-version", "0.5.21", "--max-prompts", "24", "--write-fixed", str(tmp_path / "fixed"))
    found = {f["code"]: f for f in out["findings"]}
    for name in ("WIRING", "FIRST_LAYER_RULE"):
        assert found[name]["severity"] == "critical", (name, out["findings"])
    assert found["SGL_TOPK1_DRAFT_TOKENS_ADJUSTED"]["severity"] == "warning"      # the cap: found and measured
    assert found["SGL_TOPK1_DRAFT_TOKENS_ADJUSTED"]["tau_after"]["low"] > found["SGL_TOPK1_DRAFT_TOKENS_ADJUSTED"]["tau_before"]["high"]
    assert 0 in found["WIRING"]["data"]["wiring"], "the embedding output resid[0] is in the trained wiring"
    taus = [r["tau"] for r in out["ladder"]]
    assert taus == sorted(taus) and out["ladder"][-1]["tau_low"] > out["ladder"][0]["tau_high"]
    # SGLang ignores the residual rule and, in 0.5.21, its Llama model file cannot capture resid[0]: both remain
    assert out["engine_version"] == "0.5.21"
    assert code == 1 and set(out["remaining_critical"]) == {"WIRING", "FIRST_LAYER_RULE"}
    fix = found["WIRING"]["fix"]
    assert "sglang 0.5.21 cannot capture" in fix and "vllm captures them exactly" in fix
    # ... which the newest code read (0.5.22 on) can: said beside it, with its ids
    assert "sglang's newest code read captures them exactly (config key eagle_config.eagle_aux_hidden_state_layer_ids: " in fix
    # what SGLang 0.5.21 can be given (resid[1] for the embedding it cannot capture, its own rule) measures as predicted
    assert out["written"]["agrees"], out["written"]
    assert "resid[1]" in out["written"]["served_wiring"] and "resid[0]" not in out["written"]["served_wiring"]


@pytest.mark.timeout(600)
def test_the_bundled_healthy_draft_is_clean(bundled_models, capsys):
    code, out = doctor(capsys, "--draft", str(bundled.DRAFT_HEALTHY))
    assert code == 0 and out["critical"] == 0 and out["remaining_critical"] == []
    assert len(out["ladder"]) == 1


@pytest.mark.timeout(600)
def test_doctor_from_a_dump_without_the_target_run(bundled_models, capsys, tmp_path):
    """A cluster's dump (here written from the bundled target) and the target's config and head only."""
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.hidden_dump import MANIFEST, dump_hidden_states
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    seqs, _ = greedy_dataset(target, bundled.load_prompts(n=6), max_new_tokens=24)
    dump_hidden_states(target, seqs, tmp_path / "dump", points=tuple(range(13)), progress=False)
    base = ["doctor", "--draft", str(bundled.DRAFT_HEALTHY), "--target-head", str(bundled.TARGET), "--json"]
    assert main([*base, "--dump", str(tmp_path / "dump")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["critical"] == 0 and "states from the dump" in out["target"]
    # vLLM's own folder has no manifest: its layer ids are given instead
    (tmp_path / "dump" / MANIFEST).unlink()
    assert main([*base, "--dump", str(tmp_path / "dump")]) == 2
    assert "manifest.json" in capsys.readouterr().err
    assert main([*base, "--dump", str(tmp_path / "dump"), "--dump-layer-ids", ",".join(map(str, range(13)))]) == 0
    assert json.loads(capsys.readouterr().out)["ladder"][0]["tau"] == out["ladder"][0]["tau"]
