"""Analysis: measurement and its statistics, shared by doctor, the notebooks and the CLI. Verdicts (the words an
interval allows), hypotheses and wiring scoring (``diagnosis``, ``wiring_search``, ``switches``), the cost model
and its timing on this device, the served-target roofline, the benchmark harness (both speed definitions), the
tracks, tensor diffs and the package's plots.

May import ``eagle3lab.decoding``, ``eagle3lab.models``, ``eagle3lab.engines`` and the foundation; never
``doctor``, ``readings``, ``app`` or ``train``.
"""
