"""eagle3lab: find and prove why an EAGLE-3 draft makes serving slower.

Data flow (one module per step):
    flags          what SGLang / vLLM will really run for a launch command
    layer_ids      each engine's aux layer ids -> canonical resid[k]
    target         load a Hugging Face target model
    capture        record resid[k] points; build the fc input in any order
    hidden_dump    datasets of captured states on disk (vLLM extract_hidden_states layout)
    profiles       each engine's draft conventions, as data
    draft          the EAGLE-3 draft head (one screen of math, named hooks)
    checkpoint     speculators / SpecForge-SGLang / EAGLE-official formats, converters
    decoding       real speculative decoding (chain and tree), lossless vs greedy
    metrics        acceptance metrics under each engine's definition
    evaluate       fast teacher-forced acceptance estimate
    throughput     the cost model: when speculation pays
    workbook       run the notebooks headless and render the report

Public names are imported lazily so that ``import eagle3lab`` stays cheap.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_EXPORTS = {
    "resolve_device": "eagle3lab.models.device",
    "resolve_dtype": "eagle3lab.models.device",
    "resolve_flags": "eagle3lab.engines.flags",
    "resolve_aux_layers": "eagle3lab.engines.layer_ids",
    "to_engine_ids": "eagle3lab.engines.layer_ids",
    "load_target": "eagle3lab.models.target",
    "Target": "eagle3lab.models.target",
    "ResidCapture": "eagle3lab.models.capture",
    "capture_resid": "eagle3lab.models.capture",
    "build_fc_input": "eagle3lab.models.capture",
    "Eagle3Draft": "eagle3lab.models.draft",
    "DraftConfig": "eagle3lab.models.draft",
    "DraftCache": "eagle3lab.models.draft",
    "get_profile": "eagle3lab.engines.profiles",
    "load_draft": "eagle3lab.models.checkpoint",
    "save_draft": "eagle3lab.models.checkpoint",
    "speculative_generate": "eagle3lab.decoding.speculative",
    "summary": "eagle3lab.app.workbook",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'eagle3lab' has no attribute {name!r}")
