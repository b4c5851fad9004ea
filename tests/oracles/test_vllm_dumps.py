"""A dump written by the real vLLM (``extract_hidden_states``, its CPU build) for the bundled target on the
8 default prompts, read by eagle3lab: the same states, tokens and prompt ends as the live target, and
doctor gives the same findings and as-served tau from it as from the live target.

vLLM runs once per module (``eagle3lab/oracle/vllm_dump.py``, about 16 s idle, minutes loaded).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from helpers.paths import vllm_python

from eagle3lab import bundled

SCRIPT = Path(__file__).resolve().parents[2] / "eagle3lab" / "oracle" / "vllm_dump.py"
MAX_NEW_TOKENS = 48   # doctor's default continuation


@pytest.fixture(scope="module")
def vllm_dump(tmp_path_factory):
    python = vllm_python()
    tmp = tmp_path_factory.mktemp("vllm-dump")
    (tmp / "prompts.json").write_text(json.dumps(bundled.load_prompts(n=8)))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    run = subprocess.run([str(python), str(SCRIPT), "--target", str(bundled.TARGET), "--prompts",
                          str(tmp / "prompts.json"), "--out", str(tmp / "dump"),
                          "--max-new-tokens", str(MAX_NEW_TOKENS)],
                         capture_output=True, text=True, timeout=900, env=env)
    assert run.returncode == 0, run.stderr[-4000:]
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["engine"]["version"] == "0.32.0" and summary["engine"]["platform"] == "cpu"
    return tmp / "dump"


@pytest.fixture(scope="module")
def live():
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.state_bank import capture_bank
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    seqs, lens = greedy_dataset(target, bundled.load_prompts(n=8), max_new_tokens=MAX_NEW_TOKENS)
    return target, seqs, lens, capture_bank(target, seqs, lens)


@pytest.mark.timeout(1200)
def test_vllm_writes_the_live_targets_states(bundled_models, vllm_dump, live):
    from eagle3lab.models.hidden_dump import HiddenDump
    from eagle3lab.models.state_bank import FINAL_NORMED, TargetHead, bank_from_dump

    target, seqs, lens, bank = live
    dump = HiddenDump(vllm_dump)
    assert len(dump) == 8 and dump.resid == tuple(range(13)) and dump.continuation == "greedy"
    # the same tokens: vLLM's greedy output is the live target's, and the file holds prompt + 48 tokens
    # (the last output is never an input), each prompt's end as the live dataset has it
    assert dump.prompt_lens == lens
    assert [s.token_ids.tolist() for s in dump] == seqs
    worst = {}
    for i, sample in enumerate(dump):
        n = len(seqs[i])
        for j, k in enumerate(dump.resid):
            want = bank.states[k][i, :n]
            worst[k] = max(worst.get(k, 0.0), float((sample.hidden_states[:, j] - want).abs().max() / want.abs().max()))
        # id N is resid[N] (hidden + residual before the final norm), not the post-norm state
        normed = bank.states[FINAL_NORMED][i, :n]
        assert float((sample.hidden_states[:, -1] - normed).abs().max() / normed.abs().max()) > 1
    assert max(worst.values()) < 1e-5, worst   # measured 1.3e-6 at most; resid[0] exactly
    assert worst[0] == 0.0
    # the bank read from the dump: resid[N] passes the post-norm and greedy checks, the same top-1
    from_dump = bank_from_dump(dump, TargetHead.from_folder(bundled.TARGET))
    assert from_dump.prompt_lens == lens and from_dump.lengths == bank.lengths
    real = torch.arange(bank.top1.shape[1])[None] < torch.tensor(bank.lengths)[:, None]
    assert torch.equal(from_dump.top1[real], bank.top1[real])
    # draft-case as vLLM 0.32.0's CPU build serves it (resid[2, 6, 10]): the same counts from either bank
    from eagle3lab.analysis.wiring_search import served_views
    from eagle3lab.decoding.evaluate import evaluate_on_bank
    from eagle3lab.models.checkpoint import load_draft

    draft = load_draft(bundled.DRAFT_CASE, target=target, device="cpu", check_vocab=False)
    view = served_views(draft, 12, draft.target_arch, engine_versions={"vllm": "0.32.0"},
                        engine_platforms={"vllm": "cpu"})["vllm"]
    scores = [evaluate_on_bank(b, view, tuple(view.aux_resid), 3) for b in (bank, from_dump)]
    assert scores[0].accept == scores[1].accept   # measured: tau 2.073 [1.905, 2.236] over 368 rounds, both


@pytest.mark.timeout(2400)
def test_doctor_from_vllms_dump_answers_as_from_the_live_target(bundled_models, vllm_dump, live):
    from eagle3lab.doctor.run import run_doctor

    target = live[0]
    common = dict(engine="vllm", engine_version="0.32.0", engine_platform="cpu", progress=False)
    from_dump = run_doctor(bundled.DRAFT_CASE, target=str(bundled.TARGET), dump=vllm_dump, **common).to_dict()
    from_live = run_doctor(bundled.DRAFT_CASE, target=target, prompts=bundled.load_prompts(n=8),
                           max_new_tokens=MAX_NEW_TOKENS, **common).to_dict()
    assert sorted(f["code"] for f in from_dump["findings"]) == sorted(f["code"] for f in from_live["findings"])
    a, b = from_dump["ladder"][0], from_live["ladder"][0]
    assert a["rung"] == b["rung"] == "as launched" and a["wiring"] == b["wiring"]
    assert a["tau"] == pytest.approx(b["tau"], abs=1e-9)
    assert (a["tau_low"], a["tau_high"]) == pytest.approx((b["tau_low"], b["tau_high"]), abs=1e-9)
