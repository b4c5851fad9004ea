"""doctor's last stage on a ladder given by hand (issue 32): what ``--write-fixed`` writes follows the fixes it
keeps, a critical finding's and never one left out (not critical, or measured as a loss), and each checkpoint
fix's text says which, once its severity is measured. The drafts are the committed tiny8 ones: only their
configs are read (the rule the checkpoint states); the rungs are stubs, so no bank is measured."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from helpers.fixture_drafts import draft_dir

from eagle3lab.doctor.fix_choice import Build
from eagle3lab.doctor.fixes import Fix, FixKind, RunState, WrittenIn, kept_in_checkpoint, write_fixed_words
from eagle3lab.doctor.ladder import Ladder, Rung
from eagle3lab.doctor.run import plan_checkpoint
from eagle3lab.engines.acceptance import Interval
from eagle3lab.findings import Severity
from eagle3lab.models.checkpoint import load_draft

OFF = {"norm_before_fc": False, "fc_norm": False, "norm_before_residual": False, "recycle_postnorm": False}
TRAINED = {**OFF, "norm_before_residual": True}
SHIPPED, FIXED = (3, 6, 7), (1, 4, 6)
CRITICAL = Interval(0.40, 0.30, 0.50, 0.95, 24)    # low end 0.30 clears max(0.1, 5% of tau 2.5)
SMALL = Interval(0.04, 0.02, 0.06, 0.95, 24)       # above 0 but below the threshold: a warning
LOSS = Interval(-0.20, -0.30, -0.10, 0.95, 24)


def measured(name: str, state: RunState) -> Rung:
    """A meter that measures nothing: the rung as the state runs it."""
    return Rung(name, state)


def tau(value: float) -> SimpleNamespace:
    return SimpleNamespace(tau=Interval(value, value - 0.05, value + 0.05, 0.95, 24))


def fixes(applicable_rule: bool) -> list[Fix]:
    wiring = Fix(FixKind.WIRING, "WIRING", "trained wiring", {"wiring": FIXED}, True, WrittenIn.CHECKPOINT,
                 {"wiring": FIXED}, "wiring", "", "config key eagle_aux_hidden_state_layer_ids: [1, 4, 6]", "wiring")
    as_written = TRAINED if applicable_rule else OFF      # SGLang runs its own norm_before_residual once written
    rule = Fix(FixKind.RULE, "FIRST_LAYER_RULE", "trained rule", {"variant": TRAINED}, applicable_rule,
               WrittenIn.CHECKPOINT, {"variant": as_written}, "rule", "", "config keys norm_before_residual: true",
               "wiring")
    return [wiring, rule]


def plan(draft, engine: str, start: RunState, fixed: list[Fix], gains: list[Interval]):
    """``fixed`` measured with ``gains`` (undoing each costs what adding it gains), then planned."""
    rungs = [measured("as launched", start)]
    for i, fix in enumerate(fixed):
        rungs.append(measured(fix.rung, start.changed(*(f.change for f in fixed[:i + 1]))))
    findings = [fix.finding(tau(2.0), tau(2.5), g, g, (tau(2.0), tau(2.5))) for fix, g in zip(fixed, gains)]
    case = SimpleNamespace(draft=draft, target_config={}, bank=None, target_source=None)
    build = Build(engine, None, None, 8, draft.target_arch)
    return plan_checkpoint(case, build, measured, start, Ladder(rungs, fixed, findings), []), findings


@pytest.fixture(scope="module")
def drafts(tiny8):
    return {name: load_draft(draft_dir(name), target=tiny8[0]) for name in ("healthy", "case")}


def test_a_rule_fix_left_out_is_not_stated_in_the_written_config(drafts):
    """vLLM honours norm_before_residual: a rule fix with a small gain is left out, so the written config keeps
    the shipped rule (the ladder's last rung, which carries every fix, would state the trained one and vLLM
    would then run a rule the prediction does not)."""
    start = RunState(True, SHIPPED, dict(OFF), 3)         # the healthy draft's config states no rule: all off
    written, (wiring, rule) = plan(drafts["healthy"], "vllm", start, fixes(True), [CRITICAL, SMALL])
    assert (wiring.severity, rule.severity) == (Severity.CRITICAL, Severity.WARNING)
    assert written.left_out == ("FIRST_LAYER_RULE",)
    assert written.stated_variant == OFF
    assert (written.predicted.wiring, written.predicted.variant) == (FIXED, OFF)
    # the words say so, once the severity is known: one sentence, from write_fixed_words
    assert wiring.fix == "config key eagle_aux_hidden_state_layer_ids: [1, 4, 6]. --write-fixed writes it (a critical finding)."
    assert rule.fix.endswith(". --write-fixed leaves it out: the finding is warning, not critical: a gain this small "
                             "is no reason to rewrite the checkpoint.")
    # a critical rule fix is written and stated
    written, _ = plan(drafts["healthy"], "vllm", start, fixes(True), [CRITICAL, CRITICAL])
    assert written.left_out == () and written.stated_variant == TRAINED and written.predicted.variant == TRAINED


def test_a_key_the_engine_ignores_keeps_what_the_checkpoint_states(drafts):
    """SGLang ignores norm_before_residual (it runs it off): the case draft states true. A rule fix measured as a
    loss is left out and the written config still states true (not SGLang's off); kept, it states the trained
    rule while the prediction runs SGLang's own."""
    start = RunState(True, SHIPPED, dict(OFF), 3)
    written, (_, rule) = plan(drafts["case"], "sglang", start, fixes(False), [CRITICAL, LOSS])
    assert written.left_out == ("FIRST_LAYER_RULE",) and written.stated_variant == TRAINED
    assert written.predicted.variant == OFF
    assert rule.fix.endswith(". --write-fixed leaves it out: it measures as a loss on this ladder.")
    written, (_, rule) = plan(drafts["case"], "sglang", start, fixes(False), [CRITICAL, CRITICAL])
    assert written.left_out == () and written.stated_variant == TRAINED and written.predicted.variant == OFF
    assert rule.fix.endswith(". --write-fixed writes it (a critical finding); this build does not run all of it.")


def test_launch_command_fixes_are_assumed_and_say_nothing():
    chain = Fix(FixKind.CHAIN, "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED", "chain of 5", {"num_steps": 5}, True,
                WrittenIn.LAUNCH_COMMAND, {"num_steps": 5}, "chain", "", "pass --speculative-num-steps 5", "flags",
                severity="warning")
    assert kept_in_checkpoint(chain, "warning", SMALL) and not kept_in_checkpoint(chain, "warning", LOSS)
    assert write_fixed_words(chain, "warning", SMALL) == ""
    assert chain.finding(tau(2.0), tau(2.5), SMALL, SMALL, (tau(2.0), tau(2.5))).fix == "pass --speculative-num-steps 5"
