"""Widgets and their headless twins: the same views, tested without a frontend."""

from __future__ import annotations

import pytest
from helpers.tiny_models import prompts, tiny_pair

from eagle3lab.app.widgets import (
    fc_ordering_widget,
    flags_widget,
    measure_ordering,
    token_rounds,
    token_view,
    token_view_html,
)
from eagle3lab.decoding.evaluate import evaluate_on_bank, greedy_dataset
from eagle3lab.decoding.speculative import RoundLog, SpecResult, speculative_generate
from eagle3lab.models.state_bank import capture_bank

pytestmark = pytest.mark.usefixtures("single_thread")


def log(drafted, accepted, emitted):
    return RoundLog(drafted=tuple(drafted), parents=None, accepted=accepted, emitted=tuple(emitted),
                    max_accept=len(drafted), draft_s=0.0, verify_s=0.0, draft_forwards=len(drafted), extend_rows=0)


def test_token_view_by_hand():
    res = SpecResult(prompt_ids=[1], tokens=[3, 5, 6, 9, 4], rounds=[log((5, 6, 7), 2, (5, 6, 9)), log((1, 2, 3), 0, (4,))],
                     settings={"num_steps": 3}, prefill_s=0.0, decode_s=0.0, finished_by="max_new_tokens")
    table = token_rounds(res)
    assert table["accepted tokens"].tolist() == [[5, 6], []]
    assert table["first rejected draft"].tolist() == [[7], [1]] and table["bonus (target's own)"].tolist() == [[9], [4]]
    page = token_view_html(res)
    assert page.count("class='ok'") == 1 and page.count("class='no'") == 2 and page.count("class='bonus'") == 3
    assert page.index(">3 <") < page.index(">5 6 <") < page.index(">7 <") < page.index(">9 <") < page.index(">1 <") < page.index(">4 <")


def test_token_view_of_a_real_decoding_run():
    target, draft = tiny_pair()
    res = speculative_generate(target, draft, prompts(n=1)[0], max_new_tokens=16, num_steps=3)
    table = token_rounds(res)
    emitted = [t for r in res.rounds for t in r.emitted]
    assert emitted == res.tokens[1:] and table.accepted.sum()   # the first token comes from the prefill == res.stats.num_accepted_tokens
    widget, same = token_view(res)
    assert same.equals(table) and len(widget.children) == 2


def test_fc_ordering_picker_remeasures():
    target, draft = tiny_pair()
    seqs, lens = greedy_dataset(target, prompts(n=3), max_new_tokens=10)
    bank = capture_bank(target, seqs, lens)
    row = measure_ordering(bank, draft, (1, 2, 4))
    direct = evaluate_on_bank(bank, draft, (1, 2, 4), 3)
    assert row.tau[0] == pytest.approx(direct.stats.tau) and row.tau_low[0] <= row.tau[0] <= row.tau_high[0]
    widget, measure = fc_ordering_widget(bank, draft, wiring=(1, 2, 4))
    picker = widget.children[0].children[0]
    picker.value = 3                                 # slot 0 fed resid[3]: measured again, headless
    assert measure((3, 2, 4)).tau[0] == pytest.approx(evaluate_on_bank(bank, draft, (3, 2, 4), 3).stats.tau)


def test_flags_widget_renders_the_seed_cap():
    widget, render = flags_widget(steps=1, topk=1, draft_tokens=16)
    assert render(1, 1, 16).max_accept_length == 2 and widget.children
