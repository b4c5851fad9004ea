"""The seed case's record (the Kimi-K2.5 draft behind the project), set beside what the engines' code does.

Notebooks 02 and 06 both read it: a speed the team measured with ids written in the draft's config, and what each
build reads from those ids.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

SEED_TEAM_TOK_S = 54.8   # what the seed team measured with its fix ids (90 tok/s without speculation, 56.8 before)


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
        f"the ids were not where {engine} reads them (SGLang reads eagle_config only; a missing eagle_config or a "
        f"top-level key falls back silently to the default resid{list(default_resid(num_layers))}), so the server "
        "ran its default wiring",
        "a patched build (a guard at loop index 0, or a local capture fix) fed the points the ids name",
        "another flag or launch than the one recorded (another draft path, algorithm or build)",
    ) + ((f"a build in which they run as written ({', '.join(runs_in)}), feeding fewer states than fc reads"
          if runs_in else "no build read runs them as written"),)
    return MeasuredBesideCode(engine, tuple(ids), float(tok_s), table.drop(columns="stops_"), runs_in, explanations)
