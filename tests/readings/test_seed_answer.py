"""Notebook 06's answer for the seed's own target (Kimi-K2.5), from the engine knowledge, without the notebook."""

from eagle3lab.engines.acceptance import Interval
from eagle3lab.readings.nb06_case_file import Gains
from eagle3lab.readings.seed_case import SEED_BUILD, SEED_RECORD, seed_answer

KIMI_K25 = {"name": "Kimi-K2.5", "arch": "KimiK25ForConditionalGeneration", "num_layers": 61,
            "model": "moonshotai/Kimi-K2.5", "draft": "./fixed"}
FLEET = {"roofline": "kimi-k2 fp8, 8 GPUs (H200-class)", "gpus": 8, "batch": 48, "c": 0.1, "overhead": 0.0}
TEAM = {"engine": "sglang", "ids": [-1, 2, 30], "tok_s": 54.8}


def _answer(agree=(0.8, 0.7, 0.6, 0.5), history=None, target=KIMI_K25):
    gains = Gains(Interval(0.3, 0.1, 0.5, 0.95, 4), Interval(1.5, 1.0, 2.0, 0.95, 4), Interval(1.8, 1.2, 2.4, 0.95, 4),
                  "a test ladder")
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
        assert "lines below" not in w and w.index("Launch: `") < w.index(f"lines above use {a.chain_launched} steps")


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
