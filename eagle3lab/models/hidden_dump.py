"""Target hidden states on disk, one safetensors file per sample, in vLLM's ``extract_hidden_states`` layout.

Each file holds ``hidden_states`` ``[T, n_layers, H]`` (the captured points in ascending layer
order, as vLLM's ExampleHiddenStatesConnector writes them) and ``token_ids`` ``[T]``. Our dumps add
``manifest.json`` naming the ``resid`` points, the target and every file. This is how a target too
big for one machine is analysed: vLLM on the cluster writes the files
(``speculative_config={"method": "extract_hidden_states", ...}``), ``HiddenDump`` reads them here.
vLLM's ``eagle_aux_hidden_state_layer_ids`` are already resid indices (id k = ``resid[k]``), except that
on DeepSeek-family targets vLLM's own capture loop (``deepseek_v2.py``, every release read from 0.18.0) cannot
take id 0 (``resid[0]``: TypeError at the first forward, so no such dump exists) and captures id N only since
PR #46973 (0.25.0); ``eagle3lab.engines.layer_ids`` holds the rows (VLLM_FILE_ROWS).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import save_file

from eagle3lab.atomic import atomic_file, write_json
from eagle3lab.engines.layer_ids import default_resid, resolve_aux_layers
from eagle3lab.errors import Eagle3LabError, bad_input
from eagle3lab.models.capture import FcInput, build_fc_input, capture_resid

FORMAT = "eagle3lab-hidden-dump/1"
_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64}
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


def dump_hidden_states(target, prompts, out_dir, points=None, *, prompt_lens=None, greedy: bool = False,
                       batch_size: int = 8, max_length: int | None = None, overwrite: bool = False,
                       progress: bool = True) -> HiddenDump:
    """Capture ``points`` (resid indices; default resid[2, N//2, N-3] plus resid[N], like speculators'
    data generation) for every prompt and write one file per sample plus ``manifest.json``.

    ``prompt_lens``: where each sample's continuation starts (doctor measures acceptance from there);
    ``greedy``: the continuation is the target's own greedy output (then the state at resid[N] must
    predict it, which ``bank_from_dump`` checks)."""
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
    if prompt_lens is not None:
        from eagle3lab.models.capture import check_prompt_lens
        prompt_lens = check_prompt_lens(prompt_lens, [len(s) for s in seqs])
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
                save_file(tensors, str(tmp), metadata={"resid": json.dumps(list(points))})
            sample = {"file": name, "num_tokens": len(s), "prompt_index": index}
            if prompt_lens is not None:
                sample["prompt_len"] = prompt_lens[index]
            samples.append(sample)
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
        "continuation": "greedy" if greedy else None,
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
    prompt_len: int | None = None

    @property
    def states(self) -> dict[int, torch.Tensor]:
        """resid index -> [1, T, H] (a batch of one, like ``capture_resid``)."""
        return {k: self.hidden_states[:, i].unsqueeze(0) for i, k in enumerate(self.resid)}

    def fc_input(self, order=None) -> FcInput:
        return build_fc_input(self.states, self.resid if order is None else order, num_layers=self.num_layers)


def _read(path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    if path.suffix == ".zst" or Path(str(path) + ".zst").exists() and not path.exists():
        raise bad_input(path, None, "an uncompressed .safetensors file", "a zstd-compressed file",
                        "vLLM's online connector compresses with use_compression; run `zstd -d` on it first.")
    if not path.exists():
        raise bad_input(path, None, "a safetensors file", "no such file")
    try:
        with safe_open(str(path), framework="pt", device="cpu") as f:
            return {k: f.get_tensor(k) for k in f.keys()}, dict(f.metadata() or {})
    except Exception as err:  # safetensors raises its own error types for truncated files
        raise bad_input(path, None, "a complete safetensors file", f"unreadable ({err})",
                        "Was it still being written? vLLM holds a .lock file until the write ends.") from None


def _check_layout(path: Path, hs: torch.Tensor, tok: torch.Tensor, num_points: int | None) -> None:
    """hidden_states must be [T, n_layers, H] with T = len(token_ids): say which other layout it is."""
    if hs.dim() != 3 or tok.dim() != 1:
        raise bad_input(path, "hidden_states", "hidden_states [T, n_layers, H] and token_ids [T]",
                        f"hidden_states {tuple(hs.shape)}, token_ids {tuple(tok.shape)}")
    t, layers_first = tok.shape[0], hs.shape[1] == tok.shape[0] and num_points in (None, hs.shape[0])
    if hs.shape[0] == t:
        return
    want = f"[T, n_layers, H] = ({t}, {num_points if num_points is not None else 'n_layers'}, {hs.shape[2]})"
    if layers_first:
        raise bad_input(path, "hidden_states", want, f"{tuple(hs.shape)}, i.e. [n_layers, T, H] (layers first)",
                        "vLLM's extract_hidden_states stores token-major; write hidden_states.transpose(0, 1) instead.")
    if hs.shape[0] < t:
        raise bad_input(path, "hidden_states", f"{want}: one row per token id (T = len(token_ids))",
                        f"{hs.shape[0]} rows for {t} token ids: rows missing for this request",
                        "SGLang under speculative decoding returns fewer return_hidden_states rows than tokens "
                        "(sglang#26163); dump with speculation off, or with vLLM's extract_hidden_states.")
    raise bad_input(path, "hidden_states", f"{want}: one row per token id (T = len(token_ids))",
                    f"{hs.shape[0]} rows for {t} token ids: more rows than tokens",
                    "The rows and the token ids come from different requests or steps.")


def _load(path: Path, num_points: int | None) -> tuple[dict[str, torch.Tensor], dict]:
    data, meta = _read(path)
    missing = [k for k in ("hidden_states", "token_ids") if k not in data]
    if missing:
        raise bad_input(path, ",".join(missing), "keys hidden_states and token_ids (vLLM extract_hidden_states)",
                        sorted(data))
    _check_layout(path, data["hidden_states"], data["token_ids"], num_points)
    return data, meta


def read_hidden_file(path, num_points: int | None = None) -> dict[str, torch.Tensor]:
    """Read one file (ours or vLLM's), checking the two keys and their layout ``num_points`` layers wide."""
    return _load(Path(path), num_points)[0]


def _ascending(where, key: str, resid) -> tuple[int, ...]:
    resid = [int(k) for k in resid]
    if resid != sorted(set(resid)):
        raise bad_input(where, key, "distinct resid indices in ascending order (vLLM stores the points in layer "
                        "order whatever order the ids are written in)", resid,
                        "If the file really holds them in this order, reorder its hidden_states and the list.")
    return tuple(resid)


class HiddenDump:
    """Read a dump folder (ours, with manifest.json, or vLLM's, given ``vllm_layer_ids``) or one file.

    ``vllm_layer_ids``: the ``eagle_aux_hidden_state_layer_ids`` vLLM was started with (resid indices;
    vLLM stores them in ascending order whatever order they were written in). Everything the manifest
    states (files, token counts, points and their order) is checked against what the files hold.
    """

    def __init__(self, path, vllm_layer_ids=None, num_layers: int | None = None):
        self.path = Path(path)
        self.manifest = None
        self.continuation = None
        self._samples: list[dict] = []
        if self.path.is_dir() and (self.path / MANIFEST).exists():
            where = self.path / MANIFEST
            self.manifest = json.loads(where.read_text())
            if self.manifest.get("format") != FORMAT:
                raise bad_input(where, "format", FORMAT, self.manifest.get("format"))
            self.resid = _ascending(where, "resid", self.manifest["resid"])
            stated_ids = self.manifest.get("vllm_layer_ids")
            if stated_ids is not None:
                served = resolve_aux_layers("vllm", list(stated_ids), self.manifest.get("num_layers")).resid
                if tuple(sorted(served)) != self.resid:
                    raise bad_input(where, "resid", f"the points vLLM stores for vllm_layer_ids {list(stated_ids)} "
                                    f"in layer order: {sorted(served)}", list(self.resid))
            self.num_layers = self.manifest.get("num_layers")
            self.continuation = self.manifest.get("continuation")
            self._samples = list(self.manifest["samples"])
            self.files = [self.path / s["file"] for s in self._samples]
            absent = [f.name for f in self.files if not f.exists()]
            if absent:
                raise bad_input(where, "samples", f"the {len(self.files)} files it lists",
                                f"{len(absent)} of them missing ({', '.join(absent[:5])}"
                                f"{', ...' if len(absent) > 5 else ''})",
                                "The dump is shorter than its manifest: an interrupted run or copy; copy the "
                                "missing files or rerun those requests.")
        elif self.path.is_dir() or self.path.is_file():
            if vllm_layer_ids is None:
                raise bad_input(self.path, MANIFEST, "a manifest.json (eagle3lab dump) or vllm_layer_ids=",
                                "neither", "For a vLLM dump pass the eagle_aux_hidden_state_layer_ids vLLM was "
                                "given; an eagle3lab folder without manifest is an unfinished dump.")
            res = resolve_aux_layers("vllm", list(vllm_layer_ids), num_layers)
            self.resid, self.num_layers = tuple(sorted(res.resid)), num_layers
            self.files = (sorted(self.path.glob("*.safetensors")) if self.path.is_dir() else [self.path])
            if not self.files:
                raise bad_input(self.path, None, "*.safetensors files", "none")
        else:
            raise bad_input(self.path, None, "a dump folder or a .safetensors file", "no such path")

    @property
    def prompt_lens(self) -> list[int] | None:
        """Where each sample's continuation starts, when the manifest says (else None)."""
        lens = [s.get("prompt_len") for s in self._samples]
        return [int(p) for p in lens] if lens and None not in lens else None

    def __len__(self) -> int:
        return len(self.files)

    def sizes(self) -> tuple[list[int], int, torch.dtype]:
        """(tokens per sample, hidden width, dtype) from the files' headers, no tensor read: what a reader
        allocates before it streams the samples one at a time (``bank_from_dump``). Each file is checked in
        full when it is read."""
        lengths, widths, dtypes = [], set(), set()
        for path in self.files:
            if not path.exists():
                _read(path)   # the refusal, naming the file
            try:
                with safe_open(str(path), framework="pt", device="cpu") as f:
                    hs, tok = f.get_slice("hidden_states"), f.get_slice("token_ids")
                    lengths.append(int(tok.get_shape()[0]) if tok.get_shape() else 0)
                    widths.add(int(hs.get_shape()[-1]))
                    dtypes.add(hs.get_dtype())
            except Exception:   # a missing key or a truncated file: the full read says which
                _load(path, len(self.resid))
                raise
        if len(widths) > 1 or len(dtypes) > 1:
            raise bad_input(self.path, "hidden_states", "one hidden width and dtype in every file",
                            f"widths {sorted(widths)}, dtypes {sorted(dtypes)}")
        stored = dtypes.pop()
        return lengths, widths.pop(), _DTYPES[stored] if stored in _DTYPES else self[0].hidden_states.dtype

    def __getitem__(self, i: int) -> HiddenSample:
        path = self.files[i]
        data, meta = _load(path, len(self.resid))
        hs, tok = data["hidden_states"], data["token_ids"]
        if hs.shape[1] != len(self.resid):
            raise bad_input(path, "hidden_states", f"{len(self.resid)} layers for resid {list(self.resid)}",
                            f"{hs.shape[1]} layers", "The layer ids given do not match what the engine captured.")
        if self.manifest is None:
            return HiddenSample(token_ids=tok, hidden_states=hs, resid=self.resid, path=path, num_layers=self.num_layers)
        if hs.shape[2] != self.manifest["hidden_size"]:
            raise bad_input(path, "hidden_states", f"hidden size {self.manifest['hidden_size']}", hs.shape[2])
        stated = self._samples[i]
        if "num_tokens" in stated and int(stated["num_tokens"]) != tok.shape[0]:
            raise bad_input(path, "token_ids", f"{stated['num_tokens']} tokens, as {MANIFEST} states",
                            f"{tok.shape[0]} ({'shorter' if tok.shape[0] < stated['num_tokens'] else 'longer'} "
                            "than its manifest)", "A cut copy, or the file of another request; copy it again or "
                            "rerun the dump.")
        if "resid" in meta and tuple(json.loads(meta["resid"])) != self.resid:
            raise bad_input(path, "resid", f"the points {MANIFEST} states, {list(self.resid)}, in that order",
                            f"{json.loads(meta['resid'])} (the file's own metadata)",
                            "Layers in another order than stated: the manifest and the files come from "
                            "different dumps.")
        prompt_len = stated.get("prompt_len")
        if prompt_len is not None and not 1 <= int(prompt_len) <= tok.shape[0]:
            raise bad_input(path, "prompt_len", f"1..{tok.shape[0]} (the file's tokens)", prompt_len)
        return HiddenSample(token_ids=tok, hidden_states=hs, resid=self.resid, path=path, num_layers=self.num_layers,
                            prompt_len=None if prompt_len is None else int(prompt_len))

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"HiddenDump({str(self.path)!r}, {len(self)} samples, resid={list(self.resid)})"
