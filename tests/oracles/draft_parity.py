"""What the draft parity tests share: tiny drafts of every variant, the features every side reads, one
engine-script run per library, and our own per-step tensors.

Every side gets the same rows: ``input_ids`` [1, T] (row t reads token x_{t+1}), ``aux`` [1, T, F]
(the fc input at row t), ``positions`` [1, T] = 0..T-1. Step 0 is the fc path; step k >= 1 is the
draft fed its own state (rows read x_{t+k+1}, positions + k, attention to step-0 rows <= t and to row
t of steps 1..k): speculators' ``Eagle3DraftModel.forward`` over its ttt steps, SpecForge's
``OnlineEagle3Model`` TTT loop, and ours ``eagle3lab.decoding.evaluate.draft_passes``.
T is 128 because speculators' flex mask grows by whole 128-row blocks each step
(``extend_mask_for_draft_tokens``, speculators 0.9.0 models/eagle3/attention.py); RoPE variants therefore use
tiny original contexts (ROPES), so that the rows run past them. mrope drafts may take [3, 1, T] positions.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest
import torch
from helpers.paths import engines_python
from safetensors.torch import load_file, save_file

from eagle3lab.decoding.evaluate import draft_passes, pass_mask
from eagle3lab.models.draft import DraftCache, DraftConfig, Eagle3Draft

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

# RoPE variants the trainers build, on tiny original contexts (16-64) so that the T = 128 rows run past them:
# name -> (rope_scaling as written in the draft's config, max_position_embeddings[, rope_theta]). Which trainer
# builds which (and refuses the others) is asserted by each oracle module.
ROPES = {
    "linear": ({"rope_type": "linear", "factor": 4.0}, 2048),
    # dynamic rescales theta only beyond max_position_embeddings: 32 < T
    "dynamic": ({"rope_type": "dynamic", "factor": 4.0}, 32),
    "llama3": ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16}, 2048),
    # transformers 5 fills a missing original_max_position_embeddings with max_position_embeddings (32 < T)
    "llama3_no_original": ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
                           32),
    # SpecForge's DeepSeek-V2-Lite draft (mscale = mscale_all_dim: cos/sin scale 1) and TorchSpec's Kimi-K2.5
    # draft (legacy "type" key), on a 16-token original context
    "yarn_deepseek": ({"rope_type": "yarn", "factor": 40.0, "mscale": 0.707, "mscale_all_dim": 0.707,
                       "beta_fast": 32.0, "beta_slow": 1.0, "original_max_position_embeddings": 16}, 2048),
    "yarn_kimi": ({"type": "yarn", "factor": 64.0, "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 1.0,
                   "beta_slow": 1.0, "original_max_position_embeddings": 16}, 2048),
    # mscale != mscale_all_dim: cos/sin scaled by mscale(factor, 1.0) / mscale(factor, 0.5) != 1
    "yarn_mscale_ratio": ({"rope_type": "yarn", "factor": 8.0, "mscale": 1.0, "mscale_all_dim": 0.5,
                           "beta_fast": 32.0, "beta_slow": 1.0, "original_max_position_embeddings": 16}, 2048),
    # mscale without mscale_all_dim (0): transformers scales by mscale(factor, 1), SpecForge by mscale(factor, 0.707)
    "yarn_mscale_all_dim_0": ({"rope_type": "yarn", "factor": 8.0, "mscale": 0.707, "mscale_all_dim": 0.0,
                               "beta_fast": 32.0, "beta_slow": 1.0, "original_max_position_embeddings": 16}, 2048),
    # Qwen-style yarn: factor and original context only (transformers: beta 32/1, scale 0.1 ln(factor) + 1)
    "yarn_no_mscale": ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}, 2048),
    # betas but no mscale keys; GPT-OSS-style truncate false (the correction range is not rounded: with theta
    # 10000 and these betas its ends fall inside head_dim 8, so that rounding them moves two frequencies)
    "yarn_betas_no_mscale": ({"rope_type": "yarn", "factor": 8.0, "beta_fast": 32.0, "beta_slow": 1.0,
                              "original_max_position_embeddings": 16}, 2048),
    "yarn_truncate_false": ({"rope_type": "yarn", "factor": 8.0, "beta_fast": 4.0, "beta_slow": 0.1,
                             "original_max_position_embeddings": 64, "truncate": False}, 2048, 10000.0),
    "longrope": ({"rope_type": "longrope", "short_factor": [1.0, 1.5, 2.0, 3.0],
                  "long_factor": [1.0, 2.0, 4.0, 8.0], "original_max_position_embeddings": 16}, 64),
    "proportional": ({"rope_type": "proportional", "partial_rotary_factor": 0.5}, 2048),
    # Qwen2.5-VL's legacy form for head_dim 8
    "mrope": ({"type": "mrope", "mrope_section": [1, 1, 2]}, 2048),
}


def rope_of(name: str | None) -> tuple[dict | None, int, float]:
    """(rope_scaling, max_position_embeddings, rope_theta) of a ROPES name (None: plain RoPE, TINY's sizes)."""
    if name is None:
        return None, TINY["max_position_embeddings"], TINY["rope_theta"]
    scaling, max_positions, *theta = ROPES[name]
    return scaling, max_positions, theta[0] if theta else TINY["rope_theta"]


def tiny_draft(seed: int, layers: int = 1, kv_heads: int = 2, draft_vocab: int | None = 20,
               aux_ids=(1, 3, 5), target_hidden: int = 16, attention: str = "llama", rope: str | None = None,
               **flags) -> Eagle3Draft:
    """A random draft (every weight N(0, 0.3): norms away from 1, so that a wrong norm shows up). ``rope``:
    a name in ROPES."""
    rope_scaling, max_positions, theta = rope_of(rope)
    cfg = DraftConfig(**{**TINY, "num_key_value_heads": kv_heads, "max_position_embeddings": max_positions,
                         "rope_theta": theta},
                      num_hidden_layers=layers, attention=attention, rope_scaling=copy.deepcopy(rope_scaling),
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


def with_plain_rope(draft: Eagle3Draft) -> Eagle3Draft:
    """The same weights, profile and format with plain RoPE: what a parity would see if the RoPE were lost."""
    twin = Eagle3Draft(dataclasses.replace(draft.config, rope_scaling=None), profile=draft.profile, fmt=draft.format)
    twin.load_state_dict(draft.state_dict())
    return twin.eval().requires_grad_(False)


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


def engine_rows(ids: torch.Tensor, aux: torch.Tensor, positions: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """The step-0 rows an engine reads: token x_{t+1} with the fc input of row t, positions 0..T-1 (or given)."""
    return {"input_ids": ids[:, 1:].contiguous(), "aux": aux[:, :-1].contiguous(),
            "positions": torch.arange(T)[None] if positions is None else positions.contiguous()}


def vision_positions() -> torch.Tensor:
    """mrope positions [3, 1, T] as Qwen2-VL's get_rope_index gives them for text, a 4 x 6 image, then text:
    the three axes differ over the image, so every mrope section turns with its own axis."""
    text, image, after = 40, (4, 6), T - 40 - 24
    t = torch.full(image, text).flatten()
    h = (text + torch.arange(image[0])[:, None].expand(image)).flatten()
    w = (text + torch.arange(image[1])[None, :].expand(image)).flatten()
    start = text + max(image)
    rows = [torch.cat([torch.arange(text), axis, start + torch.arange(after)]) for axis in (t, h, w)]
    return torch.stack(rows)[:, None]


def passes_at(draft: Eagle3Draft, ids: torch.Tensor, aux: torch.Tensor, steps: int, positions: torch.Tensor) -> list:
    """``draft_passes`` with explicit step-0 positions (mrope's [3, 1, T] axes): step k sees them + k, as
    every trainer's TTT loop shifts them (SpecForge: ``position_ids + lck``)."""
    cache, rows = DraftCache(), ids.shape[1] - 1
    outs = [draft(ids[:, 1:], aux[:, :-1], position_ids=positions, cache=cache)]
    ids_ext = torch.cat([ids, torch.zeros(1, steps, dtype=ids.dtype)], dim=1)
    for k in range(2, steps + 1):
        outs.append(draft(ids_ext[:, k:k + rows], recycled_hidden=outs[-1].hidden, position_ids=positions + k - 1,
                          attention_mask=pass_mask(rows, k), cache=cache))
    return outs


@torch.no_grad()
def our_steps(draft: Eagle3Draft, ids: torch.Tensor, aux: torch.Tensor, steps: int = STEPS,
              positions: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """Our per-step tensors under the draft's profile, named as the engine scripts name theirs:
    ``{step}/logits``, ``{step}/prenorm`` (last layer's output) and ``{step}/fed`` (the state entering
    layer 0: fc(aux) at step 0, the recycled state after it). ``positions``: step 0's, when not 0..T-1."""
    seen: dict[str, list[torch.Tensor]] = {"hook_prenorm_out": [], "hook_fc_out": []}
    with draft.hooks({name: (lambda t, n: seen[n].append(t)) for name in seen}):
        outs = draft_passes(draft, ids, aux, steps) if positions is None else passes_at(draft, ids, aux, steps,
                                                                                           positions)
    res = {}
    for k, out in enumerate(outs):
        res[f"{k}/logits"] = out.logits
        res[f"{k}/prenorm"] = seen["hook_prenorm_out"][k]
        res[f"{k}/fed"] = seen["hook_fc_out"][0] if k == 0 else outs[k - 1].hidden
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
