"""The draft vocabulary map: ``d2t`` offsets and the ``t2d`` mask, and what can go wrong with them.

A draft predicts over ``draft_vocab_size`` tokens; draft id ``i`` is target id ``i + d2t[i]``
(``d2t`` holds OFFSETS). ``t2d[j]`` is True when target id ``j`` is in the draft vocabulary.
Invariants (eagle3-facts.md section 4): ``t2d.sum() == draft_vocab_size``; ``arange + d2t`` is
strictly increasing and inside ``[0, vocab_size)``; ``t2d[arange + d2t]`` is all True.
Known failure: absolute ids stored where offsets belong, or no map at all; engines then map
draft ids to the wrong target ids and acceptance collapses (vLLM #18488 -> #18909).
"""

from __future__ import annotations

import torch

from eagle3lab.findings import Finding, Severity

# The codes of the vocab-map findings -> (severity, what it means): "error" (engines map ids wrongly), "warning"
# (suspicious) or "info" (fine, for the record); each finding's ``where`` is the tensor it is about ("d2t", "t2d" or "d2t/t2d").
VOCAB_CODES = {
    "VOCAB_MAP_NOT_NEEDED": (Severity.INFO, "the draft vocabulary is the target's"),
    "VOCAB_D2T_MISSING": (Severity.ERROR, "no d2t while the draft vocabulary is smaller than the target's"),
    "VOCAB_D2T_SHAPE": (Severity.ERROR, "d2t is not [draft_vocab_size]"),
    "VOCAB_D2T_DTYPE": (Severity.ERROR, "d2t is not an integer tensor"),
    "VOCAB_T2D_SHAPE": (Severity.ERROR, "t2d is not [vocab_size]"),
    "VOCAB_T2D_COUNT": (Severity.ERROR, "t2d's True count is not draft_vocab_size"),
    "VOCAB_D2T_OUT_OF_RANGE": (Severity.ERROR, "i + d2t[i] leaves [0, vocab_size)"),
    "VOCAB_D2T_NOT_INCREASING": (Severity.ERROR, "i + d2t[i] is not strictly increasing"),
    "VOCAB_MAPS_DISAGREE": (Severity.ERROR, "d2t maps to target ids t2d leaves out"),
    "VOCAB_D2T_READS_ABSOLUTE": (Severity.WARNING, "consistent as offsets, but also reads as absolute ids"),
    "VOCAB_D2T_ALL_ZERO": (Severity.WARNING, "all offsets 0 (the first draft_vocab_size target ids)"),
}


def vocab_finding(code: str, key: str, message: str) -> Finding:
    """A vocab-map finding: severity from its code (VOCAB_CODES), ``where`` the tensor (``key``)."""
    return Finding(code, VOCAB_CODES[code][0], message, where=key)


def vocab_dict(f: Finding) -> dict:
    """The JSON shape of a vocab-map finding (``inspect --json``'s ``vocab.findings``, ``LoadReport``)."""
    return {"severity": str(f.severity), "key": f.where, "message": f.text}


def check_vocab_map(d2t: torch.Tensor | None, t2d: torch.Tensor | None, vocab_size: int,
                    draft_vocab_size: int) -> list[Finding]:
    """Check the vocab map against the invariants; returns findings (empty = all good)."""
    out: list[Finding] = []
    err = lambda code, key, msg: out.append(vocab_finding(code, key, msg))
    if draft_vocab_size == vocab_size and d2t is None:
        return [vocab_finding("VOCAB_MAP_NOT_NEEDED", "d2t/t2d", "draft vocabulary = target vocabulary; no map needed")]
    if d2t is None:
        err("VOCAB_D2T_MISSING", "d2t", f"missing while draft_vocab_size={draft_vocab_size} < vocab_size={vocab_size}: engines "
            f"would map draft id i to target id i (the first {draft_vocab_size} target ids). "
            "Rebuild d2t from the token frequencies the draft was trained with.")
        return out
    if d2t.dim() != 1 or d2t.shape[0] != draft_vocab_size:
        err("VOCAB_D2T_SHAPE", "d2t", f"expected shape [{draft_vocab_size}] (draft_vocab_size), found {list(d2t.shape)}")
        return out
    if d2t.dtype.is_floating_point or d2t.dtype == torch.bool:
        err("VOCAB_D2T_DTYPE", "d2t", f"expected an integer tensor of offsets, found dtype {d2t.dtype}")
        return out
    d2t = d2t.long().cpu()
    ids = torch.arange(draft_vocab_size) + d2t
    t2d_ok = None
    if t2d is not None:
        if t2d.dim() != 1 or t2d.shape[0] != vocab_size:
            err("VOCAB_T2D_SHAPE", "t2d", f"expected shape [{vocab_size}] (target vocab_size), found {list(t2d.shape)}")
            t2d = None
        else:
            t2d = t2d.cpu().bool()
            if int(t2d.sum()) != draft_vocab_size:
                err("VOCAB_T2D_COUNT", "t2d", f"expected {draft_vocab_size} True entries (draft_vocab_size), found {int(t2d.sum())}")
    absolute = _looks_absolute(d2t, t2d, vocab_size)
    in_range = bool(((ids >= 0) & (ids < vocab_size)).all())
    if not in_range:
        bad = int(((ids < 0) | (ids >= vocab_size)).sum())
        err("VOCAB_D2T_OUT_OF_RANGE", "d2t", f"{bad} of {draft_vocab_size} entries map outside [0, {vocab_size}): "
            f"i + d2t[i] ranges over [{int(ids.min())}, {int(ids.max())}]" + absolute)
        return out
    if draft_vocab_size > 1 and not bool((ids[1:] > ids[:-1]).all()):
        err("VOCAB_D2T_NOT_INCREASING", "d2t", "i + d2t[i] is not strictly increasing (the map is built from sorted token ids)" + absolute)
    if t2d is not None:
        t2d_ok = bool(t2d[ids].all())
        if not t2d_ok:
            missing = int((~t2d[ids]).sum())
            err("VOCAB_MAPS_DISAGREE", "d2t/t2d", f"{missing} draft ids map to target ids that t2d says are not in the draft "
                "vocabulary; d2t and t2d disagree" + absolute)
    if absolute and not any(f.severity.blocking for f in out):
        out.append(vocab_finding("VOCAB_D2T_READS_ABSOLUTE", "d2t", "consistent as offsets, but d2t also reads as absolute ids"
                                 + absolute))
    if bool((d2t == 0).all()) and draft_vocab_size < vocab_size:
        out.append(vocab_finding("VOCAB_D2T_ALL_ZERO", "d2t", f"all offsets are 0: draft id i is target id i, i.e. the draft "
                                 f"vocabulary is exactly the first {draft_vocab_size} target ids. Real maps are "
                                 "built from token frequencies; check the map was written."))
    return out


def _looks_absolute(d2t: torch.Tensor, t2d: torch.Tensor | None, vocab_size: int) -> str:
    """A sentence when ``d2t`` would be a valid map if it held absolute target ids, else ''."""
    if bool((d2t == 0).all()):
        return ""
    ok = bool(((d2t >= 0) & (d2t < vocab_size)).all()) and bool((d2t[1:] > d2t[:-1]).all())
    if ok and t2d is not None:
        ok = bool(t2d[d2t].all())
    if not ok:
        return ""
    return (". d2t looks like ABSOLUTE target ids stored where offsets belong (i + d2t[i] would be wrong "
            "for every i > 0); fix: d2t = d2t - arange(draft_vocab_size)")


def build_vocab_map(target_ids: torch.Tensor, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted target ids of the draft vocabulary -> ``(d2t offsets, t2d mask)``."""
    target_ids = torch.as_tensor(target_ids, dtype=torch.long).sort().values
    d2t = target_ids - torch.arange(len(target_ids))
    t2d = torch.zeros(vocab_size, dtype=torch.bool)
    t2d[target_ids] = True
    return d2t, t2d
