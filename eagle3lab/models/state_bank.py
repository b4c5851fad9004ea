"""Every target state a draft could be fed, captured once per prompt set, for searching wirings cheaply.

A ``StateBank`` holds, for a set of sequences (prompt + continuation), every ``resid[k]``
(k = 0..N: embedding output, each layer's output; resid[N] enters the final norm), the final
post-norm state (``FINAL_NORMED``: what SGLang's plain EAGLE path hands the draft, and what some
gpt-oss drafts were trained on), the target's greedy top-1, and its LM head, from which the
target's distribution over any draft vocabulary is recomputed. It comes from a live target
(``capture_bank``) or from a ``HiddenDump`` written on a serving cluster plus the target's head
weights (``bank_from_dump`` + ``TargetHead.from_folder``), so a 61-layer target is searched on a
laptop. Scoring a wiring then costs draft passes only (``decoding.evaluate.evaluate_on_bank``).
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

import torch

from eagle3lab.errors import bad_input
from eagle3lab.models.capture import check_prompt_lens  # noqa: F401  (one home in capture; re-exported)

FINAL_NORMED = "final_normed"   # the point after the target's final norm (not a resid index)
# LM-head rows multiplied at a time where the head is upcast (a half-precision head on the CPU): 16384 x 7168
# fp32 = 470 MB at Kimi-K2.5's width
HEAD_BLOCK = 16384
# bytes of fc slot projections a bank keeps (StateBank.fc_projection, least recently used dropped first):
# every slot x point of a 61-layer, 7168-wide bank over 1,000 tokens is 189 x 29 MB = 5.4 GB in fp32
FC_CACHE_BYTES = 3 << 30


def _version(t: torch.Tensor) -> int:
    """A tensor's in-place version counter; an inference tensor (made under torch.inference_mode, as greedy_bank's
    states are) has none and cannot be changed in place outside that mode, so its version is fixed."""
    return 0 if t.is_inference() else t._version


def _upcast(head: torch.Tensor) -> bool:
    return head.device.type == "cpu" and head.dtype in (torch.bfloat16, torch.float16)


def point_name(point) -> str:
    from eagle3lab.engines.layer_ids import resid_name
    return "final post-norm" if point == FINAL_NORMED else resid_name(point)


@dataclass
class TargetHead:
    """The target's final RMSNorm and LM head: turns resid[N] into the post-norm state and logits."""

    norm_weight: torch.Tensor | None   # None with ``norm_module``
    eps: float
    lm_head: torch.Tensor              # [V, H]
    norm_module: object = None         # a live target's own norm (any variant), used when given

    @classmethod
    def from_target(cls, target) -> TargetHead:
        from eagle3lab.models.target import as_target
        tgt = as_target(target)
        return cls(None, 0.0, tgt.model.get_output_embeddings().weight.detach(), norm_module=tgt.final_norm)

    @classmethod
    def from_folder(cls, folder, device="cpu", dtype=None) -> TargetHead:
        """Read only ``model.norm.weight`` and ``lm_head.weight`` (the embedding when tied) from a target's
        safetensors: enough to score a dump without loading a model that does not fit here. Each is read straight
        onto ``device`` (by pread, ``models.device.open_safetensors``), in ``dtype`` (None: as stored)."""
        from eagle3lab.models.checkpoint import find_weight_files, read_config
        from eagle3lab.models.device import open_safetensors

        raw, config_file = read_config(folder)
        text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
        tied = bool(text.get("tie_word_embeddings", raw.get("tie_word_embeddings", False)))
        wanted = {"norm": ("model.norm.weight", "model.language_model.norm.weight"),
                  "head": ("model.embed_tokens.weight", "model.language_model.embed_tokens.weight") if tied
                  else ("lm_head.weight",)}
        found: dict[str, torch.Tensor] = {}
        for file in find_weight_files(config_file.parent):
            if file.suffix != ".safetensors":
                continue
            with open_safetensors(file, device) as f:
                for role, keys in wanted.items():
                    key = next((k for k in keys if k in f.keys()), None)
                    if key is not None and role not in found:
                        found[role] = f.get_tensor(key) if dtype is None else f.get_tensor(key).to(dtype)
        missing = [" or ".join(wanted[r]) for r in wanted if r not in found]
        if missing:
            raise bad_input(config_file.parent, ", ".join(missing), "the target's final norm and LM head in its "
                            "safetensors", "not found", "Point at the target's own folder (config.json and "
                            "*.safetensors); only these two tensors are read.")
        return cls(found["norm"], float(text.get("rms_norm_eps", 1e-6)), found["head"])

    def normed(self, resid_last: torch.Tensor) -> torch.Tensor:
        """The post-norm state, on ``resid_last``'s device (the head may sit on a GPU, a dump on the CPU)."""
        if self.norm_module is not None:
            weight = next(self.norm_module.parameters())
            return self.norm_module(resid_last.to(weight.device, weight.dtype)).to(resid_last.device)
        x = resid_last.float()   # Llama-family RMSNorm, statistics in fp32
        return (self.norm_weight.float() * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)).to(resid_last.dtype)

    def logits(self, normed: torch.Tensor, rows: torch.Tensor | None = None) -> torch.Tensor:
        """Target logits, over the whole vocabulary or only ``rows`` (target ids of a draft vocabulary), in the
        head's dtype. A half-precision head on the CPU is multiplied in fp32 a block of rows at a time and the
        logits rounded to its dtype: the same numbers (one rounding of an fp32 sum), where the CPU's own bf16
        product runs several times slower (3 against 19 GFLOP/s on this 2-core AVX2 machine) and a whole
        fp32 copy of a 163840-row head would take 4.7 GB."""
        head = self.lm_head if rows is None else self.lm_head[rows.to(self.lm_head.device)]
        if not _upcast(head):
            return (normed.to(head.device, head.dtype) @ head.T).to(normed.device)
        x = normed.to(head.device, head.dtype).float()
        return torch.cat([(x @ block.float().T).to(head.dtype) for block in head.split(HEAD_BLOCK)],
                         dim=-1).to(normed.device)

    def top1(self, normed: torch.Tensor) -> torch.Tensor:
        """The target's argmax over its whole vocabulary, ``normed`` ``[..., H]`` -> ``[...]``, without the
        ``[..., vocab]`` logits at once: a running argmax over blocks of ``HEAD_BLOCK`` rows (ties go to the
        lowest id, as one ``argmax`` over every row). Logits that fit in ``HEAD_BLOCK`` x 7168 fp32 values
        from a head kept as it is are one product, as before."""
        vocab = self.lm_head.shape[0]
        if not _upcast(self.lm_head) and normed[..., 0].numel() * vocab <= HEAD_BLOCK * 7168:
            return self.logits(normed).argmax(-1)
        best_val = best_id = None
        for start in range(0, vocab, HEAD_BLOCK):
            logits = self.logits(normed, torch.arange(start, min(start + HEAD_BLOCK, vocab)))
            idx = logits.argmax(-1)
            val = logits.gather(-1, idx[..., None])[..., 0]
            if best_val is None:
                best_val, best_id = val, idx
            else:
                better = val > best_val
                best_val, best_id = torch.where(better, val, best_val), torch.where(better, idx + start, best_id)
        return best_id


@dataclass
class StateBank:
    """Captured states of ``len(lengths)`` right-padded sequences (see the module docstring).

    ``states[point]``: ``[B, L, H]`` for each resid index in ``points`` and for ``FINAL_NORMED``;
    ``top1`` ``[B, L]``: the target's argmax at each position (predicting the next token).
    """

    input_ids: torch.Tensor
    lengths: list[int]
    prompt_lens: list[int]
    states: dict
    top1: torch.Tensor
    head: TargetHead
    num_layers: int
    source: str = "live target"
    _labels: dict = field(default_factory=dict, repr=False)
    # fc slot projections (fc_projection); not an __init__ field, so a bank made with dataclasses.replace
    # (other rows, other states) starts with none
    _fc: OrderedDict = field(default_factory=OrderedDict, init=False, repr=False)

    @property
    def points(self) -> tuple[int, ...]:
        """The resid indices captured (every k = 0..N for a live target; what the dump holds otherwise)."""
        return tuple(sorted(k for k in self.states if k != FINAL_NORMED))

    @property
    def hidden_size(self) -> int:
        return int(self.states[FINAL_NORMED].shape[-1])

    def _check_held(self, wiring) -> None:
        missing = [p for p in wiring if p not in self.states]
        if missing:
            raise bad_input("wiring", None, f"points this bank holds ({', '.join(map(point_name, self.states))})",
                            [point_name(p) for p in missing], "Capture or dump those states too.")

    def fc_input(self, wiring) -> torch.Tensor:
        self._check_held(wiring)
        return torch.cat([self.states[p] for p in wiring], dim=-1)

    def fc_projection(self, weight: torch.Tensor, slot: int, point) -> torch.Tensor:
        """fc's slot ``slot`` applied to ``states[point]`` at every row: ``[B, L, out]`` fp32 on ``weight``'s device,
        ``states[point] @ W_slot.T`` with ``W_slot`` the slot's block of input columns of ``weight`` ([out,
        num_aux x width]). fc is linear in each slot, so fc of a wiring is the sum of its slots' projections: a
        wiring search computes each (slot, point) once instead of fc over a concatenation per hypothesis.
        Kept until ``FC_CACHE_BYTES`` are held (least recently used dropped first), keyed by the weight
        itself (its identity and version), so a changed or other fc is never served an old projection."""
        self._check_held([point])
        width = self.states[point].shape[-1]
        x = self.states[point]
        key = (id(weight), _version(weight), slot, point, id(x), _version(x))
        held = self._fc.get(key)
        if held is not None and held[0]() is weight and held[1]() is x:
            self._fc.move_to_end(key)
            return held[2]
        block = weight[:, slot * width:(slot + 1) * width].float()
        out = torch.empty(*x.shape[:-1], weight.shape[0], dtype=torch.float32, device=weight.device)
        for b in range(x.shape[0]):   # a sequence at a time: no fp32 copy of the whole point
            out[b] = x[b].to(weight.device, weight.dtype).float() @ block.T
        self._fc[key] = (weakref.ref(weight), weakref.ref(x), out)
        held_bytes = sum(v[2].numel() * 4 for v in self._fc.values())
        while held_bytes > FC_CACHE_BYTES and len(self._fc) > 1:
            held_bytes -= self._fc.popitem(last=False)[1][2].numel() * 4
        return out

    def label_probs(self, draft_ids: torch.Tensor | None) -> torch.Tensor:
        """p_target over the draft vocabulary (renormalised, as trainers label), ``[B, L, V_draft]``;
        computed once per draft vocabulary."""
        held = self._labels.get("ids", ...)
        same = held is draft_ids or (isinstance(held, torch.Tensor) and draft_ids is not None
                                     and torch.equal(held, draft_ids))
        if not same:   # one vocabulary at a time: these tables are large
            logits = self.head.logits(self.states[FINAL_NORMED], draft_ids).float()
            self._labels = {"ids": draft_ids, "probs": logits.softmax(-1)}
        return self._labels["probs"]


@torch.no_grad()
def capture_bank(target, sequences, prompt_lens=None, batch_size: int = 8, progress: bool = False) -> StateBank:
    """Run ``target`` once over ``sequences`` (token-id lists) capturing every resid point."""
    from tqdm.auto import tqdm

    from eagle3lab.models.capture import ResidCapture
    from eagle3lab.models.target import as_target

    tgt = as_target(target)
    seqs = [list(map(int, s)) for s in sequences]
    if not seqs or min(map(len, seqs)) < 2:
        raise bad_input("sequences", None, "at least one sequence of 2 or more tokens",
                        f"{len(seqs)} sequences" + (f", the shortest {min(map(len, seqs))} tokens" if seqs else ""))
    n, L = tgt.num_layers, max(map(len, seqs))
    ids = torch.zeros(len(seqs), L, dtype=torch.long)
    for i, s in enumerate(seqs):          # right padding: real positions never see pads
        ids[i, :len(s)] = torch.tensor(s)
    mask = (torch.arange(L)[None] < torch.tensor([len(s) for s in seqs])[:, None]).long()
    head = TargetHead.from_target(tgt)
    parts: dict = {k: [] for k in [*range(n + 1), FINAL_NORMED, "top1"]}
    for start in tqdm(range(0, len(seqs), batch_size), desc="capturing every resid point", disable=not progress):
        b_ids, b_mask = ids[start:start + batch_size].to(tgt.device), mask[start:start + batch_size].to(tgt.device)
        with ResidCapture(tgt.model, range(n + 1), offload="cpu") as cap:
            logits = tgt.model(input_ids=b_ids, attention_mask=b_mask, use_cache=False).logits
            states = dict(cap.states)
        for k in range(n + 1):
            parts[k].append(states[k])
        parts[FINAL_NORMED].append(head.normed(states[n].to(tgt.device)).cpu())
        parts["top1"].append(logits.argmax(-1).cpu())
    top1 = torch.cat(parts.pop("top1"))
    return StateBank(ids, [len(s) for s in seqs], check_prompt_lens(prompt_lens, [len(s) for s in seqs]),
                     {k: torch.cat(v) for k, v in parts.items()}, top1, head, n, source=f"live target {tgt.arch}")


# A post-norm state x' = w * x / rms(x) has rms(x' / w) = 1 at every token; a residual stream does not.
_POST_NORM_RMS_TOL = {torch.float32: 1e-3, torch.float64: 1e-6}   # else (bf16/fp16) 2e-2
# The target's top-1 from resid[N] reproduces its own greedy continuation; below this share of the
# continuation the state stated as resid[N] is another one (bf16 kernels flip the odd near-tie).
GREEDY_AGREEMENT_MIN = 0.9


def _post_norm_rms(head: TargetHead, state: torch.Tensor) -> torch.Tensor | None:
    """rms(state / norm weight) per token, over the channels where the weight is not zero."""
    weight = head.norm_weight if head.norm_module is None else getattr(head.norm_module, "weight", None)
    if weight is None:
        return None
    weight = weight.detach().float().to(state.device)
    keep = weight.abs() > 1e-6
    x = state.float()[..., keep] / weight[keep]
    return x.pow(2).mean(-1).sqrt()


def _check_last_state(dump, bank: StateBank) -> None:
    """The dumped resid[N] is what the target's head reads before its final norm: refuse a post-norm
    state or another layer in its place, from the numbers themselves."""
    n = bank.num_layers
    real = torch.arange(bank.input_ids.shape[1])[None] < torch.tensor(bank.lengths)[:, None]
    rms = _post_norm_rms(bank.head, bank.states[n])
    if rms is not None:
        tol = _POST_NORM_RMS_TOL.get(bank.states[n].dtype, 2e-2)
        worst = float((rms[real] - 1).abs().max())
        if worst <= tol:
            raise bad_input(dump.path, "resid", f"resid[{n}] (the last layer's output before the final norm) in the "
                            f"slot stated as resid[{n}]", f"the final post-norm state there (state / norm weight has "
                            f"RMS 1 at every token, max |RMS - 1| = {worst:.1e})",
                            "The engine wrote the state after the final norm for its last id; dump resid[N] itself "
                            "(the sum of the last layer's output and its residual).")
    if dump.continuation != "greedy" or dump.prompt_lens is None:   # where the greedy part starts, as dumped
        return
    hits = total = 0
    for b, (p, length) in enumerate(zip(dump.prompt_lens, bank.lengths)):
        pred, nxt = bank.top1[b, p - 1:length - 1], bank.input_ids[b, p:length]
        hits, total = hits + int((pred == nxt).sum()), total + int(nxt.numel())
    if total and hits / total < GREEDY_AGREEMENT_MIN:
        raise bad_input(dump.path, "resid", f"the state stated as resid[{n}] predicting the dump's greedy continuation "
                        f"(at least {GREEDY_AGREEMENT_MIN:.0%} of its tokens)", f"{hits} of {total} ({hits / total:.0%})",
                        "Layers in another order than stated, or another target's states.")


@torch.no_grad()
def bank_from_dump(dump, head: TargetHead, prompt_lens=None, num_layers: int | None = None) -> StateBank:
    """A bank from a ``HiddenDump`` (every sample's ``hidden_states`` and ``token_ids``) and the target's head.

    The dump must hold resid[N] (the target's distribution and top-1 come from it); the wiring search
    then ranges over the points the dump holds and says which it could not try. ``prompt_lens``
    default: what the dump's manifest states (acceptance is measured from there, as for a live
    target), else 1 each.
    """
    from eagle3lab.models.hidden_dump import HiddenDump

    dump = dump if isinstance(dump, HiddenDump) else HiddenDump(dump)
    n = num_layers or dump.num_layers
    if n is None:
        raise bad_input(dump.path, "num_layers", "the target's number of layers (in manifest.json or given)", None)
    if n not in dump.resid:
        raise bad_input(dump.path, "resid", f"resid[{n}] among the dumped points (the target's last state: its "
                        "distribution and top-1 are recomputed from it)", list(dump.resid),
                        "Dump the last layer too (vLLM: add N to eagle_aux_hidden_state_layer_ids).")
    if not len(dump):
        raise bad_input(dump.path, None, "at least one sample", "none")
    # one sample in memory at a time beside the bank (the files' headers give the sizes first)
    lengths, H, dtype = dump.sizes()
    L = max(lengths)
    ids = torch.zeros(len(lengths), L, dtype=torch.long)
    states = {k: torch.zeros(len(lengths), L, H, dtype=dtype) for k in dump.resid}
    for i in range(len(lengths)):
        s = dump[i]
        if s.token_ids.shape[0] != lengths[i] or s.hidden_states.shape[-1] != H:
            raise bad_input(s.path, "hidden_states", f"{lengths[i]} tokens of width {H}, as its header states",
                            f"{tuple(s.hidden_states.shape)}")
        ids[i, :lengths[i]] = s.token_ids
        for j, k in enumerate(dump.resid):
            states[k][i, :lengths[i]] = s.hidden_states[:, j]
        del s
    last = states[n]
    states[FINAL_NORMED] = torch.cat([head.normed(last[i:i + 1].float()).to(last.dtype) for i in range(len(lengths))])
    top1 = head.top1(states[FINAL_NORMED])
    bank = StateBank(ids, lengths, check_prompt_lens(dump.prompt_lens if prompt_lens is None else prompt_lens, lengths),
                     states, top1, head, n, source=f"hidden-state dump {Path(dump.path).name}")
    _check_last_state(dump, bank)
    return bank
