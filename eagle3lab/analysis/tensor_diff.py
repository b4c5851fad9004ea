"""Tensor diff: the same inputs through two implementations or profiles, hook point by hook point.

Each side is a draft (run here on the given inputs, every hook point recorded) or a trace (a mapping
hook name -> tensor: an engine's dumped activations, a run saved with ``save_trace``). The two are
compared at every hook name both have, in forward order, and the first point that differs beyond
tolerance is named: the step where two engines stop doing the same arithmetic.

    diff = tensor_diff(draft.under("sglang"), draft.under("vllm"), input_ids=ids, aux_hidden_states=aux)
    diff.first_divergence          # 'layers.0.hook_residual': SGLang ignores norm_before_residual
    diff = tensor_diff(load_trace("sglang-dump.safetensors"), draft, input_ids=ids, aux_hidden_states=aux)

Per point: ``max_abs`` = max |a - b|; ``max_rel`` = max |a - b| / (|b| + tiny), tiny the smallest
normal float32 (so exact zeros in b do not divide by zero); ``diverges`` = some element has
``|a - b| > atol * scale + rtol * |b|`` (``torch.allclose``'s test), where ``scale`` is the RMS of b
at that point (``atol_unit="rms"``, the default) or 1 (``atol_unit="abs"``, exactly allclose).
Rounding error grows with a tensor's scale, not with one element's: on the bundled case draft
fp32 against fp64 differs by up to 1.5e-4 at hook_fc_out (RMS 27) but 4e-6 at the norms (RMS 1), so a fixed atol
either flags fc_out or misses a real change at the norms. NaN at the same place on both sides
counts as equal; NaN on one side only diverges (max_abs inf). A shape mismatch diverges and is
noted; its differences are NaN.

The defaults suit float32 against float32. For a low-precision side pass its preset,
``tensor_diff(a, b, **TOLERANCES["bfloat16"], ...)``: measured on the bundled drafts, a bf16 run
of the same weights needs about atol 0.02 (x RMS) with rtol 0.016 at its worst point (hook_mlp_out).

A trace's names are read as ``models.hooks`` reads names: a first-layer name that is not a full path
(``hook_residual``) is matched to the draft's ``layers.0.hook_residual``, and eagle3lab 0.1's names
(``fc_out``, ``layers.0.residual``) to their new ones, with one DeprecationWarning.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from eagle3lab.atomic import atomic_file
from eagle3lab.errors import bad_input
from eagle3lab.models.hooks import ActivationCache, canonical, legacy_rename, resolve, warn_renamed

# atol is in units of each point's RMS of b (atol_unit="rms"); rtol as in torch.allclose.
# float32: about 5x the fp32-vs-fp64 gap measured on the bundled case draft (at most 2.2e-6 x RMS at rtol 1e-5).
# bfloat16 / float16: about 2.5x the gap of a bf16 run of the same weights (fp16 has 3 more mantissa bits).
TOLERANCES: dict[str, dict] = {
    "float32": {"atol": 1e-5, "rtol": 1e-5, "atol_unit": "rms"},
    "bfloat16": {"atol": 5e-2, "rtol": 1.6e-2, "atol_unit": "rms"},
    "float16": {"atol": 1e-2, "rtol": 2e-3, "atol_unit": "rms"},
}
TINY = torch.finfo(torch.float32).tiny   # the max_rel denominator's floor: |a - b| / (|b| + TINY)
TRACE_FORMAT = "eagle3lab-trace"

COLUMNS = ["name", "shape_a", "shape_b", "dtype_a", "dtype_b", "max_abs", "max_rel", "rms_b", "diverges", "note"]


class Trace(ActivationCache):
    """``{hook name: tensor}`` read from a file (``load_trace``), remembering which one (``source``)."""

    def __init__(self, tensors=(), source: str | None = None):
        super().__init__(tensors)
        self.source = source


@dataclass
class TensorDiff:
    """Two sides compared hook point by hook point (``tensor_diff``)."""

    table: pd.DataFrame             # one row per shared point, in forward order (COLUMNS)
    first_divergence: str | None    # the first point beyond tolerance; None when every point agrees
    only_in_a: tuple[str, ...]      # recorded by one side only (in that side's order)
    only_in_b: tuple[str, ...]
    label_a: str
    label_b: str
    atol: float
    rtol: float
    atol_unit: str

    @property
    def tolerance(self) -> str:
        scale = " x rms(b)" if self.atol_unit == "rms" else ""
        return f"|a-b| <= {self.atol:g}{scale} + {self.rtol:g}*|b|"

    def summary(self) -> str:
        """One sentence: where the two sides part, and how much agrees before it."""
        t, a, b = self.table, self.label_a, self.label_b
        extra = ""
        if self.only_in_a or self.only_in_b:
            extra = (f" ({len(self.only_in_a)} point(s) recorded only by {a}, "
                     f"{len(self.only_in_b)} only by {b}, not compared)")
        if t.empty:
            return f"{a} and {b} share no hook point, so nothing was compared{extra}."
        if self.first_divergence is None:
            worst = t.loc[t["max_abs"].idxmax()]
            return (f"{a} and {b} agree at all {len(t)} shared hook points within {self.tolerance} "
                    f"(largest max |a-b| {worst['max_abs']:.3g}, at {worst['name']}){extra}.")
        i = int(t.index[t["name"] == self.first_divergence][0])
        row, before = t.loc[i], t.iloc[:i]
        how = row["note"] or f"max |a-b| {row['max_abs']:.3g}, max rel {row['max_rel']:.3g}"
        if before.empty:
            agree = "it is the first shared point"
        elif (before["max_abs"] == 0).all():
            agree = f"the {len(before)} point(s) before it are identical"
        else:
            agree = f"the {len(before)} point(s) before it agree within tolerance"
        later = int(t["diverges"].iloc[i + 1:].sum())
        return (f"{a} and {b} first differ at {self.first_divergence} ({how}; tolerance {self.tolerance}): "
                f"{agree}, and {later} of the {len(t) - i - 1} after it differ too{extra}.")

    def to_dict(self) -> dict:
        """Plain JSON types; a difference that is not a finite number (shape mismatch, NaN) is None."""
        def num(x):
            return float(x) if x is not None and math.isfinite(x) else None

        points = [{"name": r.name, "shape_a": list(r.shape_a), "shape_b": list(r.shape_b), "dtype_a": r.dtype_a,
                   "dtype_b": r.dtype_b, "max_abs": num(r.max_abs), "max_rel": num(r.max_rel),
                   "rms_b": num(r.rms_b), "diverges": bool(r.diverges), "note": r.note}
                  for r in self.table.itertuples(index=False)]
        return {"a": self.label_a, "b": self.label_b, "atol": self.atol, "rtol": self.rtol,
                "atol_unit": self.atol_unit, "first_divergence": self.first_divergence,
                "only_in_a": list(self.only_in_a), "only_in_b": list(self.only_in_b),
                "summary": self.summary(), "points": points}


def tensor_diff(a, b, *, atol: float = TOLERANCES["float32"]["atol"], rtol: float = TOLERANCES["float32"]["rtol"],
                atol_unit: str = "rms", names=None, labels: tuple[str, str] | None = None, **inputs) -> TensorDiff:
    """Compare ``a`` and ``b`` (each a draft, run here on ``inputs``, or a mapping name -> tensor) at every
    hook name both have, in forward order (a draft's hook order; for two mappings, ``a``'s order).

    ``names``: hook names, first-layer names (``"hook_residual"``) or ``*`` patterns to compare (all when
    None). ``labels``: what to call the two sides (default: the draft's profile, the trace's file).
    ``inputs``: the draft's forward arguments (``input_ids``, ``aux_hidden_states``, ...), the same for both.
    """
    if atol_unit not in ("rms", "abs"):
        raise bad_input("tensor_diff", "atol_unit", "'rms' (atol times each point's RMS of b) or 'abs' "
                        "(torch.allclose's plain atol)", repr(atol_unit))
    if atol < 0 or rtol < 0:
        raise bad_input("tensor_diff", "atol / rtol", "tolerances >= 0", f"atol={atol}, rtol={rtol}")
    sides = [_side(x, key) for x, key in ((a, "a"), (b, "b"))]
    if inputs and not any(isinstance(x, torch.nn.Module) for x in (a, b)):
        raise bad_input("tensor_diff", ", ".join(inputs), "no inputs when both sides are traces",
                        "inputs for a forward", "Inputs are run through a draft; two recorded traces need none.")
    caches = [_record(x, inputs) if isinstance(x, torch.nn.Module) else dict(x) for x in (a, b)]
    caches = _aliased(caches, [getattr(x, "hook_names", None) for x in (a, b)])
    wanted = set(resolve(list(dict.fromkeys([*caches[0], *caches[1]])), names, where="tensor_diff names"))
    picked = [[n for n in c if n in wanted] for c in caches]
    order = next((list(x.hook_names) for x in (a, b) if isinstance(x, torch.nn.Module) and hasattr(x, "hook_names")),
                 list(caches[0]))
    order += [n for n in caches[0] if n not in order]
    shared = [n for n in order if n in picked[0] and n in picked[1]]
    rows = [_compare(n, caches[0][n], caches[1][n], atol, rtol, atol_unit) for n in shared]
    table = pd.DataFrame(rows, columns=COLUMNS)
    first = next((r["name"] for r in rows if r["diverges"]), None)
    label_a, label_b = labels or (sides[0], sides[1])
    if label_a == label_b:
        label_a, label_b = f"{label_a} (a)", f"{label_b} (b)"
    return TensorDiff(table=table, first_divergence=first,
                      only_in_a=tuple(n for n in picked[0] if n not in picked[1]),
                      only_in_b=tuple(n for n in picked[1] if n not in picked[0]),
                      label_a=label_a, label_b=label_b, atol=float(atol), rtol=float(rtol), atol_unit=atol_unit)


def _side(x, key: str) -> str:
    """A label for one side; bad_input when it is neither a draft nor a mapping of tensors."""
    if isinstance(x, torch.nn.Module) and hasattr(x, "run_with_cache"):
        profile = getattr(getattr(x, "profile", None), "name", None)
        wiring = getattr(x, "wiring", None)
        label = f"{type(x).__name__} under {profile}" if profile else type(x).__name__
        return label + (f", rewired {wiring}" if wiring else "")
    if isinstance(x, Mapping):
        bad = [k for k, v in x.items() if not isinstance(v, torch.Tensor)]
        if bad:
            raise bad_input("tensor_diff", key, "a mapping hook name -> tensor", f"non-tensor values at {bad[:3]}")
        return f"trace {Path(x.source).name}" if getattr(x, "source", None) else f"trace {key}"
    raise bad_input("tensor_diff", key, "a draft (a module with run_with_cache) or a mapping hook name -> tensor",
                    type(x).__name__)


def _record(draft, inputs: dict) -> dict:
    """Every hook point of one forward on ``inputs`` (a DraftCache among them is copied per side,
    since a forward appends to it)."""
    from eagle3lab.models.draft import DraftCache

    own = dict(inputs)
    for key, value in inputs.items():
        if isinstance(value, DraftCache):
            own[key] = DraftCache()
            own[key].keys, own[key].values = list(value.keys), list(value.values)
    with torch.no_grad():
        _, cache = draft.run_with_cache(**own)
    return dict(cache)


def _aliased(caches: list[dict], hook_names: list) -> list[dict]:
    """A trace's names renamed to the other side's (a draft's hook names, or the other trace) where the
    other side has the name it stands for (``models.hooks.canonical``) and not the name itself: a first-layer
    name that is not a full path (``hook_residual``), or an eagle3lab 0.1 name (``fc_out``; one warning)."""
    out, legacy = [], {}
    for i, cache in enumerate(caches):
        other = set(hook_names[1 - i] or ()) | set(caches[1 - i])
        renamed = {}
        for name, t in cache.items():
            new = None if name in other else canonical(name, other, warn=False)
            if new is None or new in cache:
                new = name
            elif legacy_rename(name) is not None:
                legacy[name] = new
            renamed[new] = t
        out.append(renamed)
    if legacy:
        warn_renamed(legacy)
    return out


def _compare(name: str, ta: torch.Tensor, tb: torch.Tensor, atol: float, rtol: float, atol_unit: str) -> dict:
    row = {"name": name, "shape_a": tuple(ta.shape), "shape_b": tuple(tb.shape),
           "dtype_a": str(ta.dtype).removeprefix("torch."), "dtype_b": str(tb.dtype).removeprefix("torch."),
           "max_abs": math.nan, "max_rel": math.nan, "rms_b": math.nan, "diverges": True, "note": ""}
    if ta.shape != tb.shape:
        row["note"] = (f"shape mismatch: {tuple(ta.shape)} vs {tuple(tb.shape)}, not compared element by element")
        return row
    x, y = ta.detach().to("cpu", torch.float64), tb.detach().to("cpu", torch.float64)
    if x.numel() == 0:
        row.update(max_abs=0.0, max_rel=0.0, rms_b=0.0, diverges=False, note="empty")
        return row
    nan_x, nan_y = x.isnan(), y.isnan()
    err = torch.where(x == y, 0.0, (x - y).abs())          # x == y also covers inf == inf
    err = torch.where(nan_x & nan_y, 0.0, err)
    err = torch.where(nan_x ^ nan_y, math.inf, err)
    finite_y = y[y.isfinite()]
    rms = float(finite_y.pow(2).mean().sqrt()) if finite_y.numel() else 0.0
    bound = atol * (rms if atol_unit == "rms" else 1.0) + rtol * y.abs().nan_to_num(0.0)
    row.update(max_abs=float(err.max()), max_rel=float((err / (y.abs().nan_to_num(0.0) + TINY)).max()),
               rms_b=rms, diverges=bool((err > bound).any()))
    notes = []
    if (nan_x ^ nan_y).any():
        notes.append(f"NaN on one side only ({int((nan_x ^ nan_y).sum())} elements)")
    if ta.dtype != tb.dtype:
        notes.append(f"dtypes differ ({row['dtype_a']} vs {row['dtype_b']}), compared in float64")
    row["note"] = "; ".join(notes)
    return row


# ------------------------------------------------------------------------------- traces on disk

def save_trace(path, cache: Mapping[str, torch.Tensor], metadata: dict[str, str] | None = None) -> Path:
    """Write ``{hook name: tensor}`` (e.g. ``draft.run_with_cache(...)[1]``) as safetensors, atomically.

    The names' order is kept in the file's metadata (safetensors itself sorts them), so that
    ``load_trace`` gives them back in forward order. ``metadata``: more strings to store (profile, inputs).
    """
    path = Path(path)
    bad = [k for k, v in cache.items() if not isinstance(v, torch.Tensor)]
    if bad:
        raise bad_input(path, bad[0], "a tensor per hook name", type(cache[bad[0]]).__name__)
    # clone: hook points can hand out one tensor under two names (hook_residual is hook_hid_normed when
    # norm_before_residual), and safetensors refuses tensors that share memory
    tensors = {k: v.detach().to("cpu").clone(memory_format=torch.contiguous_format) for k, v in cache.items()}
    meta = {**(metadata or {}), "format": TRACE_FORMAT, "order": json.dumps(list(tensors))}
    from safetensors.torch import save_file

    with atomic_file(path) as tmp:
        save_file(tensors, str(tmp), metadata=meta)
    return path


def load_trace(path) -> Trace:
    """A safetensors file of named activations -> ``Trace`` (in the saved forward order when
    ``save_trace`` wrote it, else in the file's order). Never unpickles."""
    from safetensors import SafetensorError, safe_open
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise bad_input(path, None, "a safetensors file of named activations",
                        "a folder" if path.is_dir() else "no such file",
                        "Write one with eagle3lab.analysis.tensor_diff.save_trace, or dump the engine's activations "
                        "with safetensors.torch.save_file.")
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
        tensors = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise bad_input(path, None, "a safetensors file of named activations", f"something else ({err})",
                        "torch.save / pickle files are not read (unpickling runs code): load it yourself if "
                        "you trust it and save_trace the tensors.") from None
    order = []
    if meta.get("order"):
        try:
            order = [n for n in json.loads(meta["order"]) if n in tensors]
        except (ValueError, TypeError):
            order = []
    order += [n for n in tensors if n not in order]
    return Trace({n: tensors[n] for n in order}, source=str(path))
