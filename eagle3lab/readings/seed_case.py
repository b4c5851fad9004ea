"""The seed case's record (the Kimi-K2.5 draft behind the project), set beside what the engines' code does.

Notebooks 01, 02 and 06 read it: the seed's first servable build (``SEED_BUILD``), the team's record in full
(``SEED_RECORD``: accuracy, and tok/s at each step it took), a speed the team measured with ids written in the draft's
config beside what each build reads from those ids, and 06's answer for the seed's own target.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

# The seed's first servable build, the one the notebooks launch and read it on (01's ENGINE_VERSION, 02's
# SGLANG_BUILDS, 06's SEED_BUILDS): Kimi-K2.5's class ships in SGLang 0.5.9, its EAGLE-3 capture hook in 0.5.10
# (PR #19689), and 0.5.10 still captures its CUDA graphs with the default aux ids (PR #22836 fixed it in 0.5.11).
SEED_BUILD = "0.5.11"


@dataclass(frozen=True)
class SeedRecord:
    """What the seed team recorded, in the order it happened (tok/s on its fleet; the accuracy its trainer reported).

    As launched, ``--speculative-num-steps 1`` silently capped the 16 draft tokens asked for to 2; lifting the cap (a
    15-step chain) made serving slower still, since every round then paid 15 draft passes for a draft fed other
    states than it was trained on (few of them accepted); the team's ids on that chain won part of it back."""

    val_accuracy_pct: float = 74.7    # the draft's validation accuracy in training ("it trained well")
    plain_tok_s: float = 90.0         # without speculation
    launched_tok_s: float = 56.8      # as launched: the cap, num_steps + 1 tokens verified a round
    cap_lifted_tok_s: float = 46.7    # the cap lifted: a chain of draft_tokens - 1 steps
    team_ids_tok_s: float = 54.8      # the team's ids [-1, 2, 30] on that chain
    num_steps: int = 1                # the launch's --speculative-num-steps ...
    draft_tokens: int = 16            # ... and --speculative-num-draft-tokens

    def words(self) -> str:
        """The record in one paragraph, every number from the fields; "slower" / "faster" read from them."""
        def than(a: float, b: float) -> str:
            return "slower than" if a < b else "faster than" if a > b else "as fast as"

        chain = self.draft_tokens - 1
        return (f"The seed's record: a draft at {self.val_accuracy_pct:g}% validation accuracy served "
                f"{self.launched_tok_s:g} tok/s as launched, {than(self.launched_tok_s, self.plain_tok_s)} the "
                f"{self.plain_tok_s:g} without speculation (`--speculative-num-steps {self.num_steps}` had silently "
                f"capped its {self.draft_tokens} draft tokens to {self.num_steps + 1}); with the cap lifted (a "
                f"{chain}-step chain) it ran {self.cap_lifted_tok_s:g} tok/s, "
                f"{than(self.cap_lifted_tok_s, self.launched_tok_s)} the capped launch"
                # why a lifted cap can lose: the chain's draft passes buy little when the draft is fed the wrong states
                + (f": every round then paid {chain} draft passes for a draft fed other states than it was trained "
                   "on, so few of its tokens were accepted" if self.cap_lifted_tok_s < self.launched_tok_s else "")
                + f"; the team's ids on that chain gave {self.team_ids_tok_s:g} tok/s "
                f"({than(self.team_ids_tok_s, self.plain_tok_s)} no speculation).")

    def claims(self) -> dict:
        return asdict(self)


SEED_RECORD = SeedRecord()
SEED_TEAM_TOK_S = SEED_RECORD.team_ids_tok_s   # what the seed team measured with its fix ids


@dataclass(frozen=True)
class MeasuredBesideCode:
    """A speed a team measured with ``ids`` written in the draft's config, set beside what each build's code does with
    those ids there (``table``: the states fed, or when the engine stops), and the explanations that fit both."""

    engine: str
    ids: tuple
    tok_s: float
    table: pd.DataFrame
    runs_in: tuple[str, ...]        # the builds read in which the ids, as written, let the server run
    explanations: tuple[str, ...]

    def words(self) -> str:
        stopped = [b for b in self.table.index if b not in self.runs_in]
        said = (f"The team measured {self.tok_s:g} tok/s with ids {list(self.ids)}. Read where {self.engine} reads "
                f"them, " + (f"{', '.join(stopped)} stop before serving anything" if stopped else "no build read stops")
                + (f"; {', '.join(self.runs_in)} run ({'; '.join(self.table.loc[list(self.runs_in), 'what'])})"
                   if self.runs_in else "") + ".")
        return said + " What fits both the measurement and the code: " + "; ".join(
            f"({i}) {e}" for i, e in enumerate(self.explanations, 1)) + "."


def measured_beside_code(engine: str, ids, tok_s: float, num_layers: int, arch: str | None,
                         builds) -> MeasuredBesideCode:
    """What each of ``builds`` does with ``ids`` written where ``engine`` reads them (the engine knowledge's rows),
    beside a speed measured with them; a stopped build cannot have produced the measurement."""
    from eagle3lab.engines.layer_ids import NOTE_CODES, default_resid, resolve_aux_layers

    rows = {}
    for build in builds:
        res = resolve_aux_layers(engine, list(ids), num_layers, arch=arch, engine_version=build)
        rows[build or "newest"] = {
            "what": f"stops {res.stops}" if res.stops else f"feeds {res.label}",
            "why": NOTE_CODES[res.fatal_codes[0]] if res.fatal_codes else "-", "stops_": bool(res.stops)}
    table = pd.DataFrame.from_dict(rows, orient="index")
    runs_in = tuple(b for b, r in rows.items() if not r["stops_"])
    explanations = (
        f"the ids were not where {engine} reads them: SGLang reads eagle_config only, so ids written elsewhere (a "
        "top-level key) leave the server silently on what eagle_config holds, the default "
        f"resid{list(default_resid(num_layers))} where eagle_config is missing or holds no ids, the ids it held before "
        "(the wiring before the fix) where it still holds them",
        "a patched build (a guard at loop index 0, or a local capture fix) fed the points the ids name",
        "another flag or launch than the one recorded (another draft path, algorithm or build)",
    ) + ((f"a build in which they run as written ({', '.join(runs_in)})",) if runs_in else ())
    return MeasuredBesideCode(engine, tuple(ids), float(tok_s), table.drop(columns="stops_"), runs_in, explanations)


# ------------------------------------------------------------------ notebook 06's answer for the seed's own target


@dataclass(frozen=True)
class Option:
    what: str
    gain: object = None      # the ladder's Interval for it, None: not measured
    span: str = ""           # the ladder's rungs it was measured between ("rung 2 -> 6")
    total: object = None     # a gain on top of option ``on_top_of`` ("(b)"): both together, from that one's start
    total_span: str = ""
    on_top_of: str = ""
    kind: str = ""           # "serve", "retrain", "move" or "patch": what the option does, for the launch words


# what a retrained draft's gain assumes: the ladder measured the as-trained draft, not a retrained one
AS_GOOD = "assuming the retrained draft is as good as the as-trained one"


@dataclass(frozen=True)
class SeedBuild:
    """One build of one engine for the seed's target: the ids feeding the trained points (None: none, ``no_ids``
    says why in the engine knowledge's short words), what the team's ids do there ("" where the team did not
    write ids for this engine), whether it reads ``norm_before_residual``, the options left and the launch line."""

    engine: str
    build: str | None
    ids: list | None
    no_ids: str
    team: str
    honours_rule: bool
    options: tuple[Option, ...]
    launch: str                     # "" where no ids feed the trained points (the options say what to do)

    @property
    def label(self) -> str:
        return f"{self.engine} {self.build or 'newest'}"


def _short_reasons(engine: str, trained, n: int, arch: str, build) -> str:
    """Why no ids feed ``trained`` in a build: the engine knowledge's short words for each natural way to write
    them (SGLang's id k - 1 and the points as written; vLLM's points as written)."""
    from eagle3lab.engines.layer_ids import NOTE_CODES, resolve_aux_layers
    from eagle3lab.errors import Eagle3LabError

    tries = ([[k - 1 for k in trained]] if engine == "sglang" else []) + [list(trained)]
    said = []
    for ids in tries:
        try:
            res = resolve_aux_layers(engine, ids, n, arch=arch, engine_version=build)
        except Eagle3LabError:
            continue
        if res.fatal_codes:
            said.append(f"{ids}: {NOTE_CODES[res.fatal_codes[0]]}")
    return "; ".join(said)


def _options(ids, honours: bool, engine: str, upgrades: list[str], gains, captured: str = "") -> tuple[Option, ...]:
    """The options left in one build (none needed where it serves the draft whole); a patch only where one ships,
    and none does: eagle3lab emulates the patched draft model on the ladder, for no engine release. ``captured``:
    the states this build captures to retrain on (its default, with the ids that feed it). Every option's gain is
    the ladder's, between the rungs it names: in one build all start from one rung, or say which option they add
    to and give the total from that option's start."""
    span = gains.spans.get
    if ids is not None and honours:
        return (Option("serve as it is", gains.whole, span("whole", ""), kind="serve"),)
    on = f" ({captured})" if captured else ""
    opts = []
    if ids is None and not honours:
        opts.append(Option(f"retrain with norm_before_residual off on states this build captures{on}, and serve here, "
                           f"{AS_GOOD}", gains.whole, span("whole", ""), kind="retrain"))
    elif not honours:
        opts.append(Option(f"retrain with norm_before_residual off (the ids above already feed the trained points), "
                           f"{AS_GOOD}", gains.rule, span("rule", ""), kind="retrain"))
    else:
        opts.append(Option(f"retrain on states {engine} captures here ({captured + '; ' if captured else ''}it reads "
                           "the rule) and serve here, "
                           f"{AS_GOOD}", gains.whole, span("whole", ""), kind="retrain"))
    move = None
    if ids is None and upgrades:
        move = _letter(len(opts))
        opts.append(Option(f"move to {' or '.join(upgrades)}, whose ids feed the trained points (the rule "
                           f"{'read' if honours else 'still ignored'})", gains.wiring, span("wiring", ""), kind="move"))
    if not honours:
        # the rule's gain was measured with the trained points fed: a patch alone earns it only where ids feed them
        patch, gain, key, total = "patch the engine to read norm_before_residual", gains.rule, "rule", None
        if move:
            patch += f", together with {move} (this build feeds other states than the trained ones)"
            total = gains.wiring_rule
        elif ids is None:
            patch, gain, key = patch + " and to capture the trained points (no build read captures them)", gains.whole, "whole"
        opts.append(Option(f"{patch}: no patch ships (no release reads it, eagle3lab ships none; the ladder's rule rung "
                           "emulates one)", gain, span(key, ""), total, span("wiring_rule", "") if move else "",
                           move or "", kind="patch"))
    return tuple(opts)


def _captured(engine: str, n: int, arch: str, build) -> str:
    """The states a build captures with no ids of the draft's own (the engines' default, ``default_resid``) and the
    ids that feed them there, for a draft to be retrained on."""
    from eagle3lab.engines.layer_ids import default_resid
    from eagle3lab.readings.nb06_case_file import ids_for

    points = default_resid(n)
    got = ids_for(engine, points, n, arch, build)
    return f"its default {_label(points)}" + (f", ids {got.ids}" if got.ids else ", no ids written")


def _letter(i: int) -> str:
    """An option's mark in the words, ``(a)`` for the first."""
    return f"({chr(97 + i)})"


def seed_builds(target: dict, trained, rule: bool, builds: dict, team_ids: dict, gains, *, chain: int,
                fleet: dict, draft: str) -> list[SeedBuild]:
    """Per engine and build of ``builds``: the engine knowledge's answer for the seed's ``target`` (``arch``,
    ``num_layers``, ``model``): ids for ``trained``, what ``team_ids[engine]`` do, whether ``rule`` is honoured
    (``profiles.honours_at``), the options with ``gains``, and the launch line for ``chain`` on ``fleet``."""
    from eagle3lab.engines.layer_ids import resolve_aux_layers
    from eagle3lab.engines.profiles import NEWEST_READ, honours_at
    from eagle3lab.readings.nb06_case_file import flag_line, ids_for

    arch, n = target["arch"], target["num_layers"]
    found = {(e, b): ids_for(e, trained, n, arch, b) for e, bs in builds.items() for b in bs}
    out = []
    for (engine, build), got in found.items():
        honours = not rule or "norm_before_residual" in honours_at(engine, build or NEWEST_READ[engine])
        team = ""
        if engine in team_ids:
            res = resolve_aux_layers(engine, list(team_ids[engine]), n, arch=arch, engine_version=build)
            team = f"stop {res.stops}" if res.stops else f"feed {res.label}"   # a short capture stops (STOPS)
        upgrades = [b or "newest" for (e, b), g in found.items() if e == engine and g.ids is not None]
        head = (f"python -m sglang.launch_server --model-path {target['model']} --tp {fleet['gpus']} --trust-remote-code"
                if engine == "sglang" else
                f"vllm serve {target['model']} --tensor-parallel-size {fleet['gpus']} --trust-remote-code")
        captured = "" if got.ids else _captured(engine, n, arch, build)
        out.append(SeedBuild(engine, build, got.ids, "" if got.ids else _short_reasons(engine, trained, n, arch, build),
                             team, honours, _options(got.ids, honours, engine, upgrades, gains, captured),
                             # a launch only where ids feed the trained points: elsewhere the options say what to do
                             f"{head} {flag_line(engine, chain, engine_copy(draft, engine), fleet['batch'])}"
                             if got.ids else ""))
    return out


def engine_copy(draft: str, engine: str) -> str:
    """The folder an ``engine`` launch line loads: ``draft`` converted to the format that engine reads
    (``doctor.fixes.ENGINE_FORMAT``; SGLang reads its ids from ``eagle_config`` only), as 06's own checklist names it."""
    from eagle3lab.doctor.fixes import ENGINE_FORMAT

    return f"{draft}-{ENGINE_FORMAT[engine]}"


def convert_words(draft: str, engines, target_model: str) -> str:
    """How to write each folder the launch lines load (``eagle3lab convert``, docs/cli/convert.md)."""
    from eagle3lab.doctor.fixes import ENGINE_FORMAT

    lines = [f"`eagle3lab convert {draft} --to {ENGINE_FORMAT[e]} {engine_copy(draft, e)} --target {target_model}`"
             for e in dict.fromkeys(engines)]
    if not lines:
        return "No build read feeds the trained points, so no launch line loads the fixed draft: the options above apply"
    return ("Each launch line loads the fixed draft in its engine's format, written from the fixed checkpoint by "
            + " and ".join(lines) + " (docs/cli/convert.md)")


@dataclass(frozen=True)
class ServedChain:
    """Chains priced on the served cost model for a fleet (``analysis.roofline``: stated assumptions, not
    measurements): tau from a teacher-forced agreement per step, round cost and projected decode speedup per K."""

    table: pd.DataFrame       # num_steps -> tau, round cost, projected speedup (display labels)
    fleet: dict
    agree_from: str
    speedups: dict[int, float]   # num_steps -> projected decode speedup, as the table shows it

    @property
    def best(self) -> int:
        """The chain projected fastest (the shortest among equals)."""
        return max(self.speedups, key=self.speedups.__getitem__)

    @property
    def at_edge(self) -> bool:
        """The fastest priced chain is the longest priced: a longer one, not priced, may be faster still."""
        return self.best == max(self.speedups)

    def priced(self, tau, k: int) -> tuple:
        """A measured tau (``Interval``) at ``k`` steps priced on the fleet: the projected decode speedup at its
        value and bounds (it rises with tau at a fixed chain, so bounds map to bounds) and the round cost."""
        from eagle3lab.engines.acceptance import Interval

        rows = [_priced(t, k, self.fleet) for t in (tau.value, tau.low, tau.high)]
        x = Interval(*(float(r["projected_speedup"]) for r in rows), tau.level, tau.units)
        return x, float(rows[0]["round_cost"])      # c * k + v(k + 1) + overhead: the same at every tau

    def price(self, tau, k: int) -> str:
        """``priced`` in words, with tau's verdict against the round cost (the break-even tau;
        ``verdicts.projected_word``)."""
        from eagle3lab.analysis.verdicts import interval_text, projected_word

        x, cost = self.priced(tau, k)
        word = projected_word(tau, cost)
        than = {"projected within noise": "of"}.get(word, "than")
        return (f"{interval_text(x, unit='x')} projected decode on the fleet (round cost {cost:.2f} target steps): "
                f"{word} {than} no speculation")

    def words(self) -> str:
        f, k, n = self.fleet, self.best, len(self.speedups)
        # the agreement holds n steps: a longer chain has no tau to be priced with
        priced = f"chains 1-{n} priced, as far as the agreement's {n} steps reach"
        found = (f"the fastest chain priced is the longest priced, {k} steps ({self.speedups[k]:.2f}x projected decode; "
                 f"{priced}, the projections still rising at {n}: "
                 f"{' -> '.join(f'{v:.3f}' for v in self.speedups.values())}), so a longer chain may be faster: measure "
                 "longer ones on the fleet" if self.at_edge else
                 f"the fastest chain is {k} steps ({self.speedups[k]:.2f}x projected decode, {priced})")
        return (f"Priced on the served cost model ({f['roofline']}, batch {f['batch']}, c {f['c']}, per-round overhead "
                f"{f['overhead']} target steps ({overhead_reason(f['overhead'])}): stated assumptions, not "
                f"measurements) with {self.agree_from}, {found}; "
                f"the seed's own draft replaces that agreement with its trainer's, "
                f"and the chain is confirmed by measuring it on the fleet at batch {f['batch']} (the engine's accept "
                "length and tok/s per chain) before it is launched")


def overhead_reason(overhead: float) -> str:
    """Why a fleet's per-round overhead is what it is: the CPU work a plain decoding step hides behind the GPU with
    SGLang's overlap scheduler, which a speculative round keeps on by default from the release that made spec V2
    the default (the engine knowledge's change); without it a round pays ``SERVED``'s overhead."""
    from eagle3lab.analysis.roofline import SERVED
    from eagle3lab.engines.flags.sglang_overlap import CHANGES

    c = CHANGES["spec-v2-default"]
    on = (f"the overlap scheduler stays on under speculation by default from SGLang {c.first_with} (PR #{c.pr}) "
          "and hides a round's CPU work")
    return (f"0: {on}; {SERVED['overhead']} where it is off" if overhead == 0 else
            f"the overlap scheduler off; {on}, overhead 0 there")


def _priced(tau: float, k: int, fleet: dict) -> pd.Series:
    """One chain of ``k`` steps accepting ``tau`` tokens a round, priced on ``fleet`` (``price_on_served``'s row)."""
    from eagle3lab.analysis.roofline import price_on_served

    return price_on_served({"k": {"tau": tau, "num_steps": k, "num_draft_tokens": k + 1}}, fleet["roofline"],
                           c=fleet["c"], overhead=fleet["overhead"], batches=(fleet["batch"],)).iloc[0]


def served_chain(agree: list[float], fleet: dict, agree_from: str) -> ServedChain:
    from eagle3lab.readings.nb06_case_file import chain_tau

    rows, speedups = {}, {}
    for k in range(1, len(agree) + 1):
        tau = chain_tau(agree, k)
        priced = _priced(tau, k, fleet)
        speedups[k] = round(priced["projected_speedup"], 3)
        rows[k] = {"tau (from the agreement)": round(tau, 3), "v(K+1)": round(priced["v_verify"], 3),
                   "round cost (target steps)": round(priced["round_cost"], 3), "projected speedup (decode)": speedups[k]}
    return ServedChain(pd.DataFrame.from_dict(rows, orient="index").rename_axis("num_steps"), dict(fleet), agree_from,
                       speedups)


@dataclass(frozen=True)
class RecordCheck:
    """One step of the seed's record held against the served cost model, at the tau the case's ladder measured for
    that chain (the seed's own taus were not recorded): the round the recorded speeds imply
    (``cost_model.implied_round_cost``) at the tau's value and bounds, and the round the model prices."""

    step: str                       # "as launched", "with the cap lifted"
    rung: str
    steps: int
    tau: tuple[float, float, float]
    plain_tok_s: float
    tok_s: float
    implied: tuple[float, float, float]   # target steps, at tau's value, low and high
    priced: float                   # target steps, the served cost model's round for this chain

    @property
    def holds(self) -> bool:
        return self.implied[1] <= self.priced <= self.implied[2]

    def words(self) -> str:
        from eagle3lab.readings.nb06_case_file import steps

        v, lo, hi = self.implied
        return (f"{self.step} ({self.rung}, {steps(self.steps)}, tau {self.tau[0]:.3f} [{self.tau[1]:.3f}, "
                f"{self.tau[2]:.3f}]) {self.plain_tok_s:g} -> {self.tok_s:g} tok/s implies a round of {v:.2f} "
                f"[{lo:.2f}, {hi:.2f}] target steps, the model prices {self.priced:.2f} "
                f"({'inside' if self.holds else 'outside'} that interval)")


@dataclass(frozen=True)
class SeedAnswer:
    """The seed engineer's answer for their own target, in words generated from the engine knowledge: per build,
    the ids, what the team's ids do, what the engine cannot honour, the options with the ladder's gains and the
    launch line; the chain for the fleet; the team's record and its measurement beside what the code says."""

    target: dict
    trained: tuple
    rule: bool
    builds: list[SeedBuild]
    draft: str                      # the fixed checkpoint the launch lines' folders are converted from
    gains: object                   # nb06_case_file.Gains: what the case's ladder measured for each fix
    chain: ServedChain | None
    chain_launched: int
    record: MeasuredBesideCode
    history: SeedRecord | None = None   # the team's record in full (None: only the speed with its ids is known)

    def table(self) -> pd.DataFrame:
        from eagle3lab.engines.layer_ids import resid_label

        return pd.DataFrame([{
            "engine": b.engine, "build": b.build or "newest",
            f"ids for {resid_label(self.trained)}": str(b.ids) if b.ids else f"none ({b.no_ids})",
            f"the team's {list(self.record.ids)}": b.team or "-",
            "norm_before_residual": "read" if b.honours_rule else "ignored (no release reads it)",
            "options left": "; ".join(o.what for o in b.options)} for b in self.builds]).set_index(["engine", "build"])

    def first_servable(self, b: SeedBuild) -> bool:
        """``b`` is ``SEED_BUILD`` of SGLang and the target the seed's own class (the build's reason holds for it)."""
        from eagle3lab.engines.flags import SEED_TARGET_CONFIG
        from eagle3lab.engines.flags.configs import first_arch

        return (b.engine, b.build) == ("sglang", SEED_BUILD) and self.target["arch"] == first_arch(SEED_TARGET_CONFIG)

    def build_words(self, b: SeedBuild) -> str:
        from eagle3lab.engines.layer_ids import resid_label

        ids = (f"ids {b.ids} feed {resid_label(self.trained)}" if b.ids else
               f"no ids feed {resid_label(self.trained)} ({b.no_ids})")
        team = f"; the team's {list(self.record.ids)} {b.team} there" if b.team else ""
        cannot = [] if b.ids else [f"capture {resid_label(self.trained)}"]
        cannot += [] if b.honours_rule else ["read norm_before_residual"]
        opts = "; ".join(f"{_letter(i)} {o.what}: {self.option_gain(o)}" for i, o in enumerate(b.options))
        first = " (the first release that could serve it)" if self.first_servable(b) else ""
        launch = ("No launch line: this build cannot load the fixed draft as trained (the options above)"
                  if not b.launch else f"Launch: `{b.launch}`" if b.honours_rule else
                  f"{self.launch_after(b)} ({self.served_as_is()}): `{b.launch}`")
        return (f"**{b.label}**{first}: {ids}{team}; it cannot {' or '.join(cannot) or 'fail to serve it'}. "
                f"Options: {opts}. {launch}")

    def whole(self) -> str:
        """Which builds serve the draft as the chain's price assumes it (trained points fed, rule read)."""
        whole = [b.label for b in self.builds if b.launch and b.honours_rule]
        said = "these prices are for the draft served as trained (the trained points fed, norm_before_residual read)"
        if whole:
            return f"{said}, as {' and '.join(whole)} serve{'s' if len(whole) == 1 else ''} it"
        return (f"{said}, which no build above serves as it stands (each ignores norm_before_residual or cannot feed "
                "the trained points): they hold only after a retrain with the rule off or on a patched engine, where "
                "the trained points are fed (a move alone still ignores the rule)")

    @staticmethod
    def launch_after(b: SeedBuild) -> str:
        """Which options make a launch line on a build that ignores the rule serve the draft as trained: a retrain
        with the rule off, written to the same folder, or a patch of the engine (a move serves elsewhere)."""
        mark = {o.kind: _letter(i) for i, o in enumerate(b.options)}
        after = [f"after {mark['retrain']} (the retrained draft converted into this folder)"] if "retrain" in mark else []
        after += [f"on an engine patched as {mark['patch']} says"] if "patch" in mark else []
        return "Launch " + " or ".join(after)

    def served_as_is(self) -> str:
        """What a build that ignores norm_before_residual serves before any option: the ladder's rung with the
        trained points fed and the rule ignored, its tau priced on the fleet where a chain is priced."""
        r, said = self.gains.ignored, "as it is, this build serves the draft with norm_before_residual ignored"
        if r is None:
            return f"{said}; no ladder measured that draft here"
        k = r.steps
        run = (f"the ladder's {r.rung} served it that way (the trained points fed, the rule ignored) and measured "
               f"tau {r.tau} at {k} steps")
        price = f", priced at {k} steps at {self.chain.price(r.tau, k)}" if self.chain else ""
        # the ladder ran that rung on its own chain: another launched chain was not measured with the rule ignored
        other = (f"; this line's {self.chain_launched}-step chain was not measured that way" if k != self.chain_launched
                 else "")
        return f"{said}: {run}{price}{other}"

    def _as_is_claims(self) -> dict:
        r = self.gains.ignored
        out = {"tau": [r.tau.value, r.tau.low, r.tau.high], "steps": r.steps, "rung": r.rung}
        if self.chain:
            x, cost = self.chain.priced(r.tau, r.steps)
            out.update(priced=[x.value, x.low, x.high], round_cost=cost)
        return out

    def against_record(self) -> tuple[RecordCheck, ...]:
        """The seed's record as launched and with the cap lifted, each where the ladder ran the record's chain."""
        from eagle3lab.analysis.cost_model import implied_round_cost

        h, g = self.history, self.gains
        if self.chain is None or h is None:
            return ()
        out = []
        for step, r, tok_s, k in (("as launched", g.launched, h.launched_tok_s, h.num_steps),
                                  ("with the cap lifted", g.lifted, h.cap_lifted_tok_s, h.draft_tokens - 1)):
            if r is None or r.steps != k:      # the ladder ran another chain: its tau is not this record's
                continue
            taus = (r.tau.value, r.tau.low, r.tau.high)
            out.append(RecordCheck(step, r.rung, k, taus, h.plain_tok_s, tok_s,
                                   tuple(implied_round_cost(t, h.plain_tok_s, tok_s) for t in taus),
                                   float(_priced(r.tau.value, k, self.chain.fleet)["round_cost"])))
        return tuple(out)

    def record_words(self) -> str:
        """The served cost model against the seed's record: whether it reproduces the rounds the record implies."""
        checks = self.against_record()
        if not checks:
            return ""
        said = ("Held against the seed's record at the taus the case's ladder measured on the same chains (the seed's "
                "own were not recorded): " + "; ".join(c.words() for c in checks))
        if all(c.holds for c in checks):
            return said + ": the model's stated assumptions reproduce the record there"
        return (said + ": the model's stated assumptions do not reproduce the seed's fleet, so every price above (the "
                "chain's and the launch lines') is a starting point to measure there, not a launch decision")

    def option_gain(self, o: Option) -> str:
        """An option's gain with the rungs it spans; one on top of another option's says so, with the total."""
        said = self.gains.text(o.gain, o.span)
        if not o.on_top_of or o.gain is None:
            return said
        if o.total is None:
            return f"{said}, on top of {o.on_top_of}"
        return f"{said}, on top of {o.on_top_of}; with {o.on_top_of}, {self.gains.text(o.total, o.total_span)} in all"

    def words(self, echo: str = "") -> str:
        """The answer in markdown; ``echo``: a sentence set after the team's record (06's summary: the ladder's rung
        that takes the record's step on the bundled case)."""
        t = self.target
        head = (f"For the seed's own target, {t['name']} (`{t['arch']}`, {t['num_layers']} layers), a draft trained on "
                f"{_label(self.trained)} with norm_before_residual={self.rule}, the engine knowledge answers per build:")
        # the chain's sentence follows the builds' list, whose launch lines are therefore above it
        chain = (self.chain.words() + f"; the launch lines above use {self.chain_launched} steps; {self.whole()}"
                 if self.chain else f"The launch lines above use {self.chain_launched} steps; measure the chain on "
                 "the fleet before launching (no agreement to price it with here)")
        convert = convert_words(self.draft, [b.engine for b in self.builds if b.launch], t["model"])
        held = self.record_words()      # the cost model held against the seed's record
        return "\n\n".join([head, "\n".join(f"- {self.build_words(b)}" for b in self.builds), convert + ".",
                            chain + ".", *([held + "."] if held else []),
                            *([" ".join(filter(None, [self.history.words(), echo]))] if self.history else []),
                            self.record.words()])

    def claims(self) -> dict:
        from eagle3lab.analysis.roofline import SERVED

        return {"target": dict(self.target), "trained": list(self.trained), "rule": self.rule,
                "builds": [{"engine": b.engine, "build": b.build or "newest", "ids": b.ids, "team": b.team,
                            "honours_rule": b.honours_rule, "options": [o.what for o in b.options],
                            "gains": [None if o.gain is None else [o.gain.value, o.gain.low, o.gain.high]
                                      for o in b.options],
                            "spans": [o.span for o in b.options],
                            "totals": [None if o.total is None else [o.total.value, o.total.low, o.total.high]
                                       for o in b.options], "launch": b.launch} for b in self.builds],
                "chain_best": self.chain.best if self.chain else None, "chain_launched": self.chain_launched,
                "chain_speedups": list(self.chain.speedups.values()) if self.chain else None,
                "overhead_when_off": SERVED["overhead"],   # the words' "0.2 where it is off" (overhead_reason)
                "served_as_is": None if self.gains.ignored is None else self._as_is_claims(),
                "against_record": [asdict(c) for c in self.against_record()],
                "team_tok_s": self.record.tok_s, "team_runs_in": list(self.record.runs_in),
                "history": self.history.claims() if self.history else None}


def _label(points) -> str:
    from eagle3lab.engines.layer_ids import resid_label

    return resid_label(points)


def seed_answer(target: dict, trained, rule: bool, builds: dict, team: dict, gains, *, fleet: dict,
                agree: list | None, agree_from: str, draft: str, steps_otherwise: int,
                history: SeedRecord | None = None) -> SeedAnswer:
    """The seed's answer (``SeedAnswer``): ``team``: ``engine``, ``ids``, ``tok_s`` the team measured; ``agree``: a
    teacher-forced agreement per step to price chains on ``fleet`` with (None: the lines launch ``steps_otherwise``
    and the answer says to measure the chain on the fleet); ``history``: the team's record in full, stated before
    its ids' speed is set beside the code."""
    chain = served_chain(agree, fleet, agree_from) if agree else None
    launched = chain.best if chain else steps_otherwise
    rows = seed_builds(target, tuple(trained), rule, builds, {team["engine"]: team["ids"]}, gains, chain=launched,
                       fleet=fleet, draft=draft)
    record = measured_beside_code(team["engine"], team["ids"], team["tok_s"], target["num_layers"], target["arch"],
                                  builds[team["engine"]])
    return SeedAnswer(dict(target), tuple(trained), rule, rows, draft, gains, chain, launched, record, history)
