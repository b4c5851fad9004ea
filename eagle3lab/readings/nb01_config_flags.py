"""What a launch's cap on accept length costs, stated as one verdict from the numbers (notebook 01's summary).

``cap_verdict(res, readings, ...)`` takes the flag resolution (``resolve_flags``) and the measured demo (one
``LaunchReading`` per launch: as launched, then fixed; ``demo_table`` shows them) and returns a ``CapVerdict``: its ``text`` says what the engine
runs, what the cap costs at an assumed alpha, and whether the launch with the cap lifted (the chain the command
asked for) measured a longer accept length than the one as launched ("longer", "no longer"), every number taken
from ``claims``; it calls the lifted cap what it is, not a fix: whether the longer chain is faster is notebook 06's
measurement (and 05's projection).
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from eagle3lab.engines.acceptance import expected_tau


@dataclass(frozen=True)
class LaunchReading:
    """One launch of the demo as measured: the tokens verified per round, the measured tau, the most tokens
    emitted in one round and the cap (num_steps + 1)."""
    launch: str
    verified: int | None
    tau: float
    most_in_a_round: int
    cap: int


# display labels, used only by ``demo_table``
_LABELS = {"verified": "verified per round", "tau": "tau (measured)", "most_in_a_round": "most tokens in one round",
           "cap": "cap"}


def demo_table(readings: list[LaunchReading]) -> pd.DataFrame:
    """The readings as the notebook shows them: one row per launch, labelled columns."""
    return pd.DataFrame([{"launch": r.launch, **{label: getattr(r, name) for name, label in _LABELS.items()}}
                         for r in readings]).set_index("launch")


@dataclass
class CapVerdict:
    text: str
    claims: dict       # the numbers ``text`` states, by name (the notebook passes both to ``eagle3lab.summary``)


def cap_verdict(res, readings: list[LaunchReading], *, alpha: float, ran: int, wanted: int, command: str, draft: str, target: str,
                measured: str = "decoding for real", adjusted_code: str = "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED") -> CapVerdict:
    """The verdict on launch ``res`` (a flags result) and its measured ``readings`` (as launched, fixed);
    ``measured``: how the demo was measured
    ("decoding for real", or "teacher-forced on dumped states" when no target was loaded)."""
    adj = res.finding(adjusted_code)
    counts = res.to_dict()["counts"]
    claims = dict(alpha=alpha, max_accept_length=res.max_accept_length, tau_cap_ran=expected_tau([alpha] * ran),
                  tau_cap_wanted=expected_tau([alpha] * wanted), tau_as_given=float(readings[0].tau),
                  tau_fixed=float(readings[1].tau), most_in_a_round=int(readings[0].most_in_a_round), adjusted=adj is not None, **counts)
    claims["fixed_longer"] = claims["tau_fixed"] > claims["tau_as_given"]
    text = (f"{res.engine} ({res.version_note}) runs `{command}` as {res.effective.get('algorithm')} with at "
            f"most **{res.max_accept_length}** tokens per verify step")
    if adj:
        text += (f": the command asks for {res.as_given['num_draft_tokens']} draft tokens, but with topk 1 SGLang "
                 f"sets them to steps + 1 = {res.effective['num_draft_tokens']}. At α = {alpha} that caps E[τ] at "
                 f"{claims['tau_cap_ran']:.2f} instead of {claims['tau_cap_wanted']:.2f} for the intended "
                 f"{wanted}-step chain; the cap lifted (the chain the command asked for): `--speculative-num-steps "
                 f"{wanted} --speculative-eagle-topk 1 --speculative-num-draft-tokens {wanted + 1}`")
    text += (f". {measured[:1].upper() + measured[1:]} with {draft} on {target}, the launch as given ran "
             f"**tau {claims['tau_as_given']:.2f}** (never more than {claims['most_in_a_round']} "
             f"tokens per round) and with the cap lifted (steps {wanted}, topk 1) tau {claims['tau_fixed']:.2f}, "
             + ("a longer accept length" if claims["fixed_longer"] else "no longer accept length")
             + f". A longer accept length is not a faster server: every round of the {wanted}-step chain pays "
               f"{wanted} draft passes, so whether lifting the cap pays is a timing, not this table: notebook 06 times "
               "it on the case's own draft on its doctor's ladder (one change per rung, each measured against the "
               "one before), and notebook 05 prices it with the cost model")
    text += (f". Aux states fed to fc: {res.effective.get('aux_label', 'unknown')}. "
             f"{counts['error']} errors, {counts['warning']} warnings, {counts['info']} notes in total.")
    return CapVerdict(text, claims)
