"""Notebook 02's worked example and summary, stated from the numbers (engine knowledge only: no model needed).

``worked_example(...)`` asks, for a target given by its architecture and depth alone, what the draft config's
ids mean to each engine reading, which ids each build of one engine needs to feed the wiring training fed, and
what the team's own ids serve there; its ``words()`` say so. ``capture_summary(...)`` is the notebook's
summary: the capture checks where a target was loaded (or the similarity of a dump's states), then the worked
example, every number taken from its ``claims``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from eagle3lab.engines.layer_ids import (
    ID_MINUS1_CODES,
    NOTE_CODES,
    resolve_aux_layers,
    sglang_model_file,
    to_engine_ids,
)
from eagle3lab.engines.profiles import PROFILES
from eagle3lab.errors import Eagle3LabError


def id_minus1_note(resolution) -> str:
    """The text of ``resolution``'s note on id -1 (an ``AuxResolution`` of SGLang ids holding -1)."""
    return next(note.text for note in resolution.notes if note.code in ID_MINUS1_CODES)


def engine_name(engine: str) -> str:
    """An engine's own spelling ("SGLang", "vLLM") for a profile name; the name itself otherwise."""
    profile = PROFILES.get(engine)
    return profile.engine if profile is not None else engine


@dataclass
class WorkedExample:
    """One target (``arch``, ``num_layers``) and three id lists, read by ``engine`` per build and ``faithful``."""

    engine: str
    faithful: str
    arch: str | None
    num_layers: int
    written: list
    trained: list
    team: list
    readings: pd.DataFrame        # one row per (engine, build): what ``written`` feeds fc (``fc_input``)
    per_build: dict               # build -> {"ids": ids for ``trained`` or None, "team": what ``team`` feeds, "breaks"}
    faithful_ids: list | None     # what ``faithful`` needs written for ``trained``, or None when it cannot
    faithful_why: str | None      # why it cannot (a NOTE_CODES description)

    def readings_table(self) -> pd.DataFrame:
        """``readings`` as the notebook shows it."""
        return self.readings.rename(columns={"fc_input": "fc input"})

    def table(self) -> pd.DataFrame:
        rows = {b: {"ids for the trained wiring": r["ids"] or "none (cannot)",
                    f"team's ids {self.team} serve": r["team"], "breaks": r["breaks"]} for b, r in self.per_build.items()}
        return pd.DataFrame(rows).T.rename_axis(f"{engine_name(self.engine)} build")

    def ids_words(self) -> str:
        """"cannot express it in A, B and needs ids [...] in C, D" over the builds."""
        cannot = [b for b, r in self.per_build.items() if r["ids"] is None]
        can: dict = {}
        for b, r in self.per_build.items():
            if r["ids"] is not None:
                can.setdefault(str(r["ids"]), []).append(b)
        return " and ".join(([f"cannot express it in {', '.join(cannot)}"] if cannot else [])
                            + [f"needs ids {ids} in {', '.join(bs)}" for ids, bs in can.items()])

    def words(self) -> str:
        file = sglang_model_file(self.arch) if PROFILES.get(self.engine) and \
            PROFILES[self.engine].id_engine == "sglang" else None
        readers: dict = {}    # one reading, every (engine, build) that reads the ids so
        for _, row in self.readings.iterrows():
            readers.setdefault(row["fc_input"], []).append(
                engine_name(row["engine"]) + ("" if row["build"] == "any" else f" {row['build']}"))
        meaning = "; ".join(f"{label} to {', '.join(who)}" for label, who in readers.items())
        faithful = (f"{engine_name(self.faithful)} cannot capture it ({self.faithful_why})" if self.faithful_ids is None
                    else f"{engine_name(self.faithful)} needs ids {self.faithful_ids}")
        return (f"The same ids {self.written} on {self.arch or 'a target of unknown architecture'} (N = "
                f"{self.num_layers}) mean {meaning}. For the wiring training fed, resid{self.trained}: {faithful}; "
                f"{engine_name(self.engine)}'s {file or 'model file'} {self.ids_words()}.")

    def claims(self) -> dict:
        return {"case_arch": self.arch, "case_num_layers": self.num_layers, "sglang_builds": list(self.per_build),
                "case_ids_per_build": {b: r["ids"] for b, r in self.per_build.items()},
                "team_ids_serve": {b: r["team"] for b, r in self.per_build.items()},
                "faithful_ids": self.faithful_ids}


def worked_example(engine: str, faithful: str, arch: str | None, num_layers: int, *, written, trained, team, builds,
                   readings) -> WorkedExample:
    """``builds``: the releases of ``engine`` to ask; ``readings``: (engine, build) pairs to read ``written`` in."""
    table = pd.DataFrame([{"engine": e, "build": b or "any", "fc_input": resolve_aux_layers(
        e, list(written), num_layers, arch=arch, engine_version=b).label} for e, b in readings])
    per_build = {}
    for version in builds:
        try:
            ids = to_engine_ids(engine, list(trained), num_layers, arch=arch, engine_version=version)
        except Eagle3LabError:
            ids = None
        fix = resolve_aux_layers(engine, list(team), num_layers, arch=arch, engine_version=version)
        # a build that stops (start-up, first forward) feeds nothing; one that drops a state feeds what is left
        stops = fix.stops
        per_build[version or "newest"] = {"ids": ids,
                                          "team": (f"nothing: it stops {stops}" if stops != "at the first forward"
                                                   else "nothing: crashes at the first forward") if stops else fix.label,
                                          "breaks": NOTE_CODES[fix.fatal_codes[0]] if fix.fatal_codes else "-"}
    try:
        faithful_ids, why = to_engine_ids(faithful, list(trained), num_layers, arch=arch), None
    except Eagle3LabError:
        res = resolve_aux_layers(faithful, list(trained), num_layers, arch=arch)
        faithful_ids = None
        why = NOTE_CODES[res.fatal_codes[0]] if res.fatal_codes else "no ids express it"
    return WorkedExample(engine, faithful, arch, num_layers, list(written), list(trained), list(team), table,
                         per_build, faithful_ids, why)


def _paths_words(agreement: pd.DataFrame, target_name: str, n: int, claims: dict) -> str:
    """``paths_agreement``'s table in words (and claims): three paths at resid[0..N-1]; at resid[N] only the two
    hook paths can agree, since HF's last entry is normed."""
    inner, last = agreement.iloc[:-1], agreement.iloc[-1]
    claims.update(identical_points=int(inner["bit-identical"].sum()), points=len(inner),
                  last_hooks_identical=bool(last["bit-identical"]),
                  last_hidden_gap=float(last["HF hidden_states[k] vs pre"]))
    same, total = claims["identical_points"], claims["points"]
    three = (f"three independent capture paths agree bit for bit on every point resid[0..{n - 1}] ({same}/{total} "
             "identical)" if same == total else
             f"three independent capture paths agree bit for bit on {same} of the {total} points resid[0..{n - 1}]")
    hooks = "agree bit for bit" if claims["last_hooks_identical"] else f"differ by {last['pre vs post']:.3g}"
    return (f"On {target_name} (N = {n}), {three}; at resid[{n}] the two hook paths {hooks}, while HF's last hidden "
            f"state differs from it by up to {claims['last_hidden_gap']:.2f} (it is normed, so not resid[{n}]).")


def capture_summary(*, mode: str, target_name: str, num_layers: int, example: WorkedExample, agreement=None,
                    neighbour: pd.Series | None = None, dump_identical: bool | None = None,
                    edge_cases: dict | None = None) -> tuple[str, dict]:
    """Notebook 02's summary text and claims. ``mode``: "live", "dump" or "config-only" (models.target_source);
    ``agreement``: ``paths_agreement``'s table (live); ``neighbour``: cosine of each pair of consecutive points
    (live: every resid[k], k+1; dump: the points it holds); ``dump_identical``: the dump written here read back."""
    claims = {"mode": mode, "num_layers": num_layers, **example.claims(), "edge_cases": edge_cases or {}}
    parts = []
    if agreement is not None:
        parts.append(_paths_words(agreement, target_name, num_layers, claims))
    elif mode == "dump":
        parts.append(f"Read from {target_name} (N = {num_layers}): nothing loaded here, so the capture paths were not "
                     "compared.")
    else:
        parts.append(f"On {target_name}: nothing loaded, so only the id tables ran (no capture, no similarity).")
    if neighbour is not None and len(neighbour):
        claims.update(neighbour_cosine=float(neighbour.mean()), neighbour_cosine_min=float(neighbour.min()),
                      least_similar_pair=str(neighbour.idxmin()))
        which = "Neighbouring points" if mode == "live" else "Consecutive dumped points"
        low, pair = claims["neighbour_cosine_min"], claims["least_similar_pair"]
        parts.append(f"{which} have mean cosine {claims['neighbour_cosine']:.2f}, "
                     + (f"but {pair} only {low:.3f}: an off-by-one there feeds the draft an unrelated state, not a "
                        "near copy." if low < 0.5 else
                        f"the least similar pair {pair} at {low:.3f}: an off-by-one feeds a near copy."))
    parts.append(example.words())
    if dump_identical is not None:
        claims["dump_identical"] = bool(dump_identical)
        parts.append(f"A dump written in vLLM's extract_hidden_states layout reads back identically ({dump_identical}).")
    return " ".join(parts), claims
