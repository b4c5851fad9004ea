"""Named hook points: read or replace any named activation of a module by its name.

In the style of TransformerLens: a model's modules hold ``HookPoint`` attributes and pass every
interesting tensor through one (``h = self.fc_out(self.fc(x))``). ``setup_hooks(model)`` names them
once from ``named_modules()``; with no hook installed a hook point loops over nothing and returns its input
(draft decoding is a hot path). A hook is ``fn(tensor, name)``; returning a tensor replaces the
activation (patching), returning None only observes it.

    with draft.hooks({"layers.0.residual": lambda t, n: t * 0}):   # patch by name
        out = draft(ids, aux)
    out, cache = draft.run_with_cache(ids, aux, names=["fc_out", "layers.0.*"])

Names are listed by the owning model (``draft.hook_names``); for the draft they are stable and
documented in ``eagle3lab/models/draft.py``. A bare first-layer name (``"residual"``) is an alias of
``"layers.0.residual"``; ``*`` and ``?`` patterns select several names.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from contextlib import contextmanager

import torch
from torch import nn

from eagle3lab.errors import bad_input

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]


class HookPoint:
    """An identity with a name; hooks installed on it see (and may replace) what passes through.

    A plain attribute of the module that owns it, not a submodule: ``self.fc_out(x)`` is then a
    dict hit and one call, which the draft's decoding step pays about 30 times.
    """

    __slots__ = ("name", "fns", "order")
    _created = 0

    def __init__(self):
        self.name, self.fns = "", []
        self.order = HookPoint._created       # creation order = forward order, as the models write them
        HookPoint._created += 1

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        for fn in self.fns:
            out = fn(x, self.name)
            if out is not None:
                x = out
        return x

    def __repr__(self) -> str:
        return f"HookPoint({self.name!r})"


def setup_hooks(model: nn.Module, drop: tuple[str, ...] = ()) -> dict[str, HookPoint]:
    """Name every ``HookPoint`` attribute of ``model``'s modules once, from ``named_modules()``
    (path segments in ``drop`` left out, e.g. ``self_attn``); returns ``{name: HookPoint}`` in forward order."""
    found = []
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, HookPoint):
                value.name = ".".join(p for p in f"{path}.{attr}".split(".") if p and p not in drop)
                found.append(value)
    return {p.name: p for p in sorted(found, key=lambda p: p.order)}


def resolve(points: dict[str, HookPoint], names: str | Iterable[str] | Callable[[str], bool] | None) -> list[str]:
    """Names, aliases, glob patterns or a predicate -> the matching hook names (in forward order)."""
    all_names = list(points)
    if names is None:
        return all_names
    if callable(names):
        return [n for n in all_names if names(n)]
    if isinstance(names, str):
        names = [names]
    picked: list[str] = []
    for want in names:
        if want in points:
            hits = [want]
        elif f"layers.0.{want}" in points:
            hits = [f"layers.0.{want}"]
        else:
            hits = [n for n in all_names if fnmatch.fnmatchcase(n, want)]
        if not hits:
            raise bad_input("hook names", want, f"one of {', '.join(all_names)}", repr(want),
                            "Bare first-layer names (e.g. 'residual') mean 'layers.0.<name>'; "
                            "'*' patterns are allowed. Some names exist only when their flag is on "
                            "(fc_normed needs norm_before_fc or fc_norm).")
        picked += [n for n in hits if n not in picked]
    return [n for n in all_names if n in picked]


@contextmanager
def installed(points: dict[str, HookPoint], fns: dict[str, HookFn]):
    """Install ``{name_or_pattern: fn}`` for the duration of a ``with`` block."""
    added: list[tuple[HookPoint, HookFn]] = []
    try:
        for pattern, fn in fns.items():
            for name in resolve(points, pattern):
                points[name].fns.append(fn)
                added.append((points[name], fn))
        yield points
    finally:
        for point, fn in added:
            if fn in point.fns:
                point.fns.remove(fn)


def replace_with(value: torch.Tensor) -> HookFn:
    """A hook that swaps the activation for ``value`` (checked for shape, cast to its dtype/device)."""

    def hook(x: torch.Tensor, name: str) -> torch.Tensor:
        if value.shape != x.shape:
            raise bad_input("patch", name, f"a tensor of shape {tuple(x.shape)}", f"shape {tuple(value.shape)}",
                            "A patch replaces the activation of this forward, so it must have its shape.")
        return value.to(device=x.device, dtype=x.dtype)

    return hook


class ActivationCache(dict):
    """``{hook name: tensor}`` from one forward, with the first-layer aliases of ``resolve``."""

    def __missing__(self, key):
        alias = f"layers.0.{key}"
        if alias in self:
            return self[alias]
        raise KeyError(f"{key!r} was not recorded; recorded: {', '.join(self)}")


def run_with_cache(module, points: dict[str, HookPoint], *args, names=None, detach: bool = True, **kwargs):
    """Run ``module(*args, **kwargs)`` recording the selected activations -> ``(output, ActivationCache)``."""
    cache = ActivationCache()

    def record(x: torch.Tensor, name: str) -> None:
        cache[name] = x.detach() if detach else x

    with installed(points, {name: record for name in resolve(points, names)}):
        out = module(*args, **kwargs)
    return out, cache


def run_with_patches(module, points: dict[str, HookPoint], *args, patches: dict, **kwargs):
    """Run ``module`` with ``{name: tensor or fn}`` replacing those activations; returns its output."""
    fns = {name: (replace_with(p) if isinstance(p, torch.Tensor) else p) for name, p in patches.items()}
    with installed(points, fns):
        return module(*args, **kwargs)
