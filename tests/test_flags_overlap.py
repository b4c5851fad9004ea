"""SGLang's overlap scheduler with EAGLE3, era by era: spec-V2 opt-in (PR #11398), on by default (PR #21062),
spec V1 retired (PR #25464), SGLANG_ENABLE_SPEC_V2 removed (PR #27964)."""

import pytest
from packaging.version import Version

from eagle3lab.flags import resolve_flags
from eagle3lab.flags_sglang import CHANGES, OVERLAP_CHANGES, OVERLAP_ERAS, overlap_era

# One release, date or PR mark inside each era (-1: before PR #11398).
IN_ERA = {-1: "0.5.2", 0: "0.5.10", 1: "2026-05-01", 2: "2026-06-09", 3: "2026-06-12"}


def sgl(version, env="", extra="", topk=1):
    tokens = 4 if topk == 1 else 8
    cmd = (f"{env} python -m sglang.launch_server --model-path M --speculative-algorithm EAGLE3 "
           f"--speculative-draft-model-path D --speculative-num-steps 3 --speculative-eagle-topk {topk} "
           f"--speculative-num-draft-tokens {tokens} {extra}")
    return resolve_flags("sglang", cmd, engine_version=version, target_arch="LlamaForCausalLM",
                         num_target_layers=32)


def unplaced_prs(res):
    return [f.engine_versions.split(";")[0] for f in res.findings if f.code == "ENGINE_VERSION_UNPLACED"]


@pytest.mark.parametrize("version,era,assumed", [
    ("0.5.2", -1, False), ("pre-#11398", -1, False),
    ("0.5.4", 0, False), ("0.5.10.post1", 0, False), ("2026-04-28", 0, True), ("pre-#21062", 0, True),
    ("0.5.11", 1, False), ("0.5.12.post1", 1, False), ("2026-04-29", 1, False), ("2026-06-07", 1, False),
    ("pre-#25464", 1, True),
    ("2026-06-08", 2, False), ("2026-06-10", 2, False), ("pre-#27964", 2, True),
    ("2026-06-11", 3, False), ("post-#27964", 3, False), ("0.5.15", 3, False), (None, 3, False),
    ("0.5.13", 3, True), ("post-#25464", 3, True), ("post-#21062", 3, True),
])
def test_each_build_falls_in_one_era(version, era, assumed):
    """Dates and releases place each change; a PR mark places one and the order places the rest."""
    assert overlap_era(version) == (era, assumed)
    rule = sgl(version).finding("SGL_OVERLAP_SCHEDULE").rule
    assert rule.startswith(f"SGLang '{OVERLAP_ERAS[era + 1]}' era (")
    if era >= 0:
        assert f"from PR #{CHANGES[OVERLAP_CHANGES[era]].pr}" in rule
    if era < 3:
        assert f"until PR #{CHANGES[OVERLAP_CHANGES[era + 1]].pr}" in rule


@pytest.mark.parametrize("era,env,extra,topk,on", [
    (-1, "", "", 1, False), (-1, "SGLANG_ENABLE_SPEC_V2=1", "", 1, False),
    (0, "", "", 1, False), (0, "SGLANG_ENABLE_SPEC_V2=0", "", 1, False), (0, "SGLANG_ENABLE_SPEC_V2=1", "", 1, True),
    (0, "SGLANG_ENABLE_SPEC_V2=true", "--disable-overlap-schedule", 1, True),  # the env var wins
    (1, "", "", 1, True), (1, "SGLANG_ENABLE_SPEC_V2=1", "", 1, True), (1, "SGLANG_ENABLE_SPEC_V2=0", "", 1, False),
    (1, "SGLANG_ENABLE_SPEC_V2=False", "", 1, False), (1, "", "--disable-overlap-schedule", 1, False),
    (1, "", "", 4, False), (1, "SGLANG_ENABLE_SPEC_V2=1", "", 4, False),  # a tree falls back to spec V1
    (2, "", "", 1, True), (2, "SGLANG_ENABLE_SPEC_V2=0", "", 1, False), (2, "SGLANG_ENABLE_SPEC_V2=1", "", 1, True),
    (2, "", "--disable-overlap-schedule", 1, False), (2, "", "", 4, True),
    (3, "", "", 1, True), (3, "SGLANG_ENABLE_SPEC_V2=0", "", 1, True), (3, "SGLANG_ENABLE_SPEC_V2=1", "", 1, True),
    (3, "", "--disable-overlap-schedule", 1, False), (3, "", "--device cpu", 1, False), (3, "", "", 4, True),
])
def test_overlap_by_era_env_flag_topk_and_device(era, env, extra, topk, on):
    res = sgl(IN_ERA[era], env, extra, topk)
    assert res.effective["overlap_schedule"] is on
    f = res.finding("SGL_OVERLAP_SCHEDULE")
    assert f.severity == "info" and f.message.startswith(f"Overlap scheduler {'on' if on else 'off'} with EAGLE3")
    assert unplaced_prs(res) == []  # every build here is placed, and nothing older is asked about


def test_what_sglang_logs_in_each_era():
    assert "'Spec v2 is enabled by default" in sgl(IN_ERA[1]).finding("SGL_OVERLAP_SCHEDULE").message
    assert "'Spec v1 is used" in sgl(IN_ERA[1], topk=4).finding("SGL_OVERLAP_SCHEDULE").message
    for era in (2, 3):
        off = sgl(IN_ERA[era], extra="--disable-overlap-schedule").finding("SGL_OVERLAP_SCHEDULE")
        assert "'Non-overlap (synchronous) spec v2 is used" in off.message


def test_opt_in_era_overrides_the_flag_and_refuses_a_tree():
    res = sgl(IN_ERA[0], "SGLANG_ENABLE_SPEC_V2=1", "--disable-overlap-schedule")
    assert res.finding("SGL_OVERLAP_FLAG_OVERRIDDEN").severity == "warning"
    tree = sgl(IN_ERA[0], "SGLANG_ENABLE_SPEC_V2=1", topk=4).finding("SGL_SPEC_V2_TOPK")
    assert tree.severity == "error" and "topk = 1" in tree.message and tree.setting == "topk"
    for era, env in ((0, ""), (1, "SGLANG_ENABLE_SPEC_V2=1"), (2, "SGLANG_ENABLE_SPEC_V2=1")):
        quiet = sgl(IN_ERA[era], env, "--disable-overlap-schedule", topk=4).codes()
        assert "SGL_SPEC_V2_TOPK" not in quiet and "SGL_OVERLAP_FLAG_OVERRIDDEN" not in quiet


def test_removed_env_var_is_ignored_with_a_warning_when_it_meant_off():
    off = sgl(IN_ERA[3], "SGLANG_ENABLE_SPEC_V2=0").finding("SGL_SPEC_V2_ENV_IGNORED")
    assert off.severity == "warning" and "PR #27964" in off.message and "--disable-overlap-schedule" in off.fix
    assert sgl(IN_ERA[3], "SGLANG_ENABLE_SPEC_V2=1").finding("SGL_SPEC_V2_ENV_IGNORED").severity == "info"
    assert not sgl(IN_ERA[2], "SGLANG_ENABLE_SPEC_V2=0").finding("SGL_SPEC_V2_ENV_IGNORED")


def test_unreadable_env_value_keeps_the_default():
    for era, on in ((0, False), (1, True)):
        res = sgl(IN_ERA[era], "SGLANG_ENABLE_SPEC_V2=maybe")
        assert res.effective["overlap_schedule"] is on
        assert "not a boolean SGLang reads" in res.finding("SGL_OVERLAP_SCHEDULE").message


def test_unplaceable_release_shows_the_newest_rule_and_names_the_older_one():
    res = sgl("0.5.13", "SGLANG_ENABLE_SPEC_V2=0")  # no release bound says whether 0.5.13 has PR #27964
    assert res.effective["overlap_schedule"] is True
    [warning] = [f for f in res.findings if f.code == "ENGINE_VERSION_UNPLACED"]  # one change, not four
    for part in ("SGLang PR #27964", "merged 2026-06-11", "a release <= 0.5.12.post1", "a release >= 0.5.15"):
        assert part in warning.message, part
    assert "Builds before PR #27964: off" in res.finding("SGL_OVERLAP_SCHEDULE").message
    assert res.finding("SGL_SPEC_V2_ENV_IGNORED").severity == "warning"
    early = sgl("2026-03-01", "SGLANG_ENABLE_SPEC_V2=1")  # PR #11398 has no known merge date
    assert early.effective["overlap_schedule"] is True and unplaced_prs(early) == ["PR #11398"]
    assert "Builds before PR #11398: off" in early.finding("SGL_OVERLAP_SCHEDULE").message


def test_the_changes_are_recorded_in_order():
    changes = [CHANGES[k] for k in OVERLAP_CHANGES]
    merged = [c.merged for c in changes if c.merged]
    assert merged == sorted(merged) and len(merged) == 3
    for c in changes:
        assert Version(c.last_without) < Version(c.first_with), c.pr
    for older, newer in zip(changes, changes[1:]):
        assert Version(older.last_without) <= Version(newer.last_without), newer.pr
        assert Version(older.first_with) <= Version(newer.first_with), newer.pr
