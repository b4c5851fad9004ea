"""The pieces of doctor's fix choice that make its answer a function of the evidence, not of the draw:
scores grown prompt by prompt equal scores on the whole bank, the one-slot neighbours a choice must be told
apart from, and the re-scan of an unsettled choice on the final bank (committed tiny8 fixtures)."""

from __future__ import annotations

import pytest
from helpers.fixture_drafts import heldout_prompts, load_fixture_draft, tiny8

from eagle3lab.analysis.wiring_search import Scorer, _diffs, joined
from eagle3lab.decoding.evaluate import evaluate_on_bank, greedy_dataset
from eagle3lab.doctor.evidence import take_rows
from eagle3lab.doctor.fix_choice import (
    Build,
    FixChoice,
    Preference,
    _members,
    _refine,
    _slot_neighbours,
    _steps,
    key_of,
)
from eagle3lab.models.state_bank import capture_bank

pytestmark = pytest.mark.usefixtures("single_thread")


@pytest.fixture(scope="module")
def case():
    target = tiny8()[0]
    seqs, lens = greedy_dataset(target, heldout_prompts(12), max_new_tokens=24, progress=False)
    draft = load_fixture_draft("case", target)
    return target, capture_bank(target, seqs, lens), draft


def test_scores_grown_by_parts_equal_the_scores_on_the_whole_bank(case):
    _, bank, draft = case
    view = draft.rewired()
    wiring = (1, 4, 7)
    whole = evaluate_on_bank(bank, view, wiring, 3, batch_size=4)
    parts = joined(evaluate_on_bank(take_rows(bank, range(5)), view, wiring, 3, batch_size=4),
                   evaluate_on_bank(take_rows(bank, range(5, 12)), view, wiring, 3, batch_size=4))
    assert parts.accept == whole.accept                     # every prompt's accepted counts, in bank order
    assert parts.ce_n == whole.ce_n
    assert parts.ce_sum == pytest.approx(whole.ce_sum, rel=1e-5)
    assert sum(map(len, whole.accept)) > 12 and whole.ce > 0   # a real measurement, not an empty one


def test_a_grown_scorer_rescores_on_the_added_prompts_and_writes_into_its_memo(case):
    """The one scorer (``wiring_search.Scorer``) as doctor grows its bank: a hypothesis scored on the first five
    prompts, grown onto all twelve, equals its score on the whole bank; each new score lands in ``into``."""
    _, bank, draft = case
    memo = {}
    small = Scorer(take_rows(bank, range(5)), draft, 3, into=memo)
    first = small((1, 4, 7), {})
    assert memo == {key_of((1, 4, 7), {}): first} and small((1, 4, 7), {}) is first and small.evaluations == 1
    grown_memo = {}
    big = small.grown(bank, take_rows(bank, range(5, 12)), into=grown_memo)
    whole = evaluate_on_bank(bank, draft.rewired(), (1, 4, 7), 3, batch_size=4)
    assert big((1, 4, 7), {}).accept == whole.accept and list(grown_memo) == [key_of((1, 4, 7), {})]
    assert big((2, 4, 7), {}).accept == evaluate_on_bank(bank, draft.rewired(), (2, 4, 7), 3, batch_size=4).accept


class _Score:
    def __init__(self, ce):
        self.ce = ce


def test_one_slot_neighbours_are_the_closest_two_of_each_slot_with_the_same_switches():
    v, other = (("norm_before_residual", True),), (("norm_before_residual", False),)
    me = ((0, 3, 7), v)
    keys = {((0, 4, 7), v): 0.10, ((0, 5, 7), v): 0.11, ((0, 2, 7), v): 0.30,   # slot 1
            ((0, 3, 8), v): 0.12,                                               # slot 2
            ((1, 4, 7), v): 0.05,                                               # two slots differ: not one
            ((0, 3, 7), other): 0.01}                                           # other switches: not one
    scores = {k: _Score(ce) for k, ce in keys.items()}
    got = _slot_neighbours(me, list(keys), scores)
    assert got == [((0, 4, 7), v), ((0, 5, 7), v), ((0, 3, 8), v)]


def test_an_unsettled_choice_is_rescanned_to_the_same_answer_from_any_start(case):
    """Two draws' choices that the evidence does not tell apart are moved, on the same final bank, to the
    same wiring: a search from the engines' default points (a grid over the depth first), each slot moved to
    the median of its points within noise, then to a one-slot neighbour only where it beats the wiring in
    tau beyond noise. The answer is no edge of the set, and none of its neighbours beats it."""
    target, bank, draft = case
    view = draft.rewired()
    build = Build("vllm", "0.32.0", "cpu", target.num_layers, target.arch)
    points = set(range(target.num_layers + 1))
    scores = {}

    def measure(wiring, variant):
        k = key_of(wiring, variant)
        if k not in scores:
            scores[k] = evaluate_on_bank(bank, view.rewired(**dict(variant)), tuple(wiring), 3, batch_size=4)
        return scores[k]

    variant = next(v for v in draft.variants() if v["norm_before_residual"])   # the rule the case was trained with
    members = [key_of(w, variant) for w in [(1, 3, 6), (2, 5, 7), (1, 4, 7), (2, 4, 6)]]
    for k in members:
        measure(k[0], dict(k[1]))
    answers = set()
    for start in [(1, 3, 6), (2, 5, 7)]:
        choice = FixChoice(start, dict(variant), True, len(members), members[0], "test", prompts=12, settled=False)
        refined, held_against = _refine(choice, scores, measure, build, None, 0.95, points=points)
        answers.add(refined.wiring)
        assert held_against and refined.key not in held_against
        assert "beats the wiring in tau beyond noise" in refined.statement
    assert len(answers) == 1, answers
    final = key_of(answers.pop(), variant)
    assert final in set(_members(scores, list(scores), 0.95)[1])
    steps = _steps(final, build, points)
    assert steps and all(k in scores for k in steps)
    assert not any(_diffs(scores[k], scores[final], 0.95)[1].low > 0 for k in steps), final


def test_the_order_of_members_reads_no_score():
    """doctor's order (issue 33): as launched, nearest the stated ids, the switches as stated, the engine's
    default, the fewest changes, the lower points; a total order whatever the scores."""
    on, off = (("norm_before_residual", True),), (("norm_before_residual", False),)
    prefer = Preference(served=((3, 6, 7), off), stated_wiring=(3, 6, 7), stated={"norm_before_residual": True},
                        default=(2, 6, 9), num_layers=12)
    keys = [((1, 4, 7), on), ((2, 6, 9), on), ((3, 6, 8), off), ((3, 6, 8), on), ((3, 6, 7), off), ((3, 5, 8), on)]
    assert sorted(keys, key=prefer.rank) == [((3, 6, 7), off),       # as launched
                                             ((3, 6, 8), on),        # 1 layer from the stated ids, switch as stated
                                             ((3, 6, 8), off),
                                             ((3, 5, 8), on),        # 2 layers
                                             ((2, 6, 9), on),        # 3 layers
                                             ((1, 4, 7), on)]        # 4 layers
    # without a stated wiring: the engine's default, then fewest changes, then the lower points
    bare = Preference(served=((3, 6, 7), off), default=(2, 6, 9), num_layers=12)
    assert bare.first([((1, 4, 7), off), ((2, 6, 9), off), ((2, 6, 7), off)]) == ((2, 6, 9), off)
    assert bare.first([((1, 4, 7), off), ((2, 5, 7), off), ((1, 6, 7), off)]) == ((1, 6, 7), off)   # one change
    assert bare.first([((2, 4, 7), off), ((1, 5, 7), off)]) == ((1, 5, 7), off)     # two each: the lower points
    assert len({bare.rank(k) for k in keys}) == len(keys)


def test_the_choice_does_not_follow_the_last_digits_of_the_scores():
    """Members within noise of each other, their cross-entropies swapped in the last digits (a CPU's fp32 and a
    GPU's bf16): the same fix, the one nearest the stated ids; a member a neighbour beats in tau is set aside."""
    from eagle3lab.decoding.evaluate import BankScore
    from eagle3lab.doctor.fix_choice import choose

    variant = {"norm_before_residual": True}
    build = Build("vllm", "0.32.0", "cpu", 12, "LlamaForCausalLM")
    prefer = Preference(stated_wiring=(2, 8, 10), stated=variant, default=(2, 6, 9), num_layers=12)

    def score(ce, low):
        """12 prompts of 10 rounds; ``low``: one token fewer accepted in every round."""
        accepted = [[(2 if (i + j) % 3 else 3) - low for j in range(10)] for i in range(12)]
        return BankScore(3, [ce * 10 + 0.01 * i for i in range(12)], [10] * 12, accepted)

    answers = set()
    for eps in (1e-4, -1e-4):
        scores = {key_of((2, 8, 9), variant): score(1.0, 0), key_of((1, 8, 9), variant): score(1.0 + eps, 0),
                  key_of((3, 8, 9), variant): score(1.0 - 2 * abs(eps), 1)}   # the best cross-entropy, beaten in tau
        answers.add(choose(scores, list(scores), build, prefer).wiring)
    assert answers == {(2, 8, 9)}


def test_the_canonical_start_depends_on_neither_draw_nor_build_and_fits_shallow_targets():
    from eagle3lab.doctor.fix_choice import _canonical_start
    assert _canonical_start((0, 3, 8), 12) == _canonical_start((1, 6, 9), 12) == [2, 6, 9]   # engines' default
    assert _canonical_start((7, 9, 0), 12) == [6, 9, 2]          # an embedding-last draft keeps its order
    for n in (4, 5, 6):                                           # too shallow for three distinct defaults
        start = _canonical_start((0, 1, 2), n)
        assert len(set(start)) == 3 and all(0 <= p <= n for p in start), (n, start)
    assert len(set(_canonical_start((0, 2, 5, 9), 12))) == 4


@pytest.mark.parametrize("step", [0, -8])
def test_a_prompt_step_below_one_is_refused_before_anything_loads(step):
    from eagle3lab import bundled
    from eagle3lab.doctor.run import run_doctor
    from eagle3lab.errors import Eagle3LabError

    with pytest.raises(Eagle3LabError, match=r"--prompt-step.*at least 1"):
        run_doctor(bundled.DRAFT_CASE, target=bundled.TARGET, prompt_step=step)


def test_a_dumps_points_hold_the_final_search_start():
    """A dump captured at other ids lacks the engines' default points: the start moves to the nearest points
    it holds, never two slots on one, and a step that needs a point the bank lacks is no step."""
    from eagle3lab.doctor.fix_choice import _snapped, _stepped

    points = {1, 29, 57, 61}
    assert _snapped([2, 30, 58], points) == [1, 29, 57]
    assert _snapped([1, 2, 3], points) == [1, 29, 57]     # never two slots on one point
    build = Build("vllm", "0.32.0", "cpu", 61, "LlamaForCausalLM")
    assert _stepped((1, 29, 57), 0, 2, build, points) is None           # resid[2] not captured
    assert _stepped((2, 29, 57), 0, 1, build, points) == (1, 29, 57)


def test_the_stated_ids_are_kept_unless_the_answer_beats_them():
    """An answer one slot from the stated ids that does not beat them beyond noise hands the stated ids back
    (right ids an engine misreads are not rewritten); one that beats them keeps its own."""
    from eagle3lab.decoding.evaluate import BankScore
    from eagle3lab.doctor.fix_choice import _kept_as_stated

    variant = {"norm_before_residual": True}
    build = Build("vllm", "0.32.0", "cpu", 12, "LlamaForCausalLM")

    def score(ce, low):
        accepted = [[(2 if (i + j) % 3 else 3) - low for j in range(10)] for i in range(12)]
        return BankScore(3, [ce * 10 + 0.01 * i for i in range(12)], [10] * 12, accepted)

    answer, stated = key_of((0, 3, 8), variant), key_of((0, 3, 7), variant)
    for stated_low, kept in ((0, stated), (1, answer)):
        scores = {answer: score(1.0, 0), stated: score(1.0001, stated_low)}
        assert _kept_as_stated(answer, (0, 3, 7), scores, lambda w, v, s=scores: s[key_of(w, v)], build, 0.95) == kept
