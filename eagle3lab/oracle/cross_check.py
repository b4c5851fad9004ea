"""Our flag rules against the installed engine's own resolver, for one launch command or a table of them.

``cross_check("sglang", command, target_config=..., draft_config=..., python=...)`` runs
``sglang_resolve.py`` with ``python`` (default: this interpreter) in a subprocess, resolves the same
command with ``eagle3lab.engines.flags.resolve_flags`` for the version it found installed, and lists
every ``Disagreement``: a setting the two resolve differently, a log line only one side has (SGLang's
records from its speculative hook, and the context-length lines of ``ModelConfig``), or the exception
that stops start-up before the weights load. When the engine stopped, its settings are not compared,
and only the lines it logged before stopping must be among ours (it never reached the later rules). ``resolve_engine(...)`` runs many cases in one
subprocess (the parity tests). Nothing here imports an engine or torch: the engine runs in its own
interpreter, answering JSON.

What is compared, and how (``SETTINGS``): our ``effective`` key, the engine's value. A command
without ``--device`` is resolved by the engine as ``--device cuda`` (a CPU-only machine cannot detect
one; ours assumes CUDA too), and without ``--trust-remote-code`` (a checkpoint's own code is never
run; the engine's and transformers' config classes read the configs). Configs given as files are put where the command's paths point, for the
engine, when those paths do not exist here (the engine reads ``config.json`` from its model paths
only); ``HF_HUB_OFFLINE=1``: nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eagle3lab.engines.flags import resolve_flags
from eagle3lab.engines.flags.cmdline import launch_parts
from eagle3lab.engines.flags.configs import load_config
from eagle3lab.engines.flags.result import FlagsResult
from eagle3lab.errors import bad_input

SCRIPTS = {"sglang": Path(__file__).resolve().with_name("sglang_resolve.py")}
CROSS_CHECK_ENGINES = tuple(SCRIPTS)

# Which of SGLang's log records our findings account for: its speculative rules, and ModelConfig's
# context-length lines (the draft's check, or --context-length against the target's).
_SGLANG_LOGGERS = ("sglang.srt.arg_groups.speculative_hook", "sglang.srt.speculative.adaptive_spec_params")
_CONTEXT_WORDS = ("context_length", "max_position_embeddings")

_MODEL_FLAGS = ("--model-path", "--model")
_DRAFT_FLAGS = ("--speculative-draft-model-path", "--speculative-draft-model")


@dataclass(frozen=True)
class Disagreement:
    """One thing the engine's own resolver and our rules say differently."""

    kind: str          # "setting", "log" or "error"
    key: str           # the effective key; "log"; "error"
    engine: object     # the engine's value / log line / exception (None: it has none)
    ours: object       # ours

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class CrossCheck:
    """The installed engine's resolution of a command next to ours, and where they differ."""

    engine: str
    python: str
    installed_version: str | None       # None: the engine does not import in ``python``
    note: str                           # in words: which engine and version ran, or why none did
    ours: FlagsResult | None = None
    engine_case: dict | None = None
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def installed(self) -> bool:
        return self.installed_version is not None

    @property
    def agree(self) -> bool:
        return self.installed and self.engine_case is not None and not self.disagreements

    def table(self):
        """One row per disagreement: what, the engine's value, ours (empty when they agree)."""
        import pandas as pd

        rows = [{"kind": d.kind, "what": d.key, f"{self.engine} {self.installed_version}": _show(d.engine),
                 "eagle3lab": _show(d.ours)} for d in self.disagreements]
        return pd.DataFrame(rows, columns=["kind", "what", f"{self.engine} {self.installed_version}", "eagle3lab"])

    def report(self) -> str:
        lines = [self.note]
        if not self.installed or self.engine_case is None:
            return "\n".join(lines)
        if not self.disagreements:
            lines.append(f"No disagreement: {self.engine} {self.installed_version}'s own resolver and eagle3lab's "
                         f"rules for {self.engine} {self.installed_version} give the same settings, log lines and "
                         "start-up outcome.")
            return "\n".join(lines)
        lines.append(f"{len(self.disagreements)} disagreement(s) between {self.engine} {self.installed_version}'s "
                     "own resolver and eagle3lab's rules:")
        for d in self.disagreements:
            lines.append(f"- {d.kind} {d.key}:\n    {self.engine} {self.installed_version}: {_show(d.engine)}\n"
                         f"    eagle3lab: {_show(d.ours)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.report()

    def to_dict(self) -> dict:
        return {"engine": self.engine, "python": self.python, "installed_version": self.installed_version,
                "note": self.note, "agree": self.agree, "disagreements": [d.to_dict() for d in self.disagreements],
                "engine_case": self.engine_case, "ours": self.ours.to_dict() if self.ours else None}


def _show(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, dict):
        return f"{value.get('type')} ({value.get('stage')}): {value.get('message', '')}".strip()
    return str(value)


def resolve_engine(engine: str, cases: list[dict], python=None, timeout: float = 600) -> dict:
    """Run the engine's resolver script on ``cases`` (``{"argv": [...], "env": {...}}``) in one subprocess.

    Returns its answer (see ``sglang_resolve.py``); ``version`` is None when the engine does not import there.
    """
    if engine not in SCRIPTS:
        raise bad_input("engine", None, f"one of {', '.join(CROSS_CHECK_ENGINES)} (the engines with a resolver to run)",
                        repr(engine))
    python = str(python or sys.executable)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    def no_answer(why: str, stderr: str | None) -> dict:
        tail = (stderr or "").strip().splitlines()[-3:]
        return {"engine": engine, "version": None, "python": python, "cases": [], "answered": False,
                "error": f"the resolver did not answer ({why})" + (": " + " | ".join(tail) if tail else "")}

    try:
        proc = subprocess.run([python, str(SCRIPTS[engine])], input=json.dumps({"cases": cases}), text=True,
                              capture_output=True, env=env, timeout=timeout)
    except FileNotFoundError:
        raise bad_input("--engine-python", None, "a Python interpreter", f"no program at {python}") from None
    except subprocess.TimeoutExpired as err:
        return no_answer(f"no reply within {timeout:g} s", err.stderr if isinstance(err.stderr, str) else None)
    if proc.returncode != 0 or not proc.stdout.strip():
        return no_answer(f"exit status {proc.returncode}", proc.stderr)
    try:   # the answer is the last stdout line; a native library may have printed before it
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except json.JSONDecodeError:
        return no_answer("its last output line is not JSON", proc.stderr)


def engine_logs(engine: str, case: dict) -> list[str]:
    """The engine's log lines that our findings account for (see ``_SGLANG_LOGGERS``)."""
    out = []
    for r in case.get("logs") or ():
        if r["logger"] in _SGLANG_LOGGERS or (r["logger"] == "sglang.srt.configs.model_config" and
                                              any(w in r["message"] for w in _CONTEXT_WORDS)):
            out.append(r["message"])
    return out


def _same_path(a, b) -> bool:
    if a is None or b is None:
        return a == b
    return os.path.normpath(os.path.expanduser(str(a))) == os.path.normpath(os.path.expanduser(str(b)))


def compare(ours: FlagsResult, case: dict, paths: dict | None = None) -> list[Disagreement]:
    """Every difference between our resolution and one engine case (``paths``: engine path -> the command's)."""
    paths = paths or {}
    out: list[Disagreement] = []
    predicted = [f.engine_error for f in ours.findings if f.engine_error]
    error = case.get("error")
    if error is not None and error["type"] not in predicted:
        out.append(Disagreement("error", "start-up", error, ", ".join(predicted) or None))
    elif error is None and predicted:
        out.append(Disagreement("error", "start-up", None, ", ".join(predicted)))
    if error is None or error["stage"] != "parse":  # an argparse exit logs nothing and resolves nothing
        theirs = sorted(engine_logs("sglang", case))
        mine = sorted(line for f in ours.findings for line in f.engine_logs)
        for line in theirs:
            if line in mine:
                mine.remove(line)
            else:
                out.append(Disagreement("log", "log line", line, None))
        if error is None:  # a build that stopped never reached the rules after the one that stopped it
            out.extend(Disagreement("log", "log line", None, line) for line in mine)
    if error is not None:
        return out
    s, eff = case["settings"], ours.effective
    target, draft = case.get("target") or {}, case.get("draft") or {}
    draft_path = s.get("speculative_draft_model_path")
    pairs = {
        "algorithm": s.get("speculative_algorithm"), "num_steps": s.get("speculative_num_steps"),
        "topk": s.get("speculative_eagle_topk"), "num_draft_tokens": s.get("speculative_num_draft_tokens"),
        "max_running_requests": s.get("max_running_requests"),
        "overlap_schedule": None if s.get("disable_overlap_schedule") is None else not s["disable_overlap_schedule"],
        "mixed_chunk": s.get("enable_mixed_chunk"), "context_length": target.get("context_len"),
        "target_arch": target.get("architecture"),
    }
    if s.get("speculative_algorithm") is None:  # no speculation: only the algorithm is ours to say
        pairs = {"algorithm": None}
    for key, value in pairs.items():
        if key == "target_arch" and eff.get(key) is None:
            continue  # no target config given to us: nothing claimed
        if eff.get(key) != value:
            out.append(Disagreement("setting", key, value, eff.get(key)))
    if s.get("speculative_algorithm") is not None:
        theirs = paths.get(draft_path, draft_path)
        if not _same_path(theirs, eff.get("draft_model")):
            out.append(Disagreement("setting", "draft_model", theirs, eff.get("draft_model")))
        if draft and eff.get("draft_max_position_embeddings") is not None and \
                draft.get("max_position_embeddings") != eff["draft_max_position_embeddings"]:
            out.append(Disagreement("setting", "draft_max_position_embeddings", draft.get("max_position_embeddings"),
                                    eff["draft_max_position_embeddings"]))
    return out


def _flag_value(argv: list[str], names) -> tuple[int | None, str | None]:
    """(index of the value, value) of the last of ``names`` in argv (``--flag v`` or ``--flag=v``)."""
    found = (None, None)
    for i, tok in enumerate(argv):
        name, eq, inline = tok.partition("=")
        if name in names:
            found = (i, inline) if eq else ((i + 1, argv[i + 1]) if i + 1 < len(argv) else (None, None))
    return found


def _place_config(argv: list[str], names, cfg, folder: Path, paths: dict) -> str | None:
    """Point the command's path at a folder holding ``cfg`` when the path is not a local checkpoint here.
    Returns why the engine cannot read this config, or None."""
    i, value = _flag_value(argv, names)
    if value is None:
        return None
    if (Path(value).expanduser() / "config.json").is_file() and cfg is None:
        return None
    if cfg is None:
        return f"{names[0]} {value} is not a local folder with a config.json here"
    data, _ = load_config(cfg, names[0])
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(data))
    tok = argv[i]
    argv[i] = f"{tok.partition('=')[0]}={folder}" if tok.startswith(names) and "=" in tok else str(folder)
    paths[str(folder)] = value
    return None


def cross_check(engine: str, args, target_config=None, draft_config=None, python=None, engine_version=None,
                target_arch=None, num_target_layers=None, timeout: float = 600) -> CrossCheck:
    """Resolve ``args`` with the engine installed in ``python`` and with our rules; list the disagreements.

    ``engine_version``: for our rules; default the version found installed (the point: check our
    statements against that exact build).
    """
    name = str(engine).strip().lower()
    python = str(python or sys.executable)
    env, _, argv = launch_parts(name, args)
    argv = list(argv)
    if _flag_value(argv, ("--device",))[1] is None:
        argv += ["--device", "cuda"]
    remote_code = "--trust-remote-code" in argv
    argv = [t for t in argv if t != "--trust-remote-code"]  # never run a checkpoint's own code
    paths: dict = {}
    with tempfile.TemporaryDirectory(prefix="eagle3lab-cross-check-") as tmp:
        problems = [p for p in (_place_config(argv, _MODEL_FLAGS, target_config, Path(tmp) / "target", paths),
                                _place_config(argv, _DRAFT_FLAGS, draft_config, Path(tmp) / "draft", paths)) if p]
        answer = resolve_engine(name, [{"argv": argv, "env": env}] if not problems else [], python, timeout)
    version = answer.get("version")
    if version is None and answer.get("answered", True) is False:
        return CrossCheck(name, python, None, f"{name} in {python}: {answer.get('error')}; nothing cross-checked.")
    if version is None:
        return CrossCheck(name, python, None, f"No {name} installed in {python} (it does not import there: "
                          f"{answer.get('error')}); nothing to cross-check. Install {name} in that interpreter or "
                          "pass --engine-python PATH.")
    if problems:
        return CrossCheck(name, python, version, f"{name} {version} is installed in {python}, but its resolver "
                          "reads the configs from the command's paths: " + "; ".join(problems) +
                          ". Pass --target-config / --draft-config.")
    ours = resolve_flags(name, args, target_config=target_config, draft_config=draft_config,
                         engine_version=engine_version or version, target_arch=target_arch,
                         num_target_layers=num_target_layers)
    case = answer["cases"][0]
    note = (f"{name} {version} (installed in {python}) resolved the command with its own code; eagle3lab's rules "
            f"for {name} {engine_version or version}" +
            ("; --device cuda added for both (not in the command)" if "--device" not in " ".join(
                launch_parts(name, args)[2]) else "") +
            ("; --trust-remote-code dropped for the engine's run (eagle3lab never runs a checkpoint's own code: "
             "configs load with the engine's and transformers' classes)" if remote_code else ""))
    return CrossCheck(name, python, version, note, ours, case, compare(ours, case, paths))
