"""``eagle3lab context-curve`` on the bundled case and on both tracks' small models."""

import json

import pytest

from eagle3lab import bundled
from eagle3lab.app.cli import main

pytestmark = pytest.mark.usefixtures("bundled_models", "single_thread")


def test_bundled_case_prints_every_engines_curve(capsys):
    assert main(["context-curve", "--draft", str(bundled.DRAFT_CASE), "--max-length", "600", "--num-documents", "2",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "emulated" in out and "0-512" in out and "512-600" in out and "standard-library" in out
    assert all(name in out for name in ("vLLM", "SGLang", "speculators"))


def test_json_for_one_engine_build(capsys):
    assert main(["context-curve", "--engine", "vllm", "--engine-version", "0.24.0", "--max-length", "300",
                 "--num-documents", "2", "--device", "cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {r["curve"] for r in data["bins"]} == {"no limit (full attention, RoPE at every position)",
                                                  "vLLM 0.24.0 (emulated)"}
    assert data["rules"][0]["positions"] == "fails past it" and data["rules"][0]["fails_from"] is None
    assert all(r["status"] == "served" for r in data["bins"])


def test_engine_version_needs_an_engine(capsys):
    assert main(["context-curve", "--engine-version", "0.24.0"]) != 0
    assert "--engine-version: expected --engine" in capsys.readouterr().err


def test_smollm2_track_reads_chat_transcripts(real_target, capsys):
    draft = str(bundled.TRACK_MODELS["smollm2"]["healthy"])
    assert main(["context-curve", "--target", "smollm2-135m-instruct", "--draft", draft, "--engine", "sglang",
                 "--max-length", "520", "--num-documents", "1", "--num-steps", "2", "--device", "cpu", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "chat transcripts" in data["documents"]
    assert [r["bin"] for r in data["bins"]] == ["0-512", "512-520"] * 2
    assert data["rules"][0]["codes"] == []    # max_position_embeddings 8192 = the target's: no limit below it


def test_the_default_document_count_is_the_fewest_a_change_is_worded_from():
    from eagle3lab.analysis.context_curve import MIN_DOCUMENTS
    from eagle3lab.app.commands.context_curve import NUM_DOCUMENTS

    assert NUM_DOCUMENTS == MIN_DOCUMENTS


@pytest.mark.parametrize("flags,named", [(["--num-steps", "0"], "--num-steps"),
                                         (["--num-documents", "0"], "--num-documents"),
                                         (["--max-length", "1"], "--max-length"),
                                         (["--draft-window-size", "0"], "--draft-window-size"),
                                         (["--max-length", "5000"], "--max-length")])
def test_arguments_it_cannot_run_on_are_refused_by_flag(capsys, flags, named):
    """--max-length 5000 on the bundled 2048-token target: past the target's own context."""
    assert main(["context-curve", *flags, "--device", "cpu"]) != 0
    assert f"{named}: expected" in capsys.readouterr().err


def test_unworded_changes_print_their_document_count(capsys):
    assert main(["context-curve", "--engine", "vllm", "--max-length", "600", "--num-documents", "2",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "n=2" in out and "512-600: against the bin before, too few documents to word (n = 2; at least 10)" in out
    assert "beats" not in out and "loses" not in out
