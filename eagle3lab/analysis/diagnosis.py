"""Diagnosis: from a symptom to the cause, and from the weights to the wiring they were trained on.

A draft is fast only when it is fed the target states and the residual it was trained with.
Nothing in a checkpoint proves which ones that was, but the weights know: the teacher-forced
evaluator scores each hypothesis in seconds on states captured once. Here: the hypothesis lists a
person reads (each engine's reading, a wiring's neighbourhood) and their scores; the search that
needs no list, with intervals and identifiability, is ``analysis.wiring_search``.
"""

from __future__ import annotations

from itertools import permutations

import pandas as pd
from tqdm.auto import tqdm

from eagle3lab.engines.layer_ids import CHANGES, default_resid, resid_label, resid_name
from eagle3lab.errors import bad_input


def wiring_hypotheses(draft, num_layers: int) -> dict[tuple[int, ...], list[str]]:
    """Candidate fc inputs for this draft -> why each is a candidate.

    Each engine profile's reading of the written ids (what that engine would feed), the engines'
    default ``resid[2], resid[N//2], resid[N-3]``, and each of these with the embedding put first
    and the last state dropped: the seed case's pattern, where the trainer fed
    ``[embedding, a, b]`` and the server ``[a, b, c]``.
    """
    from eagle3lab.analysis.wiring_search import served_views

    base: dict[tuple[int, ...], list[str]] = {}
    for name, d in served_views(draft, num_layers).items():
        base.setdefault(tuple(d.aux_resid), []).append(f"served by {name}")
    default = default_resid(num_layers)
    if len(default) == draft.config.num_aux:
        base.setdefault(default, []).append("engines' default")
    out = {k: list(v) for k, v in base.items()}
    for resid in base:
        shifted = (0,) + resid[:-1]
        if shifted != resid and 0 not in resid:
            out.setdefault(shifted, []).append("embedding first, last dropped, of " + resid_label(resid))
    return out


def wiring_neighbourhood(aux_resid, num_layers: int) -> dict[tuple[int, ...], list[str]]:
    """Hypotheses around one wiring, for ``score_wirings``: the wiring itself, every reordering of
    it, and each slot alone fed every ``resid[k]``, k = 0..N (repeats allowed: the fc reads any state
    twice). ``slot_scan`` turns the scores back into a slot x resid[k] grid."""
    wiring = tuple(int(k) for k in aux_resid)
    bad = [k for k in wiring if not 0 <= k <= num_layers]
    if not wiring or bad:
        raise bad_input("aux_resid", None, f"resid indices in 0..{num_layers}", list(aux_resid),
                        "Give canonical resid points (eagle3lab ids translates engine ids).")
    out: dict[tuple[int, ...], list[str]] = {wiring: ["as given"]}
    for order in permutations(wiring):
        out.setdefault(order, ["reordered"])
    for i in range(len(wiring)):
        for k in range(num_layers + 1):
            sub = wiring[:i] + (k,) + wiring[i + 1:]
            if sub != wiring:
                out.setdefault(sub, []).append(f"slot {i} fed resid[{k}]")
    return out


def slot_scan(scores: pd.DataFrame, aux_resid, num_layers: int, value: str = "tau") -> pd.DataFrame:
    """``score_wirings`` rows -> a grid: row i = slot i of ``aux_resid``, column k = ``value`` when that
    slot alone is fed resid[k] (NaN where not scored). Scores of one residual rule only."""
    rules = scores["norm_before_residual"].unique()
    if len(rules) != 1:
        raise bad_input("scores", "norm_before_residual", "rows of one residual rule",
                        sorted(map(bool, rules)), "Filter the rows first, e.g. scores[scores.norm_before_residual].")
    by_wiring = dict(zip(scores["aux_resid"].map(tuple), scores[value]))
    wiring = tuple(int(k) for k in aux_resid)
    grid = [[by_wiring.get(wiring[:i] + (k,) + wiring[i + 1:], float("nan")) for k in range(num_layers + 1)]
            for i in range(len(wiring))]
    return pd.DataFrame(grid, index=[f"slot {i} ({resid_name(k)})" for i, k in enumerate(wiring)],
                        columns=[f"resid[{k}]" for k in range(num_layers + 1)])


def score_wirings(target_or_bank, draft, sequences=None, *, prompt_lens=None, num_layers: int | None = None,
                  hypotheses: dict | None = None, norm_before_residual=(False, True), num_steps: int = 4,
                  progress: bool = True) -> pd.DataFrame:
    """Score a given list of (fc wiring x residual rule) hypotheses, teacher-forced, on states captured once.

    Returns one row per hypothesis, best first: expected accept length ``tau`` (bonus included), its
    bootstrap interval over prompts, per-position conditional acceptance ``c1..cK``, and why the wiring
    was a candidate. ``search_wiring`` (``analysis.wiring_search``) finds wirings no list holds.
    """
    from eagle3lab.analysis.wiring_search import Scorer, settings_of
    from eagle3lab.engines.acceptance import bootstrap_ratio
    from eagle3lab.models.state_bank import StateBank, capture_bank

    bank = target_or_bank if isinstance(target_or_bank, StateBank) else capture_bank(target_or_bank, sequences,
                                                                                     prompt_lens)
    n = num_layers or bank.num_layers
    hypotheses = hypotheses if hypotheses is not None else wiring_hypotheses(draft, n)
    settings = settings_of(draft)
    score = Scorer(bank, draft, num_steps)
    rows = []
    for resid, nbr in tqdm([(tuple(r), bool(b)) for r in hypotheses for b in norm_before_residual],
                           desc="wiring hypotheses", disable=not progress):
        result = score(resid, {**settings, "norm_before_residual": nbr})
        stats, tau = result.stats, bootstrap_ratio(*result.tau_sums)
        row = {"wiring": resid_label(resid), "aux_resid": resid, "norm_before_residual": nbr, "tau": stats.tau,
               "tau_low": tau.low, "tau_high": tau.high, "ce": result.ce}
        row.update({f"c{k}": c for k, c in enumerate(stats.conditional, start=1)})
        row["why"] = "; ".join(hypotheses[resid])
        rows.append(row)
    return pd.DataFrame(rows).sort_values("tau", ascending=False, ignore_index=True)


# symptom -> likely cause -> doctor's finding codes -> where to look (the shape of TransformerLens's
# divergence guide); docs/symptoms.md is generated from it (symptoms_markdown) and tested against it
SYMPTOMS = pd.DataFrame([
    ("tau about 1 (accept length 1.0x) from a draft whose training accuracy was good",
     "fc fed other target states than in training: the id convention (SGLang reads id k as resid[k+1], "
     "notebook 02), ids outside eagle_config (SGLang) or inside it (vLLM's V2 model runner) silently replaced by "
     "defaults, or read by vLLM's V1 runner (always on its CPU build) as vLLM ids, one point below; or "
     "an EAGLE-3 draft launched with --speculative-algorithm EAGLE, fc skipped when the widths match (sglang#21272)",
     "WIRING, SGL_EAGLE3_DRAFT_WITH_EAGLE, SGL_AUX_IDS_TOP_LEVEL_IGNORED, VLLM_AUX_IDS_NESTED_IGNORED, "
     "VLLM_AUX_IDS_NESTED_READ",
     "eagle3lab doctor; eagle3lab inspect DRAFT --target T; notebooks 02, 03, 06"),
    ("tau low but above 1: the first position is accepted, later ones rarely",
     "the first decoder layer runs another residual or recurrence rule than in training: norm_before_residual "
     "(ignored by SGLang; missing key = true in vLLM for speculators configs), norm_output recycling; or the "
     "draft was trained on the target's distribution without its final norm (speculators#313); or a trained norm "
     "the build never applies: EAGLE-3.1's fc_norm / norm_output in a speculators config on vLLM before 0.25.0 "
     "(PR #46488; SGLang before 0.5.12), norm_before_fc only in eagle_config where the build reads the top level "
     "(vLLM before 0.22.0, PR #42143; SGLang before 0.5.17, PR #32334; speculators configs on vLLM), "
     "norm_before_fc on an MLA draft (never read by vLLM's deepseek_eagle3.py or SGLang's kimi_k25_eagle3.py)",
     "FIRST_LAYER_RULE, VLLM_SPECULATORS_NORM_BEFORE_RESIDUAL_DEFAULT, TARGET_DISTRIBUTION_PRENORM, "
     "FLAG_UNREAD_BY_BUILD, FLAG_WRITTEN_WHERE_UNREAD, FLAG_UNREAD_FOR_FAMILY",
     "eagle3lab doctor; eagle3lab inspect DRAFT --engine E --engine-version V (norm flags and who decided them, "
     "findings); notebook 04"),
    ("Accept length never exceeds 2 (or steps + 1) although many draft tokens were asked for",
     "SGLang with --speculative-eagle-topk 1 sets num_draft_tokens := num_steps + 1 (one log line says so)",
     "SGL_TOPK1_DRAFT_TOKENS_ADJUSTED",
     "eagle3lab flags sglang -- <launch command>; eagle3lab doctor --engine-args; notebook 01"),
    ("Shape error at fc, or a crash loading the draft",
     "fc width is not num_aux x the target's hidden size (a draft for another target, a wrong num_aux; vLLM's "
     "llama_eagle3.py builds fc for 3 unless num_aux_hidden_states says otherwise, vllm#54526), an id SGLang "
     "never reaches (N-1; Qwen3-MoE fails at start-up with an IndexError) or crashes on (loop index 0, where the "
     "residual is still None, a TypeError at the first forward: id -1 in llama.py up to "
     f"{CHANGES['sglang-llama-boundary'].last_without}, id -1 in "
     "deepseek_v2.py up to 0.5.12 (from 0.5.13, PR #25454, a list starting with -1 is used as is and a state goes "
     "missing; only a first id 0 reaches the TypeError in 0.5.13); later releases feed the embedding output "
     "there), "
     "or a draft family the engine build has no model for (MLA before SGLang 0.5.12 / vLLM 0.18.0; a Qwen3 draft "
     "on vLLM before 0.24.0, PR #43132, loaded as Llama: no k_norm; Qwen3 q/k norms, which SGLang drops "
     "silently); or more aux ids than the fc was built for (four ids, an fc for three: vllm#54526, #54598)",
     "FC_WIDTH, TARGET_HIDDEN_SIZE, AUX_IDS_FC_WIDTH, CHECKPOINT_ERROR, ENGINE_CANNOT_RUN_DRAFT",
     "eagle3lab inspect DRAFT --target T (--engine E --engine-version V for one build); eagle3lab ids sglang IDS "
     "--num-layers N"),
    ("Garbage or nonsense draft tokens with a reduced draft vocabulary; acceptance collapses",
     "d2t regenerated by fine-tuning (SpecForge#534), not saved (NeMo Automodel#2447), stored as absolute ids "
     "(verl-SpeCo#67) or missing: draft slots point at other target tokens",
     "VOCAB_MAP, VOCAB_ABSOLUTE_IDS, CHECKPOINT_ERROR, VOCAB_SIZE",
     "eagle3lab doctor (the map read from behaviour, slots named); eagle3lab inspect (vocab findings)"),
    ("Fine on short prompts, poor on long ones",
     "the draft's max_position_embeddings is shorter than the target's (sglang#6783), its rope_scaling was "
     "dropped by a converter (speculators#574), the server applies another RoPE than the trainer (yarn's mscale "
     "ignored before SGLang 0.5.16 / vLLM 0.30.0), an export that kept only rope_parameters (SpecForge PR #742; "
     "compared by what the RoPE computes, rope_parameters and rope_scaling read as transformers 5 reads them), "
     "the target's sliding window is not the draft's, or the draft's own window (speculators#684 made 2048 the "
     "default) is not run as trained: vLLM applies it only through layer_types, SGLang only through "
     "--speculative-draft-window-size (0.5.12+)",
     "DRAFT_CONTEXT_SHORT, ROPE_SCALING, ROPE_THETA, ROPE_SERVED_DIFFERENTLY, TARGET_SLIDING_WINDOW, "
     "DRAFT_WINDOW, SGL_DRAFT_CONTEXT_TOO_SHORT",
     "eagle3lab doctor; eagle3lab flags (context findings); eagle3lab inspect DRAFT --target T (RoPE, context, "
     "window findings)"),
    ("tau too good to be true (higher than the teacher-forced estimate, or above num_steps + 1)",
     "two definitions compared: SpecForge's simulated_acc_len excludes the bonus token, vLLM's per-position "
     "rates are survival, SGLang's accept rate changed meaning (PR #23530); or prompts the draft was trained "
     "on; or the server runs another command than the one analysed",
     "SERVER_MISMATCH",
     "eagle3lab doctor --server-log; notebook 05 (one log, every engine's number)"),
    ("Decent accept length but slower than no speculation",
     "verifying many tokens is not free and drafting costs c per step: the chain is too long for this tau; "
     "or engine overhead per round (no overlap scheduler)",
     "SGL_OVERLAP_SCHEDULE, SGL_MAX_RUNNING_REQUESTS",
     "eagle3lab bench; notebook 05 (cost model, break-even)"),
], columns=["symptom", "likely cause", "doctor finds", "where to look"])


def symptoms_markdown() -> str:
    """docs/symptoms.md, generated from :data:`SYMPTOMS`."""
    lines = ["# Symptoms: what you see, what causes it, what proves it", "",
             "Generated from `eagle3lab.analysis.diagnosis.SYMPTOMS` (a test keeps the two equal). Each row names",
             "the finding codes `eagle3lab doctor` reports for the cause (docs/cli/doctor.md) and where the",
             "workbook shows it.", ""]
    for row in SYMPTOMS.itertuples(index=False):
        lines += [f"## {row.symptom}", "", f"- **Likely cause:** {row[1]}.",
                  f"- **doctor finds:** {', '.join(f'`{c}`' for c in row[2].split(', '))}.",
                  f"- **Where to look:** {row[3]}.", ""]
    return "\n".join(lines)
