"""Request counts and mean duration by number of turns, per step (seed: turn_distribution, turns_num)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.tables.requests import requests_table

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


def compute_turn_counts(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per (step, num_turns): requests, their fraction of the step and their mean duration."""
    r = tables.requests if tables is not None else requests_table(spans)
    r = r[r["num_turns"].notna() & r["step"].notna()] if len(r) else r
    if r.empty:
        return pd.DataFrame(columns=["step", "num_turns", "requests", "fraction", "mean_duration_s"])
    g = r.groupby(["step", "num_turns"])["duration"]
    df = pd.DataFrame({"requests": g.size(), "mean_duration_s": g.mean()}).reset_index()
    df["fraction"] = df["requests"] / df.groupby("step")["requests"].transform("sum")
    return df


def part_turn_counts(tables: Tables) -> pd.DataFrame:
    """One part's frame: the figure is per step (:mod:`.by_part`)."""
    return compute_turn_counts(tables.spans, tables=tables)


def combine_turn_counts(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' frames in step order."""
    return concat_parts(parts)


def _turns(n: object) -> str:
    return f"{n} turn" if str(n) == "1" else f"{n} turns"


def plot_turn_counts(df: pd.DataFrame, path: str | Path) -> Path:
    """Stacked bars: requests per step by number of turns; lines: their mean duration (seconds)."""
    if df.empty:
        return _style.empty(path, "turn counts")
    fig, (ax1, ax2) = _style.plt.subplots(1, 2, figsize=(13, 4.5))
    steps = sorted(df["step"].unique())
    x = np.arange(len(steps))
    bottom = np.zeros(len(steps))
    cmap = _style.plt.get_cmap("viridis")
    turns = sorted(df["num_turns"].unique())
    for i, nt in enumerate(turns):
        g = df[df["num_turns"] == nt].set_index("step").reindex(steps)
        color = cmap(i / max(1, len(turns) - 1))
        counts = g["requests"].fillna(0).to_numpy(dtype=float)
        ax1.bar(x, counts, bottom=bottom, color=color, label=_turns(nt))
        bottom += counts
        ax2.plot(x, g["mean_duration_s"].to_numpy(dtype=float), marker="o", color=color, label=_turns(nt))
    every = max(1, len(steps) // 15)  # tick labels of 3-digit steps overlap beyond ~15
    for ax in (ax1, ax2):
        ax.set_xticks(x[::every], [str(int(s)) for s in steps[::every]])
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        _style.legend(ax)
    ax1.set_ylabel("requests")
    _style.seconds_from_zero(ax2)
    ax1.set_title("Requests by number of turns")
    ax2.set_ylabel("seconds")
    ax2.set_title("Mean request duration by number of turns")
    return _style.save(fig, path)


def plotly_turn_counts(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for nt, g in df.groupby("num_turns"):
        fig.add_trace(go.Bar(x=g["step"], y=g["requests"], name=f"{_turns(nt)}: requests"))
        fig.add_trace(
            go.Scatter(
                x=g["step"],
                y=g["mean_duration_s"],
                name=f"{_turns(nt)}: mean s",
                mode="lines+markers",
                yaxis="y2",
                hovertemplate="mean %{y:.2f} s",
            )
        )
    fig.update_layout(
        barmode="stack",
        title="Requests (bars) and mean duration (lines) by number of turns",
        xaxis_title="step",
        yaxis={"title": "requests", "rangemode": "nonnegative"},
        yaxis2={
            "title": "mean seconds",
            "overlaying": "y",
            "side": "right",
            "rangemode": "nonnegative",
            "showgrid": False,
            "tickformat": ".1f",
        },
        legend={"x": 1.08},
    )
    return _style.plotly_integer_steps(fig, df["step"])
