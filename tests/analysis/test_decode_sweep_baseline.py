"""decode_sweep without the plain greedy loop (baseline=False, notebook 07): the same cases, outputs and
lossless reference, only the "no speculation" rates and the speedups over them left out."""

from __future__ import annotations

import math

from helpers.tiny_models import one_thread, prompts, tiny_pair

from eagle3lab.analysis.benchmark import decode_sweep


def test_a_sweep_without_the_greedy_loop_keeps_every_case_and_the_reference():
    target, draft = tiny_pair()
    cases = {"chain 2": dict(draft=draft, num_steps=2), "chain 3": dict(draft=draft, num_steps=3)}
    with one_thread():
        full = decode_sweep(target, cases, prompts(n=2), max_new_tokens=10, progress=False)
        bare = decode_sweep(target, cases, prompts(n=2), max_new_tokens=10, baseline=False, progress=False)
    assert "no speculation" in full.e2e_tps and set(bare.e2e_tps) == set(bare.decode_tps) == set(cases)
    assert bare.reference == full.reference and bare.identical("chain 3") == 2
    for name in cases:
        assert [o.tokens for o in bare.results[name]] == [o.tokens for o in full.results[name]]
        assert bare.stats(name).tau == full.stats(name).tau and bare.e2e_tps[name] > 0
        assert math.isnan(bare.e2e_speedup(name)) and not math.isnan(full.e2e_speedup(name))
    assert bare.table().tau.to_dict() == full.table().tau.to_dict() and bare.table().e2e_speedup.isna().all()
    assert bare.generate_tps > 0
