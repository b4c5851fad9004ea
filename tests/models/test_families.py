"""The draft families' one registry (eagle3lab.models.families): one detector for a config's family that inspect, the
format classifier and loading share; what each family brings (attention class, owned switches, variants, formats);
and a family registered here, reusing Llama attention, that is detected from its config and that no engine runs,
because no engine lists it."""

from __future__ import annotations

import json

import pytest
import torch
from helpers.paths import REAL_CONFIGS

from eagle3lab.engines.profiles import PROFILES, resolve_settings, serving_problems
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models import checkpoint_formats as cf
from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft, save_draft
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.draft_attention import Attention
from eagle3lab.models.draft_family import describe_draft_config
from eagle3lab.models.families import (
    ATTENTION_KINDS,
    DRAFT_FAMILIES,
    DraftFamily,
    detect_family,
    family_of,
    register,
    switch_owners,
)
from eagle3lab.models.vocab import build_vocab_map

GEO = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, vocab_size=32, draft_vocab_size=24,
           aux_layer_ids=(1, 2, 4))
MLA_SIZES = dict(kv_lora_rank=8, qk_nope_head_dim=4, qk_rope_head_dim=4, v_head_dim=4)


def _fictional(layer: dict, archs: list[str]) -> str | None:
    return "layer model_type 'fictional' (Llama attention, renamed)" if layer.get("model_type") == "fictional" else None


FICTIONAL = DraftFamily("fictional", "Fictional", "Fictional attention (Llama's, under another name)", Attention,
                        _fictional, model_type="fictional")


@pytest.fixture
def fictional(monkeypatch):
    monkeypatch.setitem(DRAFT_FAMILIES, FICTIONAL.name, FICTIONAL)
    return FICTIONAL


def test_a_registered_family_is_detected_from_its_config_and_refused_by_engines_that_do_not_list_it(fictional,
                                                                                                   tmp_path):
    draft = Eagle3Draft(DraftConfig(**GEO, attention="fictional"), profile="speculators").bound(num_target_layers=6)
    d2t, t2d = build_vocab_map(torch.arange(GEO["draft_vocab_size"]), GEO["vocab_size"])
    draft.d2t.copy_(d2t)
    draft.t2d.copy_(t2d)
    assert type(draft.layers[0].self_attn) is Attention and draft.variants() == Eagle3Draft(DraftConfig(**GEO)).variants()
    save_draft(draft, tmp_path / "d", "speculators")
    raw = json.loads((tmp_path / "d" / "config.json").read_text())
    assert raw["transformer_layer_config"]["model_type"] == "fictional"   # the family's layer model_type, written
    assert detect_family(raw) == (fictional, "layer model_type 'fictional' (Llama attention, renamed)")
    assert describe_draft_config(raw).family == "fictional" and ATTENTION_KINDS["fictional"] == fictional.attention
    cfg, defaulted = cf.config_to_draft(raw, "speculators", "config.json")
    assert cfg.attention == "fictional" and "model_type" not in [field for field, _, _ in defaulted]
    # no engine lists it: each says it cannot run it, in the family's words, and the math says "cannot run"
    for name, profile in PROFILES.items():
        problem = serving_problems(cfg, name, ATTENTION_KINDS)[0]
        assert problem == (f"{profile.label} cannot run a draft with Fictional attention (Llama's, under another "
                           "name): it has no such draft model")
        assert resolve_settings(cfg, name).decisions["attention"].value == "cannot run"
    assert serving_problems(cfg, "sglang")[0].endswith("cannot run a draft with fictional attention: it has no such "
                                                       "draft model")   # words not given: the name is said
    report = inspect_checkpoint(tmp_path / "d")
    assert report.errors == [] and report.family.family == "fictional"
    assert all(row.problems for row in report.serving.values())
    with pytest.raises(Eagle3LabError, match="expected a profile that can run this draft"):   # no engine can
        load_draft(tmp_path / "d", device="cpu", num_target_layers=6)
    loaded = load_draft(tmp_path / "d", device="cpu", num_target_layers=6, profile="speculators")   # studied anyway
    assert loaded.config.attention == "fictional" and type(loaded.layers[0].self_attn) is Attention


def test_an_unregistered_family_is_refused_naming_the_key():
    assert "fictional" not in DRAFT_FAMILIES   # the fixture's registration did not outlive its test
    with pytest.raises(Eagle3LabError, match="key 'attention': expected one of llama, qwen3, mla, found 'fictional'"):
        DraftConfig(**GEO, attention="fictional")
    with pytest.raises(Eagle3LabError, match="expected a new family name"):
        register(DRAFT_FAMILIES["llama"])


@pytest.mark.parametrize("config, family", [
    ("lightseekorg__TorchSpec__kimi_k25_eagle3_mla.json", "mla"),
    ("vllm-project__speculators__qwen3-8b-eagle3-qwen3-arch__REBUILT.json", "qwen3"),
    ("sgl-project__SpecForge__llama3-8B-eagle3.json", "llama"),
])
def test_one_detector_for_inspect_the_classifier_and_loading(config, family):
    raw = json.loads((REAL_CONFIGS / config).read_text())
    fmt = cf.classify_config(raw)[0]
    assert detect_family(raw)[0].name == describe_draft_config(raw).family == family
    assert cf.config_to_draft(raw, fmt, config)[0].attention == family


def test_a_flat_config_with_one_mla_key_is_an_mla_draft_for_every_reader():
    """Before one detector, describe_draft_config called it MLA (any DeepSeek key) while the classifier needed both keys
    and so did not call it a draft: now both say an MLA draft, and loading names the size it lacks."""
    raw = json.loads((REAL_CONFIGS / "lightseekorg__TorchSpec__kimi_k25_eagle3_mla.json").read_text())
    raw = {k: v for k, v in raw.items() if k not in ("architectures", "qk_rope_head_dim")}
    kind, why = cf.classify_config(raw)
    assert (kind, why) == ("sglang", "an MLA EAGLE-3 draft (DeepSeek attention keys ['kv_lora_rank'])")
    assert describe_draft_config(raw).family == "mla"
    with pytest.raises(Eagle3LabError, match="key 'qk_rope_head_dim': expected an integer"):
        cf.config_to_draft(raw, kind, "config.json")
    target_like = {**raw, "num_hidden_layers": 61}   # DeepSeek keys on a many-layer config: a target, not a draft
    target_like.pop("draft_vocab_size")
    assert cf.classify_config(target_like)[0] == "target"


def test_each_family_brings_its_switches_variants_and_formats():
    assert family_of("qwen3").variants == [{"qk_norm": True}, {"qk_norm": False}]
    assert family_of("llama").variants == family_of("mla").variants == [{}]
    assert switch_owners("llama") == {"qk_norm": (False, "a Qwen3 draft's q_norm/k_norm weights")}
    assert switch_owners("qwen3")["qk_norm"][0] is True
    assert (family_of("llama").formats, family_of("qwen3").formats, family_of("mla").formats) == (
        ("speculators", "sglang", "eagle"), ("speculators", "sglang"), ("sglang",))
    with pytest.raises(Eagle3LabError, match="true only for a draft with a Qwen3 draft's q_norm/k_norm weights"):
        Eagle3Draft(DraftConfig(**GEO)).rewired(qk_norm=True)
    mla = Eagle3Draft(DraftConfig(**GEO, attention="mla", **MLA_SIZES))
    assert type(mla.layers[0].self_attn).__name__ == "MLAAttention"
    assert all("qk_norm" not in v for v in mla.variants())
