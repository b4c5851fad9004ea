"""The bundled models in data/: they load everywhere, are wired as their cards say, and the
cards' numbers are reproduced (skipped in a checkout where `make data` has not been run)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from eagle3lab import bundled
from eagle3lab.engines.layer_ids import to_engine_ids

pytestmark = pytest.mark.usefixtures("bundled_models")


@pytest.fixture(scope="module")
def target():
    from eagle3lab.models.target import load_target
    return load_target(bundled.TARGET, device="cpu", dtype="float32")


def test_data_dir_fits_the_budget():
    """What data/ commits (the converted real targets in data/external/ are installed, not committed)."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "data"], cwd=bundled.ROOT, capture_output=True, text=True,
                             check=True).stdout.split()
    total = sum((bundled.ROOT / name).stat().st_size for name in tracked)
    assert total <= 80e6, f"data/ commits {total / 1e6:.1f} MB (budget 80 MB: the bundled models and the real track's three drafts)"
    assert not any(name.startswith("data/external/") for name in tracked)


def test_target_loads_with_plain_transformers(target):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(str(bundled.TARGET), dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(str(bundled.TARGET))
    assert type(model).__name__ == "LlamaForCausalLM" and model.config.num_hidden_layers >= 12
    ids = torch.tensor([tok("def main():\n    return")["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(model(input_ids=ids).logits, target.model(input_ids=ids).logits, atol=1e-5)
    assert 2048 <= len(tok) <= 8192


def test_drafts_load_plain_and_are_wired_as_shipped(target):
    from safetensors.torch import load_file

    from eagle3lab.models.checkpoint import load_draft

    n = target.num_layers
    healthy_cfg = json.loads((bundled.DRAFT_HEALTHY / "config.json").read_text())
    case_cfg = json.loads((bundled.DRAFT_CASE / "config.json").read_text())
    assert healthy_cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == to_engine_ids(
        "sglang", [2, n // 2, n - 3], n)
    assert not healthy_cfg.get("norm_before_residual", False)
    assert case_cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [2, n // 2, n - 2]
    assert case_cfg["norm_before_residual"] is True
    for folder in (bundled.DRAFT_HEALTHY, bundled.DRAFT_CASE):
        tensors = load_file(str(folder / "model.safetensors"))
        assert tensors["fc.weight"].shape == (target.hidden_size, 3 * target.hidden_size)
        ids = torch.arange(len(tensors["d2t"])) + tensors["d2t"]
        assert bool((ids[1:] > ids[:-1]).all()) and bool(tensors["t2d"][ids].all())
    healthy = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    case = load_draft(bundled.DRAFT_CASE, target=target, device="cpu")
    assert healthy.under("sglang").aux_resid == (2, n // 2, n - 3)
    assert case.under("sglang").aux_resid == (3, n // 2 + 1, n - 1)
    assert not case.under("sglang").settings.norm_before_residual
    assert case.under("speculators").settings.norm_before_residual


def test_cards_list_the_files_sha256():
    from eagle3lab.train.model_card import sha256

    for folder in (bundled.TARGET, bundled.DRAFT_HEALTHY, bundled.DRAFT_CASE):
        card = (folder / "README.md").read_text()
        listed = dict(re.findall(r"\| `([^`]+)` \| [\d,]+ \| `([0-9a-f]{64})` \|", card))
        assert listed.keys() == {p.name for p in folder.iterdir() if p.is_file() and p.name != "README.md"}
        for name, digest in listed.items():
            assert sha256(folder / name) == digest, f"{folder.name}/{name}"


@pytest.mark.slow
def test_card_numbers_are_reproduced_and_the_case_draft_collapses_as_shipped():
    from eagle3lab.train.model_card import verify

    now = {}
    assert verify(bundled.DATA, measured=now) == []
    healthy, case = now["draft-healthy"], now["draft-case"]     # measured in this run, not read back
    assert healthy["sglang"] == {**healthy["as_trained"], "norm_before_residual_applied": False}
    assert case["sglang"]["tau_est"] < case["as_trained"]["tau_est"] - 0.5
    assert case["sglang"]["agree"][0] < 0.5 * case["as_trained"]["agree"][0]


@pytest.mark.slow
def test_card_acceptance_is_reproduced_by_the_decoding_engine():
    """The K = 4 rows of each draft card's acceptance table, re-measured with real decoding."""
    from eagle3lab.train.model_card import measure_acceptance

    for folder in (bundled.DRAFT_HEALTHY, bundled.DRAFT_CASE):
        card = json.loads((folder / "acceptance.json").read_text())
        now = measure_acceptance(bundled.DATA, folder.name, chains=(4,), n_prompts=card["prompts"],
                                 max_new_tokens=card["max_new_tokens"])
        assert set(now["runs"]) == set(card["runs"])
        for label, run in now["runs"].items():
            stored, measured = card["runs"][label]["chains"]["4"], run["chains"]["4"]
            assert measured["lossless"] and stored["lossless"]
            # greedy decoding is deterministic: only a float tie on another CPU could move a round
            assert measured["tau"] == pytest.approx(stored["tau"], abs=0.05), (folder.name, label)
    healthy = json.loads((bundled.DRAFT_HEALTHY / "acceptance.json").read_text())["runs"]
    shipped = healthy["as shipped, served by SGLang"]["chains"]["4"]
    assert shipped["conditional"][0] >= 0.6 and shipped["tau"] >= 2.2   # the targets for draft-healthy
    case = json.loads((bundled.DRAFT_CASE / "acceptance.json").read_text())["runs"]
    assert case["as shipped, served by SGLang"]["chains"]["4"]["tau"] < 1.5
    assert case["trained wiring and residual restored"]["chains"]["4"]["tau"] > 2.5
