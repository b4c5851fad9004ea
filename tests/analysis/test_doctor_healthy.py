"""doctor raises no critical finding on the healthy drafts of both tracks, on three prompt draws: a critical
finding rests on an interval that excludes zero, and a healthy draft served as trained gives none.

The states of each track's prompt pool are captured once and shared by the draws (a draw is a choice of rows:
evidence.take_rows). Size: the bundled track on three draws of a 16-prompt pool (about 70 s here); the 30-layer
SmolLM2 track on one draw of 8 prompts x 32 tokens (about 170 s a draw on this 2-core machine: three draws of
16 prompts took 500 s, over the suite's budget; `benchmarks/bench_doctor.py` runs both tracks at full size)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3lab import bundled
from eagle3lab.analysis.doctor import run_doctor

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("single_thread", "bundled_models")]

SMOLLM2 = Path(__file__).resolve().parents[2] / "data" / "external" / "smollm2-135m-instruct"
TRACKS = {"bundled": (bundled.TARGET, bundled.DRAFT_HEALTHY),
          "smollm2": (SMOLLM2, bundled.DRAFT_HEALTHY.parent / "smollm2-draft-healthy")}
SIZE = {"bundled": dict(pool=16, seeds=(0, 1, 2)), "smollm2": dict(pool=8, seeds=(0,))}   # see the docstring


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
        report = run_doctor(draft, target=target, bank=bank, engine="sglang", seed=seed,
                            max_prompts=SIZE[track]["pool"],
                            progress=False)
        assert report.critical == [], (track, seed, report.table()[["code", "severity", "gain [95%]"]])
        for f in report.findings:     # nothing measured is called more than info on an interval holding 0
            if f.severity != "info" and f.gain is not None:
                assert f.gain.sign() != 0 or (f.undone is not None and f.undone.sign() != 0), f
