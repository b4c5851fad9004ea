"""Record the residual stream ``resid[k]`` of a Hugging Face causal LM during any forward.

``resid[k]`` enters decoder layer k (0 = embedding output, N = last layer output before the final
norm). Only the requested points are kept, each copied to ``offload`` (CPU by default when the
model is on a GPU), so memory grows with what was asked for, not with N.

Three independent ways to read the same tensors, which tests require to agree bit for bit:
  "pre"  forward pre-hooks on the layer inputs (resid[N]: the input of the final norm)
  "post" forward hooks on the layer outputs  (resid[0]: the output of the embedding)
  HF     ``output_hidden_states=True`` (``hf_hidden_states``): entry k = resid[k] for k < N, but
         entry N has the final norm applied, so it is NOT resid[N].
Decoder layers return a tensor in transformers 5 and a tuple (state first) in 4.x; both work.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass

import torch

from eagle3lab.engines.layer_ids import resid_label, resid_name
from eagle3lab.errors import Eagle3LabError, bad_input
from eagle3lab.models.target import Target, decoder_layers, decoder_of, hf_model

METHODS = ("auto", "pre", "post")


def resid_modules(model):
    """(embedding, decoder layers as HF runs them, final norm) of a causal LM or a Target."""
    model = hf_model(model)
    return model.get_input_embeddings(), decoder_layers(model), getattr(decoder_of(model), "norm", None)


def _first_tensor(x):
    return x[0] if isinstance(x, (tuple, list)) else x


def _check_points(points, num_layers: int) -> tuple[int, ...]:
    pts = []
    for p in points:
        try:
            pts.append(operator.index(p) if not isinstance(p, bool) else None)
        except TypeError:
            pts.append(None)
        if pts[-1] is None:
            raise bad_input("points", None, "integer resid indices", repr(p))
    if not pts:
        raise bad_input("points", None, "at least one resid point", "[]")
    bad = [p for p in pts if not 0 <= p <= num_layers]
    if bad:
        raise bad_input("points", None, f"resid indices in 0..{num_layers} (N = {num_layers}; resid[N] = last "
                        "layer output before the final norm)", bad,
                        "Engine ids are not resid indices: translate them with resolve_aux_layers(engine, ids, N).")
    if len(set(pts)) != len(pts):
        raise bad_input("points", None, "distinct resid indices", pts,
                        "Capture each point once; repeat it in build_fc_input's order to feed it twice.")
    return tuple(pts)


def _offload_device(offload, model_device: torch.device):
    if offload is False or offload == "keep":
        return None
    if offload is None:
        return torch.device("cpu") if model_device.type != "cpu" else None
    return torch.device(offload)


class ResidCapture:
    """Context manager: ``with ResidCapture(model, [2, 6, 9]) as cap: model(...)``; then ``cap.states[k]``.

    ``states`` holds the points of the latest forward (cleared when a new forward starts), each
    ``[B, T, H]``. Works with any forward arguments (past_key_values, 4D masks, position_ids).
    ``offload``: None = CPU when the model is on a GPU, else stay; False/"keep" = stay; or a device.
    """

    def __init__(self, model, points, offload=None, method: str = "auto"):
        if method not in METHODS:
            raise bad_input("method", None, f"one of {METHODS}", repr(method))
        self.embed, self.layers, self.norm = resid_modules(model)
        self.num_layers = len(self.layers)
        self.points = _check_points(points, self.num_layers)
        self.method = method
        if method == "pre" and self.num_layers in self.points and self.norm is None:
            raise bad_input("model", "norm", "a final norm module on the decoder", None,
                            "Use method='auto' or 'post' to read resid[N] from the last layer's output.")
        self.offload = _offload_device(offload, self.embed.weight.device)
        self.stack = decoder_of(hf_model(model))
        self._states: dict[int, torch.Tensor] = {}
        self._copies: list = []  # CUDA events of async GPU->CPU copies still in flight
        self.forwards = 0
        self._handles: list = []

    @property
    def states(self) -> dict[int, torch.Tensor]:
        """resid index -> [B, T, H] for the latest forward (waits for pending GPU->CPU copies)."""
        self._wait()
        return self._states

    def _wait(self) -> None:
        for event in self._copies:
            event.synchronize()
        self._copies = []

    def _keep(self, k: int, t: torch.Tensor) -> None:
        t = t.detach()
        if self.offload is None or t.device == self.offload:
            self._states[k] = t
        elif t.is_cuda and self.offload.type == "cpu":
            # Pinned buffer + non_blocking: the forward does not stall on each copy; `states` waits.
            buf = torch.empty(t.shape, dtype=t.dtype, device="cpu", pin_memory=True)
            buf.copy_(t, non_blocking=True)
            event = torch.cuda.Event()
            event.record(torch.cuda.current_stream(t.device))
            self._copies.append(event)
            self._states[k] = buf
        else:
            self._states[k] = t.to(self.offload)

    def _pre(self, k):
        def hook(module, args, kwargs):
            self._keep(k, args[0] if args else kwargs["hidden_states"])
        return hook

    def _post(self, k):
        def hook(module, args, output):
            self._keep(k, _first_tensor(output))
        return hook

    def _new_forward(self, module, args):
        self._wait()  # finish the last forward's copies before dropping its buffers
        self._states = {}
        self.forwards += 1

    def __enter__(self) -> ResidCapture:
        if self._handles:
            raise Eagle3LabError("This ResidCapture is already active; use one `with` block at a time.")
        n = self.num_layers
        h = self._handles
        h.append(self.stack.register_forward_pre_hook(self._new_forward))
        for k in self.points:
            if self.method == "post" or (self.method == "auto" and k == n):
                module = self.embed if k == 0 else self.layers[k - 1]
                h.append(module.register_forward_hook(self._post(k)))
            elif k < n:
                h.append(self.layers[k].register_forward_pre_hook(self._pre(k), with_kwargs=True))
            else:  # "pre" for resid[N]: what enters the final norm
                h.append(self.norm.register_forward_pre_hook(self._pre(k), with_kwargs=True))
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def fc_input(self, order, num_layers: int | None = None) -> FcInput:
        missing = [k for k in order if k not in self.states]
        if missing:
            raise bad_input("order", None, f"points captured in this forward {sorted(self.states)}", missing,
                            "Add them to the ResidCapture points.")
        return build_fc_input(self.states, order, num_layers=num_layers or self.num_layers)


def _as_batch(target: Target, input_ids, attention_mask):
    ids = torch.as_tensor(input_ids)
    if ids.dim() == 1:
        ids = ids.unsqueeze(0)
    if ids.dim() != 2 or ids.numel() == 0:
        raise bad_input("input_ids", None, "a non-empty [B, T] (or [T]) tensor of token ids", tuple(ids.shape),
                        "Engines reject empty prompts too.")
    if ids.dtype not in (torch.int64, torch.int32):
        raise bad_input("input_ids", None, "integer token ids", ids.dtype)
    top, low = int(ids.max()), int(ids.min())
    if top >= target.vocab_size or low < 0:
        raise bad_input("input_ids", None, f"ids in 0..{target.vocab_size - 1} (the model's vocabulary)",
                        f"ids in {low}..{top}", "A tokenizer that does not belong to this model? vLLM/SGLang would "
                        "hit a device-side assert in the embedding.")
    if attention_mask is not None:
        attention_mask = torch.as_tensor(attention_mask)
        if attention_mask.dim() == 1:
            attention_mask = attention_mask.unsqueeze(0)
        if attention_mask.dim() == 2 and attention_mask.shape != ids.shape:
            raise bad_input("attention_mask", None, f"shape {tuple(ids.shape)} like input_ids",
                            tuple(attention_mask.shape))
        attention_mask = attention_mask.to(target.device)
    return ids.to(target.device), attention_mask


@torch.no_grad()
def capture_resid(target: Target, input_ids, points, attention_mask=None, offload=None,
                  method: str = "auto") -> dict[int, torch.Tensor]:
    """One forward of the decoder stack (no lm_head, no KV cache) recording only ``points``."""
    ids, mask = _as_batch(target, input_ids, attention_mask)
    with ResidCapture(target, points, offload=offload, method=method) as cap:
        target.decoder(input_ids=ids, attention_mask=mask, use_cache=False)
    return {k: cap.states[k] for k in cap.points}


@torch.no_grad()
def hf_hidden_states(target: Target, input_ids, attention_mask=None) -> tuple[torch.Tensor, ...]:
    """HF's own ``output_hidden_states`` (N+1 entries). Entry k = resid[k] for k < N; entry N is
    ``norm(resid[N])`` (transformers 5.24, Llama-style models), not resid[N]."""
    ids, mask = _as_batch(target, input_ids, attention_mask)
    out = target.decoder(input_ids=ids, attention_mask=mask, use_cache=False, output_hidden_states=True)
    return tuple(out.hidden_states)


@dataclass(frozen=True)
class FcInput:
    """What goes into the draft's fc: ``tensor`` [B, T, len(order) * H] and a label naming each chunk."""

    tensor: torch.Tensor
    order: tuple[int, ...]
    label: str

    @property
    def num_aux(self) -> int:
        return len(self.order)

    def chunk(self, i: int) -> torch.Tensor:
        h = self.tensor.shape[-1] // self.num_aux
        return self.tensor[..., i * h:(i + 1) * h]


def concat_aux(states: dict[int, torch.Tensor], order) -> torch.Tensor:
    """The fc input itself: the points in ``order``, concatenated on the hidden axis (the one place it is
    built; ``build_fc_input`` checks and labels it, the decoding loop calls this directly)."""
    return torch.cat([states[k] for k in order], dim=-1)


def build_fc_input(states: dict[int, torch.Tensor], order, num_layers: int | None = None) -> FcInput:
    """Concatenate captured points in exactly this ``order`` (any permutation; repeats allowed).

    Engines always concatenate in ascending layer order; other orders model a draft trained with a
    different wiring (e.g. SpecForge's [embedding, resid[3], resid[31]] against SGLang's [3, 31, 59]).
    """
    order = tuple(int(k) for k in order)
    if not order:
        raise bad_input("order", None, "at least one resid point", "[]")
    missing = [k for k in order if k not in states]
    if missing:
        raise bad_input("order", None, f"points among the captured ones {sorted(states)}", missing,
                        "Capture them first (ResidCapture / capture_resid points).")
    shapes = {tuple(states[k].shape) for k in order}
    if len(shapes) != 1:
        raise bad_input("states", None, "one shape [B, T, H] for every point", sorted(shapes))
    return FcInput(tensor=concat_aux(states, order), order=order, label=resid_label(order, num_layers))


# ----------------------------------------------------------------------------- looking at the stream

def _valid_tokens(states: dict[int, torch.Tensor], attention_mask=None) -> dict[int, torch.Tensor]:
    """Each point as [tokens, H] float32, padding dropped."""
    out = {}
    for k, t in states.items():
        flat = t.float().reshape(-1, t.shape[-1])
        if attention_mask is not None:
            flat = flat[torch.as_tensor(attention_mask).reshape(-1).to(flat.device).bool()]
        out[k] = flat
    return out


def resid_similarity(states: dict[int, torch.Tensor], attention_mask=None):
    """Mean per-token cosine similarity between every pair of captured points (a DataFrame)."""
    import pandas as pd

    flat = _valid_tokens(states, attention_mask)
    keys = sorted(flat)
    sim = [[float(torch.nn.functional.cosine_similarity(flat[a], flat[b], dim=-1).mean()) for b in keys] for a in keys]
    names = [f"resid[{k}]" for k in keys]
    return pd.DataFrame(sim, index=names, columns=names)


def paths_agreement(target: Target, input_ids, attention_mask=None):
    """Max |difference| per point between the three capture paths (a DataFrame; all zeros expected),
    plus HF's last entry against resid[N] (not zero: HF applies the final norm there)."""
    import pandas as pd

    n = target.num_layers
    points = list(range(n + 1))
    pre = capture_resid(target, input_ids, points, attention_mask, method="pre")
    post = capture_resid(target, input_ids, points, attention_mask, method="post")
    hf = hf_hidden_states(target, input_ids, attention_mask)
    rows = []
    for k in points:
        h = hf[k].to(pre[k].device)
        rows.append({"point": resid_name(k, n), "pre vs post": float((pre[k] - post[k]).abs().max()),
                     "HF hidden_states[k] vs pre": float((h - pre[k]).abs().max()),
                     "bit-identical": bool(torch.equal(pre[k], post[k]) and (k == n or torch.equal(h, pre[k])))})
    return pd.DataFrame(rows).set_index("point")


def fc_input_difference(a: FcInput, b: FcInput, attention_mask=None, names=("a", "b")):
    """Slot by slot, how far apart two fc inputs of the same batch are (a DataFrame).

    Per slot: the point each input puts there, the mean per-token cosine similarity, the relative
    distance ``|b - a| / |a|`` and the norm ratio ``|b| / |a|`` over valid tokens (the embedding is
    often far smaller than later streams); a last row compares the whole inputs. A slot fed the
    same point in both reads cosine 1, distance 0, ratio 1.
    """
    import pandas as pd

    if a.num_aux != b.num_aux or a.tensor.shape != b.tensor.shape:
        raise bad_input("fc inputs", None, f"two inputs of the same shape {tuple(a.tensor.shape)} "
                        f"({a.num_aux} slots)", f"{tuple(b.tensor.shape)} ({b.num_aux} slots)",
                        "Build both from the same captured batch with orders of the same length.")
    pairs = [(f"slot {i}", a.chunk(i), b.chunk(i), a.order[i], b.order[i]) for i in range(a.num_aux)]
    pairs.append(("whole fc input", a.tensor, b.tensor, None, None))
    rows = []
    for slot, x, y, ka, kb in pairs:
        x, y = _valid_tokens({0: x, 1: y}, attention_mask).values()
        rows.append({"slot": slot, names[0]: a.label if ka is None else resid_name(ka),
                     names[1]: b.label if kb is None else resid_name(kb),
                     "cosine": float(torch.nn.functional.cosine_similarity(x, y, dim=-1).mean()),
                     "relative_distance": float((y - x).norm() / x.norm()),
                     "norm_ratio": float(y.norm() / x.norm())})
    return pd.DataFrame(rows).set_index("slot")


def check_prompt_lens(prompt_lens, lengths) -> list[int]:
    """Where each sequence's continuation starts (default 1 each), checked against the sequence lengths."""
    prompt_lens = [1] * len(lengths) if prompt_lens is None else [int(p) for p in prompt_lens]
    if len(prompt_lens) != len(lengths) or any(not 1 <= p <= n for p, n in zip(prompt_lens, lengths)):
        raise bad_input("prompt_lens", None, "one length per sequence, 1 <= prompt_len <= len(sequence)",
                        prompt_lens[:8])
    return prompt_lens
