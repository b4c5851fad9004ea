"""What a notebook run on a hidden-state dump (no loaded target) skips, and where the dump's anchors lie.

:class:`SkipLog` records the sections a mode skips (each printed by ``TargetSource.skip``) for a summary;
:class:`ScoredFrom` says, from what a dump states, which positions its teacher-forced anchors cover.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SkipLog:
    """``skips(what)``: True (and ``source.skip``'s line) when the section needs the loaded target; kept in order."""

    source: object
    skipped: list = field(default_factory=list)

    def __call__(self, what: str) -> bool:
        if self.source.skip(what):
            self.skipped.append(what)
            return True
        return False


@dataclass(frozen=True)
class ScoredFrom:
    """Where a dump's teacher-forced anchors lie, from what the dump states (``models.hidden_dump.HiddenDump``):
    ``prompt_len`` per sample (its manifest's samples; a bare vLLM dump has no manifest, so none) says where the
    continuation starts, and the manifest's ``continuation: "greedy"`` that the target wrote it greedily. Without
    prompt_len the bank anchors from the second token on (``check_prompt_lens``' default), the prompt and any chat
    template scored as if answered; a continuation not stated greedy is scored on text the target may not have
    written, so past the first position a chain is not what a greedy decoding would accept."""

    dump: str                # the dump's folder, as the words name it
    prompt_lens: bool        # every sample states its prompt_len
    greedy: bool             # the manifest states continuation "greedy"

    @property
    def what(self) -> str:
        if not self.prompt_lens:
            return "every position (no prompt_len)"
        return "the greedy answers" if self.greedy else "the answers (continuation not stated greedy)"

    def words(self) -> str:
        """One sentence: what the anchors cover, and for a dump that does not say, which field it lacks."""
        if self.prompt_lens and self.greedy:
            return f"Scored from each sample's prompt_len on: the target's greedy answers (the dump {self.dump} states both)."
        parts = []
        if not self.prompt_lens:
            parts.append(f"The dump {self.dump} states no prompt_len per sample (a bare vLLM dump has no manifest.json), so "
                         "every position from the second token on is an anchor: the prompt (and any chat template) is "
                         "scored with the answer, and these taus are not the answers' alone")
        if not self.greedy:
            parts.append(("it" if parts else f"The dump {self.dump}") + " does not state its continuation as the "
                         "target's greedy output (no continuation: \"greedy\" in a manifest), so each chain is scored on "
                         "text the target may not have written, not on what a greedy decoding of these prompts would "
                         "accept")
        return "; ".join(parts) + "."

    def claims(self) -> dict:
        return {"scored_from": self.what, "prompt_lens_stated": self.prompt_lens, "continuation_greedy": self.greedy}


def scored_from(dump) -> ScoredFrom:
    """What ``dump`` (a ``HiddenDump``) states about where its anchors lie (:class:`ScoredFrom`)."""
    return ScoredFrom(dump.path.name, dump.prompt_lens is not None, dump.continuation == "greedy")
