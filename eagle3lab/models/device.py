"""Where models run: the one place that turns "auto" into a device and a dtype.

CUDA (bf16) when the kernel has a GPU, else CPU (fp32). A large target can be spread over
several GPUs with ``device_map="auto"`` (needs ``accelerate``).
"""

from __future__ import annotations

import torch

_DTYPES = {
    "float32": torch.float32, "fp32": torch.float32,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16,
}


def resolve_device(device: str | torch.device | None = "auto") -> torch.device:
    """``"auto"``/None -> first CUDA device if present else CPU; anything else is taken literally."""
    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(
            f"device={device!r} was asked for, but this kernel sees no CUDA GPU "
            "(torch.cuda.is_available() is False). Use device='auto' or 'cpu', or start the "
            "kernel on the GPU machine (see README: 'Running on a remote GPU')."
        )
    return dev


def resolve_dtype(dtype: str | torch.dtype | None = "auto", device: str | torch.device | None = "auto") -> torch.dtype:
    """``"auto"`` -> bf16 on CUDA, fp32 on CPU (bf16 matmuls on CPU are slow and less exact)."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype is None or dtype == "auto":
        return torch.bfloat16 if resolve_device(device).type == "cuda" else torch.float32
    try:
        return _DTYPES[str(dtype).lower()]
    except KeyError:
        raise ValueError(f"dtype={dtype!r} is not understood; expected 'auto' or one of {sorted(_DTYPES)}") from None


def resolve_device_map(device_map, device="auto"):
    """Validate a ``device_map`` for ``from_pretrained``; "auto" needs accelerate."""
    if device_map is None:
        return None
    if device_map == "auto":
        try:
            import accelerate  # noqa: F401
        except ImportError:
            raise RuntimeError(
                "device_map='auto' spreads the target over GPUs through the 'accelerate' package, "
                "which is not installed in this kernel: pip install accelerate"
            ) from None
    return device_map


def describe() -> dict:
    """What this kernel has: for notebook 00 and bug reports."""
    info = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
            "device_auto": str(resolve_device("auto")), "dtype_auto": str(resolve_dtype("auto")).replace("torch.", ""),
            "cpu_threads": torch.get_num_threads(), "gpus": []}
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        info["gpus"].append({"index": i, "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1)})
    return info
