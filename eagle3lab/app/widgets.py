"""Widgets over plain functions: each widget has a headless twin that renders the same view."""

from __future__ import annotations

from eagle3lab.engines.flags import sglang_what_if


def flags_widget(target_config=None, draft_config=None, engine_version=None, steps=1, topk=1, draft_tokens=16):
    """Sliders for steps / topk / draft tokens over :func:`sglang_what_if`; shows the table and findings.

    Returns the ipywidgets box (a frontend renders it; headless runs just build it) and the function
    that renders one setting, so the same view works without widgets: ``render(1, 1, 16)``.
    """
    import ipywidgets as w
    from IPython.display import display

    from eagle3lab.app.display import full_text

    def render(steps, topk, draft_tokens):
        res = sglang_what_if(steps or None, topk or None, draft_tokens or None, target_config=target_config,
                             draft_config=draft_config, engine_version=engine_version)
        display(res.table()[["as_given", "effective", "why"]].loc[
            ["num_steps", "topk", "num_draft_tokens", "max_accept_length"]])
        display(full_text(res.findings_table()[["severity", "code", "message", "fix"]]))   # messages and fixes whole
        return res

    sliders = {"steps": w.IntSlider(value=steps, min=0, max=16, description="steps (0 = unset)"),
               "topk": w.IntSlider(value=topk, min=0, max=8, description="topk (0 = unset)"),
               "draft_tokens": w.IntSlider(value=draft_tokens, min=0, max=64, description="draft tok (0 = unset)")}
    out = w.interactive_output(render, sliders)
    return w.VBox([w.HBox(list(sliders.values())), out]), render


# ---------------------------------------------------------------------- which tokens were accepted


def token_rounds(result, tokenizer=None):
    """One row per verify round of a ``speculative_generate`` result: the drafts accepted, the first one
    rejected (a chain's later drafts were never reached), the target's own bonus token, as text when a
    tokenizer is given. The headless twin of :func:`token_view`."""
    import pandas as pd

    text = (lambda ids: tokenizer.decode(list(ids))) if tokenizer is not None else (lambda ids: list(ids))
    rows = []
    for i, r in enumerate(result.rounds):
        accepted = r.emitted[:r.accepted]
        chain = r.parents is None
        rejected = r.drafted[r.accepted:r.accepted + 1] if chain and r.accepted < len(r.drafted) else ()
        bonus = r.emitted[r.accepted:r.accepted + 1]
        rows.append({"round": i, "accepted": r.accepted, "drafted": len(r.drafted), "accepted tokens": text(accepted),
                     "first rejected draft": text(rejected) if rejected else None,
                     "bonus (target's own)": text(bonus) if bonus else None})
    return pd.DataFrame(rows).set_index("round")


def token_view_html(result, tokenizer=None) -> str:
    """The decoded text, coloured by round: accepted drafts green, the target's bonus token blue, a
    chain's first rejected draft struck through in red (shown, never emitted)."""
    import html

    dec = (lambda ids: tokenizer.decode(list(ids))) if tokenizer is not None else (lambda ids: " ".join(map(str, ids)) + " ")
    style = {"ok": "background:#c8f0c8", "bonus": "background:#cfe0ff", "no": "color:#b00;text-decoration:line-through"}
    first = result.tokens[:len(result.tokens) - sum(len(r.emitted) for r in result.rounds)]   # from prefill
    parts = [f"<span class='bonus' title='prefill' style='{style['bonus']}'>{html.escape(dec(first))}</span>"] if first else []
    for i, r in enumerate(result.rounds):
        spans = [("ok", r.emitted[:r.accepted]), ("bonus", r.emitted[r.accepted:r.accepted + 1])]
        if r.parents is None and r.accepted < len(r.drafted):
            spans.insert(1, ("no", r.drafted[r.accepted:r.accepted + 1]))
        for kind, ids in spans:
            if ids:
                parts.append(f"<span class='{kind}' title='round {i}' style='{style[kind]}'>{html.escape(dec(ids))}</span>")
    legend = ("<small><span style='{ok}'>accepted draft</span> <span style='{bonus}'>bonus (target)</span> "
              "<span style='{no}'>rejected draft</span></small><br>").format(**style)
    return legend + "<span style='white-space:pre-wrap;font-family:monospace'>" + "".join(parts) + "</span>"


def token_view(result, tokenizer=None):
    """A widget showing :func:`token_view_html` above the :func:`token_rounds` table; returns (widget, table)."""
    import ipywidgets as w

    table = token_rounds(result, tokenizer)
    return w.VBox([w.HTML(token_view_html(result, tokenizer)), w.HTML(table.to_html())]), table


# ---------------------------------------------------------------------- which states feed fc


def measure_ordering(bank, draft, wiring, num_steps: int = 3):
    """Teacher-forced acceptance of ``draft`` fed ``wiring`` (bank points in fc order) on ``bank``: one row
    with tau, its interval over prompts and c_k per position. The headless twin of :func:`fc_ordering_widget`."""
    import pandas as pd

    from eagle3lab.decoding.evaluate import evaluate_on_bank
    from eagle3lab.engines.acceptance import bootstrap_ratio
    from eagle3lab.models.state_bank import point_name

    score = evaluate_on_bank(bank, draft, tuple(wiring), num_steps)
    tau = bootstrap_ratio(*score.tau_sums)
    row = {"wiring": "[" + ", ".join(point_name(p) for p in wiring) + "]", "tau": tau.value, "tau_low": tau.low,
           "tau_high": tau.high, "cross_entropy": score.ce}
    row.update({f"c{k}": c for k, c in enumerate(score.stats.conditional, start=1)})
    return pd.DataFrame([row])


def fc_ordering_widget(bank, draft, wiring=None, num_steps: int = 3):
    """One dropdown per fc slot over the bank's points; each change re-measures :func:`measure_ordering`
    and appends the row, so orderings can be compared side by side. Returns (widget, measure function)."""
    import ipywidgets as w
    import pandas as pd
    from IPython.display import display

    from eagle3lab.models.state_bank import point_name

    points = [*bank.points, *(p for p in bank.states if p not in bank.points)]
    start = list(wiring if wiring is not None else draft.aux_resid)
    pickers = [w.Dropdown(options=[(point_name(p), p) for p in points], value=p, description=f"slot {i}")
               for i, p in enumerate(start)]
    seen: list = []
    out = w.Output()

    def measure(*_):
        seen.append(measure_ordering(bank, draft, [p.value for p in pickers], num_steps))
        with out:
            out.clear_output()
            display(pd.concat(seen, ignore_index=True).round(3))

    for p in pickers:
        p.observe(measure, names="value")
    measure()
    return w.VBox([w.HBox(pickers), out]), lambda wiring_: measure_ordering(bank, draft, wiring_, num_steps)
