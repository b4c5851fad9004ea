"""What the draft parity tests share: tiny drafts of every variant, the features every side reads, one
engine-script run per library, and our own per-step tensors.

Every side gets the same rows: ``input_ids`` [1, T] (row t reads token x_{t+1}), ``aux`` [1, T, F]
(the fc input at row t), ``positions`` [1, T] = 0..T-1. Step 0 is the fc path; step k >= 1 is the
draft fed its own state (rows read x_{t+k+1}, positions + k, attention to step-0 rows <= t and to row
t of steps 1..k): speculators' ``Eagle3DraftModel.forward`` over its ttt steps, SpecForge's
``OnlineEagle3Model`` TTT loop, and ours ``eagle3lab.decoding.evaluate.draft_passes``.
T is 128 because speculators' flex mask grows by whole 128-row blocks each step
(``extend_mask_for_draft_tokens``, speculators 0.9.0 models/eagle3/attention.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import engines_python
from safetensors.torch import load_file, save_file

from eagle3lab.decoding.evaluate import draft_passes
from eagle3lab.models.draft import DraftConfig, Eagle3Draft

T = 128      # rows per step
STEPS = 3    # step 0 and two recurrent steps
SCRIPTS = Path(__file__).resolve().parent / "engine_scripts"
# "at 1e-5 in fp32": two fp32 implementations of the same math in a different op order agree to 1e-5 of
# each tensor's scale (a residual stream of real features reaches |h| ~ 250, where fp32 itself keeps ~3e-5)
TOL = 1e-5

# the tiny geometry: GQA (4 query heads on 2 kv heads), head_dim 8 != hidden/heads, a draft vocabulary
TINY = dict(hidden_size=16, intermediate_size=40, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            vocab_size=50, rms_norm_eps=1e-5, rope_theta=500000.0, max_position_embeddings=2048)
TINY_TARGET_LAYERS = 8


def tiny_draft(seed: int, layers: int = 1, kv_heads: int = 2, draft_vocab: int | None = 20,
               aux_ids=(1, 3, 5), target_hidden: int = 16, **flags) -> Eagle3Draft:
    """A random draft (every weight N(0, 0.3): norms away from 1, so that a wrong norm shows up)."""
    cfg = DraftConfig(**{**TINY, "num_key_value_heads": kv_heads}, num_hidden_layers=layers,
                      draft_vocab_size=draft_vocab, target_hidden_size=target_hidden, aux_layer_ids=aux_ids,
                      **{k: flags.get(k, False) for k in ("norm_before_residual", "norm_before_fc", "fc_norm",
                                                          "norm_output")})
    gen = torch.Generator().manual_seed(seed)
    draft = Eagle3Draft(cfg, profile="speculators").bound(num_target_layers=TINY_TARGET_LAYERS)
    with torch.no_grad():
        for p in draft.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        if draft.d2t is not None:
            keep = torch.randperm(cfg.vocab_size, generator=gen)[:cfg.draft_vocab_size].sort().values
            draft.d2t.copy_(keep - torch.arange(cfg.draft_vocab_size))
            draft.t2d.zero_()
            draft.t2d[keep] = True
    return draft.eval().requires_grad_(False)


def tiny_verifier(folder: Path, hidden: int = 16) -> Path:
    """A tiny random Llama target saved by transformers: speculators reads its verifier (config, embedding,
    norm) from it and SpecForge its embedding; our load_draft takes it as the target."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(7)
    cfg = LlamaConfig(vocab_size=TINY["vocab_size"], hidden_size=hidden, intermediate_size=32,
                      num_hidden_layers=TINY_TARGET_LAYERS, num_attention_heads=4, num_key_value_heads=2,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    return folder


def random_features(seed: int, vocab: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids [1, T+1], aux [1, T+1, width])`` for a random draft (its fc input is random too)."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, T + 1), generator=gen), torch.randn(1, T + 1, width, generator=gen)


def captured_features(target, draft, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids, aux)`` captured from a real target on real text at the resid points the draft reads."""
    from eagle3lab.models.capture import capture_resid, concat_aux

    ids = target.encode([text])["input_ids"][:, :T + 1]
    if ids.shape[1] < T + 1:
        raise ValueError(f"the text gives {ids.shape[1]} tokens, {T + 1} needed")
    points = list(draft.aux_resid)
    return ids, concat_aux(capture_resid(target, ids, sorted(set(points))), points).float()


def engine_rows(ids: torch.Tensor, aux: torch.Tensor) -> dict[str, torch.Tensor]:
    """The step-0 rows an engine reads: token x_{t+1} with the fc input of row t, positions 0..T-1."""
    return {"input_ids": ids[:, 1:].contiguous(), "aux": aux[:, :-1].contiguous(),
            "positions": torch.arange(T)[None]}


@torch.no_grad()
def our_steps(draft: Eagle3Draft, ids: torch.Tensor, aux: torch.Tensor, steps: int = STEPS) -> dict[str, torch.Tensor]:
    """Our per-step tensors under the draft's profile, named as the engine scripts name theirs:
    ``{step}/logits``, ``{step}/prenorm`` (last layer's output) and ``{step}/fed`` (the state entering
    layer 0: fc(aux) at step 0, the recycled state after it)."""
    seen: dict[str, list[torch.Tensor]] = {"prenorm_out": [], "fc_out": []}
    with draft.hooks({name: (lambda t, n: seen[n].append(t)) for name in seen}):
        outs = draft_passes(draft, ids, aux, steps)
    res = {}
    for k, out in enumerate(outs):
        res[f"{k}/logits"] = out.logits
        res[f"{k}/prenorm"] = seen["prenorm_out"][k]
        res[f"{k}/fed"] = seen["fc_out"][0] if k == 0 else outs[k - 1].hidden
    return res


def run_script(script: str, cases: list[dict], features: dict[str, torch.Tensor], folder: Path,
               env: dict | None = None) -> tuple[dict, dict[str, torch.Tensor]]:
    """One engine-env run of ``engine_scripts/<script>`` over every case: (result.json, tensors)."""
    python = engines_python()
    folder.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous().clone() for k, v in features.items()}, str(folder / "features.safetensors"))
    job = folder / "job.json"
    job.write_text(json.dumps({"features": str(folder / "features.safetensors"), "out": str(folder),
                               "cases": cases}, indent=1))
    run_env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **(env or {})}
    run_env.pop("PYTHONPATH", None)   # the engine env must not see eagle3lab
    proc = subprocess.run([str(python), str(SCRIPTS / script), str(job)], capture_output=True, text=True,
                          env=run_env, timeout=600)
    if proc.returncode != 0:
        pytest.fail(f"{script} failed (rc {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads((folder / "result.json").read_text()), load_file(str(folder / "tensors.safetensors"))


def steps_of(tensors: dict[str, torch.Tensor], prefix: str) -> dict[str, torch.Tensor]:
    """The ``{step}/{what}`` tensors of one case (and backend) out of a script's output."""
    return {k[len(prefix) + 1:]: v for k, v in tensors.items() if k.startswith(prefix + "/")}


def assert_close_scaled(theirs: torch.Tensor, ours: torch.Tensor, tol: float = TOL, msg: str = "") -> None:
    """Equal to ``tol`` relative to each element and to the tensor's largest magnitude (at least 1)."""
    scale = max(1.0, float(ours.abs().max()))
    torch.testing.assert_close(theirs, ours, atol=tol * scale, rtol=tol,
                               msg=lambda m: f"{msg}: {m} (scale {scale:.3g})")


def assert_steps_match(ours: dict, theirs: dict, valid_rows=None) -> None:
    """Every step's logits, pre-norm output and fed state agree (``valid_rows(step)``: rows compared)."""
    assert sorted(theirs) == sorted(ours), (sorted(theirs), sorted(ours))
    for key in sorted(ours):
        rows = valid_rows(int(key.split("/")[0])) if valid_rows else T
        assert_close_scaled(theirs[key][:, :rows], ours[key][:, :rows], msg=key)


def max_difference(ours: dict, theirs: dict, what: str = "logits") -> float:
    return max(float((ours[k] - theirs[k]).abs().max()) for k in ours if k.endswith(what))
