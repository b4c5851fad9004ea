"""Smoke tests of the trainers on tiny configs: losses drop, resume is exact, outputs load.

A tiny target is pretrained here (seconds) on synthetic code so the draft has something
predictable to learn; the bundled models themselves are checked in test_train_models.py.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers.tiny_models import TINY_TARGET, tiny_docs

from eagle3lab import bundled
from eagle3lab.train.pretrain_target import (
    TargetTrainConfig,
    pretrain_target,
    save_hf_dir,
)
from eagle3lab.train.tokenizer import train_tokenizer
from eagle3lab.train.train_draft import (
    DraftTrainConfig,
    build_draft,
    target_features,
    train_draft,
    unroll,
)


def test_target_pretraining_lowers_heldout_loss(tiny):
    *_, res = tiny
    assert res.done and res.step == 40
    assert res.log[0]["loss"] > 5.0                      # ~ln(300) at the start
    assert res.heldout_loss < res.log[0]["loss"] - 2.0


def test_target_resume_continues_exactly(tmp_path):
    docs = tiny_docs(12, seed=1)
    tok = train_tokenizer(docs, vocab_size=280)
    cfg = TargetTrainConfig(steps=5, **{**TINY_TARGET, "eval_every": 100})
    straight = pretrain_target(cfg, tok, docs[:10], docs[10:], tmp_path / "a", progress=False)
    first = pretrain_target(cfg, tok, docs[:10], docs[10:], tmp_path / "b", progress=False, stop_after_s=0)
    assert first.step == 1 and not first.done
    resumed = pretrain_target(cfg, tok, docs[:10], docs[10:], tmp_path / "b", progress=False)
    assert resumed.step == 5
    assert [e["loss"] for e in resumed.log] == [e["loss"] for e in straight.log]
    for (k, a), b in zip(straight.model.state_dict().items(), resumed.model.state_dict().values()):
        assert torch.equal(a, b), k
    other = TargetTrainConfig(steps=6, **{**TINY_TARGET, "eval_every": 100})
    with pytest.raises(ValueError, match="different TargetTrainConfig"):
        pretrain_target(other, tok, docs[:10], docs[10:], tmp_path / "b", progress=False)


def test_saved_target_loads_with_transformers_and_load_target(tiny, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eagle3lab.models.target import load_target

    tok, target, *_ = tiny
    out = save_hf_dir(target.model, tok, tmp_path / "target")
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= {p.name for p in out.iterdir()}
    ids = torch.tensor([tok("def f1(self, x):\n")["input_ids"]])
    plain = AutoModelForCausalLM.from_pretrained(str(out), dtype=torch.float32)
    assert AutoTokenizer.from_pretrained(str(out))("x")["input_ids"] == tok("x")["input_ids"]
    loaded = load_target(out, device="cpu", dtype="float32")
    with torch.no_grad():
        ref = target.model(input_ids=ids).logits
        assert torch.allclose(plain(input_ids=ids).logits, ref, atol=1e-5)
        assert torch.allclose(loaded.model(input_ids=ids).logits, ref, atol=1e-5)
    assert loaded.num_layers == 6


def test_ttt_unroll_equals_chain_drafting(tiny):
    """Step i of the unroll at index t == draft step i of a chain started after position t."""
    from eagle3lab.models.draft import DraftCache
    from eagle3lab.train.draft_vocab import select_draft_vocab, token_counts

    tok, target, train_stream, *_ = tiny
    cfg = DraftTrainConfig(aux_resid=(0, 2, 5), norm_before_residual=True, draft_vocab_size=128)
    torch.manual_seed(0)
    draft = build_draft(target, cfg, select_draft_vocab(token_counts([train_stream], target.vocab_size), 128))
    ids = torch.from_numpy(train_stream[:24].astype(np.int64))[None]
    fc_in, _ = target_features(target, ids, cfg.aux_resid)
    with torch.no_grad():
        ttt = [out for *_, out in unroll(draft, ids, fc_in, 3)]
        for t in (0, 7, 19):
            cache = DraftCache()
            out = draft(ids[:, 1:t + 2], fc_in[:, :t + 1], cache=cache)   # prefix: features 0..t, tokens 1..t+1
            chain = [(out.logits[:, -1], out.hidden[:, -1:])]
            for i in (1, 2):
                out = draft(ids[:, t + 1 + i:t + 2 + i], recycled_hidden=chain[-1][1],
                            position_ids=torch.tensor([[t + i]]), cache=cache)
                chain.append((out.logits[:, -1], out.hidden))
            for i, (logits, _) in enumerate(chain):
                assert torch.allclose(ttt[i].logits[:, t], logits, atol=1e-5), (t, i)


@pytest.fixture(scope="module")
def trained_draft(tiny, tmp_path_factory):
    tok, target, train_stream, heldout_stream, _ = tiny
    cfg = DraftTrainConfig(aux_resid=(1, 3, 4), draft_vocab_size=128, ttt_steps=3, seq_len=32, batch_size=8,
                           steps=30, warmup_steps=3, eval_every=15, eval_windows=4, lr=5e-3)
    run = tmp_path_factory.mktemp("draft")
    return cfg, run, train_draft(cfg, target, train_stream, heldout_stream, run, progress=False)


def test_draft_training_learns_the_target(trained_draft):
    cfg, _, res = trained_draft
    assert res.done and len(res.log) == 30
    assert res.log[-1]["loss"] < 0.75 * res.log[0]["loss"]
    first, last = res.log[14]["heldout"], res.heldout
    assert last["agree"][0] > 0.5 and last["tau_est"] > 1.5
    assert last["agree"][0] >= first["agree"][0] - 0.05
    assert len(last["agree"]) == cfg.ttt_steps


def test_draft_resume_continues_exactly(tiny, trained_draft, tmp_path):
    _, target, train_stream, heldout_stream, _ = tiny
    cfg = DraftTrainConfig(aux_resid=(1, 3, 4), draft_vocab_size=128, ttt_steps=2, seq_len=32, batch_size=4,
                           steps=4, eval_every=100, eval_windows=2)
    straight = train_draft(cfg, target, train_stream, heldout_stream, tmp_path / "a", progress=False)
    part = train_draft(cfg, target, train_stream, heldout_stream, tmp_path / "b", progress=False, stop_after_s=0)
    assert part.step == 1
    resumed = train_draft(cfg, target, train_stream, heldout_stream, tmp_path / "b", progress=False)
    assert [e["loss"] for e in resumed.log] == [e["loss"] for e in straight.log]
    for (k, a), b in zip(straight.draft.state_dict().items(), resumed.draft.state_dict().values()):
        assert torch.equal(a, b), k


def test_trained_draft_saves_in_sglang_format_and_loads(tiny, trained_draft, tmp_path):
    from safetensors.torch import load_file

    from eagle3lab.models.checkpoint import load_draft, save_draft
    from eagle3lab.train.train_draft import evaluate_ttt

    _, target, _, heldout_stream, _ = tiny
    cfg, _, res = trained_draft
    draft = res.draft
    draft.config.aux_layer_ids = tuple(cfg.aux_resid)   # speculators convention: id k = resid[k]
    save_draft(draft, tmp_path / "d", format="sglang", include_embedding=False)
    config = json.loads((tmp_path / "d" / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [0, 2, 3]   # SGLang: id k = resid[k+1]
    tensors = load_file(str(tmp_path / "d" / "model.safetensors"))
    assert "embed_tokens.weight" not in tensors and tensors["d2t"].shape == (128,)
    loaded = load_draft(tmp_path / "d", target=target, device="cpu")
    assert loaded.under("sglang").aux_resid == (1, 3, 4)
    from eagle3lab.train.loop import eval_windows
    windows = eval_windows(heldout_stream, 4, 32)
    assert evaluate_ttt(loaded, target, windows, (1, 3, 4), 3) == evaluate_ttt(draft, target, windows, (1, 3, 4), 3)


@pytest.mark.usefixtures("bundled_models")
def test_build_data_smoke_end_to_end(tmp_path):
    """`make data` in miniature: every stage on a corpus slice, cards written and reproduced."""
    import shutil

    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target
    from eagle3lab.train.build_data import main
    from eagle3lab.train.model_card import verify

    data = tmp_path / "data"
    shutil.copytree(bundled.CORPUS, data / "corpus")
    assert main(["--out", str(data), "--run-dir", str(tmp_path / "runs"), "--smoke"]) == 0
    target = load_target(data / "models" / "target", device="cpu")
    assert target.num_layers == 12
    case = load_draft(data / "models" / "draft-case", target=target, device="cpu")
    assert case.under("sglang").aux_resid == (3, 7, 11)
    assert json.loads((data / "models" / "draft-case" / "training.json").read_text())["trained_resid"] == [0, 3, 7]
    assert "acceptance:begin" in (data / "models" / "draft-healthy" / "README.md").read_text()
    assert verify(data) == []
