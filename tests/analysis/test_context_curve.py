"""Acceptance against context position (eagle3lab.analysis.context_curve): a draft built with a limit below the
documents' length shows the drop at that position as an engine runs it, and a draft without it shows none."""

import json
import shutil

import numpy as np
import pytest
import torch

from eagle3lab import bundled
from eagle3lab.analysis.context_curve import (
    EMPTY,
    MIN_DOCUMENTS,
    NOT_SERVED,
    SERVED,
    TOO_FEW,
    Documents,
    bins_difference,
    chat_documents,
    context_curve,
    corpus_documents,
    past_trained,
    position_bins,
    word_of_curve,
)
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio_difference
from eagle3lab.errors import Eagle3LabError

pytestmark = pytest.mark.usefixtures("bundled_models", "single_thread")
LENGTH, WINDOW, LIMIT = 512, 16, 128
N_DOCS = MIN_DOCUMENTS          # enough documents for the changes to be worded
BINS = ((0, 16), (16, 32), (32, 64), (64, 128), (128, 256), (256, 512))


def _false_verdict_rate(n: int, draws: int, seed: int = 1) -> float:
    """The share of "beats"/"loses" between two bins that do not differ (context_curve.MIN_DOCUMENTS's
    simulation): each document's tau N(2, 0.3), each bin's its own +-0.3 around it, 40-400 rounds a bin."""
    rng = np.random.default_rng(seed)
    wrong = 0
    for _ in range(draws):
        base = 2.0 + 0.3 * rng.standard_normal(n)
        rounds_a, rounds_b = rng.integers(40, 400, n), rng.integers(40, 400, n)
        tau_a, tau_b = base + 0.3 * rng.standard_normal(n), base + 0.3 * rng.standard_normal(n)
        diff = bootstrap_ratio_difference(tau_a * rounds_a, rounds_a, tau_b * rounds_b, rounds_b,
                                          seed=int(rng.integers(1 << 30)))
        wrong += diff.sign() != 0
    return wrong / draws


def test_min_documents_holds_false_verdicts_near_nominal():
    """MIN_DOCUMENTS is the smallest n whose false-verdict rate is at most twice the nominal 5%: 2 documents word a
    change that is not there about half the time, 8 more than 10% of the time, MIN_DOCUMENTS (10) less."""
    assert _false_verdict_rate(2, 600) > 0.4
    assert _false_verdict_rate(MIN_DOCUMENTS - 2, 3000) > 0.10
    assert _false_verdict_rate(MIN_DOCUMENTS, 3000) <= 0.10


def test_a_change_from_too_few_documents_is_not_worded():
    lower = Interval(-0.3, -0.5, -0.1, 0.95, MIN_DOCUMENTS - 1)
    assert word_of_curve(lower) == TOO_FEW and word_of_curve(lower, min_documents=2) == "loses"
    assert word_of_curve(Interval(-0.3, -0.5, -0.1, 0.95, MIN_DOCUMENTS)) == "loses" and word_of_curve(None) is None


@pytest.fixture(scope="module")
def target():
    from eagle3lab.models.target import load_target
    return load_target(bundled.TARGET, device="cpu")


@pytest.fixture(scope="module")
def docs(target):
    return corpus_documents(target.tokenizer, LENGTH, N_DOCS)


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
    assert docs.lengths == [LENGTH] * N_DOCS and docs.kind == "code" and "standard-library" in docs.source
    assert len(set(docs.ids)) == N_DOCS
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


def _short(docs, length):
    return Documents(tuple(d[:length] for d in docs.ids), docs.source, docs.kind)


def test_a_draft_without_the_limits_shows_no_drop_against_an_independent_reference(target, docs):
    """Every engine's curve of a draft with no limit below the documents equals tau per bin computed here from
    evaluate_offline's accepted lengths (whole documents, no chunking, no hooks), and no engine's bin loses to it."""
    from eagle3lab.decoding.evaluate import evaluate_offline
    from eagle3lab.models.checkpoint import load_draft

    draft = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    short = _short(docs, 256)
    bins = BINS[:5] + ((256, 512),)
    curve = context_curve(target, draft, short, bins=bins, chunk=100)
    acc = evaluate_offline(target, draft, short.ids, 3).accept_lengths
    rows = torch.arange(acc.shape[1])
    for i, (lo, hi) in enumerate(bins[:5]):
        inside = (rows + 1 >= lo) & (rows + 1 < hi)
        kept = acc[:, inside]
        kept = kept[kept >= 0]
        tau = float(kept.sum() + len(kept)) / len(kept)
        for c in curve.curves:
            assert c.bins[i].tau.value == pytest.approx(tau, abs=1e-12), (c.label, lo)
            assert c.bins[i].status == SERVED and c.bins[i].tau.units == N_DOCS
    for engine in curve.engines.values():
        assert not engine.rule.codes() and engine.bins[-1].status == EMPTY
        assert all(b.vs_reference_word == "identical" for b in engine.bins[:-1])
    assert all(b.change_word in ("beats", "loses", "within noise") for b in curve.reference.bins[1:-1])


def test_too_few_documents_leave_the_curve_unworded(target, docs):
    from eagle3lab.models.checkpoint import load_draft

    draft = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    few = Documents(tuple(d[:128] for d in docs.ids[:3]), "three", "code")
    curve = context_curve(target, draft, few, engines=("vllm",), bins=BINS[:4])
    changes = [b for b in curve.reference.bins if b.change is not None]
    assert changes and all(b.change_word == TOO_FEW and b.change.units == 3 for b in changes)
    assert changes[0].said(changes[0].change_word, changes[0].change) == \
        f"too few documents to word (n = 3; at least {MIN_DOCUMENTS})"
    assert {b.vs_reference_word for b in curve.engines["vllm"].bins} == {TOO_FEW}
    frame = curve.to_frame()
    assert set(frame.change_units.dropna()) == {3}
    # each bin keeps its per-document sums: the paired change from the bin before is computed from them again, and
    # the bins past a trained length are held against the last bin inside it, unworded on 3 documents
    ref = curve.reference.bins
    assert all(bins_difference(b, a) == b.change for a, b in zip(ref, ref[1:]))
    past = past_trained(curve.reference, 32)
    assert past.within == ref[1] and past.past == ref[2:] and past.words == (TOO_FEW, TOO_FEW)
    assert past.first_loss is None and past.unworded == ref[2]
    assert past.difference(ref[3]).value == pytest.approx(ref[3].tau.value - ref[1].tau.value)
    assert past_trained(curve.reference, 8) is None and past_trained(curve.reference, 128) is None


@pytest.mark.parametrize("engine_window,span", [("vllm", WINDOW), ("sglang", WINDOW + 1)])
def test_a_window_masks_exactly_the_keys_it_names(target, docs, engine_window, span):
    """Pass 1's logits at row t under a window of ``span`` keys equal the draft run on rows t - span + 1 .. t alone
    (RoPE is relative): vLLM's window W keeps W keys, SGLang's flag W keeps W + 1."""
    from eagle3lab.analysis.context_curve import _hooked, _target_pass, _Window
    from eagle3lab.decoding.evaluate import draft_passes
    from eagle3lab.models.checkpoint import load_draft

    draft = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    ids = torch.tensor([docs.ids[0][:96]])
    _, aux = _target_pass(target, draft, ids)
    handles = _hooked(draft, _Window(span, tuple(range(draft.config.num_hidden_layers))))
    try:
        windowed = draft_passes(draft, ids, aux, 1)[0].logits[0]
    finally:
        for h in handles:
            h.remove()
    full = draft_passes(draft, ids, aux, 1)[0].logits[0]
    for t in (span + 3, 60, 94):
        alone = draft_passes(draft, ids[:, t - span + 1:t + 2], aux[:, t - span + 1:t + 2], 1)[0].logits[0, -1]
        assert torch.allclose(windowed[t], alone, atol=1e-4), t
        assert not torch.allclose(full[t], alone, atol=1e-4), t     # the window changes what row t sees
    assert torch.equal(windowed[:span], full[:span])               # rows with fewer keys than the window


def test_sglangs_window_flag_and_start_up_rule_on_the_curve(target, docs, tmp_path):
    """--speculative-draft-window-size W runs the curve vLLM's layer_types window W + 1 gives (one key more);
    a plain launch of a draft with a short max_position_embeddings serves nothing past it (launched with
    --context-length), and SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 serves every position at the reference's tau."""
    short = _short(docs, 256)
    windowed = _built(tmp_path, sliding_window=WINDOW + 1, layer_types=["sliding_attention"])
    vllm = context_curve(target, windowed, short, engines=("vllm",), bins=BINS[:5]).engines["vllm"]
    flag = context_curve(target, windowed, short, engines=("sglang",), launch_window=WINDOW,
                         bins=BINS[:5]).engines["sglang"]
    assert flag.rule.window == vllm.rule.window == WINDOW + 1
    assert [b.tau for b in flag.bins] == [b.tau for b in vllm.bins]
    assert flag.bins[-1].vs_reference_word == "loses"

    limited = _built(tmp_path / "limited", max_position_embeddings=LIMIT)
    plain = context_curve(target, limited, short, engines=("sglang",), bins=BINS[:5])
    gone = plain.engines["sglang"]
    assert gone.rule.fails_from == LIMIT and "--context-length" in gone.label
    assert [b.status for b in gone.bins] == [SERVED] * 3 + ["partly served", NOT_SERVED]
    allowed = context_curve(target, limited, short, engines=("sglang",), allow_longer=True,
                            bins=BINS[:5]).engines["sglang"]
    assert [b.status for b in allowed.bins] == [SERVED] * 5
    assert [b.tau for b in allowed.bins] == [b.tau for b in plain.reference.bins]


def test_a_bin_reaches_the_limit_only_where_its_rows_draft_there(target, docs, tmp_path):
    """Rows t with t + 1 < hi draft at RoPE positions up to hi + K - 3: a limit of hi + K - 2 is not reached by
    the bin [lo, hi), and every anchor of it is served."""
    K, hi = 3, 128
    draft = _built(tmp_path, max_position_embeddings=hi + K - 2)
    curve = context_curve(target, draft, _short(docs, 256), engines=("vllm",), engine_version="0.24.0",
                          bins=BINS[:5], num_steps=K)
    old = curve.engines["vllm"]
    assert old.bins[3].hi == hi and old.bins[3].status == SERVED and not old.bins[3].past_draft_limit
    assert old.bins[4].status == NOT_SERVED and old.bins[4].past_draft_limit     # its first row drafts at hi + K - 2


@pytest.mark.parametrize("kw,name", [({"num_steps": 0}, "num_steps"), ({"n_documents": 0}, "n_documents"),
                                     ({"max_length": 1}, "max_length"), ({"launch_window": 0}, "launch_window")])
def test_arguments_the_curve_cannot_run_on_are_refused(target, kw, name):
    with pytest.raises(Eagle3LabError, match=name):
        context_curve(target, bundled.DRAFT_HEALTHY, **kw)


def test_corpus_documents_carry_one_bos_at_their_start():
    class AddsBos:
        bos_token_id = 1

        def __call__(self, text, add_special_tokens=True):
            return {"input_ids": ([1] if add_special_tokens else []) + [2 + ord(c) % 50 for c in text[:40]]}

    made = corpus_documents(AddsBos(), 200, 2)
    assert all(d[0] == 1 and d.count(1) == 1 for d in made.ids)


def test_documents_longer_than_the_targets_context_are_cut_and_longer_lengths_refused(target):
    from eagle3lab.models.checkpoint import load_draft

    draft = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    long = corpus_documents(target.tokenizer, 2100, 1)        # the bundled target's context: 2048
    curve = context_curve(target, draft, long, engines=("vllm",), bins=((0, 16),), min_documents=1)
    assert curve.max_length == 2048 == curve.target_max_positions
    assert curve.documents.source.endswith("cut to the target's context of 2048 tokens")
    with pytest.raises(Eagle3LabError, match="max_length: expected at most the target's context"):
        context_curve(target, draft, max_length=4096)
    launched = context_curve(target, draft, long, engines=("vllm",), bins=((0, 16),),
                             launched_context={"vllm": 4096})
    assert launched.max_length == 2100 and launched.engines["vllm"].rule.target_max_positions == 4096
