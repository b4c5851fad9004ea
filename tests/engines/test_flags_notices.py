"""ENGINE_VERSION_UNPLACED notices, one per change: those the flag rules place and the layer-id translator's meet in
``resolve_flags`` (``one_notice_per_change``), keyed by the change, not by the sentence alone."""

from __future__ import annotations

from dataclasses import replace

from eagle3lab.engines.flags import (
    SEED_COMMAND,
    SEED_DRAFT_CONFIG,
    SEED_TARGET_CONFIG,
    change_key,
    one_notice_per_change,
    resolve_flags,
)
from eagle3lab.engines.flags.common import unplaced_finding
from eagle3lab.engines.flags.result import flag_finding
from eagle3lab.engines.layer_ids import CHANGES as ID_CHANGES
from eagle3lab.engines.versions import Change

VERSION = "post-#25464"
OTHER = flag_finding("SGL_MAX_RUNNING_REQUESTS", "warning", "reset to 48", "rule", "all")


def test_one_change_placed_on_both_paths_is_one_notice():
    change = ID_CHANGES["sglang#25454"]
    placed = [unplaced_finding(change, VERSION)]
    out = one_notice_per_change(placed, [OTHER, unplaced_finding(change, VERSION)])
    assert out == [placed[0], OTHER]


def test_two_changes_worded_alike_are_two_notices():
    # the sentence does not say whether a change landed: two changes that differ only there read the same
    landed = Change("sglang", "a capture rule", on_main_by="2026-03-01")
    open_pr = replace(landed, landed=False)
    a, b = unplaced_finding(landed, VERSION), unplaced_finding(open_pr, VERSION)
    assert a.text == b.text and change_key(a) != change_key(b)
    assert one_notice_per_change([a], [b, OTHER]) == [a, b, OTHER]


def test_notices_come_first_in_the_order_placed_then_the_translators():
    first, second = ID_CHANGES["sglang#22836"], ID_CHANGES["sglang#25454"]
    placed = [unplaced_finding(first, VERSION)]
    translated = unplaced_finding(second, VERSION)
    assert one_notice_per_change(placed, [OTHER, translated, placed[0]]) == [placed[0], translated, OTHER]
    assert one_notice_per_change([], [OTHER]) == [OTHER]


def test_the_seed_at_an_unplaceable_mark_names_each_change_once():
    res = resolve_flags("sglang", SEED_COMMAND, SEED_TARGET_CONFIG, SEED_DRAFT_CONFIG, engine_version=VERSION)
    notices = [f for f in res.findings if f.code == "ENGINE_VERSION_UNPLACED"]
    assert notices and len({change_key(f) for f in notices}) == len(notices)
    # placed by the flag rules and the translator: once
    assert [f.change for f in notices].count(ID_CHANGES["sglang#25454"]) == 1
