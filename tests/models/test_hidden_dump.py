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


# --- a dump is checked like a checkpoint: what the manifest states against what the files hold ---

def _rewrite(path, **tensors):
    """Replace one sample file by other tensors (as a cut copy or another writer would leave it)."""
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))


@pytest.fixture(scope="module")
def greedy_seqs(target):
    from eagle3lab.decoding.evaluate import greedy_dataset

    return greedy_dataset(target, PROMPTS, max_new_tokens=8)


@pytest.fixture()
def greedy_dump(target, greedy_seqs, tmp_path):
    seqs, lens = greedy_seqs
    dump = dump_hidden_states(target, seqs, tmp_path / "g", points=[0, 3, 6], prompt_lens=lens, greedy=True,
                              progress=False)
    return dump, seqs, lens


def test_prompt_lens_travel_with_the_dump(target, greedy_dump):
    from eagle3lab.models.state_bank import TargetHead, bank_from_dump

    dump, seqs, lens = greedy_dump
    assert dump.prompt_lens == lens and dump.continuation == "greedy"
    assert [s.prompt_len for s in dump] == lens
    bank = bank_from_dump(dump, TargetHead.from_target(target))   # passes the resid[N] checks
    assert bank.prompt_lens == lens and bank.lengths == [len(s) for s in seqs]


def test_a_dump_shorter_than_its_manifest(greedy_dump):
    dump, seqs, _ = greedy_dump
    first = dump.files[0]
    data = read_hidden_file(first)
    _rewrite(first, hidden_states=data["hidden_states"][:-3], token_ids=data["token_ids"][:-3])
    with pytest.raises(Eagle3LabError, match=rf"{first.name}: key 'token_ids': expected {len(seqs[0])} tokens, "
                       rf"as manifest.json states, found {len(seqs[0]) - 3} \(shorter than its manifest\)"):
        dump[0]
    dump.files[2].unlink()
    with pytest.raises(Eagle3LabError, match=r"manifest.json: key 'samples': expected the 3 files it lists, found 1 of "
                       r"them missing \(sample_000002.safetensors\).*shorter than its manifest"):
        HiddenDump(dump.path)


def test_rows_missing_for_some_requests(greedy_dump):
    # sglang#26163: fewer return_hidden_states rows than tokens under speculative decoding
    dump, seqs, _ = greedy_dump
    data = read_hidden_file(dump.files[1])
    _rewrite(dump.files[1], hidden_states=data["hidden_states"][:-2], token_ids=data["token_ids"])
    n = len(seqs[1])
    with pytest.raises(Eagle3LabError, match=rf"sample_000001.safetensors: key 'hidden_states'.*found {n - 2} rows for "
                       rf"{n} token ids: rows missing for this request.*sglang#26163"):
        dump[1]
    assert dump[0].hidden_states.shape[0] == len(seqs[0])   # the other requests still read


def test_layers_first_where_token_major_is_expected(greedy_dump):
    dump, seqs, _ = greedy_dump
    data = read_hidden_file(dump.files[0])
    _rewrite(dump.files[0], hidden_states=data["hidden_states"].transpose(0, 1), token_ids=data["token_ids"])
    n = len(seqs[0])
    with pytest.raises(Eagle3LabError, match=rf"sample_000000.safetensors: key 'hidden_states': expected \[T, n_layers, "
                       rf"H\] = \({n}, 3, 64\), found \(3, {n}, 64\), i.e. \[n_layers, T, H\] \(layers first\)"):
        dump[0]


def test_layers_in_another_order_than_stated(target, greedy_dump):
    from eagle3lab.models.state_bank import TargetHead, bank_from_dump

    dump, _, _ = greedy_dump
    manifest = json.loads((dump.path / MANIFEST).read_text())
    # 1. a manifest stating an order vLLM never stores
    (dump.path / MANIFEST).write_text(json.dumps({**manifest, "resid": [6, 0, 3], "vllm_layer_ids": None}))
    with pytest.raises(Eagle3LabError, match=r"manifest.json: key 'resid': expected distinct resid indices in ascending "
                       r"order.*found \[6, 0, 3\]"):
        HiddenDump(dump.path)
    (dump.path / MANIFEST).write_text(json.dumps({**manifest, "vllm_layer_ids": [3, 6, 2]}))
    with pytest.raises(Eagle3LabError, match=r"vllm_layer_ids \[3, 6, 2\] in layer order: \[2, 3, 6\], found \[0, 3, 6\]"):
        HiddenDump(dump.path)
    (dump.path / MANIFEST).write_text(json.dumps(manifest))
    # 2. a file whose own metadata names another order
    data = read_hidden_file(dump.files[0])
    save_file({"hidden_states": data["hidden_states"][:, [1, 0, 2]].contiguous(), "token_ids": data["token_ids"]},
              str(dump.files[0]), metadata={"resid": "[3, 0, 6]"})
    with pytest.raises(Eagle3LabError, match=r"sample_000000.safetensors: key 'resid': expected the points manifest.json "
                       r"states, \[0, 3, 6\], in that order, found \[3, 0, 6\]"):
        dump[0]
    # 3. files with no metadata (as vLLM writes them), reversed: the numbers show it
    for f in dump.files:
        data = read_hidden_file(f)
        _rewrite(f, hidden_states=data["hidden_states"].flip(1), token_ids=data["token_ids"])
    with pytest.raises(Eagle3LabError, match=r"key 'resid': expected the state stated as resid\[6\] predicting the "
                       r"dump's greedy continuation \(at least 90% of its tokens\), found \d+ of 24"):
        bank_from_dump(HiddenDump(dump.path), TargetHead.from_target(target))


def test_a_post_norm_state_where_resid_n_is_stated(target, greedy_dump):
    from eagle3lab.models.state_bank import TargetHead, bank_from_dump

    dump, _, _ = greedy_dump
    for f in dump.files:
        data = read_hidden_file(f)
        hs = data["hidden_states"].clone()
        with torch.no_grad():
            hs[:, 2] = target.final_norm(hs[:, 2])
        _rewrite(f, hidden_states=hs, token_ids=data["token_ids"])
    with pytest.raises(Eagle3LabError, match=r"expected resid\[6\] \(the last layer's output before the final norm\) in "
                       r"the slot stated as resid\[6\], found the final post-norm state there"):
        bank_from_dump(HiddenDump(dump.path), TargetHead.from_target(target))
