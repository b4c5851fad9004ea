"""doctor's answer on the bundled case over prompt draws and engines: what the evidence supports.

Draws (seeds) of the bundled prompts, for SGLang 0.5.23 and vLLM 0.32.0 (CPU build). Each time: a fix the
engine build can apply, the embedding output resid[0] in slot 0 told apart from the final post-norm state,
norm_before_residual on, the fixed draft beyond noise above the draft as served; across draws and engines
the same rule and the same slot-0 point. The exact points of slots 1 and 2 are NOT asserted equal: this
draft takes resid[2..5] alike in slot 1 and resid[7..9] in slot 2 (cross-entropy within 0.001 nats on 24
prompts, tau within noise), so doctor names the wiring of one draw from a set; every draw's wiring is
held to be within noise, in tau, of every other draw's on the pool (one bank for all). The states of the prompt pool are captured once and shared by every run: a prompt's
greedy continuation and states do not depend on the other prompts in a bank (evidence.take_rows), so a draw
is a choice of rows. Cost here: one capture of 32 prompts, then 4 doctor runs (about 30-60 s of CPU each).
"""

from __future__ import annotations

import pytest

from eagle3lab import bundled
from eagle3lab.analysis.doctor import run_doctor
from eagle3lab.analysis.fix_choice import servable_wiring

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("single_thread", "bundled_models")]

SEEDS = (0, 1)   # two draws per engine in the suite (four doctor runs, about 3 minutes here)
BUILDS = {"sglang": "0.5.23", "vllm": "0.32.0"}


@pytest.fixture(scope="module")
def pool():
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.state_bank import capture_bank
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    seqs, lens = greedy_dataset(target, bundled.load_prompts(n=32), max_new_tokens=48, progress=False)
    return target, capture_bank(target, seqs, lens)


@pytest.fixture(scope="module")
def reports(pool):
    target, bank = pool
    return {(engine, seed): run_doctor(bundled.DRAFT_CASE, target=target, bank=bank, engine=engine,
                                       engine_version=version, engine_platform="cpu" if engine == "vllm" else None,
                                       seed=seed, progress=False)
            for engine, version in BUILDS.items() for seed in SEEDS}


def _answers(reports) -> dict:
    return {k: (tuple(r.finding("WIRING").data["wiring"]), r.ladder[-1].variant["norm_before_residual"])
            for k, r in reports.items()}


@pytest.mark.timeout(1800)
def test_each_draw_gives_a_servable_fix_with_the_embedding_slot_and_the_rule(reports):
    answers = {}
    for (engine, seed), report in reports.items():
        version = BUILDS[engine]
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
        # resid[0] and the final post-norm state are different tensors: an interval separates them
        swapped = [x for x in data["separations"] if x.startswith("[final post-norm")]
        assert swapped and "not told apart" not in swapped[0], data["separations"]
    assert {(w[0], nbr) for w, nbr in answers.values()} == {(0, True)}, answers


@pytest.mark.xfail(strict=False, reason="issue 24 open: on 8 prompts doctor can name a slot-1 point that the 32-prompt "
                   "pool shows worse beyond noise (a draw named (0, 6, 7), 0.063 [0.014, 0.132] below (0, 3, 7) on 2026-12-02); "
                   "the sequential rule stops before slot 1 is settled")
def test_the_draws_wirings_serve_alike(pool, reports):
    """The wirings named on different draws serve alike: within noise of each other in tau on the whole pool."""
    target, bank = pool
    answers = _answers(reports)
    from eagle3lab.decoding.evaluate import evaluate_on_bank
    from eagle3lab.engines.acceptance import bootstrap_ratio_difference
    from eagle3lab.models.checkpoint import load_draft

    draft = load_draft(bundled.DRAFT_CASE, target=target, device="cpu", check_vocab=False)
    view = draft.rewired(norm_before_residual=True, recycle_postnorm=False)
    taus = {w: evaluate_on_bank(bank, view, w, 3, batch_size=2).tau_sums for w in {w for w, _ in answers.values()}}
    for a in taus:
        for b in taus:
            assert bootstrap_ratio_difference(*taus[a], *taus[b]).sign() == 0, (a, b)
