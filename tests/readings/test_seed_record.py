"""The seed's record (issue 35): one home for its first servable build and for every number the team recorded, and
the words read from them (lifting the cap made the seed's server slower: 46.7 < 56.8)."""

from dataclasses import replace

from eagle3lab.engines.flags import SEED_COMMAND, SEED_DRAFT_CONFIG, SEED_TARGET_CONFIG, resolve_flags
from eagle3lab.readings.seed_case import SEED_BUILD, SEED_RECORD, SEED_TEAM_TOK_S


def test_the_seed_build_is_the_first_release_that_serves_the_seed():
    """The reason SEED_BUILD's comment gives, from the engine rules: the build before it breaks the seed's capture
    (no hook, or CUDA graphs on the default ids); SEED_BUILD serves the seed's command without an error."""
    def at(version):
        return resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version=version)

    seed = at(SEED_BUILD)
    assert SEED_BUILD == "0.5.11" and not seed.errors and "SGL_CUDA_GRAPH_DEFAULT_IDS" not in seed.codes()
    assert "SGL_CUDA_GRAPH_DEFAULT_IDS" in at("0.5.10").codes() and at("0.5.9").errors


def test_the_record_holds_every_number_the_team_recorded():
    r = SEED_RECORD
    assert (r.val_accuracy_pct, r.plain_tok_s, r.launched_tok_s, r.cap_lifted_tok_s, r.team_ids_tok_s) == (
        74.7, 90.0, 56.8, 46.7, 54.8)
    assert SEED_TEAM_TOK_S == r.team_ids_tok_s and (r.num_steps, r.draft_tokens) == (1, 16)
    assert f"--speculative-num-steps {r.num_steps} " in SEED_COMMAND
    assert f"--speculative-num-draft-tokens {r.draft_tokens}" in SEED_COMMAND
    # the order it happened in: each speed below no speculation; lifting the cap lost, the ids won part back
    assert r.cap_lifted_tok_s < r.launched_tok_s < r.plain_tok_s and r.cap_lifted_tok_s < r.team_ids_tok_s < r.plain_tok_s


def test_the_words_follow_the_numbers():
    words = SEED_RECORD.words()
    assert "a draft at 74.7% validation accuracy served 56.8 tok/s as launched, slower than the 90 without" in words
    assert "had silently capped its 16 draft tokens to 2" in words
    assert "with the cap lifted (a 15-step chain) it ran 46.7 tok/s, slower than the capped launch: every round" in words
    assert "so few of its tokens were accepted" in words
    assert "the team's ids on that chain gave 54.8 tok/s (slower than no speculation)" in words
    assert SEED_RECORD.claims()["cap_lifted_tok_s"] == 46.7 and SEED_RECORD.claims()["val_accuracy_pct"] == 74.7
    # another record: the words read "faster" from its numbers, and give no reason for a loss it does not have
    other = replace(SEED_RECORD, cap_lifted_tok_s=60.0, team_ids_tok_s=95.0).words()
    assert "it ran 60 tok/s, faster than the capped launch;" in other and "few of its tokens" not in other
    assert "gave 95 tok/s (faster than no speculation)" in other


KIMI = {"name": "Kimi-K2.5", "arch": "KimiK25ForConditionalGeneration", "num_layers": 61, "model": "m", "draft": "./d"}
FLEET = {"roofline": "kimi-k2 fp8, 8 GPUs (H200-class)", "gpus": 8, "batch": 48, "c": 0.1, "overhead": 0.0}


def _seed(builds):
    from eagle3lab.engines.acceptance import Interval
    from eagle3lab.readings.nb06_case_file import Gains
    from eagle3lab.readings.seed_case import seed_answer

    def iv(v, lo, hi):
        return Interval(v, lo, hi, 0.95, 4)

    gains = Gains(iv(0.267, 0.111, 0.810), iv(2.567, 1.962, 3.391), iv(2.834, 2.227, 3.607), "the ladder",
                  iv(2.834, 2.227, 3.607), {"wiring": "rung 2 -> 3", "rule": "rung 4 -> 5", "whole": "rung 2 -> 6",
                                            "wiring_rule": "rung 2 -> 5"})
    return seed_answer(KIMI, [0, 3, 31], True, builds, {"engine": "sglang", "ids": [-1, 2, 30], "tok_s": 54.8}, gains,
                       fleet=FLEET, agree=[0.74, 0.75, 0.75, 0.74], agree_from="an agreement", draft="./d",
                       steps_otherwise=4)


def test_the_options_name_the_states_to_retrain_on_their_assumption_and_a_common_start():
    """Issue 35: a retrain option names the states the build captures (its default, with the ids that feed them) and
    that its gain assumes a retrained draft as good as the as-trained one; every gain names the ladder's rungs it
    spans, and the patch that goes with (b) says its gain is on top of (b) and gives the total from (b)'s start, a
    paired difference the ladder measured (so (a) and (c) are ranked from one rung)."""
    from eagle3lab.readings.seed_case import AS_GOOD

    a = _seed({"sglang": ["0.5.11", "0.5.14"], "vllm": [None]})
    old, new, vllm = (a.build_words(b) for b in a.builds)
    assert ("(a) retrain with norm_before_residual off on states this build captures (its default [resid[2], "
            f"resid[30], resid[58]], ids [1, 29, 57]), and serve here, {AS_GOOD}: +2.834 [+2.227, +3.607] tau on the "
            "ladder, rung 2 -> 6;") in old
    assert "(b) move to 0.5.14, whose ids feed the trained points (the rule still ignored): +0.267 [+0.111, +0.810] " \
           "tau on the ladder, rung 2 -> 3;" in old
    assert ("+2.567 [+1.962, +3.391] tau on the ladder, rung 4 -> 5, on top of (b); with (b), +2.834 [+2.227, +3.607] "
            "tau on the ladder, rung 2 -> 5 in all.") in old
    assert f"(a) retrain with norm_before_residual off (the ids above already feed the trained points), {AS_GOOD}: " \
           "+2.567 [+1.962, +3.391] tau on the ladder, rung 4 -> 5;" in new and "on top of" not in new
    assert ("(a) retrain on states vllm captures here (its default [resid[2], resid[30], resid[58]], ids [2, 30, 58]; "
            f"it reads the rule) and serve here, {AS_GOOD}: +2.834 [+2.227, +3.607] tau on the ladder, rung 2 -> 6.") in vllm
    assert a.claims()["builds"][0]["totals"] == [None, None, [2.834, 2.227, 3.607]]
    assert a.claims()["builds"][0]["spans"] == ["rung 2 -> 6", "rung 2 -> 3", "rung 4 -> 5"]


def test_the_fleets_overhead_and_the_chains_priced_say_why():
    """Issue 35: overhead 0 is the overlap scheduler's (on under speculation by default from the release the engine
    knowledge places PR #21062 in), and the chains stop where the agreement's steps stop."""
    from eagle3lab.analysis.roofline import SERVED
    from eagle3lab.engines.flags.sglang_overlap import CHANGES
    from eagle3lab.readings.seed_case import overhead_reason

    words = _seed({"sglang": ["0.5.14"]}).chain.words()
    assert CHANGES["spec-v2-default"].first_with == "0.5.11" and CHANGES["spec-v2-default"].pr == 21062
    assert ("per-round overhead 0.0 target steps (0: the overlap scheduler stays on under speculation by default from "
            f"SGLang 0.5.11 (PR #21062) and hides a round's CPU work; {SERVED['overhead']} where it is off)") in words
    assert "chains 1-4 priced, as far as the agreement's 4 steps reach" in words
    assert overhead_reason(0.2).startswith("the overlap scheduler off;")
