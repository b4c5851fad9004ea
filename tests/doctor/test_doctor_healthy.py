"""doctor raises no critical finding on the bundled track's healthy draft, on three prompt draws, on one thread
and on two: a critical finding needs a cost a user notices (findings.Cost), and a healthy draft served as trained
has none.

The states of the prompt pool are captured once and shared by the draws (a draw is a choice of rows:
evidence.take_rows). Size: three draws of a 16-prompt pool (about 70 s here). The 30-layer SmolLM2 track (about
170 s a draw on this 2-core machine) and bf16 (2-3x slower than fp32 on a CPU) are run by
`benchmarks/doctor_matrix.py` (both tracks, both dtypes, both thread counts, three draws); the suite holds bf16 on
the committed tiny8 drafts (test_doctor_dtypes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.fixture_drafts import torch_threads

from eagle3lab import bundled
from eagle3lab.doctor.run import run_doctor
from eagle3lab.findings import Severity

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("single_thread", "bundled_models")]

TRACKS = {"bundled": (bundled.TARGET, bundled.DRAFT_HEALTHY)}
SIZE = {"bundled": dict(pool=16, seeds=(0, 1, 2))}   # see the docstring
THREADS = {0: 1, 1: 2, 2: 1}                          # seed -> torch threads
FIXED_SEVERITY = {"SGL_TOPK1_DRAFT_TOKENS_ADJUSTED", "SGL_EAGLE3_DRAFT_WITH_EAGLE", "VLLM_EAGLE3_DRAFT_WITH_EAGLE"}


@pytest.mark.timeout(2400)
@pytest.mark.parametrize("track", TRACKS)
def test_no_critical_finding_on_a_healthy_draft(track):
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.state_bank import capture_bank
    from eagle3lab.models.target import load_target

    target_dir, draft = TRACKS[track]
    if not Path(target_dir).exists():
        pytest.fail(f"{target_dir} missing: run `make data`")
    target = load_target(target_dir, device="cpu")
    seqs, lens = greedy_dataset(target, bundled.load_prompts(n=SIZE[track]["pool"]),
                                max_new_tokens=32, progress=False)
    bank = capture_bank(target, seqs, lens)
    for seed in SIZE[track]["seeds"]:
        with torch_threads(THREADS[seed]):
            report = run_doctor(draft, target=target, bank=bank, engine="sglang", seed=seed,
                                max_prompts=SIZE[track]["pool"], progress=False)
        assert report.critical == [], (track, seed, report.table()[["code", "severity", "gain [95%]"]])
        for f in report.findings:     # nothing measured is called more than info on an interval holding 0
            if f.severity != Severity.INFO and f.gain is not None:
                assert f.gain.sign() != 0 or (f.undone is not None and f.undone.sign() != 0), f
            if f.cost is not None:    # a measured finding's severity is what it costs
                assert f.severity == f.cost.severity or f.code in FIXED_SEVERITY, f
