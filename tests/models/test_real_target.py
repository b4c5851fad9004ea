"""The real target track: SmolLM2-135M-Instruct (the Q4_1 release, dequantized), loadable offline by its
short name after `make install`, and decoded losslessly by our speculative loop."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.tiny_models import one_thread

from eagle3lab import bundled
from eagle3lab.decoding.speculative import hf_generate, speculative_generate
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.target import load_target

PROMPTS = ["Write a Python function that reverses a string.", "What is the capital of France?"]


def chat_ids(target, text):
    return list(target.tokenizer.apply_chat_template([{"role": "user", "content": text}],
                                                     add_generation_prompt=True)["input_ids"])


def test_geometry_and_provenance(real_target):
    cfg = real_target.text_config
    assert (real_target.num_layers, real_target.hidden_size, real_target.vocab_size) == (30, 576, 49152)
    assert (cfg.num_attention_heads, cfg.num_key_value_heads, cfg.tie_word_embeddings) == (9, 3, True)
    assert real_target.arch == "LlamaForCausalLM" and cfg.rope_parameters["rope_theta"] == 100000.0
    assert getattr(cfg, "quantization_config", None) is None          # a plain fp32 folder
    assert real_target.tokenizer.chat_template and real_target.warnings == []
    source = json.loads((bundled.REAL_TARGETS["smollm2-135m-instruct"] / "SOURCE.json").read_text())
    assert "Q4_1" in source["quantization"] and "dequantized" in source["source"]


def test_it_answers_like_an_instruct_model(real_target):
    with one_thread():
        out = hf_generate(real_target, chat_ids(real_target, PROMPTS[0]), max_new_tokens=24)
    assert "def " in real_target.tokenizer.decode(out.tokens) and "[::-1]" in real_target.tokenizer.decode(out.tokens)


@pytest.mark.parametrize("topk", [1, 2])
def test_greedy_speculation_is_token_identical_to_generate(real_target, topk):
    torch.manual_seed(0)   # an untrained draft: acceptance is low, every path through accept / rollback is taken
    draft = Eagle3Draft(DraftConfig(hidden_size=576, intermediate_size=1536, num_attention_heads=9,
                                    num_key_value_heads=3, vocab_size=49152, target_hidden_size=576,
                                    aux_layer_ids=(2, 15, 27), rope_theta=100000.0)).bound(num_target_layers=30)
    with one_thread():
        for text in PROMPTS:
            ids = chat_ids(real_target, text)
            ref = hf_generate(real_target, ids, max_new_tokens=16).tokens
            out = speculative_generate(real_target, draft, ids, num_steps=3, topk=topk,
                                       num_draft_tokens=None if topk == 1 else 5, max_new_tokens=16)
            assert out.tokens == ref, text


def test_short_name_without_conversion_says_make_install(monkeypatch, tmp_path):
    monkeypatch.setitem(bundled.REAL_TARGETS, "smollm2-135m-instruct", tmp_path / "absent")
    with pytest.raises(Eagle3LabError, match="make install"):
        load_target("smollm2-135m-instruct")
