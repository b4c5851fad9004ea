"""SGLang's own resolution of launch commands, run in the interpreter where SGLang is installed.

Run by path, never imported by eagle3lab (it imports nothing of ours, and SGLang only inside
``main``)::

    ENGINE_PYTHON eagle3lab/oracle/sglang_resolve.py < request.json > answer.json

request: ``{"cases": [{"argv": [flags after `python -m sglang.launch_server`], "env": {VAR: value}}]}``.
Each case runs what ``python -m sglang.launch_server`` runs before it loads weights:
``prepare_server_args(argv)`` (SGLang's argparse) and ``ServerArgs.resolve_once()`` (the whole
resolution pipeline, the speculative hook included), then what the draft worker does first,
``ModelConfig.from_server_args(..., is_draft_model=True, context_length=<the target's>)`` (where
SGLang checks the draft's context length). Per case the answer holds the resolved settings, every
log record SGLang emitted (stage, logger, level, message) and the exception that stopped it, if any, with
the stage (``parse``, ``resolve``, ``draft_config``). The environment of a case is the inherited one
without any ``SGLANG_*`` variable, plus the case's ``env``: only the launch command's own prefix counts.

The answer also names the SGLang version, and what the torchvision import shim served and whether
anything used it (``absent_modules.py``: it must never be used). If SGLang cannot be imported the
answer is ``{"engine": "sglang", "version": null, "error": ...}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import sys
from pathlib import Path

SETTINGS = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
            "speculative_num_draft_tokens", "speculative_draft_model_path", "speculative_draft_model_revision",
            "speculative_adaptive", "speculative_token_map", "max_running_requests", "disable_overlap_schedule",
            "enable_mixed_chunk", "context_length", "device")


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[dict] = []
        self.stage = "parse"

    def emit(self, record):
        self.records.append({"stage": self.stage, "logger": record.name, "level": record.levelname,
                             "message": record.getMessage()})


def _error(stage: str, err: BaseException, stderr: str = "") -> dict:
    message = str(err)
    if isinstance(err, SystemExit):  # argparse: the reason is on stderr
        message = stderr.strip().splitlines()[-1] if stderr.strip() else f"exit status {err.code}"
    return {"stage": stage, "type": type(err).__name__, "message": message}


def resolve_case(argv: list[str], env: dict) -> dict:
    from sglang.srt.arg_groups.overrides import model_config_of
    from sglang.srt.configs.model_config import ModelConfig
    from sglang.srt.server_args import prepare_server_args

    for name in [k for k in os.environ if k.startswith("SGLANG_")]:
        del os.environ[name]
    os.environ.update({str(k): str(v) for k, v in env.items()})
    records = _Records()
    sglang_logger = logging.getLogger("sglang")
    sglang_logger.addHandler(records)
    out = {"argv": argv, "env": env, "settings": None, "target": None, "draft": None, "error": None}
    try:
        stderr = io.StringIO()
        try:
            with contextlib.redirect_stderr(stderr):
                server_args = prepare_server_args(list(argv))
        except (SystemExit, Exception) as err:
            out["error"] = _error("parse", err, stderr.getvalue())
            return out
        records.stage = "resolve"
        try:
            server_args.resolve_once()
        except Exception as err:
            out["error"] = _error("resolve", err)
            return out
        resolved = server_args.resolved_dict()
        out["settings"] = {k: resolved.get(k) for k in SETTINGS}
        target = model_config_of(server_args)
        out["target"] = {"architecture": (target.hf_config.architectures or [None])[0],
                         "context_len": target.context_len}
        if resolved.get("speculative_algorithm") in ("EAGLE", "EAGLE3", "STANDALONE"):
            records.stage = "draft_config"
            try:  # what the draft TpModelWorker builds first (managers/tp_worker.py _init_model_config)
                draft = ModelConfig.from_server_args(
                    server_args, model_path=resolved["speculative_draft_model_path"],
                    model_revision=resolved["speculative_draft_model_revision"], is_draft_model=True,
                    context_length=target.context_len)
            except Exception as err:
                out["error"] = _error("draft_config", err)
                return out
            out["draft"] = {"architecture": (draft.hf_config.architectures or [None])[0],
                            "context_len": draft.context_len,
                            "max_position_embeddings": getattr(draft.hf_text_config, "max_position_embeddings",
                                                               None)}
        return out
    finally:
        sglang_logger.removeHandler(records)
        out["logs"] = records.records


def main() -> int:
    request = json.load(sys.stdin)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # SGLang prints; the answer alone goes to stdout
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import absent_modules  # this folder's shim, loaded by path: see its docstring

    absent_modules.install(("sglang",))
    answer = {"engine": "sglang", "version": None, "python": sys.executable, "error": None, "cases": []}
    try:
        import sglang
        from sglang.srt.server_args import prepare_server_args  # noqa: F401  (fails here, not per case)

        answer["version"] = getattr(sglang, "__version__", None)
    except Exception as err:  # not installed, or does not import here
        answer["error"] = f"{type(err).__name__}: {err}"
    if answer["error"] is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        answer["cases"] = [resolve_case(c["argv"], c.get("env") or {}) for c in request.get("cases", [])]
    answer["absent_modules"] = {"served": sorted({m for m, _ in absent_modules.SERVED}),
                                "used": list(absent_modules.USED)}
    real_stdout.write(json.dumps(answer, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
