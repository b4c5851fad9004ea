"""load_draft reads a draft's tensors onto their device and builds it on meta (issue 33): the weights are the
file's, cast once to the dtype asked; nothing is initialised at random; the target's embedding is copied, not
aliased; an embedding the checkpoint lacks (loaded for conversion only) is zeros, never a meta tensor."""

from __future__ import annotations

import pytest
import torch

from eagle3lab import bundled
from eagle3lab.models import checkpoint
from eagle3lab.models.checkpoint import canonical_state_dict, find_weight_files, load_draft, read_weights


@pytest.fixture(scope="module")
def folders():
    if not (bundled.DRAFT_CASE / "config.json").exists() or not (bundled.TARGET / "config.json").exists():
        pytest.skip("the bundled models are not built (make data)")
    return bundled.DRAFT_CASE, bundled.TARGET


def test_weights_are_the_files_cast_once_and_read_onto_the_device(folders, monkeypatch):
    draft_dir, target_dir = folders
    devices = []
    real = checkpoint._read_safetensors
    monkeypatch.setattr(checkpoint, "_read_safetensors", lambda file, device: devices.append(device) or real(file, device))
    draft = load_draft(draft_dir, target=target_dir, device="cpu", dtype="bfloat16")
    assert devices == [torch.device("cpu")]
    stored, _ = canonical_state_dict(read_weights(find_weight_files(draft_dir)), draft_dir)
    params = draft.state_dict()
    for key, value in stored.items():
        want = value.to(torch.bfloat16) if value.is_floating_point() else value
        assert params[key].dtype == want.dtype and torch.equal(params[key], want), key
    # the embedding came from the target's folder, in the dtype asked
    assert draft.load_report.embedding == "target" and params["embed_tokens.weight"].dtype == torch.bfloat16
    assert not any(p.is_meta for p in draft.parameters()) and not any(b.is_meta for b in draft.buffers())
    assert not any(p.requires_grad for p in draft.parameters()) and not draft.training


def test_a_loaded_targets_embedding_is_copied_not_aliased(folders):
    from eagle3lab.models.target import load_target

    draft_dir, target_dir = folders
    target = load_target(target_dir, device="cpu")
    draft = load_draft(draft_dir, target=target, device="cpu")
    theirs = target.model.get_input_embeddings().weight
    assert torch.equal(draft.embed_tokens.weight, theirs)
    assert draft.embed_tokens.weight.data_ptr() != theirs.data_ptr()


def test_a_missing_embedding_is_zeros_on_the_device(folders):
    draft_dir, _ = folders
    draft = load_draft(draft_dir, num_target_layers=12, require_embedding=False, device="cpu", dtype=None)
    weight = draft.embed_tokens.weight
    assert draft.embedding_missing and draft.load_report.embedding == "missing"
    assert weight.device.type == "cpu" and weight.dtype == torch.float32 and not bool(weight.any())
    assert isinstance(weight, torch.nn.Parameter) and not weight.requires_grad
