"""Issue 32's missed classes and false alarm, each on a config the test writes itself (a real published config edited
in tmp_path, or a bundled draft copied and edited): inspect names each with a code, the build range and the fix, and
doctor's static findings (config_findings / engine_findings) say the same. Every config fix a static finding carries
is applied: it clears the finding, and applied to a draft without the problem it raises nothing."""

from __future__ import annotations

import json
import shutil

import pytest

from eagle3lab import bundled
from eagle3lab.doctor.config_checks import config_findings, engine_findings
from eagle3lab.engines.config_view import read_draft, read_rope, read_target
from eagle3lab.engines.profiles import FLAGS, engine_builds, for_build
from eagle3lab.findings import Severity
from eagle3lab.models.checkpoint import inspect_checkpoint, load_draft

REAL = bundled.ROOT / "tests" / "fixtures" / "real-configs"
SPECULATORS = "nm-testing__EAGLE3-LLaMA3.1-Instruct-8B-converted.json"
SPECFORGE = "sgl-project__SpecForge__llama3-8B-eagle3.json"
LLAMA31 = "meta-llama__Llama-3.1-8B.json"
LLAMA3_ROPE = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
               "original_max_position_embeddings": 8192}


def write(tmp_path, name: str, source: str, change=lambda c: None):
    cfg = json.loads((REAL / source).read_text())
    change(cfg)
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(cfg))
    return folder


def transformers5_target(tmp_path):
    """Llama-3.1-8B as transformers 5 saves it: rope_parameters with theta and the llama3 scaling, no rope_scaling."""
    def change(cfg):
        cfg["rope_parameters"] = {**cfg.pop("rope_scaling"), "rope_theta": cfg.pop("rope_theta")}
    return write(tmp_path, "target", LLAMA31, change)


def codes(report) -> dict:
    return {(f.code, f.engine): f for f in report.findings}


def apply_fix(folder, fix: dict):
    """Write a finding's config_fix (dotted keys) into ``folder``'s config.json."""
    file = folder / "config.json"
    cfg = json.loads(file.read_text())
    for key, value in fix.items():
        *path, last = key.split(".")
        node = cfg
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    file.write_text(json.dumps(cfg))


# ---------------------------------------------------------------------------- the reader

def test_the_reader_reads_rope_as_transformers_5_does():
    legacy = read_rope({"rope_theta": 500000.0, "rope_scaling": LLAMA3_ROPE, "max_position_embeddings": 131072})
    new = read_rope({"rope_parameters": {**LLAMA3_ROPE, "rope_theta": 500000.0}, "max_position_embeddings": 131072})
    assert legacy.computes() == new.computes() and new.kind == "llama3" and new.scaling_from == "rope_parameters"
    # both written: transformers 5 takes rope_scaling; theta then comes from the top-level key
    both = read_rope({"rope_scaling": {"rope_type": "linear", "factor": 2.0}, "rope_theta": 1e6,
                      "rope_parameters": {**LLAMA3_ROPE, "rope_theta": 5e5}})
    assert (both.kind, both.theta, both.theta_from) == ("linear", 1e6, "rope_theta")
    plain = read_rope({"rope_parameters": {"rope_type": "default", "rope_theta": 1e6}})
    assert plain.scaling is None and plain.theta == 1e6
    # original_max_position_embeddings filled from max_position_embeddings, as standardize_rope_params does
    filled = {k: v for k, v in LLAMA3_ROPE.items() if k != "original_max_position_embeddings"}
    assert read_rope({"rope_scaling": filled, "rope_theta": 5e5, "max_position_embeddings": 8192}).computes() == \
        legacy.computes()
    assert read_rope({"rope_scaling": filled, "rope_theta": 5e5, "max_position_embeddings": 2048}).computes() != \
        legacy.computes()


def test_the_reader_reads_multimodal_targets_from_text_config():
    kimi = read_target(json.loads((REAL / "moonshotai__Kimi-K2.5.json").read_text()))
    assert (kimi.arch, kimi.text_arch, kimi.num_layers, kimi.multimodal) == (
        "KimiK25ForConditionalGeneration", "DeepseekV3ForCausalLM", 61, True)
    assert kimi.rope.kind == "yarn" and kimi.rope.theta == 50000.0 and kimi.max_positions == 262144
    # Qwen3-VL's shape (transformers 5): the decoder and its mrope in text_config's rope_parameters
    vl = read_target({"architectures": ["Qwen3VLForConditionalGeneration"], "text_config": {
        "num_hidden_layers": 36, "hidden_size": 4096, "max_position_embeddings": 262144, "rope_parameters": {
            "rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20], "mrope_interleaved": True}}})
    assert (vl.arch, vl.num_layers, vl.rope.kind, vl.rope.theta) == ("Qwen3VLForConditionalGeneration", 36, "mrope", 5e6)


def test_the_reader_reads_flags_and_ids_at_both_places():
    view = read_draft({"norm_before_fc": False, "eagle_config": {"norm_before_fc": True,
                       "eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}, FLAGS)
    assert view.flags["norm_before_fc"].at(("nested", "top")) == (True, "nested")
    assert view.flags["norm_before_fc"].at(("top",)) == (False, "top") and view.ids.nested == [1, 2, 3]


# ---------------------------------------------------------------------------- the false alarm

def test_a_transformers_5_target_raises_no_rope_alarm_for_a_draft_that_matches(tmp_path):
    target = transformers5_target(tmp_path)
    good = write(tmp_path, "good", SPECULATORS, lambda c: c["transformer_layer_config"].update(
        rope_scaling=LLAMA3_ROPE, rope_theta=500000.0, max_position_embeddings=131072))
    report = inspect_checkpoint(good, target=target)
    assert not [f for f in report.findings if f.code.startswith(("ROPE", "DRAFT_CONTEXT"))]


@pytest.mark.parametrize("edit, code", [
    (lambda c: c["transformer_layer_config"].update(rope_theta=500000.0, max_position_embeddings=131072),
     "ROPE_SCALING"),    # a converter dropped the scaling (speculators#574)
    (lambda c: c["transformer_layer_config"].update(rope_scaling=LLAMA3_ROPE, max_position_embeddings=131072),
     "ROPE_THETA"),
    (lambda c: c["transformer_layer_config"].update(rope_theta=500000.0, max_position_embeddings=2048, rope_scaling={
        k: v for k, v in LLAMA3_ROPE.items() if k != "original_max_position_embeddings"}), "DRAFT_CONTEXT_SHORT"),
])
def test_each_config_fix_clears_its_finding_and_harms_no_good_draft(tmp_path, edit, code):
    target = transformers5_target(tmp_path)
    bad = write(tmp_path, "bad", SPECULATORS, edit)
    found = codes(inspect_checkpoint(bad, target=target))
    fix = found[(code, "every engine")].config_fix
    assert all(k.startswith("transformer_layer_config.") for k in fix)    # the key the speculators format reads
    def rope():
        layer = json.loads((bad / "config.json").read_text())["transformer_layer_config"]
        return read_rope(layer).computes()

    others, computed = {c for c, _ in found if c != code}, rope()
    apply_fix(bad, fix)
    after = codes(inspect_checkpoint(bad, target=target))
    # cleared, nothing new raised (the context fix writes the target's RoPE with its original context filled in, so
    # the old filled-from-2048 RoPE, a ROPE_SCALING of its own, is cleared with it)
    assert (code, "every engine") not in after and {c for c, _ in after} <= others
    assert code != "DRAFT_CONTEXT_SHORT" or rope() != computed and not after
    good = write(tmp_path, "good", SPECULATORS, lambda c: c["transformer_layer_config"].update(
        rope_scaling=LLAMA3_ROPE, rope_theta=500000.0, max_position_embeddings=131072))
    apply_fix(good, fix)
    assert not inspect_checkpoint(good, target=target).findings


def per_layer_type_target(tmp_path):
    """Llama-3.1-8B's sizes with RoPE as transformers 5 saves a model with several attention types (Gemma3):
    rope_parameters keyed by layer type, the full-attention layers' llama3 scaling apart from the sliding ones'."""
    def change(cfg):
        cfg["layer_types"] = ["sliding_attention", "full_attention"] * (cfg["num_hidden_layers"] // 2)
        cfg["rope_parameters"] = {"full_attention": {**cfg.pop("rope_scaling"), "rope_theta": cfg.pop("rope_theta")},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}
    return write(tmp_path, "target", LLAMA31, change)


@pytest.mark.parametrize("scaling, code", [
    (LLAMA3_ROPE, None),                                        # the full-attention layers' RoPE: no alarm
    ({**LLAMA3_ROPE, "factor": 4.0}, "ROPE_SCALING"),           # truly another scaling: still found
])
def test_a_per_layer_type_target_is_compared_at_its_full_attention_layers(tmp_path, scaling, code):
    target = per_layer_type_target(tmp_path)
    draft = write(tmp_path, "d", SPECULATORS, lambda c: c["transformer_layer_config"].update(
        rope_scaling=scaling, rope_theta=500000.0, max_position_embeddings=131072))
    rope = {c for c, _ in codes(inspect_checkpoint(draft, target=target)) if c.startswith(("ROPE", "DRAFT_CONTEXT"))}
    assert rope == ({code} if code else set())
    if code:
        apply_fix(draft, codes(inspect_checkpoint(draft, target=target))[(code, "every engine")].config_fix)
        assert not inspect_checkpoint(draft, target=target).findings


def test_the_rope_fix_for_a_legacy_type_target_writes_its_type_and_clears_the_finding(tmp_path):
    yarn = {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8192}
    target = write(tmp_path, "target", LLAMA31, lambda c: c.update(rope_scaling=yarn))
    draft = write(tmp_path, "d", SPECULATORS, lambda c: c["transformer_layer_config"].update(
        rope_theta=500000.0, max_position_embeddings=131072))
    fix = codes(inspect_checkpoint(draft, target=target))[("ROPE_SCALING", "every engine")].config_fix
    params = fix["transformer_layer_config.rope_parameters"]
    assert (params["rope_type"], params["factor"], "type" in params) == ("yarn", 4.0, False)
    assert fix["transformer_layer_config.rope_scaling"]["rope_type"] == "yarn"
    apply_fix(draft, fix)
    assert not inspect_checkpoint(draft, target=target).findings
    layer = json.loads((draft / "config.json").read_text())["transformer_layer_config"]
    assert read_rope({"rope_parameters": layer["rope_parameters"], "max_position_embeddings": 131072}).kind == "yarn"

# ---------------------------------------------------------------------------- the missed classes

def eagle31(cfg):
    cfg.update(fc_norm=True, norm_output=True, norm_before_residual=False)


def test_eagle31_on_a_vllm_build_before_pr_46488_is_named_for_the_build_asked(tmp_path):
    draft = write(tmp_path, "d", SPECULATORS, eagle31)
    old = inspect_checkpoint(draft, builds=engine_builds("vllm", "0.24.0"))
    for flag in ("fc_norm", "norm_output"):
        hit = [f for f in old.findings if f.code == "FLAG_UNREAD_BY_BUILD" and f.text.startswith(flag)
               and f.engine.startswith("vLLM (build")]
        assert hit and hit[0].engine == "vLLM (build 0.24.0)" and "0.25.0 (PR #46488" in hit[0].text
        assert hit[0].fix == "Serve with vLLM >= 0.25.0."
        assert old.norm_flags[flag].by_engine["vllm"].value is False
    new = inspect_checkpoint(draft, builds=engine_builds("vllm", "0.25.0"))
    assert not [f for f in new.findings if f.engine.startswith("vLLM (build")]
    assert new.norm_flags["fc_norm"].by_engine["vllm"].value is True


def test_norm_before_fc_nested_in_eagle_config_is_read_where_each_build_reads_it(tmp_path):
    draft = write(tmp_path, "d", SPECFORGE, lambda c: c.setdefault("eagle_config", {}).update(norm_before_fc=True))
    newest = inspect_checkpoint(draft)
    by = newest.norm_flags["norm_before_fc"].by_engine
    assert by["vllm"].value is True and "eagle_config.norm_before_fc" in by["vllm"].how
    assert by["sglang"].value is True
    vllm21 = codes(inspect_checkpoint(draft, builds=engine_builds("vllm", "0.21.0")))
    hit = vllm21[("FLAG_WRITTEN_WHERE_UNREAD", "vLLM (build 0.21.0)")]
    assert "PR #36545" in hit.text and "top level" in hit.fix
    sglang16 = codes(inspect_checkpoint(draft, builds=engine_builds("sglang", "0.5.16")))
    assert "0.5.17 (PR #32334" in sglang16[("FLAG_UNREAD_BY_BUILD", "SGLang (build 0.5.16)")].text
    apply_fix(draft, {"norm_before_fc": True})     # the fix: also at the top level
    assert ("FLAG_WRITTEN_WHERE_UNREAD", "vLLM (build 0.21.0)") not in codes(
        inspect_checkpoint(draft, builds=engine_builds("vllm", "0.21.0")))


def test_four_aux_ids_with_an_fc_built_for_three_get_their_own_code(tmp_path):
    folder = tmp_path / "d"
    shutil.copytree(bundled.ROOT / "data" / "models" / "draft-healthy", folder)
    cfg = json.loads((folder / "config.json").read_text())
    ids = cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
    cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = [*ids, ids[-1] + 1]
    (folder / "config.json").write_text(json.dumps(cfg))
    target = bundled.ROOT / "data" / "models" / "target"
    hit = codes(inspect_checkpoint(folder, target=target))[("AUX_IDS_FC_WIDTH", "every engine")]
    assert hit.severity == Severity.CRITICAL and f"= 3 x {cfg['hidden_size']}" in hit.text
    assert "sizes fc for 4 from eagle_config.eagle_aux_hidden_state_layer_ids: loading fails" in hit.text
    draft = load_draft(folder, device="cpu", require_embedding=False, check_vocab=False)
    target_cfg = json.loads((target / "config.json").read_text())
    found = {f.code for f in config_findings(draft, target_cfg)}
    assert "AUX_IDS_FC_WIDTH" in found and not found & {"TARGET_HIDDEN_SIZE", "FC_WIDTH"}


def test_a_qwen3_draft_on_vllm_before_qwen3_eagle3_is_decided_by_the_build_asked(tmp_path):
    draft = write(tmp_path, "d", "vllm-project__speculators__qwen3-8b-eagle3-qwen3-arch__REBUILT.json")
    old = inspect_checkpoint(draft, builds=engine_builds("vllm", "0.23.0")).serving["vllm"].problems
    assert old and "before 0.24.0" in old[0] and "loading fails" in old[0]
    assert inspect_checkpoint(draft, builds=engine_builds("vllm", "0.24.0")).serving["vllm"].problems == []
    assert inspect_checkpoint(draft).serving["vllm"].problems == []


def test_a_draft_sliding_window_is_said_per_engine(tmp_path):
    draft = write(tmp_path, "d", SPECULATORS, lambda c: c["transformer_layer_config"].update(
        sliding_window=2048, layer_types=["sliding_attention"]))
    found = codes(inspect_checkpoint(draft))
    hit = found[("DRAFT_WINDOW", "SGLang (0.5.17+ (EAGLE 3.1: PRs #24663, #26506; norm_before_fc: PR #32334))")]
    assert hit.fix == "Launch with --speculative-draft-window-size 2048." and "0.5.12" in hit.text
    assert not [k for k in found if k[0] == "DRAFT_WINDOW" and k[1].startswith("vLLM")]   # vLLM reads layer_types


def test_engine_findings_follow_the_build(tmp_path):
    from eagle3lab.models.draft import DraftConfig, Eagle3Draft

    geo = dict(hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=64, max_position_embeddings=64)
    d31 = Eagle3Draft(DraftConfig(**geo, fc_norm=True, norm_output=True), profile="speculators", fmt="speculators")
    assert "FLAG_UNREAD_BY_BUILD" in {f.code for f in engine_findings(d31, "vllm", engine_version="0.24.0")}
    assert "FLAG_UNREAD_BY_BUILD" not in {f.code for f in engine_findings(d31, "vllm")}
    windowed = Eagle3Draft(DraftConfig(**geo, extra={"sliding_window": 16, "layer_types": ["sliding_attention"]}),
                           profile="speculators", fmt="speculators")
    found = {f.code: f for f in engine_findings(windowed, "sglang")}
    assert found["DRAFT_WINDOW"].fix == "Launch with --speculative-draft-window-size 16."
    assert "DRAFT_WINDOW" not in {f.code for f in engine_findings(windowed, "sglang", launch_window=16)}
    assert "DRAFT_WINDOW" not in {f.code for f in engine_findings(windowed, "vllm")}
    mla = dict(attention="mla", q_lora_rank=12, kv_lora_rank=16, qk_nope_head_dim=6, qk_rope_head_dim=4, v_head_dim=5)
    nbf = Eagle3Draft(DraftConfig(**geo, **mla, norm_before_fc=True), profile="sglang", fmt="sglang")
    for engine, reader in (("vllm", "deepseek_eagle3.py"), ("sglang", "kimi_k25_eagle3.py")):
        hit = {f.code: f for f in engine_findings(nbf, engine)}["FLAG_UNREAD_FOR_FAMILY"]
        assert reader in hit.text
    assert for_build("vllm", "0.24.0").families.attention.keys() >= {"qwen3"}
