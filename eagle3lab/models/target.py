"""The target model: a real ``transformers`` causal LM plus its tokenizer, eval mode, no grad.

``load_target`` reads a local checkpoint directory or (online) a hub name; ``Target.wrap`` wraps a
model already in memory (tests, notebooks on a tiny random model). The Target knows its geometry
(``num_layers`` = N, ``hidden_size``, ``vocab_size``) and the modules that capture hooks attach to.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from eagle3lab.bundled import REAL_TARGETS
from eagle3lab.errors import Eagle3LabError, bad_input
from eagle3lab.findings import Finding, Severity
from eagle3lab.models.device import pread_in_transformers, resolve_device, resolve_device_map, resolve_dtype


def _text_config(config):
    """Multimodal wrappers (Kimi-K2.5) keep the decoder geometry in ``text_config``."""
    sub = getattr(config, "text_config", None)
    return sub if sub is not None and getattr(sub, "num_hidden_layers", None) else config


def decoder_of(model):
    """The decoder stack (``model.model`` for every HF causal LM we support)."""
    for getter in (lambda m: m.get_decoder(), lambda m: m.model):
        try:
            dec = getter(model)
        except (AttributeError, NotImplementedError, TypeError):
            continue
        if dec is not None and hasattr(dec, "layers"):
            return dec
    raise bad_input(type(model).__name__, "layers", "a decoder stack with .layers (HF Llama-style causal LM)",
                    "no .model.layers / get_decoder()",
                    "eagle3lab supports Llama, Qwen2/3, Mistral and DeepSeek-V3 style models.")


def decoder_layers(model):
    """The decoder layers HF runs: ``layers[:num_hidden_layers]`` (DeepSeek MTP layers sit after them, unrun)."""
    dec = decoder_of(model)
    n = getattr(_text_config(model.config), "num_hidden_layers", None) if hasattr(model, "config") else None
    return dec.layers[: n or len(dec.layers)]


@dataclass
class Target:
    """A loaded target model. ``model`` is in eval mode with gradients off."""

    model: torch.nn.Module
    tokenizer: object | None = None
    path: str | None = None
    warnings: list[Finding] = field(default_factory=list)   # TOKENIZER_PADDING, NO_TOKENIZER

    @classmethod
    def wrap(cls, model, tokenizer=None, path: str | None = None) -> Target:
        model.eval()
        model.requires_grad_(False)
        target = cls(model=model, tokenizer=tokenizer, path=path)
        decoder_of(model)  # fail now, not at the first capture
        if tokenizer is not None:
            target.warnings += check_tokenizer(tokenizer, target.vocab_size, where=path or "tokenizer")
        return target

    def facts(self) -> TargetFacts:
        return TargetFacts(self.num_layers, self.hidden_size, self.vocab_size, self.arch, str(self.path or self.arch),
                           embedding=self.model.get_input_embeddings().weight, device=self.device)

    # geometry -----------------------------------------------------------------
    @property
    def config(self):
        return self.model.config

    @property
    def text_config(self):
        return _text_config(self.model.config)

    @property
    def arch(self) -> str:
        archs = getattr(self.config, "architectures", None) or [type(self.model).__name__]
        return archs[0]

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def hidden_size(self) -> int:
        return int(self.text_config.hidden_size)

    @property
    def vocab_size(self) -> int:
        return int(self.model.get_input_embeddings().weight.shape[0])

    @property
    def device(self) -> torch.device:
        return self.model.get_input_embeddings().weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.get_input_embeddings().weight.dtype

    # modules the capture hooks attach to -----------------------------------------
    @property
    def decoder(self):
        return decoder_of(self.model)

    @property
    def layers(self):
        return decoder_layers(self.model)

    @property
    def final_norm(self):
        return self.decoder.norm

    # tokenization ---------------------------------------------------------------
    def encode(self, prompts, max_length: int | None = None, padding_side: str = "right") -> dict:
        """Tokenize a list of prompts into a padded batch on the model's device."""
        if self.tokenizer is None:
            raise Eagle3LabError("This Target has no tokenizer: pass token ids, or Target.wrap(model, tokenizer).")
        if isinstance(prompts, str):
            prompts = [prompts]
        prompts = list(prompts)
        empty = [i for i, p in enumerate(prompts) if not str(p).strip()]
        if not prompts or empty:
            raise bad_input("prompts", None, "non-empty text", f"empty prompt(s) at index {empty}" if prompts else "[]",
                            "Engines reject empty prompts too (vLLM: 'prompt cannot be empty'); drop them.")
        tok = self.tokenizer
        if tok.pad_token is None:  # batching needs a pad id; it is masked out, so eos is safe
            tok.pad_token = tok.eos_token if tok.eos_token is not None else tok.unk_token
        tok.padding_side = padding_side
        batch = tok(prompts, return_tensors="pt", padding=True, truncation=max_length is not None,
                    max_length=max_length)
        if int(batch["attention_mask"].sum(-1).min()) == 0:
            raise bad_input("prompts", None, "prompts that tokenize to at least one token", "a prompt with 0 tokens")
        return {k: v.to(self.device) for k, v in batch.items() if k in ("input_ids", "attention_mask")}

    def describe(self) -> dict:
        return {"path": self.path, "arch": self.arch, "num_layers": self.num_layers, "hidden_size": self.hidden_size,
                "vocab_size": self.vocab_size, "device": str(self.device), "dtype": str(self.dtype).replace("torch.", ""),
                "tokenizer": type(self.tokenizer).__name__ if self.tokenizer is not None else None}


def as_target(target) -> Target:
    """The one place that accepts either: a ``Target``, or a bare Hugging Face causal LM wrapped as one
    (eval mode, gradients off)."""
    return target if isinstance(target, Target) else Target.wrap(target)


def hf_model(model) -> torch.nn.Module:
    """The Hugging Face module of a ``Target``, or the module itself, left as it is (capture hooks
    attach to either without changing its mode)."""
    return model.model if isinstance(model, Target) else model


def check_tokenizer(tokenizer, vocab_size: int, where="tokenizer") -> list[Finding]:
    """Token ids the tokenizer can emit must index the embedding. Error if not; warnings for the rest."""
    n_tok = len(tokenizer)
    if n_tok > vocab_size:
        raise bad_input(where, "vocab_size", f"a tokenizer with at most {vocab_size} tokens (the model's embedding rows)",
                        f"{n_tok} tokens",
                        "Ids >= vocab_size index past the embedding: transformers raises an IndexError, vLLM and "
                        "SGLang hit a device-side assert. Load the tokenizer that was trained with this model.")
    if n_tok < vocab_size:
        return [Finding("TOKENIZER_PADDING", Severity.WARNING, f"tokenizer has {n_tok} tokens, the model {vocab_size} "
                        "embedding rows: the extra rows are padding (common, harmless for capture; a draft vocabulary "
                        f"must still index the model's {vocab_size}).")]
    return []


@dataclass
class TargetFacts:
    """What a draft needs to know about its target: from a loaded ``Target`` (``Target.facts``) or from a
    target folder's config.json (``eagle3lab.models.checkpoint.target_facts``)."""

    num_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    arch: str | None
    where: str
    embedding: torch.Tensor | None = None
    folder: Path | None = None
    device: torch.device | None = None


def check_draft_fits(facts: TargetFacts, *, target_hidden_size: int | None = None, vocab_size: int | None = None,
                     fc_in_features: int | None = None, num_aux: int | None = None,
                     num_target_layers: int | None = None, device=None, where="draft config.json") -> None:
    """The one check that a draft belongs to this target: hidden size, vocabulary, fc width, layer count
    and device (each only when both sides are known)."""
    def known(mine, theirs):
        return mine is not None and theirs is not None and mine != theirs

    if known(target_hidden_size, facts.hidden_size):
        raise bad_input(where, "target_hidden_size", f"{facts.hidden_size} (hidden_size of the target {facts.where})",
                        target_hidden_size, "This draft was trained for another target: fc reads num_aux * "
                        f"{target_hidden_size} features.")
    if known(vocab_size, facts.vocab_size):
        raise bad_input(where, "vocab_size", f"{facts.vocab_size} (the target's vocabulary, {facts.where})", vocab_size,
                        "d2t maps draft ids into the target vocabulary; another vocabulary means every proposal "
                        "is a different token.")
    if None not in (fc_in_features, num_aux, facts.hidden_size) and fc_in_features != num_aux * facts.hidden_size:
        raise bad_input(where, "fc.weight", f"in_features = num_aux * H = {num_aux} * {facts.hidden_size}",
                        fc_in_features, "The number of aux layer ids and fc's width disagree; the engine fails "
                        "with a shape error in fc at the first forward.")
    if known(num_target_layers, facts.num_layers):
        raise bad_input(where, "num_target_layers", f"{facts.num_layers} (this target's decoder layers)",
                        num_target_layers, "The draft was loaded for another target; load it with target=.")
    if known(device, facts.device):
        raise bad_input(where, "device", f"the target's device {facts.device}", device,
                        "Load both on the same device (device= in load_draft and load_target).")


def _looks_local(path_or_name: str) -> bool:
    p = Path(path_or_name).expanduser()
    return p.exists() or path_or_name.startswith((".", "/", "~"))


def _ships_code(folder: Path) -> bool:
    """Does a local checkpoint name its own model code (config.json's ``auto_map``)?"""
    try:
        return "auto_map" in json.loads((folder / "config.json").read_text())
    except (OSError, ValueError):
        return False


def load_target(path_or_name, device="auto", dtype="auto", device_map=None, trust_remote_code: bool = False) -> Target:
    """Load a causal LM and its tokenizer from a local directory, a short name of a real target installed
    by ``make install`` (``"smollm2-135m-instruct"``, ``bundled.REAL_TARGETS``) or a hub name (online only).

    ``device`` / ``dtype``: "auto" is ``models.device``'s rule (bf16 on CUDA, fp32 on CPU). The weights go to
    the device as they are read (``device_map={"": device}``, or ``device_map="auto"`` over several GPUs): host
    memory stays near the process's baseline whatever the model's size."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    name = str(path_or_name)
    if name in REAL_TARGETS:
        if not (REAL_TARGETS[name] / "config.json").exists():
            raise bad_input(name, None, f"the converted model in {REAL_TARGETS[name]}", "not converted yet",
                            "Run `make install` (or `python -m eagle3lab.train.real_target`).")
        name = str(REAL_TARGETS[name])
    local = Path(name).expanduser()
    if _looks_local(name):
        if not local.is_dir():
            raise bad_input(name, None, "a model directory", "no such directory",
                            "Give the folder holding config.json and the *.safetensors weights.")
        if not (local / "config.json").exists():
            raise bad_input(local / "config.json", None, "a transformers config.json", "no such file",
                            "Is this the checkpoint folder (not its parent, or a draft's folder)?")
        source = str(local)
    else:
        source = name
    offline = os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes")
    dev = resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    device_map = resolve_device_map(device_map, dev)
    try:
        config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    except OSError as err:
        if source is name:
            raise Eagle3LabError(
                f"{name}: not a local directory, and the hub could not provide it"
                + (" (HF_HUB_OFFLINE=1 is set: no downloads)" if offline else "")
                + f". Download it on a machine with network (huggingface-cli download {name} --local-dir DIR) "
                f"and pass DIR. Detail: {str(err).splitlines()[0]}") from None
        raise bad_input(local / "config.json", None, "a readable transformers config", str(err).splitlines()[0]) from None
    except ValueError as err:
        hint = ("It needs code from the checkpoint: pass trust_remote_code=True only if you trust its author."
                if _ships_code(local) and not trust_remote_code else "Is this a draft checkpoint rather than a target?")
        raise bad_input(source, "model_type / architectures", "a model class transformers knows",
                        str(err).splitlines()[0], hint) from None
    try:   # each tensor straight to its device in torch_dtype as it is read: no whole copy on the host
        with pread_in_transformers():
            model = AutoModelForCausalLM.from_pretrained(
                source, config=config, dtype=torch_dtype, device_map=device_map, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        raise bad_input(source, "weights", "safetensors weights matching config.json", str(err).splitlines()[0],
                        "Check the *.safetensors files and model.safetensors.index.json are complete.") from None
    tokenizer = None
    warnings: list[Finding] = []
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code)
    except (OSError, ValueError, TypeError) as err:
        warnings.append(Finding("NO_TOKENIZER", Severity.WARNING, f"no tokenizer loaded from {source} "
                                f"({str(err).splitlines()[0]}): pass token ids directly."))
    target = Target.wrap(model, tokenizer=tokenizer, path=source)
    target.warnings[:0] = warnings
    return target


# ----------------------------------------------------------------------------- tiny random targets

# target model_type -> (its transformers config class, architecture, what it sets besides the common sizes, from the
# hidden size); these are targets' model types, not draft families (eagle3lab.models.families)
_TINY = {
    "llama": ("LlamaConfig", "LlamaForCausalLM", lambda hidden: {}),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM", lambda hidden: {}),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", lambda hidden: {"head_dim": hidden // 4}),
    "mistral": ("MistralConfig", "MistralForCausalLM", lambda hidden: {}),
    # MLA attention, dense first layer then MoE layers, like DeepSeek-V3 / Kimi-K2
    "deepseek_v3": ("DeepseekV3Config", "DeepseekV3ForCausalLM", lambda hidden: dict(
        num_key_value_heads=4, moe_intermediate_size=hidden // 2, n_routed_experts=4, num_experts_per_tok=2,
        n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=hidden // 2, kv_lora_rank=hidden // 2,
        qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)),
}
TINY_ARCHS = tuple(_TINY)
_TINY_CORPUS = (
    "The quick brown fox jumps over the lazy dog.",
    "Speculative decoding drafts a few tokens cheaply and the target model verifies them in one pass.",
    "An EAGLE-3 draft reads three residual streams of the target through its fc layer.",
    "Nothing crashes when the wiring is wrong; only the acceptance length drops.",
)


def tiny_tokenizer(vocab_size: int = 300):
    """A byte-level BPE trained in milliseconds on a few sentences: encodes any text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(list(_TINY_CORPUS) * 4, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", bos_token="<|endoftext|>",
                                   pad_token="<|endoftext|>")


def tiny_config(arch: str = "llama", num_layers: int = 4, hidden_size: int = 64, vocab_size: int = 300):
    """A transformers config of a target model_type in TINY_ARCHS, small enough for CPU tests in milliseconds."""
    import transformers as tf

    if arch not in _TINY:
        raise bad_input("arch", None, f"one of {TINY_ARCHS}", repr(arch))
    config_class, architecture, own = _TINY[arch]
    common = dict(vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size,
                  num_hidden_layers=num_layers, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=256, tie_word_embeddings=False)
    return getattr(tf, config_class)(**{**common, **own(hidden_size)}, architectures=[architecture])


def tiny_target(arch: str = "llama", num_layers: int = 4, hidden_size: int = 64, vocab_size: int = 300,
                seed: int = 0, dtype=torch.float32) -> Target:
    """A tiny random target (weights from ``seed``) with a tiny tokenizer, on CPU."""
    from transformers import AutoModelForCausalLM

    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(tiny_config(arch, num_layers, hidden_size, vocab_size), dtype=dtype)
    return Target.wrap(model, tokenizer=tiny_tokenizer(vocab_size), path=f"tiny-random-{arch}")


def save_target(target: Target, out_dir) -> Path:
    """Write model (safetensors) + tokenizer to ``out_dir`` atomically (temp folder, then rename)."""
    from eagle3lab.atomic import atomic_dir

    out = Path(out_dir)
    with atomic_dir(out) as tmp:
        target.model.save_pretrained(tmp, safe_serialization=True)
        if target.tokenizer is not None:
            target.tokenizer.save_pretrained(tmp)
    return out
