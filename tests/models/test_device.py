from __future__ import annotations

import pytest
import torch

from eagle3lab.models.device import resolve_device, resolve_device_map, resolve_dtype


def test_auto_picks_cuda_bf16_when_present_else_cpu_fp32():
    if torch.cuda.is_available():
        assert resolve_device("auto").type == "cuda" and resolve_dtype("auto") == torch.bfloat16
    else:
        assert resolve_device("auto") == torch.device("cpu") and resolve_dtype("auto") == torch.float32


def test_explicit_values_are_taken_literally():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_dtype("bf16", "cpu") == torch.bfloat16
    assert resolve_dtype(torch.float16) == torch.float16


def test_bad_dtype_names_the_choices():
    with pytest.raises(ValueError, match="dtype='float8'.*expected 'auto' or one of"):
        resolve_dtype("float8")


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cuda_without_gpu_says_what_to_do():
    with pytest.raises(RuntimeError, match="sees no CUDA GPU.*device='auto'"):
        resolve_device("cuda")


def test_device_map_auto_needs_accelerate_and_one_device_is_a_map_too():
    assert resolve_device_map("auto") == "auto"  # accelerate is in the lock
    # no map: the one device is a map, so that from_pretrained fills it as it reads (never a host copy first)
    assert resolve_device_map(None, "cpu") == {"": torch.device("cpu")}
    assert resolve_device_map({"": "cpu"}, "cpu") == {"": "cpu"}
