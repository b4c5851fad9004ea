"""Notebook 06's words: a case file's ladder climbed one knob a rung, and the seed's checklist.

The rungs are doctor's (``doctor.ladder``: one ``Rung``, one ``RunState``, one word rule); :func:`case_rungs`
builds the notebook's seven from named inputs, and :func:`climb_case` climbs them in the source's mode: decoded
and timed with a loaded target (every distinct runnable state in ONE interleaved ``decode_sweep``, the machine's
noise hitting all rungs alike), or, for a target known only through a serving cluster's hidden-state dump
(``models.target_source``, dump mode), teacher-forced on the dump's states (:func:`score_rungs`; tau with
bootstrap intervals over the dumped prompts, as doctor's ladder does; nothing timed). Either way a
:class:`CaseLadder` holds them, whose ``table()``, ``plot()``, ``words()`` and ``claims()`` a cell calls once each.
What each mode skips, and the words for it, live here (:data:`SKIPS`, :func:`skipped`).
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from eagle3lab.analysis.roofline import SERVED
from eagle3lab.analysis.verdicts import interval_text, rate_text, signed_text, word_of
from eagle3lab.doctor.ladder import (
    SPEED_KINDS,
    Decoded,
    Rung,
    RunState,
    TeacherForced,
    climb,
    same_measurement,
)
from eagle3lab.engines.acceptance import (
    Interval,
    bootstrap_ratio,
    bootstrap_ratio_difference,
    simulated_acc_len,
)
from eagle3lab.engines.layer_ids import resid_label
from eagle3lab.errors import Eagle3LabError, bad_input
from eagle3lab.models.target_source import CONFIG_ONLY, LIVE

# what a step needs that a target known by its dump (states, no weights) or its config alone lacks: the skip line
# each cell prints (TargetSource.skip) and the summary's list
SKIPS = {
    "search": "step 3, scoring the candidate wirings (states to score the draft on)",
    "costs": "step 4, timing the round costs the chain verdict prices",
    "ladder": "step 4, the ladder's rungs (states to score them on)",
    "decode": "step 4, decoding and timing the rungs (tokens/s, the lossless check)",
    "real": "step 5b, the real engine serving the last rung",
}
NEEDS_TARGET = ("costs", "decode", "real")       # the rest needs states, which a dump holds


def skipped(mode: str) -> list[str]:
    """What a run in ``mode`` skips, in the notebook's order (none live; a dump lacks the target's weights;
    the config alone lacks states too)."""
    if mode == LIVE:
        return []
    return [w for k, w in SKIPS.items() if mode == CONFIG_ONLY or k in NEEDS_TARGET]


SPEED_WORDS = {"faster": "faster than no speculation", "slower": "slower than no speculation",
               "within noise": "within noise of no speculation", "not measured": "not measured"}
BEFORE = {"within noise": " of", "identical": " to"}   # a word's preposition before "the rung before"
STEP_WORDS = {"faster": "faster than the rung before", "slower": "slower than the rung before",
              "within noise": "within noise of the rung before", "identical": "the same decoding as the rung before",
              "not measured": "not measured"}


# the ladder's tau table as shown: labels that wrap (a long unbroken one widens its column past the screen)
TAU_LABELS = {"changes": "changes (finding)", "engine": "engine", "checkpoint": "format", "chain": "chain",
              "ids": "ids", "feeds": "feeds", "norm_before_residual": "norm before residual", "tau": "tau (95%)",
              "tau_change": "change in tau (95%)", "verdict": "verdict", "note": "what the build does"}


def speed_labels(kind: str) -> dict[str, str]:
    """``CaseLadder.speed_frame``'s stable column names -> the speed table's labels; ``kind`` ("end to end" or
    "decode") names the rates the ratios compare."""
    return {"e2e_tps": "tok/s (end to end, median)", "speed_ratio": f"x no speculation ({kind}, 95%)",
            "speed_verdict": "speed", "step_ratio": f"x rung before ({kind}, 95%)", "step_verdict": "vs rung before",
            "identical": "token-identical"}


def ratio_text(iv: Interval) -> str:
    """A speed ratio and its interval: ``0.62x [0.55, 0.70]``, with more digits where a bound would print as 1x
    (``verdicts.interval_text``)."""
    return interval_text(iv, unit="x")


def gain_text(iv: Interval) -> str:
    """A paired tau difference: ``+0.255 [+0.111, +0.735]``, with more digits where a bound would print as 0."""
    return signed_text(iv, 3)


def identical_text(rung: Rung) -> str:
    """``3/4``: prompts token-identical to ``generate`` of those decoded; empty when not decoded."""
    return "" if rung.identical is None else f"{rung.identical[0]}/{rung.identical[1]}"


def interval_word(diff: Interval | None) -> str:
    """``verdicts.word_of`` ("beats" / "within noise" / "loses"), or "not run" for a rung not measured."""
    return "not run" if diff is None else word_of(diff)


@dataclass
class CaseLadder:
    """The rungs climbed, the meter that measured them (``doctor.ladder.Decoded`` or ``TeacherForced``) and what
    the words need: repeats, device, dtype, the trainer's record, what was scored and why nothing was timed."""

    rungs: list[Rung]
    meter: object                  # the doctor.ladder.Meter every run rung came from
    repeats: int
    device: str
    dtype: str
    trainer: dict = field(default_factory=dict)
    speed_kind: str = "e2e"        # the rates every speed ratio compares ("e2e" or "decode")
    scored_on: str = ""            # score_rungs: what the teacher-forced taus were scored on ("" = decoded)
    untimed: str = ""              # why no rung was timed ("" = every run rung timed)

    @property
    def decoded(self) -> bool:
        return not self.scored_on

    @property
    def lossless(self) -> bool | None:
        """Every decoded rung token-identical to the target's greedy output; None when nothing was decoded."""
        if not self.decoded:
            return None
        return all(same == prompts for same, prompts in (r.identical for r in self.run))

    # -------------------------------------------------------------- reading

    @property
    def run(self) -> list[Rung]:
        return [r for r in self.rungs if r.tau is not None]

    def overall(self) -> Interval:
        """The last run rung's tau minus the first's (paired)."""
        first, last = self.run[0], self.run[-1]
        return self.meter.difference(last, first)

    def speed_word(self, rung: Rung) -> str:
        """Against no speculation, from the whole interval of the paired rate ratio (``verdicts.speed_word``)."""
        return SPEED_WORDS[rung.speed_verdict]

    def step_speed_word(self, rung: Rung) -> str:
        """Against the previous run rung, the same way; a rung that shares its decoding is "identical"."""
        return STEP_WORDS[rung.step_verdict]

    def label(self, i: int) -> str:
        """``3. the team's ids``: rungs count from 1, as the notebook's list does."""
        return f"{i + 1}. {self.rungs[i].name}"

    def tau_frame(self) -> pd.DataFrame:
        """What each rung runs and its tau (rounded), the change against the rung before and its word, by stable
        column names (``TAU_LABELS`` shows them)."""
        rows = []
        for i, r in enumerate(self.rungs):
            s = r.state
            rows.append({"rung": self.label(i), "changes": r.change_text(), "finding": r.finding,
                         "engine": f"{s.engine} {s.build or 'newest'}", "checkpoint": s.checkpoint,
                         "chain": f"{steps(s.num_steps)}, {s.num_draft_tokens} verified", "ids": list(s.ids),
                         "feeds": resid_label(s.fed), "norm_before_residual": s.rule,
                         "tau": "not run" if r.tau is None else str(r.tau),
                         "tau_change": "" if r.gain is None else gain_text(r.gain), "verdict": r.word, "note": r.note})
        return pd.DataFrame(rows).set_index("rung")

    def tau_table(self) -> pd.DataFrame:
        """``tau_frame`` as shown: the change and its finding in one column, relabelled (``TAU_LABELS``) so that the
        table fits a 1,400-pixel screen (a finding's code does not wrap: one column for it, not two)."""
        frame = self.tau_frame()
        frame["changes"] = [f"{c} ({f})" if f else c for c, f in zip(frame["changes"], frame.pop("finding"))]
        return frame.rename(columns=TAU_LABELS)

    def speed_frame(self) -> pd.DataFrame:
        """Each timed rung's speed: median tokens/s (end to end), the ratios over no speculation and over the rung
        before (``speed_kind``), each with its interval and word, and the lossless check, by stable column names
        (``speed_labels`` shows them). Empty when nothing was timed."""
        rows = []
        for i, r in enumerate(self.rungs):
            if r.speed is None:
                continue
            rows.append({"rung": self.label(i), "e2e_tps": round(r.e2e_tps, 1), "speed_ratio": ratio_text(r.speed),
                         "speed_verdict": r.speed_verdict,
                         "step_ratio": "" if r.step_speed is None else ratio_text(r.step_speed),
                         "step_verdict": r.step_verdict or "", "identical": identical_text(r)})
        return pd.DataFrame(rows).set_index("rung") if rows else pd.DataFrame()

    def speed_table(self) -> pd.DataFrame:
        """``speed_frame`` as shown: relabelled (``speed_labels``), the ratios' labels naming the speed kind."""
        return self.speed_frame().rename(columns=speed_labels(self.kind))

    def trainer_table(self, as_trained: tuple[Interval, str] | None = None) -> pd.DataFrame:
        """One draft's as-trained tau, every way this notebook reads it: the trainer's teacher-forced agreement per
        step and the tau it implies, step 3's teacher-forced score (``as_trained``: its interval and the set it was
        scored on) and the last rung's (decoded), each against the last rung's interval; the "how" column says
        why they differ (estimator, prompt set, teacher-forced or decoded)."""
        t, last = self.trainer, self.run[-1]
        if not t:
            return pd.DataFrame()
        rows = [("trainer (teacher-forced, held-out)", t["agree"], t["tau_est"],
                 "trainer's tau_est: 1 + mean leading agreeing steps, its held-out text"),
                ("trainer (teacher-forced, held-out)", t["agree"], t["tau_implied"],
                 "1 + sum of running products of the agreements (SpecForge acc_i), its held-out text")]
        if as_trained is not None:
            rows.append((f"step 3 (teacher-forced, 95% {as_trained[0]})", "", as_trained[0].value,
                         f"scored on {as_trained[1]}: each step given the target's prefix"))
        rows.append((f"{'served' if self.decoded else 'scored'}: {self.label(len(self.rungs) - 1)}", "",
                     last.tau.value, f"{'decoded' if self.decoded else 'teacher-forced on ' + self.scored_on}, "
                     f"{steps(last.state.num_steps)}, 95% {last.tau}"))
        out = pd.DataFrame(rows, columns=["source", "agreement per step", "tau", "how"]).set_index("source")
        out["tau"] = out["tau"].round(3)
        return out.assign(**{"against the last rung's interval": [self.against_served(r[2]) for r in rows[:-1]] + [""]})

    def trainer_words(self, as_trained: tuple[Interval, str]) -> str:
        """Where step 3's teacher-forced tau (``as_trained``, as ``trainer_table`` takes it) lies against the
        trainer's two taus and the last rung's interval: the table's own comparison, in a sentence."""
        t, (iv, scored_on) = self.trainer, as_trained
        if not t:
            return ""
        low, high = sorted((t["tau_est"], t["tau_implied"]))
        vs = "above both" if iv.value > high else "below both" if iv.value < low else "between"
        return (f"Step 3's teacher-forced tau on {scored_on}, {iv.value:.3f}, is {vs} the trainer's ({t['tau_est']:.3f} "
                f"and {t['tau_implied']:.3f}) and {self.against_served(iv.value)} the last rung's interval "
                f"{self.run[-1].tau}: teacher-forced like the trainer's but on other text, not decoded like the last "
                "rung's (the \"how\" column says why the numbers may differ).")

    def against_served(self, tau: float) -> str:
        """Where a tau (the trainer's) lies against the last rung's interval."""
        iv = self.run[-1].tau
        return "inside" if tau in iv else "above" if tau > iv.high else "below"

    @property
    def kind(self) -> str:
        """The speed every ratio states: "end to end" (prefill included) or "decode"."""
        return "end to end" if self.speed_kind == "e2e" else "decode"

    @property
    def interval_basis(self) -> str:
        """What every speed interval is over: the prompts, each repeat's times summed per prompt (``doctor.ladder``)."""
        return f"95% paired bootstrap over prompts ({self.repeats} repeats summed per prompt)"

    @property
    def speed_caption(self) -> str:
        return (f"The same rungs' speed, {SPEED_KINDS[self.speed_kind]}, {self.device}, {self.dtype}, batch 1; "
                f"{self.interval_basis}")

    def words(self) -> str:
        """One sentence a rung, a markdown list numbered as the tables: what changed, why, and what it did (from the
        intervals); every speed labelled with its kind."""
        out = []
        for i, r in enumerate(self.rungs):
            name, why = r.name, ", ".join(filter(None, [r.finding, f"changes {r.change_text()}"]))
            before = next((q for q in reversed(self.rungs[:i]) if q.ran), None)
            if r.tau is None:       # first: a rung not run (even the first) has no speed to state
                out.append(f"{name} ({r.finding or 'no finding'}): not run: {r.note}")
            elif r.speed is None and (i == 0 or r.word == "start"):
                out.append(f"{name}: tau {r.tau} (teacher-forced).")
            elif i == 0 or r.word == "start":
                out.append(f"{name}: tau {r.tau}; speed ({self.kind}) {ratio_text(r.speed)} no speculation "
                           f"({self.speed_word(r)}).")
            elif same_measurement(r, before):
                out.append(f"{name} ({r.finding or 'no finding'}): nothing changes on this build ({r.note}).")
            elif r.speed is None:
                out.append(f"{name} ({why}): tau {r.tau.value:.2f}, "
                           f"change {gain_text(r.gain)} - {r.word}{BEFORE.get(r.word, '')} the rung before.")
            else:
                out.append(f"{name} ({why}): tau {r.tau.value:.2f}, "
                           f"change {gain_text(r.gain)} - {r.word}{BEFORE.get(r.word, '')} the rung before; "
                           f"speed ({self.kind}) {ratio_text(r.speed)} no speculation ({self.speed_word(r)}), "
                           f"{ratio_text(r.step_speed)} the rung before ({self.step_speed_word(r)})."
                           + self.emulator_cost(r, before))
        return "\n".join(f"{i}. {w}" for i, w in enumerate(out, 1))

    def emulator_cost(self, rung: Rung, before: Rung) -> str:
        """A rung that changes only the emulated engine and accepts the very same tokens as the rung before (tau
        change 0 [0, 0], both token-identical to the target's output) decodes the same thing twice: its speed against
        the rung before is what eagle3lab's two emulations cost on this machine, not a fact about serving."""
        if (rung.changed != ("engine",) or rung.word != "identical" or rung.step_verdict in (None, "identical")
                or rung.identical is None or rung.identical[0] != rung.identical[1]):
            return ""
        return (f" Only the emulated engine changed ({before.state.engine} -> {rung.state.engine}) and both decode the "
                f"same tokens (tau change {gain_text(rung.gain)}, {identical_text(rung)} token-identical): the "
                f"{ratio_text(rung.step_speed)} is the emulators' cost on this {self.device}, not a serving fact.")

    def claims(self) -> dict:
        return {"rungs": [{"name": r.name, "changed": list(r.changed), "finding": r.finding, "note": r.note, "word": r.word,
                           "ran": r.ran, "measured_as": r.measured_as, "num_steps": r.state.num_steps,
                           "tau": None if r.tau is None else [r.tau.value, r.tau.low, r.tau.high],
                           "gain": None if r.gain is None else [r.gain.value, r.gain.low, r.gain.high],
                           # untimed (or not run): None, not NaN (JSON has no NaN)
                           "speedup": None if r.speed is None else r.speedup,
                           "e2e_tps": None if r.speed is None else r.e2e_tps, "identical": identical_text(r),
                           "speed": None if r.speed is None else [r.speed.value, r.speed.low, r.speed.high],
                           "speed_word": r.speed_verdict,
                           "step_speed": None if r.step_speed is None else
                           [r.step_speed.value, r.step_speed.low, r.step_speed.high],
                           "step_speed_word": r.step_verdict,
                           "state": r.state.claims()}
                          for r in self.rungs],
                "overall": [*(lambda d: [d.value, d.low, d.high])(self.overall())],
                "overall_word": interval_word(self.overall()), "repeats": self.repeats, "speed_kind": self.speed_kind,
                "scored": "decoded" if self.decoded else "teacher-forced", "scored_on": self.scored_on or None,
                "untimed": self.untimed or None,
                # a negative bound printed after "[" reads as its magnitude to a decimal scan of the text
                "bounds_abs": [abs(x) for r in self.rungs for iv in (r.tau, r.gain, r.speed, r.step_speed) if iv is not None
                               for x in (iv.value, iv.low, iv.high)] + [abs(self.overall().low)],
                "trainer": {**self.trainer, **({"tau_est_against_served": self.against_served(self.trainer["tau_est"]),
                                                "tau_implied_against_served": self.against_served(
                                                    self.trainer["tau_implied"])} if self.trainer else {})}}

    def plot(self):
        """Two panels on one y axis: tau per rung (colour: its verdict against the rung before) and the measured
        speed over no speculation (colour: faster / slower / within noise of it), each with its 95% interval.
        Untimed (teacher-forced on a dump): the tau panel alone, the title saying why no speed is shown."""
        import matplotlib.pyplot as plt

        if self.untimed:
            fig, ax = plt.subplots(figsize=(8, 0.5 * len(self.rungs) + 2))
            bx = None
        else:
            fig, (ax, bx) = plt.subplots(1, 2, sharey=True, figsize=(12, 0.5 * len(self.rungs) + 2),
                                         gridspec_kw={"width_ratios": [3, 2]})
        names = [self.label(i) for i in range(len(self.rungs))]
        for y, r in enumerate(self.rungs):
            if r.tau is None:
                ax.text(1.02, y, textwrap.shorten("not run: " + r.note, 70), va="center", fontsize=8, color="tab:red")
                continue
            color = {"beats": "tab:green", "loses": "tab:red"}.get(r.word, "tab:grey")
            ax.errorbar(r.tau.value, y, xerr=[[r.tau.value - r.tau.low], [r.tau.high - r.tau.value]], fmt="o",
                        color=color, capsize=3)
            if bx is None:
                continue
            s = r.speed
            color = {"faster": "tab:green", "slower": "tab:red"}.get(r.speed_verdict, "tab:grey")
            bx.errorbar(s.value, y, xerr=[[s.value - s.low], [s.high - s.value]], fmt="o", color=color, capsize=3)
        ax.set_yticks(range(len(names)), names)
        ax.set_ylabel("rung (one change each)")
        ax.invert_yaxis()
        ax.axvline(1, color="k", lw=0.5)
        engines = sorted({"emulated " + r.state.engine for r in self.run})
        if bx is None:
            ax.set_xlabel(f"accept length tau (tokens per verify round), teacher-forced on {self.scored_on}\n"
                          "95% paired bootstrap over prompts")
            ax.set_title(f"tau; green / red: beats / loses the rung before, grey: within noise or identical\n"
                         f"tokens/s not measured: {self.untimed}", fontsize=9)
            fig.suptitle(f"The ladder, one change a rung, teacher-forced ({', '.join(engines)} arithmetic; "
                         f"{self.device}, {self.dtype})", fontsize=10)
            fig.tight_layout()
            return fig
        ax.set_xlabel("accept length tau (tokens per verify round)\n95% paired bootstrap over prompts")
        ax.set_title("tau; green / red: beats / loses the rung before,\ngrey: within noise or identical", fontsize=9)
        bx.set_ylabel("the same rungs", fontsize=8)
        bx.axvline(1, color="k", lw=0.8, ls="--")
        bx.set_xlabel(f"measured {self.kind} tokens/s over no speculation (x)\n{self.interval_basis}")
        bx.set_title("measured speed; green / red: faster / slower than\nno speculation, grey: within noise",
                     fontsize=9)
        fig.suptitle(f"The ladder, one change a rung ({', '.join(engines)}; {self.device}, {self.dtype}, batch 1)",
                     fontsize=10)
        fig.tight_layout()
        return fig


@dataclass(frozen=True)
class WiringVerdict:
    """Step 3's top-scoring candidate against the runner-up, paired over the same prompts: "best" only where the
    top one beats it (``verdicts.word_of`` of the paired tau difference)."""

    top: str
    runner_up: str
    tau: Interval
    runner_up_tau: Interval
    diff: Interval

    @property
    def word(self) -> str:
        return word_of(self.diff)

    @property
    def best(self) -> bool:
        return self.word == "beats"

    def words(self) -> str:
        said = (f"{self.top}: tau {self.tau}, against the runner-up {self.runner_up} ({self.runner_up_tau}) "
                f"{gain_text(self.diff)} - {self.word}{BEFORE.get(self.word, '')} it")
        return said + (": the weights fit it best of the candidates." if self.best else
                       ": the weights do not tell the two apart, so no candidate is called best.")

    def claims(self) -> dict:
        return {"top": self.top, "runner_up": self.runner_up, "word": self.word, "best": self.best,
                **{k: [iv.value, iv.low, iv.high] for k, iv in
                   (("tau", self.tau), ("runner_up_tau", self.runner_up_tau), ("diff", self.diff))}}


def _rescored(score, row):
    """One ``score_wirings`` row re-read by ``score`` (a ``wiring_search.Scorer``: its per-prompt sums, counts)."""
    from eagle3lab.analysis.wiring_search import settings_of

    return score(tuple(row.aux_resid), {**settings_of(score.draft), "norm_before_residual": bool(row.norm_before_residual)})


def candidates_table(search: pd.DataFrame, score) -> pd.DataFrame:
    """Step 3's candidates as shown: ``search`` (``score_wirings``, best first) at 3 digits, each c_k a rate with
    its count where it is 1 or 0 (``verdicts.rate_text``, as notebook 03 prints them: ``1.000 (1/1)``), the counts
    re-read from ``score`` (a ``wiring_search.Scorer`` on the same bank: memoised, ``wiring_verdict`` shares it)."""
    out = search.round(3)
    stats = [_rescored(score, r).stats for r in search.itertuples()]
    for i in range(len(stats[0].conditional) if stats else 0):
        out[f"c{i + 1}"] = [rate_text(s.conditional[i], s.accepted_per_pos[i], s.reached_per_pos[i], 3) for s in stats]
    return out


def wiring_verdict(bank, draft, search: pd.DataFrame, num_steps: int, score=None) -> WiringVerdict:
    """The top two rows of ``score_wirings`` on ``bank`` re-read with their per-prompt sums (``score``: the
    memoised scorer ``candidates_table`` read, else a new one: one more draft evaluation each), their difference
    paired over the prompts."""
    from eagle3lab.analysis.wiring_search import Scorer

    score = score or Scorer(bank, draft, num_steps)
    top, second = (_rescored(score, r) for r in (search.iloc[0], search.iloc[1]))
    name = [f"{r.wiring} with norm_before_residual={bool(r.norm_before_residual)}" for r in (search.iloc[0],
                                                                                            search.iloc[1])]
    return WiringVerdict(name[0], name[1], bootstrap_ratio(*top.tau_sums), bootstrap_ratio(*second.tau_sums),
                         bootstrap_ratio_difference(*top.tau_sums, *second.tau_sums))


def plot_candidates(search: pd.DataFrame, verdict: WiringVerdict | None, scored: str):
    """Step 3's chart: each candidate's tau with its 95% bootstrap interval (error bars); the top one green only
    where it beats the runner-up (``verdict``), else every bar grey and the title says no candidate is best."""
    import matplotlib.pyplot as plt

    labels = [f"{w}\nnorm_before_residual={r}" for w, r in zip(search.wiring, search.norm_before_residual)]
    best = verdict is not None and verdict.best
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(search) + 1.5))
    ax.barh(labels, search.tau, color=["tab:green" if i == 0 and best else "tab:grey" for i in range(len(search))],
            xerr=[search.tau - search.tau_low, search.tau_high - search.tau], capsize=3, ecolor="k")
    ax.invert_yaxis()
    ax.set_xlabel(f"expected accept length tau, 95% bootstrap over prompts ({scored})")
    ax.set_title("Step 3: which wiring were these weights trained on? "
                 + ("The top one beats the runner-up (paired)" if best else
                    "The top two are not told apart (paired): no best"), fontsize=9)
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class ProjectionCheck:
    """The cost model's projection for the launched chain (on the trainer's agreement, costs timed here) against
    the last rung's measured speed, both kinds: the projection prices rounds (decode), end to end adds prefill."""

    chain: int
    projected: float
    decode: Interval
    e2e: Interval

    def inside(self, kind: str) -> bool:
        return self.projected in (self.decode if kind == "decode" else self.e2e)

    def words(self) -> str:
        where = {k: "inside" if self.inside(k) else "above" if self.projected > iv.high else "below"
                 for k, iv in (("decode", self.decode), ("e2e", self.e2e))}
        meaning = ("the cost model holds here" if where["decode"] == "inside" else
                   "the model's pieces, timed apart from the ladder's run, do not add up to what the run paid "
                   "(read the projection for its shape, the measurement for the number)")
        return (f"The cost model projected {self.projected:.2f}x (decode) for the {self.chain}-step chain; the last "
                f"rung measured {ratio_text(self.decode)} decode and {ratio_text(self.e2e)} end to end: the projection "
                f"is {where['decode']} the decode interval ({meaning}) and {where['e2e']} the end-to-end one (prefill, "
                "which end to end includes and no round pays, is not in the projection)")

    def claims(self) -> dict:
        return {"chain": self.chain, "projected": self.projected, "decode": [*_triple(self.decode)],
                "e2e": [*_triple(self.e2e)], "inside_decode": self.inside("decode"), "inside_e2e": self.inside("e2e")}


def _triple(iv: Interval) -> tuple:
    return iv.value, iv.low, iv.high


def projection_check(ladder: CaseLadder | None, chain: ChainChoice | None) -> ProjectionCheck | None:
    """The last rung (the launched chain, decoded and timed) against the chain verdict's mean projection for it;
    None without either (a dump's ladder times nothing)."""
    if ladder is None or chain is None or not ladder.decoded:
        return None
    last = ladder.run[-1]
    k = last.state.num_steps
    if k not in chain.projected.columns:      # a chain longer than the trainer measured: not priced
        return None
    return ProjectionCheck(k, chain.mean_projected[k - 1], ladder.meter.sweep.speed_ratio(last.measured_as, kind="decode"),
                           ladder.meter.sweep.speed_ratio(last.measured_as, kind="e2e"))


@dataclass(frozen=True)
class RungTau:
    """One rung's tau (not a gain), the chain it ran and its number in the tables (``rung 4``)."""

    tau: Interval
    steps: int
    rung: str


@dataclass(frozen=True)
class Gains:
    """What the case's ladder measured for each kind of fix (paired tau differences; None: not measured): the ids
    feeding the trained points (the rule still wrong), the trained rule (points right), and both (served whole),
    each against the rung before it; ``on``: where (the bundled case's ladder, decoded or teacher-forced);
    ``wiring_rule``: the ids and the rule together, from the ids' start (the rule's gain is on top of the ids');
    ``spans``: each field -> the rungs it was measured between (``rung 2 -> 6``), from the run. Three rungs' own
    taus: ``ignored``, the trained points fed and the rule ignored (as a build that ignores norm_before_residual
    serves the draft); ``launched`` and ``lifted``, the seed record's first two steps (as launched; the cap lifted)."""

    wiring: object = None
    rule: object = None
    whole: object = None
    on: str = "not measured (no ladder in this mode)"
    wiring_rule: object = None
    spans: dict = field(default_factory=dict)
    ignored: RungTau | None = None
    launched: RungTau | None = None
    lifted: RungTau | None = None

    def text(self, iv, span: str = "") -> str:
        if iv is None:
            return "gain not measured"
        return f"{signed_text(iv, 3)} tau on {self.on}" + (f", {span}" if span else "")


def gains_of(ladder: CaseLadder | None) -> Gains:
    """What the ladder measured for each kind of fix (``seed_case.Gains``): the ids for the top-scoring wiring over
    the team's retried flags (the rule still wrong), the trained rule over those ids, and the checkpoint served
    whole over the retried flags; a fix whose rungs did not both run is None."""
    if ladder is None:
        return Gains()
    by = {r.name: r for r in ladder.rungs}
    number = {r.name: i + 1 for i, r in enumerate(ladder.rungs)}     # as the tables number them

    def diff(after: str, before: str):
        a, b = by[after], by[before]
        return ladder.meter.difference(a, b) if a.ran and b.ran else None

    def own(name: str) -> RungTau | None:        # None: not climbed (a ladder without that rung) or not run
        r = by.get(name)
        return RungTau(r.tau, r.state.num_steps, f"rung {number[name]}") if r is not None and r.ran else None

    launched, flags, ids, rule, whole = (RUNG_NAMES[k] for k in ("launched", "flags", "ids", "rule", "whole"))
    how = "decoded" if ladder.decoded else f"teacher-forced on {ladder.scored_on}"
    spans = {k: f"rung {number[a]} -> {number[b]}" for k, (a, b) in
             {"wiring": (flags, ids), "rule": (ids, rule), "whole": (flags, whole), "wiring_rule": (flags, rule)}.items()}
    return Gains(diff(ids, flags), diff(rule, ids), diff(whole, flags),
                 f"the bundled case's ladder ({how}, {steps(by[flags].state.num_steps)})", diff(rule, flags), spans,
                 own(ids), own(launched), own(flags))


def trainer_record(training: dict | None) -> dict:
    """The trainer's held-out teacher-forced agreement and the tau it implies (``training.json``)."""
    if not training or "heldout" not in training:
        return {}
    agree = list(training["heldout"]["agree"])
    return {"agree": agree, "tau_est": training["heldout"].get("tau_est"), "tau_implied": 1 + simulated_acc_len(agree)}


def training_of(draft_path) -> dict | None:
    """The trainer's record beside a draft (``training.json``), None without one."""
    path = Path(draft_path) / "training.json"
    return json.loads(path.read_text()) if path.exists() else None


def chain_verdict(source, draft, trainer: dict, *, repeats: int, launched: int | None) -> ChainChoice | None:
    """Step 4's chain to launch: the round costs timed ``repeats`` times with the loaded target (one cost model
    per repeat: one timing's pick rides on the machine's load), priced on the trainer's agreement
    (``choose_chain``). None without a training record or a loaded target (saying so); then ``launched`` (the
    FIX_STEPS parameter) must name the chain."""
    from eagle3lab.analysis.timing import measure_costs

    costs_runs = []
    if trainer and not source.skip(SKIPS["costs"]):
        chains = range(1, len(trainer["agree"]) + 1)
        costs_runs = [measure_costs(source.target, draft, settings=tuple((k, 1, None) for k in chains),
                                    verify_sizes=tuple(range(1, len(chains) + 2)), repeats=3, warmup=1)
                      for _ in range(repeats)]
    if launched is None and not costs_runs:
        raise bad_input("parameters", "FIX_STEPS", "the chain length to launch", None,
                        "No round costs to price chains with (no training record beside the draft, or no target "
                        "loaded here).")
    return choose_chain(costs_runs, trainer["agree"], launched) if costs_runs else None


@dataclass(frozen=True)
class IdsFor:
    """The ids an engine build writes for ``wiring``, or None and why (the error's headline)."""

    wiring: tuple
    ids: list | None
    why: str = ""


def ids_for(engine: str, wiring, num_layers: int, arch: str | None, build: str | None) -> IdsFor:
    from eagle3lab.engines.layer_ids import to_engine_ids

    try:
        return IdsFor(tuple(wiring), to_engine_ids(engine, list(wiring), num_layers, arch=arch, engine_version=build))
    except Eagle3LabError as e:
        return IdsFor(tuple(wiring), None, e.headline)


@dataclass
class ServedFix:
    """The checkpoint that serves all of it: the trained wiring and rule written in ``format`` for ``engine``
    (``save_draft``'s record), what that engine reads from it (``inspect_checkpoint``) and the draft it loads."""

    engine: str
    format: str
    path: str
    written: object        # models.checkpoint's save record (format, aux_ids_written, flags_written)
    reading: object        # the engine's reading of its ids (resid, label)
    draft: object          # loaded as the engine runs it


def write_fix(source, draft, trained: tuple, rule: bool, *, engine: str, checkpoint: str, device,
              folder) -> ServedFix:
    """Write the draft rewired to ``trained`` with ``rule`` as a ``checkpoint``-format checkpoint in ``folder``
    (the user's: replaced on every run), read it back as ``engine`` does."""
    from eagle3lab.models.checkpoint import inspect_checkpoint, save_draft

    fixed = draft.rewired(aux_resid=tuple(trained), norm_before_residual=rule)
    path = str(folder)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    written = save_draft(fixed, path, checkpoint, num_target_layers=source.num_layers, overwrite=True)
    reading = inspect_checkpoint(path, num_target_layers=source.num_layers).aux_ids.by_engine[engine]
    return ServedFix(engine, checkpoint, path, written, reading, source.load_draft(path, device=device, profile=engine))


@dataclass(frozen=True)
class ServedCopy:
    """The rewritten checkpoint as one engine loads it: its folder and format, the ids written and the key the
    engine reads them at; ``command``: the ``eagle3lab convert`` line that wrote it ("": the checkpoint itself)."""

    engine: str
    path: str
    format: str
    ids: list | None
    key: str
    command: str = ""


def served_copies(source, fix: ServedFix, engines, target: str) -> dict[str, ServedCopy]:
    """Per engine of ``engines``: the rewritten checkpoint where that engine loads its format, else its conversion
    to the engine's format (``doctor.fixes.ENGINE_FORMAT``) beside it, ``{fix.path}-{format}``, written as
    ``eagle3lab convert --target target`` writes it (the target's architecture decides the ids: ``source.arch``
    here), replaced on every run: a flag line names a folder, never a description."""
    from eagle3lab.doctor.fixes import ENGINE_FORMAT
    from eagle3lab.models.checkpoint import inspect_checkpoint, save_draft

    n, out = source.num_layers, {}
    for engine in dict.fromkeys(engines):
        fmt = ENGINE_FORMAT[engine]
        if fmt == fix.format:
            path, ids, command = fix.path, fix.written.aux_ids_written, ""
        else:
            path = f"{fix.path}-{fmt}"
            draft = source.load_draft(fix.path, device="cpu", dtype=None).bound(target_arch=source.arch)
            ids = save_draft(draft, path, fmt, num_target_layers=n, overwrite=True).aux_ids_written
            command = f"eagle3lab convert {fix.path} --to {fmt} {path} --target {target}"
        key = inspect_checkpoint(path, num_target_layers=n).aux_ids.key or "-"
        out[engine] = ServedCopy(engine, path, fmt, ids, key, command)
    return out


def fix_words(fix: ServedFix, num_layers: int, copies: dict[str, ServedCopy] | None = None,
              ladder: CaseLadder | None = None) -> str:
    """Where the rewritten checkpoint lies and what it holds; each conversion ``copies`` made for another engine
    (the command, where the ids went) and, where that engine ignores the trained rule (the ``ladder``'s own
    rungs say so), the tau it would serve at against the tau of the rungs that read the rule."""
    text = (f"The rewritten checkpoint ({fix.format} format, ids {fix.written.aux_ids_written}, "
            f"{', '.join(f'{k}={v}' for k, v in fix.written.flags_written.items())}) is at {fix.path}")
    converted = [c for c in (copies or {}).values() if c.command]
    if not converted:
        other = "sglang" if fix.format != "sglang" else "speculators"
        return text + (f"; `eagle3lab convert {fix.path} --to {other} OUT --num-target-layers {num_layers}` writes "
                       f"it in {other}'s format (docs/cli/convert.md).")
    for c in converted:
        text += (f"; for {c.engine}, `{c.command}` wrote it in {c.format}'s format at {c.path} (ids {c.ids} at "
                 f"{c.key}, where {c.engine} reads them; docs/cli/convert.md)" + _rule_caveat(c.engine, fix, ladder))
    return text + "."


def _rule_caveat(engine: str, fix: ServedFix, ladder: CaseLadder | None) -> str:
    """Where ``engine`` climbed the ``ladder`` ignoring the trained rule the checkpoint writes: the tau it serves the
    fix at (the rungs with the trained points fed, the rule ignored) against the rungs that read the rule, and
    which engine reads it, every number from the run."""
    if ladder is None or not fix.written.flags_written.get("norm_before_residual"):
        return ""
    by = {r.name: r for r in ladder.rungs}
    ids, rule, whole = (by[RUNG_NAMES[k]] for k in ("ids", "rule", "whole"))
    if ids.state.engine != engine or ids.state.rule == whole.state.rule or not (ids.ran and rule.ran and whole.ran):
        return ""
    from eagle3lab.engines.profiles import NEWEST_READ, honours_at

    newest = NEWEST_READ[engine]
    reads = "norm_before_residual" in honours_at(engine, newest)

    def numbers(*named: Rung) -> str:        # the rungs sharing one measurement, as the tables number them
        return "-".join(dict.fromkeys(str(i + 1) for i, r in enumerate(ladder.rungs)
                                      if r.measured_as in {n.measured_as for n in named}))

    said = (f"{engine} {ids.state.build or 'newest'} ignores norm_before_residual (the newest {engine} read, "
            f"{newest}, reads it)" if reads else f"no {engine} release reads norm_before_residual")
    k = ids.state.num_steps         # the team's chain, the rungs' own: the launched chain is another rung's
    return (f", but {said} (the converted config writes it, {engine} ignores it): served by {engine} the fixed draft "
            f"runs as rungs {numbers(ids)} do, the trained points fed and the rule ignored (tau {ids.tau} at "
            f"{steps(k)}), not at rungs {numbers(rule, whole)}'s {whole.tau} with the rule read at the same chain "
            f"(rung {numbers(rule)} emulates a patched {engine} no release ships); {whole.state.engine} reads the rule "
            f"and serves it at that tau (rung {numbers(whole)})")


RUNG_NAMES = {"launched": "as launched", "flags": "flags as the team fixed them", "team": "the team's ids",
              "ids": "ids for the top-scoring wiring", "rule": "the trained rule",
              "whole": "a checkpoint and engine that serve all of it", "chain": "chain length to launch"}


def chain_note(chain: int, choice: ChainChoice | None) -> str:
    """Where the launched chain comes from, in the run's numbers: ``FIX_STEPS`` or the cost model's top projection,
    and the set the cost model cannot tell apart from the fastest (``choice``; None: no round costs timed)."""
    if choice is None:
        return f"{steps(chain)} (FIX_STEPS; no round costs timed to price chains with)"
    near = choice.within_noise
    run = len(near) > 1 and near == list(range(near[0], near[-1] + 1))
    named = f"{near[0]}-{near[-1]}" if run else ", ".join(str(k) for k in near)
    where = ("the cost model's pick" if near == [chain] else
             f"{'in' if chain in near else 'not in'} the cost model's set {named} within noise")
    return f"{steps(chain)} ({'FIX_STEPS; ' if choice.launched else 'the top projection; '}{where})"


def case_rungs(draft, *, engine: str, build: str | None, launched, served, flag_code: str, retry_steps: int,
               chain: int, chain_choice: ChainChoice | None, team, trained: IdsFor, rule: bool,
               fix: ServedFix) -> list[Rung]:
    """Notebook 06's seven rungs, one knob a rung, in the order the team's history went, each naming the finding
    that motivated it: as launched (``launched``: the flag resolver's reading, ``served``: the ids as written and
    what the build feeds); the chain the team retried (``retry_steps``); the team's ids on that chain, where the
    team measured them (``team``: what the build does with them); the ids for the top-scoring wiring (``trained``);
    the trained rule (emulated as a patched draft model where the engine ignores it); a checkpoint and engine that
    serve all of it (``fix``); last, the chain to launch (``chain``, worded by ``chain_note``), which the team never
    ran: a choice of step 4's, not an engine's finding (``flag_code`` is the launch engine's, not the serving one's),
    so that rung names none."""
    eff, engine_rule = launched.effective, draft.under(engine).settings.norm_before_residual

    def on(state: RunState, name: str, finding: str, note: str, wiring: tuple | None = None) -> Rung:
        # the rule forced only where it is not the engine's own: the patched draft model that rung emulates
        forced = {} if state.rule == engine_rule else {"norm_before_residual": state.rule}
        return Rung(name, state, finding, note, draft.rewired(aux_resid=wiring or state.wiring, **forced))

    s0 = RunState(True, tuple(served.resid), {"norm_before_residual": engine_rule}, eff["num_steps"], engine=engine,
                  build=build, num_draft_tokens=eff["num_draft_tokens"], ids=tuple(served.ids_as_written or ()),
                  checkpoint=draft.load_report.format)
    s1 = replace(s0, num_steps=retry_steps, num_draft_tokens=retry_steps + 1)
    s2 = replace(s1, ids=tuple(team.ids_as_written or ()), wiring=tuple(team.resid), runs=not team.fatal)
    s3 = replace(s2, ids=tuple(trained.ids or ()), wiring=trained.wiring if trained.ids else (),
                 runs=trained.ids is not None)
    s4 = replace(s3, variant={"norm_before_residual": rule})
    s5 = RunState(True, tuple(fix.reading.resid), {"norm_before_residual": fix.draft.settings.norm_before_residual},
                  retry_steps, engine=fix.engine, num_draft_tokens=retry_steps + 1,
                  ids=tuple(fix.written.aux_ids_written), checkpoint=fix.written.format)
    s6 = replace(s5, num_steps=chain, num_draft_tokens=chain + 1)
    return [
        on(s0, RUNG_NAMES["launched"], "the complaint", served.label),
        on(s1, RUNG_NAMES["flags"], flag_code, f"cap lifted: accept length up to {retry_steps + 1}"),
        on(s2, RUNG_NAMES["team"], "WIRING", (team.fatal[0] if team.fatal else f"feeds {team.label}")
           + f" (on the team's {steps(retry_steps)}, where it measured them)"),
        on(s3, RUNG_NAMES["ids"], "WIRING", f"ids {trained.ids} feed {resid_label(trained.wiring)}"
           if trained.ids else f"no ids: {trained.why}", wiring=trained.wiring),
        on(s4, RUNG_NAMES["rule"], "FIRST_LAYER_RULE", "the engine reads the rule" if engine_rule == rule else
           f"{engine} ignores norm_before_residual in every build read: emulated as a patched draft model"),
        Rung(RUNG_NAMES["whole"], s5, "FIRST_LAYER_RULE",
             f"{fix.format} checkpoint, {fix.engine} feeds {fix.reading.label} and reads the rule", fix.draft),
        Rung(RUNG_NAMES["chain"], s6, "", chain_note(chain, chain_choice), fix.draft),
    ]


def decode_rungs(target, rungs: list[Rung], prompts, *, max_new_tokens: int, repeats: int, trainer: dict | None = None,
                 progress: bool = False, speed_kind: str = "e2e") -> CaseLadder:
    """The ladder climbed decoded and timed (``doctor.ladder.Decoded``: every runnable state in one interleaved
    sweep), each rung read against the previous run rung by ``doctor.ladder.climb``."""
    meter = Decoded(target, prompts, max_new_tokens=max_new_tokens, repeats=repeats, speed_kind=speed_kind,
                    progress=progress)
    dtype = str(next(target.model.parameters()).dtype)
    return CaseLadder(climb(meter, rungs), meter, repeats, str(getattr(target, "device", "cpu")), dtype,
                      trainer or {}, speed_kind)


def score_rungs(bank, rungs: list[Rung], *, trainer: dict | None = None, scored_on: str, untimed: str,
                batch_size: int = 2) -> CaseLadder:
    """The same rungs scored teacher-forced on ``bank`` (a dump's states: no target to decode or time with;
    ``doctor.ladder.TeacherForced``): each distinct state's draft as its engine runs it, fed what that build
    feeds, over the chain its flag line lets it accept; a rung fed a point the bank lacks is not run, saying which.
    ``scored_on``: what the bank is, for the words; ``untimed``: why no tokens/s."""
    meter = TeacherForced(bank, batch_size=batch_size, scored_on=scored_on)
    weight = rungs[0].draft.fc.weight
    return CaseLadder(climb(meter, rungs), meter, 0, str(weight.device), str(weight.dtype), trainer or {}, None,
                      scored_on=scored_on, untimed=untimed)


def climb_case(source, rungs: list[Rung], *, bank, prompts, max_new_tokens: int, repeats: int,
               trainer: dict | None) -> CaseLadder | None:
    """Step 4 in the source's mode: decoded and timed with a loaded target, teacher-forced on a dump's ``bank``,
    skipped (saying so) from the config alone."""
    if source.live:
        return decode_rungs(source.target, rungs, prompts, max_new_tokens=max_new_tokens, repeats=repeats,
                            trainer=trainer)
    if bank is None:
        source.skip(SKIPS["ladder"])
        source.skip(SKIPS["decode"])
        return None
    source.skip(SKIPS["decode"])
    return score_rungs(bank, rungs, trainer=trainer, scored_on=f"the {bank.source} ({len(bank.lengths)} prompts)",
                       untimed=f"{source.mode} mode, {source.why}")


def flag_line(engine: str, num_steps: int, draft: str = "DRAFT", batch: int = SERVED["batch"]) -> str:
    """The speculative part of a launch command for a chain of ``num_steps`` (topk 1), with the batch it is
    sized for: SGLang resets an unset ``--max-running-requests`` to 48 under speculation (step 1's finding),
    vLLM's ``--max-num-seqs`` is its counterpart."""
    if engine == "sglang":
        return (f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {draft} --speculative-num-steps "
                f"{num_steps} --speculative-eagle-topk 1 --speculative-num-draft-tokens {num_steps + 1} "
                f"--max-running-requests {batch}")
    return (f"--max-num-seqs {batch} --speculative-config '{{\"method\": \"eagle3\", \"model\": \"{draft}\", "
            f"\"num_speculative_tokens\": {num_steps}}}'")


@dataclass(frozen=True)
class BuildCheck:
    """One engine build against the trained wiring and rule: the ids it writes for the wiring (None: none, and
    ``why``), whether it honours the rule, what the team's ids do there (None: none given)."""

    engine: str
    build: str | None
    ids: list | None
    why: str
    honours_rule: bool
    team: str | None = None

    @property
    def label(self) -> str:
        return f"{self.engine} {self.build or 'newest'}"

    def cannot(self, trained: tuple) -> list[str]:
        return ([f"the ids for {resid_label(trained)} ({self.why})"] if self.ids is None else []) + (
            [] if self.honours_rule else ["norm_before_residual (ignored in every build read)"])

    def options(self, checks: list[BuildCheck]) -> str:
        """What is left where this build cannot serve the draft whole (``checks``: every build checked)."""
        if self.ids is not None and self.honours_rule:
            return "serve as it is"
        opts = []
        if self.ids is None:
            later = [c.build or "newest" for c in checks if c.engine == self.engine and c.ids is not None]
            opts.append(f"a build with ids ({', '.join(later)})" if later else
                        "no build read has ids for these points: retrain on points it captures (the reason names them)")
        if not self.honours_rule:
            opts += ["retrain with norm_before_residual off", "patch the engine's draft model to read the flag"]
        whole = [c.label for c in checks if c.ids is not None and c.honours_rule]
        if whole:
            opts.append("serve with " + " or ".join(whole))
        return "; ".join(opts)


def check_build(engine: str, version: str | None, trained: tuple, rule: bool, num_layers: int, arch: str | None,
                honours_rule: bool, team_ids: list | None) -> BuildCheck:
    """``BuildCheck`` of one build, from the engine knowledge (``engines.layer_ids``)."""
    from eagle3lab.engines.layer_ids import resolve_aux_layers, to_engine_ids
    from eagle3lab.errors import UncapturablePoints

    try:
        ids, why = to_engine_ids(engine, list(trained), num_layers, arch=arch, engine_version=version), ""
    except UncapturablePoints as e:
        ids, why = None, "; ".join(e.tried)
    except Eagle3LabError as e:
        ids, why = None, e.headline
    team = None if team_ids is None else _what_ids_do(
        resolve_aux_layers(engine, list(team_ids), num_layers, arch=arch, engine_version=version), team_ids)
    return BuildCheck(engine, version, ids, why, not rule or honours_rule, team)


def checklist(trained: tuple, rule: bool, num_layers: int, arch: str | None, builds: dict[str, list], num_steps: int,
              honours_rule: dict[str, bool], id_keys: dict[str, str], draft: str | dict[str, str] = "DRAFT",
              team_ids: dict[str, list] | None = None) -> pd.DataFrame:
    """Per engine and build: the ids for the trained wiring in that engine's numbering (and where it reads
    them), the flag line, what it cannot honour (with the engine knowledge's reason: which model file, which
    releases), and the options left. ``draft``: the checkpoint folder the flag lines load, one for every engine or
    engine -> folder (each engine its own format: ``served_copies``). ``team_ids``: engine -> ids a team wrote for
    it; a column says what each build does with them (the states it feeds, or how it crashes or drops one)."""
    checks = [check_build(engine, version, trained, rule, num_layers, arch, honours_rule[engine],
                          (team_ids or {}).get(engine)) for engine, versions in builds.items() for version in versions]
    rows = []
    for c in checks:
        team = {"the team's ids do": c.team or ""} if team_ids else {}
        line = flag_line(c.engine, num_steps, draft if isinstance(draft, str) else draft[c.engine])
        # a flag line only where the ids feed the trained points (the folder would feed others); where the rule is
        # ignored the line serves the draft as trained only after a retrain with the rule off or on a patched engine
        line = (line if c.honours_rule else "after a retrain with norm_before_residual off (into this folder) or on a "
                f"patched engine (the rule is ignored here): {line}")
        rows.append({"engine": c.engine, "build": c.build or "newest", "ids": c.ids, **team, "read at": id_keys[c.engine],
                     "flag line": line if c.ids is not None else "none: no ids feed the trained points here (options left)",
                     "cannot honour": "; ".join(c.cannot(trained)) or "nothing", "options left": c.options(checks)})
    return pd.DataFrame(rows).set_index(["engine", "build"])


def _what_ids_do(res, ids) -> str:
    """What a build does with ``ids``: the states it feeds, or what it would read and why that fails."""
    if res.fatal:
        return f"{list(ids)} would feed {res.label}, but: {res.fatal[0]}"
    return f"{list(ids)} feed {res.label}"


def chain_tau(agree: list[float], k: int) -> float:
    """tau of a ``k``-chain from teacher-forced agreement per step: 1 + the running products of the first ``k``."""
    import math

    return 1 + sum(math.prod(agree[:j + 1]) for j in range(k))


def pick_chain(costs, agree: list[float]) -> tuple[int, pd.DataFrame]:
    """The chain length the cost model projects fastest for a draft accepted as ``agree`` says (the
    trainer's teacher-forced agreement per step): tau of a K-chain is 1 + the running products of the first
    K agreements, priced with the measured ``costs`` (``CostModel.project``). Only the chains the trainer
    measured (K up to ``len(agree)``) are priced."""
    rows, speedup = [], {}
    for k in range(1, len(agree) + 1):
        tau = chain_tau(agree, k)
        p = costs.project(tau, k)
        speedup[k] = p.speedup
        rows.append({"num_steps": k, "tau (from the trainer's agreement)": tau, "round cost": p.round_cost,
                     "projected speedup": p.speedup})
    # the first fastest, read from the projections (the frame is for display)
    return max(speedup, key=speedup.get), pd.DataFrame(rows).set_index("num_steps")


def steps(k: int) -> str:
    """``1 step``, ``4 steps``."""
    return f"{k} step" if k == 1 else f"{k} steps"


@dataclass
class ChainChoice:
    """Which chain lengths the cost model cannot tell apart from the fastest, on costs timed ``repeats`` times.

    One cost model's pick rides on the machine's load (on this 2-core machine it moved between 1, 2 and 4
    steps from run to run). Each repeat prices every chain K (tau from the trainer's agreement, the same in every
    repeat); K's projected speedup over the best's is a ratio paired over the repeats (each repeat prices
    both on the same timings), with a bootstrap interval. ``within_noise``: the chains whose interval reaches
    1, the best among them: the verdict the load does not decide. Only the costs vary: the trainer's agreement
    comes without counts, so its own uncertainty is not in the interval."""

    projected: pd.DataFrame        # repeat x num_steps -> projected speedup over no speculation
    taus: dict                     # num_steps -> tau from the trainer's agreement
    launched: int | None           # the chain the parameters launch (None: the best)

    @property
    def repeats(self) -> int:
        return len(self.projected)

    @property
    def best(self) -> int:
        """The fastest projection pooled over the repeats."""
        return int(self.projected.sum().idxmax())

    def against_best(self, k: int) -> Interval:
        p = self.projected
        return bootstrap_ratio(p[k].tolist(), p[self.best].tolist())

    @property
    def within_noise(self) -> list[int]:
        return [k for k in self.projected.columns if self.against_best(k).high >= 1]

    @property
    def chain(self) -> int:
        return self.launched or self.best

    @property
    def launched_within_noise(self) -> bool:
        return self.chain in self.within_noise

    @property
    def mean_projected(self) -> list[float]:
        """Each chain's projected speedup over no speculation, mean of the repeats (num_steps 1, 2, ...)."""
        return [float(self.projected[k].mean()) for k in self.projected.columns]

    def fastest(self) -> str:
        """The fastest set named: one chain alone, else every chain within noise of the top projection (no "best"
        inside the noise)."""
        near = self.within_noise
        if len(near) == 1:
            return steps(near[0])
        each = "within noise of each other" if len(near) == 2 else f"each within noise of {steps(self.best)}"
        return f"{', '.join(str(k) for k in near)} steps, {each}"

    def table(self) -> pd.DataFrame:
        rows = []
        for k in self.projected.columns:
            col, iv = self.projected[k], self.against_best(k)
            rows.append({"num_steps": int(k), "tau (from the trainer's agreement)": round(self.taus[k], 3),
                         "projected speedup (mean of repeats)": round(col.mean(), 3),
                         "lowest - highest": f"{col.min():.2f} - {col.max():.2f}",
                         "over the top projection (95%)": ratio_text(iv),
                         "verdict": f"fastest: {self.fastest()}" if k in self.within_noise else "slower than the top projection",
                         "launched": "yes" if k == self.chain else ""})
        return pd.DataFrame(rows).set_index("num_steps")

    def words(self) -> str:
        best = self.projected[self.best].mean()
        top = f"{best:.2f}x decode over no speculation, mean of the repeats"
        launch = (f"the launched {steps(self.chain)} " + ("is" if self.launched_within_noise else "is NOT")
                  + " in that set" + ("" if self.launched else " (the top projection itself)"))
        longest = max(self.projected.columns)
        # the trainer's agreement stops at the longest priced chain: one longer may be faster, unpriced
        edge = longest in self.within_noise
        priced = " priced" if edge else ""
        if len(self.within_noise) == 1:
            head = f"the fastest chain{priced} is {steps(self.best)} ({top}), no other chain within noise of it"
        else:
            head = f"the fastest chains{priced} are {self.fastest()} (the top projection {steps(self.best)}, {top})"
        beyond = (f"; the set reaches the longest chain priced ({steps(longest)}, as far as the trainer's agreement "
                  "reaches), so a longer chain may be faster still: measure longer ones" if edge else "")
        return f"Projected on costs timed {self.repeats} times, {head}; {launch}{beyond}"

    def claims(self) -> dict:
        return {"best": self.best, "within_noise": [int(k) for k in self.within_noise], "chain": self.chain,
                "launched": self.launched, "launched_within_noise": self.launched_within_noise,
                "repeats": self.repeats, "taus": {int(k): v for k, v in self.taus.items()},
                "projected": {int(k): self.projected[k].tolist() for k in self.projected.columns},
                "against_best": {int(k): [iv.value, iv.low, iv.high] for k in self.projected.columns
                                 for iv in [self.against_best(k)]}}


def choose_chain(costs_runs, agree: list[float], launched: int | None = None) -> ChainChoice:
    """Every chain the trainer measured (K up to ``len(agree)``) priced on each of ``costs_runs`` (``CostModel``
    timed independently, one per repeat): the fastest, and the chains within noise of it."""
    if len(costs_runs) < 2:
        raise bad_input("choose_chain", "costs_runs", "at least two timed cost models (to say what is noise)",
                        len(costs_runs))
    ks = range(1, len(agree) + 1)
    taus = {k: chain_tau(agree, k) for k in ks}
    projected = pd.DataFrame([{k: c.project(taus[k], k).speedup for k in ks} for c in costs_runs])
    projected.index.name = "repeat"
    return ChainChoice(projected, taus, launched)


def candidates_held(bank, draft) -> tuple[dict, list]:
    """Step 3's candidate wirings (``diagnosis.wiring_hypotheses``) that ``bank`` holds every point of, and those
    it does not (a dump need not hold every resid[k]: the cluster dumps what it was asked to), each left-out one
    as ``(label, missing points)``."""
    from eagle3lab.analysis.diagnosis import wiring_hypotheses

    held, left_out = {}, []
    for wiring, why in wiring_hypotheses(draft, bank.num_layers).items():
        missing = [k for k in wiring if k not in bank.points]
        if missing:
            left_out.append((resid_label(wiring), resid_label(missing)))
        else:
            held[wiring] = why
    return held, left_out


def stated_wiring(draft, trained_resid, trained_rule, num_layers: int) -> tuple[tuple, bool, str]:
    """Without states to score the candidates on (config-only mode): the wiring and rule the checklist serves,
    as stated (``TRAINED_RESID`` / ``TRAINED_NORM_BEFORE_RESIDUAL``), else the checkpoint's own word: the wiring
    its format's trainer reads its ids as, and the flag its config writes. The third item says which."""
    from eagle3lab.models.checkpoint import trained_resid as format_reading

    if trained_resid is not None:
        wiring, said = tuple(int(k) for k in trained_resid), "as stated (TRAINED_RESID)"
    else:
        claimed, trainer = format_reading(draft, num_layers)
        if claimed is None:
            raise bad_input("parameters", "TRAINED_RESID", "the wiring the draft's trainer fed (config-only mode: no "
                            "states to find it from)", None, "The checkpoint's ids say nothing its trainer reads.")
        wiring, said = tuple(claimed), f"as {trainer.engine} (the checkpoint format's trainer) reads its ids"
    if trained_rule is not None:
        rule, rule_said = bool(trained_rule), "as stated (TRAINED_NORM_BEFORE_RESIDUAL)"
    else:
        rule, rule_said = bool(draft.config.norm_before_residual), "as the draft's config writes it"
    return wiring, rule, (f"{resid_label(wiring)} {said}, norm_before_residual={rule} {rule_said}; not scored "
                          "(no states)")


def case_summary(ladder: CaseLadder | None, *, chain: ChainChoice | None, fix_steps: int, serve_engine: str,
                 real: dict | None = None, mode: str = LIVE, target: str = "", wiring: str = "") -> tuple[str, dict]:
    """Notebook 06's summary: (text, claims), every number and word in the text read from the claims.
    ``chain``: the chain verdict (None without a training record or a loaded target); ``fix_steps``: the chain
    launched; ``real``: ``eagle3lab serve-check --json``'s report when the real engine served the last rung;
    ``mode``: the target source's (live / dump / config-only), ``target`` its name; ``wiring``: config-only, what
    the checklist serves (``stated_wiring``'s words). A dump-mode ``ladder`` is ``score_rungs``'; config-only has
    none."""
    skips = skipped(mode)
    head = (f"**{mode.capitalize()} mode** ({target}" + ("; nothing skipped). " if not skips else
                                                         f"; skipped: {'; '.join(skips)}). "))
    if ladder is None:
        text = (head + f"From the config alone nothing was scored, decoded or timed: the checklist answers per engine "
                f"and build for the trained wiring {wiring}, with a chain of {steps(fix_steps)}.")
        claims = dict(mode=mode, skipped=skips, ladder=None, lossless=None, chain=fix_steps, chain_choice=None,
                      real_vllm_verdict=None, real_vllm_tau=None)
        return text, claims
    if ladder.decoded:
        text = head + _decoded_words(ladder, chain, fix_steps)
    else:
        overall = ladder.overall()
        text = (head + f"The ladder, one change a rung, scored teacher-forced on {ladder.scored_on} (no rung decoded or "
                f"timed: {ladder.untimed}):\n\n{ladder.words()}\n\nFrom as launched to the last rung tau changed by "
                f"{overall} (**{interval_word(overall)}** as launched, teacher-forced). The chain to launch is set to "
                f"{steps(fix_steps)} (FIX_STEPS: no round costs timed without the target)")
    t, last = ladder.trainer, ladder.run[-1]
    if t:
        where = "the served interval" if ladder.decoded else "the last rung's teacher-forced interval"
        text += (f". The trainer's teacher-forced agreement implies tau {t['tau_implied']:.2f} (its own estimate "
                 f"{t['tau_est']:.2f}), {ladder.against_served(t['tau_implied'])} {where} {last.tau}")
    if real is not None:
        engine = real["engine"]
        agrees = real["verdict"] == "AGREES"
        text += (f"; served by the real {engine} {real['engine_version']} ({real['engine_platform']} build): tau "
                 f"{real[engine]['tau']:.2f}, its counters "
                 + ("equal to eagle3lab's emulation" if agrees else
                    f"DIFFERENT from eagle3lab's emulation ({', '.join(real['differs'])})"))
    elif ladder.decoded:
        text += f" (the real {serve_engine} is not installed here: emulated only)"
    claims = dict(mode=mode, skipped=skips, ladder=ladder.claims(), lossless=ladder.lossless, chain=fix_steps,
                  chain_choice=None if chain is None else {**chain.claims(),
                                                           "best_speedup": float(chain.projected[chain.best].mean())},
                  real_vllm_verdict=real["verdict"] if real else None,
                  real_vllm_tau=real[real["engine"]]["tau"] if real else None)
    return text + ".", claims


def lifted_cap_words(ladder: CaseLadder | None) -> str:
    """The decoded ladder's first rung that changes the flags, in the words of the seed's record (lifting the cap
    made the seed's server slower): its tau change and its speed against the rung before, and why where they agree;
    "" where no such rung was timed."""
    timed = [i for i, r in enumerate(ladder.rungs) if "flags" in r.changed and r.step_speed is not None] if ladder else []
    if not timed:
        return ""
    i = timed[0]
    r = ladder.rungs[i]
    text = (f"The ladder's rung {i + 1} ({r.name}) takes the same step on the bundled case: tau changes by "
            f"{gain_text(r.gain)} ({r.word}{BEFORE.get(r.word, '')} the rung before) and the speed ({ladder.kind}) is "
            f"{ratio_text(r.step_speed)} the rung before's ({r.step_verdict})")
    trained = ladder.rungs[-1].state.fed        # the last rung serves the draft whole
    if r.step_verdict == "slower" and r.word != "beats" and tuple(r.state.fed) != tuple(trained):
        text += (f", as in the seed's record: the longer chain pays a draft pass per step for drafts rarely accepted "
                 f"while the draft is fed {resid_label(r.state.fed)}, not the {resid_label(trained)} it was trained on")
    return text + "."


def with_the_seed(toy: tuple[str, dict], *, step3: WiringVerdict | None, projection: ProjectionCheck | None,
                  fix: ServedFix, num_layers: int, seed, ladder: CaseLadder | None = None,
                  copies: dict[str, ServedCopy] | None = None) -> tuple[str, dict]:
    """The summary whole: the bundled case's words (``case_summary``), step 3's verdict against the runner-up, the
    projection against the measurement, where the rewritten checkpoint lies and its ``copies`` for other engines
    (``fix_words``), then the seed's own target
    (``seed_case.SeedAnswer``; None: not asked), its record set beside the ``ladder``'s rung that takes the same step
    (``lifted_cap_words``)."""
    text, claims = toy
    parts = [text]
    if step3 is not None:
        parts.append(f"Step 3 (teacher-forced on the as-trained set): {step3.words()}")
    if projection is not None:
        parts.append(projection.words() + ".")
    parts.append(fix_words(fix, num_layers, copies, ladder))
    if seed is not None:
        parts.append(seed.words(echo=lifted_cap_words(ladder)))
    claims = {**claims, "step3": None if step3 is None else step3.claims(),
              "projection": None if projection is None else projection.claims(), "fix_path": fix.path,
              "copies": {e: {"path": c.path, "format": c.format, "ids": c.ids, "key": c.key, "command": c.command}
                         for e, c in (copies or {}).items()},
              "seed": None if seed is None else seed.claims()}
    return "\n\n".join(parts), claims


def _decoded_words(ladder: CaseLadder, chain: ChainChoice | None, fix_steps: int) -> str:
    """The decoded ladder's words: the symptom, each rung, the overall change, the chain verdict."""
    first, last = ladder.run[0], ladder.run[-1]
    overall = ladder.overall()
    kind = "end to end" if ladder.speed_kind == "e2e" else "decode"
    text = (f"As launched the draft was **{ladder.speed_word(first)}** ({ratio_text(first.speed)} {kind}, "
            f"tau {first.tau}) while every output stayed " + ("token-identical" if ladder.lossless else "NOT identical")
            + f". The ladder, one change a rung, decoded in one run:\n\n{ladder.words()}\n\n"
            f"From as launched to the last rung tau changed by {overall} (**{interval_word(overall)}** as launched), "
            f"and the last rung runs {ratio_text(last.speed)} no speculation {kind}: **{ladder.speed_word(last)}**")
    if chain is not None:
        text += (f". {chain.words()}" + (" (the cost model's pick)" if chain.launched is None else
                                         f" (FIX_STEPS = {fix_steps})"))
    else:
        text += f". The chain to launch is set to {fix_steps} steps (no training record to price chains with)"
    return text


# ------------------------------------------------------------------ step 5b: the real engine as the judge


def serve_check_argv(fix: ServedFix, *, target, prompts, num_steps: int, max_new_tokens: int) -> list[str]:
    """``eagle3lab serve-check --json`` on the written checkpoint, as a subprocess's arguments (the real engine runs
    in its own environment), with ``prompts`` written beside the checkpoint."""
    import sys

    prompt_file = Path(fix.path).parent / "prompts.jsonl"
    prompt_file.write_text("".join(json.dumps({"text": p} if isinstance(p, str) else {"ids": p}) + "\n"
                                   for p in prompts))
    return [sys.executable, "-c", "import sys; from eagle3lab.app.cli import main; sys.exit(main())",
            "serve-check", "--engine", fix.engine, "--target", str(target), "--draft", fix.path,
            "--prompts", str(prompt_file), "--num-steps", str(num_steps), "--max-new-tokens", str(max_new_tokens),
            "--json"]


def real_counters(real: dict) -> pd.DataFrame:
    """serve-check's report (``--json``): the real engine's own counters beside eagle3lab's prediction."""
    engine = real["engine"]
    rows = {f"{engine} (real, its counters)": real[engine], "eagle3lab (emulated)": real["eagle3lab"]}
    out = pd.DataFrame(rows).T[["num_drafts", "num_draft_tokens", "num_accepted_tokens", "tau", "accepted_per_pos"]]
    return out.assign(tau=[round(float(t), 3) for t in out["tau"]])     # at 3 digits, as every tau here


def real_words(real: dict) -> str:
    """The verdict of serve-check's report and its lossless check, in one line."""
    ti = real["token_identity"]
    return (f"{real['engine']} {real['engine_version']} ({real['engine_platform']} build): verdict {real['verdict']}; "
            f"with the draft identical to no speculation on {ti['vllm_spec_vs_vllm_plain']}/{ti['prompts']} prompts")
