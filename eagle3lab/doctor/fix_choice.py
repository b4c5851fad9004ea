"""Which wiring and rule doctor hands the user, chosen from what the weights fit, and how much evidence that took.

The wiring search answers with a set: every hypothesis within noise of the best (``wiring_search``). The
fix is chosen from that set, never ranked inside it by noise:

1. only members the engine build can capture exactly (``servable_wiring``) can be written as they are;
2. a member another of them beats in tau beyond noise is set aside (``_unbeaten``);
3. the rest are taken in an order that reads no score (``Preference``): the engine's as-launched reading,
   the wiring nearest the stated ids (then the switches as stated), the engine's default points, the fewest
   changes, then the lower points;
4. unless the choice is the as-launched reading within noise (nothing to change), the wiring is then
   searched again on the final bank from the engines' default points, each slot moved to the median of its
   points within noise and then to a one-slot neighbour only where that beats it in tau beyond noise, the
   stated ids kept where that answer does not beat them beyond noise (``_refine``).
   Cross-entropy steers the search and names the best the set is measured against, but the last digits of
   a score never choose between members (issue 33: fp32 on a CPU and bf16 on a GPU named two wirings within
   noise of each other); and the edge of the set, where noise decides what belongs, is not where the answer
   lies (walking towards the stated ids ended there).

Only when no member is servable does doctor fall back to the nearest servable wiring to the best, with
its measured cost. The choice is *settled* when the evidence separates it from the served reading (a
fix is needed, or not), from every member it was preferred to for being servable (the embedding
output ``resid[0]`` and the final post-norm state are different tensors: the set names which one the
weights fit, or says the prompts did not tell them apart) and from its one-slot neighbours in the set
(on 8 prompts the bundled case's slot 1 is resid[3] on one draw and resid[6] on another, 0.06 apart in tau
on 32). Until then doctor adds prompts, rescoring only these candidates, up to a stated cap (``settle``);
intervals are a function of the prompts, not of their order (``acceptance._in_canonical_order``), so
draws that reach the same prompts reach the same answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from eagle3lab.analysis.wiring_search import Scorer, _diffs, key_of, settings_text, wiring_text
from eagle3lab.doctor.evidence import take_rows
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio_difference
from eagle3lab.engines.layer_ids import default_resid, nearest_servable
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.errors import Eagle3LabError
from eagle3lab.models.state_bank import FINAL_NORMED


def build_label(engine: str, engine_version: str | None, engine_platform: str | None = None) -> str:
    return " ".join(x for x in (engine, engine_version or "(newest code read)",
                                f"{engine_platform} build" if engine_platform else "") if x)


def servable_wiring(wiring, engine: str, num_layers: int, arch: str | None, engine_version: str | None = None,
                    engine_platform: str | None = None):
    """The engine's nearest servable points to ``wiring`` (kept in ``wiring``'s fc order) and the ids that
    capture them, in build ``engine_version`` (None: the newest code read; which points a build can capture
    changes, e.g. SGLang's llama.py feeds resid[0] from 0.5.22); (None, None, why) when the engine cannot
    capture such points."""
    if not wiring or FINAL_NORMED in wiring:
        return None, None, "the final post-norm state is not an aux capture point"
    profile = PROFILES[engine]
    kw = {"engine_platform": engine_platform} if engine_platform else {}
    try:
        nearest, ids = nearest_servable(profile.id_engine, sorted(wiring), num_layers, arch=arch,
                                        engine_version=engine_version, **kw)
    except Eagle3LabError as err:
        return None, None, str(err)
    rank = sorted(range(len(wiring)), key=lambda i: wiring[i])
    kept = [None] * len(wiring)
    for r, i in enumerate(rank):
        kept[i] = nearest[r]
    return tuple(kept), list(ids), ""


@dataclass
class Build:
    """The engine build a fix must be servable by."""

    engine: str
    version: str | None
    platform: str | None
    num_layers: int
    arch: str | None

    @property
    def label(self) -> str:
        return build_label(self.engine, self.version, self.platform)

    def servable(self, wiring):
        return servable_wiring(wiring, self.engine, self.num_layers, self.arch, self.version, self.platform)


@dataclass
class FixChoice:
    """The wiring and rule doctor hands the user, and why that one."""

    wiring: tuple
    variant: dict
    servable: bool                 # the build captures ``wiring`` exactly
    members: int                   # wirings within noise of the best (the set it was chosen from)
    search_best: tuple             # (wiring, variant) key of the best by cross-entropy
    statement: str
    cost: Interval | None = None   # tau of the chosen minus the best's (paired), when it is not a member
    separations: list[str] = field(default_factory=list)   # what the evidence told apart, or did not
    prompts: int = 0               # prompts the choice rests on
    settled: bool = True

    @property
    def key(self) -> tuple:
        return key_of(self.wiring, self.variant)


def _kept(key, stated: dict) -> int:
    """The switches a hypothesis sets as the checkpoint states them."""
    variant = dict(key[1])
    return sum(variant.get(k) == v for k, v in stated.items() if k in variant)


def _index(p, num_layers: int) -> int:
    """A point as a number: resid[k] is k, the final post-norm state comes after resid[N]."""
    return num_layers + 1 if p == FINAL_NORMED else int(p)


@dataclass(frozen=True)
class Preference:
    """The order in which members within noise of the best are handed to the user: one that float noise
    cannot flip, since it reads no score (issue 33). Of the members, first

    1. the engine's as-launched reading (``served``: nothing to change, if it is within noise);
    2. the wiring nearest the stated ids (``stated_wiring``, the checkpoint's ids as its own format reads
       them: the sum over slots of the distance in layers), then the switches as the checkpoint states them;
    3. the engine's default points (``default``);
    4. the fewest changes from the as-launched reading (slots and switches);
    5. then the lower points, slot by slot (a total order: no two members tie).
    """

    served: tuple | None = None          # (wiring, variant) key as launched
    stated_wiring: tuple | None = None
    stated: dict = field(default_factory=dict)
    default: tuple = ()
    num_layers: int = 0

    def rank(self, key) -> tuple:
        wiring, variant = key[0], dict(key[1])
        at = [_index(p, self.num_layers) for p in wiring]
        near = (sum(abs(a - _index(b, self.num_layers)) for a, b in zip(at, self.stated_wiring))
                if self.stated_wiring is not None and len(self.stated_wiring) == len(wiring) else 0)
        changes = 0
        if self.served is not None:
            changes = (sum(a != b for a, b in zip(wiring, self.served[0])) + abs(len(wiring) - len(self.served[0]))
                       + sum(variant.get(k) != v for k, v in dict(self.served[1]).items()))
        return (key != self.served, near, -_kept(key, self.stated), sorted(at) != sorted(self.default), changes,
                tuple(at), tuple(sorted(variant.items())))

    def first(self, keys):
        return min(keys, key=self.rank)


def _members(scores: dict, keys, level: float):
    """(best key by cross-entropy, the keys whose tau is not below the best's beyond noise) among ``keys``:
    tau is what serving gets, and cross-entropy separates states that serve alike (resid[7] and resid[8]
    of the bundled case differ by 0.005 nats and not in tau)."""
    keys = [k for k in dict.fromkeys(keys) if k in scores]
    best = min(keys, key=lambda k: scores[k].ce)
    return best, [k for k in keys if k == best or _diffs(scores[k], scores[best], level)[1].high >= 0.0]


def _preference(stated) -> Preference:
    """A ``Preference``, or one from the switches as stated alone."""
    return stated if isinstance(stated, Preference) else Preference(stated=dict(stated))


def choose(scores: dict, keys, build: Build, stated, *, level: float = 0.95, measure=None) -> FixChoice:
    """The fix from the hypotheses ``keys`` scored in ``scores`` (key -> ``BankScore``, one bank): of those
    whose tau is within noise of the best's, the servable one first in the order of ``stated`` (a
    ``Preference``; a dict: the switches as the checkpoint states them, the rest of the order unknown). No
    score orders the members: the last digits of a cross-entropy do not choose the fix.

    ``measure(wiring, variant)`` scores a hypothesis not yet scored (the nearest servable wiring)."""
    prefer = _preference(stated)
    best, members = _members(scores, keys, level)
    wirings = {k[0] for k in members}
    servable = [k for k in members if build.servable(k[0])[0] == k[0]]
    n_prompts = len(scores[best].ce_n)
    if servable:
        key = prefer.first(_unbeaten(servable, scores, level) or servable)
        said = (f"{len(wirings)} wiring(s) within noise of the best in tau; this one is servable by {build.label}"
                + ", the first of those in doctor's order (as launched, nearest the stated ids, the engine's "
                "default, fewest changes)"
                + ("" if key == best else f" (the best by cross-entropy: {wiring_text(best[0])} with "
                   f"{settings_text(dict(best[1]))})"))
        return FixChoice(key[0], dict(key[1]), True, len(wirings), best, said, prompts=n_prompts)
    variant = dict(best[1])
    # the final post-norm state is no capture point: its nearest is resid[N] (the state before the final
    # norm) or resid[0] (the other state a draft is fed outside the layers); both are tried, and measured
    nears, why = [], build.servable(best[0])[2]
    for sub in (None, build.num_layers, 0):
        wiring = best[0] if sub is None else tuple(sub if p == FINAL_NORMED else p for p in best[0])
        near = build.servable(wiring)[0]
        if near is not None and near not in nears:
            nears.append(near)
    if not nears or measure is None:
        said = (f"no wiring within noise of the best is servable by {build.label} ({why or 'not every point'}); "
                "nearest it can: none")
        return FixChoice(best[0], variant, False, len(wirings), best, said, prompts=n_prompts)
    near = max(nears, key=lambda w: bootstrap_ratio_difference(*measure(w, variant).tau_sums,
                                                               *scores[best].tau_sums).value)
    s = measure(near, variant)
    cost = bootstrap_ratio_difference(*s.tau_sums, *scores[best].tau_sums, level=level)
    said = (f"no wiring within noise of the best is servable by {build.label}; nearest it can: {wiring_text(near)} "
            f"with {settings_text(variant)}, tau {cost.value:+.3f} [{cost.low:+.3f}, {cost.high:+.3f}] against the best")
    return FixChoice(tuple(near), variant, True, len(wirings), best, said, cost=cost, prompts=n_prompts)


def _separated(a, b, level: float) -> tuple[str, Interval] | None:
    """What tells scores ``a`` and ``b`` apart: ("tau", a - b) or ("cross-entropy", a - b), or None."""
    d_ce, d_tau = _diffs(a, b, level)
    return ("tau", d_tau) if d_tau.sign() else ("cross-entropy", d_ce) if d_ce.sign() else None


def _swap_twin(key) -> tuple | None:
    """The same hypothesis with ``resid[0]`` and the final post-norm state swapped in one slot."""
    wiring = list(key[0])
    swap = {0: FINAL_NORMED, FINAL_NORMED: 0}
    for i, p in enumerate(wiring):
        if p in swap:
            return tuple(wiring[:i] + [swap[p]] + wiring[i + 1:]), key[1]
    return None


def _slot_neighbours(key, members, scores: dict, per_slot: int = 2) -> list:
    """The members with the same switches that differ from ``key`` in one slot only, the closest (lowest
    cross-entropy) ``per_slot`` of each slot: the choice was preferred to them on a point estimate, so it
    stands only once the evidence tells it apart from each (else that slot is not identified)."""
    wiring, out = key[0], []
    for slot in range(len(wiring)):
        near = [k for k in members if k[1] == key[1] and len(k[0]) == len(wiring) and k[0][slot] != wiring[slot]
                and all(a == b for i, (a, b) in enumerate(zip(k[0], wiring)) if i != slot)]
        out += sorted(near, key=lambda k: scores[k].ce)[:per_slot]
    return out


def rivals(choice: FixChoice, members, served_key, build: Build, scores: dict) -> list:
    """The hypotheses the choice must be told apart from: the served reading (is a fix needed?), the choice
    with resid[0] and the final post-norm state swapped, the members it was preferred to for being servable
    (at most two), and its one-slot neighbours in the set (``_slot_neighbours``): until those are separated,
    another prompt draw can name another point in that slot."""
    out = [served_key] if served_key is not None and served_key != choice.key else []
    twin = _swap_twin(choice.key)
    if twin is not None:
        out.append(twin)
    out += sorted((k for k in members if k != choice.key and build.servable(k[0])[0] != k[0]),
                  key=lambda k: scores[k].ce)[:2]
    out += _slot_neighbours(choice.key, [k for k in members if k != choice.key and k in scores], scores)
    return list(dict.fromkeys(out))


def separations(scores: dict, choice: FixChoice, rival_keys, level: float) -> tuple[bool, list[str]]:
    """Whether every rival is told apart from the choice, and what separates each (or that nothing did)."""
    said, settled = [], True
    mine = scores[choice.key]
    n = len(mine.ce_n)
    for k in rival_keys:
        gap = _separated(scores[k], mine, level)
        what = f"{wiring_text(k[0])} with {settings_text(dict(k[1]))}"
        if gap is None:
            settled = False
            said.append(f"{what}: not told apart from the fix on {n} prompts (tau and cross-entropy within noise)")
        else:
            stat, d = gap
            said.append(f"{what}: {stat} {d.value:+.3f} [{d.low:+.3f}, {d.high:+.3f}] against the fix on {n} prompts")
    return settled, said


def settle(evidence, view, found, build: Build, stated: dict, served_key, *, num_steps: int,
           max_prompts: int, step: int = 8, level: float = 0.95,
           stated_wiring: tuple | None = None) -> tuple[FixChoice, dict]:
    """Choose the fix on the search's bank, then add ``step`` prompts at a time (``evidence.more``) while a
    rival is not told apart from it (``rivals``), up to ``max_prompts``; on each larger bank only the
    candidates are rescored (the choice, its rivals, the next servable members). Returns the choice and
    the scores on the final bank (``evidence.bank``)."""
    prefer = Preference(served_key, stated_wiring, dict(stated), tuple(default_resid(build.num_layers)),
                        build.num_layers)
    scores = dict(found.extra["scores"])
    # the draft as the build serves it (``view``): its scores replace the search's in ``scores`` (the search ran
    # the draft as its trainer loaded it: another embedding or final norm may differ)
    measure = Scorer(evidence.bank, view, num_steps, into=scores)
    members = _members(scores, list(scores), level)[1]
    # the best servable wirings, also with the switches as stated (the search may have scored them only
    # with others)
    wirings = list(dict.fromkeys(k[0] for k in sorted(members, key=lambda k: scores[k].ce)
                                 if build.servable(k[0])[0] == k[0]))[:3]
    for w in wirings:
        measure(w, {k: stated.get(k, v) for k, v in dict(members[0][1]).items()})
    members = _members(scores, list(scores), level)[1]
    choice = choose(scores, members, build, prefer, level=level, measure=measure)
    while True:
        rival_keys = rivals(choice, members, served_key, build, scores)
        for k in [choice.key, *rival_keys]:       # the choice too: its separations are on the served view
            measure(k[0], dict(k[1]))
        choice.settled, choice.separations = separations(scores, choice, rival_keys, level)
        choice.prompts = evidence.num_prompts
        at_cap = evidence.num_prompts >= max_prompts or not evidence.can_grow()
        if choice.settled or at_cap:
            if choice.servable and choice.cost is None:
                choice, rival_keys = _refine(choice, scores, measure, build, served_key, level,
                                             points={p for p in evidence.bank.points if isinstance(p, int)},
                                             stated_wiring=stated_wiring)
            if choice.settled or at_cap:
                return choice, scores
            # the search from the default points moved it, or found a neighbour it is not told apart from: grow
        runners_up = sorted((k for k in members if k != choice.key and build.servable(k[0])[0] == k[0]),
                            key=prefer.rank)[:3]
        # the search's best too: the set within noise is measured against it, not against the best of a subset
        candidates = list(dict.fromkeys([choice.key, choice.search_best, *rival_keys, *runners_up]))
        had = evidence.num_prompts
        bank = evidence.more(min(step, max_prompts - had))
        scores = {}
        measure = measure.grown(bank, take_rows(bank, range(had, evidence.num_prompts)), into=scores)
        for k in candidates:
            measure(k[0], dict(k[1]))
        members = _members(scores, candidates, level)[1]
        choice = choose(scores, candidates, build, prefer, level=level, measure=measure)


def _stepped(wiring, slot: int, p, build: Build, points: set) -> tuple | None:
    """``wiring`` with ``slot`` moved to point ``p``, when the bank holds ``p``, the points stay distinct and
    the build captures them exactly; else None."""
    w = tuple(wiring[:slot]) + (p,) + tuple(wiring[slot + 1:])
    held = all(q in points for q in w if isinstance(q, int))   # a dump may lack the points another slot holds
    return w if held and len(set(w)) == len(w) and build.servable(w)[0] == w else None


def _slot_scan(measure, wiring: list, slot: int, variant: dict, first, build: Build, points: set):
    """The lowest cross-entropy point of ``slot`` (the others held): the best of the points ``first``, then
    its neighbours while one is lower (from any start inside one valley, the same bottom)."""
    def ce(p):
        w = _stepped(wiring, slot, p, build, points)
        return measure(w, variant).ce if w is not None else float("inf")

    tried = {p: ce(p) for p in first if p in points}
    while True:
        best = min(tried, key=lambda p: (tried[p], p))
        new = [q for q in (best - 1, best + 1) if q in points and q not in tried]
        if not new or tried[best] == float("inf"):
            return best
        tried.update((q, ce(q)) for q in new)


def _canonical_start(wiring: tuple, num_layers: int) -> list:
    """The engines' default points (resid[2], resid[N//2], resid[N-3] for three slots; evenly spread for
    others), given to the slots in the rank order of ``wiring`` (an embedding-last draft keeps its order):
    a start that depends on neither the draw nor the engine build."""
    k = len(wiring)
    spread = sorted(set(default_resid(num_layers)))
    if len(spread) != k:       # not three slots, or a target too shallow for three distinct defaults
        spread = [round(1 + i * (num_layers - 2) / max(1, k - 1)) for i in range(k)]
    rank = sorted(range(k), key=lambda i: (not isinstance(wiring[i], int), wiring[i] if isinstance(wiring[i], int) else 0))
    start = list(wiring)
    for r, i in enumerate(rank):
        if isinstance(wiring[i], int):
            start[i] = spread[r]
    return start


def _line_search(measure, wiring: list, variant: dict, build: Build, points: set) -> list:
    """Slot by slot (the others held), the lowest cross-entropy point by ``_slot_scan``, until no slot moves
    (at most three sweeps). The first sweep starts each slot from a grid over the whole depth (every
    ``N // 12``-th point, resid[0] included): the embedding output is no neighbour of resid[1] in what it
    holds, so a slot started at the default resid[2] never reaches it one step at a time; later sweeps start
    one step either side."""
    wiring = list(wiring)
    grid = set(range(0, build.num_layers + 1, max(1, build.num_layers // 12)))
    for sweep in range(3):
        moved = False
        for slot, here in enumerate(wiring):
            if isinstance(here, int):
                first = sorted(grid | {here - 1, here, here + 1}) if sweep == 0 else (here - 1, here, here + 1)
                p = _slot_scan(measure, wiring, slot, variant, first, build, points)
                moved |= p != here
                wiring[slot] = p
        if not moved:
            break
    return wiring


def _steps(key, build: Build, points: set) -> list:
    """Both one-slot steps of every slot of ``key`` that the bank holds and the build captures exactly."""
    out = []
    for slot, p in enumerate(key[0]):
        for q in (p - 1, p + 1) if isinstance(p, int) else ():
            w = _stepped(key[0], slot, q, build, points)
            if w is not None:
                out.append(key_of(w, dict(key[1])))
    return out


def _unbeaten(keys, scores: dict, level: float) -> list:
    """The ``keys`` whose tau no other of them beats beyond noise (paired): a member within noise of the best
    that a neighbour beats is not handed to the user."""
    return [k for k in keys
            if not any(o != k and _diffs(scores[o], scores[k], level)[1].low > 0 for o in keys)]


def _within(key, scores: dict, level: float) -> bool:
    """``key`` (scored) within noise of the best by cross-entropy of all scored: its tau not below the best's
    beyond noise (``_members``' test for one key)."""
    best = min(scores, key=lambda k: scores[k].ce)
    return key == best or _diffs(scores[key], scores[best], level)[1].high >= 0.0


SCAN_GAP = 2    # points outside noise a slot's scan steps over: tau is not monotone in the layer on a few prompts


def _slot_points(measure, scores: dict, wiring: tuple, slot: int, variant: dict, build: Build, points: set,
                 level: float) -> list[int]:
    """The points of ``slot`` (the other slots held) whose hypothesis is within noise of the best, scanned
    outward from ``wiring[slot]`` in both directions until ``SCAN_GAP`` points in a row fall outside (a
    point another slot holds, or the build cannot capture, is stepped over), each scored as it is reached.
    Every ``N // 12``-th point on a deep target: a slot that serves alike over 61 layers costs a dozen
    evaluations, not sixty (the climb that follows moves one point at a time)."""
    got, stride = [wiring[slot]], max(1, build.num_layers // 12)
    for step in (-stride, stride):
        p, misses = wiring[slot], 0
        while misses < SCAN_GAP and p + step in points:
            p += step
            w = _stepped(wiring, slot, p, build, points)
            if w is None:
                continue
            measure(w, variant)
            inside = _within(key_of(w, variant), scores, level)
            got += [p] if inside else []
            misses = 0 if inside else misses + 1
    return sorted(got)


def _centred(key, scores: dict, measure, build: Build, level: float, points: set):
    """The wiring at the centre of the set within noise around ``key``: each slot moved to the lower median
    of its points within noise (``_slot_points``, the others held), read again from the centred wiring until
    it stays put (at most three rounds). The edge of the set is where noise decides membership (one draw,
    dtype or thread count keeps a point the next drops); a median moves at most one point when an edge point
    comes or goes."""
    variant = dict(key[1])
    wiring = key[0]
    for _ in range(3):
        measure(wiring, variant)
        centre = list(wiring)
        for slot, p in enumerate(wiring):
            if isinstance(p, int):
                got = _slot_points(measure, scores, wiring, slot, variant, build, points, level)
                centre[slot] = got[(len(got) - 1) // 2]
        centre = tuple(centre)
        if centre == wiring or build.servable(centre)[0] != centre or len(set(centre)) != len(centre):
            break
        measure(centre, variant)
        if not _within(key_of(centre, variant), scores, level):
            break
        wiring = centre
    return key_of(wiring, variant)


def _climb(key, scores: dict, measure, build: Build, level: float, points: set):
    """From ``key``, a step to a one-slot neighbour only when it beats the current wiring in tau beyond noise
    (paired over the same prompts), the neighbours tried in a fixed order (slot by slot, the lower point
    first), until none does. No step rests on a point estimate: where slots serve alike the climb stays
    put, and where a neighbour is better the evidence says so. (The centre of the set within noise of the
    best, tried before, was beaten by its own neighbours: that set is wide because a far member is compared
    with the best, a neighbour with its neighbour.)"""
    for _ in range(4 * (build.num_layers + 1) * max(1, len(key[0]))):
        here = measure(key[0], dict(key[1]))
        for k in _steps(key, build, points):
            if _diffs(measure(k[0], dict(k[1])), here, level)[1].low > 0:
                key = k
                break
        else:
            return key
    return key


def _snapped(start: list, points: set) -> list:
    """Each resid point of ``start`` moved to the nearest point the bank holds (the lower of two), no two
    slots on one point: a dump captured at other ids lacks the engines' default points."""
    out, taken = list(start), set()
    for i, p in enumerate(start):
        if isinstance(p, int):
            out[i] = min((q for q in points if q not in taken), key=lambda q: (abs(q - p), q), default=p)
            taken.add(out[i])
    return out


def _kept_as_stated(key, stated_wiring, scores: dict, measure, build: Build, level: float):
    """The wiring the checkpoint states instead of ``key`` when the build serves it exactly, it is within noise
    of the best, and ``key`` does not beat it in tau beyond noise: ids the draft may well have been trained
    on are not rewritten for a difference the evidence does not show (an engine that misreads right ids is
    fixed by the ids it reads, not by other points)."""
    if stated_wiring is None or len(stated_wiring) != len(key[0]) or tuple(stated_wiring) == key[0]:
        return key
    stated = key_of(tuple(stated_wiring), dict(key[1]))
    if build.servable(stated[0])[0] != stated[0]:
        return key
    measure(stated[0], dict(stated[1]))
    beaten = _diffs(scores[key], scores[stated], level)[1].low > 0
    return stated if _within(stated, scores, level) and not beaten else key


def _refine(choice: FixChoice, scores: dict, measure, build: Build, served_key, level: float, *,
            points: set, stated_wiring: tuple | None = None) -> tuple[FixChoice, list]:
    """Where slots serve alike, which member the sequential rule ends on depends on which ones the first
    draw's search happened to score. So, unless the choice is the as-launched reading within noise (nothing
    to change), the wiring is searched again on the final bank from a start that depends on neither the draw
    nor the build (``_canonical_start``, snapped to the bank's points), slot by slot by cross-entropy
    (``_line_search``); that answer (the choice, where the answer is not a servable member) is moved to the
    median of the set around it (``_centred``), then to neighbours that beat it beyond noise (``_climb``),
    and the stated ids are kept where it does not beat them (``_kept_as_stated``). The choice is then held
    against its rivals and both one-slot steps of every slot (``_held``). ``points``: the resid points the
    bank holds. Returns the choice and the rivals it was held against."""
    variant = dict(choice.variant)
    within = set(_members(scores, list(scores), level)[1])
    key = choice.key
    if key == served_key and key in within:        # as launched and within noise: nothing to change
        return _held(choice, scores, measure, build, served_key, level, points)
    start = _snapped(_canonical_start(choice.wiring, build.num_layers), points)
    found = tuple(_line_search(measure, start, variant, build, points))
    servable = build.servable(found)[0] == found
    within = set(_members(scores, list(scores), level)[1])
    start = key_of(found, variant) if servable and key_of(found, variant) in within else key
    key = _climb(_centred(start, scores, measure, build, level, points), scores, measure, build, level, points)
    key = _kept_as_stated(key, stated_wiring, scores, measure, build, level)
    said = choice.statement + (
        f"; searched again on the final {choice.prompts} prompts from the engines' default points: "
        f"{wiring_text(found)}" + ("" if servable else f", which {build.label} cannot serve")
        + "; each slot moved to the median of its points within noise, then to a one-slot neighbour only where "
        f"it beats the wiring in tau beyond noise: {wiring_text(key[0])}"
        + (" (the stated ids: nothing beats them beyond noise)" if stated_wiring is not None
           and tuple(stated_wiring) == key[0] else ""))
    return _held(replace(choice, wiring=key[0], statement=said), scores, measure, build, served_key, level, points)


def _held(choice: FixChoice, scores: dict, measure, build: Build, served_key, level: float,
          points: set) -> tuple[FixChoice, list]:
    """The choice held against its rivals and both one-slot steps of every slot, on the final bank."""
    key = choice.key
    best, within = _members(scores, list(scores), level)     # on the final bank, the scanned points included
    members = len({k[0] for k in within})
    said = choice.statement + (f"; {members} wiring(s) within noise of the best on the final bank"
                               if members != choice.members else "")
    refined = FixChoice(key[0], dict(choice.variant), True, members, best, said, prompts=choice.prompts)
    rival_keys = list(dict.fromkeys(rivals(refined, within, served_key, build, scores) + _steps(key, build, points)))
    for k in rival_keys:
        measure(k[0], dict(k[1]))
    refined.settled, refined.separations = separations(scores, refined, rival_keys, level)
    return refined, rival_keys
