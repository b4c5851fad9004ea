"""Drafts for the real target track (SmolLM2-135M-Instruct, installed by ``make install``).

    python -m eagle3lab.train.build_real --out data [--run-dir runs/real] [--smoke]

The healthy draft: the engines' default wiring resid[2], resid[15], resid[27] with a raw residual,
trained with the project's TTT trainer on the bundled stdlib corpus (SmolLM2's tokenizer), from
target features captured once (``feature_cache``: the target's forward costs more than the draft's
training step here), and saved in SpecForge/SGLang format in half precision. Its card states the
data, steps and time, and the acceptance measured by real speculative decoding on held-out prompts
side by side with ``generate``. Each stage resumes from ``run-dir`` (features and checkpoint).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import torch

from eagle3lab.atomic import write_json, write_text
from eagle3lab.train.corpus import read_corpus

TARGET = "smollm2-135m-instruct"
HEALTHY = "smollm2-draft-healthy"
TRAIN_DOCS, HELDOUT_DOCS = 800, 40
FEATURE_WINDOWS = 192
HEALTHY_TRAIN = dict(aux_resid=(2, 15, 27), draft_vocab_size=4096, ttt_steps=4, seq_len=512, batch_size=4,
                     steps=1400, warmup_steps=40, eval_every=200, eval_windows=8, lr=3e-3, min_lr=3e-4,
                     ckpt_every_s=300)
SMOKE = dict(train_docs=6, windows=4, train=dict(draft_vocab_size=256, seq_len=32, batch_size=2, steps=3,
                                                 warmup_steps=1, eval_every=3, eval_windows=2))
ACCEPT_CHAINS, ACCEPT_PROMPTS, ACCEPT_TOKENS = (2, 3, 4), 6, 64


def build_healthy(out: Path, run_dir: Path, smoke: bool = False, progress: bool = True) -> dict:
    from eagle3lab.models.checkpoint import save_draft
    from eagle3lab.models.target import load_target
    from eagle3lab.train.feature_cache import capture_features, load_features
    from eagle3lab.train.pretrain_target import tokenize_docs
    from eagle3lab.train.train_draft import DraftTrainConfig, train_draft

    target = load_target(TARGET, device="cpu")
    n_train = SMOKE["train_docs"] if smoke else TRAIN_DOCS
    train = tokenize_docs(target.tokenizer, read_corpus(out / "corpus", "train")[:n_train])
    heldout = tokenize_docs(target.tokenizer, read_corpus(out / "corpus", "heldout")[:HELDOUT_DOCS])
    cfg = DraftTrainConfig(**{**HEALTHY_TRAIN, **(SMOKE["train"] if smoke else {})})
    feature_file, ckpt = run_dir / "features.safetensors", run_dir / "healthy-run" / "ckpt.pt"
    finished = ckpt.exists() and torch.load(ckpt, weights_only=True, map_location="cpu")["step"] >= cfg.steps
    if finished:            # the trained draft is in the checkpoint: no feature is read again
        features = None
    elif feature_file.exists():
        features = load_features(feature_file)
    else:
        features = capture_features(target, train, cfg.aux_resid, SMOKE["windows"] if smoke else FEATURE_WINDOWS,
                                    cfg.seq_len, seed=cfg.seed, progress=progress)
        features.save(feature_file)
    res = train_draft(cfg, target, train, heldout, run_dir / "healthy-run", desc=HEALTHY, progress=progress,
                      features=features)
    draft = res.draft.half()
    draft.config.aux_layer_ids = tuple(cfg.aux_resid)   # speculators numbering; save_draft writes SGLang's
    model_dir = out / "models" / HEALTHY
    written = save_draft(draft, model_dir, format="sglang", include_embedding=False, overwrite=True)
    facts = {"target": TARGET, "config": asdict(cfg), "trained_resid": list(cfg.aux_resid),
             "aux_ids_written": written["aux_ids_written"], "data": f"the first {n_train} bundled stdlib-corpus "
             f"training files, SmolLM2's tokenizer; {SMOKE['windows'] if smoke else FEATURE_WINDOWS} windows of "
             f"{cfg.seq_len} tokens captured once", "steps": res.step, "train_seconds": round(res.train_seconds),
             "threads": torch.get_num_threads(), "heldout": res.heldout,
             "log": [{"step": e["step"], "heldout": e["heldout"]} for e in res.log if "heldout" in e]}
    write_json(model_dir / "training.json", facts)
    return facts


def measure(out: Path, smoke: bool = False) -> dict:
    """Real speculative decoding on held-out prompts, side by side with ``generate`` (one sweep)."""
    from eagle3lab.analysis.benchmark import decode_sweep
    from eagle3lab.bundled import load_prompts
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    target = load_target(TARGET, device="cpu")
    draft = load_draft(out / "models" / HEALTHY, target=target, device="cpu")
    chains = ACCEPT_CHAINS[:1] if smoke else ACCEPT_CHAINS
    sweep = decode_sweep(target, {f"chain {k}": dict(draft=draft, num_steps=k) for k in chains},
                         load_prompts(n=2, length="short") if smoke else load_prompts(n=ACCEPT_PROMPTS),
                         max_new_tokens=8 if smoke else ACCEPT_TOKENS,
                         progress=False)
    table = sweep.table()
    return {"prompts": len(sweep.reference), "max_new_tokens": 8 if smoke else ACCEPT_TOKENS,
            "threads": torch.get_num_threads(), "generate_tps": sweep.generate_tps,
            "runs": {name: {"tau": row.tau, "conditional": list(sweep.stats(name).conditional),
                            "identical": row.identical, "e2e_tps": row.e2e_tps,
                            "vs_generate": row.e2e_tps / sweep.generate_tps} for name, row in table.iterrows()}}


def card(facts: dict, acc: dict) -> str:
    c, h = facts["config"], facts["heldout"] or {}
    rows = "\n".join(f"| {name} | {r['tau']:.2f} | {', '.join(f'{x:.2f}' for x in r['conditional'])} | "
                     f"{r['identical']} | {r['vs_generate']:.2f}x |" for name, r in acc["runs"].items())
    return f"""# {HEALTHY}

An EAGLE-3 draft for SmolLM2-135M-Instruct (30 layers; **the Q4_1-quantized GGUF release, dequantized**,
installed from PyPI by `make install`), trained here. SpecForge/SGLang format, half precision, no embedding
(the target's is used). Rebuild: `python -m eagle3lab.train.build_real --out data`.

- Wiring: resid{facts['trained_resid']} (the engines' default for N = 30), raw residual; written as
  `eagle_config` ids {facts['aux_ids_written']} (SGLang: id k = resid[k+1]).
- Data: {facts['data']}.
- Training: {facts['steps']} TTT-{c['ttt_steps']} steps of {c['batch_size']} x {c['seq_len']} tokens, draft
  vocabulary {c['draft_vocab_size']}, {facts['train_seconds'] / 60:.0f} minutes on a 2-core CPU
  ({facts['threads']} threads). Held-out teacher-forced agreement per step {h.get('agree')} (tau_est {h.get('tau_est')}).

Real speculative decoding (greedy, {acc['prompts']} bundled prompts x {acc['max_new_tokens']} tokens,
{acc['threads']} threads; `generate` {acc['generate_tps']:.1f} tokens/s end to end):

| chain | tau | conditional c_k | identical to generate | speed vs generate (end to end) |
|---|---|---|---|---|
{rows}
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="data")
    p.add_argument("--run-dir", default="runs/real")
    p.add_argument("--smoke", action="store_true", help="a few windows and steps (tests), seconds")
    args = p.parse_args(argv)
    out, run_dir = Path(args.out), Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    facts = build_healthy(out, run_dir, smoke=args.smoke, progress=not args.smoke)
    acc = measure(out, smoke=args.smoke)
    write_json(out / "models" / HEALTHY / "acceptance.json", acc)
    write_text(out / "models" / HEALTHY / "README.md", card(facts, acc))
    print(json.dumps({"steps": facts["steps"], "heldout": facts["heldout"],
                      "tau": {k: round(r["tau"], 3) for k, r in acc["runs"].items()}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
