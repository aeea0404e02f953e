"""Shared matplotlib setup: headless backend, one look for every PNG, integer step axes."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

QUANTILES = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)


def new(figsize: tuple[float, float] = (9, 5)) -> tuple[Any, Any]:
    fig, ax = plt.subplots(figsize=figsize)
    ax.grid(alpha=0.3)
    return fig, ax


def save(fig: Any, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def legend(ax: Any, *args: Any, **kwargs: Any) -> Any:
    """A legend outside the axes, to the right: never over the data, and no "best" placement search
    (matplotlib scans every plotted point for it: over a second per figure at 2M spans)."""
    kwargs.setdefault("fontsize", 7)
    return ax.legend(*args, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)


def empty(path: str | Path, title: str, why: str = "no data in this trace") -> Path:
    """A placeholder PNG saying why a figure has nothing to draw (e.g. request spans sampled away)."""
    fig, ax = new((6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{title}: {why}", ha="center", va="center")
    return save(fig, path)


def integer_steps(ax: Any, axis: str = "x") -> None:
    """Steps are whole numbers: no 1.5 tick on a 3-step run."""
    (ax.xaxis if axis == "x" else ax.yaxis).set_major_locator(MaxNLocator(integer=True))


def plotly_integer_steps(fig: Any, steps: Iterable[Any], axis: str = "xaxis") -> Any:
    """Integer ticks on a plotly step axis: every step up to 20 steps, else plotly's choice shown as integers."""
    vals = sorted({int(s) for s in steps if s == s})
    if vals and len(vals) <= 20:
        fig.update_layout({axis: {"tickmode": "array", "tickvals": vals}})
    else:
        fig.update_layout({axis: {"tickformat": "d"}})
    return fig


def plotly_note(fig: Any, text: str) -> Any:
    """A figure with nothing to draw: the report shows ``text`` as one line instead of empty axes
    (``layout.meta.note``, read by :func:`note_of`); opened on its own it is a centred note."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, font={"size": 16})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.update_layout(meta={"note": text}, height=200)
    return fig


def note_of(fig: Any) -> str | None:
    """The note of a :func:`plotly_note` figure, else None."""
    meta = fig.layout.meta
    return meta.get("note") if isinstance(meta, dict) else None


def seconds_from_zero(ax: Any, axis: str = "y") -> None:
    """A seconds axis starts at 0: matplotlib's 5 % margin put -1 s under bars and CDFs that start at 0."""
    if axis == "y":
        ax.set_ylim(bottom=0)
    else:
        ax.set_xlim(left=0)


def plotly_seconds(fig: Any, *axes: str) -> Any:
    """Seconds (and counts) never go below 0 on these plotly axes (``xaxis``, ``yaxis``, ``yaxis2``): autorange
    pads a line that starts at 0 down to -0.5 s otherwise."""
    fig.update_layout({axis: {"rangemode": "nonnegative"} for axis in axes})
    return fig


def handles(keys: Iterable[str]) -> tuple[list[Any], list[str]]:
    """Legend patches and labels of span kinds, from the one mapping (:mod:`otel_verl.analysis.labels`)."""
    from matplotlib.patches import Patch

    from otel_verl.analysis.labels import style

    styles = [style(k) for k in keys]
    return [Patch(facecolor=s.color, hatch=s.hatch, edgecolor="white") for s in styles], [s.label for s in styles]
