"""A Kimi-K2.5-shaped case for ``eagle3lab doctor --dump``, made from a cheap synthetic process (random weights).

    write_case(out_dir, scale=1.0, layers=None, prompts=16, prompt_len=32, new_tokens=40, seed=0) -> dict

Three folders under ``out_dir``:

- ``dump/``: one safetensors file per prompt in vLLM's ``extract_hidden_states`` layout (``hidden_states``
  ``[T, N + 1, H]`` bf16 holding resid[0..N], ``token_ids`` ``[T]``) and ``manifest.json`` (points, prompt ends,
  ``continuation: "greedy"``), as ``models.hidden_dump`` reads it (docs/dumps.md);
- ``head/``: the target's ``config.json`` (Kimi-K2.5's, geometry in ``text_config``: DeepseekV3ForCausalLM,
  61 layers, hidden 7168, vocabulary 163840, from moonshotai/Kimi-K2.5's config.json) and ``model.safetensors``
  with ``model.norm.weight`` and ``lm_head.weight`` (bf16);
- ``draft/``: an MLA EAGLE-3 draft in SGLang format (``Eagle3DeepseekV2ForCausalLM``; geometry and yarn RoPE of
  lightseekorg/TorchSpec ``configs/kimi_k25_eagle3_mla.json``; draft vocabulary 32000 with d2t/t2d, as SpecForge's
  Kimi-K2.5 template; ``eagle_aux_hidden_state_layer_ids`` [1, 29, 57]).

The process: a token vector ``a_v`` (H/2 wide) per target token. At position t every dumped state holds
``a[x_{t+1}]`` in its first half (what the target's head reads: its rows are ``[a_v, small noise]``, so its top-1
is the next token and the continuation is greedy) and ``a[x_{t+2}]`` in its second half (the look-ahead a draft
learns), each layer k with its own signs ``s_k`` (``s_N`` = +1; going down, each layer flips a random
``FLIP`` of the coordinates) and its own noise. The draft's fc reads, in each slot, the second half of the
state it was trained on, undoes that layer's signs and moves it to the first half, where its lm_head (rows
``a`` of the draft vocabulary) reads it: fed the trained layer a slot passes the look-ahead whole, fed layer
k' it passes a share ``(1 - 2 FLIP) ** |k - k'|``. So the trained wiring is the one point that scores best and
its neighbours score a little worse: it is identifiable, as a real draft's is, and by how much is set here.
The draft was trained on resid[2, 30, 58]: SGLang's reading of the ids [1, 29, 57] on a DeepSeek-family
target (bare ids read by vLLM's rule would be resid[1, 29, 57], one layer early in every slot). The decoder layer's weights are small and random (the layer passes fc's output nearly unchanged),
so the first-layer rule and the recycled state are not identifiable here, and later chain steps rarely accept.

``scale`` shrinks every width (hidden, vocabularies, heads, ranks, intermediate size) for development and
tests; ``layers`` the depth. Nothing is held in memory at full scale beyond one prompt's states and one
weight at a time, except the draft (about 4 GB in bf16 while it is written).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch

FLIP = 0.12         # share of coordinates whose sign flips from one layer to the next
NOISE = 0.3         # per-layer noise beside a unit-variance signal
SURE = 6.0          # the draft's logit for a token whose vector it is fed whole, about SURE x sqrt(2)
REPEAT = 0.75       # the chance that a token repeats the one before (see _sequences)
TRAINED = (2, 30, 58)   # resid points the draft was trained on, at N = 61 (scaled with the depth)
IDS = (1, 29, 57)       # what its config writes (SGLang DeepSeek rule: +1 when the first id is 1)

# moonshotai/Kimi-K2.5 config.json (text_config), the sizes doctor reads
KIMI_K25 = {"num_hidden_layers": 61, "hidden_size": 7168, "vocab_size": 163840, "rms_norm_eps": 1e-5,
            "intermediate_size": 18432, "num_attention_heads": 64, "q_lora_rank": 1536, "kv_lora_rank": 512,
            "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128, "rope_theta": 50000.0,
            "max_position_embeddings": 262144}
# lightseekorg/TorchSpec configs/kimi_k25_eagle3_mla.json: its yarn RoPE (the draft's geometry is the target's above)
DRAFT_ROPE = {"type": "yarn", "factor": 64.0, "mscale": 1.0, "mscale_all_dim": 1.0, "beta_fast": 1.0, "beta_slow": 1.0,
              "original_max_position_embeddings": 4096}
DRAFT_VOCAB = 32000   # SpecForge configs/kimi-k25-eagle3.json (pull request #476)


def shape(scale: float = 1.0, layers: int | None = None) -> dict:
    """Kimi-K2.5's sizes times ``scale`` (widths kept even and at least a few units), ``layers`` deep."""
    def s(x, floor=2, mult=2):
        return max(floor, int(round(x * scale / mult)) * mult)
    heads = s(64, 2, 1)
    return {"layers": layers or KIMI_K25["num_hidden_layers"], "hidden": s(7168, 16), "vocab": s(163840, 512),
            "draft_vocab": s(DRAFT_VOCAB, 128), "intermediate": s(18432, 16), "heads": heads,
            "q_lora": s(1536, 4), "kv_lora": s(512, 4), "nope": s(128, 2), "rope": s(64, 2), "v": s(128, 2)}


def trained_points(layers: int) -> tuple[int, ...]:
    """TRAINED at another depth: resid[2] (SGLang's +1 rule needs a first id of 1), the middle, N - 3."""
    return 2, round(TRAINED[1] * layers / 61), layers - 3


def stated_ids(layers: int) -> tuple[int, ...]:
    return tuple(p - 1 for p in trained_points(layers))


def _signs(g: torch.Generator, layers: int, half: int) -> torch.Tensor:
    """[layers + 1, half] of +-1: s_N = +1, each layer below flips FLIP of the coordinates of the one above."""
    signs = torch.ones(layers + 1, half)
    for k in range(layers - 1, -1, -1):
        flip = torch.rand(half, generator=g) < FLIP
        signs[k] = torch.where(flip, -signs[k + 1], signs[k + 1])
    return signs


def _token_table(g: torch.Generator, vocab: int, half: int) -> torch.Tensor:
    """a_v, [vocab, half] bf16, drawn in blocks (an fp32 copy of Kimi's would be 2.3 GB)."""
    table = torch.empty(vocab, half, dtype=torch.bfloat16)
    for start in range(0, vocab, 16384):
        stop = min(vocab, start + 16384)
        table[start:stop] = torch.randn(stop - start, half, generator=g).bfloat16()
    return table


def _write_head(folder: Path, sz: dict, table: torch.Tensor, g: torch.Generator) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    half = sz["hidden"] // 2
    head = torch.empty(sz["vocab"], sz["hidden"], dtype=torch.bfloat16)
    head[:, :half] = table
    for start in range(0, sz["vocab"], 16384):
        stop = min(sz["vocab"], start + 16384)
        head[start:stop, half:] = (0.05 * torch.randn(stop - start, half, generator=g)).bfloat16()
    save_file({"model.norm.weight": torch.ones(sz["hidden"], dtype=torch.bfloat16), "lm_head.weight": head},
              str(folder / "model.safetensors"))
    text = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2", **KIMI_K25,
            "num_hidden_layers": sz["layers"], "hidden_size": sz["hidden"], "vocab_size": sz["vocab"],
            "intermediate_size": sz["intermediate"], "num_attention_heads": sz["heads"],
            "num_key_value_heads": sz["heads"], "q_lora_rank": sz["q_lora"], "kv_lora_rank": sz["kv_lora"],
            "qk_nope_head_dim": sz["nope"], "qk_rope_head_dim": sz["rope"], "v_head_dim": sz["v"],
            "tie_word_embeddings": False, "torch_dtype": "bfloat16"}
    config = {"architectures": ["KimiK25ForConditionalGeneration"], "model_type": "kimi_k25",
              "tie_word_embeddings": False, "text_config": text}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")


def _sequences(g: torch.Generator, sz: dict, draft_ids: torch.Tensor, prompts: int, length: int) -> list:
    """Token ids in runs (each token repeated with probability REPEAT), new tokens mostly (90%) from the draft
    vocabulary. The runs let a later chain step be right as often as a draft that repeats its last token:
    without them every later step fails, and a draft sure of its first step scores a worse cross-entropy
    than one fed nothing."""
    seqs = []
    for _ in range(prompts):
        inside = draft_ids[torch.randint(len(draft_ids), (length,), generator=g)]
        anywhere = torch.randint(sz["vocab"], (length,), generator=g)
        fresh = torch.where(torch.rand(length, generator=g) < 0.9, inside, anywhere)
        new = torch.rand(length, generator=g) >= REPEAT
        new[0] = True
        seqs.append(fresh[torch.cummax(torch.where(new, torch.arange(length), 0), 0).values])
    return seqs


def _write_dump(folder: Path, sz: dict, table, signs, seqs, prompt_len: int, g: torch.Generator) -> None:
    from safetensors.torch import save_file

    folder.mkdir(parents=True)
    n = sz["layers"]
    samples = []
    for i, tok in enumerate(seqs):
        t = len(tok)
        nxt = torch.cat([tok[1:], torch.randint(sz["vocab"], (2,), generator=g)])   # x_{t+1}, then x_{t+2}
        base = torch.cat([table[nxt[:t]].float(), table[nxt[1:t + 1]].float()], dim=-1)   # [T, H]
        hs = torch.empty(t, n + 1, sz["hidden"], dtype=torch.bfloat16)
        for k in range(n + 1):
            s = signs[k].repeat(2)
            hs[:, k] = (s * base + NOISE * torch.randn(t, sz["hidden"], generator=g)).bfloat16()
        name = f"sample_{i:06d}.safetensors"
        save_file({"hidden_states": hs, "token_ids": tok.long()}, str(folder / name),
                  metadata={"resid": json.dumps(list(range(n + 1)))})
        samples.append({"file": name, "num_tokens": t, "prompt_index": i, "prompt_len": prompt_len})
    manifest = {"format": "eagle3lab-hidden-dump/1", "layout": "vLLM extract_hidden_states: hidden_states "
                "[T, n_layers, H], token_ids [T]", "resid": list(range(n + 1)), "num_layers": n,
                "hidden_size": sz["hidden"], "dtype": "bfloat16", "continuation": "greedy",
                "target": f"synthetic Kimi-K2.5-shaped process (benchmarks/kimi_case.py, {sz})", "samples": samples}
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")


def _draft_config(sz: dict):
    from eagle3lab.models.draft import DraftConfig

    return DraftConfig(hidden_size=sz["hidden"], intermediate_size=sz["intermediate"],
                       num_attention_heads=sz["heads"], vocab_size=sz["vocab"], draft_vocab_size=sz["draft_vocab"],
                       rms_norm_eps=KIMI_K25["rms_norm_eps"], rope_theta=KIMI_K25["rope_theta"],
                       rope_scaling=dict(DRAFT_ROPE), max_position_embeddings=4096,
                       aux_layer_ids=stated_ids(sz["layers"]), attention="mla", q_lora_rank=sz["q_lora"],
                       kv_lora_rank=sz["kv_lora"], qk_nope_head_dim=sz["nope"], qk_rope_head_dim=sz["rope"],
                       v_head_dim=sz["v"], extra={"model_type": "kimi_k2"})


@torch.no_grad()
def _write_draft(folder: Path, sz: dict, table, signs, draft_ids, g: torch.Generator) -> None:
    from eagle3lab.models.checkpoint import save_draft
    from eagle3lab.models.draft import Eagle3Draft
    from eagle3lab.models.vocab import build_vocab_map

    with torch.device("meta"):
        draft = Eagle3Draft(_draft_config(sz), profile="sglang", fmt="sglang")
    draft = draft.to(torch.bfloat16).to_empty(device="cpu")
    draft._set_profile(draft.profile)   # the RoPE made again off the meta device
    h, half = sz["hidden"], sz["hidden"] // 2
    for name, p in draft.named_parameters():
        if name.endswith("norm.weight") or "layernorm" in name or name.startswith("fc_norm"):
            p.fill_(1.0)
        elif name not in ("fc.weight", "lm_head.weight"):   # small: the layer passes fc's output nearly whole
            for row in p.view(p.shape[0], -1).split(4096):
                row.copy_(torch.randn(row.shape, generator=g) * (0.02 / math.sqrt(row.shape[-1])))
    draft.embed_tokens.weight.normal_(0, 1, generator=g)
    d2t, t2d = build_vocab_map(draft_ids, sz["vocab"])
    draft.d2t.copy_(d2t)
    draft.t2d.copy_(t2d)
    # lm_head: the draft vocabulary's token vectors in the first half; its scale sets how sure the draft is
    draft.lm_head.weight.zero_()
    draft.lm_head.weight[:, :half] = (table[draft_ids].float() * (SURE / half)).bfloat16()
    # fc: slot i reads the second half of resid[trained_i], undoes its signs, writes the first half
    draft.fc.weight.zero_()
    for i, k in enumerate(trained_points(sz["layers"])):
        cols = torch.arange(half) + i * h + half
        draft.fc.weight[torch.arange(half), cols] = (signs[k] / 3).bfloat16()
    draft = draft.bound(num_target_layers=sz["layers"], target_arch="DeepseekV3ForCausalLM")
    save_draft(draft, folder, "sglang", include_embedding=True)


def write_case(out_dir, scale: float = 1.0, layers: int | None = None, prompts: int = 16, prompt_len: int = 32,
               new_tokens: int = 40, seed: int = 0) -> dict:
    """Write dump/, head/ and draft/ under ``out_dir`` (see the module docstring); returns their paths and sizes."""
    out = Path(out_dir)
    sz = shape(scale, layers)
    g = torch.Generator().manual_seed(seed)
    half = sz["hidden"] // 2
    table = _token_table(g, sz["vocab"], half)
    signs = _signs(g, sz["layers"], half)
    draft_ids = torch.randperm(sz["vocab"], generator=g)[:sz["draft_vocab"]].sort().values
    _write_head(out / "head", sz, table, g)
    _write_dump(out / "dump", sz, table, signs, _sequences(g, sz, draft_ids, prompts, prompt_len + new_tokens),
                prompt_len, g)
    _write_draft(out / "draft", sz, table, signs, draft_ids, g)
    return {"dump": str(out / "dump"), "head": str(out / "head"), "draft": str(out / "draft"), "shape": sz,
            "prompts": prompts, "tokens": prompts * (prompt_len + new_tokens), "trained": list(trained_points(sz["layers"])),
            "ids": list(stated_ids(sz["layers"]))}
