"""Shared matplotlib setup: headless backend, one look for every PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

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


def empty(path: str | Path, title: str) -> Path:
    """A placeholder PNG saying why a figure has no data (e.g. request spans sampled away)."""
    fig, ax = new((6, 2))
    ax.axis("off")
    ax.text(0.5, 0.5, f"{title}: no data in this trace", ha="center", va="center")
    return save(fig, path)
