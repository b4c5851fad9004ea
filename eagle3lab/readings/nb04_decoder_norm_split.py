"""Notebook 04's readings of the first layer's residual rule (``norm_before_residual``).

:func:`compare_rules` scores each draft, fed its trained wiring, under each rule; :func:`engine_rules` runs
the draft with each engine profile's own rule; :func:`rule_summary` is the notebook's summary, its words
from its claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from eagle3lab.analysis.hypotheses import make_scorer, settings_for
from eagle3lab.analysis.verdicts import Verdict, Verdicts, compare


@dataclass
class RuleComparison:
    """Each draft (fed its trained wiring) under each residual rule, scored on one bank."""

    scores: dict                 # (draft name, rule) -> BankScore
    per_draft: dict              # draft name -> Verdicts over its rules (labelled for display), the preferred the reference
    preferred: dict              # draft name -> the rule with the higher tau
    wiring: dict
    by_rule: dict                # (draft name, rule) -> its Verdict in per_draft (read by rule, never by label)

    def tau(self, name: str, rule: bool) -> float:
        return self.by_rule[name, bool(rule)].value.value

    def verdict(self, name: str) -> Verdict:
        """The other rule against the preferred one."""
        return self.by_rule[name, not self.preferred[name]]

    def table(self) -> pd.DataFrame:
        """tau with its interval, a_k (share of rounds with >= k accepted) and the rounds reaching each position."""
        rows = []
        for (name, rule), s in self.scores.items():
            v = self.by_rule[name, rule]
            row = {"draft": name, "norm_before_residual": rule, "tau": round(v.value.value, 3),
                   "tau 95%": f"[{v.value.low:.2f}, {v.value.high:.2f}]", "verdict": v.word}
            row.update({f"a{k}": round(a, 3) for k, a in enumerate(s.stats.survival, start=1)})
            row["rounds reaching 1..K"] = list(s.stats.reached_per_pos)
            rows.append(row)
        return pd.DataFrame(rows).set_index(["draft", "norm_before_residual"])

    def survival_frame(self) -> pd.DataFrame:
        """tau and a1..aK only (what ``plot_survival_by_rule`` draws)."""
        df = self.table()
        return df[["tau"] + [c for c in df.columns if c[0] == "a" and c[1:].isdigit()]]

    def words(self) -> str:
        lines = []
        for name in self.per_draft:
            v, best = self.verdict(name), self.preferred[name]
            if v.word != "loses":       # within noise or identical: the prompts rank neither rule
                lines.append(f"- {name}: with norm_before_residual={not best} it {v.against()}: these "
                             "prompts do not tell which rule it was trained with.")
            else:
                lines.append(f"- {name}: the weights prefer norm_before_residual={best} "
                             f"(tau {self.tau(name, best):.2f}); with {not best}, {v.measured()}, it loses "
                             f"{v.margin()} tokens per round.")
        return "\n".join(lines)

    def claims(self) -> dict:
        return {name: {"preferred": bool(self.preferred[name]), "word": self.verdict(name).word,
                       **{str(k): v for k, v in vs.claims().items()}} for name, vs in self.per_draft.items()}


def compare_rules(bank, drafts: Mapping, *, num_steps: int, rules=(False, True), level: float = 0.95) -> RuleComparison:
    """``drafts``: name -> (draft, wiring). Each draft is scored fed ``wiring`` under each rule (its other
    settings as loaded); the rule with the higher tau is the reference the other is compared with."""
    scores, per, pref, wiring, by_rule = {}, {}, {}, {}, {}
    rules = [bool(r) for r in rules]
    for name, (d, w) in drafts.items():
        scorer, wiring[name] = make_scorer(bank, d, num_steps), tuple(int(k) for k in w)
        for r in rules:
            scores[name, r] = scorer(wiring[name], settings_for(d, r))
        pref[name] = max(rules, key=lambda r: scores[name, r].stats.tau)
        # each rule labelled once, for tables, words and claims' keys; compare keeps the order given
        per[name] = compare({_rule_label(r): scores[name, r] for r in rules}, _rule_label(pref[name]), level=level)
        by_rule.update({(name, r): v for r, v in zip(rules, per[name])})
    return RuleComparison(scores, per, pref, wiring, by_rule)


def files_ignoring(engine: str, flag: str = "norm_before_residual") -> tuple[str, ...]:
    """The draft model files of ``engine`` named by its engine-knowledge rows (``profiles.ROWS``: the files that read
    a flag or serve a draft family), when no row has any of them read ``flag``: each serves its own default for it.
    Empty when the engine reads ``flag`` somewhere, or no row names its files."""
    from eagle3lab.engines.profiles import FAMILY, FLAG, ROWS

    mine = [r for r in ROWS if r.engine == engine]
    if any(r.kind == FLAG and r.key == flag for r in mine):
        return ()
    return tuple(dict.fromkeys(r.reader.split()[0] for r in mine if r.kind in (FLAG, FAMILY) and r.reader))


def _rule_label(rule: bool) -> str:
    return f"norm_before_residual={rule}"


def engine_rules(bank, draft, wiring, profiles, *, num_steps: int, reference_rule: bool,
                 level: float = 0.95) -> Verdicts:
    """Each engine profile's own settings for ``draft`` (its residual rule decided by the profile), fed
    ``wiring``, against the draft under ``reference_rule``. Names: the profiles' engine names."""
    from eagle3lab.analysis.wiring_search import settings_of
    from eagle3lab.engines.profiles import PROFILES

    scorer = make_scorer(bank, draft, num_steps)
    wiring = tuple(int(k) for k in wiring)
    measured = {"reference": scorer(wiring, settings_for(draft, reference_rule))}
    for p in profiles:
        measured[PROFILES[p].engine] = scorer(wiring, settings_of(draft.under(p)))
    return compare(measured, "reference", level=level)


def engines_table(engines: Verdicts, engine_rule: dict, reference_rule: bool) -> pd.DataFrame:
    """``engine_rules``' verdicts as the notebook shows them: one row per engine (the reference row dropped), the
    rule each engine runs, and the difference column named after the reference rule it was measured against."""
    table = engines.table().drop(index=engines.reference)
    table.insert(0, "norm_before_residual", [engine_rule[e] for e in table.index])
    return table.rename(columns={f"minus {engines.reference}": f"minus {_rule_label(reference_rule)}"})


# the residual balance's stable columns (``plots.plot_residual_balance`` reads them) and their display labels
BALANCE_LABELS = {"cos_h_hidden_norm": "cos(h, hidden_norm(h))", "rms_residual": "rms residual",
                  "rms_attn_out": "rms attn_out", "attn_out_over_residual": "attn_out / residual",
                  "rms_mlp_out": "rms mlp_out", "agreement_prompt": "step-1 agreement, prompt",
                  "agreement_continuation": "step-1 agreement, continuation",
                  "agreement_all": "step-1 agreement, all positions"}


def balance_table(balance: pd.DataFrame) -> pd.DataFrame:
    """The residual balance (stable columns, ``BALANCE_LABELS``) relabelled for display."""
    return balance.rename(columns=BALANCE_LABELS)


@dataclass
class ScaleSweep:
    """Step-1 agreement of the flag-on run with its residual scaled by each factor c, against the flag-off run."""

    verdicts: Verdicts           # labelled for display ("flag off", "c = 0.25", ...): table and claims
    flag_off: Verdict
    by_factor: dict              # c -> Verdict (read by factor, never by label)

    def at(self, c: float) -> Verdict:
        return self.by_factor[c]

    def series(self) -> pd.Series:
        """c -> step-1 agreement (what ``plots.plot_residual_scale`` draws)."""
        return pd.Series({c: v.value.value for c, v in self.by_factor.items()}, name=self.verdicts.quantity)

    def table(self) -> pd.DataFrame:
        return self.verdicts.table()

    def claims(self) -> dict:
        return self.verdicts.claims()

    def words(self, h_scale: float, positions: str) -> str:
        """The sweep's two end points in words, on the positions it was measured on (``positions_said``)."""
        at_scale, at_one = self.at(round(h_scale, 2)), self.at(1.0)
        return (f"Over {positions}: at c = 1 (the trained arithmetic) {at_one.measured(3)} "
                f"{at_one.against(3)}; at c = {h_scale:.2f} (the median rms(h)) {at_scale.measured(3)} "
                f"{at_scale.against(3)}. At c = 1 the run is the flag-on run itself, so these two end points, flag on "
                f"{at_one.value.value:.3f} and flag off {self.flag_off.value.value:.3f}, are the balance table's "
                f"'{BALANCE_LABELS['agreement_all']}' column (the prompt and continuation columns beside it hold two "
                "of those positions' three parts).")


def position_counts(rows_of: Mapping) -> dict:
    """How many rows each of ``probe_positions``' masks holds."""
    return {k: int(m.sum()) for k, m in rows_of.items()}


def positions_said(counts: Mapping, num_steps: int) -> str:
    """``probe_positions``' "all" in words, from ``position_counts``: the prompt rows, the continuation anchors, and
    the continuation rows too near the end to anchor a chain (what "all" holds besides the other two)."""
    tail = counts["all"] - counts["prompt"] - counts["continuation"]
    return (f"all {counts['all']} positions of the first draft pass ({counts['prompt']} prompt tokens, "
            f"{counts['continuation']} continuation anchors and {tail} last continuation positions, too near the end "
            f"to anchor a {num_steps}-step chain)")


def scale_sweep(flag_off, scaled: Mapping, *, level: float = 0.95) -> ScaleSweep:
    """``flag_off``: the flag-off run's step-1 hits (``verdicts.Measured``); ``scaled``: factor c -> the flag-on
    run's hits with its residual times c. Each factor against the flag-off run, paired over prompts."""
    factors = [float(c) for c in scaled]
    labels = [f"c = {c:.2f}" for c in factors]
    if len(set(labels)) != len(labels):
        raise ValueError(f"scale_sweep: factors {factors} share a two-decimal label; give factors that differ at 0.01")
    verdicts = compare({"flag off": flag_off, **dict(zip(labels, scaled.values()))}, "flag off",
                       quantity="step-1 agreement", level=level)
    off, *rest = verdicts
    return ScaleSweep(verdicts, off, dict(zip(factors, rest)))


def probe_positions(prompt_lens, lengths, width: int, num_steps: int, device=None) -> dict:
    """Boolean ``[B, width]`` masks over the rows of a first draft pass (row t reads token t+1 and the target's
    states at t): ``prompt`` rows inside the prompt, ``continuation`` the anchors a teacher-forced chain of
    ``num_steps`` scores (after the prompt, every position inside the sequence)."""
    import torch

    rows = torch.arange(width, device=device)[None]
    p = torch.tensor(list(prompt_lens), device=device)[:, None]
    n = torch.tensor(list(lengths), device=device)[:, None]
    return {"prompt": rows < p - 1, "continuation": (rows >= p - 1) & (rows + num_steps <= n - 1),
            "all": rows < n - 1}


def rule_summary(*, study: str, control: str, scale: pd.DataFrame, cos_h_normed: float, patch_diff: float,
                 rules: RuleComparison, engines: Verdicts, engine_rule: dict, serving_engine: str,
                 agreement: dict, scale_sweep: ScaleSweep, h_scale: float, num_steps: int,
                 mla: dict, positions: dict,
                 states_from: str = "the as-trained set notebook 03 uses") -> tuple[str, dict]:
    """Notebook 04's summary: (text, claims); ``states_from`` says whose sequences the acceptance was scored on;
    ``positions``: ``position_counts`` of the first draft pass (the scale sweep's step-1 agreement is over "all")."""
    s = scale.xs(study, level="draft")["median"]
    embed, fc, emb_n, hid_n = (float(s.iloc[i]) for i in range(4))
    honour = [e for e, v in engine_rule.items() if v == rules.preferred[study]]
    other = [e for e, v in engine_rule.items() if v != rules.preferred[study]]
    serving = engines[serving_engine]
    a = agreement
    at_scale = scale_sweep.at(round(h_scale, 2))
    text = (f"In the draft's first layer the embedding half and the fc half enter at very different scales (median "
            f"per-token RMS {embed:.3f} vs {fc:.1f} in {study}); after their norms both are near 1 ({emb_n:.2f} and "
            f"{hid_n:.2f}). The residual rule is a question of scale: h and hidden_norm(h) have cosine "
            f"{cos_h_normed:.3f} but differ by that factor, and patching layers.0.hook_residual to hidden_norm(h) in a "
            f"flag-off run reproduces the flag-on logits (max difference {patch_diff:.1g}). Scaling the flag-on residual "
            f"by c = {h_scale:.2f} (the median rms(h)), step-1 agreement over all {positions['all']} positions of "
            f"the first draft pass (prompt tokens and continuation) {at_scale.value.value:.3f} "
            f"{at_scale.against(3, reference='the flag-off run')}. Teacher-forced {num_steps}-step chains with the trained "
            f"wiring, on {rules.verdict(study).value.units} prompts ({states_from}): ")
    for name in (study, control):
        v, best = rules.verdict(name), rules.preferred[name]
        text += (f"{name} prefers norm_before_residual={best} (tau {rules.tau(name, best):.2f}); with {not best} tau "
                 f"{rules.tau(name, not best):.2f}, " + (f"it loses {v.margin()}" if v.word == "loses"
                                                        else f"it {v.against()}") + ". ")
    text += (f"Engines that run {study} with its preferred rule: {', '.join(honour) or 'none'}; with the other: "
             f"{', '.join(other) or 'none'} ({serving_engine}: {serving.measured()}). Step-1 agreement of {study} "
             f"(preferred rule) is {a['continuation']:.2f} on the continuation anchors, "
             + ("exactly its a1" if abs(a["continuation"] - a["a1"]) < 1e-9 else "while its a1 is")
             + f" ({a['a1']:.2f}), and {a['prompt']:.2f} on the prompt tokens: "
             + ("the gap is the tokens, not the rule. " if abs(a["continuation"] - a["a1"]) < 1e-9 else
                "the two differ by more than the tokens. ")
             +
             f"The MLA_CONFIG draft declares {mla['attention']} attention and {mla['rope']} RoPE; of the engine profiles only "
             f"{', '.join(mla['runs_in']) or 'none'} build its first layer.")
    claims = dict(embed_rms=embed, fc_rms=fc, emb_normed_rms=emb_n, hid_normed_rms=hid_n, cos_h_normed=cos_h_normed,
                  patch_diff=float(patch_diff), rules=rules.claims(), engines=engines.claims(),
                  rule_by_engine={e: bool(v) for e, v in engine_rule.items()}, honour=honour, other=other,
                  agreement=a, scale_sweep=scale_sweep.claims(), h_scale=h_scale, num_steps=num_steps,
                  positions=dict(positions),
                  mla_attention=mla["attention"], mla_rope=mla["rope"], mla_runs_in=mla["runs_in"],
                  tau={f"{n} {r}": rules.tau(n, r) for n in (study, control) for r in (True, False)},
                  survival={f"{n} {r}": list(rules.scores[n, r].stats.survival) for n in (study, control)
                            for r in (True, False)},
                  preferred={n: bool(rules.preferred[n]) for n in (study, control)})
    return text, claims
