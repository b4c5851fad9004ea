"""``make data``: rebuild tokenizer, target and drafts from the shipped corpus, deterministically.

    python -m eagle3lab.train.build_data --out data [--run-dir runs/build] [--only STAGE ...]

Stages, each resumable from its checkpoint in ``run-dir`` (a killed build continues where it
stopped): ``tokenizer`` -> ``target`` -> ``draft-healthy``, ``draft-case`` -> ``cards``.
The corpus itself (``data/corpus``) is the input; it was extracted once by
``python -m eagle3lab.train.corpus``. Same machine and thread count -> same bytes.

The two drafts:
- draft-healthy: the engines' default wiring resid[2], resid[N//2], resid[N-3], raw residual
  (norm_before_residual false); saved in SpecForge/SGLang format, ids written through
  ``to_engine_ids("sglang", ...)`` so SGLang captures exactly the trained points.
- draft-case: the seed case in miniature. Trained on [resid[0] (embedding), resid[3],
  resid[N//2+1]] with norm_before_residual true (the speculators training default), shipped in
  SGLang format with ids [2, N//2, N-2] (SGLang serves them as resid[3], resid[N//2+1],
  resid[N-1]) and ``norm_before_residual: true`` in config.json, which SGLang ignores. For N = 12
  this is exactly the issue's [resid[0], resid[3], resid[7]] -> ids [2, 6, 10].
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path

import torch

from eagle3lab.atomic import write_json
from eagle3lab.train.corpus import read_corpus

STAGES = ("tokenizer", "target", "draft-healthy", "draft-case", "cards")

VOCAB_SIZE = 4096
DRAFT_VOCAB_SIZE = 2048
DRAFT_TRAIN = dict(ttt_steps=4, seq_len=512, batch_size=4, steps=600, lr=3e-3, min_lr=3e-4, warmup_steps=30,
                   eval_every=100, eval_windows=8, draft_vocab_size=DRAFT_VOCAB_SIZE)
# The healthy draft is the throughput reference (benchmarks/bench_decode.py): it trains 3x longer,
# since its held-out agreement was still climbing at 600 steps. The case draft only has to show a
# wiring gap, so it keeps the shorter run.
HEALTHY_STEPS = 1800

# --smoke (CI): the same pipeline on a corpus slice with tiny models, in seconds.
SMOKE_DOCS = {"train": 24, "heldout": 4}
SMOKE_VOCAB_SIZE = 320
SMOKE_TARGET = dict(hidden_size=32, num_hidden_layers=12, num_attention_heads=4, num_key_value_heads=2,
                    intermediate_size=64, max_position_embeddings=256, seq_len=64, batch_size=4, steps=12,
                    warmup_steps=2, eval_every=6, eval_windows=2)
SMOKE_DRAFT = dict(draft_vocab_size=128, ttt_steps=3, seq_len=64, batch_size=2, steps=6, warmup_steps=1,
                   eval_every=3, eval_windows=2)


def docs(out: Path, split: str, smoke: bool = False):
    d = read_corpus(out / "corpus", split)
    return d[:SMOKE_DOCS[split]] if smoke else d


def case_wiring(num_layers: int) -> tuple[tuple[int, ...], list[int]]:
    """(resid points the case draft is trained on, SGLang ids it is shipped with)."""
    n = num_layers
    return (0, 3, n // 2 + 1), [2, n // 2, n - 2]


def save_sglang(draft, model_dir: Path, trained_resid, shipped_ids=None) -> dict:
    """Save a trained draft in SpecForge/SGLang format, without embedding. Healthy (``shipped_ids`` None):
    ids translated so that SGLang captures ``trained_resid``. A case: shipped as the seed's team shipped
    theirs, ``shipped_ids`` written as they are (SGLang reads them as other points) and
    ``norm_before_residual: true``, which SGLang ignores. Returns ``save_draft``'s report."""
    from eagle3lab.models.checkpoint import save_draft

    # speculators convention in memory (id k = resid[k]); save_draft translates to SGLang's ids itself
    draft.config.aux_layer_ids = None if shipped_ids else tuple(trained_resid)
    written = save_draft(draft, model_dir, format="sglang", include_embedding=False, overwrite=True)
    if shipped_ids:
        config = json.loads((model_dir / "config.json").read_text())
        config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] = list(shipped_ids)
        config["norm_before_residual"] = True
        write_json(model_dir / "config.json", config)
        written.aux_ids_written = list(shipped_ids)
    return written


def draft_configs(num_layers: int, smoke: bool = False):
    from eagle3lab.train.train_draft import DraftTrainConfig
    trained, _ = case_wiring(num_layers)
    healthy = DraftTrainConfig(aux_resid=(2, num_layers // 2, num_layers - 3), norm_before_residual=False,
                               **(SMOKE_DRAFT if smoke else DRAFT_TRAIN))
    case = replace(healthy, aux_resid=trained, norm_before_residual=True)
    if not smoke:
        healthy = replace(healthy, steps=HEALTHY_STEPS)
    return {"draft-healthy": healthy, "draft-case": case}


def build_tokenizer(out: Path, run_dir: Path, smoke: bool = False):
    from eagle3lab.train.tokenizer import load_tokenizer, train_tokenizer
    path = run_dir / "tokenizer"
    if not (path / "tokenizer.json").exists():
        tok = train_tokenizer(docs(out, "train", smoke), vocab_size=SMOKE_VOCAB_SIZE if smoke else VOCAB_SIZE)
        tok.save_pretrained(str(path))
    return load_tokenizer(path)


def build_target(out: Path, run_dir: Path, tokenizer, threads: int | None = None, smoke: bool = False) -> dict:
    from eagle3lab.train.pretrain_target import TargetTrainConfig, pretrain_target, save_hf_dir
    cfg = TargetTrainConfig(**SMOKE_TARGET) if smoke else TargetTrainConfig()
    res = pretrain_target(cfg, tokenizer, docs(out, "train", smoke), docs(out, "heldout", smoke),
                          run_dir / "target", threads=threads, progress=not smoke)
    facts = {"config": asdict(cfg), "steps": res.step, "tokens_seen": res.step * cfg.batch_size * cfg.seq_len,
             "heldout_loss": res.heldout_loss, "train_seconds": round(res.train_seconds),
             "threads": torch.get_num_threads(), "vocab_size": len(tokenizer),
             "train_tokens": int(res.train_tokens), "params": sum(p.numel() for p in res.model.parameters()),
             "log": [e for e in res.log if "heldout_loss" in e]}
    save_hf_dir(res.model, tokenizer, out / "models" / "target")
    write_json(out / "models" / "target" / "training.json", facts)
    print(f"target: {res.step} steps, held-out loss {res.heldout_loss}, {facts['train_seconds']} s", flush=True)
    return facts


def token_streams(out: Path, tokenizer, smoke: bool = False):
    from eagle3lab.train.pretrain_target import tokenize_docs
    return tokenize_docs(tokenizer, docs(out, "train", smoke)), tokenize_docs(tokenizer, docs(out, "heldout", smoke))


def build_draft(name: str, out: Path, run_dir: Path, threads: int | None = None, smoke: bool = False) -> dict:
    """Train one bundled draft against the bundled target and save it in SGLang format."""
    from eagle3lab.models.target import load_target
    from eagle3lab.train.draft_vocab import select_draft_vocab, token_counts
    from eagle3lab.train.train_draft import train_draft

    if threads:
        torch.set_num_threads(threads)
    target = load_target(out / "models" / "target", device="cpu", dtype="float32")
    n = target.num_layers
    cfg = draft_configs(n, smoke)[name]
    train_stream, heldout_stream = token_streams(out, target.tokenizer, smoke)
    vocab = select_draft_vocab(token_counts([train_stream], target.vocab_size), cfg.draft_vocab_size)
    res = train_draft(cfg, target, train_stream, heldout_stream, run_dir / name, vocab=vocab, desc=name,
                      progress=not smoke)
    draft = res.draft
    model_dir = out / "models" / name
    written = save_sglang(draft, model_dir, cfg.aux_resid, shipped_ids=None if name == "draft-healthy"
                          else case_wiring(n)[1])
    facts = {"config": asdict(cfg), "hidden_size": draft.config.hidden_size,
             "intermediate_size": draft.config.intermediate_size, "target_num_layers": n,
             "trained_resid": list(cfg.aux_resid),
             "aux_ids_written": written.aux_ids_written, "save_warnings": [w.text for w in written.warnings],
             "steps": res.step, "tokens_seen": res.step * cfg.batch_size * cfg.seq_len,
             "train_seconds": round(res.train_seconds), "threads": torch.get_num_threads(),
             "draft_vocab_coverage_train": round(vocab.coverage, 4),
             "params_trained": sum(p.numel() for p in draft.parameters() if p.requires_grad),
             "heldout": res.heldout, "log": [{"step": e["step"], "heldout": e["heldout"]}
                                             for e in res.log if "heldout" in e]}
    write_json(model_dir / "training.json", facts)
    print(f"{name}: {res.step} steps, held-out {res.heldout}, {facts['train_seconds']} s", flush=True)
    return facts


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="data")
    p.add_argument("--run-dir", default="runs/build")
    p.add_argument("--only", nargs="*", choices=STAGES, default=None)
    p.add_argument("--threads", type=int, default=None, help="torch threads (record it: results depend on it)")
    p.add_argument("--smoke", action="store_true", help="tiny models on a corpus slice (CI), seconds")
    args = p.parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    out, run_dir = Path(args.out), Path(args.run_dir)
    stages = args.only or list(STAGES)
    if args.threads:
        torch.set_num_threads(args.threads)
    t0 = time.time()
    tok = build_tokenizer(out, run_dir, args.smoke)
    if "target" in stages:
        build_target(out, run_dir, tok, args.threads, args.smoke)
    for name in ("draft-healthy", "draft-case"):
        if name in stages:
            build_draft(name, out, run_dir, args.threads, args.smoke)
    if "cards" in stages:
        from eagle3lab.train.model_card import write_cards
        write_cards(out)
    print(f"build_data: stages {stages} done in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
