"""MLA drafts (DeepSeek-V2/V3 multi-head latent attention in the first layer, as SGLang's
kimi_k25_eagle3.py, vLLM's deepseek_eagle3.py and TorchSpec define them): attention parity with
transformers' DeepseekV3Attention, the whole forward against a transformers-module reference,
lossless decoding, checkpoints in the engines' key layouts, the real Kimi-K2.5 config, and which
engines cannot serve one."""

from __future__ import annotations

import json
import math

import pytest
import torch
from family_cases import (
    DEEPSEEK_YARN,
    KIMI_YARN,
    MLA,
    assert_matches_reference,
    hf_attention,
    hf_reference,
    lossless,
    rekey,
    target,
    trained,
)
from helpers.paths import REAL_CONFIGS
from safetensors.torch import load_file

from eagle3lab.app.cli import main
from eagle3lab.engines.profiles import serving_problems
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models import checkpoint_formats as cf
from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft, save_draft, trainer_of
from eagle3lab.models.draft import DraftCache, DraftConfig, Eagle3Draft

pytestmark = pytest.mark.usefixtures("single_thread")


def random_mla(q_lora_rank=12, rope_scaling=None, seed=0) -> Eagle3Draft:
    cfg = DraftConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=64, draft_vocab_size=48,
                      rope_scaling=rope_scaling, max_position_embeddings=64, **{**MLA, "q_lora_rank": q_lora_rank})
    torch.manual_seed(seed)
    draft = Eagle3Draft(cfg, profile="sglang")
    with torch.no_grad():
        for p in draft.parameters():
            p.normal_(0, 0.3)   # norm weights away from 1, so a norm in the wrong place shows
    return draft


@pytest.mark.parametrize("q_lora_rank", [12, None])
@pytest.mark.parametrize("rope", [None, KIMI_YARN, DEEPSEEK_YARN], ids=["plain", "kimi-yarn", "deepseek-yarn"])
def test_attention_matches_transformers_deepseek_v3(q_lora_rank, rope):
    draft = random_mla(q_lora_rank, rope)
    mine = draft.layers[0].self_attn
    prefix = "layers.0.self_attn."
    theirs, rotary = hf_attention(draft, {k[len(prefix):]: v for k, v in draft.state_dict().items()
                                          if k.startswith(prefix)})
    assert mine.scale == pytest.approx(theirs.scaling, rel=1e-12)
    x = torch.randn(2, 7, 64)
    positions = torch.arange(7)[None].expand(2, -1)
    with torch.no_grad():
        cos, sin = draft._rope(0, 7, None, torch.float32, x.device)   # the draft's own RoPE path
        ours = mine(x, draft.settings, cos, sin, torch.ones(7, 7, dtype=torch.bool).tril(), None)
        ref, _ = theirs(x, rotary(x, positions), torch.full((7, 7), float("-inf")).triu(1)[None, None])
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    if rope:   # the yarn scale is in play: plain RoPE would give another answer
        plain = random_mla(q_lora_rank, None)
        plain.load_state_dict(draft.state_dict())
        cos, sin = plain._rope(0, 7, None, torch.float32, x.device)
        with torch.no_grad():
            other = plain.layers[0].self_attn(x, plain.settings, cos, sin, torch.ones(7, 7, dtype=torch.bool).tril(), None)
        assert (other - ref).abs().max() > 1e-3


# An MLA draft's RoPE is DeepSeek's YaRN wherever it is served (family_cases.engine_rope states the rule): the cos/sin
# scale is yarn_get_mscale(factor, mscale) / yarn_get_mscale(factor, mscale_all_dim), mscale 1 and mscale_all_dim 0
# when missing; vllm-legacy keeps mscale here (only llama_eagle3.py's get_rope dropped it before vLLM 0.30.0)
MSCALE_ONLY = {"rope_type": "yarn", "factor": 4.0, "mscale": 0.5, "original_max_position_embeddings": 16}
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 16}
LINEAR = {"type": "linear", "factor": 4.0}


@pytest.mark.parametrize("profile", ["vllm-legacy", "vllm", "sglang"])
@pytest.mark.parametrize("rope,scale", [(KIMI_YARN, 1.0), (DEEPSEEK_YARN, 1.0),
                                        (MSCALE_ONLY, 0.05 * math.log(4) + 1), (LLAMA3, 0.1 * math.log(8) + 1)],
                         ids=["kimi-yarn", "deepseek-yarn", "mscale-only", "llama3"])
def test_serving_engines_build_deepseek_yarn_for_mla_drafts(profile, rope, scale):
    draft = random_mla(rope_scaling=rope).under(profile)
    assert draft.rope.kind == "yarn" and draft.rope.attention_scaling == pytest.approx(scale, rel=1e-12)
    assert "deepseek_yarn" in draft.settings.decisions["rope_scaling"].how
    assert_matches_reference(draft, seed=6, rows=7)


def test_linear_mla_draft_is_yarn_in_sglang_and_does_not_load_in_vllm():
    draft = random_mla(rope_scaling=LINEAR)
    sglang = draft.under("sglang")   # original_max_position_embeddings defaults to max_position_embeddings
    assert sglang.rope.attention_scaling == pytest.approx(0.1 * math.log(4) + 1, rel=1e-12)
    assert sglang.settings.rope_scaling["original_max_position_embeddings"] == 64
    torch.manual_seed(7)
    ids, aux = torch.randint(0, 64, (1, 6)), torch.randn(1, 6, 96)
    torch.testing.assert_close(sglang(ids, aux).logits, hf_reference(sglang, ids, aux)[0], atol=1e-5, rtol=1e-5)
    assert serving_problems(draft.config, "sglang") == []
    for profile in ("vllm", "vllm-legacy"):
        problem, = serving_problems(draft.config, profile)
        assert "original_max_position_embeddings" in problem and "KeyError" in problem


def test_mla_rope_keys_not_modelled_are_refused():
    for key, value in (("apply_yarn_scaling", False), ("attention_factor", 1.0), ("extrapolation_factor", 0.5)):
        with pytest.raises(Eagle3LabError, match=f"rope_scaling.{key}"):
            random_mla(rope_scaling={**KIMI_YARN, key: value}).under("sglang")


def test_kimi_softmax_scale_is_the_yarn_mscale_squared_over_sqrt_qk_dim():
    raw = json.loads((REAL_CONFIGS / "lightseekorg__TorchSpec__kimi_k25_eagle3_mla.json").read_text())
    cfg, _ = cf.config_to_draft(raw, "sglang", "kimi")
    with torch.device("meta"):
        attn = Eagle3Draft(cfg, profile="sglang").layers[0].self_attn
    # (128 + 64)^-1/2 x (0.1 ln 64 + 1)^2: mscale_all_dim 1.0, factor 64
    assert attn.scale == pytest.approx((0.1 * math.log(64) + 1) ** 2 / math.sqrt(192), rel=1e-12)


@pytest.mark.parametrize("name", ["mla", "mla-yarn", "mla-no-q-lora"])
def test_draft_forward_matches_the_transformers_reference(name):
    draft = trained(name)
    assert_matches_reference(draft)


def test_cache_steps_equal_one_pass_and_crop_rolls_back():
    draft = trained("mla-yarn")
    torch.manual_seed(4)
    ids, aux = torch.randint(0, 64, (1, 7)), torch.randn(1, 7, 96)
    full = draft(ids, aux)
    cache = DraftCache()
    first = draft(ids[:, :4], aux[:, :4], cache=cache)
    rest = [draft(ids[:, t:t + 1], aux[:, t:t + 1], cache=cache) for t in range(4, 7)]
    torch.testing.assert_close(torch.cat([first.logits, *[r.logits for r in rest]], 1), full.logits, atol=1e-5, rtol=1e-5)
    cache.crop(5)
    again = draft(ids[:, 5:7], aux[:, 5:7], cache=cache)
    torch.testing.assert_close(again.logits, full.logits[:, 5:7], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("settings", [dict(num_steps=3), dict(num_steps=3, topk=2, num_draft_tokens=6)],
                         ids=["chain", "tree"])
def test_decodes_losslessly_with_mixed_acceptance(settings):
    accepted = lossless(trained("mla-yarn"), **settings)
    assert max(accepted) >= 2 and min(accepted) == 0


def _same(a: Eagle3Draft, b: Eagle3Draft):
    """Same weights, geometry and flags, fed the same target states (ids are written in each engine's convention)."""
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    ignore = {"aux_layer_ids": None, "aux_ids_key": None, "extra": None}
    assert a.config.to_dict() | ignore == b.config.to_dict() | ignore and a.aux_resid == b.aux_resid


@pytest.mark.parametrize("name", ["mla", "mla-no-q-lora"])
def test_checkpoint_in_the_engines_layouts_loads_runs_and_round_trips(tmp_path, name):
    draft = trained(name)
    written = save_draft(draft, tmp_path / "sglang", "sglang")
    # SGLang refuses an MLA draft without a q LoRA (vLLM and TorchSpec build q_proj): said on writing
    serving = [w.text for w in written.warnings if w.code == "NOT_SERVABLE"]
    assert len(serving) == (0 if draft.config.q_lora_rank else 1) and all("needs q_lora_rank" in w for w in serving)
    config = json.loads((tmp_path / "sglang" / "config.json").read_text())
    assert config["architectures"] == ["Eagle3DeepseekV2ForCausalLM"] and config["model_type"] == "deepseek_v3"
    assert (config["q_lora_rank"], config["kv_lora_rank"], config["qk_rope_head_dim"]) == (
        draft.config.q_lora_rank, 16, 4)
    keys = set(load_file(str(tmp_path / "sglang" / "model.safetensors")))
    q_keys = ({"midlayer.self_attn.q_a_proj.weight", "midlayer.self_attn.q_a_layernorm.weight",
               "midlayer.self_attn.q_b_proj.weight"} if draft.config.q_lora_rank else {"midlayer.self_attn.q_proj.weight"})
    assert q_keys | {"midlayer.self_attn.kv_a_proj_with_mqa.weight", "midlayer.self_attn.kv_a_layernorm.weight",
                     "midlayer.self_attn.kv_b_proj.weight", "fc.weight", "d2t"} <= keys
    loaded = load_draft(tmp_path / "sglang", target=target(), device="cpu")
    # run by the first profile that can: SpecForge (the sglang format's trainer) has no MLA draft, SGLang (its
    # server) needs a q LoRA, vLLM builds q_proj; said in the load report
    assert loaded.config.attention == "mla" and loaded.profile.name == ("sglang" if draft.config.q_lora_rank else
                                                                          "vllm")
    run_as, = [w.text for w in loaded.load_report.warnings if w.code == "PROFILE_PASSED_OVER"]
    assert "SpecForge" in run_as and ("needs q_lora_rank" in run_as) == (not draft.config.q_lora_rank)
    # made with the arithmetic and ids of SGLang (TorchSpec's MLA drafts compute as SGLang does), either way
    assert trainer_of(loaded).name == "sglang"
    _same(draft, loaded.under("sglang"))
    torch.manual_seed(5)
    ids, aux = torch.randint(0, 64, (1, 5)), torch.randn(1, 5, 96)
    # the same arithmetic under the same profile (SGLang itself would swap in the target's embedding)
    torch.testing.assert_close(loaded.under(draft.profile)(ids, aux).logits, draft(ids, aux).logits)
    # saved again, the same files
    save_draft(loaded, tmp_path / "again", "sglang")
    assert json.loads((tmp_path / "again" / "config.json").read_text()) == config
    first, second = (load_file(str(tmp_path / d / "model.safetensors")) for d in ("sglang", "again"))
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    # the published lightseekorg layout (layers.0.*, read by SGLang's and vLLM's loaders) loads the same
    rekey(tmp_path / "sglang", lambda k: k.replace("midlayer.", "layers.0."))
    _same(draft, load_draft(tmp_path / "sglang", target=target(), device="cpu").under("sglang"))
    assert lossless(loaded.under("sglang"), n_prompts=1, num_steps=2)   # vLLM feeds its default ids (2, 3, 3)


def test_a_draft_no_profile_can_run_is_refused_unless_a_profile_is_given(tmp_path):
    draft = random_mla(q_lora_rank=None, rope_scaling=LINEAR)   # SGLang needs a q LoRA, vLLM an original length
    draft.t2d[:48] = True   # the identity map of random_mla's zero d2t
    save_draft(draft, tmp_path / "d", "sglang")
    with pytest.raises(Eagle3LabError, match="a profile that can run this draft.*needs q_lora_rank.*"
                                             "needs rope_scaling.original_max_position_embeddings.*profile="):
        load_draft(tmp_path / "d", device="cpu")
    assert load_draft(tmp_path / "d", device="cpu", profile="sglang").profile.name == "sglang"
    report = inspect_checkpoint(tmp_path / "d")   # inspect still checks it, and lists why nothing serves it
    assert report.errors == [] and report.weights.checked
    assert all(row.problems for row in report.serving.values())


def test_mla_is_refused_where_no_engine_reads_it(tmp_path):
    for fmt in ("speculators", "eagle"):
        with pytest.raises(Eagle3LabError, match="key 'attention'.*found mla"):
            save_draft(trained("mla"), tmp_path / fmt, fmt)


def test_kimi_k25_config_reads_as_written_and_writes_back():
    raw = json.loads((REAL_CONFIGS / "lightseekorg__TorchSpec__kimi_k25_eagle3_mla.json").read_text())
    assert cf.classify_config(raw)[0] == "sglang"
    cfg, defaulted = cf.config_to_draft(raw, "sglang", "kimi")
    assert (cfg.attention, cfg.q_lora_rank, cfg.kv_lora_rank, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim,
            cfg.v_head_dim, cfg.head_dim, cfg.num_key_value_heads) == ("mla", 1536, 512, 128, 64, 128, 64, 64)
    assert cfg.aux_layer_ids == (1, 29, 57) and cfg.aux_ids_key == "eagle_config.eagle_aux_hidden_state_layer_ids"
    assert cfg.rope_scaling["type"] == "yarn" and cfg.extra["model_type"] == "kimi_k2"
    notes = {field: rule for field, _, rule in defaulted}
    assert "no serving engine reads it" in notes["eagle_config.use_input_layernorm_in_first_layer"]
    assert "no serving engine reads it" in notes["eagle_config.use_mtp_layernorm"]
    assert "head_dim" not in notes   # an MLA layer's RoPE width is qk_rope_head_dim, not hidden / heads
    back = cf.draft_to_config(cfg, "sglang", list(cfg.aux_layer_ids), {})
    for key in ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "model_type",
                "rope_scaling", "hidden_size", "num_attention_heads", "vocab_size"):
        assert back[key] == raw[key], key
    assert back["architectures"] == raw["architectures"] and back["eagle_config"] == raw["eagle_config"]


def test_kimi_k3_mla_use_nope_is_kept_and_called_out(tmp_path, capsys):
    """mla_use_nope (Kimi-Linear / Kimi-K3: MLA without rotary) is read by no EAGLE-3 MLA draft code: kept, and said."""
    raw = json.loads((REAL_CONFIGS / "lightseekorg__TorchSpec__kimi_k3_eagle3_mla.json").read_text())
    cfg, defaulted = cf.config_to_draft(raw, "sglang", "kimi-k3")
    rule = {field: rule for field, _, rule in defaulted}["mla_use_nope"]
    assert "not modelled" in rule and "kimi_k25_eagle3.py" in rule and "deepseek_eagle3.py" in rule
    assert "RoPE is applied" in rule
    assert cf.draft_to_config(cfg, "sglang", list(cfg.aux_layer_ids), {})["mla_use_nope"] is True
    # rope_interleave false: SGLang alone reads it (neox pairs); kept and said the same way
    cfg, defaulted = cf.config_to_draft({**raw, "rope_interleave": False}, "sglang", "kimi-k3")
    rule = {field: rule for field, _, rule in defaulted}["rope_interleave"]
    assert "SGLang deepseek_v2.py reads it" in rule and "runs other arithmetic" in rule
    assert cf.draft_to_config(cfg, "sglang", list(cfg.aux_layer_ids), {})["rope_interleave"] is False
    # a tiny draft that states it: saved and loaded back with it, and the note in the load report and inspect
    draft = trained("mla")
    draft.config.extra["mla_use_nope"] = True
    try:
        save_draft(draft, tmp_path / "nope", "sglang")
    finally:
        del draft.config.extra["mla_use_nope"]
    assert json.loads((tmp_path / "nope" / "config.json").read_text())["mla_use_nope"] is True
    loaded = load_draft(tmp_path / "nope", target=target(), device="cpu")
    assert loaded.config.extra["mla_use_nope"] is True
    assert any(d["field"] == "mla_use_nope" and "not modelled" in d["rule"] for d in loaded.load_report.defaulted)
    assert any(d.field == "mla_use_nope" for d in inspect_checkpoint(tmp_path / "nope").defaulted)


def test_modelopt_switch_against_what_engines_do_is_called_out():
    raw = json.loads((REAL_CONFIGS / "lightseekorg__TorchSpec__kimi_k25_eagle3_mla.json").read_text())
    raw["eagle_config"]["use_last_layernorm"] = False
    _, defaulted = cf.config_to_draft(raw, "sglang", "kimi")
    rule = {field: rule for field, _, rule in defaulted}["eagle_config.use_last_layernorm"]
    assert "runs different arithmetic when served" in rule


def test_engines_that_cannot_run_an_mla_draft_say_so(tmp_path, capsys):
    save_draft(trained("mla"), tmp_path / "mla", "sglang")
    assert main(["inspect", str(tmp_path / "mla")]) == 0
    text = capsys.readouterr().out
    assert "runs in: vllm, vllm-legacy, sglang" in text
    assert "specforge      cannot: SpecForge" in text and "cannot run a draft with MLA" in text
    report = inspect_checkpoint(tmp_path / "mla")
    assert report.errors == [] and report.family.family == "mla"
    problems = {name: row.problems for name, row in report.serving.items()}
    assert {name for name, p in problems.items() if not p} == {"vllm", "vllm-legacy", "sglang"}
    assert "no kimi_k25_eagle3.py before 0.5.12" in problems["sglang-legacy"][0]
    assert all("cannot run a draft with MLA" in problems[n][0] for n in ("speculators", "specforge", "eagle"))
    # SGLang's MLA draft needs a q LoRA; vLLM builds q_proj without one
    save_draft(trained("mla-no-q-lora"), tmp_path / "no-q-lora", "sglang")
    report = inspect_checkpoint(tmp_path / "no-q-lora")
    assert "needs q_lora_rank" in report.serving["sglang"].problems[0] and not report.serving["vllm"].problems
    loaded = load_draft(tmp_path / "no-q-lora", target=target(), device="cpu")
    assert any(w.code == "NOT_SERVABLE" and "needs q_lora_rank" in w.text for w in loaded.load_report.warnings)
