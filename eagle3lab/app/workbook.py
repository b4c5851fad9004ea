"""Run the notebooks headless, in order, and render the report in ``build/workbook/``.

Each notebook ends with ``summary("...")``: one paragraph of what it found, with numbers.
The runner collects those paragraphs into ``index.html``, so the report reads on one screen.
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from eagle3lab.app.session import Session, plain_json
from eagle3lab.atomic import write_text
from eagle3lab.bundled import ROOT

NOTEBOOKS = ROOT / "notebooks"
SUMMARY_KEY = "eagle3lab_summary"
CLAIMS_KEY = "eagle3lab_claims"


def summary(text: str, **claims) -> None:
    """Show ``text`` (markdown) as the notebook's finding and tag it for the workbook index.

    ``claims``: the computed numbers (and verdicts) the text states, by name, stored beside it so that
    the tests assert each claim from the run that made it (JSON values: numbers, strings, lists).
    """
    from IPython.display import Markdown, display

    display(Markdown(f"**Summary.** {text}"), metadata={SUMMARY_KEY: text, CLAIMS_KEY: plain_json(claims)})


def notebook_paths(folder: Path = NOTEBOOKS) -> list[Path]:
    """The workbook's notebooks in reading order (``NN_topic.ipynb``)."""
    return sorted(p for p in Path(folder).glob("[0-9][0-9]_*.ipynb"))


def notebook_title(path: Path) -> str:
    """The first markdown heading of a notebook, for maps and the index."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return path.stem


def inject_parameters(nb, parameters: dict) -> None:
    """Insert a cell of overrides after the cell tagged ``parameters`` (as papermill does)."""
    import nbformat

    if not parameters:
        return
    where = next((i for i, c in enumerate(nb.cells) if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if where is None:
        raise ValueError("this notebook has no cell tagged 'parameters'; cannot override "
                         + ", ".join(sorted(parameters)))
    src = "# Injected parameters\n" + "\n".join(f"{k} = {v!r}" for k, v in parameters.items())
    cell = nbformat.v4.new_code_cell(src, metadata={"tags": ["injected-parameters"]})
    nb.cells.insert(where + 1, cell)


def execute_notebook(path: Path, timeout: int = 900, parameters: dict | None = None):
    """Execute one notebook in its own folder; raises ``nbclient`` ``CellExecutionError`` on a cell error
    and ``CellTimeoutError`` when a cell runs past ``timeout`` seconds. Whatever it raises carries ``nb``
    (the notebook as far as it ran, outputs kept) and ``cell_index`` (the cell running when it stopped)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    inject_parameters(nb, parameters or {})
    running = {"cell": None}

    def started(cell, cell_index):
        running["cell"] = cell_index

    env_before = os.environ.get("MPLBACKEND")
    os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", on_cell_start=started,
                       resources={"metadata": {"path": str(Path(path).parent)}}).execute()
    except Exception as err:
        err.nb, err.cell_index = nb, running["cell"]
        raise
    finally:
        if env_before is None:
            os.environ.pop("MPLBACKEND", None)
        else:
            os.environ["MPLBACKEND"] = env_before
    return nb


def notebook_failure(err: BaseException, timeout: int) -> dict:
    """What stopped a notebook, for the index and its session: ``error`` (one line), ``kind`` (``timeout``,
    ``cell error`` or ``kernel``), ``cell`` (its index in the executed notebook) and ``source`` (its first line)."""
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    if isinstance(err, CellTimeoutError):
        kind, error = "timeout", f"CellTimeoutError: the cell ran past the {timeout} s cell timeout"
    elif isinstance(err, CellExecutionError):
        kind, error = "cell error", f"{err.ename}: {err.evalue}" if getattr(err, "ename", None) else str(err)
    else:   # a dead kernel, a kernel that would not start
        kind, error = "kernel", f"{type(err).__name__}: {err}"
    index, nb = getattr(err, "cell_index", None), getattr(err, "nb", None)
    source = nb.cells[index].source.strip().splitlines() if nb is not None and index is not None else []
    return {"error": error.strip().splitlines()[-1] if error.strip() else repr(err), "kind": kind, "cell": index,
            "source": source[0] if source else None}


def find_summary(nb) -> str | None:
    """The text a notebook passed to ``summary()`` (the last one wins)."""
    found = None
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            text = out.get("metadata", {}).get(SUMMARY_KEY)
            if text:
                found = text
    return found


def find_claims(nb) -> dict:
    """The claims the notebook passed to ``summary()`` (the last call wins)."""
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            meta = out.get("metadata", {})
            if meta.get(SUMMARY_KEY):
                found = dict(meta.get(CLAIMS_KEY) or {})
    return found


def error_outputs(nb) -> list[str]:
    """Error outputs left in an executed notebook (should be none)."""
    return [f"{o.get('ename')}: {o.get('evalue')}" for c in nb.cells for o in c.get("outputs", [])
            if o.get("output_type") == "error"]


@dataclass
class NotebookResult:
    name: str
    title: str
    ok: bool
    seconds: float
    summary: str | None
    error: str | None = None
    cell: int | None = None        # the cell that failed (index in the executed notebook), when one did


def build_workbook(out: Path = ROOT / "build" / "workbook", folder: Path = NOTEBOOKS, timeout: int = 900,
                   only: list[str] | None = None, parameters: dict | None = None) -> tuple[Path, list[NotebookResult]]:
    """Execute every notebook in order, write executed copies + HTML and ``index.html``.

    A notebook that fails (a cell error, a cell past ``timeout`` seconds, a dead kernel) is written as far
    as it ran, marked FAILED in the index with the cell that stopped it, and its session records the same
    (``Session.failure``); the others still run."""
    import nbformat
    from nbconvert import HTMLExporter
    from tqdm.auto import tqdm

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = [p for p in notebook_paths(folder) if not only or any(o in p.name for o in only)]
    results = []
    for path in tqdm(paths, desc="workbook", unit="notebook"):
        start, failure = time.perf_counter(), None
        try:
            nb = execute_notebook(path, timeout=timeout, parameters=parameters)
        except Exception as err:  # report it, go on with the others
            failure = notebook_failure(err, timeout)
            nb = getattr(err, "nb", None) or nbformat.read(path, as_version=4)
        seconds = time.perf_counter() - start
        errors = error_outputs(nb)
        if errors and failure is None:
            failure = {"error": errors[0], "kind": "cell error", "cell": None, "source": None}
        write_text(out / path.name, nbformat.writes(nb))
        s = notebook_session(nb, path.name, notebook_parameters(nb), failure=failure)
        s.save(out / "sessions" / path.stem)
        body, _ = HTMLExporter().from_notebook_node(nb)
        write_text(out / f"{path.stem}.html", rewrite_links(body, out))
        results.append(NotebookResult(path.name, notebook_title(path), failure is None, seconds, find_summary(nb),
                                      failure and failure["error"], failure and failure["cell"]))
    index = out / "index.html"
    write_text(out / GLOSSARY_PAGE, render_glossary(out))
    write_text(index, render_index(results, out))
    write_text(out / "summary.json", json.dumps([r.__dict__ for r in results], indent=2))
    return index, results


def notebook_session(nb, name: str, parameters: dict, failure: dict | None = None) -> Session:
    """A session from an executed notebook: its parameters, the models they name, its summary claims as
    metrics (:func:`claim_metrics`: each interval whole, with its level, units and unit where the claim carries
    them), its figures (PNG outputs), and ``failure`` (:func:`notebook_failure`) when it stopped early."""
    import base64

    from eagle3lab.bundled import REAL_TARGETS

    s = Session(name, command={"kind": "notebook", "notebook": name, "parameters": parameters},
                parameters=parameters, failure=failure)
    for key, value in parameters.items():
        if not isinstance(value, str):
            continue
        path = REAL_TARGETS.get(value) or (ROOT / "notebooks" / value).resolve()
        if Path(path).exists() and (Path(path).is_file() or (Path(path) / "config.json").exists()):
            s.model(key, path)
    s.metrics = claim_metrics(find_claims(nb))
    s.notes = [find_summary(nb) or ""]
    if failure:
        s.notes.append(f"FAILED in cell {failure['cell']}: {failure['error']}")
    k = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                k += 1
                s.figures[f"figure {k:02d}"] = base64.b64decode(png)
    return s


INTERVAL_KEYS = ("level", "units", "unit")   # what an interval carries beside its bounds, when its claim says


def claim_metrics(claims: dict) -> dict:
    """A notebook's claims as session metrics, one per claimed number, named by its path (``a.b.c``); strings,
    booleans and lists are not metrics.

    A number claimed with its interval is stored whole (``value``, ``low``, ``high``): a claim object with
    ``value`` / ``low`` / ``high`` (``Verdict.claims()``, ``readings.numbers.interval_claims``, an ``Interval`` passed
    to :func:`summary`) becomes one metric named by the object's path, and ``NAME`` beside ``NAME_low`` /
    ``NAME_high`` (at any depth; a verdict's ``diff`` and ``by`` too) one metric ``NAME``. Each also keeps
    ``level`` (the interval's confidence), ``units`` (how many units its bootstrap resampled) and ``unit`` (what
    the value is in: "tokens per round", "x no speculation", "tokens/s", "s") where the claim carries them:
    ``NAME_level`` / ``NAME_units`` / ``NAME_unit`` siblings, or ``level`` / ``units`` / ``unit`` in the claim
    object, which then hold for every interval in it (a verdict's value, difference and margin share their
    prompts, level and unit). Nothing is inferred from a name: a claim that does not say has none."""
    out: dict = {}
    _collect_claims(claims, "", out)
    return out


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _collect_claims(node: dict, prefix: str, out: dict) -> None:
    whole = all(_number(node.get(k)) for k in ("value", "low", "high"))
    shared = {k: node[k] for k in INTERVAL_KEYS if k in node} if whole else {}
    taken = set(shared)
    if whole:
        out[prefix.removesuffix(".") or "value"] = {"value": node["value"], "low": node["low"], "high": node["high"],
                                                     **shared}
        taken |= {"value", "low", "high"}
    for key, value in node.items():
        if key in taken or not (_number(value) and _number(node.get(f"{key}_low")) and _number(node.get(f"{key}_high"))):
            continue
        own = {k: node[f"{key}_{k}"] for k in INTERVAL_KEYS if f"{key}_{k}" in node}
        out[prefix + key] = {"value": value, "low": node[f"{key}_low"], "high": node[f"{key}_high"], **shared, **own}
        taken |= {key, f"{key}_low", f"{key}_high", *(f"{key}_{k}" for k in own)}
    for key, value in node.items():
        if key in taken:
            continue
        if isinstance(value, dict):
            _collect_claims(value, f"{prefix}{key}.", out)
        elif _number(value):
            out[prefix + key] = {"value": value}


def notebook_parameters(nb) -> dict:
    """The literal values of a notebook's parameters cell and its injected overrides (read, never run)."""
    import ast

    params = {}
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type != "code" or not ({"parameters", "injected-parameters"} & set(tags)):
            continue
        for node in ast.parse(cell.source).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    params[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    return params


GLOSSARY = ROOT / "docs" / "glossary.md"
GLOSSARY_PAGE = "glossary.html"       # written beside the notebooks' pages, so their glossary links resolve
_RELATIVE_HREF = re.compile(r"""href=(["'])\.\./([^"'#]*)(#[^"']*)?\1""")


def rewrite_links(body: str, out: Path) -> str:
    """The notebooks' links are relative to ``notebooks/`` (``../docs/glossary.md#tau``, as JupyterLab opens
    them); from ``out`` they would break. The glossary's become ``glossary.html#tau`` (:func:`render_glossary`
    writes it beside the pages); any other ``../PATH`` points at the repository's file from ``out``."""
    out = Path(out).resolve()

    def fix(m: re.Match) -> str:
        quote, path, anchor = m.group(1), m.group(2), m.group(3) or ""
        if (ROOT / path).resolve() == GLOSSARY.resolve():
            return f"href={quote}{GLOSSARY_PAGE}{anchor}{quote}"
        return f"href={quote}{Path(os.path.relpath(ROOT / path, out)).as_posix()}{anchor}{quote}"

    return _RELATIVE_HREF.sub(fix, body)


def _markdown(text: str) -> str:
    """Markdown as HTML (the summaries' bullets as lists, code, bold, links), by nbconvert's own renderer."""
    import mistune

    return mistune.html(text)


def render_glossary(out: Path) -> str:
    """docs/glossary.md as a page of the workbook: every term keeps its ``<a id>`` anchor, links rewritten for
    ``out`` as the notebooks' are."""
    body = _markdown(GLOSSARY.read_text())
    body = re.sub(r"""href=(["'])(?!https?:|#|/)([^"'#]*)""",   # the glossary's own links are relative to docs/
                  lambda m: f"href={m.group(1)}../{Path('docs', m.group(2)).as_posix()}", body)
    return ("<!doctype html><meta charset='utf-8'><title>eagle3lab glossary</title>"
            "<style>body{font-family:sans-serif;max-width:60em;margin:2em auto;line-height:1.4}"
            "code{background:#f4f4f4}</style><p><a href='index.html'>workbook index</a></p>"
            + rewrite_links(body, out))


def render_index(results: list[NotebookResult], out: Path | None = None) -> str:
    rows = []
    for r in results:
        where = f" in cell {r.cell}" if r.cell is not None else ""
        status = "ok" if r.ok else f"<b style='color:#b00'>FAILED{where}</b>: {html.escape(r.error or '')}"
        found = _markdown(r.summary) if r.summary else "<i>no summary() in this notebook</i>"
        if out is not None:
            found = rewrite_links(found, out)
        stem = Path(r.name).stem
        rows.append(f"<tr><td><a href='{stem}.html'>{html.escape(r.name)}</a><br><small>{html.escape(r.title)}</small>"
                    f"<br><small><a href='sessions/{stem}/session.json'>session</a></small></td>"
                    f"<td>{status}<br><small>{r.seconds:.0f} s</small></td><td>{found}</td></tr>")
    failed = sum(not r.ok for r in results)
    head = "all notebooks ran" if not failed else f"{failed} notebook(s) FAILED"
    return ("<!doctype html><meta charset='utf-8'><title>eagle3lab workbook</title>"
            "<style>body{font-family:sans-serif;max-width:70em;margin:2em auto}td{vertical-align:top;padding:.4em;"
            "border-bottom:1px solid #ddd}td p{margin:0 0 .4em}code{background:#f4f4f4}</style>"
            f"<h1>eagle3lab workbook</h1><p>{head}; generated {time.strftime('%Y-%m-%d %H:%M')}. Every term the "
            f"notebooks use is defined in the <a href='{GLOSSARY_PAGE}'>glossary</a>.</p>"
            "<table><tr><th>notebook</th><th>status</th><th>what it found</th></tr>" + "".join(rows) + "</table>")
