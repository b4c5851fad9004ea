"""Named hook points: read or replace any named activation of a module by its name.

TransformerLens' convention: a module holds ``HookPoint`` attributes named ``hook_<what>`` and passes
every interesting tensor through one (``h = self.hook_fc_out(self.fc(fc_in))``). ``setup_hooks(model)``
names them once from ``named_modules()``, so a hook's name is its module path: ``hook_fc_out``,
``layers.0.hook_residual``, ``layers.0.self_attn.hook_q``; the ``hook_`` prefix keeps a hook's name
apart from every module's (``hook_embed`` beside ``embed_tokens``, ``self_attn.hook_q`` beside
``self_attn.q_proj``). With no hook installed a hook point loops over nothing and returns its input
(draft decoding is a hot path). A hook is ``fn(tensor, name)``; returning a tensor replaces the
activation (patching), returning None only observes it.

    with draft.hooks({"layers.0.hook_residual": lambda t, n: t * 0}):   # patch by name
        out = draft(ids, aux)
    out, cache = draft.run_with_cache(ids, aux, names=["hook_fc_out", "layers.0.*"])

Names are listed by the owning model (``draft.hook_names``); the draft's are tabled, with shapes, in
``docs/hooks.md``. A name that is not a full path is read as the first layer's hook of that name
(``"hook_residual"`` -> ``layers.0.hook_residual``, ``"hook_q"`` -> ``layers.0.self_attn.hook_q``);
``*`` and ``?`` patterns select several names. The names of eagle3lab 0.1 (``fc_out``,
``layers.0.residual``, ``layers.0.q``) are read as their new names with a DeprecationWarning until
``LEGACY_UNTIL``; a hook function is always handed the new name.
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import re
import sys
import warnings
from collections.abc import Callable, Collection, Iterable
from contextlib import contextmanager

import torch
from torch import nn

from eagle3lab.errors import bad_input

HookFn = Callable[[torch.Tensor, str], "torch.Tensor | None"]
PREFIX = "hook_"            # every hook point's attribute name starts with it (TransformerLens)
FIRST_LAYER = "layers.0."   # where a name that is not a full path is looked up

# eagle3lab 0.1 named hook points like modules ("fc_out", "layers.0.q", with self_attn left out):
# those names are still read, with a DeprecationWarning, until this release.
LEGACY_UNTIL = "0.2.0"
_LEGACY_LEAVES = frozenset({
    "embed", "fc_in", "fc_normed", "fc_out", "recycled_in", "emb_normed", "hid_normed", "residual", "attn_in",
    "q", "k", "v", "attn_out", "resid_mid", "mlp_in", "mlp_out", "resid_out", "prenorm_out", "normed_out",
    "logits", "hidden_out"})
_ATTENTION_LEAVES = frozenset({"q", "k", "v"})   # these lived in self_attn, which the 0.1 names left out
_LEGACY_LAYER = re.compile(r"layers\.\d+")


class HookPoint:
    """An identity with a name; hooks installed on it see (and may replace) what passes through.

    A plain attribute of the module that owns it, not a submodule: ``self.hook_fc_out(x)`` is then a
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


def setup_hooks(model: nn.Module) -> dict[str, HookPoint]:
    """Name every ``HookPoint`` attribute of ``model``'s modules once, by its module path and attribute
    (``layers.0.self_attn.hook_q``); returns ``{name: HookPoint}`` in forward order."""
    found = []
    for path, module in model.named_modules():
        for attr, value in vars(module).items():
            if isinstance(value, HookPoint):
                if not attr.startswith(PREFIX):
                    raise TypeError(f"{type(module).__name__}.{attr} is a HookPoint: its attribute name must start "
                                    f"with {PREFIX!r} ({PREFIX}{attr}), so that hook names never read as modules")
                value.name = f"{path}.{attr}" if path else attr
                found.append(value)
    return {p.name: p for p in sorted(found, key=lambda p: p.order)}


def legacy_rename(name: str) -> str | None:
    """An eagle3lab 0.1 hook name -> its name now (``fc_out`` -> ``hook_fc_out``, ``layers.1.q`` ->
    ``layers.1.self_attn.hook_q``, ``residual`` -> ``hook_residual``); None for any other name."""
    layer, _, leaf = name.rpartition(".")
    if leaf not in _LEGACY_LEAVES or (layer and not _LEGACY_LAYER.fullmatch(layer)):
        return None
    attention = "self_attn." if leaf in _ATTENTION_LEAVES else ""
    return f"{layer + '.' if layer else ''}{attention}{PREFIX}{leaf}"


def canonical(name: str, known: Collection[str], warn: bool = True) -> str | None:
    """The name in ``known`` that ``name`` stands for: itself; the first layer's hook of that name
    (``hook_residual`` -> ``layers.0.hook_residual``); or, for an eagle3lab 0.1 name, its new name (a
    DeprecationWarning when ``warn``). None when it stands for none of them (a pattern, say)."""
    found, legacy = _lookup(name, known)
    if legacy and warn:
        warn_renamed({name: found})
    return found


def _lookup(name: str, known: Collection[str]) -> tuple[str | None, bool]:
    """``canonical``'s answer, and whether it came from an eagle3lab 0.1 name."""
    if name in known:
        return name, False
    first = _first_layer(name, known)
    if first is not None:
        return first, False
    new = legacy_rename(name)
    found = None if new is None else (new if new in known else _first_layer(new, known))
    return found, found is not None


def _first_layer(name: str, known: Collection[str]) -> str | None:
    """The one layer-0 hook whose path ends with ``name`` (``hook_q`` -> ``layers.0.self_attn.hook_q``)."""
    if name.startswith("layers."):
        return None
    hits = [n for n in known if n.startswith(FIRST_LAYER) and (n == FIRST_LAYER + name or n.endswith("." + name))]
    return hits[0] if len(hits) == 1 else None


def warn_renamed(renamed: dict[str, str]) -> None:
    """One DeprecationWarning for old hook names read as new ones, pointed at the caller's line."""
    pairs = ", ".join(f"{old!r} -> {new!r}" for old, new in renamed.items())
    warnings.warn(f"hook names of eagle3lab 0.1 are read until {LEGACY_UNTIL} only: {pairs} (hook points are named "
                  "hook_<what> by their module path; docs/hooks.md)", DeprecationWarning, stacklevel=_caller_level())


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _caller_level() -> int:
    """``warnings.warn``'s stacklevel for the first frame outside eagle3lab (and contextlib, which
    ``with draft.hooks(...)`` passes through), so the warning names the user's line and shows."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (frame.f_code.co_filename.startswith(_PACKAGE)
                                 or frame.f_code.co_filename == contextlib.__file__):
        frame, level = frame.f_back, level + 1
    return level


def select(names: str | Iterable[str] | Callable[[str], bool] | None, known: Iterable[str]) -> dict[str, list[str]]:
    """``{what was asked: the known names it selects}``: names, first-layer names, 0.1 names, glob patterns
    (a predicate or None: one entry, key ``"*"``). A selection may be empty; ``resolve`` refuses that."""
    known = list(known)
    if names is None:
        return {"*": known}
    if callable(names):
        return {"*": [n for n in known if names(n)]}
    picked, renamed = {}, {}
    for want in [names] if isinstance(names, str) else names:
        name, legacy = _lookup(want, known)
        picked[want] = [name] if name is not None else [n for n in known if fnmatch.fnmatchcase(n, want)]
        if legacy:
            renamed[want] = name
    if renamed:
        warn_renamed(renamed)
    return picked


def resolve(points: Collection[str], names: str | Iterable[str] | Callable[[str], bool] | None,
            where: str = "hook names") -> list[str]:
    """Names, first-layer names, patterns or a predicate -> the matching hook names (in forward order);
    bad_input naming what to write instead when one of them matches nothing."""
    picked = select(names, points)
    for want, hits in picked.items():
        if not hits and want != "*":
            raise bad_input(where, want, f"one of {', '.join(points)}", repr(want), _hint(want, points))
    chosen = {n for hits in picked.values() for n in hits}
    return [n for n in points if n in chosen]


def _hint(want: str, points: Collection[str]) -> str:
    """What to write instead of a name that matches no hook point: its hook_ form when that matches."""
    layer, _, leaf = want.rpartition(".")
    attention = "self_attn." if leaf in _ATTENTION_LEAVES else ""
    renamed = f"{layer + '.' if layer else ''}{attention}{PREFIX}{leaf}"
    if not leaf.startswith(PREFIX) and any(select([renamed], points).values()):
        return f"Hook points are named hook_<what> by their module path: try {renamed!r} (docs/hooks.md)."
    return ("A name that is not a full path means the first layer's ('hook_residual' is "
            "'layers.0.hook_residual'); '*' patterns are allowed. Some names exist only when their flag is on "
            "(hook_fc_normed needs norm_before_fc or fc_norm).")


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
    """``{hook name: tensor}`` from one forward; ``cache["hook_residual"]`` reads the first layer's, and
    an eagle3lab 0.1 name its new name's, as ``resolve`` does."""

    def __missing__(self, key):
        name = canonical(key, self) if isinstance(key, str) else None
        if name is not None:
            return self[name]
        renamed = legacy_rename(key) if isinstance(key, str) else None
        also = f" (hook points are named hook_<what> now: {renamed!r})" if renamed else ""
        raise KeyError(f"{key!r} was not recorded{also}; recorded: {', '.join(self)}")


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
