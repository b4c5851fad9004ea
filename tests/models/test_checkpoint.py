"""Checkpoint families: identical logits from every format, id translation, the embedding from
the target, and one test per bad input (the message names file, key, expected and found)."""

from __future__ import annotations

import json
import pickle

import pytest
import torch
from safetensors.torch import load_file, save_file

from eagle3lab.engines.layer_ids import resolve_aux_layers
from eagle3lab.errors import Eagle3LabError
from eagle3lab.findings import Severity, codes
from eagle3lab.models.checkpoint import convert_draft, load_draft, save_draft
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.vocab import build_vocab_map

N = 8  # target layers


def make_draft(ids=None, hidden=16, target_hidden=24, vocab=50, seed=0, **flags) -> Eagle3Draft:
    cfg = DraftConfig(hidden_size=hidden, target_hidden_size=target_hidden, intermediate_size=32,
                      num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab, draft_vocab_size=20,
                      aux_layer_ids=ids, **flags)
    torch.manual_seed(seed)
    draft = Eagle3Draft(cfg, profile="speculators", fmt="speculators")
    with torch.no_grad():
        for p in draft.parameters():
            p.normal_(0, 0.3)
        d2t, t2d = build_vocab_map(torch.randperm(vocab)[:20], vocab)
        draft.d2t.copy_(d2t)
        draft.t2d.copy_(t2d)
    draft.num_target_layers = N
    return draft


def inputs(draft, T=5):
    torch.manual_seed(7)
    c = draft.config
    return torch.randint(0, c.vocab_size, (2, T)), torch.randn(2, T, c.num_aux * c.target_hidden_size)


def edit(folder, cfg=None, weights=None):
    """Rewrite a saved checkpoint: ``cfg(dict)`` and ``weights(dict)`` mutate in place."""
    if cfg:
        data = json.loads((folder / "config.json").read_text())
        cfg(data)
        (folder / "config.json").write_text(json.dumps(data))
    if weights:
        sd = load_file(str(folder / "model.safetensors"))
        weights(sd)
        save_file(sd, str(folder / "model.safetensors"))
    return folder


@pytest.fixture
def saved(tmp_path):
    draft = make_draft(ids=(1, 3, 5))
    save_draft(draft, tmp_path / "d", "speculators")
    return draft, tmp_path / "d"


# ---------------------------------------------------------------------------- round trips

@pytest.mark.parametrize("ids", [None, (2, 4, 5)])  # (2, 4, 5) = EAGLE's hard-coded resid[2, N//2, N-3]
def test_same_weights_in_each_format_load_to_identical_logits(tmp_path, ids):
    draft = make_draft(ids=ids)
    ids_in, aux = inputs(draft)
    expected = draft(ids_in, aux).logits
    for fmt in ("speculators", "sglang", "eagle"):
        out = save_draft(draft, tmp_path / fmt, fmt)
        for profile in (None, "vllm"):
            loaded = load_draft(tmp_path / fmt, profile=profile, num_target_layers=N)
            assert loaded.format == fmt
            assert torch.equal(loaded(ids_in, aux).logits, expected), (fmt, profile)
            assert loaded.aux_resid == (2, 4, 5)                      # the same target states
            # vLLM reads only the top-level key: SpecForge's eagle_config ids are ignored and its
            # default resid[2, N//2, N-3] is used, which here happens to be what they meant
            ignored = profile == "vllm" and fmt == "sglang" and ids is not None
            assert loaded.aux_resolution.defaulted == (ignored or ids is None or fmt == "eagle")
        keys = load_file(str(tmp_path / fmt / "model.safetensors")).keys()
        assert ("midlayer.hidden_norm.weight" in keys) == (fmt != "speculators")
        if ids is not None and fmt != "eagle":
            written = out.aux_ids_written
            engine = "sglang" if fmt == "sglang" else "speculators"
            assert resolve_aux_layers(engine, written, N).resid == (2, 4, 5)
    eagle_config = json.loads((tmp_path / "sglang" / "config.json").read_text())["eagle_config"]
    assert eagle_config.get("eagle_aux_hidden_state_layer_ids") == ([1, 3, 4] if ids else None)


def test_ids_are_translated_not_copied_and_eagle_refuses_what_it_cannot_capture(tmp_path, saved):
    draft, src = saved
    out = convert_draft(src, tmp_path / "sg", "sglang", num_target_layers=N)
    assert out.trained_resid == [1, 3, 5] and out.aux_ids_written == [0, 2, 4]
    back = convert_draft(tmp_path / "sg", tmp_path / "sp", "speculators", num_target_layers=N)
    assert back.aux_ids_written == [1, 3, 5]
    ids_in, aux = inputs(draft)
    assert torch.equal(load_draft(tmp_path / "sp")(ids_in, aux).logits, draft(ids_in, aux).logits)
    with pytest.raises(Eagle3LabError, match=r"cannot capture \['resid\[1\]', 'resid\[3\]', 'resid\[5\]'\]"):
        convert_draft(src, tmp_path / "eg", "eagle", num_target_layers=N)
    assert not (tmp_path / "eg").exists()                               # nothing half-written
    with pytest.raises(Eagle3LabError, match="num_target_layers"):
        convert_draft(src, tmp_path / "sg2", "sglang")                   # ids need N to translate


def test_deepseek_targets_get_sglangs_deepseek_rule(tmp_path):
    draft = make_draft(ids=(2, 30, 58))
    draft.num_target_layers, draft.target_arch = 61, "DeepseekV3ForCausalLM"
    out = save_draft(draft, tmp_path / "sg", "sglang")
    res = resolve_aux_layers("sglang", out.aux_ids_written, 61, arch="DeepseekV3ForCausalLM")
    assert res.resid == (2, 30, 58) and not res.fatal


def test_norm_flags_are_written_explicitly_as_trained(tmp_path):
    specforge = make_draft(norm_before_residual=None)
    save_draft(specforge, tmp_path / "sf", "sglang")
    convert_draft(tmp_path / "sf", tmp_path / "sp", "speculators")
    written = json.loads((tmp_path / "sp" / "config.json").read_text())
    assert written["norm_before_residual"] is False   # absent, vLLM would have read it as True
    trained_nbr = make_draft(norm_before_residual=True)
    result = save_draft(trained_nbr, tmp_path / "sg", "sglang")
    assert any(w.code == "SERVED_FLAG_IGNORED" and "norm_before_residual=True" in w.text for w in result.warnings)


def test_layers0_keys_in_sglang_format_and_a_pickle_read_with_weights_only(tmp_path, saved):
    draft, src = saved
    ids_in, aux = inputs(draft)
    save_draft(draft, tmp_path / "sg", "sglang", num_target_layers=N)
    sd = load_file(str(tmp_path / "sg" / "model.safetensors"))
    (tmp_path / "sg" / "model.safetensors").unlink()
    renamed = {k.replace("midlayer.", "layers.0."): v for k, v in sd.items()}
    torch.save(renamed, tmp_path / "sg" / "pytorch_model.bin")
    loaded = load_draft(tmp_path / "sg")
    assert loaded.load_report.weight_files == ["pytorch_model.bin"]
    assert torch.equal(loaded(ids_in, aux).logits, draft(ids_in, aux).logits)


class _Payload:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_a_pickle_with_code_is_refused(tmp_path, saved, capsys):
    _, src = saved
    (src / "model.safetensors").unlink()
    with open(src / "pytorch_model.bin", "wb") as f:
        pickle.dump({"fc.weight": _Payload()}, f, protocol=2)
    with pytest.raises(Eagle3LabError, match=r"pytorch_model.bin: expected a pickle of plain tensors.*weights_only"):
        load_draft(src)
    assert "must never run" not in capsys.readouterr().out


def test_dtype_is_kept_by_convert(tmp_path, saved):
    _, src = saved
    edit(src, weights=lambda sd: sd.update({k: v.bfloat16() for k, v in sd.items() if v.is_floating_point()}))
    convert_draft(src, tmp_path / "sg", "sglang", num_target_layers=N)
    assert load_file(str(tmp_path / "sg" / "model.safetensors"))["fc.weight"].dtype == torch.bfloat16
    assert load_draft(tmp_path / "sg").fc.weight.dtype == torch.float32   # "auto" on CPU


# ---------------------------------------------------------------------------- the target

def test_embedding_comes_from_the_target_object_or_folder(tmp_path):
    from eagle3lab.models.target import save_target, tiny_target

    target = tiny_target("llama", num_layers=N, hidden_size=64, vocab_size=300)
    draft = make_draft(ids=(1, 3, 5), hidden=64, target_hidden=64, vocab=300)
    with torch.no_grad():
        draft.embed_tokens.weight.copy_(target.model.get_input_embeddings().weight)
    ids_in, aux = inputs(draft)
    expected = draft(ids_in, aux).logits
    save_draft(draft, tmp_path / "sg", "sglang", include_embedding=False)
    assert "embed_tokens.weight" not in load_file(str(tmp_path / "sg" / "model.safetensors"))
    with pytest.raises(Eagle3LabError, match=r"key 'embed_tokens.weight': expected a \[300, 64\] embedding.*pass target="):
        load_draft(tmp_path / "sg")
    loaded = load_draft(tmp_path / "sg", target=target)
    assert loaded.load_report.embedding == "target" and loaded.num_target_layers == N
    assert torch.equal(loaded(ids_in, aux).logits, expected)
    assert loaded.aux_resid == (1, 3, 5)         # written as SGLang ids [0, 2, 4], read back as resid[k+1]
    save_target(target, tmp_path / "target")
    from_folder = load_draft(tmp_path / "sg", target=tmp_path / "target")
    assert torch.equal(from_folder(ids_in, aux).logits, expected)
    # converting without a target keeps the embedding out instead of inventing one
    out = convert_draft(tmp_path / "sg", tmp_path / "sp", "speculators", num_target_layers=N)
    assert out.embedding_written is False


def test_a_draft_for_another_target_is_refused(tmp_path):
    from eagle3lab.models.target import tiny_target

    draft = make_draft(hidden=64, target_hidden=64, vocab=300)
    save_draft(draft, tmp_path / "d", "speculators")
    other_width = tiny_target("llama", num_layers=4, hidden_size=32, vocab_size=300)
    with pytest.raises(Eagle3LabError, match=r"target_hidden_size': expected 32 \(hidden_size of the target"):
        load_draft(tmp_path / "d", target=other_width)
    other_vocab = tiny_target("llama", num_layers=4, hidden_size=64, vocab_size=400)
    with pytest.raises(Eagle3LabError, match=r"vocab_size': expected 400 \(the target's vocabulary"):
        load_draft(tmp_path / "d", target=other_vocab)


# ---------------------------------------------------------------------------- bad input

BAD_CASES = {
    "missing key": (None, lambda sd: sd.pop("layers.0.mlp.up_proj.weight"),
                    r"model.safetensors: key 'layers.0.mlp.up_proj.weight': expected all of .* found missing"),
    "extra key": (None, lambda sd: sd.update({"layers.0.self_attn.q_norm.weight": torch.ones(4)}),
                  r"key 'layers.0.self_attn.q_norm.weight': expected only the keys .* found extra keys"),
    "wrong shape": (None, lambda sd: sd.update({"lm_head.weight": torch.zeros(21, 16)}),
                    r"key 'lm_head.weight': expected shape \[20, 16\] \(from config.json\), found shape \[21, 16\]"),
    "config and weights disagree": (lambda c: c["transformer_layer_config"].update(hidden_size=32), None,
                                    r"key 'fc.weight': expected 32 rows \(hidden_size in config.json\), found shape \[16, 72\]"),
    "fc width": (lambda c: c.update(target_hidden_size=16), None,
                 r"key 'fc.weight': expected 48 input columns .* found shape \[16, 72\]"),
    "NaN weights": (None, lambda sd: sd["layers.0.self_attn.o_proj.weight"].__setitem__((0, 0), float("nan")),
                    r"key 'layers.0.self_attn.o_proj.weight': expected finite values, found 1 NaN/inf of 256"),
    "d2t out of range": (None, lambda sd: sd["d2t"].__setitem__(-1, 100),
                         r"key 'd2t': expected a valid draft->target vocab map, found 1 of 20 entries map outside \[0, 50\)"),
    "d2t/t2d inconsistent": (None, lambda sd: sd.update({"t2d": sd["t2d"].roll(1)}),
                             r"key 'd2t/t2d': .* d2t and t2d disagree"),
    "absolute ids": (None, lambda sd: sd.update({"d2t": sd["d2t"] + torch.arange(20)}), r"ABSOLUTE target ids"),
    "d2t missing": (None, lambda sd: sd.pop("d2t"), r"key 'd2t': expected all of \['d2t'\], found missing"),
    "d2t float": (None, lambda sd: sd.update({"d2t": sd["d2t"].float()}),
                  r"key 'd2t': expected an integer tensor of offsets, found dtype torch.float32"),
    "unknown architecture": (lambda c: [c.pop("speculators_model_type"), c.update(architectures=["FooForCausalLM"])],
                             None, r"config.json: key 'architectures': expected an EAGLE-3 draft .* found unknown"),
    "MTP head": (lambda c: c.update(speculators_model_type="mtp"), None, r"found mtp: speculators_model_type is 'mtp'"),
    "malformed ids": (lambda c: c.update(eagle_aux_hidden_state_layer_ids="1,3,5"), None,
                      r"key 'eagle_aux_hidden_state_layer_ids': expected a list of integer layer ids, found '1,3,5'"),
    "flag not a bool": (lambda c: c.update(norm_before_residual="yes"), None,
                        r"key 'norm_before_residual': expected true, false or absent, found 'yes'"),
    "geometry missing": (lambda c: c["transformer_layer_config"].pop("vocab_size"), None,
                         r"key 'transformer_layer_config.vocab_size': expected an integer, found None"),
    # sizes no layer can be built with: refused naming the key, before torch tries a negative dimension
    "negative heads": (lambda c: c["transformer_layer_config"].update(num_attention_heads=-4), None,
                       r"config.json: key 'transformer_layer_config.num_attention_heads': expected a positive "
                       r"integer, found -4"),
    "zero intermediate size": (lambda c: c["transformer_layer_config"].update(intermediate_size=0), None,
                               r"key 'transformer_layer_config.intermediate_size': expected a positive integer, found 0"),
    "fractional head_dim": (lambda c: c["transformer_layer_config"].update(head_dim=4.5), None,
                            r"key 'transformer_layer_config.head_dim': expected a positive integer, found 4.5"),
    "kv heads not a divisor": (lambda c: c["transformer_layer_config"].update(num_key_value_heads=3), None,
                               r"key 'transformer_layer_config.num_key_value_heads': expected a divisor of "
                               r"num_attention_heads=4 .* found 3"),
    "heads not dividing hidden": (lambda c: [c["transformer_layer_config"].pop("head_dim"),
                                             c["transformer_layer_config"].update(num_attention_heads=3,
                                                                                  num_key_value_heads=1)], None,
                                  r"key 'transformer_layer_config.head_dim': expected stated, or hidden_size=16 "
                                  r"divisible by num_attention_heads=3 .* found neither"),
    "negative draft vocab": (lambda c: c.update(draft_vocab_size=-20), None,
                             r"key 'draft_vocab_size': expected a positive integer, found -20"),
    "draft vocab above the target's": (lambda c: c.update(draft_vocab_size=60), None,
                                       r"key 'draft_vocab_size': expected at most vocab_size=50 .* found 60"),
    "negative target hidden": (lambda c: c.update(target_hidden_size=-24), None,
                               r"key 'target_hidden_size': expected a positive integer, found -24"),
    "zero layers": (lambda c: c["transformer_layer_config"].update(num_hidden_layers=0), None,
                    r"key 'transformer_layer_config.num_hidden_layers': expected a positive integer, found 0"),
    "negative context": (lambda c: c["transformer_layer_config"].update(max_position_embeddings=-1), None,
                         r"key 'transformer_layer_config.max_position_embeddings': expected a positive integer"),
    "negative eps": (lambda c: c["transformer_layer_config"].update(rms_norm_eps=-1e-6), None,
                     r"key 'transformer_layer_config.rms_norm_eps': expected a small non-negative number"),
    "heads a bool": (lambda c: c["transformer_layer_config"].update(num_key_value_heads=True), None,
                     r"key 'transformer_layer_config.num_key_value_heads': expected a positive integer, found True"),
}


@pytest.mark.parametrize("case", list(BAD_CASES))
def test_bad_input_names_file_key_expected_and_found(saved, case):
    _, src = saved
    cfg, weights, message = BAD_CASES[case]
    edit(src, cfg=cfg, weights=weights)
    with pytest.raises(Eagle3LabError, match=message):
        load_draft(src)


def test_bad_sizes_in_a_flat_config_name_the_key_as_written(tmp_path):
    """An SGLang-format config writes the geometry at the top level: the key is named there."""
    save_draft(make_draft(ids=(1, 3, 5)), tmp_path / "d", "sglang", include_embedding=True)
    edit(tmp_path / "d", cfg=lambda c: c.update(num_attention_heads=-4))
    with pytest.raises(Eagle3LabError, match=r"config.json: key 'num_attention_heads': expected a positive integer, "
                                             r"found -4"):
        load_draft(tmp_path / "d")


@pytest.mark.parametrize("field, value", [("num_attention_heads", -4), ("hidden_size", 0), ("num_aux", -1),
                                          ("q_lora_rank", 0), ("draft_vocab_size", 51)])
def test_a_draft_config_in_memory_refuses_bad_sizes_naming_the_field(field, value):
    sizes = dict(hidden_size=16, intermediate_size=32, num_attention_heads=4, vocab_size=50)
    with pytest.raises(Eagle3LabError, match=rf"draft config: key '{field}': expected "):
        DraftConfig(**{**sizes, field: value})


def test_one_fp16_tensor_among_fp32_ones_is_named_and_cast(saved):
    """A checkpoint written in parts: one tensor half precision. Loaded, cast to the load dtype, and said."""
    draft, src = saved
    edit(src, weights=lambda sd: sd.update({"layers.0.mlp.down_proj.weight": sd["layers.0.mlp.down_proj.weight"].half()}))
    for dtype, loaded_as in (("auto", torch.float32), (None, torch.float32), (torch.bfloat16, torch.bfloat16)):
        loaded = load_draft(src, dtype=dtype)
        mixed = [w.text for w in loaded.load_report.warnings if w.code == "MIXED_DTYPES"]
        assert len(mixed) == 1 and "layers.0.mlp.down_proj.weight (float16)" in mixed[0], loaded.load_report.warnings
        assert f"cast to {str(loaded_as).removeprefix('torch.')}" in mixed[0] and "float32" in mixed[0]
        assert {p.dtype for p in loaded.parameters()} == {loaded_as}
    # all one dtype (all fp16, as a converted checkpoint is): no word
    edit(src, weights=lambda sd: sd.update({k: v.half() for k, v in sd.items() if v.is_floating_point()}))
    assert "MIXED_DTYPES" not in codes(load_draft(src, dtype=None).load_report.warnings)


def test_broken_vocab_map_can_still_be_loaded_on_purpose(saved):
    _, src = saved
    edit(src, weights=lambda sd: sd.update({"d2t": sd["d2t"] + torch.arange(20)}))
    draft = load_draft(src, check_vocab=False)
    found = draft.load_report.vocab_findings[0]
    assert (found.code, found.severity, found.where) == ("VOCAB_D2T_OUT_OF_RANGE", Severity.ERROR, "d2t")
    assert draft.load_report.to_dict()["vocab_findings"][0] == {"severity": "error", "key": "d2t", "message": found.text}


def test_truncated_safetensors_bad_json_and_no_weights(saved, tmp_path):
    _, src = saved
    data = (src / "model.safetensors").read_bytes()
    (src / "model.safetensors").write_bytes(data[: len(data) // 2])
    with pytest.raises(Eagle3LabError, match=r"model.safetensors: expected a complete safetensors file.*truncated"):
        load_draft(src)
    (src / "model.safetensors").unlink()
    with pytest.raises(Eagle3LabError, match=r"expected weights .* found none.*inspect"):
        load_draft(src)
    (src / "config.json").write_text("{not json")
    with pytest.raises(Eagle3LabError, match=r"config.json: expected valid JSON"):
        load_draft(src)
    with pytest.raises(Eagle3LabError, match=r"config.json: expected a draft checkpoint directory"):
        load_draft(tmp_path / "nowhere")


def test_save_refuses_to_overwrite_and_writes_atomically(saved, tmp_path):
    draft, src = saved
    before = (src / "config.json").read_text()
    with pytest.raises(Eagle3LabError, match="it exists"):
        save_draft(draft, src, "speculators")
    assert (src / "config.json").read_text() == before
    save_draft(draft, src, "sglang", overwrite=True)
    assert "LlamaForCausalLMEagle3" in (src / "config.json").read_text()
    assert [p.name for p in tmp_path.iterdir()] == ["d"]                 # no temp folders left behind


def test_load_report_says_what_was_defaulted_and_by_whose_rule(tmp_path):
    draft = make_draft()
    save_draft(draft, tmp_path / "eg", "eagle")
    edit(tmp_path / "eg", cfg=lambda c: [c.pop("rope_theta"), c.pop("draft_vocab_size") and None])
    edit(tmp_path / "eg", cfg=lambda c: c.update(draft_vocab_size=20))
    loaded = load_draft(tmp_path / "eg", profile="sglang")
    rep = loaded.load_report
    assert rep.format == "eagle" and rep.profile == "sglang"
    assert any(d["field"] == "rope_theta" and "Llama default 10000.0" in d["rule"] for d in rep.defaulted)
    nbr = next(s for s in rep.settings if s["flag"] == "norm_before_residual")
    assert nbr["value"] is False and "ignored by SGLang" in nbr["how"]
    assert "eagle format" in str(rep)


def test_full_vocabulary_drafts_with_and_without_identity_buffers(tmp_path):
    cfg = DraftConfig(hidden_size=16, intermediate_size=32, num_attention_heads=4, vocab_size=50)
    draft = Eagle3Draft(cfg, fmt="sglang")
    assert draft.d2t is None and draft.to_target_ids(torch.tensor([7])).tolist() == [7]
    save_draft(draft, tmp_path / "d", "sglang")   # writes identity buffers: SpecForge's warm start needs them
    assert load_file(str(tmp_path / "d" / "model.safetensors"))["d2t"].eq(0).all()
    loaded = load_draft(tmp_path / "d")   # our own output loads without a word about them
    assert loaded.d2t is None and not [w for w in loaded.load_report.warnings if "d2t" in w.text or "identity" in w.text]
    edit(tmp_path / "d", weights=lambda sd: sd["d2t"].__setitem__(3, 1))
    with pytest.raises(Eagle3LabError, match=r"key 'd2t': expected all-zero offsets .* found 1 non-zero"):
        load_draft(tmp_path / "d")


def test_a_rewired_draft_is_saved_with_the_hypothesis_it_carries(tmp_path):
    # the seed's fix in miniature: shipped for SGLang with ids that mean other states and a flag SGLang
    # ignores; the weights were trained on [resid[0], resid[2], resid[4]] with the normed residual
    shipped = make_draft(ids=(1, 3, 5))
    ids_in, aux = inputs(shipped)
    save_draft(shipped, tmp_path / "shipped", "sglang")
    loaded = load_draft(tmp_path / "shipped", num_target_layers=N)
    fixed = loaded.rewired(aux_resid=(0, 2, 4), norm_before_residual=True)
    out = save_draft(fixed, tmp_path / "fixed", "speculators")
    assert out.aux_ids_written == [0, 2, 4] and out.flags_written["norm_before_residual"] is True
    served = load_draft(tmp_path / "fixed", profile="vllm", num_target_layers=N)
    assert served.aux_resid == (0, 2, 4) and served.settings.norm_before_residual is True
    assert torch.equal(served(ids_in, aux).logits, fixed(ids_in, aux).logits)
    assert not torch.equal(served(ids_in, aux).logits, loaded(ids_in, aux).logits)


def test_ids_written_for_sglang_warn_when_an_older_build_reads_them_otherwise(tmp_path):
    """resid[0] on a Llama target is id -1, which llama.py feeds only from 0.5.22 (TypeError up to 0.5.21):
    save_draft says so; ids every build reads alike (the healthy draft's) get no such warning."""
    from eagle3lab import bundled
    from eagle3lab.models.target import load_target

    target = load_target(bundled.TARGET, device="cpu")
    case = load_draft(bundled.DRAFT_CASE, target=target, device="cpu").rewired(aux_resid=(0, 3, 7))
    written = save_draft(case, tmp_path / "case", "sglang", num_target_layers=12)
    assert written.aux_ids_written == [-1, 2, 6]
    (warning,) = [w.text for w in written.warnings if w.code == "OLDER_SGLANG_READING"]
    assert "resid[0, 3, 7]" in warning and "in 0.5.4" in warning and "TypeError" in warning and "0.5.22" in warning
    # written for SGLang, which serves them; SpecForge 0.2.0 would refuse -1 for training: said, not raised
    (refused,) = [w.text for w in written.warnings if w.code == "TRAINER_REFUSES_IDS"]
    assert refused.startswith("aux ids [-1, 2, 6]: SGLang serves them") and "SpecForge refuses [-1, 2, 6]" in refused
    healthy = load_draft(bundled.DRAFT_HEALTHY, target=target, device="cpu")
    assert "OLDER_SGLANG_READING" not in codes(save_draft(healthy, tmp_path / "healthy", "sglang",
                                                          num_target_layers=12).warnings)
