"""Served targets we cannot run here: a roofline of their forwards (weight reads, flops, a fixed
overhead) and the stated assumptions a round pays on them (``SERVED``). Every number is an assumption
to state, not a measurement."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from eagle3lab.analysis.cost_model import explain
from eagle3lab.analysis.verdicts import projected_word, speed_word
from eagle3lab.engines.acceptance import Interval

NO_INTERVAL = "not measured with an interval"     # a bare speedup: one median, nothing to tell noise from a change


@dataclass(frozen=True)
class Roofline:
    """A forward pass bounded by weight reads or by flops, plus a fixed per-forward overhead.

    For an MoE target, the routed experts a forward must read grow with the number of tokens it
    processes (uniform routing: E * (1 - (1 - k/E)^tokens) distinct experts per layer), so verifying
    M tokens per sequence reads more weights than decoding one: v(M) rises even at batch size 1.
    Every number is an assumption to state, not a measurement; ``verify_curve`` is what to compare
    with ``CostModel.verify_frame`` measured on a real machine.
    """

    name: str
    dense_params: float          # weights every forward reads (attention, shared experts, embeddings, head)
    expert_params: float         # one routed expert, summed over the MoE layers (0 for a dense model)
    num_experts: int = 0
    experts_per_token: int = 0
    bytes_per_param: float = 2.0
    active_params: float = 0.0   # per token, for flops (2 * active per token)
    mem_bw: float = 3.35e12      # bytes/s, all GPUs together
    flops: float = 7.0e14        # achievable flop/s, all GPUs together
    overhead_s: float = 0.0      # launches, scheduling, communication per forward
    assumptions: str = ""

    def touched_experts(self, tokens: int) -> float:
        if not self.num_experts:
            return 0.0
        return self.num_experts * (1 - (1 - self.experts_per_token / self.num_experts) ** tokens)

    def forward_s(self, tokens: int) -> float:
        weights = (self.dense_params + self.touched_experts(tokens) * self.expert_params) * self.bytes_per_param
        return max(weights / self.mem_bw, 2 * self.active_params * tokens / self.flops) + self.overhead_s

    def verify_curve(self, sizes=(1, 2, 4, 8, 16), batch: int = 1) -> pd.DataFrame:
        """v(M) for ``batch`` sequences each verifying M tokens, in units of their one-token step."""
        base = self.forward_s(batch)
        return pd.DataFrame({"tokens": list(sizes),
                             "target_steps": [self.forward_s(batch * m) / base for m in sizes]}).set_index("tokens")


# Illustrative shapes (public model cards); bandwidth and flops are round hardware numbers, and the
# fixed overhead is calibrated so that plain decoding matches a published single-stream rate.
ROOFLINE_EXAMPLES = {
    "llama-3.1-8b bf16, 1 GPU (H100-class)": Roofline(
        name="llama-3.1-8b", dense_params=8.03e9, expert_params=0.0, bytes_per_param=2, active_params=8.03e9,
        mem_bw=3.35e12, flops=7.0e14, overhead_s=1.54e-3,
        assumptions="dense 8B, bf16, 3.35 TB/s, 700 TFLOP/s achievable; 1.54 ms fixed per forward so that "
                    "plain decoding gives the 158 tok/s of SGLang's docs (facts section 7)"),
    "kimi-k2 fp8, 8 GPUs (H200-class)": Roofline(
        name="kimi-k2", dense_params=11e9, expert_params=2.64e9, num_experts=384, experts_per_token=8,
        bytes_per_param=1, active_params=32e9, mem_bw=8 * 4.8e12, flops=8 * 1.4e15, overhead_s=10.3e-3,
        assumptions="61 layers (60 MoE), 384 experts of 3*7168*2048 weights, 8 routed per token, ~11B "
                    "always-read weights, fp8, 8 x 4.8 TB/s; 10.3 ms fixed per forward so that plain decoding "
                    "gives the seed's 90 tok/s"),
}


# What a round costs on a served target beyond its forwards (stated assumptions, not measurements):
# c: a one-layer draft against a 61-layer target, launches included; overhead: the CPU work a plain
# decoding step hides behind the GPU with the overlap scheduler, paid in every speculative round when
# EAGLE runs without it (SGLang <= 0.5.10.post1; from 0.5.11, PR #21062, a chain keeps it on unless
# SGLANG_ENABLE_SPEC_V2=0 or --disable-overlap-schedule: pass overhead=0 there; `eagle3lab flags`
# places a build); batch: SGLang's EAGLE default max_running_requests (48).
SERVED = {"roofline": "kimi-k2 fp8, 8 GPUs (H200-class)", "c": 0.1, "overhead": 0.2, "batch": 48}


def price_on_served(cases: dict[str, dict], roofline: str | Roofline = SERVED["roofline"], c: float = SERVED["c"],
                    overhead: float = SERVED["overhead"], batches=(1, SERVED["batch"])) -> pd.DataFrame:
    """The same acceptance on a served target: ``{name: {tau, num_steps, num_draft_tokens}}`` -> ``explain`` table.

    One row per case and batch size (``"name | served, batch b"``); v(M) comes from the roofline's
    verify curve at that batch (M = ``num_draft_tokens`` per sequence, a tree's width included), c and
    the per-round engine overhead are the stated assumptions; a tree's draft levels are priced as
    chain steps.
    """
    roof = ROOFLINE_EXAMPLES[roofline] if isinstance(roofline, str) else roofline
    rows = []
    for name, case in cases.items():
        for b in batches:
            v = float(roof.verify_curve((case["num_draft_tokens"],), batch=b)["target_steps"].iloc[0])
            rows.append({"name": f"{name} | served, batch {b}", "tau": case["tau"], "c": c,
                         "num_steps": case["num_steps"], "v": v, "overhead": overhead})
    return explain(rows)


def _measured(x) -> Interval | None:
    """A measured speedup with its interval: an ``Interval`` (or anything with ``value`` / ``low`` / ``high``), a
    mapping with those keys, or ``(value, low, high)``; None for a bare number (no interval to word it from)."""
    if isinstance(x, Mapping):
        return Interval(float(x["value"]), float(x["low"]), float(x["high"]), x.get("level"), x.get("units"))
    if all(hasattr(x, k) for k in ("value", "low", "high")):
        return Interval(float(x.value), float(x.low), float(x.high), getattr(x, "level", None), getattr(x, "units", None))
    if isinstance(x, (tuple, list)) and len(x) == 3:
        return Interval(*(float(v) for v in x), None, None)
    return None


@dataclass(frozen=True)
class CostSeries:
    """One marker series of ``plots.plot_here_and_served``: the column of round costs (break-even tau), its legend
    label, and whether it was measured (filled, its interval in the ``low`` / ``high`` columns) or projected
    (hollow). The producer of a table names its series, so the plot reads no column name for meaning."""

    column: str
    label: str
    measured: bool = False
    low: str | None = None
    high: str | None = None


@dataclass(frozen=True)
class ServedSetting:
    """One served setting ``here_and_served`` prices: its batch, the per-round overhead it pays, its name (for
    display only) and the stable columns of ``here_and_served``'s table that hold its numbers."""

    batch: int
    overhead: float
    name: str                 # "batch 48, overlap on"
    break_even: str
    speedup: str
    verdict: str

    @property
    def label(self) -> str:
        return f"served, {self.name}"


def _served(key: str, batch: int, overhead: float, name: str) -> ServedSetting:
    return ServedSetting(batch, overhead, name, f"break_even_{key}", f"projected_speedup_{key}", f"verdict_{key}")


def served_settings(batch: int = SERVED["batch"], overhead: float = SERVED["overhead"]) -> tuple[ServedSetting, ...]:
    """The served settings ``here_and_served`` prices: batch 1, ``batch``, and ``batch`` with the overlap scheduler
    on (per-round overhead 0)."""
    return (_served("served_1", 1, overhead, "batch 1"), _served("served_batch", batch, overhead, f"batch {batch}"),
            _served("served_overlap", batch, 0.0, f"batch {batch}, overlap on"))


# here_and_served's columns about this machine -> their display labels (the served ones: here_and_served_labels)
HERE_LABELS = {"break_even_here": "break-even here", "measured_here": "measured here",
               "measured_here_low": "measured here low", "measured_here_high": "measured here high",
               "verdict_here": "verdict here"}


def here_and_served_labels(batch: int = SERVED["batch"]) -> dict[str, str]:
    """``here_and_served``'s stable column names -> display labels: ``table.rename(columns=...)`` to show it."""
    return HERE_LABELS | {col: f"{what} {s.label}" for s in served_settings(batch)
                          for col, what in ((s.break_even, "break-even"), (s.speedup, "projected speedup"),
                                            (s.verdict, "verdict"))}


def here_and_served_series(batch: int = SERVED["batch"]) -> list[CostSeries]:
    """The series of ``here_and_served``'s table: here and each served setting, all projected."""
    return [CostSeries("break_even_here", "here (projected)")] + [
        CostSeries(s.break_even, f"{s.label} (projected)") for s in served_settings(batch)]


def here_and_served(cases: dict[str, dict], c: float = SERVED["c"], overhead: float = SERVED["overhead"],
                    batch: int = SERVED["batch"]) -> pd.DataFrame:
    """Each case's verdict here (from its measured speedup and its interval) and its projection on the served
    target, side by side.

    ``cases``: name -> ``tau``, ``num_steps``, ``num_draft_tokens``, ``break_even_here`` and ``measured_here``,
    the speedup measured on this machine over plain decoding, with its paired interval
    (``DecodeSweep.speed_ratio``: an ``Interval``, a ``{value, low, high}`` mapping or ``(value, low, high)``);
    optionally ``tau_low`` / ``tau_high``, tau's interval. ``verdict_here`` is ``verdicts.speed_word`` of that
    interval (faster / slower / within noise); a bare float is kept but worded "not measured with an interval".
    The served columns (named by each of ``served_settings(batch, overhead)``: ``break_even``, ``speedup``,
    ``verdict``) price the same tau at batch 1 and at ``batch``, and at ``batch`` with the overlap scheduler on
    (per-round overhead 0): a break-even from stated assumptions (no interval of its own), the projected speedup
    tau / break-even, and the word of tau's interval against it ("projected faster" / "projected slower" /
    "projected within noise"; "projected, no tau interval" without one). Columns are stable names; to show the
    table, ``.rename(columns=here_and_served_labels(batch))``.
    """
    # one batch per table, so one row per case in ``cases``' order: read by position, never by row label
    served = {s: price_on_served(cases, c=c, overhead=s.overhead, batches=(s.batch,))["break_even_tau"].tolist()
              for s in served_settings(batch, overhead)}
    rows = []
    for i, (name, case) in enumerate(cases.items()):
        here = _measured(case["measured_here"])
        tau = (Interval(case["tau"], case["tau_low"], case["tau_high"], None, None)
               if case.get("tau_low") is not None and case.get("tau_high") is not None else None)
        row = {"case": name, "tau": case["tau"]}
        if tau is not None:
            row |= {"tau_low": tau.low, "tau_high": tau.high}
        row |= {"break_even_here": case["break_even_here"],
                "measured_here": float(case["measured_here"]) if here is None else here.value,
                "measured_here_low": float("nan") if here is None else here.low,
                "measured_here_high": float("nan") if here is None else here.high,
                "verdict_here": NO_INTERVAL if here is None else speed_word(here)}
        for s, costs in served.items():
            be = float(costs[i])
            row[s.break_even] = be
            row[s.speedup] = case["tau"] / be
            # a projection from stated assumptions: tau's interval against it, never a point
            row[s.verdict] = "projected, no tau interval" if tau is None else projected_word(tau, be)
        rows.append(row)
    return pd.DataFrame(rows).set_index("case")
