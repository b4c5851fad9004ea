"""Running drafts: real speculative decoding (chain and tree, lossless against the target's greedy
decoding; ``lossless`` tells a bf16 tie flip from a bug where outputs differ), SGLang's tree growth, and the
teacher-forced offline evaluator.

May import ``eagle3lab.models``, ``eagle3lab.engines`` and the foundation; never ``analysis``,
``app`` or ``train``.
"""
