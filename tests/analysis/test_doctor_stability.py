"""doctor's answer on the bundled case does not move with the prompt draw, nor with the engine.

Five draws (seeds) of the bundled prompts, for SGLang 0.5.23 and vLLM 0.32.0 (CPU build): the same servable
wiring and rule each time, a fix the engine build can apply, and the embedding output told apart from the
final post-norm state. The states of the prompt pool are captured once and shared by every run: a prompt's
greedy continuation and states do not depend on the other prompts in a bank (evidence.take_rows), so a draw
is a choice of rows. Cost here: one capture of 32 prompts, then 10 doctor runs (about 30-60 s of CPU each).
"""

from __future__ import annotations

import pytest

from eagle3lab import bundled
from eagle3lab.analysis.doctor import run_doctor
from eagle3lab.analysis.fix_choice import servable_wiring

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("single_thread", "bundled_models")]

SEEDS = (0, 1, 2, 3, 4)
BUILDS = {"sglang": "0.5.23", "vllm": "0.32.0"}


@pytest.fixture(scope="module")
def pool():
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.state_bank import capture_bank
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    seqs, lens = greedy_dataset(target, bundled.load_prompts(n=32), max_new_tokens=48, progress=False)
    return target, capture_bank(target, seqs, lens)


@pytest.mark.timeout(1800)
def test_the_case_answer_holds_over_draws_and_engines(pool):
    target, bank = pool
    answers = {}
    for engine, version in BUILDS.items():
        for seed in SEEDS:
            report = run_doctor(bundled.DRAFT_CASE, target=target, bank=bank, engine=engine, engine_version=version,
                                engine_platform="cpu" if engine == "vllm" else None, seed=seed, progress=False)
            wiring = report.finding("WIRING")
            assert wiring is not None and wiring.severity == "critical", (engine, seed, report.table())
            data = wiring.data
            # a fix the build can apply: the chosen wiring is captured exactly, with these ids
            assert data["servable"] == data["wiring"] and data["ids"] is not None, (engine, seed, wiring.fix)
            assert servable_wiring(tuple(data["wiring"]), engine, 12, "LlamaForCausalLM", version)[0] == \
                tuple(data["wiring"])
            assert f"servable by {engine} {version}" in wiring.evidence
            assert 8 <= report.prompts_used <= 24 and data["prompts"] == report.prompts_used
            answers[engine, seed] = (tuple(data["wiring"]), report.ladder[-1].variant["norm_before_residual"])
            # the fixed draft beats the draft as served beyond noise
            assert report.ladder[-1].tau.low > report.ladder[0].tau.high, report.ladder_table()
            # resid[0] and the final post-norm state are different tensors: the evidence says which the
            # weights fit (an interval that separates them) or that it did not tell them apart
            assert any("final post-norm" in s for s in data["separations"]), data["separations"]
    assert len(set(answers.values())) == 1, answers
    wiring, nbr = next(iter(answers.values()))
    assert 0 in wiring and nbr, answers          # the embedding output in the wiring, norm_before_residual on
