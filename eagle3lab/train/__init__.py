"""Training code for the bundled models: corpus -> tokenizer -> target -> draft vocab -> drafts.

Everything in ``data/`` is rebuilt by ``python -m eagle3lab.train.build_data --out data``
(``make data``); each step is a module that also works alone from a notebook. It sits beside the face
(``app``) at the top: it may import ``analysis``, ``decoding``, ``models``, ``engines`` and the
foundation, never ``app``, and nothing in the package imports it.
"""
