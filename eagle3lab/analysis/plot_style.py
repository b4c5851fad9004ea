"""One style for the package's figures: every axes titled (or the figure), both axes labelled with their
units, the engine or profile and the device named when the caller knows them, measured and projected told
apart (solid marked lines are measured, dashed ones projected)."""

from __future__ import annotations

import functools
import inspect

MEASURED = {"ls": "-", "marker": "o"}          # numbers this run measured
PROJECTED = {"ls": "--", "marker": None}       # numbers a model priced from measured pieces


def name_context(fig, *, engine: str | None = None, device: str | None = None):
    """Append "engine X, on DEVICE" to the figure's title (its suptitle, or a lone axes' title)."""
    text = ", ".join(t for t in (engine and f"engine {engine}", device and f"on {device}") if t)
    if not text:
        return fig
    sup = getattr(fig, "_suptitle", None)
    if sup is not None and sup.get_text():
        sup.set_text(f"{sup.get_text()} ({text})")
    elif len(fig.axes) == 1:
        ax = fig.axes[0]
        ax.set_title(f"{ax.get_title()} ({text})" if ax.get_title() else text)
    else:
        fig.suptitle(text, fontsize=10)
    return fig


def styled(plot):
    """A plot function that also takes ``engine=`` and ``device=`` (unless it has its own) and names them."""
    own = set(inspect.signature(plot).parameters)

    @functools.wraps(plot)
    def wrapper(*args, engine: str | None = None, device: str | None = None, **kw):
        if "engine" in own and engine is not None:
            kw["engine"] = engine
        if "device" in own and device is not None:
            kw["device"] = device
        fig = plot(*args, **kw)
        return name_context(fig, engine=None if "engine" in own else engine, device=None if "device" in own else device)

    return wrapper


def _named_ticks(axis) -> bool:
    """Ticks that name categories (settings, layers) label the axis themselves."""
    from matplotlib.ticker import LogFormatter, ScalarFormatter

    return not isinstance(axis.get_major_formatter(), (ScalarFormatter, LogFormatter))   # numbers need a label


def style_problems(fig) -> list[str]:
    """What a figure lacks of the style: a title (axes or figure) and labels on both axes of each panel
    (colorbars and empty panels aside)."""
    problems = []
    has_sup = bool(getattr(fig, "_suptitle", None) and fig._suptitle.get_text())
    for i, ax in enumerate(fig.axes):
        if ax.get_label() == "<colorbar>" or not ax.has_data():
            continue
        if not (ax.get_title() or has_sup):
            problems.append(f"axes {i}: no title")
        if not ax.get_xlabel() and not _named_ticks(ax.xaxis):
            problems.append(f"axes {i}: no x label")
        if not ax.get_ylabel():
            problems.append(f"axes {i}: no y label")
    return problems
