"""Adding an engine's counter key or context rule is one row of ``versions.Rule`` (as a release's id rule is:
test_release_rows.py): a fictional SGLang 0.5.24 that reports its accepted drafts under a new key, and one that
applies the draft config's own sliding window through layer_types. The row alone changes what is read (the window's
row with its Change, listed in ``CHANGES``); nothing else is edited."""

import json

import pytest

from eagle3lab.bundled import DRAFT_HEALTHY, TARGET
from eagle3lab.doctor.server_evidence import parse_server_evidence
from eagle3lab.engines import context_rules, counters
from eagle3lab.engines.context_rules import BY_LAYER_TYPES, CHANGES, ROWS, WINDOW, resolve_context
from eagle3lab.engines.counters import COUNTER, COUNTERS, DRAFTS
from eagle3lab.engines.versions import Change, Rule
from eagle3lab.errors import Eagle3LabError

RENAMED = "spec_fictional_drafts"
# three requests: verify rounds and accepted drafts (bonus excluded) under the fictional name
RECORDS = "\n".join(json.dumps({"meta_info": {"spec_verify_ct": n, RENAMED: d}}) for n, d in ((4, 6), (5, 2), (7, 7)))


@pytest.fixture
def counter_0_5_24(monkeypatch):
    """SGLang 0.5.24 (fictional) reports accepted drafts as spec_fictional_drafts: one row, newest key first."""
    row = Rule("sglang", COUNTER, RENAMED, "0.5.24", DRAFTS, source="tokenizer_manager.py (fictional rename)")
    monkeypatch.setattr(counters, "COUNTERS", (row, *COUNTERS))
    return row


def test_a_counter_key_is_one_row(counter_0_5_24):
    ev = parse_server_evidence(RECORDS)
    assert ev.tau == pytest.approx(1 + 15 / 16) and ev.lines == 3
    assert f"{RENAMED} (SGLang 0.5.24 on: drafts; tokenizer_manager.py (fictional rename))" in ev.note
    assert counters.fields("sglang", DRAFTS)[0] is counter_0_5_24
    assert counters.counter_at("sglang", RENAMED, "0.5.24").get("value") == DRAFTS


def test_without_the_counter_row_the_key_is_not_read():
    with pytest.raises(Eagle3LabError, match="accepted-drafts count"):
        parse_server_evidence(RECORDS)


WINDOWED = dict(json.loads((DRAFT_HEALTHY / "config.json").read_text()), sliding_window=64,
                layer_types=["sliding_attention"])
TARGET_CFG = json.loads((TARGET / "config.json").read_text())
FICTIONAL = "sglang-fictional-layer-types-window"


@pytest.fixture
def window_0_5_24(monkeypatch):
    """SGLang 0.5.24 (fictional) applies the draft config's window through layer_types: one Change, one row."""
    change = Change("sglang", "llama_eagle3.py applies the config's sliding_window on the layers layer_types names "
                    "(fictional)", last_without="0.5.23", first_with="0.5.24")
    row = Rule("sglang", WINDOW, None, change, BY_LAYER_TYPES, reader="srt/models/llama_eagle3.py (fictional)",
               source="read in the {since} wheel (fictional)")
    monkeypatch.setitem(CHANGES, FICTIONAL, change)   # listed with the others (one record per change)
    monkeypatch.setattr(context_rules, "ROWS", (*ROWS, row))
    return row


def test_a_context_rule_is_one_row(window_0_5_24):
    new = resolve_context("sglang", WINDOWED, TARGET_CFG, "0.5.24")
    assert (new.window, new.window_layers, new.codes()) == (64, (0,), ("CONTEXT_WINDOW_APPLIED",))
    assert new.rows[-1] is window_0_5_24
    # the release before keeps the flag's rule: the config's window is dropped
    old = resolve_context("sglang", WINDOWED, TARGET_CFG, "0.5.23")
    assert old.window is None and old.codes() == ("CONTEXT_WINDOW_DROPPED",)
    # a build the row's change cannot place behaves as the newest row, and says so (the date places PR #24664)
    dated = resolve_context("sglang", WINDOWED, TARGET_CFG, "2026-09-01")
    unplaced = [n.text for n in dated.notes if n.code == "CONTEXT_VERSION_UNPLACED"]
    assert dated.window == 64 and len(unplaced) == 1 and "a release >= 0.5.24 (has it)" in unplaced[0]


def test_without_the_context_row_sglang_never_reads_the_window():
    rule = resolve_context("sglang", WINDOWED, TARGET_CFG, "0.5.24")
    assert rule.window is None and rule.codes() == ("CONTEXT_WINDOW_DROPPED",)
