"""Notebook 06's answer for the seed's own target (Kimi-K2.5), from the engine knowledge, without the notebook."""

import pytest

from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings.nb06_case_file import Gains, RungTau
from eagle3lab.readings.seed_case import SEED_BUILD, SEED_RECORD, seed_answer

KIMI_K25 = {"name": "Kimi-K2.5", "arch": "KimiK25ForConditionalGeneration", "num_layers": 61,
            "model": "moonshotai/Kimi-K2.5", "draft": "./fixed"}
FLEET = {"roofline": "kimi-k2 fp8, 8 GPUs (H200-class)", "gpus": 8, "batch": 48, "c": 0.1, "overhead": 0.0}
TEAM = {"engine": "sglang", "ids": [-1, 2, 30], "tok_s": 54.8}


IGNORED = RungTau(Interval(1.4, 1.2, 1.6, 0.95, 4), 4, "rung 3")   # the points fed, the rule ignored


def _answer(agree=(0.8, 0.7, 0.6, 0.5), history=None, target=KIMI_K25, ignored=IGNORED):
    gains = Gains(Interval(0.3, 0.1, 0.5, 0.95, 4), Interval(1.5, 1.0, 2.0, 0.95, 4), Interval(1.8, 1.2, 2.4, 0.95, 4),
                  "a test ladder", ignored=ignored)
    return seed_answer(target, [0, 3, 31], True, {"sglang": [SEED_BUILD, "0.5.14"], "vllm": [None]}, TEAM, gains,
                       fleet=FLEET, agree=list(agree) if agree else None, agree_from="a test agreement", draft="./fixed",
                       steps_otherwise=3, history=history)


def test_each_build_gets_its_ids_options_and_a_complete_launch_line():
    a = _answer()
    old, new, vllm = a.builds
    assert old.ids is None and "TypeError" in old.no_ids and old.team == "stop at the first forward"
    assert new.ids == [0, 3, 31] and not new.honours_rule and vllm.honours_rule and vllm.ids is None
    assert [o.what.split(" ")[0] for o in old.options] == ["retrain", "move", "patch"]
    assert old.options[1].what.startswith("move to 0.5.14") and old.options[1].gain.value == 0.3
    assert [o.gain.value for o in new.options] == [1.5, 1.5] and "no patch ships" in new.options[1].what
    # the rule's gain was measured with the trained points fed: where this build cannot feed them, the patch is
    # worded together with the option that does, (b), and quotes the same gain
    assert old.options[2].what.startswith("patch the engine to read norm_before_residual, together with (b) ")
    assert old.options[2].gain.value == 1.5 and "together with" not in new.options[1].what
    assert "(c) patch the engine to read norm_before_residual, together with (b)" in a.words()
    assert [o.gain.value for o in vllm.options] == [1.8] and vllm.team == ""
    k = a.chain.best
    assert k == max(a.chain.speedups, key=a.chain.speedups.get) == a.chain_launched
    assert a.chain.table["projected speedup (decode)"].to_dict() == a.chain.speedups   # the table shows the same numbers
    assert new.launch == ("python -m sglang.launch_server --model-path moonshotai/Kimi-K2.5 --tp 8 --trust-remote-code "
                          f"--speculative-algorithm EAGLE3 --speculative-draft-model-path ./fixed-sglang --speculative-num-steps "
                          f"{k} --speculative-eagle-topk 1 --speculative-num-draft-tokens {k + 1} --max-running-requests 48")
    # no launch line where no ids feed the trained points: the folder would serve other states (or crash)
    assert old.launch == "" and vllm.launch == ""
    words = a.words()
    # each folder a launch line loads is named with the command that writes it (SGLang reads eagle_config only)
    assert ("Each launch line loads the fixed draft in its engine's format, written from the fixed checkpoint by "
            "`eagle3lab convert ./fixed --to sglang ./fixed-sglang --target moonshotai/Kimi-K2.5` (") in words
    assert words.count("No launch line: this build cannot load the fixed draft as trained") == 2
    assert words.count("\n- **") == 3 and "+1.500 [+1.000, +2.000] tau on a test ladder" in words
    assert "The team measured 54.8 tok/s with ids [-1, 2, 30]" in words


def test_without_an_agreement_the_chain_is_to_be_measured():
    a = _answer(agree=None)
    assert a.chain is None and a.chain_launched == 3 and "measure the chain on the fleet" in a.words()
    assert "--speculative-num-steps 3 " in a.builds[1].launch


def test_a_fastest_chain_at_the_edge_of_those_priced_says_longer_may_be_faster():
    rising, peaked = _answer(agree=(0.95, 0.95, 0.95, 0.95)), _answer(agree=(0.8, 0.1, 0.05, 0.01))
    values = list(rising.chain.speedups.values())
    assert rising.chain.at_edge and rising.chain.best == 4 and values == sorted(values)
    words = rising.words()
    assert "the fastest chain priced is the longest priced, 4 steps" in words and "a longer chain may be faster" in words
    assert " -> ".join(f"{v:.3f}" for v in values) in words and "the fastest chain is" not in words
    assert not peaked.chain.at_edge and peaked.chain.best < 4
    assert f"the fastest chain is {peaked.chain.best} steps" in peaked.words() and "longer" not in peaked.words()
    # the chain's sentence comes after the builds' list, so the launch lines are above it
    for a in (rising, peaked, _answer(agree=None)):
        w = a.words()
        assert "lines below" not in w and w.index("Launch after (a)") < w.index(f"lines above use {a.chain_launched} steps")


def test_without_a_build_that_feeds_the_trained_points_the_patch_must_capture_them_too():
    gains = Gains(Interval(0.3, 0.1, 0.5, 0.95, 4), Interval(1.5, 1.0, 2.0, 0.95, 4), Interval(1.8, 1.2, 2.4, 0.95, 4),
                  "a test ladder")
    a = seed_answer(KIMI_K25, [0, 3, 31], True, {"sglang": ["0.5.11"]}, TEAM, gains, fleet=FLEET, agree=None,
                    agree_from="", draft="./fixed", steps_otherwise=3)
    (only,) = a.builds
    assert [o.what.split(" ")[0] for o in only.options] == ["retrain", "patch"]
    assert "and to capture the trained points" in only.options[1].what and only.options[1].gain.value == 1.8


def test_the_record_is_stated_before_the_teams_ids_are_set_beside_the_code():
    """The team's record in full (SEED_RECORD: 74.7%, 90, 56.8, 46.7, 54.8) in one paragraph, with an echo set after
    it, before the 54.8 tok/s is read against the builds; its numbers in the claims; none without a record."""
    a = _answer(history=SEED_RECORD)
    words = a.words(echo="The ladder says so too.")
    record = f"{SEED_RECORD.words()} The ladder says so too."
    assert record in words.split("\n\n") and words.index(record) < words.index("The team measured 54.8 tok/s")
    assert "46.7 tok/s, slower than the capped launch" in words and "74.7% validation accuracy" in words
    assert a.claims()["history"] == SEED_RECORD.claims()
    plain = _answer()
    assert "The seed's record" not in plain.words(echo="x") and plain.claims()["history"] is None


def test_the_seed_build_is_named_the_first_that_could_serve_the_seeds_own_target_only():
    assert f"**sglang {SEED_BUILD}** (the first release that could serve it):" in _answer().words()
    other = _answer(target={**KIMI_K25, "arch": "DeepseekV3ForCausalLM"})
    assert "the first release that could serve it" not in other.words()


def test_a_launch_line_on_a_build_that_ignores_the_rule_holds_only_after_an_option():
    """Issue 35: SGLang 0.5.14 feeds the trained points but ignores norm_before_residual, so its launch line serves
    the draft as the ladder's ids rung measured it; that tau is priced on the fleet at its chain, and the chain's
    price (the draft served as trained) is said to hold only after a retrain or a patch, since no build serves it whole."""
    from eagle3lab.analysis.roofline import price_on_served

    a = _answer(agree=(0.95, 0.95, 0.95, 0.95))   # launches 4 steps, the chain the ladder's rung ran
    new = a.builds[1]
    words = a.build_words(new)

    def speedup(tau):
        case = {"k": {"tau": tau, "num_steps": 4, "num_draft_tokens": 5}}
        return price_on_served(case, FLEET["roofline"], c=0.1, overhead=0.0, batches=(48,)).iloc[0]

    x = [speedup(t)["projected_speedup"] for t in (1.4, 1.2, 1.6)]
    assert x[1] < x[0] < x[2]                                  # the bounds map to bounds
    cost = speedup(1.4)["round_cost"]
    word = "projected faster than" if 1.2 > cost else "projected slower than" if 1.6 < cost else "projected within noise of"
    assert a.chain_launched == 4 and "not measured that way" not in words
    assert ("Launch after (a) (the retrained draft converted into this folder) or on an engine patched as (b) says (as it is, this build serves the draft with norm_before_residual ignored: the "
            "ladder's rung 3 served it that way (the trained points fed, the rule ignored) and measured tau 1.400 [1.200, "
            f"1.600] at 4 steps, priced at 4 steps at {x[0]:.2f}x [{x[1]:.2f}, {x[2]:.2f}] projected decode on the "
            f"fleet (round cost {cost:.2f} target steps): {word} no speculation): `python -m sglang.launch_server") \
        in words
    # a launched chain other than the rung's is said not to have been measured with the rule ignored
    shorter = _answer()
    assert shorter.chain_launched != 4 and (f"; this line's {shorter.chain_launched}-step chain was not measured that way): "
                                            "`python") in shorter.build_words(shorter.builds[1])
    assert "Launch: `" not in a.words()
    assert ("these prices are for the draft served as trained (the trained points fed, norm_before_residual read), "
            "which no build above serves as it stands") in a.words()
    assert ("they hold only after a retrain with the rule off or on a patched engine, where the trained points are "
            "fed (a move alone still ignores the rule)") in a.words() and "once an option" not in a.words()
    # without the rung measured, the line still says the rule is ignored and that nothing measured it
    assert "no ladder measured that draft here): `python" in _answer(ignored=None).build_words(new)
    # the options that keep this line are the retrain and the patch, named by their marks in this build's list
    assert [o.kind for o in new.options] == ["retrain", "patch"] and words.count("Launch after") == 1


def test_a_build_that_serves_the_draft_whole_launches_plainly():
    """A draft trained with the rule off is served whole where its points are fed: a plain launch line, and the
    chain's price is said to be that build's."""
    gains = Gains(Interval(0.3, 0.1, 0.5, 0.95, 4), None, Interval(0.3, 0.1, 0.5, 0.95, 4), "a test ladder",
                  ignored=IGNORED)
    a = seed_answer(KIMI_K25, [0, 3, 31], False, {"sglang": ["0.5.14"]}, TEAM, gains, fleet=FLEET,
                    agree=[0.8, 0.7, 0.6, 0.5], agree_from="a test agreement", draft="./fixed", steps_otherwise=3)
    (only,) = a.builds
    assert only.honours_rule and only.launch
    words = a.words()
    assert f"Launch: `{only.launch}`" in words and "Launch after" not in words
    assert f"norm_before_residual read), as {only.label} serves it" in words


def _priced_round(tau, k):
    from eagle3lab.analysis.roofline import price_on_served

    case = {"k": {"tau": tau, "num_steps": k, "num_draft_tokens": k + 1}}
    return float(price_on_served(case, FLEET["roofline"], c=0.1, overhead=0.0, batches=(48,)).iloc[0]["round_cost"])


def test_the_served_cost_model_is_held_against_the_seeds_record():
    """Issue 35: the record's speeds imply a round cost at the ladder's tau for the same chain (tau * plain / spec);
    the model's round for that chain is inside that interval or not, and the words say which, from the numbers."""
    from eagle3lab.readings.seed_case import SeedRecord

    launched = RungTau(Interval(1.09, 1.05, 1.15, 0.95, 6), 1, "rung 1")
    lifted = RungTau(Interval(1.12, 1.05, 1.23, 0.95, 6), 15, "rung 2")
    gains = Gains(launched=launched, lifted=lifted)

    def answer(history):
        return seed_answer(KIMI_K25, [0, 3, 31], True, {"sglang": ["0.5.14"]}, TEAM, gains, fleet=FLEET,
                           agree=[0.8, 0.7, 0.6, 0.5], agree_from="a test agreement", draft="./fixed",
                           steps_otherwise=3, history=history)

    record = SeedRecord()
    checks = answer(record).against_record()
    assert [(c.step, c.steps) for c in checks] == [("as launched", 1), ("with the cap lifted", 15)]
    one, fifteen = checks
    assert one.implied == pytest.approx((1.09 * 90 / 56.8, 1.05 * 90 / 56.8, 1.15 * 90 / 56.8))
    assert fifteen.implied == pytest.approx((1.12 * 90 / 46.7, 1.05 * 90 / 46.7, 1.23 * 90 / 46.7))
    assert (one.priced, fifteen.priced) == (pytest.approx(_priced_round(1.09, 1)), pytest.approx(_priced_round(1.12, 15)))
    assert one.holds == (one.implied[1] <= one.priced <= one.implied[2])
    words = answer(record).words()
    assert (f"as launched (rung 1, 1 step, tau 1.090 [1.050, 1.150]) 90 -> 56.8 tok/s implies a round of "
            f"{one.implied[0]:.2f} [{one.implied[1]:.2f}, {one.implied[2]:.2f}] target steps, the model prices "
            f"{one.priced:.2f}") in words
    verdict = ("reproduce the record there" if one.holds and fifteen.holds else "do not reproduce the seed's fleet")
    assert verdict in words
    # a record whose speeds match the model's rounds: the model reproduces it, and the words say so
    matched = SeedRecord(launched_tok_s=90 * 1.09 / one.priced, cap_lifted_tok_s=90 * 1.12 / fifteen.priced)
    assert all(c.holds for c in answer(matched).against_record())
    assert "the model's stated assumptions reproduce the record there" in answer(matched).words()
    # a ladder that ran another chain than the record's has no tau for that step: no check is made up
    assert [c.step for c in seed_answer(KIMI_K25, [0, 3, 31], True, {"sglang": ["0.5.14"]}, TEAM,
                                        Gains(launched=launched, lifted=RungTau(lifted.tau, 4, "rung 2")), fleet=FLEET,
                                        agree=[0.8, 0.7], agree_from="", draft="./fixed", steps_otherwise=3,
                                        history=record).against_record()] == ["as launched"]


def test_the_as_is_price_is_claimed_with_the_numbers_the_words_print():
    """Every decimal the summary prints is a claim (tests/notebooks/test_notebooks.py): the as-is price and its round."""
    a = _answer(agree=(0.95, 0.95, 0.95, 0.95))
    c = a.claims()["served_as_is"]
    assert (c["tau"], c["steps"], c["rung"]) == ([1.4, 1.2, 1.6], 4, "rung 3")
    x, cost = a.chain.priced(IGNORED.tau, 4)
    assert c["priced"] == [x.value, x.low, x.high] and c["round_cost"] == cost
    assert f"{x.value:.2f}x [{x.low:.2f}, {x.high:.2f}]" in a.words() and f"round cost {cost:.2f}" in a.words()
    assert "priced" not in _answer(agree=None).claims()["served_as_is"]
