"""Notebook 05's readings: acceptance and speed compared with their intervals, in words that follow from them.

Every comparison here carries an interval: tau by a paired bootstrap over prompts
(``DecodeSweep.tau_interval`` / ``tau_difference``, worded by ``verdicts.word_of``: beats / within noise /
loses), a measured speedup by a paired bootstrap over prompts (repetitions summed) (``DecodeSweep.speed_ratio``,
worded by ``verdicts.speed_word``: faster / within noise / slower). A projection (the cost model pricing timed
pieces, or a served target's stated costs) is a number without an interval and is always called projected.
Nothing is ranked inside the noise: "the fastest chains" are a set, the top measurement and the chains within noise of
it, and no member of that set is called the fastest.

Each reading (:class:`ChainReading`, :class:`TreeReading`, :class:`SpeedReading`, :class:`WhatIf`,
:class:`TrackReading`) has ``table()``, ``words()`` and ``claims()``, so that a notebook cell is one call;
:func:`acceptance_summary` writes the notebook's summary from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from eagle3lab.analysis.roofline import ROOFLINE_EXAMPLES, CostSeries, price_on_served, served_settings
from eagle3lab.analysis.verdicts import AGAINST, WORDS, projected_word, speed_word, word_of
from eagle3lab.doctor.ladder import SPEED_KINDS
from eagle3lab.engines.acceptance import Interval, tau_difference, tau_interval
from eagle3lab.engines.flags.sglang_overlap import CHANGES as _OVERLAP_CHANGES
from eagle3lab.readings.dump_mode import scored_from
from eagle3lab.readings.numbers import fmt, interval_claims, interval_record, rate, signed


def speed_context(device: str, dtype: str, engines) -> str:
    """What every speed figure states: device, dtype, batch 1, and that the engine is emulated."""
    return f"{device}, {dtype}, batch 1, emulated {' / '.join(dict.fromkeys(engines))} (eagle3lab's loop, not a server)"


def _engine(sweep, name: str) -> str:
    from eagle3lab.engines.profiles import PROFILES

    return PROFILES[sweep.settings(name)["profile"]].engine


# ------------------------------------------------------------------ section 4: tau against chain length

@dataclass
class ChainReading:
    """tau per chain length with its interval, the longest chain's survival as a prediction, and each chain's
    gain over the next shorter one (paired over prompts)."""

    names: list
    ks: list
    tau: dict                 # name -> Interval
    predicted: list
    gain: dict                # name -> Interval (tau minus the previous chain's), first chain absent
    span: Interval | None = None   # the longest chain's tau minus the shortest's, paired over the same prompts

    def table(self) -> pd.DataFrame:
        rows = []
        for name, k, p in zip(self.names, self.ks, self.predicted):
            g = self.gain.get(name)
            rows.append({"K": k, "tau": round(self.tau[name].value, 3), "tau 95%": fmt(self.tau[name]),
                         "1 + sum a_k (predicted)": round(p, 3), "gain over the previous K": "" if g is None else signed(g),
                         "verdict": "" if g is None else word_of(g)})
        return pd.DataFrame(rows).set_index("K")

    def plot_table(self) -> pd.DataFrame:
        """For ``plots.plot_tau_vs_chain``."""
        return pd.DataFrame({"tau": [self.tau[n].value for n in self.names], "tau_low": [self.tau[n].low for n in self.names],
                             "tau_high": [self.tau[n].high for n in self.names], "predicted": self.predicted},
                            index=pd.Index(self.ks, name="K"))

    def words(self) -> str:
        """From the paired intervals: whether tau rises, falls or stays within noise from the shortest chain to the
        longest (teacher-forced chains of different K score slightly different anchors, so it can fall), and which
        position added beats, is within noise of or loses to the chain before it."""
        first, last = self.names[0], self.names[-1]
        by = {w: [n for n in self.names[1:] if word_of(self.gain[n]) == w] for w in WORDS}
        if self.span is None:
            move = f"tau goes from {fmt(self.tau[first])} ({first}) to {fmt(self.tau[last])} ({last})"
        else:
            verb = {"beats": "rises", "loses": "falls", "within noise": "stays within noise",
                    "identical": "stays identical"}[word_of(self.span)]
            move = (f"tau {verb} from {fmt(self.tau[first])} ({first}) to {fmt(self.tau[last])} ({last}), "
                    f"{signed(self.span)} paired over the same prompts")
        return (f"{move}; one position more beats the chain before it for {', '.join(by['beats']) or 'none'}, is "
                f"within noise of it for {', '.join(by['within noise']) or 'none'} and loses to it for "
                f"{', '.join(by['loses']) or 'none'}"
                + (f" and is identical to it for {', '.join(by['identical'])}" if by["identical"] else "") + ".")

    def claims(self) -> dict:
        return {"chain_ks": list(self.ks), "chain_taus": [self.tau[n].value for n in self.names],
                "chain_predicted": list(self.predicted),
                "chain_tau": {n: interval_claims(self.tau[n]) for n in self.names},
                "chain_gain": {n: {**interval_claims(g), "word": word_of(g)} for n, g in self.gain.items()},
                **({} if self.span is None else {"chain_span": {**interval_record(self.span), "word": word_of(self.span)}})}


def read_chains(sweep, names) -> ChainReading:
    ks = [sweep.settings(n)["num_steps"] for n in names]
    longest = sweep.stats(names[-1])
    predicted = [1 + sum(longest.survival[:k]) for k in ks]
    tau = {n: sweep.tau_interval(n) for n in names}
    gain = {b: sweep.tau_difference(b, a) for a, b in zip(names, names[1:])}
    span = sweep.tau_difference(names[-1], names[0]) if len(names) > 1 else None
    return ChainReading(list(names), ks, tau, predicted, gain, span)


# ------------------------------------------------------------------ section 5: chain or tree

def _depth(round_log) -> int:
    """The deepest drafted node of one round (a chain: its length; a tree: from each node's parent)."""
    if not round_log.parents:
        return len(round_log.drafted)
    depth = []
    for p in round_log.parents:
        depth.append(1 if p < 0 else depth[p] + 1)
    return max(depth, default=0)


@dataclass
class TreeReading:
    """Each tree beside the chain of the same verify width and the chain of the same depth."""

    rows: dict                # name -> dict (settings, tau, depth reached, rivals' differences)
    # the highest-tau tree against the next, paired over prompts: (highest, runner-up, difference); None with < 2
    # trees. A tree is called best only when it beats the next beyond noise.
    leader: tuple | None = None

    def highest_words(self) -> str:
        """The trees ranked only as far as their paired difference allows: "tree A (tau ...) beats tree B, the
        next (+...): the best tree" or "... is within noise of tree B (...): no tree is the best"."""
        names = self.trees()
        if not names:
            return ""
        if self.leader is None:
            return f"The one tree, {names[0]}, had tau {fmt(self.rows[names[0]]['tau'])}"
        top, runner, d = self.leader
        word = word_of(d)
        return (f"Of the trees, {top} had the highest tau, {fmt(self.rows[top]['tau'])}, and {_AGAINST[word]} {runner}, "
                f"the next ({signed(d)}): " + ("the best tree" if word == "beats" else "no tree is the best")
                + f"; {top}")

    def leader_claims(self) -> dict | None:
        if self.leader is None:
            return None
        top, runner, d = self.leader
        return {"highest": top, "next": runner, **interval_claims(d), "word": word_of(d), "best": word_of(d) == "beats"}

    def table(self) -> pd.DataFrame:
        out = []
        for name, r in self.rows.items():
            out.append({"setting": name, "verified": r["verified"], "depth (steps)": r["depth"], "tau 95%": fmt(r["tau"]),
                        "rounds reaching full depth": f"{r['full_depth']}/{r['rounds']}",
                        "most accepted in a round": r["most_accepted"],
                        **{f"minus the chain as {what}": f"{r[k + '_name']}: {signed(r[k])}, {word_of(r[k])}"
                           if r.get(k) is not None else "" for k, what in (("same_width", "wide"), ("same_depth", "deep"))}})
        return pd.DataFrame(out).set_index("setting")

    def bars(self) -> pd.DataFrame:
        """For ``plots.plot_chain_vs_tree``: tau with its interval, tokens verified and topk (1: a chain) per setting."""
        return pd.DataFrame({"tau": [r["tau"].value for r in self.rows.values()],
                             "tau_low": [r["tau"].low for r in self.rows.values()],
                             "tau_high": [r["tau"].high for r in self.rows.values()],
                             "verified": [r["verified"] for r in self.rows.values()],
                             "topk": [r["topk"] for r in self.rows.values()]},
                            index=pd.Index(list(self.rows), name="setting"))

    def trees(self) -> list:
        return [n for n, r in self.rows.items() if r["topk"] > 1]

    def words(self) -> str:
        parts = []
        for name in self.trees():
            r = self.rows[name]
            rivals = [f"{_AGAINST[word_of(r[k])]} {r[k + '_name']} "
                      f"({'the same ' + what}: {signed(r[k])})"
                      for k, what in (("same_width", f"{r['verified']} tokens verified"), ("same_depth", "depth"))
                      if r.get(k) is not None]
            parts.append(f"{name} (tau {fmt(r['tau'])}) {' and '.join(rivals)}; its verified tree reached the full depth "
                         f"{r['depth']} in {r['full_depth']} of {r['rounds']} rounds (in the others its deepest path "
                         f"stopped short), and at most {r['most_accepted']} drafts were accepted in a round")
        return "; ".join(parts) + "."

    def claims(self) -> dict:
        out = {}
        for name, r in self.rows.items():
            c = {k: r[k] for k in ("verified", "depth", "topk", "full_depth", "rounds", "most_accepted")}
            c["tau"] = interval_claims(r["tau"])
            for k in ("same_width", "same_depth"):
                if r.get(k) is not None:
                    c[k] = {"name": r[k + "_name"], **interval_claims(r[k]), "word": word_of(r[k])}
            out[name] = c
        return out


def read_trees(sweep, trees, chains) -> TreeReading:
    """``trees`` and ``chains``: case names in ``sweep``; each tree against the chain verifying as many tokens
    and the chain as deep (when the sweep has them)."""
    rows = {}
    by_width = {sweep.settings(c)["num_draft_tokens"]: c for c in chains}
    by_depth = {sweep.settings(c)["num_steps"]: c for c in chains}
    for name in [*dict.fromkeys([*(by_width.get(sweep.settings(t)["num_draft_tokens"]) for t in trees),
                                 *(by_depth.get(sweep.settings(t)["num_steps"]) for t in trees)]), *trees]:
        if name is None:
            continue
        s, rounds = sweep.settings(name), [r for o in sweep.results[name] for r in o.rounds]
        r = {"verified": s["num_draft_tokens"], "depth": s["num_steps"], "topk": s["topk"], "tau": sweep.tau_interval(name),
             "rounds": len(rounds), "full_depth": sum(_depth(x) >= s["num_steps"] for x in rounds),
             "most_accepted": max(x.accepted for x in rounds)}
        if s["topk"] > 1:
            for key, rival in (("same_width", by_width.get(s["num_draft_tokens"])), ("same_depth", by_depth.get(s["num_steps"]))):
                if rival is not None:
                    r[key], r[key + "_name"] = sweep.tau_difference(name, rival), rival
        rows[name] = r
    ranked = sorted(trees, key=lambda n: rows[n]["tau"].value, reverse=True)
    leader = (ranked[0], ranked[1], sweep.tau_difference(ranked[0], ranked[1])) if len(ranked) > 1 else None
    return TreeReading(rows, leader)


# ------------------------------------------------------------------ greedy or sampled

_AGAINST = AGAINST   # the one vocabulary (verdicts.AGAINST)
# Every speed this notebook measures is a decode speed (DecodeSweep.speed_ratio, kind "decode"): tokens after the
# first over decoding time, what the cost model prices. Notebook 06 times its ladder end to end (its CaseLadder's
# speed_kind "e2e", doctor.ladder.Decoded's default): every new token over prefill plus decoding (decode_sweep's "e2e"
# unit, prefill_s + decode_s); nothing else is timed (the sweep's warm-up and the models' loading are not).
DECODE_SPEED = "decode tokens/s, the prefill not timed: what the cost model prices"
E2E_SPEED = SPEED_KINDS["e2e"]
# 06 loads the same held-out prompts (load_prompts(n=N_PROMPTS), the same N_PROMPTS and MAX_NEW_TOKENS by default:
# tests/notebooks/test_nb_05): what differs is what is timed, and that each notebook times its own run.
E2E_POINTER = (f"Notebook 06 times the same case on the same prompts {E2E_SPEED}, in timed runs of its own: timing "
               "varies from run to run, so its ratio, interval and word can differ from this decode-only one.")
# The per-round overhead is what an overlap scheduler hides: SGLang's spec V2 by default (engines.flags.sglang_overlap)
_V2 = _OVERLAP_CHANGES["spec-v2-default"]
OVERLAP_ON = f"SGLang from {_V2.first_with}, PR #{_V2.pr}, unless disabled"
OVERLAP_OFF = f"SGLang up to {_V2.last_without}"


def tau_versus(sweep, a: str, b: str) -> dict:
    """tau of ``a`` against ``b`` (paired over prompts): both intervals, the difference and its word."""
    d = sweep.tau_difference(a, b)
    return {"a": a, "b": b, "tau_a": sweep.tau_interval(a), "tau_b": sweep.tau_interval(b), "diff": d, "word": word_of(d)}


def versus_words(v: dict) -> str:
    return f"{v['a']} (tau {fmt(v['tau_a'])}) {_AGAINST[v['word']]} {v['b']} (tau {fmt(v['tau_b'])}): {signed(v['diff'])}"


def versus_claims(v: dict) -> dict:
    return {"tau_a": interval_claims(v["tau_a"]), "tau_b": interval_claims(v["tau_b"]), "diff": interval_claims(v["diff"]),
            "word": v["word"]}


# ------------------------------------------------------------------ sections 7-8: measured and projected speed

@dataclass
class SpeedRow:
    """One setting: tau, the measured speedup over no speculation (interval over prompts, repetitions summed),
    and the cost model's projection (no interval: it prices pieces timed apart from the sweep)."""

    name: str
    tau: Interval
    speed: Interval
    projected: float
    round_cost: float          # projected: the timed pieces, in target steps (= the projection's break-even tau)
    draft_phase: float
    v_verify: float
    verified: int
    num_steps: int
    engine: str

    @property
    def word(self) -> str:
        return speed_word(self.speed)

    @property
    def paid_cost(self) -> Interval:
        """The round cost the measured speed implies (tau / speedup, at the measured tau), in target steps."""
        t = self.tau.value
        return Interval(t / self.speed.value, t / self.speed.high, t / self.speed.low, self.speed.level, self.speed.units)

    @property
    def error(self) -> float:
        """Projection error, as measured: projected / measured - 1."""
        return self.projected / self.speed.value - 1

    @property
    def projection_inside(self) -> bool:
        return self.projected in self.speed

    def claims(self) -> dict:
        return {"tau": interval_claims(self.tau), "speed": interval_claims(self.speed), "word": self.word,
                "projected": self.projected, "round_cost": self.round_cost, "paid_cost": interval_claims(self.paid_cost),
                "error_pct": 100 * self.error, "projection_inside": self.projection_inside,
                "draft_phase": self.draft_phase, "v_verify": self.v_verify, "verified": self.verified}


@dataclass
class SpeedReading:
    """Every setting's measured speedup beside its projection, and which of the two to trust."""

    rows: dict                 # name -> SpeedRow
    v2: float                  # the measured verify cost of 2 tokens, in target steps
    c: float
    device: str
    dtype: str
    units: int
    repeats: int
    kind: str = "decode"
    fastest_of: dict = field(default_factory=dict)   # set name -> (fastest, {name: ratio to the fastest})
    sweep: object = field(default=None, repr=False)  # the DecodeSweep the ratios are drawn from
    proj: pd.DataFrame | None = field(default=None, repr=False)   # DecodeSweep.projection of the same costs

    def projection(self) -> pd.DataFrame:
        """``DecodeSweep.projection``, its measured column the paired estimate of this reading (and its interval)."""
        out = self.proj.copy()
        out["measured_speedup"] = [self.rows[n].speed.value for n in out.index]
        out["measured_low"] = [self.rows[n].speed.low for n in out.index]
        out["measured_high"] = [self.rows[n].speed.high for n in out.index]
        out["error_%"] = 100 * (out.projected_speedup / out.measured_speedup - 1)
        return out

    def __getitem__(self, name: str) -> SpeedRow:
        return self.rows[name]

    def context(self, names=None) -> str:
        return speed_context(self.device, self.dtype, [self.rows[n].engine for n in (names or self.rows)])

    def table(self, names=None) -> pd.DataFrame:
        out = []
        for n in names or self.rows:
            r = self.rows[n]
            out.append({"setting": n, "tau 95%": fmt(r.tau), "verified": r.verified,
                        "round cost, projected (target steps)": round(r.round_cost, 3),
                        "round cost paid, measured": fmt(r.paid_cost), "projected speedup": round(r.projected, 3),
                        "measured speedup 95%": fmt(r.speed, unit="x"), "measured verdict": r.word,
                        "projection error": f"{100 * r.error:+.0f}%",
                        "projection inside the measured interval": r.projection_inside})
        return pd.DataFrame(out).set_index("setting")

    def plot_table(self, names=None) -> pd.DataFrame:
        """For ``plots.plot_speed_vs_chain``, ``plot_round_costs`` and ``plot_break_even``: one row per setting."""
        out = {}
        for n in names or self.rows:
            r, paid = self.rows[n], self.rows[n].paid_cost
            out[n] = {"num_steps": r.num_steps, "tau": r.tau.value, "tau_low": r.tau.low, "tau_high": r.tau.high,
                      "measured": r.speed.value, "measured_low": r.speed.low, "measured_high": r.speed.high,
                      "word": r.word, "projected": r.projected, "break_even_tau": r.round_cost,
                      "draft_phase": r.draft_phase, "v_verify": r.v_verify, "paid_cost": paid.value,
                      "paid_low": paid.low, "paid_high": paid.high}
        return pd.DataFrame.from_dict(out, orient="index")

    def find_fastest(self, names, label: str) -> tuple:
        """The fastest measured of ``names`` and every other one's paired ratio to it; kept under ``label``."""
        fastest = max(names, key=lambda n: self.rows[n].speed.value)
        self.fastest_of[label] = (fastest, {n: self.sweep.speed_ratio(n, fastest, kind=self.kind)
                                            for n in names if n != fastest})
        return self.fastest_of[label]

    def near_fastest(self, label: str) -> list:
        """The fastest set: the top measurement first, then every setting within noise of it (its ratio interval
        holds 1x)."""
        fastest, ratios = self.fastest_of[label]
        return [fastest, *(n for n, r in ratios.items() if speed_word(r) == "within noise")]

    def fastest_set_words(self, label: str, detail: bool = False) -> str:
        """The fastest set named (``verdicts.speed_word``'s vocabulary): the top measurement alone when no other is
        within noise of it, else the set, its top measurement named as that and never as "the fastest" (nothing
        inside the noise is ranked). ``detail``: the speed's reference and the rule for "within noise" spelled out."""
        top = self.fastest_of[label][0]
        near = self.near_fastest(label)[1:]
        kind = "decode" if self.kind == "decode" else "end to end"
        speed = fmt(self.rows[top].speed, unit="x") + (f" the {kind} speed of no speculation" if detail else "")
        if not near:
            return f"The fastest {label} measured ({kind}) is {top} ({speed}), no other {label} within noise of it"
        rule = " (their paired ratio to it holds 1x)" if detail else ""
        return (f"The fastest {label}s measured ({kind}) are a set, not one {label}: {top} (the top measurement, {speed})"
                f" and, within noise of it{rule}, {', '.join(near)}")

    def fastest_words(self, label: str) -> str:
        ratios = self.fastest_of[label][1]
        slower = [n for n, r in ratios.items() if speed_word(r) == "slower"]
        ranked = " Nothing inside that set is ranked." if self.near_fastest(label)[1:] else ""
        return (f"{self.fastest_set_words(label, detail=True)}; slower than "
                f"{'the top measurement' if ranked else 'it'}: {', '.join(slower) or 'none'}.{ranked}")

    def trust_words(self) -> str:
        """Which number to trust, from the numbers: the measured speedups; the projection's error as measured."""
        errs = [100 * r.error for r in self.rows.values()]
        inside = sum(r.projection_inside for r in self.rows.values())
        text = (f"Trust the measured speedups: each is timed side by side with plain decoding, with a 95% interval over "
                f"{self.units} prompts (each one's repetitions summed). The projections price pieces timed apart, in another window: "
                f"measured against the speedups their error runs from {min(errs):+.0f}% to {max(errs):+.0f}% (median "
                f"{sorted(errs)[len(errs) // 2]:+.0f}%), and {inside} of {len(errs)} lie inside the measured interval. "
                f"Here v(2) = {self.v2:.3f}: ")
        if self.v2 < 1:
            text += ("a 2-token verify timed cheaper than the 1-token step it is divided by, which one forward over more "
                     "tokens cannot be: the machine's load changed between the cost timings, and every projection "
                     "inherits it. Read the projection for its shape (which pieces a round pays), not for its numbers.")
        else:
            text += ("a 2-token verify costs more than a plain step, as it must; the projection is a model of the pieces, "
                     "so read it for why a setting is fast or slow and the measured speedup for how fast it is.")
        return text

    def claims(self) -> dict:
        out = {"speed": {n: r.claims() for n, r in self.rows.items()}, "v2": self.v2, "c": self.c,
               "units": self.units, "repeats": self.repeats, "device": self.device, "dtype": self.dtype,
               "error_pct_min": min(100 * r.error for r in self.rows.values()),
               "error_pct_max": max(100 * r.error for r in self.rows.values())}
        for label, (fastest, ratios) in self.fastest_of.items():
            out[f"fastest_{label}"] = {"fastest": fastest, "near": self.near_fastest(label),
                                       "ratios": {n: {**interval_claims(r), "word": speed_word(r)} for n, r in ratios.items()}}
        return out


def read_speeds(sweep, costs, *, device: str, dtype: str, repeats: int, names=None, kind: str = "decode",
                level: float = 0.95) -> SpeedReading:
    """Every case of ``sweep`` (or ``names``): measured speedup (``speed_ratio``) beside the projection of
    ``sweep.projection(costs)``."""
    proj = sweep.projection(costs, names=names)
    rows = {}
    for name, p in proj.iterrows():
        rows[name] = SpeedRow(name, sweep.tau_interval(name, level), sweep.speed_ratio(name, kind=kind, level=level),
                              float(p.projected_speedup), float(p.round_cost), float(p.draft_phase), float(p.v_verify),
                              int(p.verified), int(p.num_steps), _engine(sweep, name))
    units = next(iter(rows.values())).speed.units
    return SpeedReading(rows, costs.v(2), costs.c, device, dtype, units, repeats, kind, sweep=sweep, proj=proj)


def break_even_words(reading: SpeedReading, names) -> str:
    """Section 8's break-even rule, per setting, from its numbers: it pays exactly when tau exceeds the round
    cost it really pays (tau / measured speedup); the projected cost is that cost as the timed pieces price it."""
    parts = []
    for n in names:
        r = reading[n]
        paid, above = r.paid_cost, "above" if r.paid_cost.low > r.tau.value else "below" if r.paid_cost.high < r.tau.value else "within noise of"
        part = (f"{n}: tau {r.tau.value:.2f}, measured decode {fmt(r.speed, unit='x')} ({r.word}), so a round really cost "
                f"{fmt(paid)} target steps, {above} its tau")
        priced = "above" if r.round_cost > r.tau.value else "below"
        inside = "inside" if paid.low <= r.round_cost <= paid.high else "outside"
        part += f"; the timed pieces priced it at {r.round_cost:.2f} ({priced} tau, {inside} the measured interval)"
        # a side is read from the measured interval only: within noise of tau it has none, whatever its point says
        if above == priced:
            part += ", on the same side of tau"
        elif above != "within noise of":
            part += (f", on the other side of tau: the projection ({r.projected:.2f}x) mispriced the round and the "
                     "measurement decides")
        else:
            part += ": the measurement cannot tell which side of tau the round falls"
        parts.append(part)
    return "; ".join(parts) + "."


# ------------------------------------------------------------------ section 9: one what-if, here and served

@dataclass(frozen=True)
class ServedCosts:
    """A round's projected cost on a served target, in target steps (= the break-even tau): at batch 1, at
    ``batch``, and at ``batch`` with the per-round overhead hidden by an overlap scheduler."""

    batch: int
    at_one: float
    at_batch: float
    overlapped: float

    def settings(self) -> list[tuple[str, str, float]]:
        """(field name, display label, cost) of each setting, in the order shown; the field names its column in
        ``WhatIf.plot_table``."""
        return [(key, s.label, getattr(self, key))
                for key, s in zip(("at_one", "at_batch", "overlapped"), served_settings(self.batch))]

    def labelled(self) -> dict[str, float]:
        """Display label -> cost, in the order shown (labels only for tables, words and claims' keys)."""
        return {label: cost for _, label, cost in self.settings()}


@dataclass
class WhatIf:
    """One setting's verdict here (measured, with its interval) and its projections on a served target (tau's
    interval against round costs built from stated assumptions), plus a recorded benchmark of the same
    what-if, if any, placed against this run instead of giving a second verdict."""

    name: str
    row: SpeedRow
    served: ServedCosts            # break-even (projected round cost) on the served target
    assumptions: dict
    recorded: dict | None = None
    # the round a served deployment's record implies for this chain (label, target steps): measured, not assumed
    fleet_record: tuple[str, float] | None = None

    def served_words(self) -> dict:
        return {label: projected_word(self.row.tau, be) for label, be in self.served.labelled().items()}

    def table(self) -> pd.DataFrame:
        r = self.row
        rows = [{"where": "here, measured", "round cost (target steps)": fmt(r.paid_cost),
                 "tau 95%": fmt(r.tau), "speedup": fmt(r.speed, unit="x"), "verdict": r.word}]
        priced = [(f"{label}, projected", be) for label, be in self.served.labelled().items()]
        priced += [(f"{self.fleet_record[0]}, implied", self.fleet_record[1])] if self.fleet_record else []
        for where, be in priced:       # a round cost without an interval: tau's interval against it
            rows.append({"where": where, "round cost (target steps)": f"{be:.3f}", "tau 95%": fmt(r.tau),
                         "speedup": f"{r.tau.value / be:.2f}x", "verdict": projected_word(r.tau, be)})
        return pd.DataFrame(rows).set_index("where")

    def series(self) -> list[CostSeries]:
        """The marker series of :meth:`plot_table` for ``plots.plot_here_and_served``: here measured, served
        projected."""
        return [CostSeries("paid_cost", "here, measured", True, "paid_cost_low", "paid_cost_high")] + [
            CostSeries(f"served_{key}", f"{label}, projected") for key, label, _ in self.served.settings()]

    def plot_table(self) -> pd.DataFrame:
        """For ``plots.plot_here_and_served`` (with :meth:`series`, which names its columns): one row, tau with its
        interval, the round cost paid here (= its break-even) with its interval and each served break-even."""
        r = self.row
        row = {"tau": r.tau.value, "tau_low": r.tau.low, "tau_high": r.tau.high, "paid_cost": r.paid_cost.value,
               "paid_cost_low": r.paid_cost.low, "paid_cost_high": r.paid_cost.high}
        row |= {f"served_{key}": be for key, _, be in self.served.settings()}
        return pd.DataFrame([row], index=[self.name])

    def recorded_agrees(self) -> bool | None:
        """The recorded run against this one: its interval (``run_benchmark``'s ``speed_ratio``) overlapping this
        run's (two runs on other prompts: not paired, so only disjoint intervals show a difference), or, for a
        record older than that, its median inside this run's interval; None without a record."""
        if not self.recorded:
            return None
        b, r = self.recorded, self.row
        if "speed" in b:
            return b["speed"]["low"] <= r.speed.high and r.speed.low <= b["speed"]["high"]
        return b["speedup"] in r.speed

    def recorded_words(self) -> str:
        if not self.recorded:
            return ""
        b, r = self.recorded, self.row
        agrees = self.recorded_agrees()
        if "tau_interval" in b:
            t = Interval(**{k: b["tau_interval"][k] for k in ("value", "low", "high", "level", "units")})
            overlap = t.low <= r.tau.high and r.tau.low <= t.high
            tau = f"tau {fmt(t)}, {'overlapping' if overlap else 'apart from'} this run's {fmt(r.tau)}"
        else:
            tau = f"tau {b['tau']:.2f}, {'inside' if b['tau'] in r.tau else 'outside'} this run's {fmt(r.tau)}"
        if "speed" in b:
            s = Interval(**{k: b["speed"][k] for k in ("value", "low", "high", "level", "units")})
            measured = (f"{b['repeats']} repetitions pooled) measured {fmt(s, unit='x')} (its paired interval over "
                        "its prompts), ")
            where = ("overlapping this run's interval: the two agree. " if agrees else
                     f"apart from this run's interval {fmt(r.speed, unit='x')}; the two differ by ")
            timing = "its timings ran at another time on this shared machine"
        else:
            measured = f"median of {b['repeats']}) measured {b['speedup']:.2f}x, "
            where = ("inside this run's interval: the two agree. " if agrees else
                     f"outside this run's interval {fmt(r.speed, unit='x')}; the two differ by ")
            timing = "its timings ran at another time on this shared machine, one median without an interval"
        why = [f"other prompts ({b['prompts']} x {b['tokens']} tokens: {tau})", timing]
        return (f"A recorded run of the same what-if (benchmarks/bench_decode.py, {b['prompts']} prompts x {b['tokens']} "
                f"tokens, {measured}" + (where if agrees else where + "; ".join(why) + ". ")
                + "It is context, not a second verdict: the verdict is this run's, with its interval.")

    def words(self) -> str:
        r, a = self.row, self.assumptions
        served = "; ".join(f"{label}: round {be:.2f} target steps, {projected_word(r.tau, be)}"
                           for label, be in self.served.labelled().items())
        return (f"{self.name}: tau {fmt(r.tau)}. Here a {r.num_steps}-step round paid {fmt(r.paid_cost)} target steps (tau / the measured "
                f"decode speedup {fmt(r.speed, unit='x')}): {r.word}. Priced on the served {a['roofline']} (c = {a['c']}, overhead "
                f"{a['overhead']} target steps per round; stated assumptions, projected, no interval but tau's): {served}."
                + self.record_words())

    def record_words(self) -> str:
        """The round a served record implies beside the stated costs: where their verdicts differ, the served
        verdict is the set of them (the assumptions do not decide it)."""
        if not self.fleet_record:
            return ""
        label, be = self.fleet_record
        word = projected_word(self.row.tau, be)
        said = f" {label[:1].upper() + label[1:]} implies a round of {be:.2f} target steps: {word}"
        words = set(self.served_words().values()) | {word}
        if len(words) == 1:
            return said + ", as the stated costs say."
        return (said + "; the stated costs and the record disagree, so the served verdict is a set ("
                + ", ".join(sorted(words)) + "), which only a measurement on the fleet decides.")

    def claims(self) -> dict:
        out = {"tau": interval_claims(self.row.tau), "speed": interval_claims(self.row.speed), "word": self.row.word,
               "paid_cost": interval_claims(self.row.paid_cost),
               "served": {label: {"round_cost": be, "word": projected_word(self.row.tau, be),
                                  "speedup": self.row.tau.value / be} for label, be in self.served.labelled().items()},
               "assumptions": dict(self.assumptions)}
        if self.fleet_record:
            label, be = self.fleet_record
            out["fleet_record"] = {"label": label, "round_cost": be, "word": projected_word(self.row.tau, be)}
        if self.recorded:
            out["recorded"] = {**self.recorded, "agrees": self.recorded_agrees(),
                               "inside_tau": self.recorded["tau"] in self.row.tau}
        return out


def served_round_costs(num_steps: int, verified: int, *, roofline: str, c: float, overhead: float,
                       batch: int) -> ServedCosts:
    """A round of ``num_steps`` drafts and ``verified`` tokens priced on ``roofline`` from stated costs, in target
    steps (the break-even tau): at batch 1, at ``batch``, and at ``batch`` with the overhead hidden by an overlap
    scheduler. No tau is needed: the price is the round's, whatever it emits."""
    case = {"round": {"tau": float("nan"), "num_steps": num_steps, "num_draft_tokens": verified}}
    cost = [float(price_on_served(case, roofline, c=c, overhead=s.overhead, batches=(s.batch,))["break_even_tau"].iloc[0])
            for s in served_settings(batch, overhead)]
    return ServedCosts(batch, *cost)


def what_if(reading: SpeedReading, name: str, *, roofline: str, c: float, overhead: float, batch: int,
            recorded: dict | None = None, fleet_record: tuple[str, float] | None = None) -> WhatIf:
    """``name`` here and priced on ``roofline`` at batch 1 and ``batch`` (and at ``batch`` with the per-round
    overhead hidden by an overlap scheduler). ``recorded``: one run of ``recorded_benchmarks``, if any;
    ``fleet_record``: (label, round cost) a served deployment's measured speeds imply for this chain (``cost_model.implied_round_cost``)."""
    r = reading[name]
    served = served_round_costs(r.num_steps, r.verified, roofline=roofline, c=c, overhead=overhead, batch=batch)
    rec = None
    if recorded:
        acc = recorded["acceptance"]
        rec = {"prompts": recorded["settings"]["prompts"], "tokens": recorded["settings"]["max_new_tokens"],
               "repeats": recorded["settings"]["repeats"], "tau": acc["tau"],
               "speedup": recorded["projection"]["measured_speedup"]}   # a median: the old records' only number
        ratio = (recorded.get("speed_ratio") or {}).get(reading.kind)
        if ratio is not None:    # run_benchmark's pooled interval over prompts, the same speed definition as this run
            rec["speed"] = {k: ratio[k] for k in ("value", "low", "high", "level", "units")}
        if acc.get("tau_low") is not None:
            rec["tau_interval"] = {"value": acc["tau"], "low": acc["tau_low"], "high": acc["tau_high"],
                                   "level": acc.get("tau_level", 0.95), "units": rec["prompts"]}
    roof = ROOFLINE_EXAMPLES[roofline]
    experts = {n: roof.touched_experts(n) for n in (batch, batch * r.verified)}   # tokens in one forward
    return WhatIf(name, r, served, {"roofline": roofline, "c": c, "overhead": overhead, "batch": batch,
                                               "num_experts": roof.num_experts, "experts": experts}, rec, fleet_record)


def experts_words(w: WhatIf) -> str:
    """Why v(M) rises on the served MoE, from its roofline: the experts one forward reads."""
    a, M, b = w.assumptions, w.row.verified, w.assumptions["batch"]
    if not a["num_experts"]:
        return f"{a['roofline']} is dense: verifying {M} tokens reads the same weights as one."
    e = a["experts"]
    return (f"On {a['roofline']} (its roofline: every forward bound by weight reads), {b} sequences x {M} tokens read "
            f"about {e[b * M]:.0f} of {a['num_experts']} experts per layer, against {e[b]:.0f} for {b} x 1: a verify of "
            f"{M} tokens per sequence costs more than a step there even when the draft is free.")


# ------------------------------------------------------------------ section 10: toy and real target

@dataclass
class TrackReading:
    tracks: dict                     # name -> TrackMeasure
    chain: str = "chain 2"
    tree: str = "tree 5/4/8"
    rival: str = "chain 4"

    def row(self, name: str) -> dict:
        m = self.tracks[name]
        d = m.sweep.tau_difference(self.tree, self.rival)
        slots = m.slot_table()
        return {"layers": m.layers, "c": m.c, "context": m.sweep.context_len, "tau": m.sweep.tau_interval(self.chain), "tree_minus_chain": d,
                "tree_vs_chain": {"beats": f"the tree beat the {self.rival}", "loses": f"the {self.rival} beat the tree",
                                  "within noise": f"tree and {self.rival} within noise",
                                  "identical": f"tree and {self.rival} identical"}[word_of(d)],
                "lost_next_layer": float(slots.tau_lost_next_layer.mean()),
                "within_noise": float(slots.within_noise.mean() / (m.layers + 2)),
                "lossless": sum(m.sweep.identical(n) == len(m.sweep.reference) for n in m.cases), "cases": len(m.cases),
                "device": m.device, "vs_generate": {n: m.vs_generate_interval(n) for n in m.cases}}

    def words(self) -> str:
        parts = []
        for name in self.tracks:
            r = self.row(name)
            parts.append(f"{name} ({r['layers']} layers) c = {r['c']:.3f} (timed at this section's context of "
                         f"{r['context']} tokens), {self.chain} tau {fmt(r['tau'])}, "
                         f"{r['tree_vs_chain']} ({signed(r['tree_minus_chain'])}), a slot fed the next layer lost "
                         f"{r['lost_next_layer']:.2f} tau, {100 * r['within_noise']:.0f}% of the points within noise of "
                         f"a slot's best, and end to end against generate {self.generate_words(r)}")
        return "; ".join(parts)

    def generate_words(self, r: dict) -> str:
        """Each case's end-to-end speed over ``generate`` with its paired interval over prompts, and its word."""
        return ", ".join(f"{n} {fmt(i, unit='x')} ({speed_word(i)})" for n, i in r["vs_generate"].items())

    def claims(self) -> dict:
        out = {}
        for name in self.tracks:
            r = self.row(name)
            out[name] = {"layers": r["layers"], "c": r["c"], "context": r["context"], "tau_chain2": r["tau"].value, "tau_chain2_low": r["tau"].low,
                         "tau_chain2_high": r["tau"].high, "tree_vs_chain": r["tree_vs_chain"],
                         "tree_minus_chain": r["tree_minus_chain"].value,
                         "tree_minus_chain_interval": interval_claims(r["tree_minus_chain"]),
                         "lost_next_layer": r["lost_next_layer"], "within_noise": r["within_noise"],
                         "lossless": r["lossless"], "cases": r["cases"],
                         "vs_generate": {n: {**interval_claims(i), "word": speed_word(i)} for n, i in r["vs_generate"].items()}}
        return out


# ------------------------------------------------------------------ the summary

def lossless_words(sweep, greedy: list[str]) -> tuple[str, dict]:
    """The greedy settings' outputs against ``generate``, read by ``DecodeSweep.lossless``: the dtype, and where
    outputs differ how many are tie flips and how many bugs (``eagle3lab.decoding.lossless``) -> (words after
    "in n/m greedy settings", claims)."""
    checks = [c for c in (sweep.lossless(n) for n in greedy) if c is not None]
    dtype = checks[0].dtype if checks else None
    differ = sum(len(c.divergences) for c in checks)
    ties, bugs = sum(len(c.ties) for c in checks), sum(len(c.bugs) for c in checks)
    claims = {"lossless_dtype": dtype, "lossless_differing": differ, "tie_flips": ties, "lossless_bugs": bugs}
    if not checks:
        return "", claims
    if not differ:
        return f", in {dtype} (no output differed: no tie flip and no bug to tell apart)", claims
    text = (f", in {dtype}; of the {differ} output{'s' * (differ > 1)} that differed, {ties} {'was a tie flip' if ties == 1 else 'were tie flips'} "
            f"(the first difference a near-tie of the target's own logits, within {checks[0].tie_ulps:g} resolutions of "
            f"{dtype} at that scale: a batched verify and a one-token step round it differently)")
    if bugs:
        text += f" and **{bugs} {'was a bug' if bugs == 1 else 'were bugs'}** (off the target's argmax by more than rounding)"
    return text, claims


def ck_text(stats) -> str:
    """c_k per position, a rate of 1.00 or 0.00 with its count (``1.00 (12/12)``: every round that reached k)."""
    return ", ".join(rate(c, a, n) for c, a, n in zip(stats.conditional, stats.accepted_per_pos, stats.reached_per_pos))


def _half_words(half, half_ids, case_profile: str) -> str:
    """The half fix in the summary: its decode speed here, then its served price, the overlap-on build's first."""
    from eagle3lab.engines.profiles import PROFILES

    engine = PROFILES[case_profile].engine
    ids = "".join(f"; {engine} {v}: " + (f"ids {i}" if i is not None else "no ids feed it")
                  for v, i in (half_ids or {}).items())
    b, tau, served = half.assumptions["batch"], half.row.tau, half.served
    text = (f" Half fixed (trained wiring, {case_profile}'s residual rule{ids}), its {half.row.num_steps}-step chain "
            f"had tau {fmt(tau)}: here decode {fmt(half.row.speed, unit='x')} ({half.row.word}, measured); on the "
            f"served {half.assumptions['roofline']} at batch {b}, under stated costs, a round costs "
            f"{served.overlapped:.2f} target steps with the overlap scheduler on ({OVERLAP_ON}) "
            f"({projected_word(tau, served.overlapped)}), {served.at_batch:.2f} on a build without it "
            f"({OVERLAP_OFF}) ({projected_word(tau, served.at_batch)}).{half.record_words()}")
    return text + (" " + half.recorded_words() if half.recorded else "")


def acceptance_summary(*, sweep, prompts: int, main: str, chains: ChainReading, trees: TreeReading, sampled: dict,
                       offline, speeds: SpeedReading, costs, cases=(), retry_steps: int | None = None,
                       case_profile: str | None = None, half: WhatIf | None = None, half_ids: dict | None = None,
                       tracks: TrackReading | None = None, side_size: tuple | None = None,
                       skipped=()) -> tuple[str, dict]:
    """Notebook 05's summary with its target loaded (live mode): (text, claims), every number and word in the text
    taken from the readings; ``skipped``: sections that did not run (``readings.dump_mode.SkipLog``), named."""
    stats, main_tau = sweep.stats(main), sweep.tau_interval(main)
    greedy = [n for n in sweep.results if sweep.identical(n) is not None]
    same = sum(sweep.identical(n) == len(sweep.reference) for n in greedy)
    lossless_text, lossless_claims = lossless_words(sweep, greedy)
    tree_names = trees.trees()
    best_tree = max(tree_names, key=lambda n: trees.rows[n]["tau"].value) if tree_names else None
    m = speeds[main]
    text = (f"Live mode (the target loaded here). Real speculative decoding on {prompts} held-out prompts was token-identical to `generate` in "
            f"{same}/{len(greedy)} greedy settings{lossless_text}. The healthy draft's {main} accepted c_k = "
            f"{ck_text(stats)} per position: tau **{fmt(main_tau)}** (= 1 + sum of "
            f"survival, = SGLang's accept len and vLLM's mean acceptance length; vLLM's per-position rates are the "
            f"survival {', '.join(f'{a:.2f}' for a in stats.survival[:3])}...; SpecForge's simulated_acc_len from "
            f"teacher-forced acc_i is {offline.specforge_simulated_acc_len:.2f}, bonus excluded). {chains.words()} ")
    if best_tree:
        r = trees.rows[best_tree]
        rival = r.get("same_width")
        text += (trees.highest_words()
                 + (f"{' and' if trees.leader is None else ''} {_AGAINST[word_of(rival)]} {r['same_width_name']}, the "
                    f"chain verifying as many tokens ({signed(rival)})" if rival is not None else "") + "; ")
    text += (f"sampled, {versus_words(sampled)}. On this machine ({speeds.context([main])}) c = {costs.c:.3f}, "
             f"v(2) = {speeds.v2:.3f} and v(16) = {costs.v(16):.2f} target steps; the {main} decoded at **{fmt(m.speed, unit='x')}** "
             f"the decode speed of no speculation ({DECODE_SPEED}; measured, {m.word}); the cost model projected {m.projected:.2f}x, an error of "
             f"{100 * m.error:+.0f}% against the measurement, which is the number to trust. ")
    if "chain" in speeds.fastest_of:
        text += speeds.fastest_set_words("chain") + "."
    claims = dict(lossless=same, greedy_settings=len(greedy), **lossless_claims, conditional=list(stats.conditional), tau=stats.tau,
                  tau_interval=interval_claims(main_tau), survival=list(stats.survival[:3]),
                  survival_all=list(stats.survival), tau_from_survival=stats.tau_from_survival,
                  vllm_mean=stats.vllm_mean_acceptance_length, specforge_simulated=offline.specforge_simulated_acc_len,
                  specforge_acc=list(offline.specforge_acc), **chains.claims(), trees=trees.claims(),
                  tau_best_tree=trees.rows[best_tree]["tau"].value if best_tree else None, best_tree=best_tree,
                  tree_leader=trees.leader_claims(),
                  tree_verified=[trees.rows[n]["verified"] for n in tree_names],
                  tree_draft_tokens_per_round=[sweep.stats(n).num_draft_tokens / sweep.stats(n).rounds for n in tree_names],
                  tau_sampled=sampled["tau_a"].value, sampled=versus_claims(sampled), v16=costs.v(16),
                  **speeds.claims(), main_measured=m.speed.value, main_projected=m.projected, main_word=m.word,
                  main_error_pct=100 * m.error)
    if cases:
        launched, retry = speeds[cases[0]], speeds[cases[1]]
        rounds = [r for o in sweep.results[cases[0]] for r in o.rounds]
        text += (f" The case draft, served by {case_profile} as shipped, had tau {launched.tau.value:.2f} as launched "
                 f"(decode {fmt(launched.speed, unit='x')}, {launched.word}) and {retry.tau.value:.2f} with a {retry_steps}-step "
                 f"chain, whose round cost {retry.round_cost:.2f} target steps as projected and {fmt(retry.paid_cost)} as "
                 f"paid: decode **{fmt(retry.speed, unit='x')}**, {retry.word}"
                 + (" than no speculation, as the seed saw." if retry.word == "slower" else " against no speculation.")
                 + f" {E2E_POINTER}")
        claims.update(case_tau=launched.tau.value, case_measured=launched.speed.value, case_word=launched.word,
                      case_verified=sweep.settings(cases[0])["num_draft_tokens"],
                      case_most_accepted=max(r.accepted for r in rounds), retry_tau=retry.tau.value,
                      retry_round_cost=retry.round_cost, retry_measured=retry.speed.value, retry_word=retry.word)
    if half is not None:
        text += _half_words(half, half_ids, case_profile)
        claims.update(half=half.claims(), half_ids=half_ids or {})
    if tracks is not None and tracks.tracks:
        text += f" Side by side on {side_size[0]} short prompts x {side_size[1]} tokens: {tracks.words()}."
        claims["side"] = tracks.claims()
    text += (" Skipped: " + "; ".join(skipped) + ".") if skipped else " Nothing was skipped."
    claims.update(mode="live", skipped=list(skipped))
    return text, claims


# ------------------------------------------------------------------ without a loaded target (a dump, a config)
# Notebook 05 without a loaded target: what a hidden-state dump or a config alone still answers, in words.
#
# A dump (``models.target_source``, dump mode) holds the target's states for prompts and their continuations:
# enough to score a draft **teacher-forced** (``decoding.evaluate.evaluate_on_bank``: the accept decisions a
# greedy chain makes at every anchor, no target forward), so tau against chain length and the case draft's tau as
# its engine serves it come with their intervals over prompts (``engines.acceptance.tau_interval`` /
# ``tau_difference``, worded by ``verdicts.word_of``). Nothing decodes and nothing is timed, so every measured
# speed is skipped and said to be. A served target's costs are stated assumptions (``analysis.roofline``): they
# price a round in any mode, and a tau interval, where the dump gives one, is placed against that price
# ("projected", ``verdicts.projected_word``). Config-only mode has the price and no tau.

def chain_name(k: int) -> str:
    return f"chain {k}"


def teacher_forced_chains(bank, draft, ks, *, level: float = 0.95) -> tuple[ChainReading, dict]:
    """tau per chain length K, teacher-forced on ``bank`` with the draft's own wiring and settings: each K's
    interval over the bank's prompts, each K's gain over the next shorter one paired over the same prompts, and
    the longest chain's 1 + sum a_k as the prediction. Returns the reading and each K's ``BankScore``."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank

    ks = sorted(set(int(k) for k in ks))
    names = [chain_name(k) for k in ks]
    scores = {n: evaluate_on_bank(bank, draft, tuple(draft.aux_resid), num_steps=k) for n, k in zip(names, ks)}
    tau = {n: tau_interval(scores[n].accept, level=level) for n in names}
    gain = {b: tau_difference(scores[b].accept, scores[a].accept, level=level) for a, b in zip(names, names[1:])}
    span = tau_difference(scores[names[-1]].accept, scores[names[0]].accept, level=level) if len(names) > 1 else None
    survival = scores[names[-1]].stats.survival
    return ChainReading(names, ks, tau, [1 + sum(survival[:k]) for k in ks], gain, span), scores


def plot_teacher_forced_chains(chains: ChainReading, where: str):
    """``plots.plot_tau_vs_chain``, titled as what it is: teacher-forced on ``where``'s states, not decoded."""
    from eagle3lab.analysis.plots import plot_tau_vs_chain

    fig = plot_tau_vs_chain(chains.plot_table())
    fig.axes[0].set_title(f"tau against chain length, teacher-forced on {where}\n(no decoding: the accept "
                          "decisions a greedy chain makes at every anchor)", fontsize=9)
    return fig


@dataclass
class ServedPrice:
    """One setting priced on a served target from stated costs, and its teacher-forced tau (dump mode) or none."""

    name: str
    num_steps: int
    verified: int
    served: ServedCosts          # round costs in target steps (= the break-even tau), projected
    assumptions: dict
    tau: Interval | None = None  # teacher-forced on a dump, with its interval over prompts

    def words_for(self, cost: float) -> str:
        """The verdict of this tau against a round ``cost`` (one of ``served``'s)."""
        return "no tau here to place against it" if self.tau is None else projected_word(self.tau, cost)

    def table(self) -> pd.DataFrame:
        rows = [{"where": f"{label}, projected", "round cost = break-even tau (target steps)": round(be, 3),
                 "tau 95% (teacher-forced)": fmt(self.tau) if self.tau is not None else "not measured here",
                 "verdict": self.words_for(be)} for label, be in self.served.labelled().items()]
        return pd.DataFrame(rows).set_index("where")

    def words(self) -> str:
        a = self.assumptions
        served = "; ".join(f"{label}: round {be:.2f} target steps, {self.words_for(be)}" for label, be in self.served.labelled().items())
        tau = f"teacher-forced tau {fmt(self.tau)}" if self.tau is not None else "no tau measured here"
        return (f"{self.name} ({self.num_steps}-step chain, {self.verified} verified; {tau}). Priced on the served "
                f"{a['roofline']} (c = {a['c']}, overhead {a['overhead']} target steps per round; stated assumptions, "
                f"projected): {served}.")

    def claims(self) -> dict:
        out = {"num_steps": self.num_steps, "verified": self.verified, "assumptions": dict(self.assumptions),
               "served": {label: {"round_cost": be, "word": self.words_for(be)} for label, be in self.served.labelled().items()}}
        if self.tau is not None:
            out["tau"] = interval_claims(self.tau)
        return out


def price_served(name: str, num_steps: int, verified: int, *, roofline: str, c: float, overhead: float, batch: int,
                 tau: Interval | None = None) -> ServedPrice:
    """``name``'s round on ``roofline`` at batch 1, at ``batch`` and at ``batch`` with the overlap scheduler on
    (``speed_reading.served_round_costs``, the rule ``speed_reading.what_if`` prices with)."""
    served = served_round_costs(num_steps, verified, roofline=roofline, c=c, overhead=overhead, batch=batch)
    return ServedPrice(name, int(num_steps), int(verified), served,
                       {"roofline": roofline, "c": c, "overhead": overhead, "batch": batch}, tau)


def teacher_forced_tau(bank, draft, num_steps: int, *, level: float = 0.95) -> Interval:
    """``draft`` (as its engine runs it: ``draft.under(profile)``) teacher-forced on ``bank``: tau and its interval."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank

    return tau_interval(evaluate_on_bank(bank, draft, tuple(draft.aux_resid), num_steps=num_steps).accept, level=level)


def offline_summary(*, source, skipped, chains: ChainReading | None = None, prices: dict | None = None,
                    half_ids: dict | None = None, case_engine: str | None = None,
                    batch: int | None = None) -> tuple[str, dict]:
    """Notebook 05's summary in dump or config-only mode: (text, claims). States the mode and the source, what
    ran (teacher-forced tau against chain length, the case draft's tau as served, the served prices, the ids
    each build has for the half fix) and every section skipped."""
    prices = prices or {}
    text = f"{source.mode.capitalize()} mode ({source.name}; no target loaded here, nothing decoded or timed). "
    claims = {"mode": source.mode, "num_layers": source.num_layers, "arch": source.arch, "skipped": list(skipped)}
    if source.dump is not None:   # what the anchors cover, before any tau scored on them
        where = scored_from(source.dump)
        text += where.words() + " "
        claims.update(where.claims())
    if chains is not None:
        b = source.dump
        text += f"Teacher-forced on the dump's {len(b)} prompts (the draft's own wiring): {chains.words()} "
        claims["teacher_forced"] = chains.claims()
    if half_ids:
        ids = "; ".join(f"{case_engine} {v}: " + (f"ids {i}" if i is not None else "no ids feed it")
                        for v, i in half_ids.items())
        text += f"For the half fix (the trained wiring) at N = {source.num_layers}: {ids}. "
        claims["half_ids"] = half_ids
    for name, p in prices.items():
        where = f"on the served {p.assumptions['roofline']} at batch {batch}, under stated costs (projected)"
        if p.tau is None:
            text += (f"{name}: {where}, a {p.num_steps}-step round costs {p.served.overlapped:.2f} target steps with "
                     f"the overlap scheduler on ({OVERLAP_ON}), {p.served.at_batch:.2f} without it ({OVERLAP_OFF}): "
                     "the tau it must exceed "
                     "to pay there (no tau measured here to place against it). ")
            continue
        text += (f"{name} (teacher-forced tau {fmt(p.tau)}): {where}, a round costs {p.served.overlapped:.2f} target "
                 f"steps with the overlap scheduler on ({OVERLAP_ON}) ({p.words_for(p.served.overlapped)}), "
                 f"{p.served.at_batch:.2f} without it ({OVERLAP_OFF}) ({p.words_for(p.served.at_batch)}). ")
    if prices:
        claims["served"] = {name: p.claims() for name, p in prices.items()}
    text += ("Skipped, for want of the loaded target: " + "; ".join(skipped) + "." if skipped else "Nothing was skipped.")
    return text, claims
