"""Acceptance against context position: does a draft hold up on long prompts, and as each engine runs it?

    curve = context_curve(target, draft)                      # bundled long documents, bins up to the target's length
    curve.to_frame()                                          # one row per (curve, position bin): tau and its interval
    curve.limits_frame()                                      # the draft's own limits and each engine's rule for them
    curve.reference.bins[i].tau / .change / .change_word      # typed: Interval, Interval, verdict word

The draft is scored teacher-forced (``eagle3lab.decoding.evaluate``: one target pass, ``num_steps`` draft passes;
the greedy chain's accepted length at every anchor, ``OfflineEval.accept_lengths``) on long documents, and the anchors
are binned by their context position (anchor row t reads the target's states of positions 0..t and the token at t + 1,
and drafts the tokens at t + 2 .. t + K + 1 with the draft at RoPE positions t .. t + K - 1; it sits in the bin holding
t + 1, the position of the last token it reads: 0-512, 512-1k, 1-2k, 2-4k, ... up to ``max_length``). Per bin, tau
(accepted + 1 per round) with a bootstrap interval over documents (``engines.acceptance.bootstrap_ratio``), and the
change from the bin before, a paired interval over the documents that reach both, worded by
``analysis.verdicts.word_of`` ("beats": higher than the bin before, "loses": lower, "within noise") only from
``MIN_DOCUMENTS`` documents on (fewer: ``TOO_FEW``, the interval shown unworded). ``past_trained`` holds each bin
past the length the draft was trained on against the last bin inside it, paired the same way: a draft falls past its
trained length only where a bin there loses to that level (a dip from one bin to the next that stays at or above it
is no such fall).

Curves (``CurveOfEngine``): ``reference`` runs the draft with no limit (full attention, RoPE at every position); each
engine of ``engines`` runs it as that engine's rule says (``eagle3lab.engines.context_rules.resolve_context``):
attention cut to the window the engine applies (on the layers it applies it to), and the anchors whose drafted
positions reach the first position the engine cannot serve (vLLM before PR #49343: the draft's
max_position_embeddings; SGLang: start-up refused) marked not served, with no tau. Each engine's bins carry their
paired difference from the reference (``vs_reference``). All curves are emulated here, not served.

Documents (``Documents``, saying what they are): ``corpus_documents`` concatenates whole held-out standard-library
files of the bundled corpus up to the length asked; ``chat_documents`` renders multi-turn chat transcripts with the
target's chat template (user: "Explain what this Python code does" over a held-out file's code, assistant: that
file's own comments and docstrings, not the target's words); ``file_documents`` reads a user's .jsonl or text file.
``default_documents`` picks chat transcripts for a target with a chat template, else corpus files.
"""

from __future__ import annotations

import json
import lzma
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import torch
from tqdm.auto import tqdm

from eagle3lab.analysis.verdicts import word_of
from eagle3lab.engines.acceptance import Interval, bootstrap_ratio, bootstrap_ratio_difference
from eagle3lab.engines.context_rules import ENGINES, TARGET, ContextRule, context_length, resolve_context
from eagle3lab.errors import bad_input

DEFAULT_MAX_LENGTH = 2048     # the default run on a CPU: bins up to 2k (a longer target needs --max-length)
# The fewest documents whose paired percentile-bootstrap interval words a change here. With few units that interval is
# too narrow: on a no-change simulation (per-document tau N(2, 0.3), each bin's tau its own +-0.3, 40-400 rounds a
# bin; 3,000 draws per n, tests/analysis/test_context_curve.py::test_min_documents_holds_false_verdicts_near_nominal
# re-runs it) "beats"/"loses" came out at n = 2: 49%, 3: 23%, 4: 19%, 6: 16%, 8: 12%, 10: 9.6%, 12: 9.0%, 16: 7.9%,
# 20: 7.7% (nominal 5%). 10 is the smallest n at most twice the nominal rate; fewer documents leave a curve unworded.
MIN_DOCUMENTS = 10
TOO_FEW = "too few documents"    # the word of a change measured on fewer than the minimum documents
SERVED, PARTLY, NOT_SERVED, EMPTY = "served", "partly served", "not served", "no anchors"
REFERENCE = "reference"


# ----------------------------------------------------------------------------- documents

@dataclass(frozen=True)
class Documents:
    """Token-id documents and what they are (``source``, said in every table)."""

    ids: tuple[tuple[int, ...], ...]
    source: str
    kind: str            # "code", "chat" or "file"

    @property
    def lengths(self) -> list[int]:
        return [len(d) for d in self.ids]


def _corpus_files(split: str = "heldout") -> list[dict]:
    from eagle3lab.bundled import CORPUS

    path = CORPUS / f"{split}.jsonl.xz"
    if not path.exists():
        raise bad_input(path, None, "the bundled corpus", "no such file", "It ships in data/corpus/.")
    with lzma.open(path, "rt", encoding="utf-8") as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda r: r["path"])


def _spread(files: list[dict], n: int) -> list[dict]:
    """The files in an order where every one of ``n`` documents starts at another part of the sorted list."""
    step = max(1, len(files) // n)
    return [r for start in range(0, len(files), step) for r in files[start:start + step]]


def _fill(pieces, encode, length: int, n: int, start: list[int] = ()) -> list[tuple[list[int], list[str]]]:
    """``n`` documents of ``length`` tokens, each whole pieces (path, text) concatenated in order until it is long
    enough (its last piece cut), then the next document starts at the next piece."""
    docs, ids, names = [], [], []
    for name, text in pieces:
        ids += (list(start) if not ids else []) + encode(text)
        names.append(name)
        if len(ids) >= length:
            docs.append((ids[:length], names))
            ids, names = [], []
            if len(docs) == n:
                return docs
    raise bad_input("documents", None, f"{n} documents of {length} tokens", f"{len(docs)} from the corpus",
                    "Ask for fewer or shorter documents (--max-length).")


def corpus_documents(tokenizer, length: int, n: int = 4) -> Documents:
    """Whole held-out standard-library files (the bundled corpus), concatenated to ``length`` tokens each."""
    pieces = [(r["path"], r["text"]) for r in _spread(_corpus_files(), n)]
    # one BOS at the document's start (the tokenizer's own, if it adds one), none between the files
    bos = [tokenizer.bos_token_id] if _adds_bos(tokenizer) else []
    docs = _fill(pieces, lambda t: list(tokenizer(t, add_special_tokens=False)["input_ids"]), length, n, bos)
    used = sum(len(names) for _, names in docs)
    return Documents(tuple(tuple(d) for d, _ in docs), f"{n} x {length} tokens of held-out Python standard-library "
                     f"source (the bundled corpus, {used} whole files concatenated)", "code")


def _adds_bos(tokenizer) -> bool:
    bos = getattr(tokenizer, "bos_token_id", None)
    return bos is not None and list(tokenizer("x")["input_ids"][:1]) == [bos]


def _turns(record: dict, lines: int = 40):
    """(user, assistant) turns over one file: a code chunk asked about, answered with that chunk's own comments."""
    rows = record["text"].splitlines()
    for start in range(0, len(rows), lines):
        chunk = "\n".join(rows[start:start + lines])
        notes = [r.strip().lstrip("#").strip() for r in rows[start:start + lines]
                 if r.strip().startswith(("#", '"""', "'''"))]
        answer = " ".join(n for n in notes if n) or f"This part of {record['path']} has no comments."
        yield f"Explain what this Python code does:\n\n```python\n{chunk}\n```", answer


def chat_documents(tokenizer, length: int, n: int = 4) -> Documents:
    """Multi-turn chat transcripts in the target's own chat template, ``length`` tokens each (module docstring)."""
    if getattr(tokenizer, "chat_template", None) is None:
        raise bad_input("tokenizer", "chat_template", "a chat template (chat transcripts)", "none",
                        "Use corpus_documents for a target without one.")

    def render(record):
        messages = [m for user, answer in _turns(record)
                    for m in ({"role": "user", "content": user}, {"role": "assistant", "content": answer})]
        return tokenizer.apply_chat_template(messages, tokenize=False)

    pieces = [(r["path"], render(r)) for r in _spread(_corpus_files(), n)]
    docs = _fill(pieces, lambda t: list(tokenizer(t, add_special_tokens=False)["input_ids"]), length, n)
    return Documents(tuple(tuple(d) for d, _ in docs), f"{n} x {length}-token chat transcripts in the target's chat "
                     "template (users ask about held-out standard-library code; assistant turns are that code's own "
                     "comments and docstrings, not the target's words)", "chat")


def file_documents(path, tokenizer, length: int | None = None) -> Documents:
    """A user's documents: a .jsonl with a 'text' or 'ids' per line (``bundled.prompt_rows``), else one text file;
    each cut to ``length`` tokens."""
    from eagle3lab.bundled import prompt_rows

    path = Path(path)
    if path.suffix == ".jsonl":
        rows = prompt_rows(path)
        ids = [r["ids"] if "ids" in r else list(tokenizer(r["text"])["input_ids"]) for r in rows]
    else:
        ids = [list(tokenizer(path.read_text(encoding="utf-8"))["input_ids"])]
    ids = [tuple(d[:length] if length else d) for d in ids]
    return Documents(tuple(ids), f"{len(ids)} documents from {path.name} ({min(map(len, ids))}-{max(map(len, ids))} "
                     "tokens)", "file")


def default_documents(target, length: int, n: int = 4) -> Documents:
    """Chat transcripts for a target with a chat template (the SmolLM2 track), else corpus files (bundled)."""
    tok = target.tokenizer
    if tok is None:
        raise bad_input("target", "tokenizer", "a tokenizer to build the documents with", "none",
                        "Pass documents= (token ids).")
    return chat_documents(tok, length, n) if getattr(tok, "chat_template", None) else corpus_documents(tok, length, n)


# ----------------------------------------------------------------------------- scoring

def position_bins(max_length: int, first: int = 512) -> tuple[tuple[int, int], ...]:
    """[0, 512), [512, 1024), [1024, 2048), ... doubling, the last ending at ``max_length``."""
    edges = [0]
    while edges[-1] < max_length:
        edges.append(min(max_length, first if edges[-1] == 0 else 2 * edges[-1]))
    return tuple(zip(edges[:-1], edges[1:]))


def bin_label(lo: int, hi: int) -> str:
    def k(x):
        return f"{x // 1024}k" if x >= 1024 and x % 1024 == 0 else str(x)
    return f"{k(lo)}-{k(hi)}"


@dataclass
class _Window:
    """Records the positions of every row the draft caches, so its attention can keep the window's keys only."""

    span: int
    layers: tuple[int, ...]
    keys: list = field(default_factory=list)
    query: torch.Tensor | None = None

    def on_draft(self, module, args, kwargs):
        cache, pos = kwargs.get("cache"), kwargs.get("position_ids")
        past = cache.seq_len if cache is not None else 0
        T = args[0].shape[1] if args else kwargs["input_ids"].shape[1]
        if past == 0:
            self.keys = []
        self.query = (pos[0] if pos is not None else torch.arange(past, past + T)).to("cpu")
        self.keys.append(self.query)

    def on_attention(self, module, args, kwargs):
        x, mask = args[0], args[4]
        T, S = x.shape[1], sum(len(k) for k in self.keys)
        keep = (self.query[:, None] - torch.cat(self.keys)[None, :]) < self.span
        base = torch.ones(T, S, dtype=torch.bool).tril(S - T) if mask is None else mask.cpu()
        return (*args[:4], (base & keep).reshape(1, 1, T, S).to(x.device), *args[5:]), kwargs


def _hooked(draft, window: _Window | None):
    handles = []
    if window is not None:
        handles.append(draft.register_forward_pre_hook(window.on_draft, with_kwargs=True))
        for i in window.layers:
            handles.append(draft.layers[i].self_attn.register_forward_pre_hook(window.on_attention, with_kwargs=True))
    return handles


@torch.inference_mode()
def _target_pass(tgt, d, ids: torch.Tensor):
    """(the target's greedy next token at every position, fc's input) for one document [1, L]."""
    from eagle3lab.models.capture import ResidCapture, build_fc_input
    from eagle3lab.models.state_bank import TargetHead

    points, n = list(d.aux_resid), tgt.num_layers
    with ResidCapture(tgt.model, sorted(set(points) | {n}), offload=False) as cap:
        tgt.model(input_ids=ids, use_cache=False, logits_to_keep=1)
        states = dict(cap.states)
    head = TargetHead.from_target(tgt)
    greedy = head.top1(head.normed(states[n]))
    return greedy, build_fc_input(states, points).tensor.to(d.fc.weight.dtype)


@torch.inference_mode()
def _accepts(d, ids, greedy, aux, K: int, window: _Window | None, chunk: int) -> torch.Tensor:
    """Accepted length per anchor row [L - 1] (-1 where not all K positions exist), the chain's teacher-forced
    decision (``decoding.evaluate.draft_passes`` and ``OfflineEval.accept_lengths``), ``chunk`` anchor rows at a
    time: each draft run reads the document only up to its last anchor's drafted positions."""
    from eagle3lab.decoding.evaluate import OfflineEval, draft_passes

    L = ids.shape[1]
    R = L - 1
    matches = torch.zeros(1, R, K, dtype=torch.bool)
    ext = torch.cat([greedy, torch.full((1, K), -1, dtype=greedy.dtype, device=greedy.device)], 1)
    handles = _hooked(d, window)
    try:
        for t0 in range(0, R, chunk):
            t1 = min(R, t0 + chunk)
            end = min(L, t1 + K + 1)
            at = torch.zeros(1, end - 1, dtype=torch.bool, device=ids.device)
            at[:, t0:t1] = True
            for k, out in enumerate(draft_passes(d, ids[:, :end], aux[:, :end], K, logits_at=at), start=1):
                proposal = d.to_target_ids(out.logits.argmax(-1))
                matches[0, t0:t1, k - 1] = (proposal == ext[0, t0 + k:t1 + k]).cpu()
    finally:
        for h in handles:
            h.remove()
    valid = (torch.arange(R)[None, :, None] + torch.arange(1, K + 1)[None, None] <= L - 1)
    return OfflineEval(K, matches & valid, valid, [L], [1]).accept_lengths[0]


# ----------------------------------------------------------------------------- curves

@dataclass(frozen=True)
class PositionBin:
    """One bin of context positions [lo, hi) on one curve. ``tau``: None where no anchor is served; ``served``: the
    share of the bin's anchors the engine runs; ``change``: tau minus the bin before's, paired over the documents
    that reach both (``change_word``: ``word_of_curve``: "beats" = higher, TOO_FEW under ``min_documents``);
    ``vs_reference``: this curve's tau minus the reference's on the same anchors (engines only)."""

    lo: int
    hi: int
    anchors: int
    documents: int
    tau: Interval | None
    served: float
    status: str                       # SERVED, PARTLY, NOT_SERVED, EMPTY
    past_draft_limit: bool            # a round in the bin drafts at or past the draft's max_position_embeddings
    past_window: bool                 # a round in the bin attends past the window this curve applies
    change: Interval | None = None
    change_word: str | None = None    # word_of_curve: TOO_FEW below min_documents documents
    vs_reference: Interval | None = None
    vs_reference_word: str | None = None
    min_documents: int = MIN_DOCUMENTS
    tokens: tuple[float, ...] = ()    # per document: tokens (accepted + 1) over the bin's served rounds
    rounds: tuple[float, ...] = ()    # per document: the bin's served rounds (0: none), for paired comparisons
    level: float = 0.95

    @property
    def label(self) -> str:
        return bin_label(self.lo, self.hi)

    def said(self, word: str | None, diff: Interval | None) -> str | None:
        """A word as printed: TOO_FEW with the count it lacks ("too few documents to word (n = 3; at least 10)")."""
        if word != TOO_FEW:
            return word
        return f"{TOO_FEW} to word (n = {diff.units}; at least {self.min_documents})"


@dataclass(frozen=True)
class CurveOfEngine:
    """The curve as ``engine`` runs the draft (REFERENCE: no limit), under ``rule`` (None for the reference)."""

    engine: str
    label: str
    rule: ContextRule | None
    bins: tuple[PositionBin, ...]


@dataclass(frozen=True)
class ContextCurve:
    """What ``context_curve`` measured; ``to_frame`` / ``limits_frame`` for tables (titles name the engines as
    emulated, the device and the dtype)."""

    reference: CurveOfEngine
    engines: dict[str, CurveOfEngine]
    documents: Documents
    draft_max_positions: int
    target_max_positions: int | None
    draft_window: int | None
    num_steps: int
    max_length: int
    device: str
    dtype: str
    level: float
    min_documents: int = MIN_DOCUMENTS

    @property
    def curves(self) -> list[CurveOfEngine]:
        return [self.reference, *self.engines.values()]

    def title(self) -> str:
        return (f"teacher-forced tau per context position (K={self.num_steps}, {self.level:.0%} bootstrap over "
                f"documents), engines emulated here on {self.device}, {self.dtype}: {self.documents.source}")

    def to_frame(self) -> pd.DataFrame:
        """One row per (curve, bin); tau in tokens per round; intervals as low/high columns."""
        rows = []
        for curve in self.curves:
            for b in curve.bins:
                iv = lambda x: (x.value, x.low, x.high) if x is not None else (float("nan"),) * 3
                rows.append({"curve": curve.label, "engine": curve.engine, "bin": b.label, "lo": b.lo, "hi": b.hi,
                             "anchors": b.anchors, "documents": b.documents, "status": b.status, "served": b.served,
                             **dict(zip(("tau", "tau_low", "tau_high"), iv(b.tau))),
                             **dict(zip(("change", "change_low", "change_high"), iv(b.change))),
                             "change_word": b.change_word, "change_units": _units(b.change),
                             **dict(zip(("vs_reference", "vs_reference_low", "vs_reference_high"), iv(b.vs_reference))),
                             "vs_reference_word": b.vs_reference_word,
                             "vs_reference_units": _units(b.vs_reference),
                             "past_draft_limit": b.past_draft_limit, "past_window": b.past_window})
        df = pd.DataFrame(rows)
        df.attrs["title"] = self.title()
        df.attrs["units"] = {"tau": "tokens per round (accepted + 1)", "lo": "context position (tokens)"}
        return df

    def limits_frame(self) -> pd.DataFrame:
        """The draft's limits and, per engine, what its rule does with them (emulated), with the notes' codes."""
        rows = [{"curve": c.label, "positions": c.rule.positions, "fails_from": c.rule.fails_from,
                 "window": c.rule.window, "window_layers": list(c.rule.window_layers),
                 "rope_same_as_target": c.rule.rope_same_as_target, "codes": list(c.rule.codes()),
                 "notes": " ".join(n.text for n in c.rule.notes)} for c in self.engines.values()]
        df = pd.DataFrame(rows)
        df.attrs["title"] = (f"the draft's limits (max_position_embeddings {self.draft_max_positions}, sliding window "
                             f"{self.draft_window or 'none'}; target {self.target_max_positions}) and each engine's "
                             f"rule (emulated, {self.device}, {self.dtype})")
        return df


@dataclass(frozen=True)
class _BinSums:
    """One bin's per-document (tokens, rounds) over the rows it serves, its anchors in all, and the last RoPE position
    a round of it drafts at (-1: no anchor)."""

    num: list[float]
    den: list[float]
    total: int
    reach: int


def _units(diff: Interval | None) -> int | None:
    return None if diff is None else diff.units


def _bin_sums(accepts: list[torch.Tensor], lo: int, hi: int, K: int, served_below: int | None) -> _BinSums:
    """The rows t with t + 1 in [lo, hi) (module docstring) whose K drafted tokens exist; only those whose draft RoPE
    positions t .. t + K - 1 all lie below ``served_below`` are summed."""
    num, den, total, reach = [], [], 0, -1
    for acc in accepts:
        rows = torch.arange(len(acc))
        inside = (rows + 1 >= lo) & (rows + 1 < hi) & (acc >= 0)
        total += int(inside.sum())
        if inside.any():
            reach = max(reach, int(rows[inside].max()) + K - 1)
        if served_below is not None:
            inside &= rows + K - 1 < served_below
        a = acc[inside]
        num.append(float(a.sum() + len(a)))
        den.append(float(len(a)))
    return _BinSums(num, den, total, reach)


def _interval(sums: _BinSums, level) -> Interval | None:
    used = [(n, d) for n, d in zip(sums.num, sums.den) if d > 0]
    return bootstrap_ratio(*zip(*used), level=level) if used else None


def _difference_over_shared(a: _BinSums, b: _BinSums, level) -> Interval | None:
    """tau(a) - tau(b), paired over the documents with served anchors in both."""
    return _paired(a.num, a.den, b.num, b.den, level)


def _paired(num_a, den_a, num_b, den_b, level) -> Interval | None:
    both = [i for i in range(len(den_a)) if den_a[i] > 0 and den_b[i] > 0]
    if not both:
        return None
    pick = lambda x: [x[i] for i in both]   # noqa: E731
    return bootstrap_ratio_difference(pick(num_a), pick(den_a), pick(num_b), pick(den_b), level=level)


def bins_difference(a: PositionBin, b: PositionBin) -> Interval | None:
    """tau(a) - tau(b) of two bins of one curve, paired over the documents with served rounds in both."""
    return _paired(a.tokens, a.rounds, b.tokens, b.rounds, a.level)


def word_of_curve(diff: Interval | None, min_documents: int = MIN_DOCUMENTS) -> str | None:
    """``verdicts.word_of`` from ``min_documents`` documents on; TOO_FEW below (MIN_DOCUMENTS says why)."""
    if diff is None:
        return None
    return TOO_FEW if diff.units < min_documents else word_of(diff)


@dataclass(frozen=True)
class PastTrained:
    """The bins lying wholly past the length the draft was trained on, each against the level inside it: ``within``,
    the last bin lying wholly inside (the level the draft ended its trained span at: a curve that drifts inside that
    span is held against where it ended, not its start), paired over the documents reaching both and worded by
    ``word_of_curve``. Only a bin that *loses* to ``within`` falls past the trained length: a curve that rises past
    it and comes back to its level has lost nothing training longer would restore."""

    trained_length: int
    within: PositionBin
    past: tuple[PositionBin, ...]
    differences: tuple[Interval | None, ...]     # tau(past bin) - tau(within), per past bin
    words: tuple[str | None, ...]

    @property
    def first_loss(self) -> PositionBin | None:
        return next((b for b, w in zip(self.past, self.words) if w == "loses"), None)

    @property
    def unworded(self) -> PositionBin | None:
        return next((b for b, w in zip(self.past, self.words) if w == TOO_FEW), None)

    def difference(self, b: PositionBin) -> Interval | None:
        return self.differences[self.past.index(b)]


def past_trained(curve: CurveOfEngine, trained: int) -> PastTrained | None:
    """Each bin of ``curve`` past ``trained`` tokens against the last bin inside them (``PastTrained``); None when no
    bin with a tau lies wholly inside or wholly past (give bins with an edge at the trained length)."""
    measured = [b for b in curve.bins if b.tau is not None]
    inside = [b for b in measured if b.hi <= trained]
    past = tuple(b for b in measured if b.lo >= trained)
    if not inside or not past:
        return None
    within = inside[-1]
    diffs = tuple(bins_difference(b, within) for b in past)
    return PastTrained(trained, within, past, diffs, tuple(word_of_curve(d, within.min_documents) for d in diffs))


def _curve(engine, label, rule, accepts, bins, K, level, draft_m, min_documents, reference=None) -> CurveOfEngine:
    """One curve's bins from the accepted lengths per anchor of each document (``reference``: the reference curve's,
    for the paired difference on the anchors this curve serves)."""
    fails = rule.fails_from if rule is not None else None
    window = rule.window if rule is not None else None
    out, prev = [], None
    for lo, hi in bins:
        sums = _bin_sums(accepts, lo, hi, K, fails)
        served = sum(sums.den) / sums.total if sums.total else 0.0
        status = EMPTY if not sums.total else SERVED if served == 1 else NOT_SERVED if served == 0 else PARTLY
        change = _difference_over_shared(sums, prev, level) if prev is not None else None
        vs = None if reference is None else _difference_over_shared(sums, _bin_sums(reference, lo, hi, K, fails),
                                                                    level)
        out.append(PositionBin(lo, hi, sums.total, sum(1 for d in sums.den if d > 0), _interval(sums, level), served,
                               status, sums.reach >= draft_m, window is not None and sums.reach >= window,
                               change, word_of_curve(change, min_documents), vs, word_of_curve(vs, min_documents),
                               min_documents, tuple(sums.num), tuple(sums.den), level))
        prev = sums
    return CurveOfEngine(engine, label, rule, tuple(out))


def _draft_config(d) -> dict:
    """The draft's config as the engines read it: its geometry, RoPE and the keys kept as written (the window)."""
    c = d.config
    return {**c.extra, "max_position_embeddings": c.max_position_embeddings, "rope_theta": c.rope_theta,
            "rope_scaling": c.rope_scaling, "num_hidden_layers": c.num_hidden_layers}


def check_arguments(*, num_steps: int, n_documents: int | None, max_length: int | None, launch_window: int | None,
                    names: dict | None = None) -> None:
    """Refuse what the curve cannot run on, naming the argument (``names``: its flag, for the command)."""
    name = lambda key: (names or {}).get(key, key)   # noqa: E731
    if num_steps < 1:
        raise bad_input(name("num_steps"), None, "at least 1 drafted position per round", num_steps)
    if n_documents is not None and n_documents < 1:
        raise bad_input(name("n_documents"), None, f"at least 1 document (verdicts from {MIN_DOCUMENTS})", n_documents)
    if max_length is not None and max_length < num_steps + 2:
        raise bad_input(name("max_length"), None, f"at least {num_steps + 2} tokens per document (one round of "
                        f"{num_steps} drafted tokens after two known ones)", max_length)
    # SGLang 0.5.23 arg_groups/speculative_hook.py: "--speculative-draft-window-size must be positive"
    if launch_window is not None and launch_window <= 0:
        raise bad_input(name("launch_window"), None, "a positive window (SGLang refuses to start otherwise)",
                        launch_window)


def target_context(target_cfg: dict, engines, launched: dict | None = None) -> int | None:
    """The longest context any of ``engines`` serves the target to: each engine's own derivation
    (``context_rules.context_length``: SGLang's get_context_length, vLLM's max_model_len) or its launch setting in
    ``launched`` (engine -> vLLM --max-model-len / SGLang --context-length); transformers' (the reference) when no
    engine is named."""
    launched = launched or {}
    lengths = [context_length(e, TARGET, target_cfg, launched.get(e)) for e in (tuple(engines) or ("speculators",))]
    return max((x for x in lengths if x is not None), default=None)


def _within(documents: Documents, limit: int | None) -> Documents:
    """The documents cut to the target's context (a target past it is not what the curve measures)."""
    if limit is None or max(documents.lengths) <= limit:
        return documents
    return Documents(tuple(d[:limit] for d in documents.ids), f"{documents.source}, cut to the target's context "
                     f"of {limit} tokens", documents.kind)


def context_curve(target, draft, documents: Documents | None = None, *, engines=ENGINES, engine_version=None,
                  launch_window: int | None = None, allow_longer: bool = False, max_length: int | None = None,
                  launched_context: dict | None = None, n_documents: int = MIN_DOCUMENTS, bins=None,
                  num_steps: int = 3, level: float = 0.95, chunk: int = 512, min_documents: int = MIN_DOCUMENTS,
                  names: dict | None = None, progress: bool = False) -> ContextCurve:
    """Tau per context-position bin, for the draft with no limit and as each of ``engines`` runs it (module
    docstring). ``engine_version`` places the build of the one engine named (``engines=("vllm",)``);
    ``launch_window``: SGLang's --speculative-draft-window-size; ``allow_longer``: SGLang launched with
    SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1; ``launched_context``: engine -> the target's context as launched
    (vLLM --max-model-len, SGLang --context-length). ``max_length``: tokens per document (default the target's
    context, ``target_context``, at most DEFAULT_MAX_LENGTH; longer refused, and documents given cut to it);
    ``documents`` default ``default_documents``; ``min_documents``: the fewest documents a change is worded from
    (MIN_DOCUMENTS); ``names``: argument -> the flag an error names (the command's)."""
    from eagle3lab.decoding.speculative import draft_for
    from eagle3lab.models.target import as_target

    check_arguments(num_steps=num_steps, n_documents=n_documents, max_length=max_length, launch_window=launch_window,
                    names=names)
    tgt = as_target(target)
    d = draft_for(draft, tgt)
    engines = tuple(engines)
    if engine_version is not None and len(engines) != 1:
        raise bad_input("engine_version", None, "one engine named with it (engines=('vllm',))", engines)
    target_cfg = tgt.model.config.to_dict()
    target_m = target_context(target_cfg, engines, launched_context)
    if max_length is not None and target_m is not None and max_length > target_m:
        raise bad_input((names or {}).get("max_length", "max_length"), None, f"at most the target's context "
                        f"({target_m} tokens, as {', '.join(engines) or 'transformers'} derive it)", max_length,
                        "Positions past it measure the target's own limit, not the draft's; give the target's served "
                        "length (--max-model-len / --context-length) if it is served longer.")
    max_length = int(max_length or min(target_m or DEFAULT_MAX_LENGTH, DEFAULT_MAX_LENGTH))
    documents = _within(documents or default_documents(tgt, max_length, n_documents), target_m)
    bins = tuple(bins or position_bins(max(documents.lengths)))
    rules = {e: resolve_context(e, _draft_config(d), target_cfg, engine_version, launch_window=launch_window,
                                allow_longer=allow_longer, target_context=(launched_context or {}).get(e))
             for e in engines}
    settings = {None: None} | {(r.window, r.window_layers): None for r in rules.values() if r.window is not None}
    accepts = {key: [] for key in settings}
    for doc in tqdm(documents.ids, desc="context curve (documents)", disable=not progress):
        ids = torch.tensor([doc], device=tgt.device)
        greedy, aux = _target_pass(tgt, d, ids)
        for key in settings:
            window = None if key is None else _Window(key[0], key[1])
            accepts[key].append(_accepts(d, ids, greedy, aux, num_steps, window, chunk))
    m = d.config.max_position_embeddings
    reference = _curve(REFERENCE, "no limit (full attention, RoPE at every position)", None,
                       accepts[None], bins, num_steps, level, m, min_documents)
    curves = {}
    for e, rule in rules.items():
        key = None if rule.window is None else (rule.window, rule.window_layers)
        label = f"{rule.label}, {rule.launch} (emulated)" if rule.launch else f"{rule.label} (emulated)"
        curves[e] = _curve(e, label, rule, accepts[key], bins, num_steps, level, m,
                           min_documents, accepts[None])
    return ContextCurve(reference, curves, documents, m, target_m, _draft_config(d).get("sliding_window"), num_steps,
                        max(documents.lengths), str(tgt.device), str(d.fc.weight.dtype).replace("torch.", ""), level,
                        min_documents)
