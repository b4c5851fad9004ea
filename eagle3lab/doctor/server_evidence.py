"""What the serving engine itself says about acceptance, read from its log or its ``/metrics`` page.

Our emulation predicts the tau a deployment should reach; the server prints the tau it does reach.
``parse_server_evidence`` reads the server's own numbers out of pasted text (any other lines are
ignored) and ``compare_with_prediction`` sets them against the prediction. A mismatch means the
emulation or the deployment differs (a flag overridden, other layer ids, other weights, other prompts).

Three formats, as verified in the engines' sources (the inverse is
``eagle3lab.engines.acceptance.engine_log_lines``):

- **SGLang log**: the periodic ``Decode batch`` line, ``accept len: X.XX`` = (accepted + rounds) / rounds
  over the last ``--decode-log-interval`` batches, bonus included, i.e. tau. Older
  ``python/sglang/srt/managers/scheduler.py`` prints ``Decode batch. #running-req: .., #token: ..,
  token usage: .., accept len: .., gen throughput (token/s): .., #queue-req: ..``; the line later moved to
  ``scheduler_metrics_mixin.py`` (read at commit 01bb3c807f7e) as ``Decode batch[ [iter]], ...
  accept len: .., accept rate: .., cuda graph: .., gen throughput ...``. ``accept rate`` changed meaning
  (PR #11572, 2025-10, kept it below 1; PR #23530, 2026-04, made it drafts only), so it is not read.
  The line carries no count of rounds, so several lines pool only as a plain mean.
- **vLLM log**: ``SpecDecoding metrics:`` from ``SpecDecodingLogging.log`` in
  ``vllm/v1/spec_decode/metrics.py``. PR #15902 (2025-04-01) printed only ``Draft acceptance rate,
  Accepted, Drafted`` (no count of drafts: tau cannot be recovered); PR #16665 (2025-04-24) added
  ``Mean acceptance length`` and ``Per-position acceptance rate`` (the survival a_k); PR #24127
  (2025-09) added the throughputs; at commit 016a8587 the line starts with ``Mean acceptance length``
  and ends with ``Avg Draft acceptance rate``. Fields are read by name, so every order parses. Lines
  carry counts, so they pool exactly: drafts = Drafted / K with K the per-position list's length.
- **vLLM Prometheus** (``SpecDecodingProm``, same file; labels ``model_name``, ``engine`` from
  ``vllm/v1/metrics/loggers.py``): counters ``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
  ``..._num_accepted_tokens`` and ``..._num_accepted_tokens_per_pos`` (extra label ``position``,
  0-based), exposed with the ``_total`` suffix. ``num_drafts`` and the per-position counter came with
  PR #16665. Cumulative since the server started, summed over label sets except ``position``.
- **vLLM offline counters (JSON)**: the same four counters as the offline API gives them
  (``LLM(..., disable_log_stats=False).get_metrics()``, ``vllm/v1/metrics/reader.py``: ``Counter``
  with ``value``, ``Vector`` with ``values`` for the per-position counter), either that list as
  ``dataclasses.asdict`` writes it or a mapping name -> value / list (what
  ``eagle3lab/oracle/vllm_serve.py`` writes per job, counted over its ``generate`` only).
  The offline API logs no SpecDecoding line unless a stats interval (``VLLM_LOG_STATS_INTERVAL``,
  10 s) passes inside a step or ``llm.llm_engine.do_log_stats()`` is called: a short run's log holds
  none, and its counters are the evidence.
- **Per-request statistics** (one record per request; JSON, JSON lines, or a dict printed in a log line):
  SGLang's ``meta_info`` (``spec_verify_ct`` with the drafts-only count under the name its release gives it,
  ``spec_accept_token_num`` / ``spec_accepted_drafts`` / ``spec_num_correct_drafts``, and a histogram) or
  its OpenAI ``sglext.spec_tokens_details`` (#33518); vLLM's ``metrics.speculative_decoding`` or offline
  ``spec_decode_metrics`` (#48915). Each key is read by its meaning in ``engines.counters.COUNTERS``;
  tau = 1 + accepted drafts / rounds pooled over requests, with a bootstrap interval over requests that
  ``compare_with_prediction`` sets against the prediction's interval.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass

from eagle3lab.engines.acceptance import Interval, bootstrap_ratio
from eagle3lab.engines.counters import RejectionReading, field_span, fields
from eagle3lab.errors import bad_input

# Absolute slack on tau when judging agreement. SGLang prints accept len to 2 decimals and pools only
# as a plain mean of lines (biased when intervals hold unequal numbers of rounds); vLLM prints rates to
# 3. 0.05 covers that bookkeeping; it is not a statistical interval (the prediction's interval is).
AGREEMENT_TOLERANCE = 0.05

EXPECTED_FORMATS = (
    "SGLang 'Decode batch ... accept len: X' log lines, vLLM 'SpecDecoding metrics: Mean acceptance "
    "length: ..., Per-position acceptance rate: ...' log lines, or vLLM Prometheus counters "
    "(vllm:spec_decode_num_drafts_total, vllm:spec_decode_num_accepted_tokens_total, "
    "vllm:spec_decode_num_accepted_tokens_per_pos_total), or vLLM's offline counters as JSON "
    "(llm.get_metrics() or vllm_serve.py's 'counters'), or per-request statistics (SGLang meta_info / "
    "sglext.spec_tokens_details with spec_verify_ct, vLLM metrics.speculative_decoding)"
)

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_NUM = r"(?:nan|inf|\d+(?:\.\d+)?)"
_SGLANG = re.compile(rf"Decode batch\b.*?\baccept len: ({_NUM})")
_VLLM_MARK = "SpecDecoding metrics:"
_VLLM_MEAN = re.compile(rf"Mean acceptance length: ({_NUM})")
_VLLM_ACCEPTED = re.compile(r"\bAccepted: (\d+) tokens")
_VLLM_DRAFTED = re.compile(r"\bDrafted: (\d+) tokens")
_VLLM_PER_POS = re.compile(rf"Per-position acceptance rate: ({_NUM}(?:,\s*{_NUM})*)")
_VLLM_PRE_V1_LOG = "Speculative metrics: Draft acceptance rate"   # V0, and V1 before PR #15902
_PROM_SAMPLE = re.compile(r"^(vllm:spec_decode_\w+?)_total(?:\{([^}]*)\})?\s+(\S+)(?:\s+\S+)?$")
_PROM_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_PROM_COUNTERS = ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos")
_VLLM_LOG_LINE = re.compile(r"\b(?:INFO|WARNING|DEBUG|ERROR)\b \d\d-\d\d [\d:]+ \[[\w./-]+\.py:\d+\]")   # vLLM's logger
_PROM_VLLM = re.compile(r"^vllm:\w+")
_NO_SPEC_LOG = ("vLLM logs a SpecDecoding metrics line only when stats are on (LLM(disable_log_stats=False); "
                "the offline API turns them off) and a stats interval (VLLM_LOG_STATS_INTERVAL, 10 s) passes "
                "inside a step, so a short run prints none. Give its counters instead: the text of GET /metrics, "
                "llm.get_metrics() as JSON, or call llm.llm_engine.do_log_stats() after generate() for a line.")


@dataclass(frozen=True)
class ServerEvidence:
    """The acceptance a server reported: tau (bonus included) and, where printed, survival a_k."""

    engine: str                    # "sglang" / "vllm"
    format: str                    # "sglang log" / "vllm log" / "vllm prometheus"
    tau: float
    survival: list[float] | None   # a_k = P(at least k drafts accepted), positions 1..K
    lines: int                     # evidence records read (log lines, or Prometheus label sets)
    drafts: int | None             # verify rounds behind the numbers, where the format counts them
    note: str
    source: str = "<pasted>"
    interval: Interval | None = None   # tau with a bootstrap interval over requests (per-request statistics)

    @property
    def conditional(self) -> list[float] | None:
        """c_k = a_k / a_{k-1} (a_0 = 1): acceptance at k given 1..k-1 accepted."""
        if self.survival is None:
            return None
        prev = [1.0] + self.survival[:-1]
        return [a / p if p > 0 else float("nan") for a, p in zip(self.survival, prev)]

    def to_dict(self) -> dict:
        return {**asdict(self), "conditional": self.conditional}


@dataclass(frozen=True)
class RequestRecord:
    """One request's spec-decode statistics, converted by the meaning of the keys it carries."""

    rounds: int                      # verify rounds
    drafts: float                    # accepted drafts, bonus excluded
    histogram: tuple[int, ...] | None   # index j: rounds that accepted exactly j drafts
    keys: tuple[str, ...]            # the keys read (the counter rules' keys), for the note


def _first_line(lines: list[str]) -> str:
    first = next((ln for ln in lines if ln.strip()), "")
    return repr(first[:120] + ("..." if len(first) > 120 else ""))


def _floats(text: str) -> list[float]:
    return [float(x) for x in re.split(r",\s*", text.strip())]


def _sglang(values: list[float], source: str) -> ServerEvidence:
    n = len(values)
    if n == 1:
        note = "one SGLang Decode batch line: tau over one logging interval."
    else:
        note = (f"plain mean of {n} SGLang Decode batch lines: the line prints no count of verify rounds, "
                "so intervals are weighted equally (exact only if each held as many rounds).")
    return ServerEvidence("sglang", "sglang log", sum(values) / n, None, n, None, note, source)


def _vllm_log(records: list[tuple[float, int, int, list[float]]], skipped: int, source: str) -> ServerEvidence:
    positions = {len(r[3]) for r in records}
    if len(positions) > 1:
        raise bad_input(source, "Per-position acceptance rate", "one number of speculative tokens in every "
                        "SpecDecoding metrics line", f"lists of lengths {sorted(positions)}",
                        "The log spans servers with different num_speculative_tokens; paste one run.")
    k = positions.pop()
    total_accepted, total_drafts, weighted, refit = 0, 0.0, [0.0] * k, 0
    for mean, accepted, drafted, rates in records:
        drafts = drafted / k
        # EAGLE drafts K tokens every round; a proposer that drafts fewer (n-gram) breaks Drafted / K,
        # which the printed mean exposes. Then recover the drafts from the mean (2 decimals).
        if math.isfinite(mean) and mean > 1 and abs(1 + accepted / drafts - mean) > 0.006:
            drafts, refit = accepted / (mean - 1), refit + 1
        total_accepted += accepted
        total_drafts += drafts
        weighted = [w + r * drafts for w, r in zip(weighted, rates)]
    note = (f"pooled exactly from {len(records)} vLLM SpecDecoding lines: tau = 1 + accepted / drafts with "
            f"drafts = Drafted / {k} positions; per-position rates (3 decimals) weighted by drafts.")
    if refit:
        note += (f" On {refit} line(s) Drafted / {k} disagreed with the printed mean acceptance length (fewer "
                 "drafted tokens than positions); their drafts were taken from the mean.")
    if skipped:
        note += f" {skipped} line(s) with no drafts were skipped."
    return ServerEvidence("vllm", "vllm log", 1 + total_accepted / total_drafts,
                          [w / total_drafts for w in weighted], len(records), round(total_drafts), note, source)


def _vllm_prometheus(samples: list[tuple[str, dict, float]], source: str) -> ServerEvidence:
    totals: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    seen, label_sets = set(), set()
    for counter, labels, value in samples:
        key = (counter, tuple(sorted(labels.items())))
        if key in seen:
            raise bad_input(source, f"vllm:spec_decode_{counter}_total", "each series once (one scrape of "
                            "/metrics)", f"{dict(labels)} twice", "Paste a single scrape, or subtract an "
                            "earlier scrape from a later one yourself.")
        seen.add(key)
        label_sets.add(tuple(sorted((k, v) for k, v in labels.items() if k != "position")))
        if counter == "num_accepted_tokens_per_pos":
            pos = int(labels.get("position", -1))
            per_pos[pos] = per_pos.get(pos, 0.0) + value
        else:
            totals[counter] = totals.get(counter, 0.0) + value
    if "num_drafts" not in totals or "num_accepted_tokens" not in totals:
        raise bad_input(source, "vllm:spec_decode_num_drafts_total", "the drafts and accepted-tokens counters",
                        f"only {sorted(f'vllm:spec_decode_{c}_total' for c in totals)}",
                        "vLLM before PR #16665 (2025-04) exports no count of drafts, so tau cannot be "
                        "recovered; upgrade vLLM or paste the SpecDecoding metrics log lines.")
    drafts = totals["num_drafts"]
    if drafts <= 0:
        raise bad_input(source, "vllm:spec_decode_num_drafts_total", "a positive count", drafts,
                        "The server has verified no drafts yet; send it some requests first.")
    survival = None
    if per_pos:
        if sorted(per_pos) != list(range(len(per_pos))):
            raise bad_input(source, "position", f"positions 0..{len(per_pos) - 1}", sorted(per_pos))
        survival = [per_pos[k] / drafts for k in range(len(per_pos))]
    note = (f"vLLM Prometheus counters summed over {len(label_sets)} label set(s) (model_name, engine): "
            "cumulative since the server started, so they include every request it has served.")
    return ServerEvidence("vllm", "vllm prometheus", 1 + totals["num_accepted_tokens"] / drafts, survival,
                          len(label_sets), round(drafts), note, source)


def _counter_sets(obj, found: list, where: str = "$") -> None:
    """Every spec-decode counter set in a JSON value: a name -> value mapping, or get_metrics()' list."""
    names = {f"vllm:spec_decode_{c}" for c in _PROM_COUNTERS}
    if isinstance(obj, dict):
        if names & set(obj):
            found.append((where, {k.removeprefix("vllm:spec_decode_"): v for k, v in obj.items() if k in names}))
            return
        for key, value in obj.items():
            _counter_sets(value, found, f"{where}.{key}")
    elif isinstance(obj, list):
        metrics = [m for m in obj if isinstance(m, dict) and m.get("name") in names]
        if metrics:
            totals: dict = {}
            for m in metrics:   # summed over label sets, as the Prometheus reader does
                name = m["name"].removeprefix("vllm:spec_decode_")
                value = m.get("values", m.get("value"))
                if isinstance(value, list):
                    prev = totals.get(name, [])
                    width = max(len(prev), len(value))
                    totals[name] = [(prev[i] if i < len(prev) else 0) + (value[i] if i < len(value) else 0)
                                    for i in range(width)]
                else:
                    totals[name] = totals.get(name, 0) + value
            found.append((where, totals))
            return
        for i, value in enumerate(obj):
            _counter_sets(value, found, f"{where}[{i}]")


def _vllm_counters(obj, source: str) -> ServerEvidence:
    found: list = []
    _counter_sets(obj, found)
    if not found:
        raise bad_input(source, None, "vLLM's spec-decode counters (vllm:spec_decode_num_drafts, "
                        "vllm:spec_decode_num_accepted_tokens, ..._per_pos) in the JSON", "none",
                        "The run served without speculative decoding, or its stats were off "
                        "(LLM(..., disable_log_stats=False) keeps them).")
    if len(found) > 1:
        raise bad_input(source, None, "one set of spec-decode counters", f"{len(found)} (at "
                        f"{', '.join(w for w, _ in found[:4])})", "Give the counters of one run (one job).")
    where, totals = found[0]
    missing = [c for c in ("num_drafts", "num_accepted_tokens") if c not in totals]
    if missing:
        raise bad_input(source, f"vllm:spec_decode_{missing[0]}", "the drafts and accepted-tokens counters",
                        f"only {sorted(f'vllm:spec_decode_{c}' for c in totals)} at {where}")
    drafts = float(totals["num_drafts"])
    if drafts <= 0:
        raise bad_input(source, "vllm:spec_decode_num_drafts", "a positive count", totals["num_drafts"],
                        "The run verified no drafts (no request reached a decode step with the draft).")
    per_pos = totals.get("num_accepted_tokens_per_pos")
    survival = [float(a) / drafts for a in per_pos] if per_pos else None
    note = (f"vLLM's offline counters (JSON, at {where}): tau = 1 + accepted / drafts exactly, survival per "
            "position from the per-position counter.")
    return ServerEvidence("vllm", "vllm counters", 1 + float(totals["num_accepted_tokens"]) / drafts, survival,
                          1, round(drafts), note, source)


# ------------------------------------------------------------------ per-request statistics
# SGLang's meta_info (every release read; the keys renamed at 0.5.6, 0.5.11, 0.5.12) or its OpenAI
# sglext.spec_tokens_details (#33518), vLLM's metrics.speculative_decoding (#48915, 0.29.0 on) or offline
# RequestOutput.outputs[i].spec_decode_metrics: one record per request, read by engines.counters' rows.
_REQUEST_MARKS = ("spec_verify_ct", "num_spec_steps", "num_accepted_draft_tokens", "acceptance_histogram")
_REQUEST_KV = re.compile(r"""['"]?(spec_\w+|num_spec_steps|num_accepted_draft_tokens|num_draft_tokens|num_spec_tokens|"""
                         r"""acceptance_histogram|histogram|per_step_accepted)['"]?\s*[:=]\s*"""
                         r"""(\[[-\d.,\s]*\]|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)""")


def _request_engine(d: dict) -> str | None:
    if "spec_verify_ct" in d:
        return "sglang"
    if "num_spec_steps" in d or "acceptance_histogram" in d or ("histogram" in d and "num_spec_tokens" in d):
        return "vllm"
    return None


def _request_dicts(obj, found: list) -> None:
    """Every per-request statistics mapping in a JSON value (a response, a list of them, a log record)."""
    if isinstance(obj, dict):
        engine = _request_engine(obj)
        if engine:
            found.append((engine, obj))
            return
        for value in obj.values():
            _request_dicts(value, found)
    elif isinstance(obj, list):
        for value in obj:
            _request_dicts(value, found)


def _kv_value(raw: str):
    if raw.startswith("["):
        return [float(x) for x in re.split(r",\s*", raw.strip("[] ")) if x.strip()]
    return float(raw)


def _requests_in(text: str, as_json) -> list:
    """(engine, mapping) per request: from a whole JSON text, JSON lines (a log prefix allowed) or Python
    dict reprs in a log line (SGLang's --log-requests prints meta_info so)."""
    found: list = []
    if as_json is not None:
        _request_dicts(as_json, found)
        return found
    for ln in text.splitlines():
        if not any(m in ln for m in _REQUEST_MARKS):
            continue
        brace = ln.find("{")
        obj = _as_json(ln[brace:]) if brace >= 0 else None
        if obj is not None:
            _request_dicts(obj, found)
            continue
        d = {k: _kv_value(v) for k, v in _REQUEST_KV.findall(ln)}
        if engine := _request_engine(d):
            found.append((engine, d))
    return found


def _first_of(d: dict, rows, source: str, what):
    """The first key of ``rows`` present in ``d``: (row, value checked by ``what``), or (None, None)."""
    for row in rows:
        if d.get(row.key) is not None:
            value = d[row.key]
            if not what(value):
                raise bad_input(source, row.key, f"{row.value} as {field_span(row)}", repr(value))
            return row, value
    return None, None


def _is_count(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def _is_counts(x) -> bool:
    return isinstance(x, list) and all(_is_count(v) for v in x)


def _record(engine: str, d: dict, source: str) -> RequestRecord | None:
    """One request's record by the meaning of its keys; None when it ran no verify round."""
    hist_row, hist = _first_of(d, fields(engine, "histogram"), source, _is_counts)
    rounds_row, rounds = _first_of(d, fields(engine, "rounds"), source, _is_count)
    if rounds is None and hist is not None:
        rounds = sum(hist)
    if rounds is None:
        raise bad_input(source, fields(engine, "rounds")[0].key, "the number of verify rounds of each request",
                        f"a record with only {sorted(d)}")
    if rounds == 0:
        return None
    keys = [r.key for r in (hist_row, rounds_row) if r is not None]
    row, drafts = _first_of(d, fields(engine, "drafts"), source, _is_count)
    if drafts is None and hist is not None:
        drafts = sum(j * h for j, h in enumerate(hist))
    if drafts is None:
        row, per_step = _first_of(d, fields(engine, "drafts_per_round"), source, _is_counts)
        drafts = sum(per_step) if per_step is not None else None
    if drafts is None:   # only a bonus-included mean per round (SGLang spec_accept_length)
        row, per_round = _first_of(d, fields(engine, "tokens_per_round"), source, _is_count)
        if per_round is None:
            raise bad_input(source, fields(engine, "drafts")[0].key, "an accepted-drafts count, a histogram or "
                            "an accept length per request", f"a record with only {sorted(d)}")
        drafts = max(per_round * rounds - rounds, 0.0)
    keys += [row.key] if row is not None else []
    return RequestRecord(int(rounds), float(drafts), tuple(int(h) for h in hist) if hist is not None else None,
                         tuple(keys))


def _pooled_survival(records: list[RequestRecord]) -> list[float] | None:
    """a_k = rounds with at least k accepted / rounds, from the pooled histograms (None unless all have one
    of the same length)."""
    if any(r.histogram is None for r in records) or len({len(r.histogram) for r in records}) != 1:
        return None
    pooled = [sum(col) for col in zip(*(r.histogram for r in records))]
    total = sum(pooled)
    return [sum(pooled[k:]) / total for k in range(1, len(pooled))] if total else None


def _requests(found: list, source: str) -> ServerEvidence:
    engines = {e for e, _ in found}
    if len(engines) > 1:
        raise bad_input(source, None, "per-request statistics of one engine", "both SGLang and vLLM records",
                        "Paste one server's responses at a time.")
    engine = engines.pop()
    records = [r for r in (_record(engine, d, source) for _, d in found) if r is not None]
    skipped = len(found) - len(records)
    if not records:
        raise bad_input(source, None, "a request with at least one verify round", f"{len(found)} with none")
    rounds = [r.rounds for r in records]
    drafts = [r.drafts for r in records]
    interval = bootstrap_ratio([d + n for d, n in zip(drafts, rounds)], rounds)
    keys = sorted({k for r in records for k in r.keys})
    rows = [f for f in fields(engine) if f.key in keys]
    note = (f"per-request statistics of {len(records)} request(s) ({'; '.join(field_span(f) for f in rows)}): "
            f"tau = 1 + accepted drafts / verify rounds pooled over requests, with a {interval.level:.0%} "
            "bootstrap interval over requests.")
    if any(f.value == "tokens_per_round" for f in rows):
        note += (" Where a request gave only spec_accept_length (completion tokens / verify rounds: the prefill's "
                 "token counted too), its drafts are that times the rounds minus the rounds: slightly high.")
    if skipped:
        note += f" {skipped} request(s) with no verify round were skipped."
    return ServerEvidence(engine, f"{engine} requests", interval.value, _pooled_survival(records), len(records),
                          sum(rounds), note, source, interval)


def _as_json(text: str):
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        return None


def parse_server_evidence(text: str, source: str = "<pasted>") -> ServerEvidence:
    """Find the server's acceptance numbers in ``text`` (a log or a /metrics scrape mixed with anything).

    Raises ``Eagle3LabError`` naming ``source`` when no format is found, when two are mixed, or when
    the lines come from an engine version whose numbers do not determine tau.
    """
    as_json = _as_json(text)
    requests = _requests_in(_ANSI.sub("", text), as_json)
    if as_json is not None:
        return _requests(requests, source) if requests else _vllm_counters(as_json, source)
    lines = [_ANSI.sub("", ln).strip() for ln in text.splitlines()]
    sglang: list[float] = []
    vllm: list[tuple[float, int, int, list[float]]] = []
    prom: list[tuple[str, dict, float]] = []
    vllm_skipped, vllm_old, first_of = 0, [], {}
    for ln in lines:
        if (m := _SGLANG.search(ln)) and math.isfinite(float(m.group(1))):
            sglang.append(float(m.group(1)))
            first_of.setdefault("sglang log", ln)
        elif _VLLM_MARK in ln:
            mean, acc, dra, pos = (r.search(ln) for r in (_VLLM_MEAN, _VLLM_ACCEPTED, _VLLM_DRAFTED, _VLLM_PER_POS))
            if not (mean and acc and dra and pos):
                vllm_old.append(ln)
            elif int(dra.group(1)) == 0:
                vllm_skipped += 1
            else:
                vllm.append((float(mean.group(1)), int(acc.group(1)), int(dra.group(1)), _floats(pos.group(1))))
                first_of.setdefault("vllm log", ln)
        elif _VLLM_PRE_V1_LOG in ln:
            vllm_old.append(ln)
        elif (m := _PROM_SAMPLE.match(ln)) and m.group(1).removeprefix("vllm:spec_decode_") in _PROM_COUNTERS:
            labels = dict(_PROM_LABEL.findall(m.group(2) or ""))
            prom.append((m.group(1).removeprefix("vllm:spec_decode_"), labels, float(m.group(3))))
            first_of.setdefault("vllm prometheus", ln)
    if requests:
        first_of.setdefault(f"{requests[0][0]} requests", str(requests[0][1])[:80])
    if len(first_of) > 1:
        found = "; ".join(f"{fmt} ({ln[:80]!r})" for fmt, ln in first_of.items())
        raise bad_input(source, None, "evidence in one format", f"several: {found}",
                        "Paste one server's log or one /metrics scrape at a time.")
    if requests:
        return _requests(requests, source)
    if sglang:
        return _sglang(sglang, source)
    if vllm:
        return _vllm_log(vllm, vllm_skipped, source)
    if prom:
        return _vllm_prometheus(prom, source)
    if vllm_old:
        raise bad_input(source, None, "a vLLM 'SpecDecoding metrics' line with 'Mean acceptance length' and "
                        "'Per-position acceptance rate' (vLLM V1 from PR #16665, 2025-04)",
                        f"{len(vllm_old)} older line(s) such as {_first_line(vllm_old)}",
                        "These print accepted and drafted tokens but no count of drafts, so tau cannot be "
                        "recovered; upgrade vLLM, or measure with this workbook's decoding loop.")
    nonempty = [ln for ln in lines if ln]
    vllm_log = [ln for ln in nonempty if _VLLM_LOG_LINE.search(ln)]
    if vllm_log:
        raise bad_input(source, None, "a vLLM 'SpecDecoding metrics' line", f"a vLLM log of {len(vllm_log)} "
                        f"line(s) with no spec-decode record (the first: {_first_line(vllm_log)})", _NO_SPEC_LOG)
    prom = [ln for ln in nonempty if _PROM_VLLM.match(ln)]
    if prom:
        raise bad_input(source, None, "vllm:spec_decode_*_total counters in the /metrics text",
                        f"{len(prom)} other vllm: sample(s) and no spec-decode counter (the first: {_first_line(prom)})",
                        "That server runs without speculative decoding (the counters exist only with a "
                        "speculative_config).")
    found = (f"none in {len(nonempty)} non-empty line(s); the first is {_first_line(nonempty)}"
             if nonempty else "an empty text")
    raise bad_input(source, None, EXPECTED_FORMATS, found,
                    "Paste the server's own log with speculative decoding on (SGLang logs a Decode batch line "
                    "every --decode-log-interval batches; vLLM logs SpecDecoding metrics unless "
                    "--disable-log-stats), or the text of GET /metrics from a vLLM server.")


def _observed_words(evidence: ServerEvidence) -> str:
    obs = evidence.interval
    said = f"The server's tau {evidence.tau:.2f}"
    if obs is not None:
        said += f" [{obs.low:.2f}, {obs.high:.2f}] ({obs.level:.0%} bootstrap over {obs.units} requests)"
    return said + f" ({evidence.format}, {evidence.lines} record(s) from {evidence.source})"


def _agreement(evidence: ServerEvidence, low: float, high: float) -> tuple[bool, str, str]:
    """(agrees, side, basis): the observed interval against the predicted one when the server gave
    per-request statistics from two or more requests (they agree when the two, widened, overlap), else the
    pooled tau against the predicted interval."""
    obs = evidence.interval
    if obs is not None and not obs.single:
        agrees = obs.low <= high + AGREEMENT_TOLERANCE and obs.high >= low - AGREEMENT_TOLERANCE
        side = "below" if obs.high < low else "above" if obs.low > high else "apart from"
        return agrees, side, "intervals"
    observed = evidence.tau
    agrees = low - AGREEMENT_TOLERANCE <= observed <= high + AGREEMENT_TOLERANCE
    side = "below" if observed < low else "above" if observed > high else "not comparable with"
    return agrees, side, "point"


def compare_with_prediction(evidence: ServerEvidence, predicted: Interval | float,
                            rejection: RejectionReading | None = None) -> dict:
    """Does the server's tau agree with the predicted as-served interval, widened by AGREEMENT_TOLERANCE?

    With per-request statistics the server's own bootstrap interval is set against the prediction's
    (``basis`` "intervals"); otherwise its pooled tau must lie in the widened prediction (``basis`` "point").
    ``rejection`` (``engines.counters.rejection_reading`` of the server's launch): when its counters do not
    measure the draft (synthetic rates) or the greedy prediction does not apply (temperature > 0), the
    verdict is "not comparable" and ``agrees`` None, whatever the numbers.
    """
    if isinstance(predicted, Interval):
        value, low, high = predicted.value, predicted.low, predicted.high
        about = f" ({predicted.level:.0%} interval over {predicted.units} units)"
    else:
        value = low = high = float(predicted)
        about = ""
    agrees, side, basis = _agreement(evidence, low, high)
    said = _observed_words(evidence)
    pred = f"the predicted {value:.2f} [{low:.2f}, {high:.2f}]{about}, widened by {AGREEMENT_TOLERANCE}"
    verb = "overlaps" if basis == "intervals" else "lies within"
    if rejection is not None and rejection.prediction != "exact":
        agrees, verdict = None, "not comparable"
        target = (f" against the synthetic rates' {rejection.synthetic_tau:.2f}" if rejection.synthetic_tau
                  is not None else "")
        message = (f"{said}{target}. {rejection.words} So it does not check {pred}.")
    elif agrees:
        verdict = "agrees"
        message = f"{said} {verb} {pred}: the emulation reproduces what the deployment serves."
    else:
        verdict = "disagrees"
        message = (f"{said} lies {side} {pred}: the emulation and the deployment differ. Check the flags the "
                   "server really ran, the target layers it feeds the draft, the draft weights it loaded, and "
                   "whether it served the same kind of prompts.")
    obs = evidence.interval
    return {"observed": evidence.tau, "predicted": value, "low": low, "high": high,
            "tolerance": AGREEMENT_TOLERANCE, "agrees": agrees, "verdict": verdict, "basis": basis,
            "observed_interval": None if obs is None else {"value": obs.value, "low": obs.low, "high": obs.high,
                                                           "level": obs.level, "units": obs.units},
            "rejection": None if rejection is None else rejection.to_dict(), "message": message}
