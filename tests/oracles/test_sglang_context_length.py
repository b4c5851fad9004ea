"""Context-length parity: SGLang 0.5.23's own ``get_context_length`` (srt/utils/hf_transformers/common.py) on the
config its ``get_config`` loads (transformers 5.19, the engine environment's) against ``context_rules.context_length``
("sglang"), the one reading that ``flags`` (``derived_context_length``) and ``resolve_context`` use.

One case per way the two readings this project had disagreed, each with SGLang's answer:

- a float-valued key: SGLang returns ``int(factor * value)`` of the first key that is not None, float or not
  (transformers validates max_position_embeddings as an int for Llama, not seq_length);
- ``rope_parameters`` alone: transformers 5 maps it onto the config's rope_scaling, so SGLang scales by its factor;
- a legacy ``type: llama3``: transformers 5 copies it to rope_type, and SGLang's llama3 test leaves it unscaled;
- yarn / longrope without original_max_position_embeddings: transformers 5 fills it, so SGLang scales by 1;
- no length key at all: SGLang's 2048.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.paths import run_engine_job

from eagle3lab.engines.context_rules import DRAFT, TARGET, context_length

VERSION = "0.5.23"
SCRIPT = Path(__file__).resolve().parent / "engine_scripts" / "sglang_context_length.py"

LLAMA = {"model_type": "llama", "max_position_embeddings": 4096}
CASES = {
    "float key first": {"model_type": "qwen3", "max_position_embeddings": 40960, "seq_length": 8192.5},
    "float key before an int one": {**LLAMA, "seq_length": 8192.0},
    "float factor": {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 2.5}},
    "rope_parameters alone": {**LLAMA, "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e4}},
    "rope_scaling over rope_parameters": {**LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 2.0},
                                          "rope_parameters": {"rope_type": "linear", "factor": 4.0}},
    "legacy type llama3": {**LLAMA, "max_position_embeddings": 131072, "rope_scaling": {
        "type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}},
    "legacy type llama3 without original": {**LLAMA, "max_position_embeddings": 131072, "rope_scaling": {
        "type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0}},
    "legacy type linear": {**LLAMA, "rope_scaling": {"type": "linear", "factor": 2.0}},
    "yarn without original": {**LLAMA, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}},
    "yarn in rope_parameters without original": {**LLAMA, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}},
    "longrope without original": {**LLAMA, "rope_scaling": {"rope_type": "longrope", "factor": 4.0,
                                                            "short_factor": [1.0] * 32, "long_factor": [1.0] * 32}},
    "dynamic": {**LLAMA, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "multimodal text_config": {"model_type": "llava", "text_config": {
        **LLAMA, "rope_scaling": {"rope_type": "linear", "factor": 2.0}}},
    "no length key": {"model_type": "llama"},
}


@pytest.fixture(scope="module")
def answer(tmp_path_factory):
    cases = [{"name": n, "config": c} for n, c in CASES.items()]
    out = run_engine_job(SCRIPT, cases, tmp_path_factory.mktemp("context_length") / "job.json")
    assert out["version"] == VERSION and out["used"] == [], out
    return {c["name"]: c for c in out["cases"]}


@pytest.mark.parametrize("name", CASES)
def test_sglang_reads_each_config_as_the_one_reading_does(answer, name):
    sglang = answer[name]
    assert sglang["error"] is None and isinstance(sglang["context_length"], int)
    assert context_length("sglang", TARGET, CASES[name]) == sglang["context_length"]
    assert context_length("sglang", DRAFT, CASES[name]) == sglang["context_length"]   # the draft's ModelConfig too
