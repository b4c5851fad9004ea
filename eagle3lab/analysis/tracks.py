"""What changes from a toy target to a real one: the same compact measurement on each track, side by side.

A track (``eagle3lab.bundled.TRACKS``) is a target with a healthy draft trained for it. One measurement
per track, in one run: real lossless decoding beside ``transformers`` ``generate`` (tau with a bootstrap
interval over prompts, conditional acceptance per position, the end-to-end speed ratio) for two chains
and SGLang's Llama tree; the cost ratio c on this device; and how interchangeable adjacent layers are,
from ``search_wiring`` on the target's own greedy outputs (per slot: points within noise of the best,
tau lost one layer away and at the worst point). Only ratios and acceptance carry over between
machines; the absolute rates are this machine's.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from eagle3lab.analysis.benchmark import GENERATE, DecodeSweep, decode_sweep
from eagle3lab.analysis.timing import measure_costs
from eagle3lab.analysis.verdicts import interval_text, rate_text, speed_word
from eagle3lab.analysis.wiring_search import WiringSearch, search_wiring
from eagle3lab.models.state_bank import capture_bank

TRACK_CASES = {"chain 2": dict(num_steps=2), "chain 4": dict(num_steps=4),
               "tree 5/4/8": dict(num_steps=5, topk=4, num_draft_tokens=8)}   # SGLang's Llama tree


@dataclass
class TrackMeasure:
    """One track's measurement (:func:`measure_track`)."""

    layers: int
    hidden: int
    device: str
    sweep: DecodeSweep
    c: float                 # one draft step over one target step, this device
    search: WiringSearch

    @property
    def cases(self) -> list[str]:
        return list(self.sweep.results)

    def vs_generate_interval(self, name: str):
        """End-to-end tokens/s of a case over ``generate(do_sample=False)``, timed in the same rounds, with its paired
        bootstrap interval over prompts, every repetition pooled (``DecodeSweep.speed_ratio``, end to end): the one
        speed over ``generate`` a track states (a ratio of per-repetition medians could lie outside it)."""
        return self.sweep.speed_ratio(name, GENERATE, kind="e2e")

    def slot_table(self) -> pd.DataFrame:
        """Per slot of the best wiring: points within noise of it, tau lost one layer away (mean of the
        neighbours that exist) and at the worst point."""
        rows = []
        for slot, r in self.search.slots.iterrows():
            names = [n for n in r.tau_by_point if n.startswith("resid")]
            if r.best in names:
                i = names.index(r.best)
                near = [r.tau_by_point[names[j]] for j in (i - 1, i + 1) if 0 <= j < len(names)]
                next_layer = r.tau_best - sum(near) / len(near)
            else:   # the final post-norm state has no neighbouring layer
                next_layer = float("nan")
            rows.append({"slot": slot, "best": r.best, "within_noise": len(r.equivalent),
                         "tau_lost_next_layer": next_layer, "tau_lost_worst": r.tau_drop})
        columns = ["slot", "best", "within_noise", "tau_lost_next_layer", "tau_lost_worst"]
        return pd.DataFrame(rows, columns=columns).set_index("slot")   # no rows when the best feeds no aux

    def to_json(self) -> dict:
        cases = {}
        for name in self.cases:
            tau = self.sweep.tau_interval(name)
            speed = self.vs_generate_interval(name)
            cases[name] = {"tau": tau.value, "tau_low": tau.low, "tau_high": tau.high,
                           "conditional": list(self.sweep.stats(name).conditional),
                           "vs_generate": {"value": speed.value, "low": speed.low, "high": speed.high,
                                           "level": speed.level, "units": speed.units, "word": speed_word(speed)},
                           "identical": self.sweep.identical(name), "prompts": len(self.sweep.results[name])}
        return {"layers": self.layers, "hidden": self.hidden, "device": self.device, "c": self.c,
                "generate_tps": self.sweep.generate_tps, "cases": cases,
                "search": {"summary": self.search.summary(), "identifiable": self.search.identifiable,
                           "slots": self.slot_table().reset_index().to_dict("records")}}


def measure_track(target, draft, prompts, *, max_new_tokens: int = 24, repeats: int = 1, cases=None,
                  search_steps: int = 3, cost_repeats: int = 3, progress: bool = False) -> TrackMeasure:
    """Measure one track (a loaded target and its draft) on ``prompts``; ``cases`` default
    :data:`TRACK_CASES`. Speed is compared with ``generate`` only, so the sweep runs without the plain
    greedy loop. The wiring search reads the states of the prompts and the target's own greedy
    continuations decoded here, so no second generation is needed."""
    cases = TRACK_CASES if cases is None else cases
    sweep = decode_sweep(target, {name: dict(draft=draft, **kw) for name, kw in cases.items()}, prompts,
                         max_new_tokens=max_new_tokens, repeats=repeats, baseline=False, progress=progress)
    chain = min(max(1, kw.get("num_steps", 1)) for kw in cases.values())
    c = measure_costs(target, draft, context_len=sweep.context_len, verify_sizes=(1, 2), repeats=cost_repeats,
                      settings=((chain, 1, None),)).c
    first = next(iter(sweep.results.values()))
    seqs = [out.prompt_ids + ref for out, ref in zip(first, sweep.reference)]
    prompt_lens = [len(out.prompt_ids) for out in first]
    found = search_wiring(capture_bank(target, seqs, prompt_lens), draft, num_steps=search_steps, progress=progress)
    return TrackMeasure(layers=target.num_layers, hidden=target.hidden_size, device=str(target.device),
                        sweep=sweep, c=c, search=found)


def side_by_side(measures: dict[str, TrackMeasure]) -> pd.DataFrame:
    """One column per track: geometry, c, per case tau [interval], c_k and speed over ``generate``, and
    per slot the layer interchangeability."""
    columns = {}
    for track, m in measures.items():
        col = {"target": f"{m.layers} layers, hidden {m.hidden}", "cost ratio c": f"{m.c:.3f}"}
        for name in m.cases:
            tau = m.sweep.tau_interval(name)
            col[f"{name}: tau [95%]"] = interval_text(tau)
            st = m.sweep.stats(name)      # a c_k of 1.00 / 0.00 with its count: few rounds reach deep
            col[f"{name}: c_k"] = ", ".join(rate_text(*x) for x in zip(st.conditional, st.accepted_per_pos, st.reached_per_pos))
            r = m.vs_generate_interval(name)
            col[f"{name}: vs generate [95%]"] = f"{interval_text(r, unit='x')}, {speed_word(r)}"
        for slot, s in m.slot_table().iterrows():
            col[f"slot {slot}: points within noise"] = f"{s.within_noise} of {m.layers + 2}"
            col[f"slot {slot}: tau lost one layer away / at worst"] = f"{s.tau_lost_next_layer:.2f} / {s.tau_lost_worst:.2f}"
        columns[track] = col
    return pd.DataFrame(columns)
