"""Adding an engine's counter key or context rule is one row of ``versions.Rule`` (as a release's id rule is:
test_release_rows.py): a fictional SGLang 0.5.24 that renames its drafts-only counter, and a fictional SGLang
release that applies the draft config's own sliding window. The row alone changes what is read; nothing else is
edited."""

import json

import pytest

from eagle3lab.doctor.server_evidence import parse_server_evidence
from eagle3lab.engines import counters
from eagle3lab.engines.counters import COUNTER, COUNTERS, DRAFTS
from eagle3lab.engines.versions import Rule
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
