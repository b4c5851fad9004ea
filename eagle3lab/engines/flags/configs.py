"""Reading target and draft ``config.json`` files the way the engines do (wrappers, nested keys)."""

from __future__ import annotations

import json
from pathlib import Path

from eagle3lab.errors import Eagle3LabError, bad_input


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


def verifier_arch(draft: dict | None) -> str | None:
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
