"""Notebook 06's claims, on the bundled models: the case file's investigation reaches the truth.

The claims are relations with margins (the drafts can be retrained); timing claims are not
asserted here (they belong to benchmarks), only acceptance and what each engine is fed.
"""

from __future__ import annotations

import pytest
from helpers.notebooks import SPEED_WORDS, notebook_claims, notebook_summary

import eagle3lab
from eagle3lab import bundled
from eagle3lab.analysis.cost_model import verdict
from eagle3lab.engines.flags import resolve_flags
from eagle3lab.engines.layer_ids import resolve_aux_layers, to_engine_ids
from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft, save_draft

LAUNCH = ("python -m sglang.launch_server --model-path data/models/target --speculative-draft-model-path "
          "data/models/draft-case --speculative-algorithm EAGLE3 --speculative-num-steps 1 "
          "--speculative-eagle-topk 1 --speculative-num-draft-tokens 16")


@pytest.fixture(scope="module")
def nb(bundled_models):
    return notebook_claims("06_case_file.ipynb")


def test_step1_flags_cap_accept_length_at_two(bundled_models):
    flags = resolve_flags("sglang", LAUNCH)
    assert flags.effective["num_draft_tokens"] == 2 and flags.max_accept_length == 2
    assert "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED" in flags.codes()
    assert flags.effective["aux_resid"] == [3, 7, 11]


def test_step2_engines_feed_this_checkpoint_different_states(bundled_models):
    report = inspect_checkpoint(bundled.DRAFT_CASE, num_target_layers=12)["aux_ids"]
    assert report["as_written"] == [2, 6, 10]
    assert report["by_engine"]["sglang"]["resid"] == [3, 7, 11]
    assert report["by_engine"]["vllm"]["resid"] == [2, 6, 9] and report["by_engine"]["vllm"]["defaulted"]


def test_step0_the_symptom_is_measured_and_lossless(nb):
    assert nb["lossless"] and nb["fixed_lossless"]
    assert nb["launched_verdict"] == verdict(nb["launched_speedup"], 1.0)
    text = notebook_summary("06_case_file.ipynb")       # the words follow the number the run measured
    assert f"**{SPEED_WORDS[nb['launched_verdict']]}" in text and f"({nb['launched_speedup']:.2f}x as launched" in text
    assert nb["max_accept_length"] == 2 and nb["tau_launched"] <= 2 and nb["tau_retry"] < 1.5


def test_step3_the_weights_pick_the_trained_wiring_and_residual(nb):
    assert nb["best"] == bundled.recorded_resid(bundled.DRAFT_CASE) == [0, 3, 7] and nb["best_rule"] is True
    assert nb["served"] == [3, 7, 11]
    assert nb["tau_as_served"] < 1.5, "served as SGLang runs it, the case draft must be nearly useless"
    assert nb["tau_best"] > nb["tau_as_served"] + 1.0


def test_step4_sglang_feeds_the_trained_wiring_only_from_0_5_22_and_vllm_serves_the_whole_fix(nb, bundled_models,
                                                                                                tmp_path):
    # the team's fix, id -1, is loop index 0, where SGLang's llama.py adds a residual that is still None up to 0.5.21
    with pytest.raises(ValueError, match="resid\\[0\\]"):
        to_engine_ids("sglang", [0, 3, 7], 12, arch="LlamaForCausalLM", engine_version="0.5.21")
    old = resolve_aux_layers("sglang", [-1, 2, 6], 12, arch="LlamaForCausalLM", engine_version="0.5.21")
    assert old.fatal and "llama.py" in old.fatal[0] and "TypeError" in old.fatal[0]
    assert "2025 main" in old.fatal[0] and "0.5.4-0.5.21" in old.fatal[0]          # the versions the text names
    # from 0.5.22 (the layer boundary) id -1 feeds resid[0]; 0.5.23 is the newest read and run on CPU
    for version in ("0.5.22", "0.5.23", None):
        assert to_engine_ids("sglang", [0, 3, 7], 12, arch="LlamaForCausalLM", engine_version=version) == [-1, 2, 6]
        new = resolve_aux_layers("sglang", [-1, 2, 6], 12, arch="LlamaForCausalLM", engine_version=version)
        assert not new.fatal and list(new.resid) == [0, 3, 7] and not new.unconfirmed
    assert "0.5.23 run on CPU" in new.notes[0].text
    qwen = resolve_aux_layers("sglang", [-1, 2, 6], 12, arch="Qwen3ForCausalLM", engine_version="0.5.4")
    assert not qwen.fatal and list(qwen.resid) == [0, 3, 7]           # qwen2.py: every release read
    # the notebook's table: its default build cannot, the newest can, and the words follow
    assert (nb["sglang_version"], nb["sglang_newest"], nb["team_fix"]) == ("0.5.21", "0.5.23", [-1, 2, 6])
    assert nb["sglang_ids"] == {"0.5.21": None, "0.5.23": [-1, 2, 6]}
    assert nb["team_fix_breaks"] == {"0.5.21": True, "0.5.23": False}
    text = notebook_summary("06_case_file.ipynb")
    assert ("SGLang 0.5.21 cannot feed that wiring (ids [-1, 2, 6] raise a TypeError); "
            "SGLang 0.5.23 feeds that wiring with ids [-1, 2, 6]") in text
    # ... but SGLang ignores norm_before_residual in every version read: the wiring alone is half the fix
    assert nb["tau_sglang_wiring"] < nb["tau_best"] - 0.5
    target = eagle3lab.load_target(bundled.TARGET, device="cpu")
    draft = load_draft(bundled.DRAFT_CASE, target=target, device="cpu")
    assert draft.under("sglang").settings.norm_before_residual is False
    assert draft.under("sglang-legacy").settings.norm_before_residual is False
    fixed = draft.rewired(aux_resid=(0, 3, 7), norm_before_residual=True)
    written = save_draft(fixed, tmp_path / "fixed", "speculators", num_target_layers=12)
    assert written["aux_ids_written"] == [0, 3, 7] == nb["ids_written"] and written["flags_written"]["norm_before_residual"]
    served = load_draft(tmp_path / "fixed", target=target, device="cpu", profile="vllm")
    assert served.aux_resid == (0, 3, 7) and served.settings.norm_before_residual


def test_step5_the_fix_restores_acceptance(nb):
    assert nb["tau_fixed"] > nb["tau_launched"] + 0.8 and nb["tau_fixed"] > 2.5


def test_step5b_the_real_vllm_serves_the_fix_as_emulated(nb):
    """Under CI the vLLM environment exists (make engines): the fixed checkpoint, served by the real vLLM,
    gives exactly the counters eagle3lab's emulation predicts for that build, and the summary says so."""
    from helpers.paths import vllm_python

    vllm_python()    # skips without .venv-vllm locally, fails under CI=true
    assert nb["real_vllm_verdict"] == "AGREES", nb["real_vllm_verdict"]
    assert nb["real_vllm_tau"] > nb["tau_launched"] + 0.8
    summary = notebook_summary("06_case_file.ipynb")
    assert f"tau {nb['real_vllm_tau']:.2f}, its counters equal to eagle3lab's emulation" in summary
