"""load_target on real (tiny, random) checkpoints of each supported family, and its bad-input errors."""

import pytest
import torch

from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.target import (
    TINY_ARCHS,
    Target,
    check_draft_fits,
    load_target,
    save_target,
    tiny_config,
    tiny_target,
    tiny_tokenizer,
)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """One tiny checkpoint directory per family, written like a real one (safetensors + tokenizer)."""
    root = tmp_path_factory.mktemp("targets")
    out = {}
    for arch in TINY_ARCHS:
        target = tiny_target(arch, num_layers=3, seed=1)
        out[arch] = (target, save_target(target, root / arch))
    return out


@pytest.mark.parametrize("arch", TINY_ARCHS)
def test_load_target_round_trip(saved, arch):
    original, path = saved[arch]
    assert (path / "config.json").exists() and list(path.glob("*.safetensors"))
    target = load_target(path, device="cpu")
    assert isinstance(target, Target)
    assert target.num_layers == 3 and target.hidden_size == 64 and target.vocab_size == 300
    assert target.arch == tiny_config(arch).architectures[0]
    assert target.device == torch.device("cpu") and target.dtype == torch.float32
    assert not target.model.training
    assert not any(p.requires_grad for p in target.model.parameters())
    assert target.tokenizer is not None and len(target.tokenizer) == 300
    batch = target.encode(["The quick brown fox", "drafts"])
    with torch.no_grad():
        got = target.model(**batch).logits
        want = original.model(**batch).logits
    assert torch.equal(got, want)


def test_load_target_dtype(saved):
    target = load_target(saved["llama"][1], device="cpu", dtype="bf16")
    assert target.dtype == torch.bfloat16


def test_hub_name_offline_fails_clearly(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(Eagle3LabError) as err:
        load_target("meta-llama/Llama-3.1-8B", device="cpu")
    msg = str(err.value)
    assert "meta-llama/Llama-3.1-8B" in msg and "HF_HUB_OFFLINE=1" in msg and "--local-dir" in msg


def test_missing_directory_and_config(tmp_path):
    with pytest.raises(Eagle3LabError, match="no such directory"):
        load_target(tmp_path / "nope", device="cpu")
    with pytest.raises(Eagle3LabError, match="config.json"):
        load_target(tmp_path, device="cpu")


def test_tokenizer_larger_than_vocabulary_is_refused():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(tiny_config("llama", vocab_size=200))
    with pytest.raises(Eagle3LabError, match="200") as err:
        Target.wrap(model, tokenizer=tiny_tokenizer(300))
    assert "300 tokens" in str(err.value) and "device-side assert" in str(err.value)


def test_tokenizer_smaller_than_vocabulary_warns():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(tiny_config("llama", vocab_size=320))
    target = Target.wrap(model, tokenizer=tiny_tokenizer(300))
    assert [w.code for w in target.warnings] == ["TOKENIZER_PADDING"] and "300 tokens" in target.warnings[0].text


def test_encode_rejects_empty_prompts():
    target = tiny_target("llama", num_layers=2)
    with pytest.raises(Eagle3LabError, match="empty"):
        target.encode(["fine", "  "])
    with pytest.raises(Eagle3LabError, match="empty"):
        target.encode([])
    batch = target.encode(["a b c d e f", "a"], padding_side="left")
    assert batch["attention_mask"][1, 0] == 0 and batch["attention_mask"][1, -1] == 1


def test_check_draft_fits():
    facts = tiny_target("llama", num_layers=2).facts()
    check_draft_fits(facts, target_hidden_size=64, vocab_size=300, fc_in_features=192, num_aux=3, num_target_layers=2,
                     device=torch.device("cpu"))
    with pytest.raises(Eagle3LabError, match="target_hidden_size"):
        check_draft_fits(facts, target_hidden_size=4096)
    with pytest.raises(Eagle3LabError, match="vocab_size"):
        check_draft_fits(facts, vocab_size=128256)
    with pytest.raises(Eagle3LabError, match="fc.weight"):
        check_draft_fits(facts, fc_in_features=128, num_aux=3)
    with pytest.raises(Eagle3LabError, match="num_target_layers.*2 .this target's decoder layers"):
        check_draft_fits(facts, num_target_layers=61)
    with pytest.raises(Eagle3LabError, match="device"):
        check_draft_fits(facts, device=torch.device("meta"))
