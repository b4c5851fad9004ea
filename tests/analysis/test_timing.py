"""The cost model's pieces timed with the decoding loop's own methods (no speed is asserted)."""

from __future__ import annotations

import pytest
from helpers.tiny_models import tiny_pair

from eagle3lab.analysis.timing import measure_costs

pytestmark = pytest.mark.usefixtures("single_thread")


def test_measure_costs_on_the_loop_steps():
    target, draft = tiny_pair()
    cm = measure_costs(target, draft, context_len=20, verify_sizes=(1, 2, 4), settings=((3, 1, None), (3, 2, 5)),
                       repeats=2, warmup=1)
    assert set(cm.verify_s) == {1, 2, 4} and set(cm.extend_s) == {1, 2, 3, 4}
    assert cm.target_step_s > 0 and cm.draft_step_s > 0 and cm.c > 0
    assert set(cm.draft_phase_s) == set(cm.setting_verify_s) == {"K=3", "K=3,topk=2,M=5"}
    assert list(cm.verify_frame().columns) == ["seconds", "target_steps"]
    d = cm.to_dict()
    assert d["c"] == pytest.approx(cm.c) and set(d["verify_target_steps"]) == {1, 2, 4}
