"""Models on torch: the target (loading, hook points, ``resid[k]`` capture, hidden-state dumps) and the
EAGLE-3 draft head (its math, its checkpoint formats, its vocabulary map).

May import the engine layer (``eagle3lab.engines``) and the foundation; never ``decoding``,
``analysis``, ``app`` or ``train``.
"""
