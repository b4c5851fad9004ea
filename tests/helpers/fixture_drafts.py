"""The committed tiny target and drafts (``tests/fixtures/tiny8``, built by ``tests/fixtures/make_fixtures.py``):
the inputs of every test that asserts a statistical verdict, the same bytes on every machine."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import sys
from pathlib import Path

import torch

from helpers.paths import FIXTURES

TINY8 = FIXTURES / "tiny8"
DRAFTS = TINY8 / "drafts"


def recipe() -> dict:
    """What each committed draft was trained on and how it is shipped (make_fixtures.RECIPE)."""
    sys.path.insert(0, str(FIXTURES))
    try:
        from make_fixtures import RECIPE
    finally:
        sys.path.remove(str(FIXTURES))
    return RECIPE


def draft_dir(name: str) -> Path:
    """The folder of committed draft ``name`` (a real checkpoint in its format: config.json + model.safetensors)."""
    path = DRAFTS / name
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path}: no committed fixture draft {name!r} (run tests/fixtures/make_fixtures.py)")
    return path


@functools.cache
def _target():
    from eagle3lab.models.target import load_target

    return load_target(TINY8 / "target", device="cpu", dtype="float32")


@functools.cache
def _streams():
    from helpers.tiny_models import tiny_streams

    return tiny_streams(_target().tokenizer)


def tiny8():
    """(Target, train stream, held-out stream): the committed 8-layer target, its docs tokenized by its tokenizer.
    A fresh copy each call, so a test may change it."""
    train, heldout = _streams()
    return copy.deepcopy(_target()), train, heldout


def varied_target():
    """The committed target with the final-norm weights the prenorm drafts were trained against."""
    from safetensors.torch import load_file

    target = copy.deepcopy(_target())
    with torch.no_grad():
        target.final_norm.weight.copy_(load_file(str(TINY8 / "varied_final_norm.safetensors"))["weight"])
    return target


def heldout_prompts(n: int, length: int = 12, stride: int = 40) -> list[list[int]]:
    """``n`` prompts of ``length`` tokens, every ``stride`` tokens of the held-out stream."""
    _, heldout = _streams()
    return [heldout[i:i + length].tolist() for i in range(0, n * stride, stride)]


def load_fixture_draft(name: str | Path, target=None):
    """Committed draft ``name`` (or a draft folder) as ``load_draft`` reads it for ``target`` (default: the
    committed target)."""
    from eagle3lab.models.checkpoint import load_draft

    target = target if target is not None else _target()
    path = name if isinstance(name, Path) else draft_dir(name)
    return load_draft(path, target=target).bound(num_target_layers=target.num_layers)


def perturbed_copy(name: str, out: str | Path, rel: float = 1e-6, seed: int = 0) -> Path:
    """Committed draft ``name`` copied to ``out`` with every float weight multiplied by (1 + rel * z), z standard
    normal: what another CPU's rounding does to a result, put in the weights. Returns ``out``."""
    import shutil

    from safetensors.torch import load_file, save_file

    out = Path(out)
    shutil.copytree(draft_dir(name), out)
    g = torch.Generator().manual_seed(seed)
    tensors = load_file(str(out / "model.safetensors"))
    for key in sorted(tensors):
        if tensors[key].is_floating_point():
            z = torch.randn(tensors[key].shape, generator=g, dtype=torch.float64)
            tensors[key] = (tensors[key].double() * (1 + rel * z)).to(tensors[key].dtype)
    save_file(tensors, str(out / "model.safetensors"))
    return out


@contextlib.contextmanager
def torch_threads(n: int):
    """Run the block on ``n`` torch threads (another thread count splits the float sums differently)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def manifest() -> dict:
    return json.loads((TINY8 / "MANIFEST.json").read_text())
