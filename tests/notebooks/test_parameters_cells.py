"""Every notebook's parameters cell holds the loading defaults, and no code below it writes out an engine, an
architecture, a model path, ids or a setting of the run (tests/helpers/parameters.py says what is looked for)."""

from __future__ import annotations

import pytest
from helpers.parameters import assert_parameters_hold_the_literals, literal_names

from eagle3lab.app.workbook import NOTEBOOKS
from eagle3lab.engines.profiles import PROFILES

BANNED = set(PROFILES) | {"LlamaForCausalLM", "DeepseekV3ForCausalLM", "Qwen3ForCausalLM"}


@pytest.mark.parametrize("name", [p.name for p in sorted(NOTEBOOKS.glob("0[1-9]_*.ipynb"))])
def test_nothing_below_the_parameters_cell_names_what_a_user_would_change(name):
    assert_parameters_hold_the_literals(NOTEBOOKS / name, BANNED)


def test_the_literal_check_sees_settings_and_skips_a_figures_layout():
    assert literal_names("compare(bank, d, rule=False)", BANNED) == ["rule=False"]
    assert sorted(literal_names("d.under(engine='vllm')", BANNED)) == ["engine='vllm'", "vllm"]
    assert literal_names("launch(topk=1, num_draft_tokens=16)", BANNED) == ["topk=1", "num_draft_tokens=16"]
    assert literal_names("fig, ax = plt.subplots(figsize=(9, 4)); ax.set(xlim=(0, 8))", BANNED) == []
    assert literal_names("plt.subplots(1, 2, gridspec_kw={'width_ratios': [3, 1]})", BANNED) == []
    assert literal_names("ax.plot([1, 2], [3, 4], figsize=(9, 4))", BANNED) == ["[1, 2]", "[3, 4]"]
    assert literal_names("run(num_steps=None, engine=ENGINE)", BANNED) == []
