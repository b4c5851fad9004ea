"""Notebooks 05 and 07 in dump mode (analysis.offline_reading, analysis.chat_reading) on dumps of the bundled target:
the words and claims say where the teacher-forced anchors lie (``scored_from``: from prompt_len on, the greedy
answers; no prompt_len, every position, the prompt included; a continuation not stated greedy), and 07 names the
wiring it scored."""

from __future__ import annotations

import pytest

from eagle3lab import bundled
from eagle3lab.decoding.evaluate import greedy_dataset
from eagle3lab.models.hidden_dump import dump_hidden_states
from eagle3lab.models.target import load_target
from eagle3lab.models.target_source import open_target
from eagle3lab.readings import nb05_acceptance_rates as offline_reading
from eagle3lab.readings import nb07_chat_template as chat_reading
from eagle3lab.readings.dump_mode import scored_from

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def target(bundled_models):
    return load_target(bundled.TARGET, device="cpu")


@pytest.fixture(scope="module")
def greedy(target):
    return greedy_dataset(target, bundled.load_prompts(n=3, length="short"), max_new_tokens=12)


def _dump(target, seqs, folder, **kw):
    dump_hidden_states(target, seqs, folder, points=list(range(target.num_layers + 1)), batch_size=2, progress=False,
                       **kw)
    return open_target("/nowhere", dump_dir=folder, target_head=bundled.TARGET)


def _drafts(source):
    return {chat_reading.CHAT_DRAFT: source.load_draft(bundled.DRAFT_HEALTHY),
            chat_reading.RAW_DRAFT: source.load_draft(bundled.DRAFT_CASE)}


def test_a_dump_without_prompt_lens_says_its_anchors_include_the_prompt(target, greedy, tmp_path):
    seqs, lens = greedy
    source = _dump(target, seqs, tmp_path / "bare")                # no prompt_lens, no continuation stated
    where = scored_from(source.dump)
    assert where.claims() == {"scored_from": "every position (no prompt_len)", "prompt_lens_stated": False,
                              "continuation_greedy": False}
    assert "The dump bare states no prompt_len per sample" in where.words() and "the prompt (and any chat template)" in where.words()
    assert "; it does not state its continuation as the target's greedy output" in where.words()
    bank = source.bank()
    assert bank.prompt_lens == [1] * len(seqs)                      # what the bank silently defaults to

    # notebook 05's summary: the sentence and the claim, before the taus scored on those anchors
    chains, _ = offline_reading.teacher_forced_chains(bank, source.load_draft(bundled.DRAFT_HEALTHY), [1, 2])
    text, claims = offline_reading.offline_summary(source=source, skipped=["x"], chains=chains)
    assert claims["scored_from"] == "every position (no prompt_len)" and claims["prompt_lens_stated"] is False
    assert where.words() + " Teacher-forced on the dump's" in text

    # notebook 07's: the same, in the printed words and in the summary, with the wiring scored named
    drafts = _drafts(source)
    scored = chat_reading.teacher_forced_drafts(bank, drafts, 2, where=where)
    assert where.words() in scored.words() and scored.claims()["scored_from"] == "every position (no prompt_len)"
    text, claims = chat_reading.offline_summary(source=source, skipped=["x"], drafts=drafts, engine="sglang",
                                                scored=scored)
    assert where.words() in text and claims["teacher_forced"]["prompt_lens_stated"] is False


def test_a_dump_with_prompt_lens_and_greedy_answers_is_scored_from_them(target, greedy, tmp_path):
    seqs, lens = greedy
    source = _dump(target, seqs, tmp_path / "answers", prompt_lens=lens, greedy=True)
    where = scored_from(source.dump)
    assert where.what == "the greedy answers" and where.claims()["prompt_lens_stated"] is True
    assert where.words() == "Scored from each sample's prompt_len on: the target's greedy answers (the dump answers states both)."
    bare = _dump(target, seqs, tmp_path / "bare")
    draft = source.load_draft(bundled.DRAFT_HEALTHY)
    answers, _ = offline_reading.teacher_forced_chains(source.bank(), draft, [1])
    every, _ = offline_reading.teacher_forced_chains(bare.bank(), draft, [1])
    # the bare dump scores the prompts' positions too: more anchors, another tau
    assert every.tau["chain 1"].value != pytest.approx(answers.tau["chain 1"].value, abs=1e-6)
    not_greedy = _dump(target, seqs, tmp_path / "sampled", prompt_lens=lens)
    w = scored_from(not_greedy.dump)
    assert w.what == "the answers (continuation not stated greedy)" and "no prompt_len" not in w.words()
    assert "may not have written" in w.words()


def test_07s_dump_summary_names_the_wiring_it_scored_and_whether_the_engine_serves_it(target, greedy, tmp_path):
    seqs, lens = greedy
    source = _dump(target, seqs, tmp_path / "d", prompt_lens=lens, greedy=True)
    drafts = _drafts(source)
    scored = chat_reading.teacher_forced_drafts(source.bank(), drafts, 2, where=scored_from(source.dump))
    own = {label: list(d.aux_resid) for label, d in drafts.items()}
    assert scored.claims()["wiring"] == own and scored.claims()["scored_as"] == "own wiring"
    assert f"the chat-trained draft resid{own['chat-trained draft']}" in scored.words()
    text, claims = chat_reading.offline_summary(source=source, skipped=["x"], drafts=drafts, engine="sglang",
                                                scored=scored)
    # SGLang reads both bundled drafts' ids and arithmetic as their own (SpecForge) profile does
    assert claims["served_as_scored"] == {"chat-trained draft": True, "raw-text draft": True}
    assert "These are the drafts as sglang serves them too (the same wiring and settings)." in text
    assert f"the raw-text draft {chat_reading.resid_label(own['raw-text draft'], 12)} (its own wiring)" in text
    # vLLM reads the case draft's ids otherwise, and both drafts' arithmetic: the taus are not as it serves them
    text, claims = chat_reading.offline_summary(source=source, skipped=["x"], drafts=drafts, engine="vllm",
                                                scored=scored)
    fed = list(drafts["raw-text draft"].under("vllm").aux_resid)
    assert fed != own["raw-text draft"] and claims["fed"]["raw-text draft"] == fed
    assert claims["served_as_scored"] == {"chat-trained draft": False, "raw-text draft": False}
    assert (f"the raw-text draft {chat_reading.resid_label(fed, 12)} (its own: "
            f"{chat_reading.resid_label(own['raw-text draft'], 12)})") in text
    assert ("Not as vllm serves them: its wiring or settings differ for the chat-trained draft and the "
            "raw-text draft.") in text
