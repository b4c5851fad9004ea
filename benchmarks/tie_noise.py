"""How far do a batched forward's logits sit from one-token steps' over the same tokens? The number behind
``eagle3lab.decoding.lossless.TIE_ULPS``.

    python benchmarks/tie_noise.py [--device cpu] [--dtype bfloat16] [--random 16x2048x32000] [--out x.json]

For each target (the bundled one, a random tiny Llama, and any ``--random LAYERSxHIDDENxVOCAB`` shapes, random
weights built on the device), random token sequences are read three ways in ``--dtype``: one forward over the
whole sequence (the lossless check's), the prompt then chunks of ``--chunk`` tokens on the KV cache (a chain
verify's), and the prompt then one token per forward (the greedy loop's). ``d`` is the largest difference of
a logit between two readings (whole or chunked against one-token, and whole against chunked), in resolutions
(``torch.finfo(dtype).eps * max |logit|`` of the one-token row); the tie rule must cover ``2 d`` (module doc
of ``eagle3lab.decoding.lossless``). Then the
bundled pair decodes ``--prompts`` prompts speculatively and by ``generate``, and the lossless check counts
identical outputs, tie flips and bugs.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from eagle3lab import bundled
from eagle3lab.decoding.lossless import lossless_check
from eagle3lab.decoding.speculative import (
    _forward_kwargs,
    hf_generate,
    new_target_cache,
    speculative_generate,
)
from eagle3lab.models.target import Target, load_target


@torch.no_grad()
def readings(tgt, seq: list[int], prompt_len: int, chunk: int) -> dict[str, torch.Tensor]:
    """Logits predicting tokens prompt_len.. of ``seq``, read whole, in chunks and one token at a time."""
    model, x = tgt.model, torch.tensor([seq], device=tgt.device)
    kw = _forward_kwargs(model)   # the cache argument's name in this transformers

    def stepped(width: int) -> torch.Tensor:
        cache = new_target_cache(model)
        out = [model(input_ids=x[:, :prompt_len], use_cache=True, **{kw: cache}).logits[0, -1:]]
        for t in range(prompt_len, len(seq) - 1, width):
            out.append(model(input_ids=x[:, t:t + width], use_cache=True, **{kw: cache}).logits[0])
        return torch.cat(out)[:len(seq) - prompt_len].float()

    full = model(input_ids=x).logits[0, prompt_len - 1:-1].float()
    return {"full": full, "chunk": stepped(chunk), "one": stepped(1)}


PAIRS = {"full": ("full", "one"), "chunk": ("chunk", "one"), "full_vs_chunk": ("full", "chunk")}


def noise(tgt, n_seqs: int, length: int, prompt_len: int, chunk: int, seed: int = 0) -> dict:
    """``d`` (max, 99th percentile, median over positions) between each pair of readings (``PAIRS``)."""
    g = torch.Generator().manual_seed(seed)
    eps = torch.finfo(tgt.dtype).eps
    got: dict[str, list] = {name: [] for name in PAIRS}
    scale = []
    for _ in range(n_seqs):
        seq = torch.randint(0, tgt.vocab_size, (length,), generator=g).tolist()
        r = readings(tgt, seq, prompt_len, chunk)
        res = eps * r["one"].abs().amax(-1)
        scale.append(r["one"].abs().amax(-1))
        for name, (a, b) in PAIRS.items():
            got[name].append((r[a] - r[b]).abs().amax(-1) / res)
    out = {name: {"max": float(torch.cat(v).max()), "q99": float(torch.cat(v).quantile(0.99)),
                  "median": float(torch.cat(v).median())} for name, v in got.items()}
    return {**out, "max_abs_logit_median": float(torch.cat(scale).median()), "positions": len(torch.cat(scale))}


def random_target(shape: str, device: str, dtype: torch.dtype) -> Target:
    """A random Llama of ``LAYERSxHIDDENxVOCAB``, built on the device (no host copy)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    layers, hidden, vocab = (int(v) for v in shape.split("x"))
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 7 // 2,
                      num_hidden_layers=layers, num_attention_heads=max(1, hidden // 128),
                      num_key_value_heads=max(1, hidden // 512), max_position_embeddings=4096)
    torch.manual_seed(0)
    with torch.device(device):
        model = LlamaForCausalLM(cfg).to(dtype).eval()
    return Target.wrap(model, path=f"random-{shape}")


def spec_check(device: str, dtype: str, n_prompts: int, max_new_tokens: int) -> dict:
    """The bundled pair decoded speculatively (chain 5, tree 5/4/8) and by ``generate``: the lossless check."""
    from eagle3lab.bundled import load_prompts
    from eagle3lab.models.checkpoint import load_draft

    tgt = load_target(bundled.TARGET, device=device, dtype=dtype)
    draft = load_draft(bundled.DRAFT_HEALTHY, target=tgt, device=device, dtype=dtype)
    prompts = load_prompts(n=n_prompts)
    refs = [hf_generate(tgt, p, max_new_tokens).tokens for p in prompts]
    out = {}
    for name, kw in {"chain 5": dict(num_steps=5), "tree 5/4/8": dict(num_steps=5, topk=4, num_draft_tokens=8)}.items():
        toks = [speculative_generate(tgt, draft, p, max_new_tokens=max_new_tokens, **kw).tokens for p in prompts]
        out[name] = lossless_check(tgt, prompts, toks, refs).to_json()
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--random", nargs="*", default=[], help="extra random shapes, LAYERSxHIDDENxVOCAB")
    ap.add_argument("--seqs", type=int, default=4)
    ap.add_argument("--length", type=int, default=48)
    ap.add_argument("--chunk", type=int, default=6, help="tokens per verify-like forward (a chain of 5 + root)")
    ap.add_argument("--prompts", type=int, default=4, help="prompts for the speculative check (0: skip it)")
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    dtype = getattr(torch, args.dtype)
    targets = {"bundled": lambda: load_target(bundled.TARGET, device=args.device, dtype=args.dtype),
               "random 4x64x300": lambda: random_target("4x64x300", args.device, dtype)}
    targets.update({f"random {s}": (lambda s=s: random_target(s, args.device, dtype)) for s in args.random})
    report = {"device": args.device, "dtype": args.dtype, "torch": torch.__version__, "noise": {}}
    for name, make in targets.items():
        t0 = time.perf_counter()
        tgt = make()
        report["noise"][name] = {**noise(tgt, args.seqs, args.length, 16, args.chunk), "layers": tgt.num_layers,
                                 "seconds": time.perf_counter() - t0}
        print(name, json.dumps(report["noise"][name]), flush=True)
        del tgt
    if args.prompts:
        report["lossless"] = spec_check(args.device, args.dtype, args.prompts, args.max_new_tokens)
        print("lossless", json.dumps(report["lossless"]), flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main()
