"""Train an EAGLE-3 draft against a target with a training-time-test (TTT) unroll.

Online: each batch runs the target once (no grad) with ``ResidCapture`` on the ``resid`` points
the draft is wired to, then unrolls the draft ``ttt_steps`` times on exactly what it sees when it
drafts a chain (alignment: facts §5):

    step 0   index t: token x[t+1], fc(aux at t)            -> label p_target(. | x[..t+1])
    step i   index t: token x[t+1+i], its own step i-1 state -> label p_target(. | x[..t+1+i])
             position t+i; attends to step-0 keys at positions <= t and to its own earlier
             steps at t (the diagonal), as a chain that started after position t does.

Loss: sum_i 0.8^i * soft cross-entropy against the target distribution restricted to the
draft vocabulary and renormalised; positions whose target top-1 is outside the draft vocabulary
are skipped (as SpecForge does). Every wiring choice is a field of ``DraftTrainConfig``.

Differences from SpecForge's ``OnlineEagle3Model`` (specforge/core/eagle3.py, llama3_eagle.py;
read 2026): SpecForge shifts RoPE positions by the step too, but its cumulative mask
``attention_mask[:, :, ind[idx:], ind[:T-idx]] = min`` also hides the step-0 keys at positions
t-i+1..t from a step-i query (SafeAILab/EAGLE cnets.py does the same; questioned in
SafeAILab/EAGLE issue #247). Here step-0 keys <= t stay visible, as in SGLang's and vLLM's
chain drafting, where the draft's cache holds the prefix up to t.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from eagle3lab.errors import bad_input
from eagle3lab.train.draft_vocab import DraftVocab, select_draft_vocab, token_counts
from eagle3lab.train.feature_cache import FeatureCache
from eagle3lab.train.loop import LoopResult, Schedule, batch_at, eval_windows, run_loop


@dataclass
class DraftTrainConfig(Schedule):
    # wiring: which resid points feed fc, in this order (None: the engines' default 2, N//2, N-3)
    aux_resid: tuple[int, ...] | None = None
    norm_before_residual: bool = False
    norm_before_fc: bool = False
    fc_norm: bool = False
    norm_output: bool = False
    # geometry (None: copy the target's)
    intermediate_size: int | None = None
    num_hidden_layers: int = 1
    draft_vocab_size: int = 2048
    # start lm_head and the final norm from the target's (rows of the draft vocabulary)
    init_head_from_target: bool = True
    # training
    ttt_steps: int = 4
    step_weight: float = 0.8

    def resolved_aux(self, num_layers: int) -> tuple[int, ...]:
        if self.aux_resid is not None:
            return tuple(int(k) for k in self.aux_resid)
        return (2, num_layers // 2, num_layers - 3)


def build_draft(target, cfg: DraftTrainConfig, vocab: DraftVocab):
    """A fresh ``Eagle3Draft`` shaped for ``target`` with ``cfg``'s flags, frozen target embedding."""
    from eagle3lab.models.draft import DraftConfig, Eagle3Draft

    tc = target.config
    num_heads = tc.num_attention_heads
    dcfg = DraftConfig(
        hidden_size=target.hidden_size, target_hidden_size=target.hidden_size,
        intermediate_size=cfg.intermediate_size or tc.intermediate_size, num_attention_heads=num_heads,
        num_key_value_heads=getattr(tc, "num_key_value_heads", None) or num_heads,
        head_dim=getattr(tc, "head_dim", None) or target.hidden_size // num_heads,
        num_hidden_layers=cfg.num_hidden_layers, vocab_size=target.vocab_size,
        draft_vocab_size=len(vocab.d2t), rms_norm_eps=tc.rms_norm_eps,
        rope_theta=getattr(tc, "rope_theta", None) or tc.rope_parameters["rope_theta"],
        rope_scaling=None, max_position_embeddings=tc.max_position_embeddings, hidden_act=tc.hidden_act,
        num_aux=len(cfg.resolved_aux(target.num_layers)),
        norm_before_residual=cfg.norm_before_residual, norm_before_fc=cfg.norm_before_fc,
        fc_norm=cfg.fc_norm, norm_output=cfg.norm_output)
    # speculators' arithmetic honours every flag, so the draft trains with exactly cfg's wiring.
    draft = Eagle3Draft(dcfg, profile="speculators")
    with torch.no_grad():
        draft.embed_tokens.weight.copy_(target.model.get_input_embeddings().weight)
        if draft.d2t is not None:
            draft.d2t.copy_(vocab.d2t)
            draft.t2d.copy_(vocab.t2d)
        if cfg.init_head_from_target:
            draft.lm_head.weight.copy_(target.model.get_output_embeddings().weight[vocab.draft_ids])
            draft.norm.weight.copy_(target.final_norm.weight)
    # SpecForge trains with the target's embedding frozen and SGLang swaps it in at load.
    draft.embed_tokens.weight.requires_grad_(False)
    return draft.bound(num_target_layers=target.num_layers)


@torch.no_grad()
def target_features(target, input_ids: torch.Tensor, aux_resid: tuple[int, ...]):
    """(fc input ``[B, T, num_aux*H]`` in ``aux_resid`` order, target logits ``[B, T, V]``)."""
    from eagle3lab.models.capture import ResidCapture, build_fc_input

    with ResidCapture(target.model, sorted(set(aux_resid))) as cap:
        logits = target.model(input_ids=input_ids).logits.float()
        states = dict(cap.states)
    return build_fc_input(states, list(aux_resid)).tensor.float(), logits


def unroll(draft, input_ids, fc_in, ttt_steps: int):
    """Yield ``(i, src, valid, out)`` for TTT steps 0..ttt_steps-1 on one window batch.

    The passes are the offline evaluator's (``eagle3lab.decoding.evaluate.draft_passes``): training sees
    exactly what evaluation and chain drafting see. Row t reads its step-i token, and its label,
    at ``src[t] = t+1+i``; ``valid[t]`` says that ``src[t]`` is inside the window.
    """
    from eagle3lab.decoding.evaluate import draft_passes

    T = input_ids.shape[1]
    t_idx = torch.arange(T - 1, device=input_ids.device)
    for i, out in enumerate(draft_passes(draft, input_ids, fc_in, ttt_steps)):
        src = t_idx + 1 + i
        yield i, src.clamp(max=T - 1), src <= T - 1, out


def draft_labels(target_logits: torch.Tensor, t2d: torch.Tensor | None):
    """Full-vocabulary target logits -> (their draft-vocabulary columns, the target's top-1 id)."""
    return (target_logits[..., t2d] if t2d is not None else target_logits), target_logits.argmax(-1)


def ttt_loss(draft, input_ids, fc_in, label_logits, target_top, ttt_steps: int, step_weight: float = 0.8,
             loss_mask=None):
    """The TTT loss for one window batch and per-step stats (see the module docstring).

    ``label_logits``: the target's logits over the draft vocabulary; ``target_top``: its top-1 over the
    full vocabulary (``draft_labels``). ``loss_mask`` [B, T]: the labelled positions that count (chat
    data: the assistant's tokens, as SpecForge's loss mask). ``stats[i] = {"loss", "agree", "n"}``: soft
    CE, and top-1 agreement (draft top-1 mapped to a target id == target top-1) over counted positions.
    """
    t2d = draft.t2d
    in_vocab = t2d[target_top] if t2d is not None else torch.ones_like(target_top, dtype=torch.bool)
    total, stats = 0.0, []
    for i, src, valid, out in unroll(draft, input_ids, fc_in, ttt_steps):
        p_target = label_logits[:, src].softmax(-1)     # restricted to the draft vocab, renormalised
        ce = -(p_target * out.logits.float().log_softmax(-1)).sum(-1)
        counted = valid[None] if loss_mask is None else valid[None] & loss_mask[:, src]
        used = counted & in_vocab[:, src]
        step_loss = (ce * used).sum() / used.sum().clamp(min=1)
        total = total + step_weight ** i * step_loss
        with torch.no_grad():
            hit = draft.to_target_ids(out.logits.argmax(-1)) == target_top[:, src]
        stats.append({"loss": step_loss.item(), "agree": int((hit & counted).sum()),
                      "n": int(counted.expand_as(hit).sum())})
    return total, stats


@torch.no_grad()
def evaluate_ttt(draft, target, windows: torch.Tensor, aux_resid, ttt_steps: int, batch_size: int = 4) -> dict:
    """Held-out top-1 agreement per TTT step, and the chain estimate of tau it implies.

    Counted over start positions where every step has a label. ``tau_est`` = 1 + mean number
    of leading steps whose draft top-1 equals the target top-1: teacher-forced on corpus tokens,
    an estimate of greedy chain acceptance, not a decoding measurement.
    """
    was = draft.training
    draft.eval()
    hits_all = []
    for b in range(0, len(windows), batch_size):
        ids = windows[b:b + batch_size, :-1].to(target.device)
        fc_in, logits = target_features(target, ids, aux_resid)
        target_top = logits.argmax(-1)
        keep = ids.shape[1] - ttt_steps
        hits = [(draft.to_target_ids(out.logits.argmax(-1)) == target_top[:, src])[:, :keep]
                for _, src, _, out in unroll(draft, ids, fc_in, ttt_steps)]
        hits_all.append(torch.stack(hits, -1).flatten(0, 1))    # [starts, steps]
    draft.train(was)
    hits = torch.cat(hits_all).float()
    leading = hits.cumprod(-1).sum(-1)
    return {"agree": [round(a, 4) for a in hits.mean(0).tolist()], "tau_est": round(1 + leading.mean().item(), 4)}


@dataclass
class DraftTrainResult(LoopResult):
    draft: object
    heldout: dict | None


def train_draft(cfg: DraftTrainConfig, target, train_stream: np.ndarray, heldout_stream: np.ndarray,
                run_dir: str | Path, vocab: DraftVocab | None = None, stop_after_s: float | None = None,
                progress: bool = True, desc: str = "draft", features: FeatureCache | None = None) -> DraftTrainResult:
    """Train (or resume) a draft in ``run_dir``; a later call with the same arguments continues
    exactly where a stopped one left off (batches are a function of the step, state is saved).

    ``train_stream``/``heldout_stream``: token ids (1-D) of the target's tokenizer. ``vocab``: the
    draft vocabulary (default: the ``cfg.draft_vocab_size`` most frequent tokens of ``train_stream``).
    ``features``: target features captured once (``feature_cache.capture_features``) to train from
    instead of running the target every step; its windows replace ``train_stream``'s.
    """
    if vocab is None:
        vocab = select_draft_vocab(token_counts([train_stream], target.vocab_size), cfg.draft_vocab_size)
    if len(vocab.d2t) != cfg.draft_vocab_size:
        raise ValueError(f"DraftTrainConfig.draft_vocab_size is {cfg.draft_vocab_size} but the given vocab "
                         f"has {len(vocab.d2t)} draft tokens; make them agree.")

    aux = cfg.resolved_aux(target.num_layers)
    bad = [k for k in aux if not 0 <= k <= target.num_layers]
    if bad:
        raise ValueError(f"DraftTrainConfig.aux_resid: resid points must be in 0..{target.num_layers} "
                         f"(N = {target.num_layers} target layers), found {bad}")
    torch.manual_seed(cfg.seed)
    draft = build_draft(target, cfg, vocab).to(target.device)
    params = [p for p in draft.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, betas=(0.9, 0.95), weight_decay=cfg.weight_decay)
    heldout = eval_windows(heldout_stream, cfg.eval_windows, cfg.seq_len)

    if features is not None and (tuple(features.aux_resid) != aux or features.windows.shape[1] != cfg.seq_len):
        raise bad_input("features", "aux_resid / seq_len", f"{list(aux)} and windows of {cfg.seq_len} tokens "
                        "(this DraftTrainConfig)", f"{list(features.aux_resid)}, {features.windows.shape[1]}",
                        "Capture the features again for this wiring and window length.")
    lm_rows = target.model.get_output_embeddings().weight[vocab.draft_ids.to(target.device)].detach()

    def loss_at(step):
        mask = None
        if features is not None:
            batch, fc_in, label_logits, top, mask = features.labels(features.batch(step, cfg.batch_size, cfg.seed),
                                                                    lm_rows, target.device)
        else:
            batch = batch_at(train_stream, step, cfg.batch_size, cfg.seq_len, cfg.seed)[:, :-1].to(target.device)
            fc_in, logits = target_features(target, batch, aux)
            label_logits, top = draft_labels(logits, draft.t2d)
        loss, stats = ttt_loss(draft, batch, fc_in, label_logits, top, cfg.ttt_steps, cfg.step_weight, mask)
        agree = [round(s["agree"] / max(1, s["n"]), 3) for s in stats]
        return loss, batch.numel(), {"agree": agree}, {"acc0": agree[0]}

    def evaluate():
        held = evaluate_ttt(draft, target, heldout, aux, cfg.ttt_steps)
        return "heldout", held, f"held-out agree {held['agree']}  tau_est {held['tau_est']}"

    run = run_loop(cfg, run_dir, {"draft": draft}, opt, params, loss_at, evaluate, stop_after_s=stop_after_s,
                   progress=progress, desc=desc)
    return DraftTrainResult(**vars(run), draft=draft, heldout=run.last("heldout"))
