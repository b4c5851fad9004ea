"""Analysis: what the runs mean. The cost model and its timing on this device, the served-target
roofline, the benchmark harness (both speed definitions), diagnosis (symptom table, wiring search), doctor in
stages (``evidence`` -> ``wiring_search`` -> ``fix_choice`` -> ``fixes`` -> ``ladder`` -> ``write_fixed``) and the
package's plots.

May import ``eagle3lab.decoding``, ``eagle3lab.models``, ``eagle3lab.engines`` and the foundation;
never ``app`` or ``train``.
"""
