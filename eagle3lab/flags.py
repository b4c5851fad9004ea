"""What SGLang or vLLM will really run for a launch command, and every silent override.

``resolve_flags(engine, args, target_config=None, draft_config=None, engine_version=None)`` reads a
real command line (``python -m sglang.launch_server ...``, ``vllm serve ... --speculative-config
'{...}'``) or a dict of flags and returns a :class:`FlagsResult`: the settings as given, the
settings the engine ends up with (``effective``), the cap on accept length they imply, and a list of
:class:`Finding` (stable code, severity, message, the engine rule behind it, the engine versions it
applies to, and a fix written in the engine's own flag syntax).

Engine rules live in ``flags_sglang.py`` (the overlap scheduler's eras: ``flags_sglang_overlap.py``)
and ``flags_vllm.py`` as data plus one short function each; this module parses command lines and
loads configs; ``eagle3lab.versions`` places an ``engine_version`` relative to the changes those
rules depend on. Pure Python (pandas only for ``table()``): no torch import.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eagle3lab.errors import Eagle3LabError, bad_input
from eagle3lab.versions import Change, parse_engine_version, unplaced_warning
from eagle3lab.versions import place as place_change

SEVERITIES = ("error", "warning", "info")
SCHEMA_VERSION = 1
VERSION_UNPLACED = "ENGINE_VERSION_UNPLACED"  # a build that cannot be placed relative to a change (either engine)

# The seed case: Kimi-K2 (DeepseekV3ForCausalLM, 61 layers) served by SGLang with a SpecForge
# EAGLE-3 draft; one flag caps every verify step at 2 tokens (eagle3-facts.md sections 2 and 6).
SEED_COMMAND = (
    "python -m sglang.launch_server --model-path moonshotai/Kimi-K2-Instruct --tp 8 --trust-remote-code "
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path ./kimi-k2-eagle3 "
    "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16"
)
SEED_TARGET_CONFIG = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
                      "num_hidden_layers": 61, "hidden_size": 7168, "max_position_embeddings": 131072}
SEED_DRAFT_CONFIG = {"architectures": ["LlamaForCausalLMEagle3"], "num_hidden_layers": 1, "hidden_size": 7168,
                     "max_position_embeddings": 131072, "draft_vocab_size": 32000,
                     "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58], "use_aux_hidden_state": True}}


# ----------------------------------------------------------------------------- results

@dataclass(frozen=True)
class Finding:
    """One thing the engine will do (or refuse to do) with this command, and how to fix it."""

    code: str                 # stable, e.g. "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED"
    severity: str             # "error" (engine fails or runs something broken), "warning", "info"
    message: str
    rule: str                 # the engine rule: file, function, PR
    engine_versions: str      # where the rule applies, e.g. "all versions read (2025-03 .. 2026-09)"
    fix: str | None = None    # in the engine's own syntax
    setting: str | None = None  # the `effective` key this finding explains

    def to_dict(self) -> dict:
        return asdict(self)


# Rows of the before/after table, in reading order (keys of `as_given` / `effective`).
TABLE_ROWS = (
    "algorithm", "num_steps", "topk", "num_draft_tokens", "num_speculative_tokens", "max_accept_length",
    "target_model", "target_arch", "num_target_layers", "draft_model", "draft_tensor_parallel_size",
    "aux_layer_ids", "aux_source", "aux_resid", "draft_norm_flags", "max_running_requests",
    "overlap_schedule", "mixed_chunk", "token_map", "context_length", "draft_max_position_embeddings",
)
_NOT_IN_TABLE = ("engine", "engine_version", "aux_label")


@dataclass
class FlagsResult:
    """Settings as given vs. what the engine runs, and why (``findings``)."""

    engine: str
    engine_version: str | None
    version_note: str
    command: str
    as_given: dict
    effective: dict
    findings: list[Finding] = field(default_factory=list)
    sources: dict = field(default_factory=dict)
    unknown_flags: list[dict] = field(default_factory=list)

    @property
    def max_accept_length(self) -> int | None:
        """Most tokens one verify step can emit (accepted drafts + the bonus token); None if it cannot run."""
        return self.effective.get("max_accept_length")

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    def finding(self, code: str) -> Finding | None:
        return next((f for f in self.findings if f.code == code), None)

    def to_dict(self) -> dict:
        """The ``eagle3lab flags --json`` object (schema in docs/cli/flags.md)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "engine": self.engine,
            "engine_version": self.engine_version,
            "version_note": self.version_note,
            "command": self.command,
            "as_given": self.as_given,
            "effective": self.effective,
            "max_accept_length": self.max_accept_length,
            "findings": [f.to_dict() for f in self.findings],
            "counts": {s: sum(f.severity == s for f in self.findings) for s in SEVERITIES},
            "unknown_flags": self.unknown_flags,
            "sources": self.sources,
        }

    def table(self):
        """Before/after pandas DataFrame: one row per setting, with the finding codes that explain it."""
        import pandas as pd

        keys = [k for k in TABLE_ROWS if k in self.effective or k in self.as_given]
        keys += [k for k in self.effective if k not in keys and k not in _NOT_IN_TABLE]
        why = {}
        for f in self.findings:
            if f.setting:
                why.setdefault(f.setting, []).append(f.code)
        rows = []
        for k in keys:
            given, eff = self.as_given.get(k), self.effective.get(k)
            rows.append({"setting": k, "as_given": _show(given, "(not set)"), "effective": _show(eff, "-"),
                         "changed": k in self.as_given and given is not None and given != eff,
                         "why": ", ".join(why.get(k, []))})
        return pd.DataFrame(rows).set_index("setting")

    def findings_table(self):
        import pandas as pd

        cols = ["severity", "code", "message", "fix", "engine_versions", "rule"]
        order = {s: i for i, s in enumerate(SEVERITIES)}
        rows = sorted((f.to_dict() for f in self.findings), key=lambda d: order[d["severity"]])
        return pd.DataFrame(rows, columns=["setting", *cols])[cols]

    def report(self) -> str:
        """Plain-text report: the before/after table, then every finding with its fix."""
        lines = [f"{self.engine} {self.engine_version or ''}".rstrip() + f"  ({self.version_note})", ""]
        t = self.table()
        width = max(len(k) for k in t.index)
        lines.append(f"{'setting':<{width}}  {'as given':<24}  effective")
        for k, row in t.iterrows():
            mark = "  <- " + row["why"] if row["why"] else ""
            lines.append(f"{k:<{width}}  {str(row['as_given'])[:24]:<24}  {row['effective']}{mark}")
        cap = self.max_accept_length
        lines += ["", f"max accept length per verify step: {cap if cap is not None else 'n/a (does not run as given)'}",
                  ""]
        for f in sorted(self.findings, key=lambda f: SEVERITIES.index(f.severity)):
            lines.append(f"[{f.severity}] {f.code}: {f.message}")
            if f.fix:
                lines.append(f"    fix: {f.fix}")
            lines.append(f"    rule: {f.rule} ({f.engine_versions})")
        return "\n".join(lines)

    def __str__(self) -> str:  # print(result) in a notebook shows the report
        return self.report()


def _show(value, empty: str) -> str:
    if value is None:
        return empty
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value) if isinstance(value, dict) else str(list(value))
    return str(value)


# ----------------------------------------------------------------------------- command lines

@dataclass(frozen=True)
class FlagSpec:
    """One engine flag: its canonical spelling, value kind and the result key it feeds."""

    name: str
    kind: str = "str"          # "int", "str", "bool", "json", "float", "size" (vLLM's 32k / 32K)
    key: str | None = None
    aliases: tuple[str, ...] = ()


@dataclass
class ParsedCommand:
    text: str
    program: str | None = None
    env: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)     # canonical flag name -> parsed value
    written: dict = field(default_factory=dict)    # canonical flag name -> the text as written
    positionals: list = field(default_factory=list)
    unknown: list = field(default_factory=list)    # dicts: flag, value, closest, kind
    notes: list = field(default_factory=list)      # Findings from parsing


_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PROGRAMS = {
    "sglang": ("sglang.launch_server", "sglang.srt.server", "sglang.launch_server.py"),
    "vllm": ("vllm.entrypoints.openai.api_server", "vllm.entrypoints.cli.main"),
}


def tokenize(args) -> tuple[str, list[str]]:
    """A command line (str, with shell quoting and backslash continuations) or a token list."""
    if isinstance(args, str):
        text = re.sub(r"\\\r?\n", " ", args).strip()
        try:
            return text, shlex.split(text)
        except ValueError as err:
            raise bad_input("launch command", None, "a shell command line with balanced quotes", repr(text[:120]),
                            f"shlex: {err}. Check the quotes around --speculative-config JSON.") from None
    tokens = [str(t) for t in args]
    return shlex.join(tokens), tokens


def _find_program(engine: str, tokens: list[str]) -> tuple[str | None, int, dict]:
    """Skip ``VAR=value`` prefixes and the program; return (program, index of the first flag, env)."""
    env, i = {}, 0
    while i < len(tokens) and _ENV.match(tokens[i]):
        name, value = tokens[i].split("=", 1)
        env[name] = value
        i += 1
    if i >= len(tokens) or tokens[i].startswith("-"):
        return None, i, env
    for j in range(i, len(tokens)):
        t = tokens[j]
        if t in ("-e", "--env") and j + 1 < len(tokens) and _ENV.match(tokens[j + 1]):  # docker run -e A=1
            name, value = tokens[j + 1].split("=", 1)
            env[name] = value
        if t == "-m" and j + 1 < len(tokens):
            mod = tokens[j + 1]
            for eng, mods in _PROGRAMS.items():
                if mod in mods or mod.startswith(f"{eng}."):
                    _check_program_engine(engine, eng, " ".join(tokens[i:j + 2]))
                    return " ".join(tokens[i:j + 2]), j + 2, env
        if Path(t).name in ("vllm", "sglang") and j + 1 < len(tokens) and tokens[j + 1] == "serve":
            _check_program_engine(engine, Path(t).name, f"{t} serve")
            return f"{t} serve", j + 2, env
    raise bad_input("launch command", None,
                    "'python -m sglang.launch_server ...', 'vllm serve MODEL ...' or just the flags",
                    repr(" ".join(tokens[i:i + 4]) + " ..."),
                    "Paste the line that starts the server (or only its --flags).")


def _check_program_engine(engine: str, found: str, program: str):
    if found != engine:
        raise bad_input("launch command", None, f"a {engine} launch command (engine '{engine}' was asked)",
                        repr(program), f"Run `eagle3lab flags {found} -- ...` for a {found} command.")


def parse_command(engine: str, args, specs: dict[str, FlagSpec], known_names: tuple[str, ...] = (),
                  underscores: bool = False, abbreviations: bool = False, positional_model: bool = False,
                  nested_json: tuple[str, ...] = ()) -> ParsedCommand:
    """Parse a command line against ``specs`` (canonical name -> FlagSpec).

    ``known_names``: other real flags of the engine that this tool does not model (not reported as
    unknown). ``underscores``: the engine accepts ``--a_b`` for ``--a-b`` (vLLM). ``abbreviations``:
    the engine's argparse accepts unique prefixes (SGLang). ``nested_json``: JSON flags that also take
    ``--flag.key value`` (vLLM's ``--speculative-config.method eagle3``).
    """
    if isinstance(args, dict):
        return _parse_dict(engine, args, specs, known_names)
    text, tokens = tokenize(args)
    program, i, env = _find_program(engine, tokens)
    parsed = ParsedCommand(text=text, program=program, env=env)
    lookup = {}
    for spec in specs.values():
        for n in (spec.name, *spec.aliases):
            lookup[n] = spec
    while i < len(tokens):
        tok = tokens[i]
        if tok == "--":
            i += 1
            continue
        if not tok.startswith("-") or _is_number(tok):
            if positional_model and not parsed.positionals and "--model" not in parsed.values:
                parsed.positionals.append(tok)
            else:
                parsed.positionals.append(tok)
                parsed.notes.append(Finding(
                    "STRAY_ARGUMENT", "error", f"'{tok}' is not a flag and no flag before it takes a value: the "
                    f"engine's argparse stops with 'unrecognized arguments: {tok}'.",
                    "argparse (python/sglang/srt/server_args.py, vllm/engine/arg_utils.py)", "all versions",
                    f"Remove '{tok}' or put the flag it belongs to in front of it."))
            i += 1
            continue
        name, eq, inline = tok.partition("=")
        if underscores and name.startswith("--"):  # vLLM: --a_b == --a-b (not inside --json-flag.key)
            head, dot, key = name[2:].partition(".")
            name = "--" + head.replace("_", "-") + dot + key
        nested_key = None
        for base in nested_json:
            if name.startswith(base + "."):
                name, nested_key = base, name[len(base) + 1:]
        spec = lookup.get(name)
        if spec is None and abbreviations and name.startswith("--") and name not in known_names:
            matches = [n for n in (*lookup, *known_names) if n.startswith(name)]
            if len(matches) == 1 and matches[0] in lookup:
                spec = lookup[matches[0]]
                parsed.notes.append(Finding(
                    "FLAG_ABBREVIATED", "warning", f"'{name}' is not a flag; argparse accepts it as an "
                    f"abbreviation of '{spec.name}' as long as no other flag of your build starts with it.",
                    "argparse allow_abbrev=True (SGLang's ServerArgs parser)", "all versions",
                    f"Write the full flag: {spec.name}.", setting=spec.key))
        if spec is None:
            value, i = _take_value(tokens, i, eq, inline, always=False)
            _unknown(parsed, name, value, lookup, known_names)
            continue
        if spec.kind == "bool":
            value = True if not eq else _parse_bool(spec.name, inline)
            i += 1
        else:
            raw, i = _take_value(tokens, i, eq, inline, always=True, flag=name)
            value = _parse_value(spec, raw, nested_key)
        if nested_key is not None:
            merged = dict(parsed.values.get(spec.name) or {})
            merged.update(value)
            parsed.values[spec.name] = merged
            parsed.written[spec.name] = (parsed.written.get(spec.name, "") + f" {tok} {raw}").strip()
            continue
        written = f"{tok}" if spec.kind == "bool" else (tok if eq else f"{tok} {shlex.quote(str(raw))}")
        _store(parsed, spec, value, written)
    return parsed


def _is_number(tok: str) -> bool:
    return re.fullmatch(r"-?\d+(\.\d+)?", tok) is not None


def _take_value(tokens, i, eq, inline, always: bool, flag: str = ""):
    if eq:
        return inline, i + 1
    nxt = tokens[i + 1] if i + 1 < len(tokens) else None
    if nxt is not None and (not nxt.startswith("-") or _is_number(nxt)):
        return nxt, i + 2
    if always:
        raise bad_input(flag, None, "a value after the flag", "nothing" if nxt is None else repr(nxt),
                        f"Write '{flag} VALUE'.")
    return None, i + 1


def _parse_bool(flag: str, text: str) -> bool:
    low = text.strip().lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise bad_input(f"{flag}={text}", None, "no value (it is a switch) or true/false", repr(text))


def _parse_value(spec: FlagSpec, raw, nested_key: str | None = None):
    written = f"{spec.name} {raw}"
    if spec.kind == "int":
        return parse_count(written, raw)
    if spec.kind == "size":  # vLLM's human-readable ints: 32k = 32000, 32K = 32768
        m = re.fullmatch(r"(\d+)([kKmM]?)", str(raw).strip())
        if not m:
            raise bad_input(f"`{written}`", None, "a token count such as 32768, 32k or 32K", repr(raw))
        return int(m.group(1)) * {"": 1, "k": 1000, "K": 1024, "m": 10**6, "M": 2**20}[m.group(2)]
    if spec.kind == "float":
        try:
            return float(raw)
        except (TypeError, ValueError):
            raise bad_input(f"`{written}`", None, "a number", repr(raw)) from None
    if spec.kind == "json":
        if nested_key is not None:
            try:
                val = json.loads(raw)
            except json.JSONDecodeError:
                val = raw
            return {nested_key: val}
        if isinstance(raw, dict):
            return raw
        try:
            val = json.loads(raw)
        except json.JSONDecodeError as err:
            snippet = str(raw)[max(0, err.pos - 20): err.pos + 20]
            raise bad_input(f"`{spec.name} {raw}`", None, "a JSON object",
                            f"malformed JSON ({err.msg} at character {err.pos}, near {snippet!r})",
                            "Quote the whole object in single quotes so the shell keeps the double quotes: "
                            f"{spec.name} '{{\"method\": \"eagle3\", \"model\": \"DRAFT\", \"num_speculative_tokens\": 3}}'."
                            ) from None
        if not isinstance(val, dict):
            raise bad_input(f"`{spec.name} {raw}`", None, "a JSON object {...}", type(val).__name__)
        return val
    return str(raw)


def parse_count(written: str, raw, minimum: int = 0) -> int:
    """An integer flag value; a clear error quoting the flag for non-integers and negatives."""
    if isinstance(raw, bool):
        raise bad_input(f"`{written}`", None, "a non-negative integer", repr(raw))
    if isinstance(raw, int):
        value = raw
    else:
        text = str(raw).strip()
        if not re.fullmatch(r"[+-]?\d+", text):
            raise bad_input(f"`{written}`", None, "a non-negative integer", repr(raw))
        value = int(text)
    if value < minimum:
        raise bad_input(f"`{written}`", None, f"an integer >= {minimum}", value)
    return value


def _store(parsed: ParsedCommand, spec: FlagSpec, value, written: str):
    if spec.name in parsed.values:
        before = parsed.written[spec.name]
        if parsed.values[spec.name] != value:
            raise bad_input(f"`{before}` and `{written}`", None, f"one value for {spec.name}",
                            "two different values",
                            "argparse silently keeps the last one; remove the one you do not mean.")
        parsed.notes.append(Finding("FLAG_REPEATED", "info", f"{spec.name} is given twice with the same value.",
                                    "argparse keeps the last occurrence", "all versions",
                                    f"Keep one {spec.name}.", setting=spec.key))
        return
    parsed.values[spec.name] = value
    parsed.written[spec.name] = written


def _unknown(parsed: ParsedCommand, name: str, value, lookup: dict, known_names: tuple[str, ...]):
    if name in known_names:  # a real flag this tool does not model
        parsed.values.setdefault(name, value if value is not None else True)
        return
    candidates = [*lookup, *known_names]
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    closest = close[0] if close else None
    parsed.unknown.append({"flag": name, "value": value, "closest": closest})
    shown = f"{name} {value}" if value is not None else name
    if closest:
        spec = lookup.get(closest)
        parsed.notes.append(Finding(
            "UNKNOWN_FLAG", "error", f"'{shown}' is not a flag; did you mean {closest}? The engine's argparse "
            f"stops with 'unrecognized arguments', and a hand-edited config that drops it loses the setting.",
            "argparse (the engine's CLI parser)", "all versions",
            f"Write {closest}" + (f" {value}" if value is not None else "") + ".",
            setting=spec.key if spec else None))
    else:
        parsed.notes.append(Finding(
            "UNCHECKED_FLAG", "info", f"'{shown}' is not one of the flags this tool models; it is passed through "
            "unchecked (it may be a real flag of your build).", "eagle3lab flags: modelled flags only",
            "-", None))


def _parse_dict(engine: str, args: dict, specs: dict[str, FlagSpec], known_names) -> ParsedCommand:
    parsed = ParsedCommand(text=json.dumps(args, default=str), program=None)
    lookup = {}
    for spec in specs.values():
        for n in (spec.name, *spec.aliases):
            lookup[n] = spec
            lookup[n.lstrip("-").replace("-", "_")] = spec
            lookup[n.lstrip("-")] = spec
    for key, raw in args.items():
        if key in ("env",) and isinstance(raw, dict):
            parsed.env.update({str(k): str(v) for k, v in raw.items()})
            continue
        spec = lookup.get(str(key)) or lookup.get(str(key).lstrip("-").replace("_", "-"))
        if spec is None:
            name = "--" + str(key).lstrip("-").replace("_", "-")
            _unknown(parsed, name, raw, {s.name: s for s in specs.values()}, known_names)
            continue
        if spec.kind == "bool":
            value = bool(raw) if isinstance(raw, bool) else _parse_bool(spec.name, str(raw))
        else:
            value = _parse_value(spec, raw)
        written = spec.name if spec.kind == "bool" else f"{spec.name} {json.dumps(raw) if isinstance(raw, dict) else raw}"
        _store(parsed, spec, value, written)
    return parsed


# ----------------------------------------------------------------------------- configs

def load_config(cfg, what: str) -> tuple[dict | None, str | None]:
    """A config.json as a dict: given as a dict, a path to the file, or a checkpoint folder."""
    if cfg is None:
        return None, None
    if isinstance(cfg, dict):
        return cfg, "dict"
    path = Path(cfg)
    if path.is_dir():
        path = path / "config.json"
    if not path.exists():
        raise bad_input(what, None, "a config.json (file or checkpoint folder)", f"no file at {path}")
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise bad_input(path, None, "valid JSON", f"unreadable ({err})") from None
    if not isinstance(data, dict):
        raise bad_input(path, None, "a JSON object", type(data).__name__)
    return data, str(path)


def local_config(model_path) -> tuple[dict | None, str | None]:
    """The config.json next to a model path in the command, when that path exists on this machine."""
    if not model_path:
        return None, None
    path = Path(str(model_path)).expanduser()
    if (path / "config.json").is_file():
        try:
            return load_config(path, str(model_path))
        except Eagle3LabError:
            return None, None
    return None, None


def text_config(cfg: dict | None) -> dict:
    """The language-model part of a config (Kimi-K2.5 and other wrappers keep it in ``text_config``)."""
    if not cfg:
        return {}
    inner = cfg.get("text_config")
    return inner if isinstance(inner, dict) else cfg


def config_value(cfg: dict | None, key: str):
    """``key`` from the top level, else ``text_config``, else speculators' ``transformer_layer_config``."""
    if not cfg:
        return None
    for part in (cfg, cfg.get("text_config"), cfg.get("transformer_layer_config")):
        if isinstance(part, dict) and part.get(key) is not None:
            return part[key]
    return None


def first_arch(cfg: dict | None) -> str | None:
    archs = (cfg or {}).get("architectures")
    return archs[0] if isinstance(archs, list) and archs else None


def is_speculators(cfg: dict | None) -> bool:
    return bool(cfg) and isinstance(cfg.get("speculators_config"), dict)


def _verifier_arch(draft: dict | None) -> str | None:
    """A speculators checkpoint names its verifier's architecture."""
    if not is_speculators(draft):
        return None
    verifier = draft["speculators_config"].get("verifier") or {}
    return first_arch(verifier)


def written_aux_ids(draft: dict | None) -> tuple:
    """The draft config's ``eagle_aux_hidden_state_layer_ids``: (top level, under ``eagle_config``).

    vLLM's runner reads only the top-level key, SGLang only the one under ``eagle_config``.
    """
    draft = draft or {}
    nested = draft.get("eagle_config")
    return (draft.get("eagle_aux_hidden_state_layer_ids"),
            nested.get("eagle_aux_hidden_state_layer_ids") if isinstance(nested, dict) else None)


def unplaced_finding(change: Change, engine_version: str) -> Finding:
    """The one shape of ``ENGINE_VERSION_UNPLACED``, whichever rule or translator placed the build: the
    newest behaviour is shown; ``engine_versions`` is the change's span, ``setting`` is ``engine_version``."""
    return Finding(VERSION_UNPLACED, "warning", unplaced_warning(change, engine_version), "eagle3lab.versions.place",
                   change.span(), setting="engine_version")


def translator_findings(prefix: str, res, versions: str, fix: str) -> list[Finding]:
    """Findings from an ``eagle3lab.layer_ids.AuxResolution``, one per note, by the note's kind."""
    codes = {"breaks": (f"{prefix}_AUX_BREAKS", "error"), "defaulted": (f"{prefix}_AUX_IDS_DEFAULTED", "warning"),
             "note": (f"{prefix}_AUX_NOTE", "warning")}
    out = [unplaced_finding(n.change, res.engine_version) if n.kind == "version" else
           Finding(*codes[n.kind], n.text, res.rule, versions, fix, "aux_resid") for n in res.notes]
    if res.defaulted and not any(n.kind == "defaulted" for n in res.notes):
        out.insert(0, Finding(f"{prefix}_AUX_IDS_DEFAULTED", "warning", f"No aux layer ids where the engine reads "
                              f"them: it captures its default {res.label}, silently.", res.rule, versions, fix,
                              "aux_resid"))
    return out


def aux_unknown(prefix: str, rule: str, versions: str, eff: dict) -> Finding:
    """No draft config: which target layers feed the draft cannot be known (either engine)."""
    eff.update(aux_layer_ids=None, aux_source="unknown (no draft config)", aux_resid=None)
    return Finding(f"{prefix}_AUX_UNKNOWN", "info", "Which target layers feed the draft depends on the draft's "
                   "config.json, which was not given.", rule, versions, "Pass --draft-config DRAFT/config.json.",
                   "aux_resid")


def aux_needs_layers(prefix: str, ids, rule: str, versions: str, eff: dict) -> list[Finding]:
    """No target layer count: the ids (or the engine's N-dependent default) cannot be placed on resid[k]."""
    eff["aux_resid"] = None
    out = []
    if ids is None:
        out.append(Finding(f"{prefix}_AUX_IDS_DEFAULTED", "warning", "No aux layer ids where this engine reads them: "
                           "it captures its default resid[2], resid[N//2], resid[N-3] (N = target layers), silently.",
                           rule, versions, None, "aux_resid"))
    out.append(Finding(f"{prefix}_AUX_NEEDS_LAYERS", "info", "The target's num_hidden_layers is unknown, so the ids "
                       "cannot be placed on resid[k].", rule, versions, "Pass --target-config TARGET/config.json.",
                       "aux_resid"))
    return out


def env_bool(env: dict, name: str) -> bool | None:
    """An environment variable of the launch command as SGLang's EnvBool reads it (srt/environ.py: true/1/yes/y,
    false/0/no/n, any case); None when unset or unreadable, where SGLang warns and keeps its default."""
    raw = str(env.get(name, "")).lower()
    return True if raw in ("true", "1", "yes", "y") else False if raw in ("false", "0", "no", "n") else None


# ----------------------------------------------------------------------------- the entry point

ENGINES = ("sglang", "vllm")


@dataclass
class Inputs:
    """What an engine module receives: the parsed command, configs and version placement."""

    engine: str
    engine_version: str | None
    parsed: ParsedCommand
    target: dict | None
    draft: dict | None
    target_arch: str | None
    num_layers: int | None
    sources: dict
    served_speculator: bool = False   # the served model's own config is a speculators checkpoint
    unplaced: list = field(default_factory=list)  # the Changes this build cannot be placed by, in order

    def place(self, change: Change) -> str:
        """'before', 'after' or 'uncertain' (which behaves as 'after'); uncertain ones become findings."""
        where = place_change(change, self.engine_version)
        if where.warning and change not in self.unplaced:
            self.unplaced.append(change)
        return where.state


def resolve_flags(engine: str, args, target_config=None, draft_config=None, engine_version=None,
                  target_arch: str | None = None, num_target_layers: int | None = None) -> FlagsResult:
    """Resolve a launch command the way ``engine`` will: effective settings, accept-length cap, findings.

    ``args``: a command line string, a token list, or a dict of flags (``{"speculative_num_steps": 1}``;
    for vLLM ``{"model": ..., "speculative_config": {...}}``). ``target_config`` / ``draft_config``: a dict,
    a config.json path or a checkpoint folder (read from the command's own paths when those exist
    locally). ``engine_version``: ``0.5.4``, a build date ``YYYY-MM-DD`` or ``pre-#N``/``post-#N``;
    None = the current release (said so in ``version_note``); a build that cannot be placed relative to a
    change behaves as the newest code and gets an ``ENGINE_VERSION_UNPLACED`` finding. ``target_arch``
    overrides the config's ``architectures[0]``.
    """
    name = str(engine).strip().lower()
    if name not in ENGINES:
        close = difflib.get_close_matches(name, ENGINES, n=1)
        raise bad_input("engine", None, f"one of {', '.join(ENGINES)}", repr(engine),
                        f"Did you mean '{close[0]}'?" if close else None)
    version = parse_engine_version(engine_version, "engine_version")  # the CLI checks --engine-version first
    if name == "sglang":
        from eagle3lab import flags_sglang as rules
    else:
        from eagle3lab import flags_vllm as rules
    parsed = rules.parse(args)
    target, target_src = load_config(target_config, "target_config")
    draft, draft_src = load_config(draft_config, "draft_config")
    sources = {"target_config": target_src, "draft_config": draft_src}
    if target is None:
        target, target_src = local_config(rules.model_path(parsed))
        sources["target_config"] = target_src and f"{target_src} (from the command's model path)"
    if draft is None:
        draft, draft_src = local_config(rules.draft_path(parsed))
        sources["draft_config"] = draft_src and f"{draft_src} (from the command's draft path)"
    served_speculator = is_speculators(target) and draft is None
    if served_speculator:  # the command serves a speculators checkpoint itself (`vllm serve SPECULATOR`)
        draft, target = target, None
        sources["draft_config"], sources["target_config"] = sources["target_config"], None
    arch = target_arch or first_arch(target) or _verifier_arch(draft)
    sources["target_arch"] = ("--target-arch" if target_arch else "target config architectures[0]") if arch else None
    layers = num_target_layers if num_target_layers is not None else config_value(target, "num_hidden_layers")
    if layers is not None:
        layers = parse_count("num_target_layers", layers, minimum=1)
    inputs = Inputs(name, version, parsed, target, draft, arch, layers, sources, served_speculator)
    as_given, effective, findings = rules.resolve(inputs)
    unplaced = {f.message: f for f in (unplaced_finding(c, version) for c in inputs.unplaced)}
    for f in findings:  # the translator's come from the same builder: one finding per change
        if f.code == VERSION_UNPLACED:
            unplaced.setdefault(f.message, f)
    findings = list(unplaced.values()) + [f for f in findings if f.code != VERSION_UNPLACED]
    note = (f"engine_version {version}" if version else
            f"engine_version not given: assumed the current {rules.CURRENT}")
    effective = {"engine": name, "engine_version": version or "current", **effective}
    return FlagsResult(engine=name, engine_version=version, version_note=note, command=parsed.text,
                       as_given=as_given, effective=effective, findings=parsed.notes + findings,
                       sources=sources, unknown_flags=parsed.unknown)


# ----------------------------------------------------------------------------- what-if (notebook widget)

def sglang_what_if(num_steps=None, topk=None, num_draft_tokens=None, target_config=None, draft_config=None,
                   engine_version=None, target_arch=None, extra: str = "") -> FlagsResult:
    """SGLang's view of an EAGLE3 launch with these three flags (None = flag left out)."""
    cmd = ["python", "-m", "sglang.launch_server", "--model-path", "TARGET", "--speculative-algorithm", "EAGLE3",
           "--speculative-draft-model-path", "DRAFT"]
    for flag, value in (("--speculative-num-steps", num_steps), ("--speculative-eagle-topk", topk),
                        ("--speculative-num-draft-tokens", num_draft_tokens)):
        if value is not None:
            cmd += [flag, str(value)]
    cmd += shlex.split(extra)
    return resolve_flags("sglang", cmd, target_config=target_config, draft_config=draft_config,
                         engine_version=engine_version, target_arch=target_arch)


def flags_widget(target_config=None, draft_config=None, engine_version=None, steps=1, topk=1, draft_tokens=16):
    """Sliders for steps / topk / draft tokens over :func:`sglang_what_if`; shows the table and findings.

    Returns the ipywidgets box (a frontend renders it; headless runs just build it) and the function
    that renders one setting, so the same view works without widgets: ``render(1, 1, 16)``.
    """
    import ipywidgets as w
    from IPython.display import display

    def render(steps, topk, draft_tokens):
        res = sglang_what_if(steps or None, topk or None, draft_tokens or None, target_config=target_config,
                             draft_config=draft_config, engine_version=engine_version)
        display(res.table()[["as_given", "effective", "why"]].loc[
            ["num_steps", "topk", "num_draft_tokens", "max_accept_length"]])
        display(res.findings_table()[["severity", "code", "message", "fix"]])
        return res

    sliders = {"steps": w.IntSlider(value=steps, min=0, max=16, description="steps (0 = unset)"),
               "topk": w.IntSlider(value=topk, min=0, max=8, description="topk (0 = unset)"),
               "draft_tokens": w.IntSlider(value=draft_tokens, min=0, max=64, description="draft tok (0 = unset)")}
    out = w.interactive_output(render, sliders)
    return w.VBox([w.HBox(list(sliders.values())), out]), render
