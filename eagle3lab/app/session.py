"""A debug session a colleague can load, compare and re-run: what went in, what came out, nothing executable.

A ``Session`` is a folder: ``session.json`` (the command that ran it, its parameters, the models by
sha256 fingerprint, the device and dtype they ran in (``runs_on``), the environment, and every metric,
with its interval when it has one), one ``tables/NAME.json`` per table (pandas ``split`` orientation), ``figures/NAME.png``, and
``tensors.safetensors`` when tensors were kept. A metric measured with an interval (a tau, a speedup, a
difference) is stored whole: ``value``, ``low``, ``high``, ``level`` and ``units`` (how many units, prompts or
(repetition, prompt) pairs, its bootstrap resampled), plus ``unit`` (what the value is in: "tokens per round",
"x no speculation") when the recorder says; ``Session.interval(name)`` reads it back as an ``Interval``. JSON, PNG and safetensors only: loading reads data and
never runs code, and a folder holding anything else (a pickle, a Python file) is refused. Folders are
written whole or not at all (``eagle3lab.atomic``).

    s = Session("doctor", command={"kind": "doctor", "argv": [...]})
    s.model("draft", "data/models/draft-case"); s.metric("tau as launched", interval)
    s.table("findings", df); s.figure("ladder", fig); s.save("build/sessions/doctor")
    Session.load("build/sessions/doctor").metrics            # no models needed
    diff_sessions(a, b)                                        # what changed, beyond noise or not

Re-running (``eagle3lab.app.rerun``) executes the recorded command again on the same models; sessions
of notebooks are made by ``eagle3lab.app.workbook.notebook_session`` (each claimed interval one metric, with the
level, units and unit its claim carries: ``workbook.claim_metrics``). Notebook sessions written before that held
a claim object's interval as three bare numbers; ``Session.load`` reads each triple as one metric (``regrouped``).
"""

from __future__ import annotations

import hashlib
import io
import json
import platform
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from eagle3lab.atomic import atomic_dir
from eagle3lab.errors import bad_input

FORMAT = "eagle3lab-session/2"
# /1 stored an interval's value, low, high and level only (no units, no unit): still read, those read as None
READABLE = (FORMAT, "eagle3lab-session/1")
ALLOWED = {".json", ".png", ".safetensors"}          # data only: nothing here can run code when read
_WEIGHTS = (".safetensors", ".json", ".txt", ".model", ".jinja")   # what a model folder's fingerprint reads


def fingerprint(path) -> dict:
    """sha256 of a model folder's files (configs, weights, tokenizer) or of one file, and their total size."""
    path = Path(path)
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in _WEIGHTS)
    if not files:
        raise bad_input(path, None, "a model folder or file to fingerprint", "no such files")
    digest, size = hashlib.sha256(), 0
    for f in files:
        digest.update(str(f.relative_to(path) if f != path else f.name).encode())
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        size += f.stat().st_size
    return {"sha256": digest.hexdigest(), "files": len(files), "bytes": size}


def environment() -> dict:
    import torch
    import transformers

    return {"python": platform.python_version(), "platform": platform.platform(), "torch": torch.__version__,
            "transformers": transformers.__version__, "cuda": torch.cuda.is_available(),
            "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu",
            "threads": torch.get_num_threads()}


INTERVAL_FIELDS = ("value", "low", "high", "level", "units", "unit")   # what a metric with an interval stores


def is_interval(value) -> bool:
    """An interval object (``engines.acceptance.Interval``, anything with ``value``, ``low`` and ``high``)."""
    return not isinstance(value, dict) and all(hasattr(value, k) for k in ("value", "low", "high"))


def interval_record(value, unit: str | None = None) -> dict:
    """An interval as a metric stores it: ``value``, ``low``, ``high``, its ``level`` and ``units`` (how many units
    its bootstrap resampled; None when the object does not say), and ``unit`` (what the value is in) when given."""
    record = {"value": value.value, "low": value.low, "high": value.high,
              "level": getattr(value, "level", None), "units": getattr(value, "units", None)}
    return plain_json({**record, **({"unit": unit} if unit is not None else {})})


def plain_json(value):
    """numpy / pandas scalars, tuples, paths and interval objects (:func:`interval_record`) -> JSON values."""
    if is_interval(value):
        return interval_record(value)
    if isinstance(value, dict):
        return {str(k): plain_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain_json(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    return value


@dataclass
class Session:
    """One recorded experiment (see the module docstring)."""

    name: str
    command: dict = field(default_factory=dict)      # {"kind": "notebook"|"doctor", ...}: what rerun() runs
    parameters: dict = field(default_factory=dict)
    models: dict = field(default_factory=dict)       # role -> {"path", "sha256", "files", "bytes"}
    env: dict = field(default_factory=dict)
    metrics: dict = field(default_factory=dict)      # name -> {"value", "low", "high", "level", "units", "unit"}
    notes: list = field(default_factory=list)
    tables: dict = field(default_factory=dict)       # name -> DataFrame
    figures: dict = field(default_factory=dict)      # name -> PNG bytes
    tensors: dict = field(default_factory=dict)      # name -> torch.Tensor
    failure: dict | None = None                      # a run that stopped early: {"error", "kind", "cell", "source"}
    runs_on: dict = field(default_factory=dict)      # {"device", "dtype"} the models ran in ("auto" resolved)
    path: Path | None = None

    # ------------------------------------------------------------------ recording
    def model(self, role: str, path) -> None:
        from eagle3lab.bundled import display_path

        self.models[role] = {"path": display_path(path), **fingerprint(path)}

    def metric(self, name: str, value, unit: str | None = None) -> None:
        """A number, or an interval (anything with ``value``, ``low``, ``high``; ``level`` and ``units`` kept
        when it has them, as ``engines.acceptance.Interval`` does). ``unit``: what the value is in."""
        if is_interval(value):
            self.metrics[name] = interval_record(value, unit)
        else:
            self.metrics[name] = plain_json({"value": value, **({"unit": unit} if unit is not None else {})})

    def interval(self, name: str):
        """Metric ``name`` as an ``engines.acceptance.Interval``, or None when it was stored without bounds
        (a count, or a claim with no interval). From a /1 session ``level`` and ``units`` may read as None."""
        from eagle3lab.engines.acceptance import Interval

        m = self.metrics[name]
        if m.get("low") is None or m.get("high") is None:
            return None
        return Interval(m["value"], m["low"], m["high"], m.get("level"), m.get("units"))

    def table(self, name: str, df: pd.DataFrame) -> None:
        self.tables[name] = df

    def figure(self, name: str, fig_or_png) -> None:
        if isinstance(fig_or_png, bytes):
            self.figures[name] = fig_or_png
            return
        buf = io.BytesIO()
        fig_or_png.savefig(buf, format="png", dpi=110, bbox_inches="tight")
        self.figures[name] = buf.getvalue()

    # ------------------------------------------------------------------ disk
    def save(self, folder) -> Path:
        folder = Path(folder)
        if not self.env:
            self.env = environment()
        if not self.runs_on:
            self.runs_on = runs_on_from(self.parameters)
        with atomic_dir(folder) as tmp:
            record = {"format": FORMAT, "name": self.name, "command": plain_json(self.command),
                      "parameters": plain_json(self.parameters), "models": self.models, "runs_on": self.runs_on,
                      "environment": self.env,
                      "metrics": self.metrics, "notes": list(self.notes), "failure": plain_json(self.failure),
                      "tables": sorted(self.tables),
                      "figures": sorted(self.figures), "tensors": sorted(self.tensors)}
            (tmp / "session.json").write_text(json.dumps(record, indent=2, allow_nan=True) + "\n")
            if self.tables:
                (tmp / "tables").mkdir()
                for name, df in self.tables.items():
                    (tmp / "tables" / f"{_safe(name)}.json").write_text(df.to_json(orient="split", default_handler=str))
            if self.figures:
                (tmp / "figures").mkdir()
                for name, png in self.figures.items():
                    (tmp / "figures" / f"{_safe(name)}.png").write_bytes(png)
            if self.tensors:
                from safetensors.torch import save_file

                save_file({k: v.detach().cpu().contiguous() for k, v in self.tensors.items()},
                          str(tmp / "tensors.safetensors"))
        self.path = folder
        return folder

    @classmethod
    def load(cls, folder) -> Session:
        """Read a session folder without the models; refuses one holding anything but JSON, PNG, safetensors."""
        folder = Path(folder)
        meta = folder / "session.json"
        if not meta.is_file():
            raise bad_input(folder, "session.json", "a session folder (eagle3lab session)", "no session.json")
        unsafe = [str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.suffix not in ALLOWED]
        if unsafe:
            raise bad_input(folder, None, f"only {', '.join(sorted(ALLOWED))} files (a session never holds code)",
                            ", ".join(unsafe[:5]), "Loading runs nothing; remove those files if you trust them.")
        record = json.loads(meta.read_text())
        if record.get("format") not in READABLE:
            raise bad_input(meta, "format", " or ".join(READABLE), record.get("format"))
        tables = {name: pd.read_json(io.StringIO((folder / "tables" / f"{_safe(name)}.json").read_text()),
                                     orient="split") for name in record.get("tables", [])}
        figures = {name: (folder / "figures" / f"{_safe(name)}.png").read_bytes() for name in record.get("figures", [])}
        tensors = {}
        if record.get("tensors"):
            from safetensors.torch import load_file

            tensors = load_file(str(folder / "tensors.safetensors"))
        return cls(name=record["name"], command=record.get("command", {}), parameters=record.get("parameters", {}),
                   models=record.get("models", {}), env=record.get("environment", {}),
                   metrics=regrouped(record.get("metrics", {})), notes=record.get("notes", []), tables=tables, figures=figures,
                   tensors=tensors, failure=record.get("failure"), runs_on=record.get("runs_on", {}), path=folder)

    def summary(self) -> dict:
        return {"name": self.name, "path": str(self.path) if self.path else None, "command": self.command,
                "parameters": self.parameters, "models": self.models, "runs_on": self.runs_on,
                "environment": self.env, "metrics": self.metrics, "notes": self.notes, "failure": self.failure,
                "tables": {k: list(v.shape) for k, v in self.tables.items()},
                "figures": sorted(self.figures)}


def runs_on_from(parameters: dict) -> dict:
    """``{"device", "dtype"}`` from a notebook's ``DEVICE`` / ``DTYPE`` parameters, "auto" resolved by
    ``models.device`` on this machine (the workbook runs its notebooks here); {} without them or when they do not
    resolve (a run that failed on them records its failure, not a guess)."""
    if "DTYPE" not in parameters and "DEVICE" not in parameters:
        return {}
    from eagle3lab.models.device import dtype_name, resolve_device, resolve_dtype

    try:
        device = resolve_device(parameters.get("DEVICE", "auto"))
        return {"device": str(device), "dtype": dtype_name(resolve_dtype(parameters.get("DTYPE", "auto"), device))}
    except (RuntimeError, ValueError, TypeError):
        return {}


def regrouped(metrics: dict) -> dict:
    """Metrics as this version stores them. Notebook sessions written before claims were read whole held a claim's
    interval as three bare numbers (``NAME.value``, ``NAME.low``, ``NAME.high``): each such triple becomes the one
    metric ``NAME`` (value, low, high; no level, units or unit: they never recorded them), so that ``diff_sessions``
    compares it with a newer session's. Anything else is kept as it is."""
    bounds = ("value", "low", "high")
    triples = {k.removesuffix(".value") for k in metrics if k.endswith(".value")}
    triples = {n for n in triples if n not in metrics
               and all(isinstance(metrics.get(f"{n}.{b}"), dict) and set(metrics[f"{n}.{b}"]) == {"value"} for b in bounds)}
    out = {}
    for key, m in metrics.items():
        name, _, bound = key.rpartition(".")
        if name in triples and bound in bounds:
            if bound == "value":
                out[name] = {b: metrics[f"{name}.{b}"]["value"] for b in bounds}
            continue
        out[key] = m
    return out


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


# ---------------------------------------------------------------------- comparing


def _beyond_noise(a: dict, b: dict) -> bool | None:
    """Disjoint intervals: a difference beyond noise; overlapping: not shown to differ; None without intervals."""
    if None in (a.get("low"), a.get("high"), b.get("low"), b.get("high")):
        return None
    return a["high"] < b["low"] or b["high"] < a["low"]


def diff_sessions(a: Session, b: Session) -> pd.DataFrame:
    """Everything that differs between two sessions: models, command, parameters, the device and dtype they ran
    in, failure, environment, metrics.
    Metrics with intervals are marked ``beyond noise`` (disjoint intervals) or ``within noise``."""
    rows = []

    def compare(kind, left: dict, right: dict, describe=lambda v: v):
        for key in sorted(set(left) | set(right)):
            x, y = left.get(key), right.get(key)
            if x == y:
                continue
            change = "added" if x is None else "removed" if y is None else "changed"
            rows.append({"kind": kind, "name": key, "a": describe(x), "b": describe(y), "change": change})

    compare("model", {k: v["sha256"] for k, v in a.models.items()}, {k: v["sha256"] for k, v in b.models.items()},
            lambda v: v and v[:12])
    compare("command", flatten(a.command), flatten(b.command))
    compare("parameter", a.parameters, b.parameters)
    compare("runs on", a.runs_on, b.runs_on)
    compare("failure", {"error": a.failure and a.failure.get("error")}, {"error": b.failure and b.failure.get("error")})
    compare("environment", {k: v for k, v in a.env.items() if k != "threads"},
            {k: v for k, v in b.env.items() if k != "threads"})
    for key in sorted(set(a.metrics) | set(b.metrics)):
        x, y = a.metrics.get(key), b.metrics.get(key)
        if x is None or y is None:
            rows.append({"kind": "metric", "name": key, "a": x and x["value"], "b": y and y["value"],
                         "change": "added" if x is None else "removed"})
            continue
        if x["value"] == y["value"]:
            continue
        noise = _beyond_noise(x, y)
        rows.append({"kind": "metric", "name": key, "a": x["value"], "b": y["value"],
                     "change": "changed" if noise is None else "beyond noise" if noise else "within noise"})
    return pd.DataFrame(rows, columns=["kind", "name", "a", "b", "change"])


def flatten(d: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list) and all(isinstance(x, str) for x in v) and k == "argv":
            out.update(_argv_flags(v, key + "."))
        else:
            out[key] = v
    return out


def _argv_flags(argv: list[str], prefix: str) -> dict:
    """``--flag value`` pairs of a command line (and of a quoted launch command inside it) as a dict."""
    import shlex

    out, i = {}, 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            value = argv[i + 1] if i + 1 < len(argv) and not argv[i + 1].startswith("--") else True
            if tok == "--engine-args" and isinstance(value, str):
                out.update(_argv_flags(shlex.split(value), prefix + "engine-args "))
            elif tok in ("--session", "--json"):     # where and how it was printed, not what ran
                pass
            else:
                out[prefix + tok] = value
            i += 1 if value is True else 2
        else:
            out[f"{prefix}[{i}]"] = tok
            i += 1
    return out
