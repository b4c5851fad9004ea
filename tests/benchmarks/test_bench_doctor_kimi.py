"""benchmarks/bench_doctor.py --shape kimi-k2.5 at a tiny scale: the case is what doctor --dump reads (61 layers
+ embedding, a head folder, an MLA draft with three aux states and a vocab map), and the run reports its
seconds, peak memory, evaluations and the doctor's answer."""

from __future__ import annotations

import importlib.util
import json

import pytest
import torch

from eagle3lab import bundled

spec = importlib.util.spec_from_file_location("bench_doctor", bundled.ROOT / "benchmarks" / "bench_doctor.py")
bench_doctor = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_doctor)

pytestmark = pytest.mark.usefixtures("single_thread")


def test_shape_path_reports_time_memory_evaluations_and_the_answer(tmp_path, capsys):
    from eagle3lab.models.hidden_dump import HiddenDump
    from eagle3lab.models.state_bank import TargetHead

    out = tmp_path / "kimi.json"
    assert bench_doctor.main(["--shape", "kimi-k2.5", "--scale", "0.02", "--layers", "8", "--prompts", "8",
                              "--prompt-len", "8", "--new-tokens", "24", "--workdir", str(tmp_path / "case"),
                              "--out", str(out), "--in-process", "--threads", "1"]) == 0
    report = json.loads(out.read_text())
    case, doctor = report["case"], report["doctor"]
    assert doctor["seconds"] > 0 and doctor["peak_rss_gib"] > 0 and doctor["evaluations"] > 0
    assert doctor["prompts"] == 8 and doctor["tau_fixed"] >= doctor["tau_served"] > 1
    # the answer: the draft's trained wiring, resid[2, 4, 5] at 8 layers (its config's ids [1, 3, 4] are SGLang's)
    assert case["trained"] == [2, 4, 5] and case["ids"] == [1, 3, 4]
    assert doctor["chosen"] == ["2", "4", "5"], doctor["search"]
    printed = capsys.readouterr().out
    assert "evaluations:" in printed and "peak_rss_gib:" in printed and "seconds:" in printed
    # the case is what doctor --dump reads: resid[0..N] in bf16 with prompt ends, a Kimi-K2.5 head folder, an MLA
    # draft in SGLang's format with a vocab map
    dump = HiddenDump(case["dump"])
    assert dump.resid == tuple(range(9)) and dump.prompt_lens == [8] * 8 and dump.continuation == "greedy"
    assert dump[0].hidden_states.shape == (32, 9, case["shape"]["hidden"])
    assert dump[0].hidden_states.dtype == torch.bfloat16
    head_config = json.loads((tmp_path / "case" / "head" / "config.json").read_text())
    assert head_config["text_config"]["architectures"] == ["DeepseekV3ForCausalLM"]
    assert TargetHead.from_folder(case["head"]).lm_head.shape == (case["shape"]["vocab"], case["shape"]["hidden"])
    draft_config = json.loads((tmp_path / "case" / "draft" / "config.json").read_text())
    assert draft_config["architectures"] == ["Eagle3DeepseekV2ForCausalLM"]
    assert draft_config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 4]
    assert draft_config["draft_vocab_size"] == case["shape"]["draft_vocab"] < case["shape"]["vocab"]
    full = bench_doctor._kimi_case().shape()   # the full shape is Kimi-K2.5's
    assert (full["layers"], full["hidden"], full["vocab"], full["draft_vocab"]) == (61, 7168, 163840, 32000)
