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

    def render(steps, topk, draft_tokens):
        res = sglang_what_if(steps or None, topk or None, draft_tokens or None, target_config=target_config,
                             draft_config=draft_config, engine_version=engine_version)
        display(res.table()[["as_given", "effective", "why"]].loc[
            ["num_steps", "topk", "num_draft_tokens", "max_accept_length"]])
        display(res.findings_table()[["severity", "code", "message", "fix"]])
        return res

    sliders = {"steps": w.IntSlider(value=steps, min=0, max=16, description="steps (0 = unset)"),
               "topk": w.IntSlider(value=topk, min=0, max=8, description="topk (0 = unset)"),
               "draft_tokens": w.IntSlider(value=draft_tokens, min=0, max=64, description="draft tok (0 = unset)")}
    out = w.interactive_output(render, sliders)
    return w.VBox([w.HBox(list(sliders.values())), out]), render
