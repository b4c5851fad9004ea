"""Where models run: the one place that turns "auto" into a device and a dtype, and that reads weights onto it.

CUDA (bf16) when the kernel has a GPU, else CPU (fp32). A large target can be spread over
several GPUs with ``device_map="auto"`` (needs ``accelerate``); one device is a device map too
(``{"": device}``), so that every tensor goes to its device as it is read, never through a host copy.
Weights are read with ``pread(2)``, not memory-mapped: a mapped shard keeps every page read in the
process's RSS until the whole model is loaded (issue 33: 19.9 GB of host RSS for an 8B target on a GPU).
"""

from __future__ import annotations

import contextlib

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


def dtype_name(dtype) -> str:
    """``torch.bfloat16`` -> ``"bfloat16"``: how JSON outputs and sessions record a dtype."""
    return str(dtype).removeprefix("torch.")


def _indexed(device: torch.device) -> torch.device:
    """``cuda`` -> ``cuda:<current>``: a device map and a copy name one GPU."""
    if device.type == "cuda" and device.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return device


def resolve_device_map(device_map, device="auto"):
    """The ``device_map`` for ``from_pretrained``: None -> ``{"": device}`` (one device, filled as the weights are
    read); "auto" (needs accelerate) or an explicit map is passed on."""
    if device_map is None:
        return {"": _indexed(resolve_device(device))}
    if device_map == "auto":
        try:
            import accelerate  # noqa: F401
        except ImportError:
            raise RuntimeError(
                "device_map='auto' spreads the target over GPUs through the 'accelerate' package, "
                "which is not installed in this kernel: pip install accelerate"
            ) from None
    return device_map


def _pread_supported() -> bool:
    """safetensors >= 0.8 reads tensor bytes with pread(2) when asked (``backend="pread"``)."""
    from safetensors import safe_open

    return "backend" in (getattr(safe_open, "__text_signature__", None) or "")


class _OnDevice:
    """A safetensors file open for reading by pread on the host, each tensor moved to ``device`` as it is read:
    one tensor at a time on the host, never the file (safetensors' own device= path is not used off the CPU,
    where its pread backend is documented for Apple's MPS only)."""

    def __init__(self, file, device):
        from safetensors import safe_open

        kw = {"backend": "pread"} if _pread_supported() else {}
        self.handle, self.device = safe_open(str(file), framework="pt", device="cpu", **kw), device

    def __enter__(self):
        self.handle.__enter__()
        return self

    def __exit__(self, *exc):
        return self.handle.__exit__(*exc)

    def keys(self):
        return self.handle.keys()

    def get_slice(self, key):
        return self.handle.get_slice(key)

    def get_tensor(self, key) -> torch.Tensor:
        tensor = self.handle.get_tensor(key)
        return tensor if self.device.type == "cpu" else tensor.to(self.device)


def open_safetensors(file, device="cpu") -> _OnDevice:
    """One safetensors file whose tensors land on ``device`` as they are read (``with open_safetensors(f, dev) as
    h: h.get_tensor(key)``), read by pread, not mapped."""
    return _OnDevice(file, _indexed(torch.device(device)))


@contextlib.contextmanager
def pread_in_transformers():
    """While a ``from_pretrained`` runs: transformers' shards opened with pread instead of mmap. It keeps every
    shard mapped until the model is loaded, so each page it read stayed in RSS, whatever the device map (checked on
    transformers 5.17-5.24, ``modeling_utils.safe_open``); where that name or pread is missing, nothing changes."""
    try:
        import transformers.modeling_utils as mu
    except ImportError:
        yield
        return
    original = getattr(mu, "safe_open", None)
    if original is None or not _pread_supported():
        yield
        return

    def opener(*args, backend="mmap", **kwargs):
        return original(*args, backend="pread" if backend == "mmap" else backend, **kwargs)

    mu.safe_open = opener
    try:
        yield
    finally:
        mu.safe_open = original


def describe() -> dict:
    """What this kernel has: for notebook 00 and bug reports."""
    info = {"torch": torch.__version__, "cuda_available": torch.cuda.is_available(),
            "device_auto": str(resolve_device("auto")), "dtype_auto": str(resolve_dtype("auto")).replace("torch.", ""),
            "cpu_threads": torch.get_num_threads(), "gpus": []}
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        info["gpus"].append({"index": i, "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1)})
    return info
