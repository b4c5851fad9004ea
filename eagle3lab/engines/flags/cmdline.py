"""Command lines as the engines' argparse reads them: quoting, ``VAR=value`` prefixes, abbreviations,
``--a_b`` spellings, nested JSON flags, repeated and unknown flags (each a ``Finding``)."""

from __future__ import annotations

import difflib
import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path

from eagle3lab.engines.flags.result import flag_finding
from eagle3lab.errors import bad_input


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


def launch_parts(engine: str, args) -> tuple[dict, str | None, list[str]]:
    """A launch command as the engine's process sees it: (environment prefix, program, argv after the program)."""
    _, tokens = tokenize(args)
    program, i, env = _find_program(engine, tokens)
    return env, program, tokens[i:]


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
                parsed.notes.append(flag_finding(
                    "STRAY_ARGUMENT", "error", f"'{tok}' is not a flag and no flag before it takes a value: the "
                    f"engine's argparse stops with 'unrecognized arguments: {tok}'.",
                    "argparse (python/sglang/srt/server_args.py, vllm/engine/arg_utils.py)", "all versions",
                    f"Remove '{tok}' or put the flag it belongs to in front of it.", engine_error="SystemExit"))
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
                parsed.notes.append(flag_finding(
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
        parsed.notes.append(flag_finding("FLAG_REPEATED", "info", f"{spec.name} is given twice with the same value.",
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
        parsed.notes.append(flag_finding(
            "UNKNOWN_FLAG", "error", f"'{shown}' is not a flag; did you mean {closest}? The engine's argparse "
            f"stops with 'unrecognized arguments', and a hand-edited config that drops it loses the setting.",
            "argparse (the engine's CLI parser)", "all versions",
            f"Write {closest}" + (f" {value}" if value is not None else "") + ".",
            setting=spec.key if spec else None, engine_error="SystemExit"))
    else:
        parsed.notes.append(flag_finding(
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


def env_bool(env: dict, name: str) -> bool | None:
    """An environment variable of the launch command as SGLang's EnvBool reads it (srt/environ.py: true/1/yes/y,
    false/0/no/n, any case); None when unset or unreadable, where SGLang warns and keeps its default."""
    raw = str(env.get(name, "")).lower()
    return True if raw in ("true", "1", "yes", "y") else False if raw in ("false", "0", "no", "n") else None
