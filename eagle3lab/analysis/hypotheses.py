"""Named hypotheses, a wiring and the draft's settings each, scored on one ``StateBank`` and compared.

:func:`compare_wirings` scores each hypothesis teacher-forced (one evaluation per distinct wiring and
settings, ``wiring_search.Scorer``) and states each against a reference (``verdicts.compare``);
:func:`served_hypothesis` is what an engine profile runs a draft with, as such a hypothesis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from eagle3lab.analysis.verdicts import Verdicts, compare
from eagle3lab.engines.layer_ids import resid_label


def settings_for(draft, rule_or_variant) -> dict:
    from eagle3lab.analysis.wiring_search import settings_of

    if isinstance(rule_or_variant, Mapping):
        return {**settings_of(draft), **rule_or_variant}
    return {**settings_of(draft), "norm_before_residual": bool(rule_or_variant)}


def make_scorer(bank, draft, num_steps: int):
    """A memoised scorer (``wiring_search.Scorer``): one evaluation per distinct (wiring, settings)."""
    from eagle3lab.analysis.wiring_search import Scorer

    return Scorer(bank, draft, num_steps)


@dataclass
class WiringComparison:
    """Named (wiring, settings) hypotheses scored on one bank, each against ``reference``."""

    verdicts: Verdicts
    scores: dict
    wiring: dict
    variant: dict
    num_layers: int | None = None

    @property
    def reference(self) -> str:
        return self.verdicts.reference

    def tau(self, name: str) -> float:
        return self.verdicts[name].value.value

    def table(self) -> pd.DataFrame:
        """Per hypothesis: wiring, rule, tau with its interval, the paired difference and verdict, c_k (the
        acceptance at position k given k-1 accepted) and the rounds that reached each position."""
        df = self.verdicts.table()
        df.insert(0, "norm_before_residual", [bool(self.variant[n]["norm_before_residual"]) for n in df.index])
        df.insert(0, "wiring", [resid_label(self.wiring[n], self.num_layers) for n in df.index])
        stats = {n: self.scores[n].stats for n in df.index}
        for k in range(len(next(iter(stats.values())).conditional)):
            df[f"c{k + 1}"] = [round(stats[n].conditional[k], 3) for n in df.index]
        df["rounds reaching 1..K"] = [list(stats[n].reached_per_pos) for n in df.index]
        return df

    def words(self, names=None) -> str:
        return self.verdicts.words(names)

    def claims(self) -> dict:
        return self.verdicts.claims()


def compare_wirings(bank, draft, hypotheses: Mapping, reference: str, *, num_steps: int, scorer=None,
                    level: float = 0.95) -> WiringComparison:
    """``hypotheses``: name -> (wiring as resid indices, norm_before_residual or a settings dict). Names that
    repeat an earlier (wiring, settings) are scored once and kept under each name."""
    scorer = scorer or make_scorer(bank, draft, num_steps)
    wiring, variant, scores = {}, {}, {}
    for name, (w, rule) in hypotheses.items():
        wiring[name], variant[name] = tuple(int(k) for k in w), settings_for(draft, rule)
        scores[name] = scorer(wiring[name], variant[name])
    return WiringComparison(compare(scores, reference, level=level), scores, wiring, variant, bank.num_layers)


def served_hypothesis(draft, profile) -> tuple:
    """(wiring, settings) ``profile`` runs ``draft`` with: a hypothesis for :func:`compare_wirings`."""
    from eagle3lab.analysis.wiring_search import settings_of

    view = draft.under(profile)
    return tuple(view.aux_resid), settings_of(view)
