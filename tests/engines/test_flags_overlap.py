"""SGLang's overlap scheduler with EAGLE3, era by era: spec-V2 opt-in (PR #11398), on by default (PR #21062),
spec V1 retired (PR #25464), SGLANG_ENABLE_SPEC_V2 removed (PR #27964)."""

import pytest
from packaging.version import Version

from eagle3lab.engines.flags import resolve_flags
from eagle3lab.engines.flags.sglang_overlap import CHANGES, OVERLAP_CHANGES, OVERLAP_ERAS, overlap_era
from eagle3lab.findings import Severity

# One release or date inside each era (era k: the build has the first k changes).
IN_ERA = {0: "0.5.2", 1: "0.5.10", 2: "2026-05-01", 3: "2026-06-09", 4: "2026-06-12"}


def sgl(version, env="", extra="", topk=1):
    tokens = 4 if topk == 1 else 8
    cmd = (f"{env} python -m sglang.launch_server --model-path M --speculative-algorithm EAGLE3 "
           f"--speculative-draft-model-path D --speculative-num-steps 3 --speculative-eagle-topk {topk} "
           f"--speculative-num-draft-tokens {tokens} {extra}")
    return resolve_flags("sglang", cmd, engine_version=version, target_arch="LlamaForCausalLM",
                         num_target_layers=32)


def unplaced_prs(res):
    return [f.engine_versions.split(";")[0] for f in res.findings if f.code == "ENGINE_VERSION_UNPLACED"]


@pytest.mark.parametrize("version,era,sure", [
    ("0.5.2", 0, 0), ("pre-#11398", 0, 0), ("2025-10-08", 0, 0),
    ("2025-10-15", 1, 0),  # after #11398 was opened, before the day it is known to be on main
    ("0.5.4", 1, 1), ("0.5.10.post1", 1, 1), ("2025-10-25", 1, 1), ("2026-04-28", 1, 1), ("pre-#21062", 1, 0),
    ("0.5.11", 2, 2), ("0.5.12.post1", 2, 2), ("2026-04-29", 2, 2), ("2026-06-07", 2, 2), ("pre-#25464", 2, 0),
    ("2026-06-08", 3, 3), ("2026-06-10", 3, 3), ("pre-#27964", 3, 0),
    ("2026-06-11", 4, 4), ("post-#27964", 4, 4), ("0.5.15", 4, 4), (None, 4, 4),
    ("0.5.13", 3, 3), ("0.5.14", 4, 4), ("post-#25464", 4, 3), ("post-#21062", 4, 2), ("post-#11398", 4, 1), ("post-#25454", 4, 0),
])
def test_each_build_falls_in_one_era_or_a_range(version, era, sure):
    """Dates and releases place each change; a PR mark places one and the order narrows the rest."""
    assert overlap_era(version) == (era, sure)
    res = sgl(version)
    rule = res.finding("SGL_OVERLAP_SCHEDULE").rule
    assert rule.startswith(f"SGLang '{OVERLAP_ERAS[era]}' era (")
    if era > 0:
        assert f"from PR #{CHANGES[OVERLAP_CHANGES[era - 1]].pr}" in rule
    if era < 4:
        assert f"until PR #{CHANGES[OVERLAP_CHANGES[era]].pr}" in rule
    # One ENGINE_VERSION_UNPLACED per change the build cannot be placed by, none for the others.
    assert unplaced_prs(res) == [f"PR #{CHANGES[k].pr}" for k in OVERLAP_CHANGES[sure:era]]


@pytest.mark.parametrize("era,env,extra,topk,on", [
    (0, "", "", 1, False), (0, "SGLANG_ENABLE_SPEC_V2=1", "", 1, False),
    (1, "", "", 1, False), (1, "SGLANG_ENABLE_SPEC_V2=0", "", 1, False), (1, "SGLANG_ENABLE_SPEC_V2=1", "", 1, True),
    (1, "SGLANG_ENABLE_SPEC_V2=true", "--disable-overlap-schedule", 1, True),  # the env var wins
    (1, "SGLANG_ENABLE_SPEC_V2=on", "", 1, False),  # not a value SGLang's EnvBool reads
    (2, "", "", 1, True), (2, "SGLANG_ENABLE_SPEC_V2=1", "", 1, True), (2, "SGLANG_ENABLE_SPEC_V2=0", "", 1, False),
    (2, "SGLANG_ENABLE_SPEC_V2=False", "", 1, False), (2, "SGLANG_ENABLE_SPEC_V2=n", "", 1, False),
    (2, "", "--disable-overlap-schedule", 1, False),
    (2, "", "", 4, False), (2, "SGLANG_ENABLE_SPEC_V2=1", "", 4, False),  # a tree falls back to spec V1
    (3, "", "", 1, True), (3, "SGLANG_ENABLE_SPEC_V2=0", "", 1, False), (3, "SGLANG_ENABLE_SPEC_V2=1", "", 1, True),
    (3, "", "--disable-overlap-schedule", 1, False), (3, "", "", 4, True),
    (4, "", "", 1, True), (4, "SGLANG_ENABLE_SPEC_V2=0", "", 1, True), (4, "SGLANG_ENABLE_SPEC_V2=1", "", 1, True),
    (4, "", "--disable-overlap-schedule", 1, False), (4, "", "--device cpu", 1, False), (4, "", "", 4, True),
])
def test_overlap_by_era_env_flag_topk_and_device(era, env, extra, topk, on):
    res = sgl(IN_ERA[era], env, extra, topk)
    assert res.effective["overlap_schedule"] is on
    f = res.finding("SGL_OVERLAP_SCHEDULE")
    assert f.severity == Severity.INFO and f.text.startswith(f"Overlap scheduler {'on' if on else 'off'} with EAGLE3")
    # every build here is placed, and nothing older is asked about; but whether a build of 2026-06-12 still has
    # the removal notice (0.5.14 .. 0.5.20) is bounded by releases only
    notice = [CHANGES["spec-v2-notice-dropped"].span().split(";")[0]] if era == 4 and env else []
    assert unplaced_prs(res) == notice


def test_the_cpu_rule_is_said_to_be_unread_before_the_newest_era():
    assert "a rule not read for this era" not in sgl(IN_ERA[2]).finding("SGL_OVERLAP_SCHEDULE").text
    for era in (1, 2, 3):
        env = "SGLANG_ENABLE_SPEC_V2=1" if era == 1 else ""
        res = sgl(IN_ERA[era], env, "--device cpu")
        assert res.effective["overlap_schedule"] is True
        assert "--device cpu: the newest code read turns it off on CPU, a rule not read for this era" in \
            res.finding("SGL_OVERLAP_SCHEDULE").text
    assert "not implemented for speculative decoding on CPU" in \
        sgl(IN_ERA[4], extra="--device cpu").finding("SGL_OVERLAP_SCHEDULE").text


def test_what_sglang_logs_in_each_era():
    assert "'Spec v2 is enabled by default" in sgl(IN_ERA[2]).finding("SGL_OVERLAP_SCHEDULE").text
    assert "'Spec v1 is used" in sgl(IN_ERA[2], topk=4).finding("SGL_OVERLAP_SCHEDULE").text
    for era in (3, 4):
        off = sgl(IN_ERA[era], extra="--disable-overlap-schedule").finding("SGL_OVERLAP_SCHEDULE")
        assert "'Non-overlap (synchronous) spec v2 is used" in off.text


def test_opt_in_era_overrides_the_flag_and_refuses_a_tree():
    res = sgl(IN_ERA[1], "SGLANG_ENABLE_SPEC_V2=1", "--disable-overlap-schedule")
    assert res.finding("SGL_OVERLAP_FLAG_OVERRIDDEN").severity == Severity.WARNING
    tree = sgl(IN_ERA[1], "SGLANG_ENABLE_SPEC_V2=1", topk=4).finding("SGL_SPEC_V2_TOPK")
    assert tree.severity == Severity.ERROR and "topk = 1" in tree.text and tree.where == "topk"
    assert not tree.text.startswith("If ")
    for era, env in ((1, ""), (2, "SGLANG_ENABLE_SPEC_V2=1"), (3, "SGLANG_ENABLE_SPEC_V2=1")):
        quiet = sgl(IN_ERA[era], env, "--disable-overlap-schedule", topk=4).codes()
        assert "SGL_SPEC_V2_TOPK" not in quiet and "SGL_OVERLAP_FLAG_OVERRIDDEN" not in quiet


def test_the_opt_in_was_a_flag_before_pr_12113():
    """PR #12113 (2025-10-25) replaced --enable-beta-spec by SGLANG_ENABLE_SPEC_V2: the opt-in era says so."""
    for env in ("", "SGLANG_ENABLE_SPEC_V2=1"):
        f = sgl(IN_ERA[1], env).finding("SGL_OVERLAP_SCHEDULE")
        assert "builds before PR #12113, late Oct 2025, read --enable-beta-spec instead" in f.text
        assert "PR #12113" in f.rule


def test_removed_env_var_is_ignored_with_a_warning_when_it_meant_off():
    off = sgl(IN_ERA[4], "SGLANG_ENABLE_SPEC_V2=0").finding("SGL_SPEC_V2_ENV_IGNORED")
    assert off.severity == Severity.WARNING and "PR #27964" in off.text and "--disable-overlap-schedule" in off.fix
    assert sgl(IN_ERA[4], "SGLANG_ENABLE_SPEC_V2=1").finding("SGL_SPEC_V2_ENV_IGNORED").severity == Severity.INFO
    assert not sgl(IN_ERA[3], "SGLANG_ENABLE_SPEC_V2=0").finding("SGL_SPEC_V2_ENV_IGNORED")


def test_unreadable_env_value_keeps_the_default():
    for era, on in ((1, False), (2, True)):
        res = sgl(IN_ERA[era], "SGLANG_ENABLE_SPEC_V2=maybe")
        assert res.effective["overlap_schedule"] is on
        assert "not a boolean SGLang reads" in res.finding("SGL_OVERLAP_SCHEDULE").text


# ----------------------------------------------------------------------------- builds placed in a range of eras

def test_unplaceable_build_shows_the_newest_rule_and_names_the_older_one():
    res = sgl("post-#25464", "SGLANG_ENABLE_SPEC_V2=0")  # the mark says nothing about PR #27964
    assert res.effective["overlap_schedule"] is True
    [warning, notice] = [f for f in res.findings if f.code == "ENGINE_VERSION_UNPLACED"]  # not four
    assert (warning.change, notice.change) == (CHANGES["spec-v2-env-removed"], CHANGES["spec-v2-notice-dropped"])
    # the words: how to place the build
    for part in ("SGLang PR #27964", "merged 2026-06-11", "a release <= 0.5.13", "a release >= 0.5.14"):
        assert part in warning.text, part
    assert "removal notice dropped" in notice.text and "a release >= 0.5.21" in notice.text
    msg = res.finding("SGL_OVERLAP_SCHEDULE").text
    assert "The build cannot be placed by PR #27964; if it is older: in the 'spec V1 retired' era (before PR " \
           "#27964) off, SGLANG_ENABLE_SPEC_V2=0 (still an alias of --disable-overlap-schedule)." in msg
    assert res.finding("SGL_SPEC_V2_ENV_IGNORED").severity == Severity.WARNING


def test_a_mark_after_the_opt_in_names_every_older_era_that_differs():
    """post-#11398 may be in any of eras 1..4: the opt-in era (off without the env var) must be named."""
    res = sgl("post-#11398")
    assert res.effective["overlap_schedule"] is True
    assert unplaced_prs(res) == ["PR #21062", "PR #25464", "PR #27964"]
    msg = res.finding("SGL_OVERLAP_SCHEDULE").text
    assert "The build cannot be placed by PR #21062, #25464, #27964; if it is older: in the 'spec V2 opt-in' " \
           "era (before PR #21062) off, it runs only with SGLANG_ENABLE_SPEC_V2=1" in msg
    assert "'spec V2 by default'" not in msg and "'spec V1 retired'" not in msg  # on there too: not named
    # With the opt-in set, every era it may be in gives on.
    same = sgl("post-#11398", "SGLANG_ENABLE_SPEC_V2=1").finding("SGL_OVERLAP_SCHEDULE").text
    assert "but every era it may be in ('spec V2 opt-in' .. 'SGLANG_ENABLE_SPEC_V2 removed') gives the same." in same


def test_a_tree_after_the_default_names_the_spec_v1_fallback():
    """post-#21062 with topk 4: on in eras 3..4, but the by-default era falls back to spec V1 (off)."""
    res = sgl("post-#21062", topk=4)
    assert res.effective["overlap_schedule"] is True
    assert unplaced_prs(res) == ["PR #25464", "PR #27964"]  # #11398 and #21062 follow from the mark
    msg = res.finding("SGL_OVERLAP_SCHEDULE").text
    assert "if it is older: in the 'spec V2 by default' era (before PR #25464) off, topk 4 > 1 falls back to " \
           "spec V1" in msg


def test_a_mark_that_may_sit_in_the_opt_in_era_warns_of_its_start_up_error():
    """pre-#25464 may be in eras 0..2. Shown: era 2 (a tree falls back to spec V1, off); the opt-in era
    would run it (on) and stop at start-up on the tree: both said, the error as a conditional warning."""
    res = sgl("pre-#25464", "SGLANG_ENABLE_SPEC_V2=1", topk=4)
    assert res.effective["overlap_schedule"] is False
    # ... and, inside the opt-in era, whether it forces EAGLE3 on (0.5.7) is bounded by releases only
    assert unplaced_prs(res) == ["PR #11398", "PR #21062", CHANGES["opt-in-eagle3"].span().split(";")[0]]
    msg = res.finding("SGL_OVERLAP_SCHEDULE").text
    assert "if it is older: in the 'spec V2 opt-in' era (before PR #21062) on, SGLANG_ENABLE_SPEC_V2=1 turns " \
           "it on" in msg
    assert "'before spec V2' era" not in msg  # off there, as shown
    tree = res.finding("SGL_SPEC_V2_TOPK")
    assert tree.severity == Severity.WARNING and tree.text.startswith(
        "If the build predates PR #21062 (the 'spec V2 opt-in' era, which it may be in): SGLANG_ENABLE_SPEC_V2=1 "
        "with --speculative-eagle-topk 4")
    assert res.errors == []  # it may not be in that era: no error, the exit status stays 0
    assert sgl("post-#21062", "SGLANG_ENABLE_SPEC_V2=1", topk=4).finding("SGL_SPEC_V2_TOPK") is None


def test_dates_place_the_opt_in_by_its_bounds():
    """PR #11398 has no known merge day: opened 2025-10-09, on main by 2025-10-25 (PR #12113's diff)."""
    change = CHANGES["spec-v2-opt-in"]
    assert (change.merged, change.opened, change.on_main_by) == (None, "2025-10-09", "2025-10-25")
    late = sgl("2026-04-01", "SGLANG_ENABLE_SPEC_V2=1")  # the reviewer's example: was warned about a 2025 PR
    assert late.effective["overlap_schedule"] is True and unplaced_prs(late) == []
    early = sgl("2025-10-20", "SGLANG_ENABLE_SPEC_V2=1")
    # EAGLE3 forced on by the opt-in only from 0.5.7 (on main by 2026-01-01): an early date is not placed by it
    assert early.effective["overlap_schedule"] is True and unplaced_prs(early) == [
        "PR #11398", CHANGES["opt-in-eagle3"].span().split(";")[0]]
    [warning] = [f.text for f in early.findings if f.change == change]
    assert "merge date unknown, on main by 2025-10-25" in warning
    assert "YYYY-MM-DD (before 2025-10-09 lacks it; from 2025-10-25 on has it)" in warning
    assert "if it is older: in the 'before spec V2' era (before PR #11398) off" in \
        early.finding("SGL_OVERLAP_SCHEDULE").text


def test_the_changes_are_recorded_in_order():
    changes = [CHANGES[k] for k in OVERLAP_CHANGES]
    days = [c.merged or c.on_main_by for c in changes]
    assert days == sorted(days) and all(days)
    for c in changes:
        assert Version(c.last_without) < Version(c.first_with), c.pr
    for older, newer in zip(changes, changes[1:]):
        assert Version(older.last_without) <= Version(newer.last_without), newer.pr
        assert Version(older.first_with) <= Version(newer.first_with), newer.pr


# ----------------------------------------------------------------------------- inside the opt-in era

@pytest.mark.parametrize("version,algo,extra,on,overridden", [
    # 0.5.5 .. 0.5.6.post2: the opt-in forces EAGLE on; for EAGLE3/STANDALONE it only skips the forced off
    ("0.5.5", "EAGLE", "--disable-overlap-schedule", True, True),
    ("0.5.6.post2", "EAGLE3", "--disable-overlap-schedule", False, False),
    ("0.5.6.post2", "EAGLE3", "", True, False),
    ("0.5.5", "STANDALONE", "", True, False),
    # 0.5.7: EAGLE/EAGLE3 forced on; STANDALONE takes the switch-off
    ("0.5.7", "EAGLE3", "--disable-overlap-schedule", True, True),
    ("0.5.7", "STANDALONE", "", False, False),
    # 0.5.8 .. 0.5.10.post1: all three forced on
    ("0.5.8", "STANDALONE", "--disable-overlap-schedule", True, True),
    ("0.5.10", "EAGLE3", "--disable-overlap-schedule", True, True),
])
def test_the_opt_in_forces_the_overlap_scheduler_per_algorithm_and_release(version, algo, extra, on, overridden):
    """Read in the wheels' server_args.py: issue 15's first rule (EAGLE only in the first env-var builds)."""
    cmd = (f"SGLANG_ENABLE_SPEC_V2=1 python -m sglang.launch_server --model-path M --speculative-algorithm {algo} "
           f"--speculative-draft-model-path D --speculative-num-steps 3 --speculative-eagle-topk 1 {extra}")
    res = resolve_flags("sglang", cmd, target_arch="LlamaForCausalLM", engine_version=version, num_target_layers=32)
    assert res.effective["overlap_schedule"] is on
    assert bool(res.finding("SGL_OVERLAP_FLAG_OVERRIDDEN")) is overridden
    assert unplaced_prs(res) == []


def test_the_opt_in_topk_check_came_with_0_5_7():
    def tree(version):
        return sgl(version, "SGLANG_ENABLE_SPEC_V2=1", topk=4).finding("SGL_SPEC_V2_TOPK")
    assert (tree("0.5.7").severity, tree("0.5.7").engine_error) == (Severity.ERROR, "ValueError")
    early = tree("0.5.6.post2")
    assert early.severity == Severity.WARNING and early.engine_error is None and "issue #14077" in early.text


def test_the_opt_in_texts_name_the_releases_of_their_rows(monkeypatch):
    """The opt-in findings' release numbers are filled from the Changes that hold them: moved rows move the words."""
    from dataclasses import replace

    monkeypatch.setitem(CHANGES, "opt-in-eagle3", replace(CHANGES["opt-in-eagle3"], last_without="0.5.6",
                                                          first_with="0.5.6.post1"))
    monkeypatch.setitem(CHANGES, "opt-in-standalone", replace(CHANGES["opt-in-standalone"], last_without="0.5.6.post1",
                                                              first_with="0.5.6.post2"))
    res = sgl("0.5.6.post1", "SGLANG_ENABLE_SPEC_V2=1", "--disable-overlap-schedule", topk=4)
    assert "(EAGLE only up to 0.5.6, EAGLE/EAGLE3 from 0.5.6.post1, STANDALONE too from 0.5.6.post2)" in \
        res.finding("SGL_OVERLAP_FLAG_OVERRIDDEN").text
    assert "(from 0.5.6.post1; earlier builds started" in res.finding("SGL_SPEC_V2_TOPK").text
    early = sgl("0.5.6", "SGLANG_ENABLE_SPEC_V2=1", topk=4).finding("SGL_SPEC_V2_TOPK")
    assert "this build (before 0.5.6.post1) starts" in early.text


def test_era_four_log_lines():
    """0.5.23 as run (tests/oracles/test_sglang_flags_parity.py): the lines the overlap rule predicts."""
    assert sgl("0.5.23", extra="--device cpu").finding("SGL_OVERLAP_SCHEDULE").engine_logs == (
        "Overlap schedule is not implemented for speculative decoding on CPU.",
        "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.")
    assert sgl("0.5.23").finding("SGL_OVERLAP_SCHEDULE").engine_logs == ()
    assert sgl("0.5.20", "SGLANG_ENABLE_SPEC_V2=1").finding("SGL_SPEC_V2_ENV_IGNORED").engine_logs[0].startswith(
        "SGLANG_ENABLE_SPEC_V2 has been removed")
    assert sgl("0.5.21", "SGLANG_ENABLE_SPEC_V2=1").finding("SGL_SPEC_V2_ENV_IGNORED").engine_logs == ()
