"""Load, check, save and convert EAGLE-3 draft checkpoints of the three families.

``load_draft`` detects the family from config.json (``checkpoint_formats``), reads safetensors
first (a pickled ``pytorch_model.bin`` only through ``torch.load(weights_only=True)``), checks
every key, shape, dtype and value against the config, checks the vocab map (``vocab``), takes a
missing embedding from the target, and says in ``draft.load_report`` what it detected and which
fields were defaulted by whose rule. Nothing half-loaded is ever returned: any problem raises an
``Eagle3LabError`` naming the file, the key, the expected and the found value.

``save_draft`` writes any family (temp folder, then rename), translating the aux layer ids so the
receiving engine captures the same ``resid[k]`` points the draft was trained on, and writing the
norm flags explicitly as trained (vLLM reads a missing ``norm_before_residual`` as true).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from eagle3lab.atomic import atomic_dir
from eagle3lab.engines.profiles import (
    FORMAT_PROFILE,
    IDS_NESTED,
    IDS_TOP,
    NUM_AUX_KEY,
    PROFILES,
    DraftSettings,
    EngineProfile,
    get_profile,
    resolve_settings,
    serving_problems,
)
from eagle3lab.errors import Eagle3LabError, bad_input
from eagle3lab.findings import Finding
from eagle3lab.models import checkpoint_formats as cf
from eagle3lab.models.draft import DraftConfig, Eagle3Draft
from eagle3lab.models.families import ATTENTION_KINDS, family_of
from eagle3lab.models.inspection import (
    AuxIds,
    AuxRow,
    Defaulted,
    Inspection,
    NormFlag,
    SavedDraft,
    Serving,
    Sizes,
    TargetLike,
    VocabCheck,
    WeightsCheck,
    inspect_note,
    load_warning,
)
from eagle3lab.models.target import TargetFacts, as_target, check_draft_fits
from eagle3lab.models.vocab import check_vocab_map, vocab_dict

# Which engine's id convention and arithmetic a family is SERVED with (the trainer is FORMAT_PROFILE).
SERVE_PROFILE = {"speculators": "vllm", "sglang": "sglang", "eagle": "eagle"}
# Layer-id conventions that read written ids the same way (eagle3lab.engines.layer_ids engine names).
_CONVENTION = {"speculators": "vllm", "vllm": "vllm", "sglang": "sglang", "specforge": "sglang",
               "eagle": "eagle", "transformerlens": "vllm"}
WEIGHT_FILES = ("model.safetensors.index.json", "model.safetensors", "pytorch_model.bin.index.json",
                "pytorch_model.bin")


# LoadReport.embedding -> words
EMBEDDING_SOURCE = {"checkpoint": "embedding stored in the checkpoint", "target": "embedding taken from the target",
                    "missing": "no embedding stored (engines that serve it take the target's)"}


@dataclass
class LoadReport:
    """What ``load_draft`` found: format, defaults and by whose rule, vocab findings, warnings."""

    path: str
    format: str
    format_reason: str
    profile: str
    weight_files: list[str] = field(default_factory=list)
    defaulted: list[dict] = field(default_factory=list)   # {"field", "value", "rule"}
    settings: list[dict] = field(default_factory=list)    # {"flag", "value", "how"} under the profile
    aux_ids: list[int] | None = None
    aux_ids_key: str | None = None
    embedding: str = "checkpoint"                         # checkpoint | target | missing
    vocab_findings: list[Finding] = field(default_factory=list)   # vocab.check_vocab_map's, with codes
    warnings: list[Finding] = field(default_factory=list)         # inspection.load_warning's, with codes

    def to_dict(self) -> dict:
        return {**asdict(self), "vocab_findings": [vocab_dict(f) for f in self.vocab_findings],
                "warnings": [w.text for w in self.warnings]}

    def __str__(self) -> str:
        lines = [f"{self.path}: {self.format} format ({self.format_reason}); run as {self.profile}",
                 f"  weights: {', '.join(self.weight_files) or 'none'}; {EMBEDDING_SOURCE[self.embedding]}",
                 f"  aux ids as written: {self.aux_ids} at {self.aux_ids_key or '-'}"]
        lines += [f"  {d['flag']} = {d['value']}: {d['how']}" for d in self.settings]
        lines += [f"  defaulted {d['field']}" + (f" = {d['value']}" if d["value"] is not None else "")
                  + f": {d['rule']}" for d in self.defaulted]
        lines += [f"  vocab {f.severity}: {f.where}: {f.text}" for f in self.vocab_findings]
        lines += [f"  warning: {w}" for w in self.warnings]
        return "\n".join(lines)


# ---------------------------------------------------------------------------- reading files

def read_config(path) -> tuple[dict, Path]:
    """``config.json`` of a draft directory (or the file itself) -> ``(dict, its path)``."""
    path = Path(path).expanduser()
    file = path if path.suffix == ".json" else path / "config.json"
    if not file.exists():
        raise bad_input(file, None, "a draft checkpoint directory with config.json", "no such file",
                        "Give the folder that holds config.json and the weights.")
    try:
        cfg = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise bad_input(file, None, "valid JSON", f"a parse error ({err})") from None
    if not isinstance(cfg, dict):
        raise bad_input(file, None, "a JSON object", type(cfg).__name__)
    return cfg, file


def find_weight_files(folder: Path) -> list[Path]:
    """The weight files of a checkpoint folder, safetensors first; [] when there are none."""
    for name in WEIGHT_FILES:
        file = folder / name
        if file.exists():
            if name.endswith(".index.json"):
                try:
                    weight_map = json.loads(file.read_text())["weight_map"]
                except (json.JSONDecodeError, KeyError, TypeError) as err:
                    raise bad_input(file, "weight_map", "a shard index {name: file}", f"unreadable ({err})") from None
                shards = sorted({folder / f for f in weight_map.values()})
                missing = [s.name for s in shards if not s.exists()]
                if missing:
                    raise bad_input(file, "weight_map", "every listed shard present", f"missing {missing}",
                                    "Download the missing shard files.")
                return shards
            return [file]
    return []


def _read_safetensors(file: Path, device) -> dict[str, torch.Tensor]:
    """Every tensor of one safetensors file, each read (pread) straight onto ``device`` in its stored dtype."""
    from eagle3lab.models.device import open_safetensors

    with open_safetensors(file, device) as f:
        return {key: f.get_tensor(key) for key in f.keys()}


def read_weights(files: list[Path], device="cpu") -> dict[str, torch.Tensor]:
    """All tensors of the weight files, on ``device`` as they are read (no host copy on the way to a GPU), in their
    stored dtypes. Pickles only through ``weights_only=True``."""
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        if file.suffix == ".safetensors":
            try:
                part = _read_safetensors(file, device)
            except Exception as err:  # safetensors raises its own error type for truncated/corrupt files
                raise bad_input(file, None, "a complete safetensors file", f"an unreadable file ({err})",
                                "It is probably truncated (an interrupted download or copy): fetch it again.") from None
        else:
            try:
                part = torch.load(file, map_location=device, weights_only=True)
            except Exception as err:  # UnpicklingError for objects outside the allow-list, EOFError when cut
                raise bad_input(file, None, "a pickle of plain tensors (loaded with torch.load(weights_only=True))",
                                f"a file that does not load that way ({type(err).__name__}: {str(err)[:200]})",
                                "eagle3lab never unpickles arbitrary objects. Convert it to safetensors where it "
                                "was made, or re-download it if it is truncated.") from None
            if not isinstance(part, dict) or not all(isinstance(v, torch.Tensor) for v in part.values()):
                raise bad_input(file, None, "a flat {name: tensor} state dict", type(part).__name__)
        for key, value in part.items():
            if key in tensors:
                raise bad_input(file, key, "each weight in one file only", "a duplicate")
            tensors[key] = value
    return tensors


def weight_shapes(files: list[Path]) -> dict[str, tuple[list[int], str]]:
    """``{name: (shape, dtype)}`` without loading safetensors data (for ``inspect``)."""
    out: dict[str, tuple[list[int], str]] = {}
    for file in files:
        if file.suffix == ".safetensors":
            from safetensors import safe_open
            try:
                with safe_open(str(file), framework="pt") as f:
                    for key in f.keys():
                        sl = f.get_slice(key)
                        out[key] = (list(sl.get_shape()), str(sl.get_dtype()))
            except Exception as err:
                raise bad_input(file, None, "a readable safetensors header", f"an unreadable file ({err})",
                                "It is probably truncated: fetch it again.") from None
        else:
            out.update({k: (list(v.shape), str(v.dtype).replace("torch.", "")) for k, v in read_weights([file]).items()})
    return out


# ---------------------------------------------------------------------------- checks

def canonical_state_dict(tensors: dict[str, torch.Tensor], where) -> tuple[dict[str, torch.Tensor], list[Finding]]:
    """Family names -> our names; drops the weights no engine reads at inference (with a note)."""
    out: dict[str, torch.Tensor] = {}
    notes = []
    for key, value in tensors.items():
        name = cf.canonical_key(key)
        if name in cf.IGNORED_WEIGHTS or name.endswith("rotary_emb.inv_freq"):
            notes.append(load_warning("WEIGHT_IGNORED", f"ignored {key} (not used by the draft at inference)"))
            continue
        if name in out:
            raise bad_input(where, key, "one weight per name", f"both {key} and another key naming {name}",
                            "The file mixes midlayer.* and layers.0.* names for the same weight.")
        out[name] = value
    return out, notes


def fit_config_to_weights(cfg: DraftConfig, raw_cfg: dict, sd: dict, where, notes: list[Finding]) -> DraftConfig:
    """Settle num_aux / target_hidden_size from fc.weight; refuse a config the weights contradict."""
    fc = sd.get("fc.weight")
    if fc is None or fc.dim() != 2:
        raise bad_input(where, "fc.weight", f"a matrix [{cfg.hidden_size}, num_aux * target_hidden_size]",
                        "missing" if fc is None else f"shape {list(fc.shape)}")
    out_dim, in_dim = fc.shape
    if out_dim != cfg.hidden_size:
        raise bad_input(where, "fc.weight", f"{cfg.hidden_size} rows (hidden_size in config.json)",
                        f"shape {list(fc.shape)}", "config.json and the weights disagree on hidden_size.")
    ht_written = raw_cfg.get("target_hidden_size") is not None
    count_from = (NUM_AUX_KEY if NUM_AUX_KEY in cfg.extra else f"the {len(cfg.aux_layer_ids)} ids at {cfg.aux_ids_key}"
                  if cfg.aux_layer_ids is not None else None)
    num_aux, ht = cfg.num_aux, cfg.target_hidden_size
    if in_dim != cfg.fc_width:
        if ht_written and in_dim % ht == 0 and count_from is None:
            num_aux = in_dim // ht
            notes.append(load_warning("NUM_AUX_FROM_FC", f"num_aux = {num_aux} read from fc.weight {list(fc.shape)} "
                                      "(no aux ids written)"))
        elif not ht_written and in_dim % num_aux == 0:
            ht = in_dim // num_aux
            notes.append(load_warning("TARGET_HIDDEN_INFERRED", f"target_hidden_size = {ht} inferred from fc.weight "
                                      f"{list(fc.shape)} (missing in config.json): vLLM and SGLang size fc as "
                                      f"{num_aux} * hidden_size without it and fail to load; add target_hidden_size: {ht}"))
        else:
            raise bad_input(where, "fc.weight", f"{cfg.fc_width} input columns ({num_aux} aux states, from "
                            f"{count_from or 'the default of 3'}, x target_hidden_size {ht})", f"shape {list(fc.shape)} "
                            f"({in_dim} columns)", "The aux count or target_hidden_size in config.json does not "
                            "match the fc weight.")
    if (num_aux, ht) != (cfg.num_aux, cfg.target_hidden_size):
        cfg = DraftConfig(**{**cfg.to_dict(), "num_aux": num_aux, "target_hidden_size": ht})
    return cfg


def expected_shapes(cfg: DraftConfig) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    with torch.device("meta"):
        model = Eagle3Draft(cfg)
    return {k: (tuple(v.shape), v.dtype) for k, v in model.state_dict().items()}


def mixed_dtypes(stored: dict[str, torch.dtype], where, loaded_as: torch.dtype) -> Finding | None:
    """A warning naming the float tensors stored in another dtype than the others (one fp16 tensor among fp32
    ones: a checkpoint written in parts, or half converted), which are cast on loading; None when all agree."""
    counts = Counter(stored.values())
    if len(counts) < 2:
        return None
    main, n_main = counts.most_common(1)[0]
    odd = sorted(k for k, d in stored.items() if d != main)
    named = ", ".join(f"{k} ({str(stored[k]).removeprefix('torch.')})" for k in odd[:8])
    return load_warning("MIXED_DTYPES", f"{where}: {len(odd)} tensor(s) stored in another dtype than the other "
                        f"{n_main} ({str(main).removeprefix('torch.')}): {named}{' ...' if len(odd) > 8 else ''}; "
                        f"all cast to {str(loaded_as).removeprefix('torch.')} on loading. Mixed dtypes mean a "
                        "checkpoint written in parts or half converted: check that the odd tensors were not rounded "
                        "(or overflowed) when they were saved.")


def check_state_dict(cfg: DraftConfig, sd: dict[str, torch.Tensor], where) -> list[str]:
    """Every key, shape, dtype and value against the config. Returns the keys that may be missing."""
    expected = expected_shapes(cfg)
    optional = {"embed_tokens.weight", "t2d"}
    missing = [k for k in expected if k not in sd and k not in optional]
    if missing:
        hint = ("d2t maps draft ids to target ids; without it engines map draft id i to target id i."
                if "d2t" in missing else "The checkpoint is incomplete or written for another layout.")
        raise bad_input(where, missing[0], f"all of {missing}", "missing", hint)
    extra = sorted(k for k in sd if k not in expected)
    if extra:
        raise bad_input(where, extra[0], f"only the keys of a {cfg.num_hidden_layers}-layer EAGLE-3 draft "
                        "(norm_before_fc/fc_norm weights only when those flags are set)", f"extra keys {extra[:8]}",
                        "Set the flag that owns them in config.json, or this is another draft architecture "
                        "(q/k norms need a qwen3 layer model_type, MLA weights an MLA config; attention bias and "
                        "SGLang additional_layers are not modelled).")
    for key, value in sd.items():
        shape, dtype = expected[key]
        if tuple(value.shape) != shape:
            raise bad_input(where, key, f"shape {list(shape)} (from config.json)", f"shape {list(value.shape)}",
                            "config.json and the weights disagree.")
        if dtype.is_floating_point:
            if not value.dtype.is_floating_point:
                raise bad_input(where, key, "a floating-point tensor", f"dtype {value.dtype}")
            finite = torch.isfinite(value)
            if not bool(finite.all()):
                bad = int((~finite).sum())
                raise bad_input(where, key, "finite values", f"{bad} NaN/inf of {value.numel()}",
                                "The checkpoint was saved after training diverged, or is corrupt.")
        elif key == "d2t" and (value.dtype.is_floating_point or value.dtype == torch.bool):
            raise bad_input(where, key, "an integer tensor of offsets", f"dtype {value.dtype}")
    return [k for k in optional if k in expected and k not in sd]


# ---------------------------------------------------------------------------- targets

def target_facts(target) -> TargetFacts:
    """What a draft needs to know about its target, from a ``Target``, an HF model or a folder."""
    if target is None:
        return TargetFacts(None, None, None, None, "no target")
    if isinstance(target, (str, os.PathLike)):
        raw, file = read_config(target)
        text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
        archs = text.get("architectures") or raw.get("architectures") or [None]
        return TargetFacts(text.get("num_hidden_layers"), text.get("hidden_size"), text.get("vocab_size"),
                           archs[0], str(file), folder=file.parent)
    return as_target(target).facts()


def _embedding_from_files(folder: Path, vocab: int, hidden: int, device="cpu") -> torch.Tensor | None:
    """Read only the embedding matrix from a target folder's safetensors (not the whole model), onto ``device``."""
    from eagle3lab.models.device import open_safetensors

    for file in find_weight_files(folder):
        if file.suffix != ".safetensors":
            continue
        with open_safetensors(file, device) as f:
            for key in f.keys():
                if key.endswith("embed_tokens.weight") and list(f.get_slice(key).get_shape()) == [vocab, hidden]:
                    return f.get_tensor(key)
    return None


# ---------------------------------------------------------------------------- load

def _assembled(cfg: DraftConfig, profile, fmt: str, sd: dict[str, torch.Tensor], device, dtype) -> Eagle3Draft:
    """The draft built on the meta device and handed the checked tensors, already on ``device``, cast to ``dtype``
    one at a time (floats; d2t / t2d keep theirs): no random initialisation and no second copy of the weights. A
    weight the checkpoint lacks (an embedding loaded for conversion only) is zeros."""
    with torch.device("meta"):
        draft = Eagle3Draft(cfg, profile=profile, fmt=fmt)
    for key, value in sd.items():
        sd[key] = value.to(device=device, dtype=dtype if value.is_floating_point() else value.dtype)
    result = draft.load_state_dict(sd, strict=False, assign=True)
    assert not result.unexpected_keys, result.unexpected_keys  # check_state_dict already refused them
    for name in result.missing_keys:
        module_name, _, attr = name.rpartition(".")
        module = draft.get_submodule(module_name)
        setattr(module, attr, torch.nn.Parameter(torch.zeros_like(getattr(module, attr), device=device, dtype=dtype)))
    return draft.requires_grad_(False).eval()


def load_draft(path, target=None, device="auto", profile=None, num_target_layers: int | None = None,
               dtype="auto", check_vocab: bool = True, require_embedding: bool = True) -> Eagle3Draft:
    """Load a draft checkpoint of any family, checked, ready to run the way ``profile`` would.

    ``target``: a ``Target``, an HF model or a target folder (config.json; the embedding is read
    from its safetensors when the draft has none). ``profile`` defaults to the first that can run the draft:
    the family's trainer, its server, then any other (the load report says which and why); none: refused.
    ``dtype``: "auto" (fp32 on CPU, bf16 on CUDA), a dtype, or None to keep the checkpoint's.
    ``check_vocab=False`` loads a draft whose vocab map is broken (to demonstrate the failure).
    """
    from eagle3lab.models.device import resolve_device, resolve_dtype

    raw, config_file = read_config(path)
    folder = config_file.parent
    dev = resolve_device(device)
    fmt, reason = cf.classify_config(raw)
    if fmt not in cf.FORMATS:
        raise bad_input(config_file, "architectures", "an EAGLE-3 draft (speculators_model_type 'eagle3', "
                        f"{' / '.join(cf.SGLANG_ARCHS)}, or LlamaForCausalLM with draft_vocab_size)",
                        f"{fmt}: {reason}", "Run 'eagle3lab inspect' on it to see what it is.")
    cfg, defaulted = cf.config_to_draft(raw, fmt, str(config_file))
    files = find_weight_files(folder)
    if not files:
        raise bad_input(folder, None, f"weights ({' or '.join(WEIGHT_FILES)})", "none",
                        "Only config.json is here: 'eagle3lab inspect' can still check it.")
    where = files[0] if len(files) == 1 else folder
    notes: list[Finding] = []
    cfg, sd, absent = _read_checked_weights(cfg, raw, files, dev, where, notes)
    stored = {k: v.dtype for k, v in sd.items() if v.is_floating_point()}

    facts = target_facts(target)
    check_draft_fits(facts, target_hidden_size=cfg.target_hidden_size, vocab_size=cfg.vocab_size,
                     where=config_file)
    report = LoadReport(path=str(folder), format=fmt, format_reason=reason, profile="",
                        weight_files=[f.name for f in files], aux_ids=list(cfg.aux_layer_ids or []) or None,
                        aux_ids_key=cfg.aux_ids_key, warnings=notes,
                        defaulted=[{"field": f, "value": v, "rule": r} for f, v, r in defaulted])
    _settle_vocab_map(cfg, sd, absent, report, where, check_vocab)
    embedding = _embedding_for(cfg, sd, facts, report, where, dev, target is not None, require_embedding)

    to_dtype = resolve_dtype(dtype, dev) if dtype is not None else sd["fc.weight"].dtype
    if (mixed := mixed_dtypes(stored, where, to_dtype)) is not None:
        notes.append(mixed)
    if profile is None:   # the format's trainer, else the first profile that can run this draft
        profile = _default_profile(cfg, fmt, config_file, notes)
    if embedding is not None:   # a copy: the draft's own weight never aliases the target's
        sd["embed_tokens.weight"] = embedding.to(device=dev, dtype=to_dtype, copy=True)
    draft = _assembled(cfg, profile, fmt, sd, dev, to_dtype)
    draft.embedding_missing = embedding is None
    embedding_of_target = facts.embedding.detach().to(device=dev, dtype=to_dtype) if facts.embedding is not None else None
    draft = draft.bound(num_target_layers or facts.num_layers, facts.arch, embedding_of_target)
    _report_as_run(report, draft, cfg, fmt)
    draft.load_report = report
    return draft


def _read_checked_weights(cfg: DraftConfig, raw: dict, files: list[Path], dev, where,
                          notes: list[Finding]) -> tuple[DraftConfig, dict[str, torch.Tensor], list[str]]:
    """The weights read onto ``dev`` under our names, the config fitted to them, an identity vocab map dropped, and
    every key, shape and value checked: ``(cfg, state dict, optional keys absent)``."""
    sd, ignored = canonical_state_dict(read_weights(files, dev), where)   # on the device as read
    notes += ignored
    cfg = fit_config_to_weights(cfg, raw, sd, where, notes)
    # SpecForge saves its buffers even then (and its warm start needs them: save_draft writes them), so an
    # identity map is dropped without a word; only one that is not the identity is an error
    if cfg.draft_vocab_size == cfg.vocab_size and "d2t" in sd:
        d2t, _ = sd.pop("d2t"), sd.pop("t2d", None)
        if bool((d2t != 0).any()):
            raise bad_input(where, "d2t", "all-zero offsets (draft_vocab_size = vocab_size: the identity map)",
                            f"{int((d2t != 0).sum())} non-zero offsets", "Set draft_vocab_size in config.json to "
                            "the length the draft was trained with.")
    return cfg, sd, check_state_dict(cfg, sd, where)


def _settle_vocab_map(cfg: DraftConfig, sd: dict[str, torch.Tensor], absent: list[str], report: LoadReport, where,
                      check_vocab: bool) -> None:
    """t2d rebuilt from d2t when missing (vLLM and SGLang read only d2t), both cast to their dtypes, and the map
    checked: its findings go to the report, its first error is raised unless ``check_vocab`` is False."""
    if "t2d" in absent and "d2t" in sd:
        t2d = torch.zeros(cfg.vocab_size, dtype=torch.bool, device=sd["d2t"].device)
        ids = torch.arange(len(sd["d2t"])) + sd["d2t"].long()
        t2d[ids[(ids >= 0) & (ids < cfg.vocab_size)]] = True
        sd["t2d"] = t2d
        report.defaulted.append({"field": "t2d", "value": None, "rule": "missing: rebuilt from d2t "
                                 "(vLLM and SGLang read only d2t)"})
    if "d2t" in sd:
        sd["d2t"] = sd["d2t"].long()
        sd["t2d"] = sd["t2d"].bool()
    findings = check_vocab_map(sd.get("d2t"), sd.get("t2d"), cfg.vocab_size, cfg.draft_vocab_size)
    report.vocab_findings = list(findings)
    errors = [f for f in findings if f.severity.blocking]
    if errors and check_vocab:
        raise bad_input(where, errors[0].where, "a valid draft->target vocab map", errors[0].text,
                        "Load with check_vocab=False to study the broken draft anyway.")


def _embedding_for(cfg: DraftConfig, sd: dict[str, torch.Tensor], facts: TargetFacts, report: LoadReport, where, dev,
                   has_target: bool, require_embedding: bool) -> torch.Tensor | None:
    """The draft's embedding, taken out of ``sd``: the checkpoint's, else the target's (SpecForge/SGLang and EAGLE
    drafts do not save it); None, noted in the report, only when ``require_embedding`` is False."""
    embedding = sd.pop("embed_tokens.weight", None)
    if embedding is None:
        if facts.embedding is None and facts.folder is not None:
            facts.embedding = _embedding_from_files(facts.folder, cfg.vocab_size, cfg.hidden_size, dev)
        if facts.embedding is not None and tuple(facts.embedding.shape) == (cfg.vocab_size, cfg.hidden_size):
            embedding, report.embedding = facts.embedding.detach(), "target"
        elif require_embedding:
            raise bad_input(where, "embed_tokens.weight", f"a [{cfg.vocab_size}, {cfg.hidden_size}] embedding in the "
                            "checkpoint or from the target", "missing" + (f" (target {facts.where} has none of "
                                                                          "that shape)" if has_target else ""),
                            "SpecForge/SGLang and EAGLE drafts do not save it: pass target= (a loaded target or "
                            "its folder) so its embedding is used.")
        else:
            report.embedding = "missing"
    return embedding


def _default_profile(cfg: DraftConfig, fmt: str, config_file: Path, notes: list[Finding]) -> EngineProfile:
    """The first profile that can run this draft (the format's trainer first), noting why the ones before it were
    passed over; refused when none can."""
    profile, passed = first_runnable(cfg, fmt)
    if profile is None:
        raise bad_input(config_file, None, "a profile that can run this draft (its format's trainer, its server, "
                        "or any other)", "; ".join(passed), "Pass load_draft(..., profile=) to study it as that "
                        "engine would run it anyway.")
    if passed:
        notes.append(load_warning("PROFILE_PASSED_OVER", f"run as {profile.label}, the first profile that can run "
                                  f"this draft: {'; '.join(passed)}"))
    return profile


def _report_as_run(report: LoadReport, draft: Eagle3Draft, cfg: DraftConfig, fmt: str) -> None:
    """The report's profile and settings as the draft runs, and a warning for ids its profile does not see and for
    what keeps its profile or its format's server from running it as written."""
    report.profile = draft.profile.name
    report.settings = [{"flag": f, "value": d.value, "how": d.how} for f, d in draft.settings.decisions.items()]
    seen, why = draft.profile.visible_ids(cfg.aux_layer_ids, cfg.aux_ids_key)
    if why:
        report.warnings.append(load_warning("IDS_NOT_SEEN", why))
    for name in dict.fromkeys((draft.profile.name, SERVE_PROFILE[fmt])):   # what can run it, as written
        problems = [load_warning("NOT_SERVABLE", p) for p in serving_problems(cfg, name, ATTENTION_KINDS)]
        report.warnings += [p for p in problems if p not in report.warnings]


# ---------------------------------------------------------------------------- save / convert

def first_runnable(cfg: DraftConfig, fmt: str, reads_ids: bool = False) -> tuple[EngineProfile | None, list[str]]:
    """The first of format ``fmt``'s trainer, its server, then every other profile, that can run this draft (no
    ``serving_problems``; with ``reads_ids`` also reading its aux ids where they are written), and why each one
    before it was passed over (all of them when none can: None)."""
    passed = []
    for name in dict.fromkeys((FORMAT_PROFILE[fmt], SERVE_PROFILE[fmt], *PROFILES)):
        profile = get_profile(name)
        problems = serving_problems(cfg, profile, ATTENTION_KINDS)
        if not problems and reads_ids:
            problems = [why for why in profile.visible_ids(cfg.aux_layer_ids, cfg.aux_ids_key)[1:] if why]
        if not problems:
            return profile, passed
        passed.append(problems[0])
    return None, passed


def trainer_of(draft: Eagle3Draft) -> EngineProfile:
    """The profile whose arithmetic and aux-id convention made this draft: its own profile when it has no format,
    else the first profile that can run it and reads its ids (the format's trainer, then its server, then any
    other). When none can, the first of trainer and server that computes its attention kind: an MLA draft without
    q LoRA in sglang format comes from TorchSpec, which computes and writes ids as SGLang does, although SGLang's
    loader needs a q LoRA."""
    if not draft.format:
        return draft.profile
    found, _ = first_runnable(draft.config, draft.format, reads_ids=True)
    if found is not None:
        return found
    trainer, server = get_profile(FORMAT_PROFILE[draft.format]), get_profile(SERVE_PROFILE[draft.format])
    kind = draft.config.attention
    return server if kind not in trainer.families.attention and kind in server.families.attention else trainer


def trained_resid(draft: Eagle3Draft, num_target_layers: int | None = None, required: bool = True):
    """The resid points the draft was trained on (its family's trainer convention), or None = defaults
    (or unknown, when ``required`` is False and the target's layer count is not known)."""
    trainer = trainer_of(draft)
    if "aux_resid" in draft.wiring:   # an explicit hypothesis (draft.rewired) wins over the config
        return tuple(draft.wiring["aux_resid"]), trainer
    ids, _ = trainer.visible_ids(draft.config.aux_layer_ids, draft.config.aux_ids_key)
    n = num_target_layers or draft.num_target_layers
    if ids is None or (n is None and not required):
        return None, trainer
    if n is None:
        raise bad_input("draft", "num_target_layers", "the target's number of decoder layers (to translate the "
                        f"aux ids {list(ids)} between engines' conventions)", "unknown",
                        "Pass num_target_layers= (CLI: --num-target-layers N or --target DIR).")
    res = trainer.aux_resolution(draft.config.aux_layer_ids, draft.config.aux_ids_key, n, draft.target_arch)
    if res.fatal:
        raise Eagle3LabError(f"{trainer.engine} cannot capture the states for ids {list(ids)}: {res.fatal[0]}")
    return tuple(res.resid), trainer


# What speculators' own loader (0.9.0, Eagle3DraftModel.from_pretrained) needs in a speculators-format checkpoint.
SPECULATORS_NEEDS = {   # -> the warning's code: SPECULATORS_NO_EMBEDDING, SPECULATORS_NO_VERIFIER
    "embed_tokens.weight": "no embed_tokens.weight written: speculators 0.9.0 Eagle3DraftModel.from_pretrained leaves "
                           "it uninitialised (with transformers 5.19.0, the newest it allows, its NaN sentinel in "
                           "_init_vocab does not survive loading, so load_verifier_weights never copies the verifier's); vLLM takes the target's",
    "verifier": "speculators_config.verifier.name_or_path is null: speculators 0.9.0 Eagle3DraftModel.from_pretrained "
                "reads the verifier's config (load_verifier_weights) and fails without it; vLLM does not read it. "
                "Convert with a target (--target), or set draft.config.extra['verifier']",
}


def _older_sglang_reading(ids, num_layers: int, arch: str | None) -> list[Finding]:
    """A warning when the oldest SGLang build read feeds other points for ``ids`` than the newest (e.g. id -1 on a
    Llama target: resid[0] from 0.5.22, a TypeError up to 0.5.21), or crashes on them."""
    from eagle3lab.engines.layer_ids import SGLANG_OLDEST_READ, resolve_aux_layers

    newest = resolve_aux_layers("sglang", list(ids), num_layers, arch=arch)
    oldest = resolve_aux_layers("sglang", list(ids), num_layers, arch=arch, engine_version=SGLANG_OLDEST_READ)
    if oldest.resid == newest.resid and not oldest.fatal:
        return []
    then = oldest.fatal[0].rstrip(".") if oldest.fatal else f"feeds resid{list(oldest.resid)}"
    return [load_warning("OLDER_SGLANG_READING", f"aux ids {list(ids)} feed resid{list(newest.resid)} in SGLang's "
                         f"newest code read, but not in every build: in {SGLANG_OLDEST_READ}, {then}. `eagle3lab ids "
                         f"sglang {' '.join(map(str, ids))} --num-layers {num_layers} --engine-version V` says what "
                         "build V feeds; doctor --engine-version V checks a server.")]


def _trainer_refuses(ids, num_layers: int, arch: str | None) -> list[Finding]:
    """A warning when SpecForge, the sglang format's trainer, refuses ``ids`` (eagle3lab.engines.layer_ids'
    SPECFORGE_IDS_REJECTED): the checkpoint serves, but cannot be fine-tuned with those ids as written."""
    from eagle3lab.engines.layer_ids import resolve_aux_layers

    res = resolve_aux_layers("specforge", list(ids), num_layers, arch=arch)
    return [load_warning("TRAINER_REFUSES_IDS", f"aux ids {list(ids)}: SGLang serves them, but {n.text}")
            for n in res.notes if n.code == "SPECFORGE_IDS_REJECTED"]


def save_draft(draft: Eagle3Draft, out_dir, format: str = "speculators", *, num_target_layers: int | None = None,
               include_embedding: bool | None = None, overwrite: bool = False,
               keep_stated_flags: bool = False) -> SavedDraft:
    """Write ``draft`` as family ``format``; returns what was written (a ``SavedDraft``: ids, flags, warnings).

    Flags are written as the draft's trainer ran them; a flag whose value that changes from what the
    source config states is named in a warning with the rule, and ``keep_stated_flags=True`` writes
    the stated value instead (explicit ``draft.rewired()`` switches win over both)."""
    fmt = format
    if fmt not in cf.FORMATS:
        raise bad_input("--to", None, f"one of {', '.join(cf.FORMATS)}", repr(fmt))
    cfg, out = draft.config, Path(out_dir).expanduser()
    _check_writable(cfg, fmt, out, overwrite)
    warnings: list[Finding] = []
    n = num_target_layers or draft.num_target_layers
    ids, resid, trainer = _ids_to_write(draft, fmt, n, warnings)
    trained = resolve_settings(cfg, trainer, draft.format)
    flags = _flags_to_write(draft, trainer, trained, out, fmt, keep_stated_flags, warnings)
    written_at = {"speculators": IDS_TOP, "sglang": IDS_NESTED}.get(fmt) if ids is not None else None
    extra = {**cfg.extra, **({NUM_AUX_KEY: cfg.num_aux} if cfg.num_aux != 3 else {})}   # draft_to_config writes it
    new_cfg = DraftConfig(**{**cfg.to_dict(), "aux_layer_ids": ids, "aux_ids_key": written_at, "extra": extra, **flags})
    warnings += _served_otherwise(new_cfg, fmt, flags, trained)
    tensors = _tensors_to_write(draft, fmt, include_embedding, warnings)
    config = cf.draft_to_config(new_cfg, fmt, ids, flags)
    if fmt == "sglang" and not trained.final_norm:   # missing would read as true in SpecForge
        config["norm_output"] = False

    from safetensors.torch import save_file
    with atomic_dir(out) as tmp:
        (tmp / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        save_file(tensors, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    return SavedDraft(str(out), fmt, ids, list(resid) if resid else None, flags, "embed_tokens.weight" in tensors,
                      warnings)


def _check_writable(cfg: DraftConfig, fmt: str, out: Path, overwrite: bool) -> None:
    """Refuse what format ``fmt`` cannot hold (several layers outside speculators, an attention kind its loaders do
    not build), and an existing folder unless ``overwrite``."""
    if out.exists() and not overwrite:
        raise bad_input(out, None, "a new output folder", "it exists", "Pass overwrite=True (CLI: --overwrite).")
    if fmt != "speculators" and cfg.num_hidden_layers > 1:
        raise bad_input(out, "num_hidden_layers", f"1 for the {fmt} format (midlayer.* holds one layer)",
                        cfg.num_hidden_layers, "Write multi-layer drafts in speculators format.")
    if fmt not in family_of(cfg.attention).formats:
        raise bad_input(out, "attention", "a Llama layer for the EAGLE official format (cnets.py builds one), a Llama "
                        "or Qwen3 layer for speculators (vLLM's update_eagle3 raises for any other layer model_type)",
                        cfg.attention, "Write MLA drafts in sglang format (Eagle3DeepseekV2ForCausalLM), Qwen3 drafts "
                        "in speculators format.")


def _ids_to_write(draft: Eagle3Draft, fmt: str, n: int | None, warnings: list[Finding]):
    """``(ids, trained resid points, trainer)``: the aux ids that make ``fmt``'s server capture the points the draft
    was trained on (copied when the conventions agree; None for the EAGLE format, whose points are fixed), warning
    when an older SGLang build or SpecForge reads them otherwise."""
    from eagle3lab.engines.layer_ids import to_engine_ids

    cfg = draft.config
    trainer = trainer_of(draft)
    same_convention = _CONVENTION[trainer.id_engine] == _CONVENTION[get_profile(FORMAT_PROFILE[fmt]).id_engine]
    rewired = "aux_resid" in draft.wiring
    resid, trainer = trained_resid(draft, n, required=rewired or not same_convention)
    if same_convention and not rewired:  # the ids mean the same there: copied as the trainer reads them
        seen, _ = trainer.visible_ids(cfg.aux_layer_ids, cfg.aux_ids_key)
        ids = list(seen) if seen is not None else None
    elif resid is None:
        ids = None
    else:
        # the ids are written for the server that reads them (SGLang for the sglang format), not for a trainer that
        # may refuse them (SpecForge 0.2.0 takes no -1): that refusal is a warning below
        ids = to_engine_ids(get_profile(SERVE_PROFILE[fmt]).id_engine, list(resid), n, arch=draft.target_arch)
        ids = None if fmt == "eagle" else ids
    if ids is not None and get_profile(SERVE_PROFILE[fmt]).id_engine == "sglang":
        warnings += _older_sglang_reading(ids, n, draft.target_arch) + _trainer_refuses(ids, n, draft.target_arch)
    return ids, resid, trainer


def _flags_to_write(draft: Eagle3Draft, trainer: EngineProfile, trained: DraftSettings, out: Path, fmt: str,
                    keep_stated_flags: bool, warnings: list[Finding]) -> dict[str, bool]:
    """The norm flags as the draft's trainer ran them; a stated flag that differs is warned about (or kept with
    ``keep_stated_flags``), and ``draft.rewired()`` switches win over both."""
    cfg = draft.config
    flags = {"norm_before_residual": trained.norm_before_residual, "norm_before_fc": trained.norm_before_fc,
             "fc_norm": trained.fc_norm, "norm_output": trained.recycle_postnorm}
    rules = {flag: trained.decisions[flag].how for flag in flags} | {"norm_output": trained.decisions["recycle"].how}
    origin = (f"the {draft.format} format is trained with {trainer.label}" if draft.format
              else f"its profile {trainer.label}")
    for flag, value in flags.items():   # a flag the source states is never changed silently
        stated = getattr(cfg, flag)
        overridden = flag in draft.wiring or (flag == "norm_output" and "recycle_postnorm" in draft.wiring)
        if stated is None or bool(stated) == value or overridden:   # rewired() switches are explicit choices
            continue
        if keep_stated_flags:
            flags[flag] = bool(stated)
            warnings.append(load_warning("STATED_FLAG_KEPT", f"{flag}: kept the stated {stated} (keep_stated_flags / "
                                         f"--keep-stated-flags), although the draft's trainer ran {value} ({origin}; "
                                         f"rule: {rules[flag]})"))
        else:
            warnings.append(load_warning("STATED_FLAG_CHANGED", f"{flag}: the source config states {stated}, "
                                         f"written {value} as the draft's trainer ran it ({origin}; rule: "
                                         f"{rules[flag]}). To write the stated {stated}, pass keep_stated_flags=True "
                                         "(CLI: --keep-stated-flags)"))
    flags.update({k: v for k, v in draft.wiring.items() if k in flags})   # draft.rewired() switches
    if "recycle_postnorm" in draft.wiring:
        flags["norm_output"] = draft.wiring["recycle_postnorm"]
    if fmt == "eagle" and (flags["fc_norm"] or flags["norm_before_fc"]):
        raise bad_input(out, "fc_norm / norm_before_fc", "off for the EAGLE official format (it has no such norms)",
                        "on", "Write speculators or sglang format instead.")
    return flags


def _served_otherwise(new_cfg: DraftConfig, fmt: str, flags: dict[str, bool],
                      trained: DraftSettings) -> list[Finding]:
    """Warnings for what the format's server cannot run as written, and for each switch it runs otherwise than the
    draft was trained (acceptance drops)."""
    served = get_profile(SERVE_PROFILE[fmt])
    warnings = [load_warning("NOT_SERVABLE", p) for p in serving_problems(new_cfg, served, ATTENTION_KINDS)]
    as_served = resolve_settings(new_cfg, served, fmt)
    for flag in ("norm_before_residual", "norm_before_fc", "fc_norm"):
        if getattr(as_served, flag) != flags[flag]:
            warnings.append(load_warning("SERVED_FLAG_IGNORED", f"{served.label} does not honour {flag}={flags[flag]}: "
                                         "served from this checkpoint the draft runs with different arithmetic than "
                                         "it was trained with (acceptance drops)."))
    if as_served.recycle_postnorm != flags["norm_output"]:
        warnings.append(load_warning("SERVED_RECYCLE_DIFFERS", f"{served.label} recycles the "
                                     f"{'post' if as_served.recycle_postnorm else 'pre'}-norm state; this draft was "
                                     f"trained recycling the {'post' if flags['norm_output'] else 'pre'}-norm state."))
    if as_served.final_norm != trained.final_norm:   # SpecForge norm_output false: trained without it
        warnings.append(load_warning("SERVED_FINAL_NORM_DIFFERS", f"{served.label} norms lm_head's input; this draft "
                                     f"was trained without that norm ({trained.decisions['final_norm'].how})."))
    return warnings


def _tensors_to_write(draft: Eagle3Draft, fmt: str, include_embedding: bool | None,
                      warnings: list[Finding]) -> dict[str, torch.Tensor]:
    """The weights under ``fmt``'s names, on the CPU: the embedding only where it belongs (speculators always needs
    it), SpecForge's identity vocab buffers added for the sglang format."""
    cfg = draft.config
    state = {k: v for k, v in draft.state_dict().items()}
    report = draft.load_report
    if include_embedding is None:   # speculators format: always, see SPECULATORS_NEEDS
        include_embedding = report is None or report.embedding == "checkpoint" or fmt == "speculators"
    if not include_embedding or draft.embedding_missing:
        state.pop("embed_tokens.weight", None)
    if fmt == "speculators" and "embed_tokens.weight" not in state:
        warnings.append(load_warning("SPECULATORS_NO_EMBEDDING", SPECULATORS_NEEDS["embed_tokens.weight"]))
    if fmt == "speculators" and not cfg.extra.get("verifier"):
        warnings.append(load_warning("SPECULATORS_NO_VERIFIER", SPECULATORS_NEEDS["verifier"]))
    if fmt == "sglang" and "d2t" not in state:   # SpecForge's identity buffers: its warm start requires them
        state["d2t"] = torch.zeros(cfg.vocab_size, dtype=torch.long)
        state["t2d"] = torch.ones(cfg.vocab_size, dtype=torch.bool)
    return {cf.family_key(k, fmt): v.detach().to("cpu").contiguous().clone() for k, v in state.items()}


def convert_draft(src, out_dir, to: str, target=None, num_target_layers: int | None = None,
                  overwrite: bool = False, keep_stated_flags: bool = False) -> SavedDraft:
    """Rewrite a checkpoint in another family's format (ids translated, flags made explicit; a stated
    flag changed by the trainer's rule is warned about, or kept with ``keep_stated_flags``)."""
    draft = load_draft(src, target=target, device="cpu", dtype=None,
                       num_target_layers=num_target_layers, require_embedding=False)
    verifier = target if isinstance(target, (str, os.PathLike)) else getattr(target, "path", None)
    if verifier is not None and not draft.config.extra.get("verifier"):   # speculators reads its verifier there
        draft.config.extra["verifier"] = str(verifier)
    result = save_draft(draft, out_dir, to, num_target_layers=num_target_layers, overwrite=overwrite,
                        keep_stated_flags=keep_stated_flags)
    result.source = {"path": str(src), "format": draft.format}
    result.warnings = draft.load_report.warnings + result.warnings
    return result


# ---------------------------------------------------------------------------- inspect

def _target_view(target):
    """The target's config.json through the one reader (a folder or config path, or a loaded model's config)."""
    from eagle3lab.engines.config_view import read_target

    if target is None:
        return None
    if isinstance(target, (str, os.PathLike)):
        raw, file = read_config(target)
        return read_target(raw, str(file))
    config = getattr(getattr(target, "model", target), "config", None)
    return read_target(config.to_dict(), "target") if hasattr(config, "to_dict") else None


def _fc_inputs(files: list[Path]) -> int | None:
    """fc.weight's input width from the weight files' headers (no tensor read), None when absent."""
    try:
        shapes = weight_shapes(files)
    except Eagle3LabError:
        return None
    found = [shape for key, (shape, _) in shapes.items() if cf.canonical_key(key) == "fc.weight" and len(shape) == 2]
    return found[0][1] if found else None


def static_problems(raw: dict, cfg: DraftConfig, kind: str, profiles: dict, target_view, files, where: str) -> list:
    """inspect's ``findings``: each profile's ``config_problem`` for this config (flags, window), the aux count against
    fc's width, and with a target its RoPE and context against the draft's (eagle3lab.engines.draft_checks)."""
    from eagle3lab.engines import draft_checks as dc
    from eagle3lab.engines.config_view import read_draft
    from eagle3lab.engines.profiles import FLAGS

    view = read_draft(raw, FLAGS, where)
    out = []
    for profile in profiles.values():
        out += dc.flag_problems(cfg, profile, kind)
        out += [p for p in [dc.window_problem(view.window, view.num_layers, FORMAT_PROFILE[kind], profile)] if p]
    count_key = view.num_aux_key or cfg.aux_ids_key
    count = view.num_aux if view.num_aux is not None else (len(cfg.aux_layer_ids) if cfg.aux_layer_ids else None)
    hidden = (target_view.hidden_size if target_view is not None else None) or \
        raw.get("target_hidden_size") or view.layer.get("hidden_size")
    fc_in = _fc_inputs(files) if files else None
    if isinstance(count, int) and count_key and fc_in and isinstance(hidden, int):
        out += [p for p in [dc.aux_fc_problem(count, count_key, fc_in, hidden, [p for n, p in profiles.items()
                                                                               if n in ("vllm", "sglang")])] if p]
    if target_view is not None:
        prefix, mine = ("transformer_layer_config." if kind == "speculators" else ""), dc.config_rope(cfg)
        out += [p for p in (dc.rope_problem(mine, target_view.rope, prefix, where),
                            dc.context_problem(mine, target_view.rope, prefix, where)) if p]
    return out


def inspect_checkpoint(path, target=None, num_target_layers: int | None = None,
                       builds: dict | None = None) -> Inspection:
    """Everything ``eagle3lab inspect`` reports, as an ``Inspection`` (works on a folder holding only config.json;
    ``to_dict()`` is the CLI's JSON). ``builds``: profile name -> the profile of the engine build asked
    (``engines.profiles.engine_builds``), used for serving, flags and findings in place of the newest.

    Never raises on a bad checkpoint: problems are listed under ``errors``; what could not be
    checked (no weights, no layer count) under ``not_checked``, each a ``Finding`` with a stable code.
    """
    from eagle3lab.engines.profiles import PROFILES
    from eagle3lab.models.draft_family import describe_draft_config

    raw, config_file = read_config(path)
    kind, reason = cf.classify_config(raw)
    out = Inspection(path=str(config_file.parent), config_file=str(config_file), kind=kind,
                     is_eagle3_draft=kind in cf.FORMATS, format_reason=reason)
    if kind not in cf.FORMATS:
        return _not_a_draft(raw, kind, out)
    out.family = describe_draft_config(raw)
    try:
        cfg, defaulted = cf.config_to_draft(raw, kind, str(config_file))
    except Eagle3LabError as err:
        out.errors.append(inspect_note("CONFIG_INVALID", str(err)))
        return out
    facts = _inspected_target(target, cfg, config_file, out)
    n = num_target_layers or facts.num_layers
    out.format = kind
    out.defaulted = [Defaulted(f, v, r) for f, v, r in defaulted]

    files = find_weight_files(config_file.parent)
    cfg = _inspected_weights(cfg, kind, config_file, files, target, n, out)
    out.sizes = Sizes.of(cfg)
    out.aux_ids = _aux_ids_by_engine(cfg, n, facts, PROFILES)
    # which engines can run this draft family at all (attention kind, needed fields, aux count), the builds asked
    profiles = {**PROFILES, **(builds or {})}
    out.serving = {name: Serving(profile.label, serving_problems(cfg, profile, ATTENTION_KINDS))
                   for name, profile in profiles.items()}
    try:
        out.findings = static_problems(raw, cfg, kind, profiles, _target_view(target), files, str(config_file))
    except Eagle3LabError as err:
        out.findings = []
        out.errors.append(inspect_note("CHECKS_FAILED", str(err)))
    if n is None:
        out.not_checked.append(inspect_note("NO_TARGET_LAYERS", "resid points of default ids and range checks: the target's "
                                    "layer count is unknown (pass --target DIR or --num-target-layers N)"))
    out.norm_flags = _norm_flags_by_engine(cfg, kind, profiles)
    return out


def _not_a_draft(raw: dict, kind: str, out: Inspection) -> Inspection:
    """inspect's answer for a config that is no EAGLE-3 draft: its target-like sizes, and a hint for a target."""
    text = raw.get("text_config") if isinstance(raw.get("text_config"), dict) else raw
    out.target_like = TargetLike(*(text.get(k) for k in ("num_hidden_layers", "hidden_size", "vocab_size")))
    out.not_checked.append(inspect_note("NOT_A_DRAFT", "everything EAGLE-3 specific: this config is not an EAGLE-3 draft"))
    if kind == "target":
        out.warnings.append(inspect_note("TARGET_CONFIG", f"This is a target config: pass its folder as --target to inspect a "
                                 f"draft for it (N = {text.get('num_hidden_layers')})."))
    return out


def _inspected_target(target, cfg: DraftConfig, config_file: Path, out: Inspection) -> TargetFacts:
    """The target's facts (none without a target), a mismatch with the draft's sizes listed under ``errors``."""
    facts = TargetFacts(None, None, None, None, "no target")
    if target is not None:
        try:
            facts = target_facts(target)
            check_draft_fits(facts, target_hidden_size=cfg.target_hidden_size, vocab_size=cfg.vocab_size,
                             where=config_file)
        except Eagle3LabError as err:
            out.errors.append(inspect_note("TARGET_MISMATCH", str(err)))
    return facts


def _inspected_weights(cfg: DraftConfig, kind: str, config_file: Path, files: list[Path], target, n: int | None,
                       out: Inspection) -> DraftConfig:
    """inspect's ``weights`` and ``vocab``: the draft loaded and checked when there are weights (as its trainer
    would run it when no profile can), its report merged into ``out``; returns the config fitted to the weights."""
    if not files:
        out.weights, out.vocab = WeightsCheck([], False), VocabCheck(False)
        out.not_checked += [inspect_note("NO_WEIGHTS", "weights: keys, shapes, NaN/inf (no weight files here)"),
                            inspect_note("NO_VOCAB_MAP", "vocab map: d2t/t2d live in the weights")]
        return cfg
    try:
        runnable = first_runnable(cfg, kind)[0] is not None   # else: checked as its trainer would run it
        draft = load_draft(config_file.parent, target=target, device="cpu", dtype=None,
                           require_embedding=False, check_vocab=False, num_target_layers=n,
                           profile=None if runnable else FORMAT_PROFILE[kind])
        cfg = draft.config
        rep = draft.load_report
        found = list(rep.vocab_findings)
        out.vocab = VocabCheck(True, found)
        out.errors += [inspect_note("VOCAB_MAP_INVALID", f"vocab map: {f.where}: {f.text}") for f in found
                       if f.severity.blocking]
        out.warnings += rep.warnings   # each with its own code (inspection.WARNING_CODES)
        out.defaulted += [d for d in (Defaulted(**d) for d in rep.defaulted) if d not in out.defaulted]
        out.weights = WeightsCheck(rep.weight_files, True, rep.embedding, str(draft.fc.weight.dtype).replace(
            "torch.", ""), sum(p.numel() for p in draft.parameters()))
    except Eagle3LabError as err:
        out.errors.append(inspect_note("WEIGHTS_INVALID", str(err)))
        out.weights = WeightsCheck([f.name for f in files], False)
    return cfg


def _aux_ids_by_engine(cfg: DraftConfig, n: int | None, facts: TargetFacts, profiles: dict) -> AuxIds:
    """inspect's ``aux_ids``: the ids as written, and for each profile the ids it sees and the resid points it
    feeds fc (or why it cannot)."""
    ids = list(cfg.aux_layer_ids) if cfg.aux_layer_ids is not None else None
    return AuxIds(ids, cfg.aux_ids_key, n, facts.arch,
                  {name: AuxRow.read(profile, cfg.aux_layer_ids, cfg.aux_ids_key, n, facts.arch)
                   for name, profile in profiles.items()})


def _norm_flags_by_engine(cfg: DraftConfig, kind: str, profiles: dict) -> dict[str, NormFlag]:
    """inspect's ``norm_flags``: each flag as written, and the value each profile runs it with and why (an engine
    that cannot resolve the config gives its error for every flag)."""
    from eagle3lab.engines.profiles import FLAGS, Decision

    flags = {flag: NormFlag(getattr(cfg, flag)) for flag in FLAGS}
    for name, profile in profiles.items():
        try:
            # serving always has the target, so engines that swap in its embedding do
            settings = resolve_settings(cfg, profile, kind, has_target_embedding=True)
        except Eagle3LabError as err:
            for flag in FLAGS:
                flags[flag].by_engine[name] = Decision(None, str(err))
            continue
        for flag, decision in settings.decisions.items():
            flags.setdefault(flag, NormFlag(None)).by_engine[name] = Decision(*decision)
    return flags
