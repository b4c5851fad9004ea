"""Run EAGLE-3 drafts through SpecForge's own LlamaForCausalLMEagle3 and TTT loop (oracle tests, engine env).

    TORCHDYNAMO_DISABLE=1 python specforge_draft.py JOB.json

Never imports eagle3lab. JOB.json: {"features": file, "out": folder, "cases": [...]}; each case is
    {"name", "kind": "load", "checkpoint": folder, "embedding_from": target folder | null, "ttt_steps": K,
     "backends": ["sdpa", "flex_attention"]}
        the draft built the way SpecForge's trainer builds one from a checkpoint (algorithms/model_providers.py
        build_eagle3_draft): load_draft_config_source, AutoDraftModel.from_config(attention_backend=...),
        warm_start_draft_model(allow_missing_embedding=True), then load_embedding from the target when given.
        (Not AutoDraftModel.from_pretrained: with transformers 5.19.0, the engine env's, it leaves the RoPE
        buffers that LlamaRotaryEmbedding.__init__ computes uninitialised; SpecForge 0.2.0 pins 5.8.1.)
    {"name", "kind": "theirs", "save_to": folder, "embedding_from", "seed", "ttt_steps", "backends",
     "geometry", "extra"}
        a randomly initialised LlamaForCausalLMEagle3 written the way export/to_sglang.py writes a
        serving checkpoint (no embedding; _serving_state, save_pretrained, apply_legacy_rope_scaling).
The features file holds "{name}/input_ids" [1, T], "{name}/aux" [1, T, 3H] and "{name}/positions" [1, T].

The TTT recurrence is SpecForge's own OnlineEagle3Model.forward (algorithms/eagle3/model.py): input ids
shifted by `padding` each step, the backbone's pre-norm output fed back, logits by compute_logits. Two
things in it cannot run on a CPU and neither feeds the recurrence: the loss (core/loss.py LogSoftmaxLoss
launches a Triton kernel), replaced here by a recorder that returns zeros (asserted called once per step),
and torch.compile around RMSNorm/RoPE (inductor builds C++ for ~20 s): TORCHDYNAMO_DISABLE=1 runs the
same ops eagerly. Writes out/tensors.safetensors ("{name}/{backend}/{step}/{logits|prenorm|fed}") and
out/result.json.
"""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import version
from pathlib import Path

import torch
from refusals import record_refusal
from safetensors.torch import load_file, save_file

torch.set_num_threads(1)


def run_ttt(model, ids, aux, positions, ttt_steps: int, backend: str) -> dict[str, torch.Tensor]:
    """OnlineEagle3Model.forward with the per-step tensors recorded by hooks on the draft's modules."""
    import specforge.algorithms.eagle3.model as eagle3_model

    seen: dict[str, list[torch.Tensor]] = {"fed": [], "prenorm": [], "logits": []}
    loss_calls = []

    def no_loss(*, logits, **_):   # the Triton loss never feeds the next step; count the calls
        loss_calls.append(logits.shape)
        zero = logits.new_zeros(())
        return zero, zero

    hooks = [
        model.midlayer.register_forward_pre_hook(
            lambda mod, args, kwargs: seen["fed"].append(kwargs["hidden_states"]), with_kwargs=True),
        model.midlayer.register_forward_hook(lambda mod, args, out: seen["prenorm"].append(out)),
        model.lm_head.register_forward_hook(lambda mod, args, out: seen["logits"].append(out)),
    ]
    original = eagle3_model._compute_loss_and_acceptance_rate
    eagle3_model._compute_loss_and_acceptance_rate = no_loss
    try:
        trainer = eagle3_model.OnlineEagle3Model(model, length=ttt_steps, attention_backend=backend)
        B, T = ids.shape
        with torch.no_grad():
            trainer(input_ids=ids, attention_mask=torch.ones(B, T, dtype=torch.bool),
                    target=torch.zeros(B, T, model.vocab_size), loss_mask=torch.ones(B, T, 1),
                    hidden_states=aux, position_ids=positions)
    finally:
        eagle3_model._compute_loss_and_acceptance_rate = original
        for h in hooks:
            h.remove()
    assert len(loss_calls) == ttt_steps, loss_calls
    return {f"{step}/{what}": t[step].detach().clone() for what, t in seen.items() for step in range(len(t))}


def build_draft(folder: Path, backend: str):
    """SpecForge's trainer building a draft from a checkpoint: (model, WarmStartReport)."""
    from specforge.modeling.auto import AutoDraftModel
    from specforge.training.model_loading import load_draft_config_source, warm_start_draft_model

    config = load_draft_config_source(str(folder))
    model = AutoDraftModel.from_config(config, attention_backend=backend, torch_dtype=torch.float32)
    report = warm_start_draft_model(model, str(folder), draft_config=config, strategy="eagle3",
                                    allow_missing_embedding=True)
    return model.eval(), report


def expected_shapes(folder: Path) -> dict[str, list[int]]:
    """The shapes SpecForge builds from a checkpoint's config (what a refused file is held to)."""
    from specforge.modeling.auto import AutoDraftModel
    from specforge.training.model_loading import load_draft_config_source

    with torch.device("meta"):
        model = AutoDraftModel.from_config(load_draft_config_source(str(folder)))
    return {k: list(v.shape) for k, v in model.state_dict().items()}


def key_report(model, report, folder: Path) -> dict:
    """What the warm start did with the file: missing keys as it reports them, file keys the model has not."""
    saved = load_file(str(folder / "model.safetensors"))
    state = model.state_dict()
    changed = sorted(k for k in set(saved) & set(state) if not torch.equal(state[k].to(saved[k].dtype), saved[k]))
    return {"missing": list(report.missing_keys), "unexpected": sorted(set(saved) - set(state)), "changed": changed,
            "loaded_keys": report.loaded_keys, "layers": sorted({k.split(".")[0] for k in state}),
            "rotary": type(model.midlayer.self_attn.rotary_emb).__name__}


def build_theirs(case: dict) -> None:
    """A random LlamaForCausalLMEagle3 written as SpecForge's SGLang exporter writes one."""
    from specforge.export.checkpoint_io import apply_legacy_rope_scaling
    from specforge.export.to_sglang import _serving_state
    from specforge.modeling.draft.llama3_eagle import LlamaForCausalLMEagle3
    from transformers import LlamaConfig

    config = LlamaConfig(**case["geometry"], architectures=["LlamaForCausalLMEagle3"])
    for key, value in case["extra"].items():
        setattr(config, key, value)
    model = LlamaForCausalLMEagle3(config)
    gen = torch.Generator().manual_seed(case["seed"])
    vocab, dv = config.vocab_size, config.draft_vocab_size
    keep = torch.randperm(vocab, generator=gen)[:dv].sort().values
    with torch.no_grad():   # every weight random, norms away from 1, so that a wrong norm shows up
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
        model.t2d.zero_()
        model.t2d[keep] = True
        model.d2t.copy_(keep - torch.arange(dv))
    full = {k: v for k, v in model.state_dict().items() if "embed" not in k.lower()}
    model.save_pretrained(case["save_to"], state_dict=_serving_state(full, {}))
    apply_legacy_rope_scaling(case["save_to"])


def main(job_file: str) -> None:
    assert os.environ.get("TORCHDYNAMO_DISABLE") == "1", "run with TORCHDYNAMO_DISABLE=1 (see the docstring)"
    job = json.loads(Path(job_file).read_text())
    features = load_file(job["features"])
    out = Path(job["out"])
    tensors: dict[str, torch.Tensor] = {}
    result = {"versions": {n: version(n) for n in ("specforge", "transformers", "torch")}, "cases": {}}
    for case in job["cases"]:
        name, rec = case["name"], {}
        try:
            if case["kind"] == "theirs":
                build_theirs(case)
            folder = Path(case["checkpoint"] if case["kind"] == "load" else case["save_to"])
            for backend in case["backends"]:
                model, report = build_draft(folder, backend)
                rec.update(key_report(model, report, folder))
                if case.get("embedding_from"):
                    model.load_embedding(case["embedding_from"])
                    rec["embedding"] = "target"
                ids = features[f"{name}/input_ids"]
                for key, t in run_ttt(model, ids, features[f"{name}/aux"], features[f"{name}/positions"],
                                      case["ttt_steps"], backend).items():
                    tensors[f"{name}/{backend}/{key}"] = t
        except Exception as err:  # a refusal is a result (refusals.py)
            record_refusal(rec, err, case, expected_shapes)
        result["cases"][name] = rec
    save_file(tensors, str(out / "tensors.safetensors"))
    (out / "result.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
