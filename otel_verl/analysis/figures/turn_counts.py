"""Request counts and mean duration by number of turns, per step (seed: turn_distribution, turns_num)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from otel_verl.analysis import model
from otel_verl.analysis.figures import _style

if TYPE_CHECKING:
    from otel_verl.analysis.detectors import Tables


def compute_turn_counts(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per (step, num_turns): requests, their fraction of the step and their mean duration."""
    r = tables.requests if tables is not None else model.requests_table(spans)
    r = r[r["num_turns"].notna()]
    if r.empty:
        return pd.DataFrame(columns=["step", "num_turns", "requests", "fraction", "mean_duration_s"])
    g = r.groupby(["step", "num_turns"])["duration"]
    df = pd.DataFrame({"requests": g.size(), "mean_duration_s": g.mean()}).reset_index()
    df["fraction"] = df["requests"] / df.groupby("step")["requests"].transform("sum")
    return df


def plot_turn_counts(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "turn counts")
    fig, (ax1, ax2) = _style.plt.subplots(1, 2, figsize=(12, 4.5))
    for nt, g in df.groupby("num_turns"):
        ax1.plot(g["step"], g["fraction"], marker=".", label=f"{nt} turns")
        ax2.plot(g["step"], g["mean_duration_s"], marker=".", label=f"{nt} turns")
    ax1.set_title("Fraction of requests by number of turns")
    ax2.set_title("Mean request duration by number of turns")
    ax1.set_xlabel("step")
    ax2.set_xlabel("step")
    ax2.set_ylabel("seconds")
    for ax in (ax1, ax2):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    return _style.save(fig, path)


def plotly_turn_counts(df: pd.DataFrame):
    import plotly.graph_objects as go

    fig = go.Figure()
    for nt, g in df.groupby("num_turns"):
        fig.add_trace(
            go.Bar(
                x=g["step"],
                y=g["requests"],
                name=f"{nt} turns",
                customdata=g["mean_duration_s"],
                hovertemplate="%{y} requests, mean %{customdata:.2f} s",
            )
        )
    fig.update_layout(barmode="stack", title="Requests by number of turns (hover: mean duration)", xaxis_title="step")
    return fig
