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
    """A centred note on an otherwise empty interactive figure (instead of blank axes)."""
    fig.add_annotation(text=text, xref="paper", yref="paper", x=0.5, y=0.5, showarrow=False, font={"size": 16})
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig
