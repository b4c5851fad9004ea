"""Dataset capture to disk in vLLM's extract_hidden_states layout, and reading it back."""

import json

import pytest
import torch
from safetensors.torch import save_file

from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.capture import capture_resid
from eagle3lab.models.hidden_dump import MANIFEST, HiddenDump, dump_hidden_states, read_hidden_file
from eagle3lab.models.target import tiny_target

PROMPTS = ["The quick brown fox jumps over the lazy dog.", "Draft tokens.", "An EAGLE-3 draft reads three streams."]


@pytest.fixture(scope="module")
def target():
    return tiny_target("qwen3", num_layers=6, seed=5)


def test_dump_reads_back_identically(target, tmp_path):
    dump = dump_hidden_states(target, PROMPTS, tmp_path / "dump", points=[0, 3, 6], batch_size=1, progress=False)
    assert len(dump) == 3 and dump.resid == (0, 3, 6)
    manifest = json.loads((tmp_path / "dump" / MANIFEST).read_text())
    assert manifest["resid"] == [0, 3, 6] and manifest["vllm_layer_ids"] == [0, 3, 6]
    assert manifest["num_layers"] == 6 and manifest["hidden_size"] == 64
    for i, prompt in enumerate(PROMPTS):
        ids = target.tokenizer(prompt)["input_ids"]
        want = capture_resid(target, torch.tensor([ids]), [0, 3, 6])
        sample = dump[i]
        assert sample.token_ids.dtype == torch.long and sample.token_ids.tolist() == ids
        assert sample.hidden_states.shape == (len(ids), 3, 64)
        for k in (0, 3, 6):
            assert torch.equal(sample.states[k], want[k])  # bit for bit
        assert torch.equal(sample.fc_input([3, 0]).tensor, torch.cat([want[3], want[0]], -1))
        assert manifest["samples"][i]["num_tokens"] == len(ids)


def test_batched_dump_strips_padding(target, tmp_path):
    dump = dump_hidden_states(target, PROMPTS, tmp_path / "d", batch_size=3, progress=False)
    assert dump.resid == (2, 3, 6)  # default: resid[2, N//2, N-3] plus resid[N]
    for i, prompt in enumerate(PROMPTS):
        ids = target.tokenizer(prompt)["input_ids"]
        want = capture_resid(target, torch.tensor([ids]), [2, 6])
        assert dump[i].token_ids.tolist() == ids
        torch.testing.assert_close(dump[i].states[6], want[6], rtol=1e-4, atol=1e-5)
    assert [s.path.name for s in dump] == [f"sample_{i:06d}.safetensors" for i in range(3)]
    assert not list((tmp_path / "d").glob(".*"))  # no temp files left behind


def test_token_id_prompts_and_refusals(target, tmp_path):
    dump = dump_hidden_states(target, [[5, 6, 7], torch.tensor([9, 10])], tmp_path / "ids", points=[1], progress=False)
    assert dump[1].token_ids.tolist() == [9, 10]
    with pytest.raises(Eagle3LabError, match="existing dump"):
        dump_hidden_states(target, [[5]], tmp_path / "ids", points=[1], progress=False)
    assert dump_hidden_states(target, [[5]], tmp_path / "ids", points=[1], overwrite=True, progress=False)
    with pytest.raises(Eagle3LabError, match="empty"):
        dump_hidden_states(target, ["ok", ""], tmp_path / "e", progress=False)
    with pytest.raises(Eagle3LabError, match="ascending"):
        dump_hidden_states(target, ["ok"], tmp_path / "o", points=[3, 1], progress=False)


def test_reads_a_vllm_style_folder(tmp_path):
    # What vLLM's ExampleHiddenStatesConnector writes: <req_id>.safetensors, no manifest.
    torch.manual_seed(0)
    for req in ("req-a", "req-b"):
        save_file({"hidden_states": torch.randn(5, 3, 8, dtype=torch.bfloat16),
                   "token_ids": torch.arange(5)}, str(tmp_path / f"{req}.safetensors"))
    with pytest.raises(Eagle3LabError, match="vllm_layer_ids"):
        HiddenDump(tmp_path)
    # Written unsorted in the config; vLLM captured (and stored) them in ascending order.
    dump = HiddenDump(tmp_path, vllm_layer_ids=[29, 2, 16], num_layers=32)
    assert dump.resid == (2, 16, 29)
    sample = dump[0]
    assert sample.hidden_states.dtype == torch.bfloat16 and sample.fc_input().tensor.shape == (1, 5, 24)
    with pytest.raises(Eagle3LabError, match="2 layers"):
        HiddenDump(tmp_path, vllm_layer_ids=[2, 16])[0]


def test_bad_files(tmp_path):
    save_file({"hidden_states": torch.zeros(4, 2, 8)}, str(tmp_path / "x.safetensors"))
    with pytest.raises(Eagle3LabError, match="token_ids"):
        read_hidden_file(tmp_path / "x.safetensors")
    save_file({"hidden_states": torch.zeros(4, 2, 8), "token_ids": torch.arange(3)}, str(tmp_path / "y.safetensors"))
    with pytest.raises(Eagle3LabError, match="T = len"):
        read_hidden_file(tmp_path / "y.safetensors")
    (tmp_path / "z.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{trunc")
    with pytest.raises(Eagle3LabError, match="complete safetensors"):
        read_hidden_file(tmp_path / "z.safetensors")
    with pytest.raises(Eagle3LabError, match="no such path"):
        HiddenDump(tmp_path / "missing")
