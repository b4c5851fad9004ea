"""Acceptance against context position (eagle3lab.analysis.context_curve): a draft built with a limit below the
documents' length shows the drop at that position as an engine runs it, and a draft without it shows none."""

import json
import shutil

import pytest

from eagle3lab import bundled
from eagle3lab.analysis.context_curve import (
    EMPTY,
    NOT_SERVED,
    SERVED,
    chat_documents,
    context_curve,
    corpus_documents,
    position_bins,
)

pytestmark = pytest.mark.usefixtures("bundled_models", "single_thread")
LENGTH, WINDOW, LIMIT = 512, 16, 128
BINS = ((0, 16), (16, 32), (32, 64), (64, 128), (128, 256), (256, 512))


@pytest.fixture(scope="module")
def target():
    from eagle3lab.models.target import load_target
    return load_target(bundled.TARGET, device="cpu")


@pytest.fixture(scope="module")
def docs(target):
    return corpus_documents(target.tokenizer, LENGTH, 3)


def _built(tmp_path, **keys):
    """The healthy draft with ``keys`` written into its config.json (a limit it was not trained with)."""
    from eagle3lab.models.checkpoint import load_draft

    folder = tmp_path / "draft"
    shutil.copytree(bundled.DRAFT_HEALTHY, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **keys}))
    return load_draft(folder, target=bundled.TARGET, device="cpu")


def test_position_bins_double_up_to_the_length():
    assert position_bins(2048) == ((0, 512), (512, 1024), (1024, 2048))
    assert position_bins(3000)[-1] == (2048, 3000) and position_bins(300) == ((0, 300),)


def test_documents_say_what_they_are(target, docs):
    assert docs.lengths == [LENGTH] * 3 and docs.kind == "code" and "standard-library" in docs.source
    assert len(set(docs.ids)) == 3
    with pytest.raises(Exception, match="chat_template"):
        chat_documents(target.tokenizer, LENGTH, 1)   # the bundled target has no chat template


def test_a_window_drops_acceptance_past_it_under_vllm_not_under_sglang(target, docs, tmp_path):
    draft = _built(tmp_path, sliding_window=WINDOW, layer_types=["sliding_attention"])
    curve = context_curve(target, draft, docs, engines=("vllm", "sglang"), bins=BINS)
    ref, vllm, sglang = curve.reference, curve.engines["vllm"], curve.engines["sglang"]
    assert curve.draft_window == WINDOW and vllm.rule.window == WINDOW
    # the first bin: its anchors lose at most a key or two to the window, and the same numbers come out
    assert vllm.bins[0].tau == ref.bins[0].tau and vllm.bins[-1].past_window and not ref.bins[-1].past_window
    # past the window: lower than the draft with full attention, beyond noise, in every bin from 32 on
    assert [b.vs_reference_word for b in vllm.bins[2:]] == ["loses"] * 4
    assert all(b.tau.value < r.tau.value for b, r in zip(vllm.bins[2:], ref.bins[2:]))
    # SGLang never reads the config's window (no launch flag): the reference's numbers everywhere
    assert [b.tau for b in sglang.bins] == [b.tau for b in ref.bins]
    assert "CONTEXT_WINDOW_DROPPED" in sglang.rule.codes()
    frame = curve.to_frame()
    assert set(frame.curve) == {c.label for c in curve.curves} and "emulated" in frame.attrs["title"]
    assert "cpu" in frame.attrs["title"] and "float32" in frame.attrs["title"]


def test_max_position_embeddings_below_the_documents_fails_there_before_vllm_49343(target, docs, tmp_path):
    draft = _built(tmp_path, max_position_embeddings=LIMIT)
    curve = context_curve(target, draft, docs, engines=("vllm",), engine_version="0.24.0", bins=BINS)
    old = curve.engines["vllm"]
    assert old.rule.fails_from == LIMIT
    assert [b.status for b in old.bins] == [SERVED] * 3 + ["partly served", NOT_SERVED, NOT_SERVED]
    assert old.bins[-1].tau is None and old.bins[0].tau == curve.reference.bins[0].tau
    assert [b.past_draft_limit for b in old.bins] == [False] * 3 + [True] * 3
    new = context_curve(target, draft, docs, engines=("vllm",), engine_version="0.32.0", bins=BINS).engines["vllm"]
    assert [b.status for b in new.bins] == [SERVED] * 6 and new.rule.fails_from is None
    assert curve.limits_frame().fails_from.tolist() == [LIMIT]


def test_a_draft_without_the_limits_shows_no_drop(target, docs):
    from eagle3lab.models.checkpoint import load_draft

    draft = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    curve = context_curve(target, draft, docs, bins=BINS + ((512, 1024),))
    for engine in curve.engines.values():
        assert [b.tau for b in engine.bins[:-1]] == [b.tau for b in curve.reference.bins[:-1]]
        assert all(b.status == SERVED for b in engine.bins[:-1]) and engine.bins[-1].status == EMPTY
        assert not engine.rule.codes()
    assert all(b.change_word in ("beats", "loses", "within noise") for b in curve.reference.bins[1:-1])
