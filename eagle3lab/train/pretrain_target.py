"""Pretrain the bundled target: a small Llama-architecture causal LM on the stdlib corpus.

Plain next-token cross-entropy, AdamW, warmup + cosine. The batch of step ``s`` is drawn from a
generator seeded with ``(seed, s)``, so a run resumed from its checkpoint continues exactly as if
it had never stopped. Checkpoints (model + optimizer + step) are written atomically to
``run_dir/ckpt.pt`` every ``ckpt_every_s`` seconds; the final model is a standard Hugging Face
directory (config.json, model.safetensors, tokenizer files).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from eagle3lab.atomic import atomic_dir
from eagle3lab.train.corpus import Doc
from eagle3lab.train.loop import LoopResult, Schedule, batch_at, eval_windows, lr_at, run_loop


@dataclass
class TargetTrainConfig(Schedule):
    hidden_size: int = 192
    num_hidden_layers: int = 12
    num_attention_heads: int = 6
    num_key_value_heads: int = 2
    intermediate_size: int = 512
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    tie_word_embeddings: bool = True
    # the schedule's defaults for a from-scratch target (Schedule has the fields)
    steps: int = 1000
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup_steps: int = 60
    weight_decay: float = 0.1
    eval_every: int = 200
    eval_windows: int = 32
    ckpt_every_s: float = 180.0


def tokenize_docs(tokenizer, docs: list[Doc]) -> np.ndarray:
    """All docs as one uint16 stream, each document followed by the EOS token."""
    eos = tokenizer.eos_token_id
    ids = tokenizer([d.text for d in docs])["input_ids"]
    stream = np.fromiter((t for doc in ids for t in (*doc, eos)), dtype=np.int64)
    assert stream.max() < 2**16
    return stream.astype(np.uint16)


def llama_config(cfg: TargetTrainConfig, tokenizer):
    from transformers import LlamaConfig
    return LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_hidden_layers, num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=cfg.num_key_value_heads, max_position_embeddings=cfg.max_position_embeddings,
        rope_theta=cfg.rope_theta, tie_word_embeddings=cfg.tie_word_embeddings, rms_norm_eps=1e-5,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id, attention_bias=False, mlp_bias=False, hidden_act="silu")


@torch.no_grad()
def heldout_loss(model, windows: torch.Tensor, batch_size: int = 8) -> float:
    """Mean next-token cross-entropy (nats/token) over the windows."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(windows), batch_size):
        w = windows[i:i + batch_size]
        logits = model(input_ids=w[:, :-1]).logits
        total += F.cross_entropy(logits.flatten(0, 1).float(), w[:, 1:].flatten(), reduction="sum").item()
        count += w[:, 1:].numel()
    model.train(was_training)
    return total / count


def save_hf_dir(model, tokenizer, out_dir: str | Path) -> Path:
    """Write a Hugging Face model directory atomically (tmp dir, then rename over the old one)."""
    out_dir = Path(out_dir)
    with atomic_dir(out_dir) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
    return out_dir


@dataclass
class TargetTrainResult(LoopResult):
    model: object
    heldout_loss: float | None
    train_tokens: int = 0  # size of the tokenized training split


def pretrain_target(cfg: TargetTrainConfig, tokenizer, train_docs: list[Doc], heldout_docs: list[Doc],
                    run_dir: str | Path, stop_after_s: float | None = None, progress: bool = True,
                    threads: int | None = None) -> TargetTrainResult:
    """Train (or resume) the target in ``run_dir``; returns when ``cfg.steps`` are done or
    ``stop_after_s`` has passed (a later call with the same arguments continues exactly)."""
    from transformers import LlamaForCausalLM

    if threads:
        torch.set_num_threads(threads)
    stream = tokenize_docs(tokenizer, train_docs)
    heldout = eval_windows(tokenize_docs(tokenizer, heldout_docs), cfg.eval_windows, cfg.seq_len)

    torch.manual_seed(cfg.seed)
    model = LlamaForCausalLM(llama_config(cfg, tokenizer))
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=(0.9, 0.95))

    def loss_at(step):
        batch = batch_at(stream, step, cfg.batch_size, cfg.seq_len, cfg.seed)
        logits = model(input_ids=batch[:, :-1]).logits
        loss = F.cross_entropy(logits.flatten(0, 1), batch[:, 1:].flatten())
        return loss, batch[:, 1:].numel(), {"lr": lr_at(step, cfg)}, {}

    def evaluate():
        loss = round(heldout_loss(model, heldout), 4)
        return "heldout_loss", loss, f"held-out {loss:.3f}"

    run = run_loop(cfg, run_dir, {"model": model}, opt, list(model.parameters()), loss_at, evaluate,
                   stop_after_s=stop_after_s, progress=progress, desc="target")
    return TargetTrainResult(**vars(run), model=model, heldout_loss=run.last("heldout_loss"), train_tokens=len(stream))


def main(argv=None) -> int:
    from eagle3lab.train.corpus import read_corpus
    from eagle3lab.train.tokenizer import load_tokenizer

    p = argparse.ArgumentParser(description="Pretrain (or resume) the bundled target model.")
    p.add_argument("--data", default="data", help="directory with corpus/")
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--run-dir", default="runs/target")
    p.add_argument("--out", default=None, help="write the finished model here (HF directory)")
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--threads", type=int, default=None)
    args = p.parse_args(argv)
    cfg = TargetTrainConfig()
    if args.steps:
        cfg.steps = args.steps
    tok = load_tokenizer(args.tokenizer)
    res = pretrain_target(cfg, tok, read_corpus(Path(args.data) / "corpus", "train"),
                          read_corpus(Path(args.data) / "corpus", "heldout"), args.run_dir, threads=args.threads)
    print(json.dumps({"step": res.step, "heldout_loss": res.heldout_loss, "train_seconds": round(res.train_seconds),
                      "tokens_per_s": round(res.tokens_per_s)}))
    if args.out and res.done:
        save_hf_dir(res.model, tok, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
