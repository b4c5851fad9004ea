"""Tables shown whole: a DataFrame whose text columns (a finding's message, its fix) are never cut.

pandas cuts every cell at ``display.max_colwidth`` (50 characters) in its HTML and text reprs, which is what
Jupyter and JupyterLab show for a DataFrame at the end of a cell. ``full_text(df)`` wraps a frame so that it
renders with no cut and with text cells left-aligned and wrapped (``white-space: pre-wrap``), in a notebook
saved as HTML as well as live in JupyterLab; ``show_full(df)`` displays it at once.
"""

from __future__ import annotations

import html

import pandas as pd

#: the CSS class on every table full_text renders (tests look for it)
TABLE_CLASS = "eagle3lab-full-text"

# the second selector outranks JupyterLab's ``.jp-RenderedHTMLCommon td { text-align: right }``
_STYLE = (f"<style>table.{TABLE_CLASS} td, .jp-RenderedHTMLCommon table.{TABLE_CLASS} td {{ white-space: pre-wrap; "
          f"text-align: left; max-width: none; vertical-align: top; }}</style>")


class FullText:
    """A DataFrame that renders every text cell whole (HTML and plain text); ``.frame`` is the frame."""

    def __init__(self, frame: pd.DataFrame, caption: str | None = None):
        self.frame = frame
        self.caption = caption

    def _repr_html_(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            table = self.frame.to_html(classes=[TABLE_CLASS], border=0, escape=True)
        head = f"<p><b>{html.escape(self.caption)}</b></p>" if self.caption else ""
        return _STYLE + head + table

    def __repr__(self) -> str:
        with pd.option_context("display.max_colwidth", None):
            text = self.frame.to_string()       # repr would drop columns to fit a terminal's width
        return f"{self.caption}\n{text}" if self.caption else text


def full_text(frame: pd.DataFrame, caption: str | None = None) -> FullText:
    """``frame`` wrapped to render with no text cut (put it last in a cell, or pass it to ``display``)."""
    return FullText(frame, caption)


def show_full(frame: pd.DataFrame, caption: str | None = None) -> FullText:
    """Display ``frame`` with every text cell whole now; returns the wrapper."""
    from IPython.display import display

    shown = full_text(frame, caption)
    display(shown)
    return shown
