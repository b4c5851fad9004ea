"""Notebook 08's claims (acceptance against context position, on both tracks, and two engines' rules on a copy of
the draft declaring limits), asserted from the notebook's own run."""

from __future__ import annotations

import pytest
from helpers.notebooks import notebook_claims, notebook_summary, run_with_parameters
from helpers.parameters import assert_parameters_hold_the_literals, parameters_and_code_below

from eagle3lab.analysis.context_curve import MIN_DOCUMENTS
from eagle3lab.app.workbook import NOTEBOOKS
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.readings import nb08_long_context as reading

NOTEBOOK = "08_long_context.ipynb"
PARAMS, _ = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
WORD = {1: "beats", -1: "loses", 0: "within noise"}


@pytest.fixture(scope="module")
def nb(real_target, bundled_models):
    return notebook_claims(NOTEBOOK)


def word(c: dict) -> str:
    return WORD[1 if c["low"] > 0 else -1 if c["high"] < 0 else 0]


def fmt(c: dict) -> str:
    return f"{c['value']:.2f} [{c['low']:.2f}, {c['high']:.2f}]"


def test_both_tracks_are_measured_on_documents_that_say_what_they_are(nb):
    assert nb["track"] == "bundled" and set(nb["tracks"]) == {"bundled", "smollm2"}
    bundled_track, smollm2 = nb["tracks"]["bundled"], nb["tracks"]["smollm2"]
    assert bundled_track["kind"] == "code" and "standard-library" in bundled_track["documents"]
    assert smollm2["kind"] == "chat" and "chat transcripts" in smollm2["documents"]
    for name, t in nb["tracks"].items():
        # the default length: the target's max_position_embeddings, at most 2048 on a CPU
        assert t["length"] == min(t["target_max_positions"], 2048) and t["n_documents"] == PARAMS["N_DOCUMENTS"]
        assert (t["device"], t["dtype"], t["num_steps"]) == ("cpu", "float32", PARAMS["NUM_STEPS"]), name
        assert t["trained_length"] == 512, name     # both drafts' training.json: config.seq_len
        assert [b["label"] for b in t["bins"]] == ["0-512", "512-1k", "1k-2k"], name


def test_every_bin_carries_its_interval_and_the_change_its_interval_earns(nb):
    for name, t in nb["tracks"].items():
        for i, b in enumerate(t["bins"]):
            tau = b["tau"]
            assert tau["low"] <= tau["value"] <= tau["high"] and 1.0 <= tau["value"] <= PARAMS["NUM_STEPS"] + 1
            assert (tau["level"], tau["units"], tau["unit"]) == (0.95, t["n_documents"], "tokens per round")
            if i == 0:
                assert "change" not in b
                continue
            # a paired difference of ratios of sums: its point is the difference of the two bins' points
            assert b["change"]["value"] == pytest.approx(tau["value"] - t["bins"][i - 1]["tau"]["value"])
            # enough documents for a verdict (context_curve.MIN_DOCUMENTS), and the word its interval earns
            assert b["change"]["units"] >= MIN_DOCUMENTS, (name, b["label"])
            assert b["change_word"] == word(b["change"]), (name, b["label"])


def test_the_verdict_follows_the_bins_past_the_trained_length_against_the_level_inside_it(nb):
    """Retraining longer is called for only where a bin past the trained length (512: both drafts) loses to the
    last bin inside it, by its paired interval over documents; a loss to the bin before alone does not."""
    for name, t in nb["tracks"].items():
        drop = next((b for b in t["bins"] if b.get("change_word") == "loses"), None)
        assert t["first_drop"] == (None if drop is None else drop["lo"]), name
        past = t["past_trained"]
        assert past["within"] == "0-512" and [b["label"] for b in past["bins"]] == ["512-1k", "1k-2k"], name
        for b in past["bins"]:
            assert b["vs_within"]["units"] >= MIN_DOCUMENTS and b["word"] == word(b["vs_within"]), (name, b["label"])
        # the paired difference's point is the difference of the two bins' points
        taus = {b["label"]: b["tau"]["value"] for b in t["bins"]}
        for b in past["bins"]:
            assert b["vs_within"]["value"] == pytest.approx(taus[b["label"]] - taus["0-512"]), (name, b["label"])
        loss = next((b for b in past["bins"] if b["word"] == "loses"), None)
        assert past["first_loss"] == (None if loss is None else loss["lo"]), name
        expected = reading.FALLS_PAST_TRAINED if loss is not None else reading.HOLDS if drop is None else (
            reading.HOLDS_PAST_TRAINED if drop["lo"] >= t["trained_length"] else reading.FALLS_WITHIN_TRAINED)
        assert t["verdict"] == expected, name
        assert ("RETRAIN_LONGER" in t["changes"]) == (loss is not None), name
        assert t["rules"] == {"speculators": [], "vllm": [], "sglang": []}, name   # no limit below the target's


def test_the_bundled_draft_falls_past_its_trained_length(nb):
    """Measured finding: the bundled draft, trained on 512-token windows, loses beyond noise from 512 on, and its
    1k-2k tau lies wholly below its 0-512 tau."""
    t = nb["tracks"]["bundled"]
    assert t["verdict"] == reading.FALLS_PAST_TRAINED and t["first_drop"] == 512
    assert t["past_trained"]["first_loss"] == 512
    assert t["bins"][-1]["tau"]["high"] < t["bins"][0]["tau"]["low"]


def test_the_copys_rules_show_a_window_dropped_and_a_rope_cache_sized_by_the_draft(nb):
    rule = nb["rule"]
    window, limit = PARAMS["COPY_WINDOW"], PARAMS["COPY_MAX_POSITIONS"]
    assert (rule["window"], rule["max_positions"]) == (window, limit)
    assert set(rule["engines"]) == set(PARAMS["RULE_BUILDS"])
    vllm, sglang = rule["engines"]["vllm"], rule["engines"]["sglang"]
    assert vllm["version"] == PARAMS["RULE_BUILDS"]["vllm"] and sglang["version"] == PARAMS["RULE_BUILDS"]["sglang"]
    # vLLM before #49343: fails from the draft's limit, applies the window through layer_types
    assert (vllm["fails_from"], vllm["positions"], vllm["window"]) == (limit, "fails past it", window)
    assert "CONTEXT_FAILS_PAST_LIMIT" in vllm["codes"] and "CONTEXT_WINDOW_APPLIED" in vllm["codes"]
    # SGLang: never reads the config's window (full attention), refuses to start past the draft's limit
    assert sglang["window"] is None and sglang["window_dropped"] and sglang["fails_from"] == limit
    assert "CONTEXT_REFUSES_START" in sglang["codes"]
    for e in (vllm, sglang):
        for b in e["bins"]:   # a round drafts K positions from its anchor: served while the last lies below the limit
            if b["hi"] - 1 + PARAMS["NUM_STEPS"] - 1 < limit:
                assert b["status"] == "served", b["label"]
            if b["lo"] >= limit:
                assert b["status"] == "not served" and "tau" not in b, b["label"]
        assert e["bins"][-1]["lo"] >= limit       # the copy's documents reach past its limit
    # full attention on the anchors SGLang serves: the no-limit curve's numbers exactly
    for b in sglang["bins"]:
        if "vs_reference" in b:
            assert (b["vs_reference"]["value"], b["vs_reference"]["low"], b["vs_reference"]["high"]) == (0, 0, 0)
    # the window vLLM applies costs acceptance beyond noise somewhere past it (measured), and every bin it names
    # loses by its own interval
    assert vllm["window_losses"]
    for b in vllm["bins"]:
        if b["label"] in vllm["window_losses"]:
            assert b["lo"] >= window and b["vs_reference"]["high"] < 0
    codes = [(c["code"], c["engine"]) for c in rule["changes"]]
    assert codes == [("RAISE_MAX_POSITIONS", f"vLLM {PARAMS['RULE_BUILDS']['vllm']}"),
                     ("REMOVE_WINDOW", f"vLLM {PARAMS['RULE_BUILDS']['vllm']}"),
                     ("RAISE_MAX_POSITIONS", f"SGLang {PARAMS['RULE_BUILDS']['sglang']}")]


def test_the_summary_words_follow_the_claims(nb):
    text = notebook_summary(NOTEBOOK)
    for name, t in nb["tracks"].items():
        first, last = t["bins"][0], t["bins"][-1]
        assert f"tau {fmt(first['tau'])} at 0-512 and {fmt(last['tau'])} at 1k-2k" in text, name
        assert f"On the {name} track ({t['documents']}; K = {t['num_steps']}, cpu float32, teacher-forced)" in text
    b = nb["tracks"]["bundled"]["bins"][1]
    assert (f"it falls beyond noise from 512 on (512-1k: {b['change']['value']:+.2f} [{b['change']['low']:+.2f}, "
            f"{b['change']['high']:+.2f}] from the bin before); past the 512-token sequences it was trained on it "
            "falls below its level inside them") in text
    assert "retrain on sequences as long as the prompts served" in text
    assert f"write max_position_embeddings {nb['tracks']['bundled']['target_max_positions']}" in text
    assert f"SGLang {PARAMS['RULE_BUILDS']['sglang']} drops the draft's window" in text and "PR #49343" in text


def test_the_parameters_cell_holds_the_models_documents_and_loading_defaults():
    assert_parameters_hold_the_literals(NOTEBOOKS / NOTEBOOK, set(PROFILES) | {"LlamaForCausalLM",
                                                                                "smollm2-135m-instruct"})
    assert PARAMS["TRACK"] == "bundled" and PARAMS["DOCUMENTS"] is None and PARAMS["MAX_LENGTH"] is None
    _, below = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
    loads = [c.source for c in below if "load_target(" in c.source]
    assert len(loads) == 2     # this track's target and the side tracks'
    for source in loads:
        for kw in ("dtype=DTYPE", "device_map=DEVICE_MAP", "trust_remote_code=TRUST_REMOTE_CODE"):
            assert kw in source, kw


@pytest.mark.notebook
@pytest.mark.timeout(600)
def test_the_smollm2_track_swaps_the_models_and_reads_chat_transcripts(real_target, bundled_models):
    """TRACK = "smollm2" (apply_track): the SmolLM2 target and its healthy draft; 2 documents of 1024 tokens and no
    side track keep this run short, and leave its curve unworded (fewer than MIN_DOCUMENTS), which it says."""
    claims, text, printed = run_with_parameters(NOTEBOOK, {"TRACK": "smollm2", "N_DOCUMENTS": 2, "MAX_LENGTH": 1024,
                                                           "SIDE_TRACKS": []})
    assert claims["track"] == "smollm2" and list(claims["tracks"]) == ["smollm2"]
    t = claims["tracks"]["smollm2"]
    assert t["kind"] == "chat" and t["length"] == 1024 and t["n_documents"] == 2
    assert (t["draft_max_positions"], t["target_max_positions"]) == (8192, 8192)
    assert [b["label"] for b in t["bins"]] == ["0-512", "512-1k"]
    assert claims["rule"]["engines"]["vllm"]["fails_from"] == PARAMS["COPY_MAX_POSITIONS"]
    assert "On the smollm2 track (2 x 1024-token chat transcripts" in text
    assert t["verdict"] == reading.UNWORDED and "MORE_DOCUMENTS" in t["changes"]
    assert f"the curve is unworded, too few documents to word (n = 2; at least {MIN_DOCUMENTS})" in text


def test_the_engine_table_says_what_happens_to_this_draft(nb):
    """Issue 35: the bundled draft declares no limit below its target's, so every engine runs it to every position:
    the table's 'this draft's positions' says so in every row, as the line under it, beside each engine's rule for a
    shorter draft (SGLang's: refuses to start)."""
    from helpers.notebooks import executed_notebook

    cell = next(c for c in executed_notebook(NOTEBOOK).cells if c.get("id") == "nb08-10")
    shown = "".join(o.get("data", {}).get("text/html", "") for o in cell.outputs)
    printed = "".join(o.get("text", "") for o in cell.outputs)
    assert "this draft&#x27;s positions" in shown or "this draft's positions" in shown
    assert "rule for a draft shorter than the target" in shown and ">positions<" not in shown
    assert shown.count(reading.RUNS_AS_IT_IS) == 3 == printed.count(reading.RUNS_AS_IT_IS)
    assert "refuses to start" in shown          # SGLang's rule, in its own column
