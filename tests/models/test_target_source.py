"""Where a notebook's target comes from (eagle3lab.models.target_source): loaded, a dump, or its config only."""

from __future__ import annotations

import json

import pytest
import torch

from eagle3lab import bundled
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.capture import capture_resid
from eagle3lab.models.hidden_dump import dump_hidden_states
from eagle3lab.models.target import load_target
from eagle3lab.models.target_source import open_target


@pytest.fixture(scope="module")
def target(bundled_models):
    return load_target(bundled.TARGET)


def test_config_only_loads_nothing_and_every_model_cell_says_why(capsys):
    source = open_target("/nowhere", num_layers=61, arch="DeepseekV3ForCausalLM")
    assert (source.mode, source.num_layers, source.arch, source.live) == ("config-only", 61, "DeepseekV3ForCausalLM", False)
    assert source.skip("the capture") is True
    assert capsys.readouterr().out == ("the capture: needs the loaded target; skipped (config-only mode: NUM_LAYERS = 61, "
                                       "ARCH = DeepseekV3ForCausalLM, no weights here).\n")
    assert source.skip_states("the scores") is True
    assert capsys.readouterr().out.startswith("the scores: needs the target's states; skipped (config-only mode: ")
    assert source.describe() == {"mode": "config-only", "arch": "DeepseekV3ForCausalLM", "num_layers": 61,
                                 "source": "a DeepseekV3ForCausalLM (N = 61, config only)"}
    with pytest.raises(Eagle3LabError, match="DUMP_DIR"):
        source.bank()


def test_nothing_given_is_refused_and_a_missing_folder_takes_the_stand_in():
    with pytest.raises(Eagle3LabError, match="NUM_LAYERS"):
        open_target(None)
    from eagle3lab.models.target import tiny_target

    source = open_target("/nowhere", missing=lambda: tiny_target("llama", num_layers=2, hidden_size=32))
    assert source.live and source.num_layers == 2 and source.notes and not source.skip("x")
    assert not source.skip_states("x")


def test_a_dump_stands_for_the_target_its_depth_from_the_head(target, tmp_path):
    prompts = ["def f(x):\n    return x", "import os"]
    n = target.num_layers
    dump_hidden_states(target, prompts, tmp_path / "d", points=[0, 3, n], batch_size=1, progress=False)
    source = open_target("/nowhere", dump_dir=tmp_path / "d", target_head=bundled.TARGET)
    assert (source.mode, source.num_layers, source.arch) == ("dump", n, target.arch)
    assert source.describe()["points"] == [0, 3, n] and source.describe()["samples"] == 2
    states, mask = source.dump_states()
    batch = target.encode(prompts)
    live = capture_resid(target, batch["input_ids"], [0, 3, n], batch["attention_mask"])
    assert torch.equal(mask, batch["attention_mask"].long())
    for k in (0, 3, n):      # the same states (dumped one prompt at a time, captured here as a padded batch)
        torch.testing.assert_close(states[k] * mask[..., None], live[k].cpu() * mask[..., None], atol=1e-4, rtol=1e-4)
    bank = source.bank()
    assert bank.points == (0, 3, n) and bank.num_layers == n
    assert source.skip("the capture") and not source.skip_states("the scores")   # a dump has states, no model
    draft = source.load_draft(bundled.DRAFT_HEALTHY)
    assert draft.under("sglang").aux_resid == tuple(bundled.recorded_resid(bundled.DRAFT_HEALTHY))
    with pytest.raises(Eagle3LabError, match=r"num_hidden_layers.*NUM_LAYERS states \(61\)"):
        open_target("/nowhere", dump_dir=tmp_path / "d", target_head=bundled.TARGET, num_layers=61)


def test_a_bare_vllm_dump_needs_its_depth(target, tmp_path):
    dump_hidden_states(target, ["import os"], tmp_path / "d", points=[2, target.num_layers], progress=False)
    (tmp_path / "d" / "manifest.json").unlink()        # a bare vLLM folder: no manifest
    with pytest.raises(Eagle3LabError, match="NUM_LAYERS"):
        open_target(dump_dir=tmp_path / "d", dump_layer_ids=[2, target.num_layers])
    source = open_target(dump_dir=tmp_path / "d", dump_layer_ids=[2, target.num_layers], num_layers=target.num_layers)
    assert source.dump.resid == (2, target.num_layers) and source.arch is None
    assert json.dumps(source.describe())          # plain values, for a notebook table
