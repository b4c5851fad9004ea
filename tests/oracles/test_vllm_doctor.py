"""doctor's numbers held against the real vLLM 0.32.0 (CPU build) on draft-case and the same 8 code prompts.

doctor (engine vllm, version 0.32.0, CPU build, chain of 4, 64 greedy tokens) measures the draft as served and
names a fix; write_fixed writes it. One vLLM process then serves the bundled target without speculation, with
draft-case as shipped and with the written checkpoint. doctor's as-served interval must hold vLLM's tau; the
written fix must be servable by that build, served losslessly, reproduced exactly by our emulation, reach
doctor's predicted fixed tau within its interval and beat the shipped draft beyond noise.
"""

from __future__ import annotations

import json

import pytest
from helpers.paths import vllm_python

from eagle3lab import bundled
from eagle3lab.doctor import serve_check as sc

VERSION, PLATFORM = "0.32.0", "cpu"
K, MAX_NEW = 4, 64


@pytest.fixture(scope="module")
def target(bundled_models):
    from eagle3lab.models.target import load_target

    return load_target(str(bundled.TARGET), device="cpu")


@pytest.fixture(scope="module")
def prompt_ids(target):
    return sc.prompt_token_ids(target, sc.default_prompts())


@pytest.fixture(scope="module")
def doctor(prompt_ids, tmp_path_factory):
    """doctor on draft-case for vLLM 0.32.0's CPU build, and the checkpoint it writes (or why it cannot)."""
    from helpers.tiny_models import one_thread

    from eagle3lab.doctor.run import run_doctor
    from eagle3lab.doctor.write_fixed import write_fixed

    vllm_python()   # nothing to compare with without the engine: skip (locally) before the costly part
    with one_thread():
        report = run_doctor(bundled.DRAFT_CASE, target=bundled.TARGET, engine="vllm", engine_version=VERSION,
                            engine_platform=PLATFORM, prompts=prompt_ids, max_new_tokens=MAX_NEW, num_steps=K,
                            progress=False)
        out = tmp_path_factory.mktemp("fixed") / "draft-case-fixed"
        try:
            written, error = write_fixed(report, out), None
        except ValueError as err:   # the fix named is not one a checkpoint for this build can carry
            written, error = None, err
    return report, written, error, out


@pytest.fixture(scope="module")
def served(prompt_ids, doctor):
    _, written, _, out = doctor
    jobs = [sc.job("baseline", bundled.TARGET, None, prompt_ids, K, MAX_NEW),
            sc.job("shipped", bundled.TARGET, bundled.DRAFT_CASE, prompt_ids, K, MAX_NEW)]
    if written is not None:
        jobs.append(sc.job("fixed", bundled.TARGET, out, prompt_ids, K, MAX_NEW))
    answer = sc.run_vllm(jobs, vllm_python())
    assert (answer["version"], answer["platform"]) == (VERSION, PLATFORM)
    report = doctor[0]
    record = {"vllm": answer, "doctor": {"as_served": str(report.ladder[0].tau), "written": written and {
        k: str(v) for k, v in written.items() if k in ("served_wiring", "tau", "predicted", "difference")}}}
    (out.parent / "record.json").write_text(json.dumps(record))   # the numbers, beside the written checkpoint
    return {j["name"]: j for j in answer["jobs"]}


def _tau(job) -> float:
    return sc.tau_of(sc.vllm_counters(job))


def test_doctor_as_served_interval_holds_vllms_tau(doctor, served):
    report = doctor[0]
    assert report.prompts_used == 8 and report.ladder[0].num_steps == K
    as_served = report.ladder[0].tau
    assert served["shipped"]["error"] is None, served["shipped"]["error"]
    assert _tau(served["shipped"]) in as_served, (_tau(served["shipped"]), as_served)


def test_doctor_names_a_fix_vllm_0_32_can_serve(doctor):
    report, written, error, _ = doctor
    assert error is None, f"doctor's fix cannot be written for vLLM {VERSION}: {error}"
    wiring = report.finding("WIRING")
    assert wiring is None or wiring.data.get("servable") == wiring.data.get("wiring"), wiring.data
    assert written["checkpoint_errors"] == [] and written["agrees"], written


def test_written_fix_served_by_vllm_reaches_the_predicted_tau(doctor, served, target, prompt_ids):
    from eagle3lab.models.checkpoint import load_draft

    report, written, error, out = doctor
    assert error is None and "fixed" in served, f"no checkpoint written: {error}"
    fixed, shipped, base = served["fixed"], served["shipped"], served["baseline"]
    assert fixed["error"] is None, fixed["error"]
    assert fixed["outputs"] == base["outputs"]                          # lossless
    # our emulation reads the written checkpoint as this build does and reproduces vLLM exactly
    ours = sc.emulate(target, load_draft(str(out), target=target, device="cpu"), prompt_ids, num_steps=K,
                      max_new_tokens=MAX_NEW, engine_version=VERSION, engine_platform=PLATFORM)
    assert sorted(ours["aux_resid"]) == fixed["aux_layers"]
    assert sc.compare(fixed, base, ours, num_steps=K)["verdict"] == "AGREES"
    predicted, as_served = report.written_fix.tau, report.ladder[0].tau
    assert _tau(fixed) in predicted, (_tau(fixed), predicted)
    assert _tau(fixed) > as_served.high and predicted.low > as_served.high, (_tau(fixed), predicted, as_served)
    assert _tau(fixed) > _tau(shipped)
