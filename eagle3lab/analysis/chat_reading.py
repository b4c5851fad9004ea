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

from dataclasses import dataclass

import pandas as pd

from eagle3lab.analysis.speed_reading import fmt, interval_claims, signed
from eagle3lab.analysis.verdicts import speed_word, word_of
from eagle3lab.engines.acceptance import Interval, tau_difference, tau_interval
from eagle3lab.engines.layer_ids import resid_label

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
                         "vs generate": speed.value, "vs generate low": speed.low, "vs generate high": speed.high,
                         "speed": speed_word(speed)})
    return pd.DataFrame(rows).set_index(["request", "draft"])


def rendering_summary(table: pd.DataFrame, *, prompts: int, num_steps: int, device: str) -> tuple[str, dict]:
    """Live mode: the chat-trained draft's gap between the renderings and its lead over the raw-text draft, each
    against the intervals; (text, claims)."""
    t = table.tau
    chat, raw_ = (CHAT, CHAT_DRAFT), (RAW, CHAT_DRAFT)
    separated = bool(table.loc[chat, "tau_low"] > table.loc[raw_, "tau_high"])
    drafts_separated = bool(table.loc[chat, "tau_low"] > table.loc[(CHAT, RAW_DRAFT), "tau_high"])
    claims = dict(tau_chat_chat=t[chat], tau_chat_raw=t[raw_], tau_raw_draft_chat=t[CHAT, RAW_DRAFT],
                  tau_raw_draft_raw=t[RAW, RAW_DRAFT], gap=t[chat] - t[raw_], separated=separated,
                  chat_interval=[table.loc[chat, "tau_low"], table.loc[chat, "tau_high"]],
                  raw_interval=[table.loc[raw_, "tau_low"], table.loc[raw_, "tau_high"]],
                  lossless=bool((table.identical == table.prompts).all()), prompts=prompts,
                  drafts_gap=t[chat] - t[CHAT, RAW_DRAFT], drafts_separated=drafts_separated,
                  vs_generate={f"{r} | {d}": {"value": row["vs generate"], "low": row["vs generate low"],
                                              "high": row["vs generate high"], "word": row["speed"]}
                               for (r, d), row in table.iterrows()},
                  mode="live", skipped=[])
    text = (f"Live mode (the target loaded here). On {prompts} held-out requests ({num_steps}-step chains, {device}), "
            f"the chat-trained draft has tau {claims['tau_chat_chat']:.2f} [{claims['chat_interval'][0]:.2f}, "
            f"{claims['chat_interval'][1]:.2f}] on chat-templated requests and {claims['tau_chat_raw']:.2f} "
            f"[{claims['raw_interval'][0]:.2f}, {claims['raw_interval'][1]:.2f}] on the same requests as raw completions: "
            f"a gap of {claims['gap']:.2f}, "
            + ("beyond both intervals. " if separated else "inside the noise of this many prompts. ")
            + f"The raw-text draft gives {claims['tau_raw_draft_chat']:.2f} (chat template) and "
            f"{claims['tau_raw_draft_raw']:.2f} (raw): on chat-templated requests the chat-trained draft leads it by "
            f"{claims['drafts_gap']:.2f}, " + ("beyond both intervals. " if drafts_separated else "inside the noise. ")
            + f"Every output was token-identical to generate: {claims['lossless']}.")
    return text, claims


@dataclass
class TeacherForcedDrafts:
    """Both drafts teacher-forced on one bank (a dump's states): tau per draft and the paired difference."""

    tau: dict              # draft label -> Interval
    diff: Interval         # the chat-trained draft minus the raw-text draft, paired over the same prompts
    num_steps: int
    prompts: int
    anchors: int

    @property
    def word(self) -> str:
        return word_of(self.diff)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"draft": label, "tau 95% (teacher-forced)": fmt(iv)} for label, iv in self.tau.items()]
                            ).set_index("draft")

    def words(self) -> str:
        against = {"beats": "beats", "loses": "loses to", "within noise": "is within noise of"}[self.word]
        return (f"teacher-forced on the dump's {self.prompts} prompts ({self.anchors} anchors, {self.num_steps}-step "
                f"chains), the chat-trained draft (tau {fmt(self.tau[CHAT_DRAFT])}) {against} the raw-text draft "
                f"(tau {fmt(self.tau[RAW_DRAFT])}): {signed(self.diff)}")

    def claims(self) -> dict:
        return {"tau": {label: interval_claims(iv) for label, iv in self.tau.items()},
                "diff": interval_claims(self.diff), "word": self.word, "num_steps": self.num_steps,
                "prompts": self.prompts, "anchors": self.anchors}


def teacher_forced_drafts(bank, drafts: dict, num_steps: int) -> TeacherForcedDrafts:
    """``drafts`` (label -> draft, ``CHAT_DRAFT`` and ``RAW_DRAFT``) teacher-forced on ``bank`` with their own wiring."""
    from eagle3lab.decoding.evaluate import evaluate_on_bank

    scores = {label: evaluate_on_bank(bank, d, tuple(d.aux_resid), num_steps=num_steps) for label, d in drafts.items()}
    tau = {label: tau_interval(s.accept) for label, s in scores.items()}
    anchors = sum(len(a) for a in scores[CHAT_DRAFT].accept)
    return TeacherForcedDrafts(tau, tau_difference(scores[CHAT_DRAFT].accept, scores[RAW_DRAFT].accept), int(num_steps),
                               len(bank.lengths), anchors)


def offline_summary(*, source, skipped, drafts: dict, engine: str, scored: TeacherForcedDrafts | None = None
                    ) -> tuple[str, dict]:
    """Dump or config-only mode: the mode, what ``engine`` feeds each draft, the teacher-forced comparison (dump
    mode) and every section skipped; (text, claims)."""
    fed = {label: list(d.under(engine).aux_resid) for label, d in drafts.items()}
    text = (f"{source.mode.capitalize()} mode ({source.name}; no target loaded here, nothing decoded). "
            f"{engine} feeds " + "; ".join(f"the {label} {resid_label(r, source.num_layers)}" for label, r in fed.items())
            + ". ")
    claims = {"mode": source.mode, "num_layers": source.num_layers, "arch": source.arch, "fed": fed,
              "skipped": list(skipped)}
    if scored is not None:
        text += scored.words()[0].upper() + scored.words()[1:] + " (as the cluster rendered them). "
        claims["teacher_forced"] = scored.claims()
    text += "Skipped, for want of the loaded target: " + "; ".join(skipped) + "."
    return text, claims
