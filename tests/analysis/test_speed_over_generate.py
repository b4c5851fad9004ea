"""decode_sweep keeps generate's own (tokens, seconds) per (repetition, prompt), so a case's speed over generate
carries a paired interval (``DecodeSweep.speed_ratio(case, GENERATE, kind="e2e")``), as notebooks 05 and 07 state it."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from eagle3lab.analysis import benchmark
from eagle3lab.analysis.benchmark import GENERATE, decode_sweep
from eagle3lab.analysis.verdicts import speed_word
from eagle3lab.errors import Eagle3LabError


def _result(prefill_s, decode_s, n=5):
    return SimpleNamespace(tokens=list(range(n)), prompt_ids=[0, 0], prefill_s=prefill_s, decode_s=decode_s,
                           rounds=[], settings={"num_steps": 1, "temperature": 0.0})


def test_a_cases_speed_over_generate_is_a_paired_ratio_over_prompts(monkeypatch):
    """generate takes 4 s, 2 s, 2 s on three prompts (after a warm-up call), the case 1 s each: the pooled ratio is
    8 / 3 and a resample of the prompts moves it (a width), always above 1x (faster)."""
    times = iter([2.0, 4.0, 2.0, 2.0])       # the warm-up, then one per prompt
    monkeypatch.setattr(benchmark, "as_target", lambda t: t)
    # the sweep's lossless check reads the target's dtype (the outputs here are identical: no forward is run)
    monkeypatch.setattr("eagle3lab.decoding.lossless.as_target", lambda t: SimpleNamespace(dtype=torch.float32))
    monkeypatch.setattr(benchmark, "hf_generate", lambda t, p, n: _result(0.0, next(times, 2.0)))
    monkeypatch.setattr(benchmark, "speculative_generate", lambda t, prompt, **kw: _result(0.5, 0.5))
    sw = decode_sweep(object(), {"spec": {}}, [[1, 2]] * 3, max_new_tokens=5, baseline=False, progress=False)
    assert sw.timed["e2e"][GENERATE] == [(5, 4.0), (5, 2.0), (5, 2.0)]     # the warm-up is not a unit
    assert GENERATE not in sw.timed["decode"]       # generate is timed whole: no decode-only rate
    r = sw.speed_ratio("spec", GENERATE, kind="e2e")
    assert r.value == pytest.approx(8 / 3)
    assert r.units == 3 and r.low < r.high and r.low > 1 and speed_word(r) == "faster"
    with pytest.raises(Eagle3LabError):
        sw.speed_ratio("spec", GENERATE, kind="decode")
