"""Notebook 07's readings: a chat-trained and a raw-text draft on chat-templated and raw requests, in words that
follow from the intervals.

Live, each rendering is one ``decode_sweep`` (both drafts beside ``generate``): tau with its interval over prompts
(``DecodeSweep.tau_interval``) and each draft's end-to-end speed over ``generate`` with its paired interval
(``DecodeSweep.speed_ratio(label, GENERATE, kind="e2e")``, worded by ``verdicts.speed_word``). With a dump of the
target's states instead (``models.target_source``, dump mode) nothing decodes: both drafts are scored
teacher-forced on the dump's sequences (``decoding.evaluate.evaluate_on_bank``) and their paired difference is
worded by ``verdicts.word_of``; the two renderings need the target to answer each, so that comparison is skipped
and said to be. Config-only mode says what each engine feeds the drafts, and scores nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import pandas as pd

from eagle3lab.analysis.verdicts import AGAINST, speed_word, word_of
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio_difference, tau_difference, tau_interval
from eagle3lab.engines.layer_ids import resid_label
from eagle3lab.readings.dump_mode import ScoredFrom
from eagle3lab.readings.numbers import fmt, interval_record, signed

CHAT, RAW = "chat template", "raw completion"
CHAT_DRAFT, RAW_DRAFT = "chat-trained draft", "raw-text draft"


def rendering_table(sweeps: dict, drafts, prompts: int) -> pd.DataFrame:
    """One row per (rendering, draft): tau and its interval, c_1, lossless count, and the end-to-end speed over
    ``generate`` with its paired interval over the prompts and its word."""
    from eagle3lab.analysis.benchmark import GENERATE

    rows = []
    for render, sweep in sweeps.items():
        for label in drafts:
            iv, speed = sweep.tau_interval(label), sweep.speed_ratio(label, GENERATE, kind="e2e")
            rows.append({"request": render, "draft": label, "tau": iv.value, "tau_low": iv.low, "tau_high": iv.high,
                         "c1": sweep.stats(label).conditional[0], "identical": sweep.identical(label), "prompts": prompts,
                         "vs_generate": speed.value, "vs_generate_low": speed.low, "vs_generate_high": speed.high,
                         "speed": speed_word(speed)})
    return pd.DataFrame(rows).set_index(["request", "draft"])


# ``rendering_table``'s speed columns as the notebook shows them (the rest show under their own names)
RENDERING_LABELS = {"vs_generate": "vs generate", "vs_generate_low": "vs generate low",
                    "vs_generate_high": "vs generate high"}


def rendering_shown(table: pd.DataFrame) -> pd.DataFrame:
    """``rendering_table`` relabelled for display."""
    return table.rename(columns=RENDERING_LABELS)


def _tokens_and_rounds(sweep, label: str) -> tuple[list, list]:
    """Per request, in the order decoded: the tokens a round log emitted (accepted + one each) and its rounds."""
    counts = [[int(r.accepted) for r in out.rounds] for out in sweep.results[label]]
    return [sum(c) + len(c) for c in counts], [len(c) for c in counts]


def paired_gaps(sweeps: dict, level: float = 0.95) -> dict:
    """07's two gaps, each a paired difference (a separate interval per side would hide what the pairing shows):
    ``rendering``, the chat-trained draft's tau on chat-templated minus raw requests (the same requests, in the same
    order in both sweeps); ``drafts``, the chat-trained minus the raw-text draft on chat-templated requests (both
    decoded in one sweep, ``DecodeSweep.tau_difference``)."""
    (na, da), (nb, db) = (_tokens_and_rounds(sweeps[r], CHAT_DRAFT) for r in (CHAT, RAW))
    if len(na) != len(nb):
        raise ValueError(f"paired_gaps: {len(na)} chat-templated and {len(nb)} raw requests; the renderings are "
                         "compared request by request, so both sweeps need the same requests")
    return {"rendering": bootstrap_ratio_difference(na, da, nb, db, level=level),
            "drafts": sweeps[CHAT].tau_difference(CHAT_DRAFT, RAW_DRAFT, level=level)}


_AGAINST = AGAINST   # the one vocabulary (verdicts.AGAINST)


def rendering_summary(table: pd.DataFrame, gaps: dict, *, prompts: int, num_steps: int, device: str
                      ) -> tuple[str, dict]:
    """Live mode: the chat-trained draft's gap between the renderings and its gap to the raw-text draft, each a
    paired difference (``paired_gaps``) worded by ``verdicts.word_of``; (text, claims)."""
    t = table.tau
    chat, raw_ = (CHAT, CHAT_DRAFT), (RAW, CHAT_DRAFT)

    def tau_of(key) -> dict:
        row = table.loc[key]
        return {"value": row.tau, "low": row.tau_low, "high": row.tau_high, "level": 0.95, "units": prompts,
                "unit": "tokens per round"}

    gap, drafts = gaps["rendering"], gaps["drafts"]
    claims = dict(tau_chat_chat=t[chat], tau_chat_raw=t[raw_], tau_raw_draft_chat=t[CHAT, RAW_DRAFT],
                  tau_raw_draft_raw=t[RAW, RAW_DRAFT], chat_interval=tau_of(chat), raw_interval=tau_of(raw_),
                  gap={**interval_record(gap, "tokens per round"), "word": word_of(gap)},
                  drafts_gap={**interval_record(drafts, "tokens per round"), "word": word_of(drafts)},
                  lossless=bool((table.identical == table.prompts).all()), prompts=prompts,
                  vs_generate={f"{r} | {d}": {"value": row.vs_generate, "low": row.vs_generate_low,
                                              "high": row.vs_generate_high, "level": 0.95, "units": prompts,
                                              "unit": "x generate", "word": row["speed"]}
                               for (r, d), row in table.iterrows()},
                  mode="live", skipped=[])
    ci, ri = claims["chat_interval"], claims["raw_interval"]
    text = (f"Live mode (the target loaded here). On {prompts} held-out requests ({num_steps}-step chains, {device}), "
            f"the chat-trained draft has tau {ci['value']:.2f} [{ci['low']:.2f}, {ci['high']:.2f}] on chat-templated "
            f"requests and {ri['value']:.2f} [{ri['low']:.2f}, {ri['high']:.2f}] on the same requests as raw "
            f"completions: rendered with the chat template it {_AGAINST[word_of(gap)]} the raw rendering "
            f"({signed(gap)}, paired over the same requests). The raw-text draft gives {t[CHAT, RAW_DRAFT]:.2f} (chat "
            f"template) and {t[RAW, RAW_DRAFT]:.2f} (raw): on chat-templated requests the chat-trained draft "
            f"{_AGAINST[word_of(drafts)]} it ({signed(drafts)}, paired over the same requests). "
            f"Every output was token-identical to generate: {claims['lossless']}.")
    return text, claims


@dataclass
class TeacherForcedDrafts:
    """Both drafts teacher-forced on one bank (a dump's states) with each draft's own wiring and settings (as its
    checkpoint states them, as the live sections decode it): tau per draft, the paired difference, and what the
    anchors cover."""

    tau: dict              # draft label -> Interval
    diff: Interval         # the chat-trained draft minus the raw-text draft, paired over the same prompts
    num_steps: int
    prompts: int
    anchors: int
    wiring: dict = field(default_factory=dict)   # draft label -> the resid points scored (its own aux_resid)
    where: ScoredFrom | None = None              # what the dump says its anchors cover (None: a live bank)

    @property
    def word(self) -> str:
        return word_of(self.diff)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"draft": label, "wiring scored (its own)": str(self.wiring.get(label, "")),
                              "tau 95% (teacher-forced)": fmt(iv)} for label, iv in self.tau.items()]
                            ).set_index("draft")

    def words(self) -> str:
        """The comparison, then (from a dump) what its anchors cover."""
        return self.comparison() if self.where is None else f"{self.comparison()}. {self.where.words()}"

    def comparison(self) -> str:
        wiring = ", ".join(f"the {label} resid{w}" for label, w in self.wiring.items())
        return (f"teacher-forced on the dump's {self.prompts} prompts ({self.anchors} anchors, {self.num_steps}-step "
                f"chains; each draft with its own wiring and settings: {wiring}), the chat-trained draft (tau "
                f"{fmt(self.tau[CHAT_DRAFT])}) {_AGAINST[self.word]} the raw-text draft (tau {fmt(self.tau[RAW_DRAFT])}): "
                f"{signed(self.diff)}")

    def claims(self) -> dict:
        return {"tau": {label: interval_record(iv, "tokens per round") for label, iv in self.tau.items()},
                "diff": interval_record(self.diff, "tokens per round"), "word": self.word, "num_steps": self.num_steps,
                "prompts": self.prompts, "anchors": self.anchors, "wiring": dict(self.wiring), "scored_as": "own wiring",
                **({} if self.where is None else self.where.claims())}


def teacher_forced_drafts(bank, drafts: dict, num_steps: int, where: ScoredFrom | None = None) -> TeacherForcedDrafts:
    """``drafts`` (label -> draft, ``CHAT_DRAFT`` and ``RAW_DRAFT``) teacher-forced on ``bank`` with their own wiring
    and settings; ``where``: what the dump the bank came from says its anchors cover (``readings.dump_mode.scored_from``)."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank

    scores = {label: evaluate_on_bank(bank, d, tuple(d.aux_resid), num_steps=num_steps) for label, d in drafts.items()}
    tau = {label: tau_interval(s.accept) for label, s in scores.items()}
    anchors = sum(len(a) for a in scores[CHAT_DRAFT].accept)
    return TeacherForcedDrafts(tau, tau_difference(scores[CHAT_DRAFT].accept, scores[RAW_DRAFT].accept), int(num_steps),
                               len(bank.lengths), anchors, {label: list(d.aux_resid) for label, d in drafts.items()},
                               where)


def _arithmetic(settings) -> dict:
    """A draft's settings without the decisions' provenance (which engine's default said so): what it computes."""
    return {f.name: getattr(settings, f.name) for f in fields(settings) if f.name != "decisions"}


def offline_summary(*, source, skipped, drafts: dict, engine: str, scored: TeacherForcedDrafts | None = None
                    ) -> tuple[str, dict]:
    """Dump or config-only mode: the mode, what ``engine`` feeds each draft against its own wiring, the
    teacher-forced comparison (dump mode: which wiring was scored, what the anchors cover) and every section
    skipped; (text, claims)."""
    served = {label: d.under(engine) for label, d in drafts.items()}
    fed = {label: list(d.aux_resid) for label, d in served.items()}
    as_scored = {label: fed[label] == list(d.aux_resid) and _arithmetic(served[label].settings) == _arithmetic(d.settings)
                 for label, d in drafts.items()}
    text = (f"{source.mode.capitalize()} mode ({source.name}; no target loaded here, nothing decoded). {engine} feeds "
            + "; ".join(f"the {label} {resid_label(r, source.num_layers)}"
                        + (" (its own wiring)" if r == list(drafts[label].aux_resid) else
                           f" (its own: {resid_label(drafts[label].aux_resid, source.num_layers)})")
                        for label, r in fed.items()) + ". ")
    claims = {"mode": source.mode, "num_layers": source.num_layers, "arch": source.arch, "fed": fed,
              "served_as_scored": as_scored, "skipped": list(skipped)}
    if scored is not None:
        differs = [label for label, same in as_scored.items() if not same]
        said = scored.comparison()
        text += (said[0].upper() + said[1:] + " (as the cluster rendered them). "
                 + ("" if scored.where is None else scored.where.words() + " ")
                 + (f"These are the drafts as {engine} serves them too (the same wiring and settings). " if not differs
                    else f"Not as {engine} serves them: its wiring or settings differ for the "
                    + " and the ".join(differs) + ". "))
        claims["teacher_forced"] = scored.claims()
    text += "Skipped, for want of the loaded target: " + "; ".join(skipped) + "."
    return text, claims
