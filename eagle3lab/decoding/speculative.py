"""Real speculative decoding with an EAGLE-3 draft: chain or tree, greedy or sampled, lossless.

One round, as SGLang's and vLLM's EAGLE workers do it (on one sequence, in plain PyTorch):

    draft    from its last committed row the draft proposes tokens: a chain of ``num_steps``
             (topk = 1) or a tree (topk > 1, ``eagle3lab.decoding.tree``)
    verify   the target reads ``[last token, drafts...]`` in ONE forward on its KV cache (a tree
             with a 4D ancestor mask) while ``ResidCapture`` records the aux resid points
    accept   greedy: the longest path whose tokens equal the target's argmax; sampling: the
             standard rejection rule (chain) or the sibling rule (tree); plus one bonus token
    commit   the target cache keeps only the accepted path; the draft cache rolls back to the
             committed prefix and re-reads the accepted tokens paired with the target's real
             features (feature at position t with token t+1, facts section 5)

The output is the target's own: greedy decoding is token-identical to ``generate(do_sample=False)`` in fp32
and sampling follows the target's distribution (tests/decoding/test_decoding*.py prove both). In bf16 a batched
verify and a one-token step can round a near-tie of the target's logits differently: ``eagle3lab.decoding.lossless``
tells such a tie flip from a bug. Every round is
logged (drafted tokens, accepted count, time in draft and in verify) for ``eagle3lab.engines.acceptance``.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import pandas as pd
import torch

from eagle3lab.decoding.tree import DraftTree, grow_tree, tree_attention_mask
from eagle3lab.engines.acceptance import AcceptanceStats, acceptance_stats
from eagle3lab.engines.verify_width import ADJUSTED_LOG, verify_width
from eagle3lab.errors import bad_input
from eagle3lab.findings import Finding, Severity
from eagle3lab.models.capture import ResidCapture, concat_aux
from eagle3lab.models.target import as_target, check_draft_fits


class _Rates:
    """Tokens/s of a decoded sequence (``tokens``, ``prefill_s``, ``decode_s``)."""

    @property
    def tokens_per_s(self) -> float:
        """End to end, prefill included (as ``generate`` is timed)."""
        return len(self.tokens) / (self.prefill_s + self.decode_s)

    @property
    def decode_tokens_per_s(self) -> float:
        """Tokens after the first (which the prefill produces) per second of decoding."""
        return (len(self.tokens) - 1) / self.decode_s if self.decode_s > 0 else float("nan")


@dataclass
class RoundLog:
    """One draft-verify round."""

    drafted: tuple[int, ...]           # target ids sent to verify after the root (tree: verify order)
    parents: tuple[int, ...] | None    # tree only: parent index of each drafted token (-1 = root)
    accepted: int                      # drafted tokens accepted (bonus excluded)
    emitted: tuple[int, ...]           # tokens appended: accepted + bonus, cut at EOS / max_new_tokens
    max_accept: int                    # the most that could be accepted (num_steps)
    draft_s: float                     # draft forwards for this round (incl. the extend that fed it)
    verify_s: float                    # target verify forward + acceptance + cache commit
    draft_forwards: int
    extend_rows: int                   # rows the draft re-read before this round (accepted + bonus)


@dataclass
class SpecResult(_Rates):
    """Output and log of :func:`speculative_generate`."""

    prompt_ids: list[int]
    tokens: list[int]                  # new tokens only
    rounds: list[RoundLog]
    settings: dict
    prefill_s: float
    decode_s: float
    finished_by: str                   # "eos" or "max_new_tokens"
    warnings: list[Finding] = field(default_factory=list)   # tree_warning's, with codes (WARNING_CODES)
    text: str | None = None

    @property
    def stats(self) -> AcceptanceStats:
        return acceptance_stats(self.rounds, num_positions=self.settings["num_steps"])

    @property
    def tau(self) -> float:
        return self.stats.tau

    def to_frame(self) -> pd.DataFrame:
        """One row per round."""
        rows = [{**asdict(r), "num_drafted": len(r.drafted), "num_emitted": len(r.emitted)} for r in self.rounds]
        return pd.DataFrame(rows).rename_axis("round")


# ------------------------------------------------------------------------------------------ helpers

def draft_for(draft, target, profile=None):
    """The draft as ``profile`` runs it, told the target's layer count, checked against the target."""
    d = draft.under(profile if profile is not None else draft.profile)
    if d.num_target_layers is None:
        d = d.bound(num_target_layers=target.num_layers)
    check_draft_fits(target.facts(), target_hidden_size=d.config.target_hidden_size,
                     num_target_layers=d.num_target_layers, device=d.fc.weight.device, where="draft")
    return d


def prompt_ids(target, prompt) -> list[int]:
    """Text (needs the target's tokenizer), a list of ids or a 1D / [1, T] tensor -> list of ids."""
    if isinstance(prompt, str):
        if target.tokenizer is None:
            raise bad_input("prompt", None, "token ids (this target has no tokenizer)", "text")
        ids = list(target.tokenizer(prompt)["input_ids"])
    elif isinstance(prompt, torch.Tensor):
        if prompt.dim() == 2 and prompt.shape[0] != 1:
            raise bad_input("prompt", None, "one sequence (1D or [1, T] ids)", f"shape {tuple(prompt.shape)}")
        ids = prompt.flatten().tolist()
    else:
        ids = [int(t) for t in prompt]
    if not ids:
        raise bad_input("prompt", None, "at least one token", "an empty prompt")
    return ids


def eos_ids(target, eos_token_id="auto") -> set[int]:
    """``"auto"``: the tokenizer's EOS, else the generation config's; None: never stop early."""
    if eos_token_id is None:
        return set()
    if eos_token_id == "auto":
        tok = getattr(target, "tokenizer", None)
        eos_token_id = getattr(tok, "eos_token_id", None)
        if eos_token_id is None:
            gen = getattr(target.model, "generation_config", None)
            eos_token_id = getattr(gen, "eos_token_id", None)
        if eos_token_id is None:
            return set()
    return {int(eos_token_id)} if isinstance(eos_token_id, int) else {int(e) for e in eos_token_id}


# The code of each warning tree_settings reports (SpecResult.warnings): callers match these, never the text. The
# chain adjustment keeps the code of the flag finding for the same SGLang rule (engines.flags.sglang).
WARNING_CODES = {
    "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED": "a chain's num_draft_tokens replaced by num_steps + 1, as SGLang does",
}


def tree_warning(code: str, text: str, *, where: str | None = None, **data) -> Finding:
    """A warning of ``tree_settings``: a stable code (WARNING_CODES), the sentence printed, the setting and data."""
    assert code in WARNING_CODES, code
    return Finding(code, Severity.WARNING, text, where=where, data=data)


def tree_settings(num_steps: int, topk: int = 1, num_draft_tokens: int | None = None) -> tuple[dict, list[Finding]]:
    """Validate (steps, topk, draft tokens) the way SGLang does; returns (settings, warnings: tree_warning's)."""
    warnings: list[Finding] = []
    if int(num_steps) < 1:
        raise bad_input("num_steps", None, "an integer >= 1 (draft forwards per round)", num_steps)
    if int(topk) < 1:
        raise bad_input("topk", None, "an integer >= 1 (1 = chain)", topk)
    num_steps, topk = int(num_steps), int(topk)
    width = verify_width(num_steps, topk, None if num_draft_tokens is None else int(num_draft_tokens))
    used = width.num_draft_tokens
    if width.adjusted_from is not None:
        warnings.append(tree_warning("SGL_TOPK1_DRAFT_TOKENS_ADJUSTED",
                                     f"{ADJUSTED_LOG} (as SGLang does): {num_draft_tokens} -> {used}",
                                     where="num_draft_tokens", written=int(num_draft_tokens), used=used))
    if used is None:   # a tree left unset (SGLang refuses): every candidate up to steps * topk, as a default
        used = min(width.pool, num_steps * topk) + 1
    elif topk > 1 and (used < 2 or width.over_pool):
        raise bad_input("num_draft_tokens", None, f"2..{width.pool + 1} (the pool of topk + (steps-1)*topk^2 = "
                        f"{width.pool} candidates, plus the root)", num_draft_tokens,
                        "SGLang checks the same pool bound (PR #24054).")
    return {"num_steps": num_steps, "topk": topk, "num_draft_tokens": used}, warnings


def sync_device(device: torch.device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def keep_cache_positions(cache, prefix_len: int, keep_rel: list[int]) -> None:
    """Keep positions ``[0, prefix_len)`` plus ``prefix_len + keep_rel`` of a Hugging Face ``DynamicCache``.

    A chain keeps a prefix of what it verified (a slice, no copy); a tree keeps the accepted path,
    whose entries were computed at positions ``prefix + depth`` and so land exactly where they belong
    once moved next to the prefix.
    """
    from transformers.cache_utils import DynamicLayer

    n = len(keep_rel)
    contiguous = keep_rel == list(range(n))
    idx = None if contiguous else torch.tensor(keep_rel)
    for layer in cache.layers:
        if type(layer) is not DynamicLayer:
            raise bad_input("target KV cache", type(layer).__name__, "DynamicLayer (full attention)",
                            type(layer).__name__, "Sliding-window / linear-attention layers cannot be rolled "
                            "back by index here; speculative decoding supports full-attention targets.")
        if not layer.is_initialized or not layer.keys.numel():
            continue
        if not contiguous:  # move the accepted path's entries next to the prefix
            src = (prefix_len + idx).to(layer.keys.device)
            layer.keys[..., prefix_len:prefix_len + n, :] = layer.keys.index_select(-2, src)
            layer.values[..., prefix_len:prefix_len + n, :] = layer.values.index_select(-2, src)
        layer.keys = layer.keys[..., :prefix_len + n, :]
        layer.values = layer.values[..., :prefix_len + n, :]


def _forward_kwargs(model) -> str:
    """The forward's cache argument: ``cache`` in transformers 5.24 (our pin), whose deprecation shim
    accepts ``past_key_values`` until 5.40.0; releases before the rename know only ``past_key_values``."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def _keeps_logits(model) -> bool:
    """Does the forward take ``logits_to_keep`` (every transformers causal LM does; remote code may not)?"""
    import inspect

    return "logits_to_keep" in inspect.signature(model.forward).parameters


def new_target_cache(model):
    from transformers import DynamicCache

    return DynamicCache(config=model.config)


# ------------------------------------------------------------------------------------------ the run

class SpeculativeRun:
    """State of one sequence being decoded: target cache, draft cache, last committed draft row.

    ``speculative_generate`` drives it; ``eagle3lab.analysis.timing`` times its steps one by one.
    """

    def __init__(self, target, draft, *, temperature: float = 0.0, seed: int | None = 0, capture=None):
        self.target = target
        self.model = target.model
        self.draft = draft
        self.device = target.device
        self.temperature = float(temperature)
        self.points = list(draft.aux_resid)
        # offload=False: the states feed the draft on the same device
        self.capture = capture if capture is not None else ResidCapture(self.model, sorted(set(self.points)),
                                                                        offload=False)
        self.generator = torch.Generator(device=self.device)
        if seed is not None:
            self.generator.manual_seed(int(seed))
        self.cache_kw = _forward_kwargs(self.model)
        self.keeps_logits = _keeps_logits(self.model)
        self.draft_dtype = draft.fc.weight.dtype
        vd = draft.config.draft_vocab_size
        self.draft_vocab_ids = draft.to_target_ids(torch.arange(vd, device=self.device))
        self.n = 0                  # tokens in the target cache (= rows in the draft cache)
        self.root: int | None = None  # last emitted token, not yet read by the target
        self.last_logits = self.last_hidden = None

    # -- small pieces ------------------------------------------------------------------------
    def _sample(self, probs: torch.Tensor) -> int:
        return int(torch.multinomial(probs, 1, generator=self.generator))

    def _uniform(self) -> float:
        return float(torch.rand((), generator=self.generator, device=self.device))

    def _probs(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.softmax(logits.float() / self.temperature, dim=-1)

    def pick(self, logits: torch.Tensor) -> int:
        """The target's own next token: argmax (greedy) or a sample at the temperature."""
        return int(logits.argmax()) if self.temperature == 0 else self._sample(self._probs(logits))

    @torch.no_grad()
    def target_forward(self, ids: list[int], *, position_ids=None, mask=None, logits_to_keep: int = 0):
        """Target forward on the cache, recording the aux points -> (logits [T or last n, V], fc input [T, F]).

        ``logits_to_keep`` n > 0: only the last n rows go through the LM head (a prefill needs one).
        """
        x = torch.tensor([ids], device=self.device)
        kw = {self.cache_kw: self.cache}
        if logits_to_keep and self.keeps_logits:   # otherwise every row's logits come back; callers take the last
            kw["logits_to_keep"] = logits_to_keep
        out = self.model(input_ids=x, position_ids=position_ids, attention_mask=mask, use_cache=True, **kw)
        aux = concat_aux(self.capture.states, self.points)[0].to(self.draft_dtype)   # in the draft's aux order
        return out.logits[0], aux

    @torch.no_grad()
    def draft_extend(self, ids: list[int], aux: torch.Tensor) -> None:
        """Draft reads committed rows (feature at t, token t+1); keeps the last row's logits and state."""
        x = torch.tensor([ids], device=self.device)
        out = self.draft(x, aux[None], cache=self.dcache, logits_to_keep=1)
        self.last_logits, self.last_hidden = out.logits[0, -1], out.hidden[0, -1]

    # -- the protocol --------------------------------------------------------------------------
    @torch.no_grad()
    def prefill(self, ids: list[int]) -> int:
        """Target and draft read the prompt; returns the first new token (the target's own)."""
        from eagle3lab.models.draft import DraftCache

        self.cache = new_target_cache(self.model)
        self.dcache = DraftCache()
        logits, aux = self.target_forward(ids, logits_to_keep=1)   # as generate's prefill does
        self.root = self.pick(logits[-1])
        self.draft_extend(ids[1:] + [self.root], aux)
        self.n = len(ids)
        return self.root

    @torch.no_grad()
    def draft_chain(self, num_steps: int) -> tuple[DraftTree, list | None, int]:
        """A chain of ``num_steps`` tokens -> (tree with linear parents, draft probs if sampling, forwards)."""
        tokens, qs = [], []
        logits, hidden = self.last_logits, self.last_hidden
        forwards = 0
        for step in range(num_steps):
            if step:
                out = self.draft(torch.tensor([[tokens[-1]]], device=self.device),
                                 recycled_hidden=hidden[None, None], cache=self.dcache)
                logits, hidden = out.logits[0, -1], out.hidden[0, -1]
                forwards += 1
            if self.temperature == 0:
                did = int(logits.argmax())
            else:
                q = self._probs(logits)
                did = self._sample(q)
                qs.append((did, q))
            tokens.append(int(self.draft_vocab_ids[did]))
        tree = DraftTree(tokens=tokens, parents=list(range(-1, num_steps - 1)), depths=list(range(1, num_steps + 1)),
                         scores=[0.0] * num_steps, pool_size=num_steps)
        return tree, (qs if self.temperature else None), forwards + 1  # + the extend that gave step 1

    @torch.no_grad()
    def draft_tree(self, num_steps: int, topk: int, num_nodes: int) -> tuple[DraftTree, int]:
        tree, forwards = grow_tree(self.draft, self.dcache, self.last_logits, self.last_hidden,
                                   num_steps=num_steps, topk=topk, num_nodes=num_nodes)
        return tree, forwards + 1

    def draft_phase(self, settings: dict) -> tuple[DraftTree, list | None, int]:
        """The draft phase ``tree_settings`` asks for -> (tree, draft probs if a sampled chain, forwards)."""
        if settings["topk"] == 1:
            return self.draft_chain(settings["num_steps"])
        tree, forwards = self.draft_tree(settings["num_steps"], settings["topk"], settings["num_draft_tokens"] - 1)
        return tree, None, forwards

    @torch.no_grad()
    def verify(self, tree: DraftTree, chain: bool):
        """One target forward over ``[root] + tree.tokens`` -> (logits [M, V], fc input [M, F])."""
        ids = [self.root] + tree.tokens
        if chain:
            return self.target_forward(ids)
        impl = str(getattr(self.model.config, "_attn_implementation", "") or "")
        if impl.startswith("flash"):  # flash-attention kernels take no 4D mask: every node would see all others
            raise bad_input("target", "attn_implementation", "'sdpa' or 'eager' for tree verification (topk > 1)",
                            repr(impl), "Load the target with attn_implementation='sdpa', or draft a chain (topk=1).")
        parents = [-1] + [p + 1 for p in tree.parents]    # indices into the verified sequence
        pos = torch.tensor([[self.n] + [self.n + d for d in tree.depths]], device=self.device)
        mask = tree_attention_mask(parents, self.n, self.model.dtype, self.device)
        return self.target_forward(ids, position_ids=pos, mask=mask)

    def accept(self, tree: DraftTree, logits: torch.Tensor, draft_probs=None) -> tuple[list[int], int]:
        """-> (accepted node indices along the path, bonus token)."""
        children = tree.children
        path: list[int] = []
        if self.temperature == 0:  # greedy: follow the target's argmax while the tree has that child
            greedy = logits.argmax(-1).tolist()
            cur = -1
            while True:
                want = greedy[cur + 1]
                nxt = next((c for c in children.get(cur, ()) if tree.tokens[c] == want), None)
                if nxt is None:
                    return path, want
                path.append(nxt)
                cur = nxt
        if draft_probs is not None:  # sampled chain: accept x ~ q with prob min(1, p(x)/q(x))
            for i, (did, q) in enumerate(draft_probs):
                p = self._probs(logits[i])
                x = tree.tokens[i]
                if self._uniform() < min(1.0, float(p[x] / q[did])):
                    path.append(i)
                    continue
                residual = p.index_add(0, self.draft_vocab_ids, -q).clamp_(min=0)  # max(p - q, 0)
                mass = float(residual.sum())
                # mass 0 only when p == q up to rounding (then rejection had probability ~0): sample p
                return path, self._sample(residual / mass if mass > 0 else p)
            return path, self._sample(self._probs(logits[len(draft_probs)]))
        # sampled tree: candidates are deterministic (draft top-k), so try siblings in order, each
        # with the target's probability renormalised over what is left: exact sampling from p
        cur = -1
        while True:
            p = self._probs(logits[cur + 1])
            for c in children.get(cur, ()):
                x = tree.tokens[c]
                if self._uniform() < float(p[x]):
                    path.append(c)
                    cur = c
                    break
                p[x] = 0
                mass = float(p.sum())
                if mass <= 0:  # x held all the mass up to rounding: it is the target's token
                    path.append(c)
                    cur = c
                    break
                p = p / mass
            else:
                return path, self._sample(p)

    @torch.no_grad()
    def commit(self, path: list[int], bonus: int) -> list[int]:
        """Keep the accepted path in the target cache and roll the draft cache back to the committed prefix.

        Returns the verify rows kept (root + accepted nodes): the features the draft re-reads next,
        paired with ``accepted tokens + [bonus]`` (``draft_extend``).
        """
        keep_rel = [0] + [i + 1 for i in path]
        keep_cache_positions(self.cache, self.n, keep_rel)
        self.dcache.crop(self.n)
        self.n += len(keep_rel)
        self.root = bonus
        return keep_rel


@torch.no_grad()
def speculative_generate(target, draft, prompt, num_steps: int = 5, topk: int = 1, num_draft_tokens: int | None = None,
                         temperature: float = 0.0, profile=None, max_new_tokens: int = 64, eos_token_id="auto",
                         seed: int | None = 0) -> SpecResult:
    """Decode ``prompt`` with the target, drafting with ``draft`` (run as ``profile`` says).

    ``num_steps`` draft forwards per round; ``topk`` = 1 drafts a chain (``num_draft_tokens`` is then
    ``num_steps + 1``, as SGLang forces), topk > 1 a tree of the best ``num_draft_tokens - 1`` candidates.
    ``temperature`` 0 is greedy (token-identical to the target's greedy decoding); > 0 samples (the
    target's distribution at that temperature, seeded by ``seed``).
    """
    tgt = as_target(target)
    d = draft_for(draft, tgt, profile)
    ids = prompt_ids(tgt, prompt)
    settings, warnings = tree_settings(num_steps, topk, num_draft_tokens)
    if temperature < 0:
        raise bad_input("temperature", None, "0 (greedy) or a positive number", temperature)
    if max_new_tokens < 1:
        raise bad_input("max_new_tokens", None, "an integer >= 1", max_new_tokens)
    settings.update(temperature=float(temperature), profile=d.profile.name, aux_resid=list(d.aux_resid),
                    max_new_tokens=int(max_new_tokens))
    stop = eos_ids(tgt, eos_token_id)
    steps, chain = settings["num_steps"], settings["topk"] == 1

    run = SpeculativeRun(tgt, d, temperature=temperature, seed=seed)
    rounds: list[RoundLog] = []
    with run.capture:
        sync_device(run.device)
        t0 = time.perf_counter()
        tokens = [run.prefill(ids)]
        sync_device(run.device)
        prefill_s = time.perf_counter() - t0
        finished = "eos" if tokens[0] in stop else ("max_new_tokens" if max_new_tokens == 1 else "")
        extend_s, extend_rows = 0.0, 0
        while not finished:
            t1 = time.perf_counter()
            tree, qs, forwards = run.draft_phase(settings)
            sync_device(run.device)
            t2 = time.perf_counter()
            logits, aux = run.verify(tree, chain)
            path, bonus = run.accept(tree, logits, qs)
            emitted = [tree.tokens[i] for i in path] + [bonus]
            for j, t in enumerate(emitted):          # cut at EOS (kept) and at the token budget
                if t in stop or len(tokens) + j + 1 >= max_new_tokens:
                    finished = "eos" if t in stop else "max_new_tokens"
                    emitted = emitted[: j + 1]
                    break
            tokens += emitted
            keep = run.commit(path, bonus)
            sync_device(run.device)
            t3 = time.perf_counter()
            if not finished:
                run.draft_extend(emitted, aux[keep])     # not finished, so nothing was cut
            sync_device(run.device)
            t4 = time.perf_counter()
            rounds.append(RoundLog(drafted=tuple(tree.tokens), parents=None if chain else tuple(tree.parents),
                                   accepted=len(path), emitted=tuple(emitted), max_accept=steps,
                                   draft_s=extend_s + t2 - t1, verify_s=t3 - t2, draft_forwards=forwards,
                                   extend_rows=extend_rows))
            extend_s, extend_rows = t4 - t3, len(path) + 1
            if finished:
                break
        decode_s = time.perf_counter() - t0 - prefill_s
    text = tgt.tokenizer.decode(tokens) if getattr(tgt, "tokenizer", None) is not None else None
    return SpecResult(prompt_ids=ids, tokens=tokens, rounds=rounds, settings=settings, prefill_s=prefill_s,
                      decode_s=decode_s, finished_by=finished, warnings=warnings, text=text)


# ------------------------------------------------------------------------------------------ baselines

@dataclass
class GreedyResult(_Rates):
    prompt_ids: list[int]
    tokens: list[int]
    prefill_s: float
    decode_s: float
    finished_by: str


@torch.no_grad()
def target_greedy(target, prompt, max_new_tokens: int = 64, eos_token_id="auto") -> GreedyResult:
    """No speculation: the target alone, one token per forward on its KV cache (the honest baseline)."""
    tgt = as_target(target)
    ids, stop = prompt_ids(tgt, prompt), eos_ids(tgt, eos_token_id)
    model, device, kw = tgt.model, tgt.device, _forward_kwargs(tgt.model)
    cache = new_target_cache(model)
    sync_device(device)
    t0 = time.perf_counter()
    keep = {"logits_to_keep": 1} if _keeps_logits(model) else {}   # as generate's prefill does
    logits = model(input_ids=torch.tensor([ids], device=device), use_cache=True, **keep, **{kw: cache}).logits
    tokens = [int(logits[0, -1].argmax())]
    sync_device(device)
    prefill_s = time.perf_counter() - t0
    while tokens[-1] not in stop and len(tokens) < max_new_tokens:
        logits = model(input_ids=torch.tensor([[tokens[-1]]], device=device), use_cache=True, **{kw: cache}).logits
        tokens.append(int(logits[0, -1].argmax()))
    sync_device(device)
    decode_s = time.perf_counter() - t0 - prefill_s
    return GreedyResult(ids, tokens, prefill_s, decode_s, "eos" if tokens[-1] in stop else "max_new_tokens")


def greedy_config(max_new_tokens: int, stop: set[int]):
    """``generate``'s config for plain argmax decoding. ``generate`` fills every field left None from the
    model's own generation_config (transformers 5: ``update(defaults_only=True)``), so the processors that
    would move the argmax (a shipped repetition penalty, say: Qwen2.5-Instruct has 1.05) are set off here."""
    from transformers import GenerationConfig

    eos = sorted(stop)  # [] = never stop early (None would fall back to the model's generation_config)
    return GenerationConfig(do_sample=False, max_new_tokens=max_new_tokens, eos_token_id=eos,
                            pad_token_id=eos[0] if eos else 0, repetition_penalty=1.0, no_repeat_ngram_size=0,
                            min_new_tokens=0, encoder_repetition_penalty=1.0)   # min_new_tokens outranks min_length


@torch.no_grad()
def hf_generate(target, prompt, max_new_tokens: int = 64, eos_token_id="auto") -> GreedyResult:
    """``transformers`` ``generate(do_sample=False)``: the reference output and the reference speed.

    ``generate`` is timed whole: ``decode_s`` holds it all, prefill included (``prefill_s`` is 0).
    """
    tgt = as_target(target)
    ids, stop = prompt_ids(tgt, prompt), eos_ids(tgt, eos_token_id)
    config = greedy_config(max_new_tokens, stop)
    x = torch.tensor([ids], device=tgt.device)
    sync_device(tgt.device)
    t0 = time.perf_counter()
    out = tgt.model.generate(input_ids=x, attention_mask=torch.ones_like(x), generation_config=config)
    sync_device(tgt.device)
    total = time.perf_counter() - t0
    tokens = out[0, len(ids):].tolist()
    return GreedyResult(ids, tokens, 0.0, total, "eos" if tokens and tokens[-1] in stop else "max_new_tokens")
