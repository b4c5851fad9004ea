"""A case file's ladder: one served configuration changed one knob at a time, every rung decoded, and the
words ("beats", "within noise", "loses") read from each rung's intervals.

A rung is a :class:`RungState` (engine, build, flag line, ids, what the build feeds, first-layer rule,
checkpoint format) and the doctor finding that motivated its change. :func:`climb` decodes every distinct
state that the build can run in ONE interleaved :func:`~eagle3lab.analysis.benchmark.decode_sweep`
(the machine's noise hits all rungs alike) and returns a :class:`CaseLadder`, whose ``table()``,
``plot()``, ``words()`` and ``claims()`` a notebook cell calls once each.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

import pandas as pd

from eagle3lab.analysis.cost_model import verdict as speed_verdict
from eagle3lab.analysis.verdicts import word_of
from eagle3lab.engines.acceptance import Interval, simulated_acc_len
from eagle3lab.engines.layer_ids import resid_label

KNOBS = ("engine", "flags", "wiring", "rule")   # what a user turns: ids count by the wiring they feed (a new
# engine writes the same wiring in its own numbering)


@dataclass(frozen=True)
class RungState:
    """What runs on one rung. ``fed``: the canonical resid points the build feeds for ``ids``;
    ``rule``: norm_before_residual as the engine runs it; ``runs``: False when the build cannot run it."""

    engine: str
    build: str | None
    num_steps: int
    num_draft_tokens: int
    ids: tuple
    fed: tuple
    rule: bool
    checkpoint: str
    runs: bool = True

    def knobs(self) -> dict:
        return {"engine": (self.engine, self.build, self.checkpoint), "flags": (self.num_steps, self.num_draft_tokens),
                "wiring": self.fed, "rule": self.rule}

    def changed(self, other: RungState) -> tuple[str, ...]:
        mine, theirs = self.knobs(), other.knobs()
        return tuple(k for k in KNOBS if mine[k] != theirs[k])

    def key(self) -> tuple:
        """Two states with one key decode alike (ids matter only through what they feed)."""
        return (self.engine, self.num_steps, self.num_draft_tokens, self.fed, self.rule)


@dataclass
class RungSpec:
    """A rung before it is measured: its name, the state, the finding that motivated it, what the build
    does with it (``note``), the draft to decode with and the decode_sweep keywords."""

    name: str
    state: RungState
    finding: str
    note: str = ""
    draft: object = None
    profile: str | None = None


@dataclass
class Rung:
    name: str
    state: RungState
    finding: str
    note: str
    changed: tuple[str, ...]
    measured_as: str | None         # the rung whose decoding this rung shares (same key), None if not run
    tau: Interval | None = None
    gain: Interval | None = None    # tau minus the previous run rung's, paired over prompts
    e2e_tps: float = float("nan")
    speedup: float = float("nan")   # over no speculation, end to end
    identical: str = ""
    word: str = ""                  # beats / within noise / loses / not run / no change / start

    def change_text(self) -> str:
        return ", ".join(self.changed) or "nothing"


SPEED_WORDS = {"wins": "faster than no speculation", "loses": "slower than no speculation",
               "breaks even": "no faster than no speculation (within 5%)"}
STEP_WORDS = {"wins": "faster than the rung before", "loses": "slower than the rung before",
              "breaks even": "as fast as the rung before (within 5%)"}


def interval_word(diff: Interval | None) -> str:
    """``verdicts.word_of`` ("beats" / "within noise" / "loses"), or "not run" for a rung not measured."""
    return "not run" if diff is None else word_of(diff)


@dataclass
class CaseLadder:
    rungs: list[Rung]
    sweep: object                  # the DecodeSweep every run rung came from
    repeats: int
    device: str
    dtype: str
    trainer: dict = field(default_factory=dict)

    # -------------------------------------------------------------- reading
    def rung(self, name: str) -> Rung:
        return next(r for r in self.rungs if r.name == name)

    @property
    def run(self) -> list[Rung]:
        return [r for r in self.rungs if r.tau is not None]

    def overall(self) -> Interval:
        """The last run rung's tau minus the first's (paired)."""
        first, last = self.run[0], self.run[-1]
        return self.sweep.tau_difference(last.measured_as, first.measured_as)

    def speed_word(self, rung: Rung) -> str:
        """Against no speculation, by the workbook's 5% rule (medians of ``repeats`` timings)."""
        return SPEED_WORDS[speed_verdict(rung.speedup, 1.0)]

    def step_speed_word(self, rung: Rung, before: Rung) -> str:
        return STEP_WORDS[speed_verdict(rung.e2e_tps / before.e2e_tps, 1.0)]

    def table(self) -> pd.DataFrame:
        rows = []
        for i, r in enumerate(self.rungs):
            s = r.state
            rows.append({"rung": f"{i}. {r.name}", "changes": r.change_text(), "finding": r.finding,
                         "engine": f"{s.engine} {s.build or 'newest'}", "flags": f"{s.num_steps} steps, "
                         f"{s.num_draft_tokens} verified", "ids": list(s.ids), "feeds": resid_label(s.fed),
                         "norm_before_residual": s.rule, "checkpoint": s.checkpoint,
                         "tau": float("nan") if r.tau is None else r.tau.value,
                         "tau 95%": "" if r.tau is None else f"[{r.tau.low:.2f}, {r.tau.high:.2f}]",
                         "change in tau": "" if r.gain is None else str(r.gain),
                         "verdict": r.word, "e2e tok/s": r.e2e_tps, "x no spec": r.speedup,
                         "lossless": r.identical, "what the build does": r.note})
        return pd.DataFrame(rows).set_index("rung")

    def trainer_table(self) -> pd.DataFrame:
        """The trainer's teacher-forced agreement per step and the tau it implies, beside the served tau of
        the last rung (decoding) and its interval."""
        t, last = self.trainer, self.run[-1]
        if not t:
            return pd.DataFrame()
        return pd.DataFrame([
            {"source": "trainer (teacher-forced, held-out)", "agreement per step": t["agree"],
             "tau": t["tau_est"], "how": "trainer's tau_est: 1 + mean leading agreeing steps"},
            {"source": "trainer (teacher-forced, held-out)", "agreement per step": t["agree"],
             "tau": t["tau_implied"], "how": "1 + sum of running products of the agreements (SpecForge acc_i)"},
            {"source": f"served: {last.name}", "agreement per step": "",
             "tau": last.tau.value, "how": f"decoded, {last.state.num_steps}-step chain, 95% {last.tau}"},
        ]).set_index("source").assign(**{"against the served interval": [
            self.against_served(t["tau_est"]), self.against_served(t["tau_implied"]), ""]})

    def against_served(self, tau: float) -> str:
        """Where a tau (the trainer's) lies against the last rung's interval."""
        iv = self.run[-1].tau
        return "inside" if tau in iv else "above" if tau > iv.high else "below"

    def words(self) -> str:
        """One sentence a rung: what changed, why, and what it did (from the intervals)."""
        out, before = [], None
        for i, r in enumerate(self.rungs):
            if i == 0:
                out.append(f"{r.name}: tau {r.tau}, {r.speedup:.2f}x no speculation "
                           f"({self.speed_word(r)}).")
            elif r.tau is None:
                out.append(f"{r.name} ({r.finding}): not run: {r.note}")
            elif r.word == "no change":
                out.append(f"{r.name} ({r.finding}): nothing changes on this build ({r.note}).")
            else:
                out.append(f"{r.name} ({r.finding}, changes {r.change_text()}): tau {r.tau.value:.2f}, "
                           f"change {r.gain} - {r.word} the rung before; {r.speedup:.2f}x no speculation, "
                           f"{self.step_speed_word(r, before)}.")
            before = r if r.tau is not None else before
        return "\n".join(f"- {w}" for w in out)

    def claims(self) -> dict:
        return {"rungs": [{"name": r.name, "changed": list(r.changed), "finding": r.finding, "word": r.word,
                           "ran": r.tau is not None, "measured_as": r.measured_as,
                           "tau": None if r.tau is None else [r.tau.value, r.tau.low, r.tau.high],
                           "gain": None if r.gain is None else [r.gain.value, r.gain.low, r.gain.high],
                           "speedup": r.speedup, "e2e_tps": r.e2e_tps, "identical": r.identical,
                           "state": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(r.state).items()}}
                          for r in self.rungs],
                "overall": [*(lambda d: [d.value, d.low, d.high])(self.overall())],
                "overall_word": interval_word(self.overall()), "repeats": self.repeats,
                # a negative bound printed after "[" reads as its magnitude to a decimal scan of the text
                "bounds_abs": [abs(x) for r in self.rungs for iv in (r.tau, r.gain) if iv is not None
                               for x in (iv.value, iv.low, iv.high)] + [abs(self.overall().low)],
                "trainer": {**self.trainer, **({"tau_est_against_served": self.against_served(self.trainer["tau_est"]),
                                                "tau_implied_against_served": self.against_served(
                                                    self.trainer["tau_implied"])} if self.trainer else {})}}

    def plot(self, ax=None):
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(figsize=(9, 0.5 * len(self.rungs) + 1.5))
        names = [f"{i}. {r.name}" for i, r in enumerate(self.rungs)]
        for y, r in enumerate(self.rungs):
            if r.tau is None:
                ax.text(1.02, y, "not run: " + r.note.split(":")[0][:60], va="center", fontsize=8, color="tab:red")
                continue
            color = {"beats": "tab:green", "loses": "tab:red"}.get(r.word, "tab:grey")
            ax.errorbar(r.tau.value, y, xerr=[[r.tau.value - r.tau.low], [r.tau.high - r.tau.value]], fmt="o",
                        color=color, capsize=3)
            ax.annotate(f"{r.speedup:.2f}x", (r.tau.value, y), textcoords="offset points", xytext=(8, 6), fontsize=8)
        ax.set_yticks(range(len(names)), names)
        ax.invert_yaxis()
        ax.axvline(1, color="k", lw=0.5)
        ax.set_xlabel("accept length tau (tokens per verify round), 95% bootstrap interval over prompts")
        engines = sorted({"emulated " + r.state.engine for r in self.run})
        ax.set_title(f"The ladder, one change a rung ({', '.join(engines)}; {self.device}, {self.dtype}, batch 1)\n"
                     f"labels: end-to-end speed over no speculation, median of {self.repeats}; green / red: beats / "
                     f"loses the rung before, grey: within noise or no change", fontsize=9)
        return ax


def trainer_record(training: dict | None) -> dict:
    """The trainer's held-out teacher-forced agreement and the tau it implies (``training.json``)."""
    if not training or "heldout" not in training:
        return {}
    agree = list(training["heldout"]["agree"])
    return {"agree": agree, "tau_est": training["heldout"].get("tau_est"), "tau_implied": 1 + simulated_acc_len(agree)}


def climb(target, specs: list[RungSpec], prompts, *, max_new_tokens: int, repeats: int, trainer: dict | None = None,
          dtype: str = "float32", progress: bool = False) -> CaseLadder:
    """Decode every runnable rung (one case per distinct state) in one interleaved sweep; read each rung's
    change against the previous run rung from a paired interval."""
    from eagle3lab.analysis.benchmark import decode_sweep

    cases, by_key = {}, {}
    for sp in specs:
        if sp.state.runs and sp.state.key() not in by_key:
            by_key[sp.state.key()] = sp.name
            cases[sp.name] = dict(draft=sp.draft, num_steps=sp.state.num_steps, topk=1,
                                  num_draft_tokens=sp.state.num_draft_tokens, profile=sp.profile)
    sweep = decode_sweep(target, cases, prompts, max_new_tokens=max_new_tokens, repeats=repeats, progress=progress)
    rungs, prev_state, prev_run = [], None, None
    for sp in specs:
        changed = () if prev_state is None else sp.state.changed(prev_state)
        r = Rung(sp.name, sp.state, sp.finding, sp.note, changed, by_key.get(sp.state.key()) if sp.state.runs else None)
        if r.measured_as is not None:
            r.tau = sweep.tau_interval(r.measured_as)
            r.e2e_tps, r.speedup = sweep.e2e_tps[r.measured_as], sweep.e2e_speedup(r.measured_as)
            same = sweep.identical(r.measured_as)
            r.identical = f"{same}/{len(sweep.reference)}"
            if prev_run is None:
                r.word = "start"
            elif not changed or prev_run.measured_as == r.measured_as:
                r.gain, r.word = sweep.tau_difference(r.measured_as, prev_run.measured_as), "no change"
            else:
                r.gain = sweep.tau_difference(r.measured_as, prev_run.measured_as)
                r.word = interval_word(r.gain)
            prev_run = r
        else:
            r.word = "not run"
        rungs.append(r)
        prev_state = sp.state if sp.state.runs else prev_state
    device = str(getattr(target, "device", "cpu"))
    return CaseLadder(rungs, sweep, repeats, device, dtype, trainer or {})


def with_state(spec: RungSpec, **changes) -> RungState:
    return replace(spec.state, **changes)


def flag_line(engine: str, num_steps: int, draft: str = "DRAFT") -> str:
    """The speculative part of a launch command for a chain of ``num_steps`` (topk 1)."""
    if engine.startswith("sglang"):
        return (f"--speculative-algorithm EAGLE3 --speculative-num-steps {num_steps} --speculative-eagle-topk 1 "
                f"--speculative-num-draft-tokens {num_steps + 1}")
    return f"--speculative-config '{{\"method\": \"eagle3\", \"model\": \"{draft}\", \"num_speculative_tokens\": {num_steps}}}'"


def checklist(trained: tuple, rule: bool, num_layers: int, arch: str | None, builds: dict[str, list], num_steps: int,
              honours_rule: dict[str, bool], id_keys: dict[str, str], draft: str = "DRAFT") -> pd.DataFrame:
    """Per engine and build: the ids for the trained wiring in that engine's numbering (and where it reads
    them), the flag line, what it cannot honour, and the options left."""
    from eagle3lab.engines.layer_ids import to_engine_ids
    from eagle3lab.errors import Eagle3LabError

    rows = []
    for engine, versions in builds.items():
        for version in versions:
            try:
                ids, why = to_engine_ids(engine, list(trained), num_layers, arch=arch, engine_version=version), ""
            except (Eagle3LabError, ValueError) as e:
                ids, why = None, str(e).splitlines()[0].split(" Tried:")[0]
            cannot = ([f"the ids for {resid_label(trained)} ({why})"] if ids is None else []) + (
                ["norm_before_residual (ignored in every build read)"] if rule and not honours_rule[engine] else [])
            rows.append({"engine": engine, "build": version or "newest", "ids": ids, "read at": id_keys[engine],
                         "flag line": flag_line(engine, num_steps, draft), "cannot honour": "; ".join(cannot) or "nothing",
                         "ok_": not cannot, "ids_ok_": ids is not None, "rule_ok_": not (rule and not honours_rule[engine])})
    df = pd.DataFrame(rows)
    whole = [f"{r.engine} {r.build}" for r in df.itertuples() if r.ok_]
    options = []
    for r in df.itertuples():
        if r.ok_:
            options.append("serve as it is")
            continue
        opts = []
        if not r.ids_ok_:
            later = [f"{o.build}" for o in df.itertuples() if o.engine == r.engine and o.ids_ok_]
            opts.append(f"a build with ids ({', '.join(later)})" if later else "no build of this engine has ids")
        if not r.rule_ok_:
            opts += ["retrain with norm_before_residual off", "patch the engine's draft model to read the flag"]
        if whole:
            opts.append("serve with " + " or ".join(whole))
        options.append("; ".join(opts))
    df["options left"] = options
    return df.drop(columns=["ok_", "ids_ok_", "rule_ok_"]).set_index(["engine", "build"])


def pick_chain(costs, agree: list[float]) -> tuple[int, pd.DataFrame]:
    """The chain length the cost model projects fastest for a draft accepted as ``agree`` says (the
    trainer's teacher-forced agreement per step): tau of a K-chain is 1 + the running products of the first
    K agreements, priced with the measured ``costs`` (``CostModel.project``). Only the chains the trainer
    measured (K up to ``len(agree)``) are priced."""
    import math

    rows = []
    for k in range(1, len(agree) + 1):
        tau = 1 + sum(math.prod(agree[:j + 1]) for j in range(k))
        p = costs.project(tau, k)
        rows.append({"num_steps": k, "tau (from the trainer's agreement)": tau, "round cost": p.round_cost,
                     "projected speedup": p.speedup})
    df = pd.DataFrame(rows).set_index("num_steps")
    return int(df["projected speedup"].idxmax()), df
