"""Weights go straight to their device (issue 33): what ``from_pretrained`` is handed, and the host memory a load
takes, measured in a child process on a ~440 MB fp32 target loaded as bf16."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

from eagle3lab import bundled
from eagle3lab.models.device import dtype_name, pread_in_transformers
from eagle3lab.models.target import load_target


@pytest.fixture(scope="module")
def tiny_folder():
    if not (bundled.TARGET / "config.json").exists():
        pytest.skip("the bundled target is not built (make data)")
    return bundled.TARGET


def _spy(monkeypatch):
    """Record what AutoModelForCausalLM.from_pretrained is handed, whether transformers' shards are read by pread
    during the call, and any .to() on the model it returns."""
    import transformers
    import transformers.modeling_utils as mu

    calls, moves, original_open = [], [], mu.safe_open
    real = transformers.AutoModelForCausalLM.from_pretrained

    def from_pretrained(*args, **kwargs):
        calls.append({**kwargs, "pread": mu.safe_open is not original_open})
        model = real(*args, **kwargs)
        monkeypatch.setattr(model, "to", lambda *a, **k: moves.append((a, k)) or model)
        return model

    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", from_pretrained)
    return calls, moves, original_open


def test_from_pretrained_gets_a_device_map_and_the_dtype_and_nothing_moves_after(monkeypatch, tiny_folder):
    import transformers.modeling_utils as mu

    calls, moves, original_open = _spy(monkeypatch)
    target = load_target(tiny_folder, device="cpu", dtype="bfloat16")
    assert calls[0]["device_map"] == {"": torch.device("cpu")} and calls[0]["dtype"] == torch.bfloat16
    assert calls[0]["pread"] and mu.safe_open is original_open      # patched for the call only
    assert moves == [] and target.dtype == torch.bfloat16 and target.device == torch.device("cpu")
    load_target(tiny_folder, device="cpu", device_map="auto")    # several GPUs: accelerate's map, passed on
    assert calls[1]["device_map"] == "auto" and calls[1]["dtype"] == torch.float32 and moves == []


def test_pread_reads_the_same_numbers_as_a_mapped_file(tiny_folder):
    from transformers import AutoModelForCausalLM

    mapped = AutoModelForCausalLM.from_pretrained(tiny_folder, dtype=torch.float32)
    with pread_in_transformers():
        read = AutoModelForCausalLM.from_pretrained(tiny_folder, dtype=torch.float32)
    pairs = list(zip(mapped.state_dict().items(), read.state_dict().items()))
    assert len(pairs) > 10 and all(a == b and torch.equal(x, y) for (a, x), (b, y) in pairs)


_CHILD = r"""
import json, sys
from eagle3lab.models.target import load_target

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(key + ":"))

def growth(**kw):
    with open("/proc/self/clear_refs", "w") as f:   # 5: reset the peak (VmHWM) to the current RSS
        f.write("5")
    base = status("VmRSS")
    target = load_target(sys.argv[1], dtype="bfloat16", **kw)
    return target, status("VmHWM") - base

load_target(sys.argv[2], device="cpu")        # imports and lazy setup, before any baseline
on_meta, meta = growth(device="meta")          # a device that is not host memory
on_cpu, cpu = growth(device="cpu")
print(json.dumps({"meta": meta, "cpu": cpu, "dtype": str(on_cpu.dtype), "meta_device": str(on_meta.device)}))
"""

def _zeros_target(folder, hidden=512, layers=32, vocab=8000) -> int:
    """A Llama target of zeros in fp32 (the numbers do not matter to memory); returns its bytes."""
    from safetensors.torch import save_file
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=1408, num_hidden_layers=layers,
                         num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=256,
                         tie_word_embeddings=False, architectures=["LlamaForCausalLM"])
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in LlamaForCausalLM(config).state_dict().items()}
    folder.mkdir()
    config.save_pretrained(folder)
    save_file({k: torch.zeros(s) for k, s in shapes.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    return sum(torch.Size(s).numel() for s in shapes.values()) * 4


def test_loading_keeps_the_weights_off_the_host(tmp_path, tiny_folder):
    """The peak RSS of a child loading a 440 MB fp32 target (32 layers) as bf16 (a 220 MB copy). On a device that
    is not host memory (meta, standing in for a GPU) the host never holds the model: growth under half the bf16
    copy (measured 62 MB: a few tensors in flight; loading on the host then ``.to(device)``, as before issue 33,
    grew by 637 MB). On the CPU the bf16 model itself is there and little else: under 1.5 bf16 copies (measured
    213 MB; transformers' mapped shards kept the file's pages in RSS beside it: 446 MB)."""
    bf16 = _zeros_target(tmp_path / "big") / 2 / 2**20
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path / "big"), str(tiny_folder)], env=env,
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-2000:]
    grew = json.loads(out.stdout.strip().splitlines()[-1])
    assert grew["dtype"] == "torch.bfloat16" and grew["meta_device"] == "meta"
    assert grew["meta"] < bf16 / 2, grew
    assert grew["cpu"] < 1.5 * bf16, grew


def test_dtype_name_is_what_json_records():
    assert dtype_name(torch.bfloat16) == "bfloat16" and dtype_name(torch.float32) == "float32"


def test_target_head_reads_onto_the_device_in_the_dtype_asked(tiny_folder):
    from eagle3lab.models.state_bank import TargetHead

    stored = TargetHead.from_folder(tiny_folder)
    head = TargetHead.from_folder(tiny_folder, device="cpu", dtype=torch.bfloat16)
    assert stored.lm_head.dtype == torch.float32 and head.lm_head.dtype == head.norm_weight.dtype == torch.bfloat16
    assert torch.equal(head.lm_head, stored.lm_head.to(torch.bfloat16)) and head.lm_head.device.type == "cpu"


@pytest.mark.parametrize("ships_code", [True, False])
def test_an_unknown_model_type_says_whether_the_checkpoint_ships_its_code(tmp_path, ships_code):
    """The hint follows config.json (``auto_map``: the checkpoint names its own code), not transformers' wording."""
    from eagle3lab.errors import Eagle3LabError

    config = {"model_type": "not_a_transformers_model", "architectures": ["NotAModel"]}
    if ships_code:
        config["auto_map"] = {"AutoConfig": "configuration_x.XConfig"}
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(Eagle3LabError, match="model_type / architectures") as err:
        load_target(tmp_path, device="cpu")
    assert ("trust_remote_code=True" in str(err.value)) is ships_code, str(err.value)
    assert ("draft checkpoint" in str(err.value)) is not ships_code
