"""Target features captured once (train/feature_cache.py): what they hold, that they round-trip, and that
a draft trains from them as from the live target."""

from __future__ import annotations

import pytest
import torch

from eagle3lab.errors import Eagle3LabError
from eagle3lab.train.draft_vocab import select_draft_vocab, token_counts
from eagle3lab.train.feature_cache import capture_features, load_features
from eagle3lab.train.loop import batch_at
from eagle3lab.train.train_draft import DraftTrainConfig, draft_labels, target_features, train_draft

AUX = (1, 3, 4)


@pytest.fixture(scope="module")
def features(tiny):
    _, target, train_stream, *_ = tiny
    return capture_features(target, train_stream, AUX, num_windows=12, seq_len=32, seed=0, batch_size=5,
                            progress=False)


def test_the_cache_holds_what_the_live_target_gives(tiny, features):
    _, target, train_stream, *_ = tiny
    assert features.windows.shape == (12, 32) and features.aux.shape == (12, 32, 3 * target.hidden_size)
    assert features.aux.dtype == features.normed.dtype == torch.float16 and features.aux_resid == AUX
    # windows are batch_at's of the capture's starts (5 + 5 + 2), features those of the live target
    assert torch.equal(features.windows[5:10], batch_at(train_stream, 5, 5, 32, 0)[:, :-1])
    fc_in, logits = target_features(target, features.windows[:2], AUX)
    assert torch.allclose(features.aux[:2].float(), fc_in, atol=2e-3, rtol=1e-3)
    vocab = select_draft_vocab(token_counts([train_stream], target.vocab_size), 128)
    lm_rows = target.model.get_output_embeddings().weight[vocab.draft_ids]
    ids, aux, label_logits, top, mask = features.labels(torch.tensor([0, 1]), lm_rows)
    assert mask is None                       # windows from a stream: every position counts
    want_labels, want_top = draft_labels(logits, vocab.t2d)
    assert torch.equal(ids, features.windows[:2]) and torch.equal(top, want_top)
    assert torch.allclose(label_logits, want_labels, atol=5e-2)          # fp16 normed state, fp32 logits


def test_save_and_load_round_trip(features, tmp_path):
    path = features.save(tmp_path / "features.safetensors")
    back = load_features(path)
    for key in ("windows", "aux", "normed", "top1"):
        assert torch.equal(getattr(back, key), getattr(features, key)), key
    assert back.aux_resid == AUX
    with pytest.raises(Eagle3LabError, match="feature cache"):
        load_features(tmp_path / "absent.safetensors")


def test_a_draft_trains_from_the_cache(tiny, features, tmp_path):
    _, target, train_stream, heldout_stream, _ = tiny
    cfg = DraftTrainConfig(aux_resid=AUX, draft_vocab_size=128, ttt_steps=3, seq_len=32, batch_size=8, steps=30,
                           warmup_steps=3, eval_every=15, eval_windows=4, lr=5e-3)
    res = train_draft(cfg, target, train_stream, heldout_stream, tmp_path / "run", progress=False, features=features)
    assert res.done and res.log[-1]["loss"] < 0.75 * res.log[0]["loss"] and res.heldout["agree"][0] > 0.4
    # resumable like the live path: the batches are a function of the step
    part = train_draft(cfg, target, train_stream, heldout_stream, tmp_path / "part", progress=False,
                       features=features, stop_after_s=0)
    resumed = train_draft(cfg, target, train_stream, heldout_stream, tmp_path / "part", progress=False,
                          features=features)
    assert part.step == 1 and [e["loss"] for e in resumed.log] == [e["loss"] for e in res.log]
    wrong = DraftTrainConfig(aux_resid=(0, 2, 5), draft_vocab_size=128, seq_len=32)
    with pytest.raises(Eagle3LabError, match="aux_resid / seq_len"):
        train_draft(wrong, target, train_stream, heldout_stream, tmp_path / "w", progress=False, features=features)
