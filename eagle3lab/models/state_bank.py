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

from dataclasses import dataclass, field
from pathlib import Path

import torch

from eagle3lab.errors import bad_input
from eagle3lab.models.capture import check_prompt_lens  # noqa: F401  (one home in capture; re-exported)

FINAL_NORMED = "final_normed"   # the point after the target's final norm (not a resid index)


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
    def from_folder(cls, folder) -> TargetHead:
        """Read only ``model.norm.weight`` and ``lm_head.weight`` (the embedding when tied) from a target's
        safetensors: enough to score a dump without loading a model that does not fit here."""
        from safetensors import safe_open

        from eagle3lab.models.checkpoint import find_weight_files, read_config

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
            with safe_open(str(file), framework="pt") as f:
                for role, keys in wanted.items():
                    key = next((k for k in keys if k in f.keys()), None)
                    if key is not None and role not in found:
                        found[role] = f.get_tensor(key)
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
        """Target logits, over the whole vocabulary or only ``rows`` (target ids of a draft vocabulary)."""
        head = self.lm_head if rows is None else self.lm_head[rows.to(self.lm_head.device)]
        return (normed.to(head.device, head.dtype) @ head.T).to(normed.device)


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

    @property
    def points(self) -> tuple[int, ...]:
        """The resid indices captured (every k = 0..N for a live target; what the dump holds otherwise)."""
        return tuple(sorted(k for k in self.states if k != FINAL_NORMED))

    @property
    def hidden_size(self) -> int:
        return int(self.states[FINAL_NORMED].shape[-1])

    def fc_input(self, wiring) -> torch.Tensor:
        missing = [p for p in wiring if p not in self.states]
        if missing:
            raise bad_input("wiring", None, f"points this bank holds ({', '.join(map(point_name, self.states))})",
                            [point_name(p) for p in missing], "Capture or dump those states too.")
        return torch.cat([self.states[p] for p in wiring], dim=-1)

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
    samples = list(dump)
    if not samples:
        raise bad_input(dump.path, None, "at least one sample", "none")
    lengths = [int(s.token_ids.shape[0]) for s in samples]
    L, H = max(lengths), samples[0].hidden_states.shape[-1]
    ids = torch.zeros(len(samples), L, dtype=torch.long)
    states = {k: torch.zeros(len(samples), L, H, dtype=samples[0].hidden_states.dtype) for k in dump.resid}
    for i, s in enumerate(samples):
        ids[i, :lengths[i]] = s.token_ids
        for j, k in enumerate(dump.resid):
            states[k][i, :lengths[i]] = s.hidden_states[:, j]
    states[FINAL_NORMED] = head.normed(states[n].float()).to(states[n].dtype)
    top1 = head.logits(states[FINAL_NORMED]).argmax(-1)
    bank = StateBank(ids, lengths, check_prompt_lens(dump.prompt_lens if prompt_lens is None else prompt_lens, lengths),
                     states, top1, head, n, source=f"hidden-state dump {Path(dump.path).name}")
    _check_last_state(dump, bank)
    return bank
