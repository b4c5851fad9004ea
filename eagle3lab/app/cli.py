"""``eagle3lab`` command line: one subcommand per module in ``eagle3lab/commands``.

Subcommands are imported only when called, so ``eagle3lab --help`` and the light commands
(``flags``, ``ids``) start without importing torch. Each command module defines ``add_arguments``
and ``run(args) -> int``, and documents its ``--json`` output in ``docs/cli/<name>.md``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# name -> one-line help; the module is eagle3lab.app.commands.<name with - as _>
COMMANDS = {
    "env": "what this kernel has and what is bundled in data/",
    "flags": "what SGLang or vLLM will really run for a launch command, and every silent override",
    "ids": "translate aux layer ids between engines' numbering and the canonical resid[k]",
    "inspect": "read a draft checkpoint (or just its config.json) and report what each engine makes of it",
    "convert": "rewrite a draft checkpoint in another family's format (ids translated, not copied)",
    "bench": "measure baseline vs speculative tokens/s, acceptance and the throughput model",
    "doctor": "every finding for a draft as an engine serves it, measured, with the fix (and --write-fixed)",
    "serve-check": "serve a draft with the real vLLM and hold eagle3lab's predicted counters against its own",
    "profile": "a draft's acceptance profile (speculation_profile.json) and the engines' settings that replay it",
    "context-curve": "a draft's acceptance per context position, and as each engine runs it past its own limits",
    "workbook": "execute every notebook headless and render build/workbook/index.html",
    "session": "show a recorded debug session, or what changed between two (models, flags, metrics)",
}


# what --dtype takes on every command that loads a model; "auto" is models.device.resolve_dtype's rule (bf16 on CUDA,
# fp32 on CPU). Written here, not imported, so that parsing a command's options does not import torch.
DTYPE_CHOICES = ("auto", "float32", "bfloat16", "float16")


def add_dtype_argument(parser, what: str = "the target and the draft") -> None:
    """``--dtype`` as every command that loads a model takes it (argparse names the flag and the choices when
    the value is not one of them)."""
    parser.add_argument("--dtype", default="auto", choices=DTYPE_CHOICES,
                        help=f"what {what} run in: auto (bf16 on CUDA, fp32 on CPU), float32, bfloat16 or float16 "
                             "(default auto; the dtype used is recorded in --json and in a session)")


def model_path(path, default, flag: str) -> str:
    """A model folder a command was given (``flag``), or the bundled ``default`` when none was: refused, naming
    the flag, when the bundled one is not built."""
    from eagle3lab.errors import bad_input

    if path is not None:
        return path
    if not (default / "config.json").exists():
        raise bad_input(default, None, "the bundled model", "it is not built",
                        f"Run 'make data' to build the bundled models, or pass {flag} PATH.")
    return str(default)


def add_platform_argument(parser, decides: str) -> None:
    """``--engine-platform`` as every command that names a vLLM build takes it: the choices are
    eagle3lab.engines.vllm_runner.PLATFORMS (one home; a light import, no torch), ``decides`` what it decides."""
    from eagle3lab.engines.vllm_runner import PLATFORMS

    parser.add_argument("--engine-platform", choices=tuple(PLATFORMS), default=None,
                        help="vLLM only: " + "; ".join(f"{name} = {words}" for name, words in PLATFORMS.items())
                             + f". With the release it decides vLLM's model runner{decides} (default: a CUDA build, "
                             "said in the output)")


def _load(name: str):
    return importlib.import_module(f"eagle3lab.app.commands.{name.replace('-', '_')}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    top = argparse.ArgumentParser(prog="eagle3lab", description=__doc__.splitlines()[0],
                                  formatter_class=argparse.RawDescriptionHelpFormatter,
                                  epilog="commands:\n" + "\n".join(f"  {k:<10} {v}" for k, v in COMMANDS.items())
                                  + "\n\nRun 'eagle3lab COMMAND --help' for a command's options; every command takes --json.")
    top.add_argument("command", choices=sorted(COMMANDS), metavar="COMMAND")
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        top.parse_args([name])  # prints the usage error with the valid choices and exits 2
    module = _load(name)
    parser = argparse.ArgumentParser(prog=f"eagle3lab {name}", description=COMMANDS[name])
    module.add_arguments(parser)
    args = parser.parse_args(rest)
    args.argv = [name, *rest]   # what a recorded session re-runs
    try:
        return int(module.run(args) or 0)
    except (ValueError, FileNotFoundError) as err:  # bad input: a clear message, no traceback
        print(f"eagle3lab {name}: error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
