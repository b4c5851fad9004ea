"""`flags`: a draft's sliding window as its trainer ran it vs as the launch runs it (DRAFT_WINDOW).

SGLang applies only --speculative-draft-window-size (0.5.12 on), never the draft config's window; vLLM applies the
config's window only on the layers layer_types names. The finding is draft_checks.window_problem's, the rule inspect
and doctor use; the trainer follows the draft config's format. Every draft config here is written by the test.
"""

from __future__ import annotations

import json

import pytest

from eagle3lab.engines.config_view import draft_format, read_window
from eagle3lab.engines.draft_checks import window_problem
from eagle3lab.engines.flags import resolve_flags
from eagle3lab.engines.profiles import for_build
from eagle3lab.findings import Severity

SGL = "python -m sglang.launch_server --model-path T --speculative-algorithm EAGLE3 --speculative-draft-model-path {d}"


def _layer(window: int | None, layer_types: list[str] | None) -> dict:
    layer = {"num_hidden_layers": 1, "hidden_size": 64, "max_position_embeddings": 4096}
    if window is not None:
        layer["sliding_window"] = window
    if layer_types is not None:
        layer["layer_types"] = layer_types
    return layer


def speculators_draft(folder, window=None, layer_types=None):
    """A speculators eagle3 config (trained by speculators, which slides the layers layer_types names)."""
    cfg = {"speculators_model_type": "eagle3", "architectures": ["Eagle3Speculator"], "draft_vocab_size": 100,
           "speculators_config": {"algorithm": "eagle3", "verifier": {"name_or_path": "T",
                                                                      "architectures": ["LlamaForCausalLM"]},
                                  "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 3}]},
           "transformer_layer_config": _layer(window, layer_types)}
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def specforge_draft(folder, window=None, layer_types=None):
    """A flat SGLang/SpecForge config (SpecForge 0.2.0 trains full attention, whatever the config says)."""
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "draft_vocab_size": 100, **_layer(window, layer_types)}
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def sglang(folder, extra: str = "", **kw):
    return resolve_flags("sglang", SGL.format(d=folder) + extra, **kw)


def vllm(folder, **kw):
    spec = json.dumps({"method": "eagle3", "model": str(folder), "num_speculative_tokens": 3})
    return resolve_flags("vllm", f"vllm serve T --speculative-config '{spec}'", **kw)


def test_the_trainer_follows_the_config_format(tmp_path):
    spec = json.loads((speculators_draft(tmp_path / "s") / "config.json").read_text())
    flat = json.loads((specforge_draft(tmp_path / "f") / "config.json").read_text())
    assert (draft_format(spec), draft_format(flat)) == ("speculators", "sglang")
    assert draft_format({"speculators_config": {}}) == "speculators"


@pytest.mark.parametrize("window", [2048, 512])
def test_sglang_without_the_flag_runs_a_trained_window_as_full_attention(tmp_path, window):
    draft = speculators_draft(tmp_path / "d", window, ["sliding_attention"])
    found = sglang(draft).finding("DRAFT_WINDOW")
    assert found is not None and found.severity == Severity.WARNING
    assert found.fix == f"Launch with --speculative-draft-window-size {window}."
    assert f"a {window}-token window on layer(s) [0]" in found.text and "served" in found.text
    assert "from 0.5.12: applied only through the launch flag" in found.engine_versions
    # the same problem inspect and doctor raise: window_problem's, not a second rule
    same = window_problem(read_window(_layer(window, ["sliding_attention"])), 1, "speculators", for_build("sglang"))
    assert found.fix == same.fix and found.text == f"{same.title}: {same.text}"


def test_sglang_with_the_trained_window_has_no_finding(tmp_path):
    draft = speculators_draft(tmp_path / "d", 2048, ["sliding_attention"])
    assert sglang(draft, " --speculative-draft-window-size 2048").finding("DRAFT_WINDOW") is None


def test_sglang_with_another_window_is_told_the_trained_one(tmp_path):
    draft = speculators_draft(tmp_path / "d", 2048, ["sliding_attention"])
    res = sglang(draft, " --speculative-draft-window-size 1024")
    found = res.finding("DRAFT_WINDOW")
    assert found.fix == "Launch with --speculative-draft-window-size 2048."
    assert "a 1024-token window on layer(s) [0]" in found.text
    assert found.where == "draft_window_size" and res.effective["draft_window_size"] == 1024
    assert res.table().loc["draft_window_size", "why"] == "DRAFT_WINDOW"


def test_sglang_before_0_5_12_has_no_draft_window_at_all(tmp_path):
    draft = speculators_draft(tmp_path / "d", 2048, ["sliding_attention"])
    found = sglang(draft, engine_version="0.5.11").finding("DRAFT_WINDOW")
    assert found.fix.startswith("Serve with SGLang >= 0.5.12 and --speculative-draft-window-size 2048")
    assert sglang(draft, engine_version="0.5.12").finding("DRAFT_WINDOW").fix == \
        "Launch with --speculative-draft-window-size 2048."


def test_a_specforge_draft_trained_without_a_window(tmp_path):
    """SpecForge trains full attention: the config's window is inert on SGLang, a flag adds one; vLLM applies it."""
    draft = specforge_draft(tmp_path / "d", 2048, ["sliding_attention"])
    assert sglang(draft).finding("DRAFT_WINDOW") is None
    assert sglang(draft, " --speculative-draft-window-size 2048").finding("DRAFT_WINDOW").fix == \
        "Launch without --speculative-draft-window-size."
    found = vllm(draft).finding("DRAFT_WINDOW")
    assert found.fix.startswith("Remove sliding_window / layer_types from the draft's config")
    assert "a 2048-token window on layer(s) [0]" in found.text and found.rule.startswith("vLLM: ")


def test_vllm_runs_a_speculators_window_as_trained(tmp_path):
    draft = speculators_draft(tmp_path / "d", 2048, ["sliding_attention"])
    assert vllm(draft).finding("DRAFT_WINDOW") is None
    assert vllm(draft, engine_version="0.32.0", engine_platform="cpu+triton").finding("DRAFT_WINDOW") is None


@pytest.mark.parametrize("window, layer_types", [(None, None), (None, ["sliding_attention"]),
                                                 (2048, None), (2048, ["full_attention"])])
def test_no_window_where_the_trainer_slides_gives_nothing(tmp_path, window, layer_types):
    """No sliding_window, or a window no layer_types entry applies: speculators trained full attention, and so
    SGLang without the flag and vLLM run what was trained."""
    for make in (speculators_draft, specforge_draft):
        draft = make(tmp_path / make.__name__, window, layer_types)
        assert sglang(draft).finding("DRAFT_WINDOW") is None
        assert vllm(draft).finding("DRAFT_WINDOW") is None


def test_no_draft_config_gives_nothing():
    res = resolve_flags("sglang", SGL.format(d="/nonexistent/draft"))
    assert res.finding("DRAFT_WINDOW") is None
