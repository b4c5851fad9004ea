"""EAGLE 3.1 drafts (per-chunk fc_norm as SGLang/SpecForge/NeMo write them, one norm_before_fc as
speculators writes it, norm_output recycling) and drafts reading four aux states: their forwards
against a transformers-module reference, lossless decoding, checkpoints in each engine's key
layout, and the fc width checked against the aux count."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch
from family_cases import assert_matches_reference, edit_config, lossless, rekey, target, trained
from helpers.paths import REAL_CONFIGS
from safetensors.torch import load_file

from eagle3lab.errors import Eagle3LabError
from eagle3lab.findings import codes
from eagle3lab.models import checkpoint_formats as cf
from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft, save_draft
from eagle3lab.models.draft import Eagle3Draft

pytestmark = pytest.mark.usefixtures("single_thread")


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("name,profile", [("fc_norm", "sglang"), ("fc_norm", "speculators"),
                                          ("norm_before_fc", "vllm"), ("4-aux", "vllm")])
def test_forward_matches_the_transformers_reference(name, profile):
    draft = trained(name).under(profile)
    assert_matches_reference(draft)


def test_reference_follows_specforge_norm_output_false():
    """SpecForge 0.2.0 with norm_output false: lm_head reads the un-normed state (settings.final_norm false)."""
    trained_draft = trained("fc_norm")
    draft = Eagle3Draft(replace(trained_draft.config, norm_output=False), profile="specforge")
    draft.load_state_dict(trained_draft.state_dict())
    assert draft.settings.final_norm is False
    ids, aux, logits = assert_matches_reference(draft)
    assert (draft.under("sglang")(ids, aux).logits - logits).abs().max() > 1e-2   # the norm is in play


def test_fc_norm_norms_each_chunk_and_norm_before_fc_the_whole_input():
    """Stated exactly: fc_norm = concat(Norm_i(h_i)) (SGLang, vLLM, NeMo, speculators --fc-norm), so scaling one
    aux state changes nothing; norm_before_fc = Norm(concat(h_i)) (speculators --norm-before-fc, gpt-oss), so it does."""
    torch.manual_seed(4)
    ids, aux = torch.randint(0, 64, (1, 5)), torch.randn(1, 5, 96)
    louder = aux.clone()
    louder[..., 32:64] *= 10   # the second aux state, ten times larger
    per_chunk, whole = trained("fc_norm").under("sglang"), trained("norm_before_fc").under("vllm")
    torch.testing.assert_close(per_chunk(ids, louder).logits, per_chunk(ids, aux).logits, atol=1e-5, rtol=1e-5)
    assert (whole(ids, louder).logits - whole(ids, aux).logits).abs().max() > 1e-2
    # norm_output recycles the normed state where the engine says so; SpecForge 0.2.0 only norms lm_head's input
    out = per_chunk(ids, aux)
    torch.testing.assert_close(out.hidden, per_chunk.run_with_cache(ids, aux, names=["hook_normed_out"])[1]["hook_normed_out"])
    specforge = trained("fc_norm").under("specforge")
    assert not specforge.settings.recycle_postnorm and per_chunk.settings.recycle_postnorm


@pytest.mark.parametrize("name,settings", [("fc_norm", dict(num_steps=3)),
                                           ("norm_before_fc", dict(num_steps=3, topk=2, num_draft_tokens=6)),
                                           ("4-aux", dict(num_steps=3)),
                                           ("4-aux", dict(num_steps=3, topk=2, num_draft_tokens=6))])
def test_decodes_losslessly_with_mixed_acceptance(name, settings):
    accepted = lossless(trained(name), **settings)
    assert max(accepted) >= 2 and min(accepted) == 0


def test_fc_norm_checkpoints_in_the_sglang_nemo_and_legacy_layouts(tmp_path):
    draft = trained("fc_norm")
    written = save_draft(draft, tmp_path / "sglang", "sglang")
    config = json.loads((tmp_path / "sglang" / "config.json").read_text())
    assert config["fc_norm"] is True and config["norm_output"] is True
    assert "SERVED_RECYCLE_DIFFERS" not in codes(written.warnings)   # SGLang recycles the normed state too
    keys = set(load_file(str(tmp_path / "sglang" / "model.safetensors")))
    assert {"fc_norm.0.weight", "fc_norm.1.weight", "fc_norm.2.weight", "midlayer.hidden_norm.weight"} <= keys
    loaded = load_draft(tmp_path / "sglang", target=target(), device="cpu")
    _same_weights(draft, loaded)
    # read as SpecForge 0.2.0 trains this format: norm_output only norms lm_head's input, the pre-norm state is
    # recycled, while SGLang recycles the normed one (SpecForge#879 aligns them after 0.2.0)
    assert not loaded.settings.recycle_postnorm and loaded.under("sglang").settings.recycle_postnorm
    again = save_draft(loaded, tmp_path / "again", "sglang")
    assert [(w.code, w.text.split(":")[0]) for w in again.warnings] == [("STATED_FLAG_CHANGED", "norm_output")]   # the stated flag's change is said
    save_draft(load_draft(tmp_path / "again", target=target(), device="cpu"), tmp_path / "third", "sglang")
    assert json.loads((tmp_path / "third" / "config.json").read_text()) == json.loads(
        (tmp_path / "again" / "config.json").read_text())
    first, second = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("sglang", "third"))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert lossless(loaded.under("sglang"), n_prompts=1, num_steps=3)
    # NeMo Automodel writes model.fc_norm.{i}.weight; SGLang's legacy names are aux_norm_low/mid/high
    rekey(tmp_path / "sglang", lambda k: "model." + k if k.startswith("fc_norm.") else k)
    _same_weights(draft, load_draft(tmp_path / "sglang", target=target(), device="cpu"))
    legacy = {"model.fc_norm.0.": "aux_norm_low.", "model.fc_norm.1.": "aux_norm_mid.", "model.fc_norm.2.": "aux_norm_high."}
    rekey(tmp_path / "sglang", lambda k: next((k.replace(a, b) for a, b in legacy.items() if k.startswith(a)), k))
    assert "aux_norm_mid.weight" in load_file(str(tmp_path / "sglang" / "model.safetensors"))
    _same_weights(draft, load_draft(tmp_path / "sglang", target=target(), device="cpu"))


def test_norm_before_fc_checkpoint_in_the_speculators_layout(tmp_path):
    draft = trained("norm_before_fc")
    save_draft(draft, tmp_path / "spec", "speculators")
    config = json.loads((tmp_path / "spec" / "config.json").read_text())
    assert config["norm_before_fc"] is True and config["fc_norm"] is False
    assert "input_norm.weight" in load_file(str(tmp_path / "spec" / "model.safetensors"))
    loaded = load_draft(tmp_path / "spec", device="cpu")
    _same_weights(draft, loaded)
    assert loaded.settings.norm_before_fc and not loaded.under("sglang-legacy").settings.norm_before_fc
    save_draft(loaded, tmp_path / "again", "speculators")
    assert json.loads((tmp_path / "again" / "config.json").read_text()) == config


def test_four_aux_draft_loads_with_its_ids_and_is_served_where_fc_can_read_four(tmp_path):
    draft = trained("4-aux")
    assert draft.config.num_aux == 4 and draft.fc.weight.shape == (32, 128) and draft.aux_resid == (1, 2, 3, 5)
    written = save_draft(draft, tmp_path / "spec", "speculators")
    config = json.loads((tmp_path / "spec" / "config.json").read_text())
    assert config["eagle_aux_hidden_state_layer_ids"] == [1, 2, 3, 5]
    # vLLM's llama_eagle3.py sizes fc from num_aux_hidden_states (transformer_layer_config reaches it), never from
    # the top-level ids (vllm#54526): written so the checkpoint loads there
    assert config["transformer_layer_config"]["num_aux_hidden_states"] == 4
    assert "NOT_SERVABLE" not in codes(written.warnings)
    loaded = load_draft(tmp_path / "spec", target=target(), device="cpu")
    assert loaded.config.num_aux == 4 and loaded.aux_resid == (1, 2, 3, 5)
    _same_weights(draft, loaded)
    serving = {n: r.problems for n, r in inspect_checkpoint(tmp_path / "spec", target=target().model).serving.items()}
    assert {n for n, p in serving.items() if not p} == {"speculators", "vllm", "sglang"}
    assert all("builds fc for 3 aux states" in serving[n][0] for n in ("vllm-legacy", "sglang-legacy", "specforge"))
    # without the count, vLLM builds fc for 3 and the load fails: said, naming the issue
    edit_config(tmp_path / "spec", lambda c: c["transformer_layer_config"].pop("num_aux_hidden_states"))
    assert "vllm#54526" in inspect_checkpoint(tmp_path / "spec").serving["vllm"].problems[0]
    # the sglang format: eagle_config ids, SGLang reads the count from them
    save_draft(draft, tmp_path / "sglang", "sglang", num_target_layers=target().num_layers)
    back = load_draft(tmp_path / "sglang", target=target(), device="cpu")
    assert back.config.num_aux == 4 and back.aux_resid == (1, 2, 3, 5)
    # SpecForge, this format's trainer, builds fc for 3: the draft runs as SGLang serves it, and that is said
    assert back.profile.name == "sglang"
    aux = [w.text for w in back.load_report.warnings if w.code == "PROFILE_PASSED_OVER"]
    assert len(aux) == 1 and aux[0].startswith("run as SGLang") and "SpecForge" in aux[0] and "aux states" in aux[0]


def test_aux_count_is_read_by_one_rule_for_inspect_and_loading():
    """num_aux_hidden_states lives in the layer config: speculators' transformer_layer_config (all that vLLM passes to
    the model), else the top level of a flat config; the family description and the loader read it alike."""
    from eagle3lab.models.draft_family import describe_draft_config

    raw = json.loads((REAL_CONFIGS / "vllm-project__speculators__llama3.1-8b-eagle3-4aux__REBUILT.json").read_text())
    raw.pop("eagle_aux_hidden_state_layer_ids")
    cases = [(raw, 4, {"transformer_layer_config": {**raw["transformer_layer_config"], "num_aux_hidden_states": 4}}),
             (raw, 3, {"num_aux_hidden_states": 4})]   # a speculators config's top level reaches no engine
    flat = json.loads((REAL_CONFIGS / "sgl-project__SpecForge__llama3-8B-eagle3.json").read_text())
    flat.pop("eagle_config", None)
    cases.append((flat, 4, {"num_aux_hidden_states": 4}))
    for base, expected, change in cases:
        config = {**base, **change}
        fmt = cf.classify_config(config)[0]
        described = describe_draft_config(config)
        assert described.num_aux == cf.config_to_draft(config, fmt, "cfg")[0].num_aux == expected, change
        if expected == 4:
            assert "num_aux_hidden_states" in described.num_aux_from


def test_fc_width_mismatch_names_the_key_expected_and_found(tmp_path):
    save_draft(trained("4-aux"), tmp_path / "d", "speculators")
    edit_config(tmp_path / "d", lambda c: (c.update(eagle_aux_hidden_state_layer_ids=[1, 3, 5]),
                                           c["transformer_layer_config"].pop("num_aux_hidden_states")))
    with pytest.raises(Eagle3LabError, match=r"key 'fc.weight': expected 96 input columns \(3 aux states, from the 3 ids "
                                             r"at eagle_aux_hidden_state_layer_ids, x target_hidden_size 32\), found "
                                             r"shape \[32, 128\] \(128 columns\)"):
        load_draft(tmp_path / "d", device="cpu")
    edit_config(tmp_path / "d", lambda c: c["transformer_layer_config"].update(num_aux_hidden_states=5))
    with pytest.raises(Eagle3LabError, match=r"key 'transformer_layer_config.num_aux_hidden_states': expected a positive "
                                             r"integer equal to the "
                                             r"3 ids at eagle_aux_hidden_state_layer_ids, found 5"):
        load_draft(tmp_path / "d", device="cpu")


def test_real_four_aux_and_eagle31_configs_read_their_aux_count_and_norms():
    four = json.loads((REAL_CONFIGS / "vllm-project__speculators__llama3.1-8b-eagle3-4aux__REBUILT.json").read_text())
    cfg, _ = cf.config_to_draft(four, "speculators", "4-aux")
    assert (cfg.num_aux, cfg.fc_width, cfg.aux_layer_ids) == (4, 4 * 4096, (2, 10, 18, 29))
    e31 = json.loads((REAL_CONFIGS / "sgl-project__SpecForge__qwen3-30B-A3B-eagle3.1.json").read_text())
    cfg, _ = cf.config_to_draft(e31, "sglang", "eagle3.1")
    assert (cfg.fc_norm, cfg.norm_output, cfg.norm_before_fc, cfg.num_aux) == (True, True, None, 3)
    with torch.device("meta"):
        shapes = {k: tuple(v.shape) for k, v in Eagle3Draft(cfg, profile="sglang").state_dict().items()}
    assert [shapes[f"fc_norm.{i}.weight"] for i in range(3)] == [(2048,)] * 3 and "input_norm.weight" not in shapes
