"""Named hypotheses, a wiring and the draft's settings each, scored on one ``StateBank`` and compared.

:func:`compare_wirings` scores each hypothesis teacher-forced (one evaluation per distinct wiring and
settings, ``wiring_search.Scorer``) and states each against a reference (``verdicts.compare``);
:func:`served_hypothesis` is what an engine profile runs a draft with, as such a hypothesis. A caller keys
each :class:`Hypothesis` stably (``"trained"``, ``"served"``, a wiring tuple) and reads its results by that
key; the label is what tables, sentences and claims call it, and nothing reads it back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pandas as pd

from eagle3lab.analysis.verdicts import Verdict, Verdicts, compare, rate_text
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


@dataclass(frozen=True)
class Hypothesis:
    """A wiring (resid indices) and the draft's settings (``norm_before_residual``, or a settings dict) under
    ``label``, the name tables, sentences and claims give it."""

    wiring: tuple
    rule: object
    label: str


@dataclass
class WiringComparison:
    """Hypotheses scored on one bank, each against the reference; ``scores``, ``wiring``, ``variant`` and
    ``by_key`` are keyed as the caller keyed the hypotheses, ``verdicts`` by their labels (for display)."""

    verdicts: Verdicts
    scores: dict
    wiring: dict
    variant: dict
    num_layers: int | None = None
    by_key: dict = field(default_factory=dict)    # key -> Verdict, in the order given

    @property
    def reference(self) -> str:
        """The reference's label."""
        return self.verdicts.reference

    def verdict(self, key) -> Verdict:
        return self.by_key[key]

    def tau(self, key) -> float:
        return self.by_key[key].value.value

    def table(self) -> pd.DataFrame:
        """Per hypothesis: wiring, rule, tau with its interval, the paired difference and verdict, c_k (the
        acceptance at position k given k-1 accepted) and the rounds that reached each position."""
        df, keys = self.verdicts.table(), list(self.by_key)    # the table's rows in the keys' order
        df.insert(0, "norm_before_residual", [bool(self.variant[k]["norm_before_residual"]) for k in keys])
        df.insert(0, "wiring", [resid_label(self.wiring[k], self.num_layers) for k in keys])
        stats = [self.scores[k].stats for k in keys]
        for i in range(len(stats[0].conditional)):      # 1.000 / 0.000 with its count: few rounds reach deep
            df[f"c{i + 1}"] = [rate_text(s.conditional[i], s.accepted_per_pos[i], s.reached_per_pos[i], 3) for s in stats]
        df["rounds reaching 1..K"] = [list(s.reached_per_pos) for s in stats]
        return df

    def words(self, names=None) -> str:
        return self.verdicts.words(names)

    def claims(self) -> dict:
        return self.verdicts.claims()


def compare_wirings(bank, draft, hypotheses: Mapping, reference, *, num_steps: int, scorer=None,
                    level: float = 0.95) -> WiringComparison:
    """``hypotheses``: key -> :class:`Hypothesis`, or -> (wiring as resid indices, norm_before_residual or a
    settings dict), labelled by its key; ``reference``: a key. Keys that repeat an earlier (wiring, settings) are
    scored once and kept under each key."""
    scorer = scorer or make_scorer(bank, draft, num_steps)
    wiring, variant, scores, labels = {}, {}, {}, {}
    for key, h in hypotheses.items():
        h = h if isinstance(h, Hypothesis) else Hypothesis(*h, label=str(key))
        wiring[key], variant[key] = tuple(int(k) for k in h.wiring), settings_for(draft, h.rule)
        scores[key], labels[key] = scorer(wiring[key], variant[key]), h.label
    if len(set(labels.values())) != len(labels):
        raise ValueError(f"compare_wirings: two hypotheses share a label ({list(labels.values())}); each needs its own")
    # compare keeps the order given, so each key's verdict is the one at its position
    verdicts = compare({labels[k]: s for k, s in scores.items()}, labels[reference], level=level)
    return WiringComparison(verdicts, scores, wiring, variant, bank.num_layers, dict(zip(scores, verdicts)))


def served_hypothesis(draft, profile) -> tuple:
    """(wiring, settings) ``profile`` runs ``draft`` with: a hypothesis for :func:`compare_wirings`."""
    from eagle3lab.analysis.wiring_search import settings_of

    view = draft.under(profile)
    return tuple(view.aux_resid), settings_of(view)
