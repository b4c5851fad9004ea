"""A draft the chosen engine cannot read as written is a finding with its fix, never an early exit; the fix is
chosen from the set within noise, servable by the build (fix_choice)."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.fixture_drafts import draft_dir

from eagle3lab.analysis.wiring_search import key_of
from eagle3lab.app.cli import main
from eagle3lab.decoding.evaluate import BankScore
from eagle3lab.doctor.fix_choice import Build, choose
from eagle3lab.models.state_bank import FINAL_NORMED

pytestmark = pytest.mark.usefixtures("single_thread")


def _score(per_prompt_ce: list[float], tau: float, n: int = 12) -> BankScore:
    """A score on ``n`` prompts: cross-entropy per prompt as given (10 positions each), ``tau`` on each."""
    accepted = [[round(tau - 1)] * 10 for _ in range(n)]
    return BankScore(3, [c * 10 for c in per_prompt_ce], [10] * n, accepted)


def _noisy(center: float, spread: float, n: int = 12, seed: int = 0) -> list[float]:
    g = torch.Generator().manual_seed(seed)
    return (center + spread * torch.randn(n, generator=g)).tolist()


VARIANT = {"norm_before_residual": True, "recycle_postnorm": False}


def test_the_fix_is_the_servable_member_of_the_set():
    # the final post-norm state scores best, resid[0] in its place within noise: the fix is the servable one
    fitted = (FINAL_NORMED, 3, 7)
    scores = {key_of(fitted, VARIANT): _score(_noisy(4.0, 0.05, seed=1), 3.0),
              key_of((0, 3, 7), VARIANT): _score(_noisy(4.0, 0.05, seed=2), 3.0),
              key_of((3, 7, 11), VARIANT): _score(_noisy(5.0, 0.05, seed=3), 1.0)}
    build = Build("vllm", "0.32.0", "cpu", 12, "LlamaForCausalLM")
    choice = choose(scores, list(scores), build, VARIANT)
    assert choice.wiring == (0, 3, 7) and choice.servable and choice.cost is None
    assert "servable by vllm 0.32.0 cpu build" in choice.statement
    # none servable: the nearest servable wiring, with its measured cost, never "none"
    only = {key_of(fitted, VARIANT): scores[key_of(fitted, VARIANT)]}
    # resid[N] (before the final norm) and resid[0] are both tried in its place, each measured
    near = {True: _score(_noisy(4.1, 0.05, seed=5), 2.0), False: _score(_noisy(4.2, 0.05, seed=4), 1.0)}
    choice = choose(only, list(only), build, VARIANT, measure=lambda w, v: near[0 in w])
    assert choice.wiring == (0, 3, 7) and choice.cost is not None and choice.cost.value == pytest.approx(-1.0)
    assert "nearest it can: [resid[0] (embedding), resid[3], resid[7]]" in choice.statement


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_four_aux_speculators_draft_under_sglang_is_a_finding(capsys):
    """SGLang reads ids only from eagle_config: a speculators-format four-aux draft gets its default three ids.
    doctor says so, with the ids to write, and searches the wiring anyway (exit 1, not 2)."""
    target = draft_dir("four-aux").parent.parent / "target"
    code = main(["doctor", "--target", str(target), "--draft", str(draft_dir("four-aux")), "--engine", "sglang",
                 "--num-prompts", "8", "--max-prompts", "8", "--max-new-tokens", "24", "--json"])
    out = json.loads(capsys.readouterr().out)
    found = {f["code"]: f for f in out["findings"]}
    assert code == 1, out
    unreadable = found["AUX_IDS_UNREADABLE"]
    assert unreadable["severity"] == "critical"
    assert "eagle_config.eagle_aux_hidden_state_layer_ids" in unreadable["fix"], unreadable
    assert len(unreadable["data"]["wiring"]) == 4 and out["search"]
