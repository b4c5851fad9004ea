"""eagle3lab.app.display: a long text cell renders whole, where pandas' own repr cuts it at 50 characters."""

from __future__ import annotations

import pandas as pd

from eagle3lab.app.display import TABLE_CLASS, full_text

LONG = "SGLang sets num_draft_tokens to num_steps + 1 when topk is 1, so the chain verifies two tokens " * 2


def test_pandas_cuts_and_full_text_does_not():
    df = pd.DataFrame({"code": ["X"], "message": [LONG], "n": [3]})
    with pd.option_context("display.max_colwidth", 50):
        assert LONG.strip() not in df._repr_html_()          # the premise: pandas cuts it
        shown = full_text(df, caption="findings")
        assert LONG.strip() in shown._repr_html_()
        assert LONG.strip() in repr(shown)
    assert f'class="dataframe {TABLE_CLASS}"' in shown._repr_html_()
    assert "findings" in shown._repr_html_() and shown.frame is df
    assert pd.get_option("display.max_colwidth") == 50      # the option is left as it was


def test_text_is_escaped():
    shown = full_text(pd.DataFrame({"m": ["<b>not bold</b>"]}))
    assert "&lt;b&gt;not bold&lt;/b&gt;" in shown._repr_html_()
