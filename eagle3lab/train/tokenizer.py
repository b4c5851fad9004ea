"""A byte-level BPE tokenizer trained on the corpus with the ``tokenizers`` library.

Byte-level (GPT-2 style) so any text round-trips; one special token ``<|endoftext|>`` serves as
BOS, EOS and PAD. Saved as a ``PreTrainedTokenizerFast`` so ``AutoTokenizer`` loads it.
"""

from __future__ import annotations

import os
from pathlib import Path

from eagle3lab.train.corpus import Doc

EOT = "<|endoftext|>"


def train_tokenizer(docs: list[Doc], vocab_size: int = 4096, min_frequency: int = 2):
    """Train on ``docs`` in the given order; returns a ``transformers.PreTrainedTokenizerFast``."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # one thread: same merges every run
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=min_frequency, special_tokens=[EOT],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator((d.text for d in docs), trainer=trainer, length=len(docs))
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=EOT, eos_token=EOT, pad_token=EOT,
                                   unk_token=None, model_max_length=1_000_000, clean_up_tokenization_spaces=False)


def save_tokenizer(tokenizer, out_dir: str | Path) -> None:
    tokenizer.save_pretrained(str(out_dir))


def load_tokenizer(path: str | Path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(path))
