"""Notebook 07's claims (the chat-template case on the real track), asserted from the notebook's own run."""

from __future__ import annotations

import pytest
from helpers.notebooks import notebook_claims, notebook_summary, run_with_parameters
from helpers.parameters import assert_parameters_hold_the_literals, parameters_and_code_below

from eagle3lab.app.workbook import NOTEBOOKS
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.models.checkpoint import load_draft

NOTEBOOK = "07_chat_template.ipynb"


@pytest.fixture(scope="module")
def nb(real_target, bundled_models):
    return notebook_claims(NOTEBOOK)


def test_every_output_is_lossless_and_tau_is_a_real_accept_length(nb):
    assert nb["lossless"] is True and nb["prompts"] >= 3
    for key in ("tau_chat_chat", "tau_chat_raw", "tau_raw_draft_chat", "tau_raw_draft_raw"):
        assert 1.0 <= nb[key] <= 3.0, key                      # a 2-step chain accepts at most 2 + the bonus
    for key, tau in (("chat_interval", "tau_chat_chat"), ("raw_interval", "tau_chat_raw")):
        c = nb[key]           # stored whole: a session keeps value, low, high, level and units together
        assert c["value"] == nb[tau] and c["low"] <= c["value"] <= c["high"], key
        assert (c["level"], c["units"]) == (0.95, nb["prompts"]), key


AGAINST = {"beats": "beats", "loses": "loses to", "within noise": "is within noise of"}


def signed(c):
    return f"{c['value']:+.2f} [{c['low']:+.2f}, {c['high']:+.2f}]"


def test_both_gaps_are_paired_differences_worded_by_their_own_interval(nb):
    """The renderings' gap pairs each request with itself (the same requests in both sweeps), the drafts' gap
    both drafts on each request of one sweep: "beats" / "loses" only when the paired interval excludes 0."""
    text = notebook_summary(NOTEBOOK)
    for key, point in (("gap", nb["tau_chat_chat"] - nb["tau_chat_raw"]),
                       ("drafts_gap", nb["tau_chat_chat"] - nb["tau_raw_draft_chat"])):
        g = nb[key]
        assert g["value"] == pytest.approx(point), key     # a paired difference of ratios of sums: the same point
        assert g["low"] <= g["value"] <= g["high"] and (g["level"], g["units"]) == (0.95, nb["prompts"]), key
        assert g["word"] == ("beats" if g["low"] > 0 else "loses" if g["high"] < 0 else "within noise"), key
    assert (f"rendered with the chat template it {AGAINST[nb['gap']['word']]} the raw rendering "
            f"({signed(nb['gap'])}, paired over the same requests)") in text, text
    assert (f"on chat-templated requests the chat-trained draft {AGAINST[nb['drafts_gap']['word']]} it "
            f"({signed(nb['drafts_gap'])}, paired over the same requests)") in text, text
    assert "leads it by" not in text and "beyond both intervals" not in text


def test_the_chat_trained_draft_is_at_least_as_good_on_the_requests_it_was_trained_for(nb):
    # measured finding on SmolLM2 (its card: 1.69 vs 1.47 at chain 2, 6 prompts): trained on this kind of
    # request, the chat draft beats the raw-text draft on it, whichever way it is rendered
    assert nb["tau_chat_chat"] > nb["tau_raw_draft_chat"] and nb["tau_chat_raw"] > nb["tau_raw_draft_raw"]


def test_the_parameters_cell_holds_the_models_engine_and_loading_defaults():
    """DTYPE / DEVICE_MAP / TRUST_REMOTE_CODE at the loading defaults, the dump and config-only parameters off, and
    nothing below the parameters cell names a model, an architecture, ids, an engine or a chain length."""
    assert_parameters_hold_the_literals(NOTEBOOKS / NOTEBOOK, set(PROFILES) | {"LlamaForCausalLM",
                                                                                "smollm2-135m-instruct"})
    params, below = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
    for key in ("DUMP_DIR", "TARGET_HEAD", "DUMP_LAYER_IDS", "NUM_LAYERS", "ARCH"):
        assert params[key] is None, key
    assert params["SERVING_ENGINE"] in PROFILES
    for cell in below:   # the loading wired through the parameters, as notebook 05 does
        if "open_target(" in cell.source:
            for kw in ("dtype=DTYPE", "device_map=DEVICE_MAP", "trust_remote_code=TRUST_REMOTE_CODE"):
                assert kw in cell.source, kw
            assert cell.source.count("dtype=DTYPE") == 3     # the target and both drafts
            break
    else:
        raise AssertionError("no cell opens the target through open_target")


def test_the_speed_over_generate_carries_its_interval_and_word(nb):
    assert len(nb["vs_generate"]) == 4 and nb["mode"] == "live" and nb["skipped"] == []
    for name, g in nb["vs_generate"].items():
        assert g["low"] <= g["value"] <= g["high"] and g["units"] == nb["prompts"], name
        assert g["word"] == ("faster" if g["low"] > 1 else "slower" if g["high"] < 1 else "within noise"), name


@pytest.mark.notebook
@pytest.mark.timeout(600)
def test_config_only_mode_says_what_the_engine_feeds_and_scores_nothing(bundled_models):
    params, _ = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
    claims, text, printed = run_with_parameters(NOTEBOOK, {"TARGET": "/nonexistent/target", "NUM_LAYERS": 30,
                                                           "ARCH": "LlamaForCausalLM"})
    assert claims["mode"] == "config-only" and (claims["num_layers"], claims["arch"]) == (30, "LlamaForCausalLM")
    for label, draft in (("chat-trained draft", params["CHAT_DRAFT"]), ("raw-text draft", params["RAW_DRAFT"])):
        d = load_draft(NOTEBOOKS / draft, num_target_layers=30, require_embedding=False)
        assert claims["fed"][label] == list(d.under(params["SERVING_ENGINE"]).aux_resid), label
    assert "teacher_forced" not in claims and "tau_chat_chat" not in claims
    for what in ("section 1, the two renderings", "section 2, both drafts decoding", "section 3, both drafts teacher-forced"):
        assert any(s.startswith(what) for s in claims["skipped"]), what
    for what in claims["skipped"]:
        assert f"{what}: needs the loaded target; skipped (config-only mode" in printed, what
    assert text.startswith("Config-only mode (a LlamaForCausalLM (N = 30, config only);")
    assert text.endswith("Skipped, for want of the loaded target: " + "; ".join(claims["skipped"]) + ".")


@pytest.mark.notebook
@pytest.mark.timeout(900)
def test_dump_mode_scores_both_drafts_teacher_forced_on_the_dump(real_target, bundled_models, tmp_path):
    """DUMP_DIR + TARGET_HEAD: the target's states for the chat-templated requests and its greedy answers; both
    drafts are scored teacher-forced on them, equal to the same scores on the live target's states (within 1e-6),
    and the renderings' comparison, which needs the target, says why it skips."""
    from eagle3lab import bundled, chat_prompt, heldout_chat_requests
    from eagle3lab.decoding.evaluate import greedy_dataset
    from eagle3lab.models.hidden_dump import dump_hidden_states
    from eagle3lab.models.state_bank import capture_bank
    from eagle3lab.readings.nb07_chat_template import teacher_forced_drafts

    params, _ = parameters_and_code_below(NOTEBOOKS / NOTEBOOK)
    drafts = {label: load_draft(NOTEBOOKS / params[key], target=real_target, device="cpu")
              for label, key in (("chat-trained draft", "CHAT_DRAFT"), ("raw-text draft", "RAW_DRAFT"))}
    prompts = [chat_prompt(real_target.tokenizer, r) for r in heldout_chat_requests(params["N_PROMPTS"])]
    seqs, lens = greedy_dataset(real_target, prompts, max_new_tokens=params["MAX_NEW_TOKENS"])
    n = real_target.num_layers
    points = sorted({n, *(k for d in drafts.values() for k in d.aux_resid)})
    dump_hidden_states(real_target, seqs, tmp_path / "dump", points=points, prompt_lens=lens, greedy=True,
                       batch_size=2, progress=False)
    head = bundled.REAL_TARGETS[params["TARGET"]]
    claims, text, printed = run_with_parameters(NOTEBOOK, {"TARGET": "/nonexistent/target",
                                                           "DUMP_DIR": str(tmp_path / "dump"), "TARGET_HEAD": str(head)})
    assert claims["mode"] == "dump" and claims["num_layers"] == n
    assert "tau_chat_chat" not in claims and "vs_generate" not in claims     # nothing decoded, nothing timed
    for what in ("section 1, the two renderings", "section 2, both drafts decoding"):
        assert any(s.startswith(what) for s in claims["skipped"]), what
        assert f"{what}" in printed and "skipped (dump mode" in printed
    assert not any(s.startswith("section 3") for s in claims["skipped"])
    live = teacher_forced_drafts(capture_bank(real_target, seqs, lens), drafts, params["NUM_STEPS"])
    tf = claims["teacher_forced"]
    assert tf["prompts"] == params["N_PROMPTS"] and tf["anchors"] == live.anchors
    for label, iv in live.tau.items():
        for bound in ("value", "low", "high"):
            assert tf["tau"][label][bound] == pytest.approx(getattr(iv, bound), abs=1e-6), (label, bound)
    assert tf["diff"]["value"] == pytest.approx(live.diff.value, abs=1e-6)
    d = tf["diff"]
    assert tf["word"] == ("beats" if d["low"] > 0 else "loses" if d["high"] < 0 else "within noise")
    assert f"Teacher-forced on the dump's {params['N_PROMPTS']} prompts ({tf['anchors']} anchors" in text
    # scored from each sample's prompt_len on, the target's greedy answers (the dump states both), with each
    # draft's own wiring, named
    assert tf["scored_from"] == "the greedy answers" and tf["prompt_lens_stated"] and tf["continuation_greedy"]
    assert "Scored from each sample's prompt_len on: the target's greedy answers" in text
    assert tf["wiring"] == {label: list(d.aux_resid) for label, d in drafts.items()} and tf["scored_as"] == "own wiring"
    assert "each draft with its own wiring and settings: the chat-trained draft resid" in text
    against = {"beats": "beats", "loses": "loses to", "within noise": "is within noise of"}[tf["word"]]
    assert (f"the chat-trained draft (tau {tf['tau']['chat-trained draft']['value']:.2f} "
            f"[{tf['tau']['chat-trained draft']['low']:.2f}, {tf['tau']['chat-trained draft']['high']:.2f}]) "
            f"{against} the raw-text draft") in text
