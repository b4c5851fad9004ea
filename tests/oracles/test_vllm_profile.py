"""Acceptance profiles against the real vLLM (its CPU build, .venv-vllm 0.32.0), in one vLLM process.

The bundled target with draft-healthy, 8 code prompts x 64 greedy tokens (EOS ignored), K = 4, fp32, as
tests/oracles/test_vllm_serve.py serves it:

- the profile of vLLM's own counters equals the profile eagle3lab emulates for that build (the layers agree
  there, so the counters are exact);
- given a profile's synthetic rates (``rejection_sample_method: "synthetic"``), vLLM reports the accept length
  the profile states, within its interval. vLLM's CPU build without Triton refuses synthetic acceptance
  (``vllm/utils/cpu_triton_utils.py`` ``_rejection_greedy_sample_kernel_impl`` asserts ``not SYNTHETIC_MODE``):
  that test checks the refusal's location and skips, documented; the stand-in tests replace only that kernel
  with a port of vLLM's own Triton kernel (``eagle3lab/oracle/vllm_synthetic.py``), every other step
  vLLM's, for the healthy draft's profile and for draft-case's much lower one replayed on the healthy draft.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers.paths import vllm_python

from eagle3lab import bundled
from eagle3lab.analysis import accept_profile as ap

VERSION, PLATFORM, K, MAX_NEW = "0.32.0", "cpu", 4, 64
SCRIPT = Path(ap.__file__).resolve().parent.parent / "oracle" / "vllm_synthetic.py"
REFUSAL = ("vllm/utils/cpu_triton_utils.py", "_rejection_greedy_sample_kernel_impl")


@pytest.fixture(scope="module")
def emulated(bundled_models):
    """The emulated profiles of both bundled drafts as vLLM 0.32.0's CPU build runs them, and the prompt ids."""
    from eagle3lab.doctor import serve_check as sc
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    target = load_target(str(bundled.TARGET), device="cpu")
    ids = sc.prompt_token_ids(target, sc.default_prompts())
    out = {"ids": ids}
    for name, path in (("healthy", bundled.DRAFT_HEALTHY), ("case", bundled.DRAFT_CASE)):
        draft = load_draft(str(path), target=target, device="cpu")
        out[name] = ap.measure_profile(target, draft, ids, num_steps=K, max_new_tokens=MAX_NEW, engine="vllm",
                                       engine_version=VERSION, engine_platform=PLATFORM, draft_path=path,
                                       prompt_source="bundled code prompts")
    return out


@pytest.fixture(scope="module")
def served(emulated):
    base = {"target": str(bundled.TARGET), "draft": str(bundled.DRAFT_HEALTHY), "prompts": emulated["ids"],
            "max_tokens": MAX_NEW, "num_speculative_tokens": K, "dtype": "float32", "ignore_eos": True}
    synthetic = lambda name: {k: v for k, v in emulated[name].vllm_speculative_config().items()  # noqa: E731
                              if k in ("rejection_sample_method", "synthetic_acceptance_rates")}
    jobs = [{**base, "name": "plain"}, {**base, "name": "synthetic", "speculative": synthetic("healthy")},
            {**base, "name": "stand-in healthy", "speculative": synthetic("healthy"), "stand_in_kernel": True},
            {**base, "name": "stand-in case", "speculative": synthetic("case"), "stand_in_kernel": True}]
    proc = subprocess.run([str(vllm_python()), str(SCRIPT)], input=json.dumps({"jobs": jobs}), capture_output=True,
                          text=True, timeout=900, env={**os.environ, "PYTHONHASHSEED": "0"})
    assert proc.stdout, proc.stderr[-3000:]
    answer = json.loads(proc.stdout)
    assert answer["version"] == VERSION, answer.get("error")
    return answer, {j["name"]: j for j in answer["jobs"]}


def real_profile(job: dict, like: ap.AcceptanceProfile) -> ap.AcceptanceProfile:
    assert job["error"] is None, job["error"]
    return ap.profile_from_counters(*ap.vllm_counter_values(job["counters"], K), like.conditions)


def test_served_counters_give_the_emulated_profile(served, emulated):
    real, mine = real_profile(served[1]["plain"], emulated["healthy"]), emulated["healthy"]
    assert real.conditions.measured_by == "real" and mine.conditions.measured_by == "emulated"
    assert real.histogram == mine.histogram
    assert [x.value for x in real.marginal] == [x.value for x in mine.marginal]
    assert [x.value for x in real.conditional] == [x.value for x in mine.conditional]
    assert real.tau.value == mine.tau.value
    table = ap.compare_profiles(mine, real)
    assert (table["b_minus_a"] == 0).all()


def test_vllm_replays_the_profiles_synthetic_rates(served, emulated):
    answer, jobs = served
    job, profile = jobs["synthetic"], emulated["healthy"]
    assert job["resolved"] == {"rejection_sample_method": "synthetic",
                               "synthetic_acceptance_rates": ap.synthetic_rates(profile)}
    if job["error"] is not None and not answer["has_triton"]:
        assert (job["error"]["type"], job["error"]["file"], job["error"]["function"]) == ("AssertionError", *REFUSAL)
        pytest.skip(f"vLLM {answer['version']}'s CPU build without Triton has no synthetic acceptance: "
                    f"{REFUSAL[0]} {REFUSAL[1]} asserts not SYNTHETIC_MODE (the stand-in tests below replay it)")
    assert real_profile(job, profile).tau.value in profile.tau


@pytest.mark.parametrize("name", ["healthy", "case"])
def test_vllm_with_the_stand_in_kernel_replays_the_rates(served, emulated, name):
    """vLLM's own config resolution, conversion to conditional rates, uniform draws and counters, with only the
    CPU build's missing kernel ported: the accept length is the profile's, whatever the draft served (healthy)."""
    answer, jobs = served
    job, profile = jobs[f"stand-in {name}"], emulated[name]
    assert job["stand_in_kernel"] is not answer["has_triton"]
    assert job["resolved"]["synthetic_acceptance_rates"] == ap.synthetic_rates(profile)
    replayed = real_profile(job, profile)
    assert replayed.tau.value in profile.tau, (replayed.tau, profile.tau)
    healthy = emulated["healthy"]
    if name == "case":   # the replay follows the rates, not the draft: the healthy draft served at case's rates
        assert replayed.tau.value not in healthy.tau and replayed.tau.value < healthy.tau.low
    table = ap.compare_profiles(profile, replayed)
    assert table.filter(like="marginal", axis=0)["b_in_a_interval"].all()
