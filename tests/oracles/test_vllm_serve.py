"""The real vLLM (its CPU build, .venv-vllm) serves our drafts; eagle3lab's emulation must reproduce its counters.

Every vLLM job of this module runs in ONE vLLM process (the module fixture; vLLM's import alone costs seconds):
the bundled target without speculation, with draft-healthy and with draft-case, and SmolLM2-135M-Instruct
without speculation, with its healthy and its case draft; 8 code prompts (SmolLM2: the first 4), 64 greedy
tokens (EOS ignored), 4 speculative tokens, fp32. For each draft: vLLM's output is token-identical to vLLM without speculation,
and our emulation, given only the checkpoint and the engine build (vllm 0.32.0, CPU: the layers resolved by
our own rules, engines.profiles.for_build), reproduces vLLM's counters exactly, per position included.
"""

from __future__ import annotations

import json

import pytest
from helpers.paths import vllm_python

from eagle3lab import bundled
from eagle3lab.doctor import serve_check as sc

VERSION, PLATFORM = "0.32.0", "cpu"
K, MAX_NEW = 4, 64
DRAFTS = {  # config -> (track, draft folder, the layers vLLM 0.32.0's CPU build feeds: its V1 runner reads
    # eagle_config's ids as vLLM ids; draft-healthy states SGLang ids [1, 5, 8], draft-case [2, 6, 10])
    "bundled-healthy": ("bundled", bundled.DRAFT_HEALTHY, [1, 5, 8]),
    "bundled-case": ("bundled", bundled.DRAFT_CASE, [2, 6, 10]),
    "smollm2-healthy": ("smollm2", bundled.MODELS / "smollm2-draft-healthy", None),
    "smollm2-case": ("smollm2", bundled.MODELS / "smollm2-draft-case", None),
}
TARGETS = {"bundled": bundled.TARGET, "smollm2": bundled.REAL_TARGETS["smollm2-135m-instruct"]}
# SmolLM2 (135M, 30 layers) on 4 of the 8 prompts: our PyTorch loop for it is most of this module's time
NUM_PROMPTS = {"bundled": 8, "smollm2": 4}


@pytest.fixture(scope="module")
def targets(bundled_models, real_target):
    from eagle3lab.models.target import load_target

    return {"bundled": load_target(str(bundled.TARGET), device="cpu"), "smollm2": real_target}


@pytest.fixture(scope="module")
def prompt_ids(targets):
    prompts = sc.default_prompts()
    return {track: sc.prompt_token_ids(t, prompts[:NUM_PROMPTS[track]]) for track, t in targets.items()}


@pytest.fixture(scope="module")
def served(prompt_ids, tmp_path_factory):
    """Every job in one vLLM process; the answer cached in the module's tmp dir (JSON)."""
    python = vllm_python()
    jobs = [sc.job(f"{track}-baseline", TARGETS[track], None, prompt_ids[track], K, MAX_NEW) for track in TARGETS]
    jobs += [sc.job(name, TARGETS[track], path, prompt_ids[track], K, MAX_NEW)
             for name, (track, path, _) in DRAFTS.items()]
    answer = sc.run_vllm(jobs, python)
    (tmp_path_factory.mktemp("vllm") / "answer.json").write_text(json.dumps(answer))
    assert (answer["version"], answer["platform"]) == (VERSION, PLATFORM), answer.get("error")
    return {j["name"]: j for j in answer["jobs"]}


@pytest.fixture(scope="module")
def ours(targets, prompt_ids):
    from eagle3lab.models.checkpoint import load_draft

    out = {}

    def emulation(name, **overrides):
        track, path, _ = DRAFTS[name]
        key = (name, json.dumps(overrides, sort_keys=True))
        if key not in out:
            platform = overrides.pop("engine_platform", PLATFORM)
            draft = load_draft(str(path), target=targets[track], device="cpu")
            out[key] = sc.emulate(targets[track], draft, prompt_ids[track], num_steps=K, max_new_tokens=MAX_NEW,
                                  engine_version=VERSION, engine_platform=platform, **overrides)
        return out[key]
    return emulation


@pytest.mark.parametrize("name", DRAFTS)
def test_vllm_serves_losslessly(served, name):
    track = DRAFTS[name][0]
    job, base = served[name], served[f"{track}-baseline"]
    assert job["error"] is None and base["error"] is None, (job["error"], base["error"])
    assert job["runner"].endswith("CPUModelRunner")     # vLLM's V1 runner on the CPU build
    assert len(job["outputs"]) == NUM_PROMPTS[track] and all(len(o) == MAX_NEW for o in job["outputs"])
    assert job["outputs"] == base["outputs"]
    assert job["counters"]["vllm:spec_decode_num_drafts"] > 0


@pytest.mark.parametrize("name", DRAFTS)
def test_emulation_reproduces_vllm_counts(served, ours, name):
    track, _, vllm_layers = DRAFTS[name]
    mine = ours(name)
    report = sc.compare(served[name], served[f"{track}-baseline"], mine, num_steps=K)
    # the layers our rules resolve for this build are the ones vLLM's target captured
    assert sorted(mine["aux_resid"]) == served[name]["aux_layers"]
    if vllm_layers is not None:
        assert served[name]["aux_layers"] == vllm_layers
    assert [p["vllm"] for p in report["per_position"]] == [p["eagle3lab"] for p in report["per_position"]]
    assert report["verdict"] == "AGREES", report
    assert report["token_identity"]["eagle3lab_vs_vllm_plain"] == NUM_PROMPTS[track]


def test_a_cuda_build_prediction_is_told_apart(served, ours):
    """The counts discriminate: the same draft predicted for a CUDA build (the V2 runner: SGLang-format ids
    read as resid points (2, 6, 9) by default) does not reproduce the CPU build, and serve-check names the
    layers, which a re-run with vLLM's own layers confirms."""
    mine = ours("bundled-healthy", engine_platform="cuda")
    report = sc.compare(served["bundled-healthy"], served["bundled-baseline"], mine, num_steps=K,
                        whatif=lambda **o: ours("bundled-healthy", engine_platform="cuda", **o))
    assert mine["aux_resid"] != served["bundled-healthy"]["aux_layers"]
    assert report["verdict"] == "DISAGREES"
    assert "layers" in report["differs"] and report["explained_by"] == "layers"


@pytest.mark.parametrize("name", DRAFTS)
def test_the_served_profile_equals_the_emulated_one(served, ours, prompt_ids, name):
    """serve-check --profile-out: the profile of vLLM's own counters (real) and of our emulation's rounds (emulated)
    for the same run; where the counters agree, every rate and the histogram are equal (the file each writes can be
    diffed), the real one a point (aggregate counters), the emulated one an interval over the prompts."""
    track, path, _ = DRAFTS[name]
    both = sc.served_profiles(served[name], ours(name), prompt_ids[track], num_steps=K, max_new_tokens=MAX_NEW,
                              engine_version=VERSION, engine_platform=PLATFORM, target=TARGETS[track], draft=path)
    real, emulated = both.real, both.emulated
    assert (real.conditions.measured_by, emulated.conditions.measured_by) == ("real", "emulated")
    assert real.histogram == emulated.histogram and sum(real.histogram) == served[name]["counters"][
        "vllm:spec_decode_num_drafts"]
    assert real.tau.units == 1 and emulated.tau.units == NUM_PROMPTS[track]
    rows = both.comparison()
    assert [r["quantity"] for r in rows][-1] == "tau" and len(rows) == 2 * K + 1
    assert all(r["real_minus_emulated"] == 0 and r["in_interval"] for r in rows), rows
    assert real.to_json()["marginal_accept_rates"] == emulated.to_json()["marginal_accept_rates"]
