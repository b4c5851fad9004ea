"""Is a greedy speculative output the target's own? Identical, a tie flip, or a bug.

In fp32 on a CPU, greedy speculative decoding is token-identical to ``generate(do_sample=False)``. In bf16
(or fp16) it need not be: the verify forward reads several tokens at once and the greedy loop one, their
kernels sum in different orders, and where two of the target's logits are within a rounding of each other
the argmax can flip. From there the two outputs continue on different prefixes. Serving engines live with
this; a debugging tool must tell such a flip from a bug (a verify that accepts a wrong token, a cache kept
at the wrong positions), which makes the output leave the target's argmax by far more than a rounding.

The rule (``classify_divergence``): at the first position where the two outputs differ, one forward of the
target over the prompt and the speculative output, in the target's own dtype, gives the logits ``l`` there;
the **gap** is ``max(l) - min(l[spec token], l[reference token])``, how far the less preferred of the two
choices sits below the target's top-1. Its **resolution** is ``torch.finfo(dtype).eps * max(|l|)``, about
one unit in the last place of bf16 at the logit's magnitude. The first difference is a **tie flip** when
the gap is at most ``TIE_ULPS`` resolutions and every later token of the speculative output is also within
``TIE_ULPS`` resolutions of the target's top-1 on its own prefix (a flip changes the prefix, not the
rule); otherwise it is a **bug**. An output that ends where the other goes on is a bug (no tie decides a
length).

Why ``TIE_ULPS = 8``: if every logit of two forwards over the same tokens differs by at most ``d``
resolutions, a pairwise gap moves by at most ``2 d`` between them, and a gap whose sign the two runs
disagree on is then within ``2 d`` of zero in a third forward (this check's). ``d`` measured by
``benchmarks/tie_noise.py`` (the largest per-logit difference between any two readings of the same tokens:
one forward over the whole sequence, verify-sized chunks on the cache, one-token steps; bf16): on a 2-core
CPU (torch 2.13, 8 sequences of 48 tokens) 1.32 on the bundled 12-layer target, 1.20 on a random 4-layer one;
on an NVIDIA H200 (torch 2.11 + CUDA 13, 4 sequences, 2026-12-04) 0.84 on the bundled target and **3.13** on a
random 16-layer, 2048-wide, 32000-token one (99th percentile 2.84), where GPU kernels split reductions
differently for one token and for many. ``2 d`` is then 6.3; 8 leaves a margin for deeper targets, whose
roundings add up over more layers. A real
bug sits far above it: a wrong token is typically whole logits below the top-1, tens to hundreds of
resolutions. In fp32 the resolution is 1.2e-7 of the logit scale, so only an exact or near-exact tie passes.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from eagle3lab.decoding.speculative import _keeps_logits, prompt_ids
from eagle3lab.models.target import as_target

TIE_ULPS = 8.0   # a tie: the gap is at most this many resolutions (eps(dtype) * max |logit|); why: module doc


@dataclass(frozen=True)
class Divergence:
    """The first difference between a greedy speculative output and the reference, read on the target."""

    prompt: int                 # index of the prompt in the check
    position: int               # index in the new tokens of the first difference
    token: int | None           # the speculative output's token there (None: it ended first)
    reference: int | None       # the reference's token there (None: it ended first)
    top1: int                   # the target's argmax there (the check's forward)
    gap: float | None           # max(l) - min(l[token], l[reference]); None when one output ended
    resolution: float           # torch.finfo(dtype).eps * max |l| there
    later_ulps: float           # the worst later speculative token's gap to the top-1, in resolutions (0: none)
    tie_ulps: float = TIE_ULPS

    @property
    def ulps(self) -> float | None:
        """The gap in resolutions (None when one output ended)."""
        if self.gap is None:
            return None
        return 0.0 if self.gap == 0 else (self.gap / self.resolution if self.resolution > 0 else float("inf"))

    @property
    def is_tie(self) -> bool:
        return self.ulps is not None and self.ulps <= self.tie_ulps and self.later_ulps <= self.tie_ulps

    @property
    def kind(self) -> str:
        return "tie" if self.is_tie else "bug"

    def to_json(self) -> dict:
        return {"prompt": self.prompt, "position": self.position, "kind": self.kind, "token": self.token,
                "reference": self.reference, "top1": self.top1, "gap": self.gap, "resolution": self.resolution,
                "ulps": self.ulps, "later_ulps": self.later_ulps, "tie_ulps": self.tie_ulps}

    @classmethod
    def from_json(cls, d: dict) -> Divergence:
        """Back from ``to_json`` (``kind`` and ``ulps`` are recomputed, not read)."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})


@dataclass(frozen=True)
class LosslessCheck:
    """Greedy speculative outputs against the reference (``generate``): identical, tie flips, bugs."""

    prompts: int
    identical: int
    divergences: tuple[Divergence, ...]
    dtype: str
    tie_ulps: float = TIE_ULPS

    @property
    def ties(self) -> tuple[Divergence, ...]:
        return tuple(d for d in self.divergences if d.is_tie)

    @property
    def bugs(self) -> tuple[Divergence, ...]:
        return tuple(d for d in self.divergences if not d.is_tie)

    @property
    def lossless(self) -> bool:
        """Every output is the target's own: identical, or different only by tie flips."""
        return not self.bugs

    def to_json(self) -> dict:
        return {"identical_to_generate": self.identical, "prompts": self.prompts, "tie_flips": len(self.ties),
                "bugs": len(self.bugs), "dtype": self.dtype, "tie_ulps": self.tie_ulps,
                "divergences": [d.to_json() for d in self.divergences]}

    @classmethod
    def from_json(cls, d: dict) -> LosslessCheck:
        """Back from ``to_json`` (a benchmark JSON's ``lossless`` field), to word it."""
        return cls(prompts=d["prompts"], identical=d["identical_to_generate"], dtype=d["dtype"],
                   divergences=tuple(Divergence.from_json(x) for x in d["divergences"]), tie_ulps=d["tie_ulps"])

    def words(self) -> str:
        """One line: '4/4 identical', or the identical count with the tie flips and bugs named."""
        text = f"{self.identical}/{self.prompts} identical"
        if self.ties:
            where = ", ".join(f"prompt {d.prompt} at token {d.position} (gap {d.ulps:.1f} ulps)" for d in self.ties)
            text += f", {len(self.ties)} tie flip{'s' * (len(self.ties) > 1)} in {self.dtype} ({where})"
        if self.bugs:
            where = ", ".join(f"prompt {d.prompt} at token {d.position}"
                              + (f" (gap {d.ulps:.0f} ulps)" if d.ulps is not None else " (lengths differ)")
                              for d in self.bugs)
            text += f", {len(self.bugs)} MISMATCH{'ES' * (len(self.bugs) > 1)} above the tie rule ({where})"
        return text


def first_difference(tokens: list[int], reference: list[int]) -> int | None:
    """Index of the first differing new token (the shorter length when one is a prefix); None: identical."""
    if tokens == reference:
        return None
    return next((i for i, (a, b) in enumerate(zip(tokens, reference)) if a != b), min(len(tokens), len(reference)))


@torch.no_grad()
def next_token_logits(target, ids: list[int], rows: int) -> torch.Tensor:
    """The logits of the last ``rows`` positions of one target forward over ``ids``, in the target's dtype
    (row i predicts ``ids[len(ids) - rows + i + 1]``; the last row, the token after ``ids``)."""
    tgt = as_target(target)
    keep = {"logits_to_keep": rows} if _keeps_logits(tgt.model) else {}
    logits = tgt.model(input_ids=torch.tensor([ids], device=tgt.device), **keep).logits[0]
    return logits[-rows:]


def divergence_from_logits(rows: torch.Tensor, tokens: list[int], reference: list[int], dtype: torch.dtype, *,
                           prompt: int = 0, tie_ulps: float = TIE_ULPS) -> Divergence | None:
    """The first difference read on ``rows`` (the target's logits, row i predicting new token i: at least
    ``len(tokens) + 1`` rows); None when the outputs are identical. ``dtype``: the one the logits were
    computed in (its eps sets the resolution)."""
    p = first_difference(tokens, reference)
    if p is None:
        return None
    x = rows.float()
    top, top1 = x.max(-1)
    res = torch.finfo(dtype).eps * x.abs().amax(-1)
    tok = tokens[p] if p < len(tokens) else None
    ref = reference[p] if p < len(reference) else None
    gap = None if tok is None or ref is None else float(top[p] - torch.minimum(x[p, tok], x[p, ref]))
    later = list(range(p + 1, len(tokens)))
    later_ulps = 0.0
    if later:   # the speculative output after the flip: each token within the rule on its own prefix?
        idx = torch.tensor(later, device=x.device)
        own = x[idx].gather(1, torch.tensor([tokens[i] for i in later], device=x.device)[:, None])[:, 0]
        gaps = top[idx] - own
        ulps = torch.where(gaps == 0, torch.zeros_like(gaps), gaps / res[idx])
        later_ulps = float(ulps.max())
    return Divergence(prompt=prompt, position=p, token=tok, reference=ref, top1=int(top1[p]), gap=gap,
                      resolution=float(res[p]), later_ulps=later_ulps, tie_ulps=tie_ulps)


def classify_divergence(target, prompt, tokens: list[int], reference: list[int], *, index: int = 0,
                        tie_ulps: float = TIE_ULPS) -> Divergence | None:
    """Where a greedy speculative output (``tokens``) differs from the reference (``generate``'s, the same
    prompt and budget): a tie flip or a bug, by the module's rule; None when identical (no forward run)."""
    if first_difference(tokens, reference) is None:
        return None
    tgt = as_target(target)
    ids = prompt_ids(tgt, prompt)
    rows = next_token_logits(tgt, ids + list(tokens), len(tokens) + 1)
    return divergence_from_logits(rows, list(tokens), list(reference), tgt.dtype, prompt=index, tie_ulps=tie_ulps)


def lossless_check(target, prompts, outputs, references, *, tie_ulps: float = TIE_ULPS) -> LosslessCheck:
    """Greedy speculative ``outputs`` (token lists) against ``references`` (``generate``'s), prompt by prompt:
    how many are identical, and each difference classified (one target forward per differing prompt)."""
    tgt = as_target(target)
    prompts, outputs, references = list(prompts), [list(o) for o in outputs], [list(r) for r in references]
    found = [classify_divergence(tgt, p, o, r, index=i, tie_ulps=tie_ulps)
             for i, (p, o, r) in enumerate(zip(prompts, outputs, references))]
    divergences = tuple(d for d in found if d is not None)
    return LosslessCheck(prompts=len(outputs), identical=len(outputs) - len(divergences), divergences=divergences,
                         dtype=str(tgt.dtype).replace("torch.", ""), tie_ulps=tie_ulps)
