"""Named hook points: read or replace any named activation of a module by its name.

In the style of TransformerLens: the model's ``forward`` passes every interesting tensor
through ``hp(name, tensor)``. With no hook installed that call is a single truth test and
returns the tensor unchanged (draft decoding is a hot path). A hook is ``fn(tensor, name)``;
returning a tensor replaces the activation (patching), returning None only observes it.

    with draft.hooks({"layers.0.residual": lambda t, n: t * 0}):   # patch by name
        out = draft(ids, aux)
    out, cache = draft.run_with_cache(ids, aux, names=["fc_out", "layers.0.*"])

Names are listed by the owning module (``draft.hook_names``); for the draft they are stable
and documented in ``eagle3lab/draft.py``. A bare first-layer name (``"residual"``) is an alias
of ``"layers.0.residual"``; ``*`` and ``?`` patterns select several names.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from contextlib import contextmanager

import torch

from eagle3lab.errors import bad_input

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]


class HookPoints:
    """A registry of named hook points. ``hp(name, x)`` returns ``x`` unless hooks are installed."""

    __slots__ = ("names", "_fns")

    def __init__(self, names: Iterable[str]):
        self.names: tuple[str, ...] = tuple(names)
        self._fns: dict[str, list[HookFn]] = {}

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        if self._fns:  # empty dict: no hooks anywhere, nothing else is looked at
            for fn in self._fns.get(name, ()):
                out = fn(x, name)
                if out is not None:
                    x = out
        return x

    def resolve(self, names: str | Iterable[str] | Callable[[str], bool] | None) -> list[str]:
        """Names, aliases, glob patterns or a predicate -> the matching hook names (in forward order)."""
        if names is None:
            return list(self.names)
        if callable(names):
            return [n for n in self.names if names(n)]
        if isinstance(names, str):
            names = [names]
        picked: list[str] = []
        for want in names:
            if want in self.names:
                hits = [want]
            elif f"layers.0.{want}" in self.names:
                hits = [f"layers.0.{want}"]
            else:
                hits = [n for n in self.names if fnmatch.fnmatchcase(n, want)]
            if not hits:
                raise bad_input("hook names", want, f"one of {', '.join(self.names)}", repr(want),
                                "Bare first-layer names (e.g. 'residual') mean 'layers.0.<name>'; "
                                "'*' patterns are allowed. Some names exist only when their flag is on "
                                "(fc_normed needs norm_before_fc or fc_norm).")
            picked += [n for n in hits if n not in picked]
        return [n for n in self.names if n in picked]

    @contextmanager
    def installed(self, fns: dict[str, HookFn]):
        """Install ``{name_or_pattern: fn}`` for the duration of a ``with`` block."""
        added: list[tuple[str, HookFn]] = []
        try:
            for pattern, fn in fns.items():
                for name in self.resolve(pattern):
                    self._fns.setdefault(name, []).append(fn)
                    added.append((name, fn))
            yield self
        finally:
            for name, fn in added:
                fns_here = self._fns.get(name, [])
                if fn in fns_here:
                    fns_here.remove(fn)
                if not fns_here:
                    self._fns.pop(name, None)


def replace_with(value: torch.Tensor) -> HookFn:
    """A hook that swaps the activation for ``value`` (checked for shape, cast to its dtype/device)."""

    def hook(x: torch.Tensor, name: str) -> torch.Tensor:
        if value.shape != x.shape:
            raise bad_input("patch", name, f"a tensor of shape {tuple(x.shape)}", f"shape {tuple(value.shape)}",
                            "A patch replaces the activation of this forward, so it must have its shape.")
        return value.to(device=x.device, dtype=x.dtype)

    return hook


class ActivationCache(dict):
    """``{hook name: tensor}`` from one forward, with the first-layer aliases of ``HookPoints``."""

    def __missing__(self, key):
        alias = f"layers.0.{key}"
        if alias in self:
            return self[alias]
        raise KeyError(f"{key!r} was not recorded; recorded: {', '.join(self)}")


def run_with_cache(module, hook_points: HookPoints, *args, names=None, detach: bool = True, **kwargs):
    """Run ``module(*args, **kwargs)`` recording the selected activations -> ``(output, ActivationCache)``."""
    cache = ActivationCache()

    def record(x: torch.Tensor, name: str) -> None:
        cache[name] = x.detach() if detach else x

    with hook_points.installed({name: record for name in hook_points.resolve(names)}):
        out = module(*args, **kwargs)
    return out, cache


def run_with_patches(module, hook_points: HookPoints, *args, patches: dict, **kwargs):
    """Run ``module`` with ``{name: tensor or fn}`` replacing those activations; returns its output."""
    fns = {name: (replace_with(p) if isinstance(p, torch.Tensor) else p) for name, p in patches.items()}
    with hook_points.installed(fns):
        return module(*args, **kwargs)
