"""Run EAGLE-3 drafts through speculators' own Eagle3DraftModel (run by the oracle tests in the engine env).

    python speculators_draft.py JOB.json

Never imports eagle3lab. JOB.json: {"features": file, "out": folder, "cases": [...]}; each case is
    {"name", "kind": "load", "checkpoint": folder, "ttt_steps": K, "positions": "given" | "default"}
        Eagle3DraftModel.from_pretrained(folder) as saved by eagle3lab, then its own forward.
    {"name", "kind": "theirs", "save_to": folder, "verifier": folder, "seed", "ttt_steps", "geometry", "flags",
     "aux_ids", "draft_vocab", "layer": "llama" | "qwen3"}
        a randomly initialised Eagle3DraftModel, written by its own save_pretrained, then its forward. Its
        layer config is transformers' LlamaConfig or Qwen3Config (--draft-arch llama | qwen3) built from
        "geometry" (which may hold rope_parameters, as its training CLI copies them from the verifier).
The features file holds "{name}/input_ids" [1, T], "{name}/aux" [1, T, F] and "{name}/positions" [1, T].
Writes out/tensors.safetensors ("{name}/{step}/{logits|prenorm|fed}") and out/result.json (keys
seen on load, errors). Eagle3DraftModel.forward returns only the argmax tokens of each TTT step, so
the per-step tensors are read with forward hooks on its own modules:
    fed      the hidden half of layers[0]'s input: fc(aux) at step 0, the recycled state after it
    prenorm  layers[-1]'s output          logits  lm_head's output
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from pathlib import Path

import torch
from refusals import record_refusal
from safetensors import safe_open
from safetensors.torch import load_file, save_file

torch.set_num_threads(1)


def run_forward(model, ids, aux, positions, ttt_steps: int) -> dict[str, torch.Tensor]:
    """speculators' TTT loop (core.py Eagle3DraftModel.forward) with its per-step tensors recorded."""
    seen: dict[str, list[torch.Tensor]] = {"fed": [], "prenorm": [], "logits": []}
    hidden = model.config.transformer_layer_config.hidden_size
    hooks = [
        model.layers[0].register_forward_pre_hook(
            lambda mod, args, kwargs: seen["fed"].append((args[0] if args else kwargs["hidden_states"])[..., hidden:]),
            with_kwargs=True),
        model.layers[-1].register_forward_hook(lambda mod, args, out: seen["prenorm"].append(out)),
        model.lm_head.register_forward_hook(lambda mod, args, out: seen["logits"].append(out)),
    ]
    try:
        with torch.no_grad():
            model(hidden_states=aux, input_ids=ids, document_ids=torch.zeros_like(ids),
                  position_ids=positions, ttt_steps=ttt_steps)
    finally:
        for h in hooks:
            h.remove()
    return {f"{step}/{what}": t[step].detach().clone() for what, t in seen.items() for step in range(len(t))}


def key_report(model, folder: Path) -> dict:
    """What from_pretrained did with the file: keys it lacks / does not know, values it did not keep."""
    with safe_open(str(folder / "model.safetensors"), framework="pt") as f:
        file_keys = set(f.keys())
    saved = load_file(str(folder / "model.safetensors"))
    state = model.state_dict()
    changed = sorted(k for k in file_keys & set(state) if not torch.equal(state[k].to(saved[k].dtype), saved[k]))
    nan = sorted(k for k, v in state.items() if v.is_floating_point() and bool(v.isnan().any()))
    return {"missing": sorted(set(state) - file_keys), "unexpected": sorted(file_keys - set(state)),
            "changed": changed, "nan": nan, "attn_implementation":
            model.config.transformer_layer_config._attn_implementation,
            "layer_classes": [type(layer).__name__ for layer in model.layers],
            "rotary": {"class": type(model.rotary_emb).__name__, "rope_type": model.rotary_emb.rope_type,
                       "attention_scaling": float(model.rotary_emb.attention_scaling)},
            "embedding_equals_verifier": embedding_equals_verifier(model, saved.get("embed_tokens.weight"))}


def embedding_equals_verifier(model, saved: torch.Tensor | None) -> bool | None:
    """Whether the loaded embedding is the verifier's, at the precision the checkpoint stores it (None: the
    verifier has no embedding file to compare with)."""
    verifier = Path(model.config.speculators_config.verifier.name_or_path or "")
    if not (verifier / "model.safetensors").exists():
        return None
    with safe_open(str(verifier / "model.safetensors"), framework="pt") as f:
        key = next((k for k in f.keys() if k.endswith("embed_tokens.weight")), None)
        if key is None:
            return None
        dtype = saved.dtype if saved is not None else model.embed_tokens.weight.dtype
        return bool(torch.equal(model.embed_tokens.weight.to(dtype), f.get_tensor(key).to(dtype)))


def expected_shapes(folder: Path) -> dict[str, list[int]]:
    """The shapes Eagle3DraftModel builds from a checkpoint's config (what a refused file is held to)."""
    from speculators.models.eagle3 import Eagle3SpeculatorConfig
    from speculators.models.eagle3.core import Eagle3DraftModel

    with torch.device("meta"):
        model = Eagle3DraftModel(Eagle3SpeculatorConfig.from_pretrained(str(folder)))
    return {k: list(v.shape) for k, v in model.state_dict().items()}


def build_theirs(case: dict):
    """A random Eagle3DraftModel built from speculators' config classes, saved by save_pretrained."""
    from speculators.config import SpeculatorsConfig, VerifierConfig
    from speculators.models.eagle3 import Eagle3SpeculatorConfig
    from speculators.models.eagle3.core import Eagle3DraftModel
    from speculators.proposals.greedy import GreedyTokenProposalConfig
    from transformers import LlamaConfig, Qwen3Config

    geo = case["geometry"]
    if case.get("layer", "llama") == "qwen3":
        layer_cfg = Qwen3Config(**geo, attention_bias=False)
    else:
        layer_cfg = LlamaConfig(**geo, attention_bias=False, mlp_bias=False)
    config = Eagle3SpeculatorConfig(
        transformer_layer_config=layer_cfg, draft_vocab_size=case["draft_vocab"],
        eagle_aux_hidden_state_layer_ids=case["aux_ids"], **case["flags"],
        speculators_config=SpeculatorsConfig(
            algorithm="eagle3", default_proposal_method="greedy",
            proposal_methods=[GreedyTokenProposalConfig(speculative_tokens=case["ttt_steps"])],
            verifier=VerifierConfig(name_or_path=case["verifier"], architectures=["LlamaForCausalLM"])))
    model = Eagle3DraftModel(config)
    gen = torch.Generator().manual_seed(case["seed"])
    vocab, dv = geo["vocab_size"], case["draft_vocab"]
    keep = torch.randperm(vocab, generator=gen)[:dv].sort().values
    t2d = torch.zeros(vocab, dtype=torch.bool)
    t2d[keep] = True
    model.load_vocab_mappings(t2d, keep - torch.arange(dv))
    with torch.no_grad():   # every weight random, norms away from 1, so that a wrong norm shows up
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.3)
    model.save_pretrained(case["save_to"])
    return Eagle3DraftModel.from_pretrained(case["save_to"], dtype=torch.float32).eval()


def main(job_file: str) -> None:
    from speculators.models.eagle3.core import Eagle3DraftModel

    job = json.loads(Path(job_file).read_text())
    features = load_file(job["features"])
    out = Path(job["out"])
    tensors: dict[str, torch.Tensor] = {}
    result = {"versions": {n: version(n) for n in ("speculators", "transformers", "torch")}, "cases": {}}
    for case in job["cases"]:
        name, rec = case["name"], {}
        try:
            if case["kind"] == "load":
                folder = Path(case["checkpoint"])
                model = Eagle3DraftModel.from_pretrained(str(folder), dtype=torch.float32).eval()
            else:
                model = build_theirs(case)
                folder = Path(case["save_to"])
            rec.update(key_report(model, folder))
            positions = features[f"{name}/positions"] if case.get("positions", "given") == "given" else None
            for key, t in run_forward(model, features[f"{name}/input_ids"], features[f"{name}/aux"], positions,
                                      case["ttt_steps"]).items():
                tensors[f"{name}/{key}"] = t
        except Exception as err:  # a refusal is a result (refusals.py)
            record_refusal(rec, err, case, expected_shapes)
        result["cases"][name] = rec
    save_file(tensors, str(out / "tensors.safetensors"))
    (out / "result.json").write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main(sys.argv[1])
