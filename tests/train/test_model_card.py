"""The model card's throughput table: the recorded median beside the paired interval, when the record has one."""

from __future__ import annotations

import copy
import json

from eagle3lab import bundled
from eagle3lab.train.model_card import acceptance_section


def test_the_throughput_table_states_the_paired_interval_or_that_the_record_has_none():
    acc = json.loads((bundled.DRAFT_HEALTHY / "acceptance.json").read_text())
    runs = json.loads((bundled.DRAFT_HEALTHY / "bench.json").read_text())     # label -> a bench run, as recorded
    new = copy.deepcopy(runs)
    for b in new.values():
        b["speed_ratio"] = {"decode": {"value": 1.31, "low": 1.12, "high": 1.52, "level": 0.95, "units": 8}}
    assert "- (recorded before intervals)" in acceptance_section(acc, runs)
    text = acceptance_section(acc, new)
    assert "1.31x [1.12, 1.52] (8 prompts)" in text and "paired 95% interval over prompts" in text
