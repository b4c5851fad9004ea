"""Model cards for the bundled models, and the measurements they quote.

``write_cards(data_dir)`` writes ``data/models/*/README.md`` from each directory's
``training.json`` (written by ``build_data``) plus measurements made here, and lists the sha256
of every file. ``python -m eagle3lab.train.model_card --verify data`` re-measures and compares
with ``quality.json`` (what ``tests/train/test_train_models.py`` does too). The acceptance section
between the ``acceptance`` markers is kept when a card is rewritten: it is filled from the
decoding engine's measurements.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
from pathlib import Path

import torch

from eagle3lab.atomic import write_json, write_text

ACCEPT_BEGIN = "<!-- acceptance:begin -->"
ACCEPT_END = "<!-- acceptance:end -->"
ACCEPT_PLACEHOLDER = (f"{ACCEPT_BEGIN}\n_To be filled from the decoding engine (`eagle3lab.decoding.speculative` / "
                      f"`eagle3lab.decoding.evaluate`): per-position acceptance and tau at several chain lengths on "
                      f"`data/prompts`, with the command that reproduces them._\n{ACCEPT_END}")
TARGET_EVAL_WINDOWS = 32
DRAFT_EVAL_WINDOWS = 16


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def file_table(model_dir: Path) -> str:
    rows = ["| file | bytes | sha256 |", "|---|---:|---|"]
    for f in sorted(p for p in model_dir.iterdir() if p.is_file() and p.name != "README.md"):
        rows.append(f"| `{f.name}` | {f.stat().st_size:,} | `{sha256(f)}` |")
    return "\n".join(rows)


def _heldout_windows(data_dir: Path, tokenizer, n: int, model_dir: Path):
    """``n`` fixed held-out windows, as long as the model was trained on (``training.json``)."""
    from eagle3lab.train.corpus import read_corpus
    from eagle3lab.train.loop import eval_windows
    from eagle3lab.train.pretrain_target import tokenize_docs
    seq_len = json.loads((model_dir / "training.json").read_text())["config"]["seq_len"]
    return eval_windows(tokenize_docs(tokenizer, read_corpus(data_dir / "corpus", "heldout")), n, seq_len)


def measure_target(data_dir: str | Path) -> dict:
    """Held-out next-token loss of the bundled target (nats/token) on fixed held-out windows."""
    from eagle3lab.models.target import load_target
    from eagle3lab.train.pretrain_target import heldout_loss

    data_dir = Path(data_dir)
    target = load_target(data_dir / "models" / "target", device="cpu", dtype="float32")
    windows = _heldout_windows(data_dir, target.tokenizer, TARGET_EVAL_WINDOWS, data_dir / "models" / "target")
    loss = heldout_loss(target.model, windows)
    top1_prob, top1_hit = [], []
    with torch.no_grad():
        for w in windows.split(8):
            probs = target.model(input_ids=w[:, :-1]).logits.float().softmax(-1)
            top1_prob.append(probs.max(-1).values.flatten())
            top1_hit.append((probs.argmax(-1) == w[:, 1:]).float().flatten())
    top1_prob = torch.cat(top1_prob)
    return {"heldout_loss": round(loss, 4), "heldout_ppl": round(math.exp(loss), 2),
            "top1_accuracy": round(torch.cat(top1_hit).mean().item(), 4),
            "mean_top1_prob": round(top1_prob.mean().item(), 4),
            "share_top1_prob_over_0.5": round((top1_prob > 0.5).float().mean().item(), 4),
            "eval": f"{len(windows)} windows x {windows.shape[1] - 1} tokens of data/corpus/heldout.jsonl.xz"}


def measure_draft(data_dir: str | Path, name: str) -> dict:
    """Teacher-forced held-out top-1 agreement per chain step and tau estimate, two ways:

    ``as_trained``: fed the resid points it was trained on, with the flags it was trained with
    (speculators arithmetic); ``sglang``: as SGLang serves the shipped checkpoint (ids read from
    eagle_config in SGLang's convention, norm_before_residual ignored).
    """
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target
    from eagle3lab.train.train_draft import evaluate_ttt

    data_dir = Path(data_dir)
    target = load_target(data_dir / "models" / "target", device="cpu", dtype="float32")
    model_dir = data_dir / "models" / name
    facts = json.loads((model_dir / "training.json").read_text())
    draft = load_draft(model_dir, target=target, device="cpu")
    windows = _heldout_windows(data_dir, target.tokenizer, DRAFT_EVAL_WINDOWS, model_dir)
    ttt_steps = facts["config"]["ttt_steps"]
    out = {"eval": f"{len(windows)} windows x {windows.shape[1] - 1} tokens of held-out code, "
                   f"{ttt_steps}-step chains"}
    trained = draft.under("speculators")
    out["as_trained"] = {"resid": facts["trained_resid"],
                         **evaluate_ttt(trained, target, windows, tuple(facts["trained_resid"]), ttt_steps)}
    served = draft.under("sglang")
    out["sglang"] = {"resid": list(served.aux_resid),
                     "norm_before_residual_applied": served.settings.norm_before_residual,
                     **evaluate_ttt(served, target, windows, tuple(served.aux_resid), ttt_steps)}
    return out


ACCEPT_CHAINS = (1, 2, 4, 6)
ACCEPT_PROMPTS = 12
ACCEPT_NEW_TOKENS = 48


# acceptance_runs' keys and the labels the card, acceptance.json and the build records give them
RUN_LABELS = {"shipped": "as shipped, served by SGLang", "restored": "trained wiring and residual restored"}


def acceptance_runs(draft, facts: dict) -> dict:
    """How the card measures a draft, keyed as ``RUN_LABELS``: ``shipped``, as SGLang serves the shipped checkpoint
    and, when that differs from training, ``restored``, the trained wiring and residual (what vLLM runs after the fix)."""
    served = draft.under("sglang")
    runs = {"shipped": served}
    trained = (tuple(facts["trained_resid"]), bool(facts["config"]["norm_before_residual"]))
    if (tuple(served.aux_resid), served.settings.norm_before_residual) != trained:
        runs["restored"] = draft.rewired(aux_resid=trained[0], norm_before_residual=trained[1]).under("vllm")
    return runs


def measure_acceptance(data_dir: str | Path, name: str, chains=ACCEPT_CHAINS, n_prompts: int = ACCEPT_PROMPTS,
                       max_new_tokens: int = ACCEPT_NEW_TOKENS) -> dict:
    """Real greedy speculative decoding on the held-out prompts: tau and per-position acceptance per
    chain length, each output checked token for token against the target's own greedy decoding."""
    from eagle3lab.bundled import load_prompts
    from eagle3lab.decoding.speculative import speculative_generate, target_greedy
    from eagle3lab.engines.acceptance import acceptance_stats
    from eagle3lab.models.checkpoint import load_draft
    from eagle3lab.models.target import load_target

    data_dir = Path(data_dir)
    target = load_target(data_dir / "models" / "target", device="cpu", dtype="float32")
    model_dir = data_dir / "models" / name
    facts = json.loads((model_dir / "training.json").read_text())
    draft = load_draft(model_dir, target=target, device="cpu")
    prompts = load_prompts(data_dir / "prompts" / "prompts.jsonl", n=n_prompts)
    greedy = [target_greedy(target, p, max_new_tokens).tokens for p in prompts]
    out = {"prompts": n_prompts, "max_new_tokens": max_new_tokens, "runs": {}}
    for key, d in acceptance_runs(draft, facts).items():
        per_chain = {}
        for k in chains:
            rounds, lossless = [], True
            for p, ref in zip(prompts, greedy):
                res = speculative_generate(target, d, p, num_steps=k, max_new_tokens=max_new_tokens)
                rounds += res.rounds
                lossless &= res.tokens == ref
            st = acceptance_stats(rounds, num_positions=k)
            per_chain[str(k)] = {"tau": round(st.tau, 4),    # c_k of a position never reached: null
                                 "conditional": [round(c, 4) if math.isfinite(c) else None for c in st.conditional],
                                 "survival": [round(a, 4) for a in st.survival], "rounds": st.rounds,
                                 "lossless": lossless}
        out["runs"][RUN_LABELS[key]] = {"profile": d.profile.name, "aux_resid": list(d.aux_resid),
                              "norm_before_residual": d.settings.norm_before_residual, "chains": per_chain}
    return out


def acceptance_section(acc: dict, bench: dict | None = None) -> str:
    lines = [ACCEPT_BEGIN,
             f"Real greedy speculative decoding (`eagle3lab.decoding.speculative.speculative_generate`, chains) on the first "
             f"{acc['prompts']} held-out prompts of `data/prompts/prompts.jsonl`, {acc['max_new_tokens']} new tokens "
             "each. tau = tokens per verify round including the bonus token (SGLang's accept length, vLLM's mean "
             "acceptance length); c_k = P(position k accepted | 1..k-1 accepted); every output was compared token "
             "for token with the target's own greedy decoding (lossless column).", ""]
    for label, run in acc["runs"].items():
        lines += [f"**{label}** (profile `{run['profile']}`, fc fed resid{run['aux_resid']}, "
                  f"norm_before_residual {run['norm_before_residual']}):", "",
                  "| chain K | tau | c_1 .. c_K | survival a_1 .. a_K | rounds | lossless |", "|---:|---:|---|---|---:|---|"]
        for k, r in run["chains"].items():
            cond = ", ".join("-" if c is None else f"{c:.2f}" for c in r["conditional"])
            lines.append(f"| {k} | **{r['tau']:.2f}** | {cond} | "
                         f"{', '.join(f'{a:.2f}' for a in r['survival'])} | {r['rounds']} | {r['lossless']} |")
        lines.append("")
    lines.append("Reproduce: `python -m eagle3lab.train.model_card --acceptance data` (rewrites this section and "
                 "`acceptance.json`); `pytest tests/train/test_train_models.py -k acceptance` re-measures the K = 4 rows.")
    if bench:
        lines += ["", "### Throughput on the machine that built the card", "",
                  "`eagle3lab bench` (baseline and speculative decoding timed side by side in one run; ratios, not "
                  "absolute rates, are what carries over):", "",
                  "| run | chain K | tau | end to end vs `generate` | decode vs own greedy loop: median of repetitions "
                  "| the same, paired 95% interval over prompts | projected (cost model) | projection error | c |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for label, b in bench.items():
            if b.get("overrides"):   # a what-if run (bench --aux-resid ...), not the checkpoint as shipped
                label += " (what-if: " + ", ".join(f"{k}={v}" for k, v in b["overrides"].items()) + ")"
            lines.append(f"| {label} | {b['settings']['num_steps']} | {b['acceptance']['tau']:.2f} | "
                         f"{b['speedup']['vs_generate']:.2f}x | {b['speedup']['decode_vs_greedy_loop']:.2f}x | "
                         f"{_interval_cell((b.get('speed_ratio') or {}).get('decode'))} | "
                         f"{b['projection']['speedup']:.2f}x | {b['projection']['error']:+.0%} | "
                         f"{b['cost_model']['c']:.3f} |")
        commands = sorted({b["command"] for b in bench.values() if b.get("command")})
        lines += ["", "Command: " + "; ".join(f"`{c}`" for c in commands)]
    lines.append(ACCEPT_END)
    return "\n".join(lines)


def _interval_cell(i: dict | None) -> str:
    """``1.31x [1.12, 1.52] (8 prompts)`` from a recorded ``speed_ratio`` entry; "-" for a record without one."""
    if not i:
        return "- (recorded before intervals)"
    return f"{i['value']:.2f}x [{i['low']:.2f}, {i['high']:.2f}] ({i['units']} prompts)"


def render_acceptance(model_dir: str | Path) -> None:
    """Re-render a draft card's acceptance section (from ``acceptance.json`` and, when present,
    ``bench.json``) and its file table, leaving the rest of the card as it is."""
    model_dir = Path(model_dir)
    readme = model_dir / "README.md"
    text = readme.read_text()
    if ACCEPT_BEGIN not in text or ACCEPT_END not in text or "## Files\n" not in text:
        raise ValueError(f"{readme}: no acceptance section or file table to fill (rebuild the cards: make data)")
    bench_file = model_dir / "bench.json"
    bench = json.loads(bench_file.read_text()) if bench_file.exists() else None
    section = acceptance_section(json.loads((model_dir / "acceptance.json").read_text()), bench)
    text = text[:text.index(ACCEPT_BEGIN)] + section + text[text.index(ACCEPT_END) + len(ACCEPT_END):]
    write_text(readme, text[:text.index("## Files\n")] + f"## Files\n{file_table(model_dir)}\n")


def write_acceptance(data_dir: str | Path, names=("draft-healthy", "draft-case")) -> dict:
    """Measure acceptance, write ``acceptance.json``, and re-render each draft card."""
    data_dir, out = Path(data_dir), {}
    for name in names:
        model_dir = data_dir / "models" / name
        write_json(model_dir / "acceptance.json", out.setdefault(name, measure_acceptance(data_dir, name)))
        render_acceptance(model_dir)
    return out


def _keep_acceptance(readme: Path) -> str:
    if readme.exists():
        text = readme.read_text()
        if ACCEPT_BEGIN in text and ACCEPT_END in text:
            return text[text.index(ACCEPT_BEGIN):text.index(ACCEPT_END) + len(ACCEPT_END)]
    return ACCEPT_PLACEHOLDER


def _minutes(seconds) -> str:
    return f"{seconds / 60:.1f} min"


def target_card(model_dir: Path, facts: dict, quality: dict) -> str:
    c = facts["config"]
    mb = sum(p.stat().st_size for p in model_dir.glob("*.safetensors")) / 1e6
    curve = ", ".join(f"{e['step']}: {e['heldout_loss']}" for e in facts["log"])
    return f"""# eagle3lab bundled target (Llama architecture, {c['num_hidden_layers']} layers)

A small real causal LM for the workbook: predictable on Python code, so its next-token
distribution is peaked where the text is predictable. Standard Hugging Face directory:

```python
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained("data/models/target")
# or: from eagle3lab import load_target; target = load_target("data/models/target")
```

## Architecture and size
`LlamaForCausalLM`: N = {c['num_hidden_layers']} decoder layers, hidden {c['hidden_size']},
{c['num_attention_heads']} attention heads / {c['num_key_value_heads']} KV heads (GQA, head_dim
{c['hidden_size'] // c['num_attention_heads']}), MLP {c['intermediate_size']}, vocabulary {facts.get('vocab_size', 4096)}
(byte-level BPE trained on the same corpus), tied input/output embeddings, RoPE theta {c['rope_theta']},
trained context {c['seq_len']} tokens (max_position_embeddings {c['max_position_embeddings']}).
{facts['params']:,} parameters, stored in float32 ({mb:.1f} MB): exact on CPU, where the
workbook runs, and small enough that all of `data/` stays under 40 MB.

## Training
- Data: Python 3.11 standard-library source (PSF license, see `data/corpus/LICENSE.md`), split
  by file into train / held-out (`data/corpus`); held-out files never seen in training.
- Objective: next-token cross-entropy; AdamW (betas 0.9/0.95, weight decay {c['weight_decay']}),
  lr {c['lr']} with {c['warmup_steps']} warmup steps and cosine decay to {c['min_lr']}, grad clip {c['grad_clip']}.
- {facts['steps']} steps x {c['batch_size']} windows x {c['seq_len']} tokens = {facts['tokens_seen']:,} tokens
  (about {facts['tokens_seen'] / facts.get('train_tokens', facts['tokens_seen']):.2f} epochs), seed {c['seed']}.
- Time: {_minutes(facts['train_seconds'])} of training on a shared 2-core CPU ({facts['threads']} torch
  thread(s)), about {facts['tokens_seen'] / max(1, facts['train_seconds']):,.0f} tokens/s.
- Held-out loss during training (step: nats/token): {curve}.
- Rebuild: `make data` (`python -m eagle3lab.train.build_data --out data`); code in
  `eagle3lab/train/pretrain_target.py`.

## Quality
Held-out loss **{quality['heldout_loss']} nats/token** (perplexity {quality['heldout_ppl']}) on
{quality['eval']}. Top-1 accuracy {quality['top1_accuracy']:.1%}; the top-1 probability
averages {quality['mean_top1_prob']:.2f} and exceeds 0.5 at {quality['share_top1_prob_over_0.5']:.1%} of
positions (peaked where the code is predictable, flat elsewhere).
Reproduce: `python -m eagle3lab.train.model_card --verify data` or
`pytest tests/train/test_train_models.py`.

## Files
{file_table(model_dir)}
"""


def draft_card(name: str, model_dir: Path, facts: dict, quality: dict, acceptance: str) -> str:
    c = facts["config"]
    n = facts["target_num_layers"]
    resid = ", ".join(f"resid[{k}]" + (" (embedding)" if k == 0 else "") for k in facts["trained_resid"])
    mb = sum(p.stat().st_size for p in model_dir.glob("*.safetensors")) / 1e6
    t, s = quality["as_trained"], quality["sglang"]
    if name == "draft-healthy":
        story = (f"Trained with the engines' default wiring ({resid}) and a raw residual "
                 f"(`norm_before_residual` false), saved in SpecForge/SGLang format with "
                 f"`eagle_config.eagle_aux_hidden_state_layer_ids = {facts['aux_ids_written']}` "
                 f"(SGLang convention: id k = resid[k+1]), so SGLang captures exactly the trained points.")
    else:
        story = (f"The seed case in miniature (N = {n}). Trained on fc input [{resid}] with "
                 f"`norm_before_residual` true (the speculators training default), then shipped the way the "
                 f"seed's team shipped theirs: SpecForge/SGLang format with "
                 f"`eagle_config.eagle_aux_hidden_state_layer_ids = {facts['aux_ids_written']}`, which SGLang "
                 f"serves as resid{s['resid']}, and `norm_before_residual: true` in config.json, which SGLang "
                 f"ignores. Nothing crashes; only acceptance drops. (For another N the build scales this as "
                 f"trained (0, 3, N//2+1), shipped ids [2, N//2, N-2]; `eagle3lab/train/build_data.py`.)")
    curve = "; ".join(f"{e['step']}: {e['heldout']['agree']} (tau_est {e['heldout']['tau_est']})" for e in facts["log"])
    return f"""# eagle3lab bundled {name}

An EAGLE-3 draft head for `data/models/target` (N = {n} layers). {story}

```python
from eagle3lab import load_draft
draft = load_draft("data/models/{name}", target="data/models/target")   # run as SpecForge would
draft.under("sglang")                                                     # the same weights, as SGLang serves them
# plain: safetensors.torch.load_file("data/models/{name}/model.safetensors"); the embedding is the target's
```

## Architecture and size
One decoder layer (dual-norm first layer: q/k/v read [input_layernorm(embed) ; hidden_norm(h)], 2H wide),
hidden H = {facts['hidden_size']} (the target's), MLP {facts['intermediate_size']}, fc {len(facts['trained_resid'])}H -> H, draft vocabulary
{c['draft_vocab_size']} of the target's tokens (the most frequent in the training split: {facts['draft_vocab_coverage_train']:.1%}
of training tokens; `d2t` offsets and `t2d` mask included). The embedding is not stored (SpecForge
format: the target's is used, and was used frozen in training). {facts['params_trained']:,} trained
parameters, float32 ({mb:.1f} MB).

## Training
- Target features: online, `ResidCapture` on the bundled target at {resid} (concatenated in this order).
- Training-time test: {c['ttt_steps']} unrolled steps per window. Step i at index t reads token x[t+1+i] and
  its own step i-1 state, sits at position t+i, and attends to step-0 keys at positions <= t plus its own
  earlier steps at t (the diagonal): exactly what a chain that started after position t sees.
  Loss: sum_i {c['step_weight']}^i x soft cross-entropy against the target distribution restricted to the
  draft vocabulary (renormalised); positions whose target top-1 is outside the draft vocabulary are skipped.
- Differences from SpecForge (`specforge/core/eagle3.py`, read 2026): SpecForge also shifts positions by
  the step, but its cumulative mask hides step-0 keys at positions t-i+1..t from step i (as SafeAILab/EAGLE
  `cnets.py` does; questioned in SafeAILab/EAGLE issue #247); here they stay visible, as in chain drafting.
  Inputs at steps >= 1 are corpus tokens (teacher forcing), as in SpecForge.
- Initialisation: lm_head = the target's output rows of the draft vocabulary and final norm = the
  target's ({'on' if c.get('init_head_from_target') else 'off'}); the rest random (seed {c['seed']}).
- Flags: norm_before_residual={c['norm_before_residual']}, norm_before_fc={c['norm_before_fc']},
  fc_norm={c['fc_norm']}, norm_output={c['norm_output']}.
- AdamW lr {c['lr']} (warmup {c['warmup_steps']}, cosine to {c['min_lr']}), {facts['steps']} steps x
  {c['batch_size']} x {c['seq_len']} tokens = {facts['tokens_seen']:,} tokens, seed {c['seed']};
  {_minutes(facts['train_seconds'])} on a shared 2-core CPU ({facts['threads']} thread(s)).
- Held-out top-1 agreement per step during training (step: [step 0..{c['ttt_steps'] - 1}]): {curve}.
- Rebuild: `make data`; code in `eagle3lab/train/train_draft.py`.

## Quality (teacher-forced, training-time estimate)
On {quality['eval']}: top-1 agreement of draft step i with the target's top-1 (unconditional,
like SpecForge's acc_i), and tau_est = 1 + mean number of leading agreeing steps (chain of {c['ttt_steps']},
teacher-forced on corpus tokens: an estimate, not a decoding measurement).

| fed / run as | resid points | norm_before_residual applied | agreement per step | tau_est |
|---|---|---|---|---|
| as trained (speculators arithmetic) | {t['resid']} | {c['norm_before_residual']} | {t['agree']} | **{t['tau_est']}** |
| as shipped, served by SGLang | {s['resid']} | {s['norm_before_residual_applied']} | {s['agree']} | **{s['tau_est']}** |

Reproduce: `python -m eagle3lab.train.model_card --verify data` or `pytest tests/train/test_train_models.py`.

## Acceptance measured with the decoding engine
{acceptance}

## Files
{file_table(model_dir)}
"""


def write_cards(data_dir: str | Path, names=("target", "draft-healthy", "draft-case")) -> dict:
    """Measure and write README.md + quality.json in each model directory present."""
    data_dir = Path(data_dir)
    out = {}
    for name in names:
        model_dir = data_dir / "models" / name
        if not (model_dir / "training.json").exists():
            continue
        facts = json.loads((model_dir / "training.json").read_text())
        quality = measure_target(data_dir) if name == "target" else measure_draft(data_dir, name)
        write_json(model_dir / "quality.json", quality)
        readme = model_dir / "README.md"
        text = (target_card(model_dir, facts, quality) if name == "target"
                else draft_card(name, model_dir, facts, quality, _keep_acceptance(readme)))
        write_text(readme, text)
        out[name] = quality
    return out


def verify(data_dir: str | Path, tol: float = 2e-3, measured: dict | None = None) -> list[str]:
    """Re-measure every model and compare with its ``quality.json``; returns the mismatches.

    ``measured``: a dict to fill with the fresh numbers (model name -> what ``quality.json`` holds),
    for callers that check more than the agreement with the card.
    """
    data_dir = Path(data_dir)
    problems = []
    for name in ("target", "draft-healthy", "draft-case"):
        path = data_dir / "models" / name / "quality.json"
        if not path.exists():
            problems.append(f"{path}: missing")
            continue
        stored = json.loads(path.read_text())
        now = measure_target(data_dir) if name == "target" else measure_draft(data_dir, name)
        if measured is not None:
            measured[name] = now
        for key, a, b in _numbers(stored, now):
            if abs(a - b) > tol:
                problems.append(f"{name} {key}: card says {a}, measured {b}")
    return problems


def _numbers(a, b, prefix=""):
    if isinstance(a, dict):
        for k in a:
            yield from _numbers(a[k], b.get(k) if isinstance(b, dict) else None, f"{prefix}{k}.")
    elif isinstance(a, list):
        for i, (x, y) in enumerate(zip(a, b or [])):
            yield from _numbers(x, y, f"{prefix}{i}.")
    elif isinstance(a, (int, float)) and not isinstance(a, bool):
        yield prefix.rstrip("."), float(a), float(b) if b is not None else math.inf


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Write or verify the bundled models' cards.")
    p.add_argument("data", nargs="?", default="data")
    p.add_argument("--verify", action="store_true", help="re-measure and compare with quality.json")
    p.add_argument("--acceptance", action="store_true",
                   help="measure acceptance with the decoding engine and rewrite that section of the draft cards")
    args = p.parse_args(argv)
    torch.manual_seed(0)
    if args.acceptance:
        print(json.dumps(write_acceptance(args.data), indent=1))
        return 0
    if args.verify:
        problems = verify(args.data)
        print("\n".join(problems) or "all card numbers reproduced")
        return 1 if problems else 0
    print(json.dumps(write_cards(args.data), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
