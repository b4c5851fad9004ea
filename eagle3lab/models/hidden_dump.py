"""Target hidden states on disk, one safetensors file per sample, in vLLM's ``extract_hidden_states`` layout.

Each file holds ``hidden_states`` ``[T, n_layers, H]`` (the captured points in ascending layer
order, as vLLM's ExampleHiddenStatesConnector writes them) and ``token_ids`` ``[T]``. Our dumps add
``manifest.json`` naming the ``resid`` points, the target and every file. This is how a target too
big for one machine is analysed: vLLM on the cluster writes the files
(``speculative_config={"method": "extract_hidden_states", ...}``), ``HiddenDump`` reads them here.
vLLM's ``eagle_aux_hidden_state_layer_ids`` are already resid indices (id k = ``resid[k]``), except that
on DeepSeek-family targets vLLM's own capture loop (``deepseek_v2.py``, releases 0.18.0-0.33.0) cannot take
id 0 (``resid[0]``: TypeError at the first forward, so no such dump exists) and captures id N only since
PR #46973 (0.25.0); see ``eagle3lab.engines.layer_ids``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from eagle3lab.atomic import atomic_file, write_json
from eagle3lab.engines.layer_ids import default_resid, resolve_aux_layers
from eagle3lab.errors import Eagle3LabError, bad_input
from eagle3lab.models.capture import FcInput, build_fc_input, capture_resid

FORMAT = "eagle3lab-hidden-dump/1"
MANIFEST = "manifest.json"


def _as_token_lists(target, prompts, max_length):
    if isinstance(prompts, (str, torch.Tensor)):
        prompts = [prompts]
    prompts = list(prompts)
    if not prompts:
        raise bad_input("prompts", None, "at least one prompt", "[]")
    seqs = []
    for i, p in enumerate(prompts):
        if isinstance(p, str):
            if not p.strip():
                raise bad_input("prompts", None, "non-empty text", f"an empty prompt at index {i}",
                                "vLLM rejects empty prompts as well; drop it.")
            if target.tokenizer is None:
                raise Eagle3LabError("Text prompts need a tokenizer; this Target has none (pass token id lists).")
            ids = target.tokenizer(p, truncation=max_length is not None, max_length=max_length)["input_ids"]
        else:
            ids = [int(t) for t in (p.tolist() if isinstance(p, torch.Tensor) else p)]
            ids = ids[:max_length] if max_length else ids
        if not ids:
            raise bad_input("prompts", None, "at least one token per prompt", f"0 tokens at index {i}")
        seqs.append(ids)
    return seqs


def dump_hidden_states(target, prompts, out_dir, points=None, *, batch_size: int = 8, max_length: int | None = None,
                       overwrite: bool = False, progress: bool = True) -> HiddenDump:
    """Capture ``points`` (resid indices; default resid[2, N//2, N-3] plus resid[N], like speculators'
    data generation) for every prompt and write one file per sample plus ``manifest.json``."""
    from tqdm.auto import tqdm

    n = target.num_layers
    points = tuple(sorted(set(default_resid(n)) | {n})) if points is None else tuple(points)
    if list(points) != sorted(set(points)):
        raise bad_input("points", None, "distinct resid indices in ascending order (the order vLLM stores)", list(points))
    out = Path(out_dir)
    if (out / MANIFEST).exists() and not overwrite:
        raise bad_input(out / MANIFEST, None, "an empty output folder", "an existing dump",
                        "Pass overwrite=True or choose another folder.")
    out.mkdir(parents=True, exist_ok=True)
    (out / MANIFEST).unlink(missing_ok=True)  # a folder without manifest is an unfinished dump
    seqs = _as_token_lists(target, prompts, max_length)
    pad = 0
    samples = []
    bar = tqdm(total=len(seqs), desc="capturing hidden states", unit="sample", disable=not progress)
    for start in range(0, len(seqs), batch_size):
        chunk = seqs[start:start + batch_size]
        width = max(len(s) for s in chunk)
        ids = torch.tensor([s + [pad] * (width - len(s)) for s in chunk])
        mask = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in chunk])
        states = capture_resid(target, ids, points, attention_mask=mask, offload="cpu")
        stacked = torch.stack([states[k] for k in points], dim=2)  # [B, T, n_points, H]
        for j, s in enumerate(chunk):
            index = start + j
            name = f"sample_{index:06d}.safetensors"
            tensors = {"hidden_states": stacked[j, :len(s)].contiguous(), "token_ids": torch.tensor(s, dtype=torch.long)}
            with atomic_file(out / name) as tmp:
                save_file(tensors, str(tmp))
            samples.append({"file": name, "num_tokens": len(s), "prompt_index": index})
        bar.update(len(chunk))
    bar.close()
    manifest = {
        "format": FORMAT,
        "layout": "vLLM extract_hidden_states: hidden_states [T, n_layers, H], token_ids [T]",
        "resid": list(points),
        "vllm_layer_ids": list(points),  # vLLM ids are resid indices
        "target": target.describe(),
        "num_layers": n,
        "hidden_size": target.hidden_size,
        "dtype": str(target.dtype).replace("torch.", ""),
        "samples": samples,
    }
    write_json(out / MANIFEST, manifest)
    return HiddenDump(out)


@dataclass(frozen=True)
class HiddenSample:
    """One sample: ``token_ids`` [T], ``hidden_states`` [T, n, H] for the points ``resid``."""

    token_ids: torch.Tensor
    hidden_states: torch.Tensor
    resid: tuple[int, ...]
    path: Path
    num_layers: int | None = None

    @property
    def states(self) -> dict[int, torch.Tensor]:
        """resid index -> [1, T, H] (a batch of one, like ``capture_resid``)."""
        return {k: self.hidden_states[:, i].unsqueeze(0) for i, k in enumerate(self.resid)}

    def fc_input(self, order=None) -> FcInput:
        return build_fc_input(self.states, self.resid if order is None else order, num_layers=self.num_layers)


def read_hidden_file(path) -> dict[str, torch.Tensor]:
    """Read one file (ours or vLLM's), checking the two keys and their shapes."""
    path = Path(path)
    if path.suffix == ".zst" or Path(str(path) + ".zst").exists() and not path.exists():
        raise bad_input(path, None, "an uncompressed .safetensors file", "a zstd-compressed file",
                        "vLLM's online connector compresses with use_compression; run `zstd -d` on it first.")
    if not path.exists():
        raise bad_input(path, None, "a safetensors file", "no such file")
    try:
        data = load_file(str(path), device="cpu")
    except Exception as err:  # safetensors raises its own error types for truncated files
        raise bad_input(path, None, "a complete safetensors file", f"unreadable ({err})",
                        "Was it still being written? vLLM holds a .lock file until the write ends.") from None
    missing = [k for k in ("hidden_states", "token_ids") if k not in data]
    if missing:
        raise bad_input(path, ",".join(missing), "keys hidden_states and token_ids (vLLM extract_hidden_states)",
                        sorted(data))
    hs, tok = data["hidden_states"], data["token_ids"]
    if hs.dim() != 3 or tok.dim() != 1 or hs.shape[0] != tok.shape[0]:
        raise bad_input(path, "hidden_states", "[T, n_layers, H] with T = len(token_ids)",
                        f"hidden_states {tuple(hs.shape)}, token_ids {tuple(tok.shape)}")
    return data


class HiddenDump:
    """Read a dump folder (ours, with manifest.json, or vLLM's, given ``vllm_layer_ids``) or one file.

    ``vllm_layer_ids``: the ``eagle_aux_hidden_state_layer_ids`` vLLM was started with (resid indices;
    vLLM stores them in ascending order whatever order they were written in).
    """

    def __init__(self, path, vllm_layer_ids=None, num_layers: int | None = None):
        self.path = Path(path)
        self.manifest = None
        if self.path.is_dir() and (self.path / MANIFEST).exists():
            self.manifest = json.loads((self.path / MANIFEST).read_text())
            if self.manifest.get("format") != FORMAT:
                raise bad_input(self.path / MANIFEST, "format", FORMAT, self.manifest.get("format"))
            self.resid = tuple(self.manifest["resid"])
            self.num_layers = self.manifest.get("num_layers")
            self.files = [self.path / s["file"] for s in self.manifest["samples"]]
        elif self.path.is_dir() or self.path.is_file():
            if vllm_layer_ids is None:
                raise bad_input(self.path, MANIFEST, "a manifest.json (eagle3lab dump) or vllm_layer_ids=",
                                "neither", "For a vLLM dump pass the eagle_aux_hidden_state_layer_ids vLLM was "
                                "given; an eagle3lab folder without manifest is an unfinished dump.")
            res = resolve_aux_layers("vllm", list(vllm_layer_ids), num_layers)
            self.resid, self.num_layers = res.resid, num_layers
            self.files = (sorted(self.path.glob("*.safetensors")) if self.path.is_dir() else [self.path])
            if not self.files:
                raise bad_input(self.path, None, "*.safetensors files", "none")
        else:
            raise bad_input(self.path, None, "a dump folder or a .safetensors file", "no such path")

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> HiddenSample:
        path = self.files[i]
        data = read_hidden_file(path)
        hs = data["hidden_states"]
        if hs.shape[1] != len(self.resid):
            raise bad_input(path, "hidden_states", f"{len(self.resid)} layers for resid {list(self.resid)}",
                            f"{hs.shape[1]} layers", "The layer ids given do not match what the engine captured.")
        if self.manifest is not None and hs.shape[2] != self.manifest["hidden_size"]:
            raise bad_input(path, "hidden_states", f"hidden size {self.manifest['hidden_size']}", hs.shape[2])
        return HiddenSample(token_ids=data["token_ids"], hidden_states=hs, resid=self.resid, path=path,
                            num_layers=self.num_layers)

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"HiddenDump({str(self.path)!r}, {len(self)} samples, resid={list(self.resid)})"
