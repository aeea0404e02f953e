"""Per-step CDF of request completion time (seed: '80% of requests finish in the first 40% of the time')."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.parts import concat_parts
from otel_verl.analysis.tables.requests import requests_table

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


def compute_request_cdf(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """One row per request: completion time since its step's rollout start, and its rank fraction in the step."""
    r = tables.requests if tables is not None else requests_table(spans)
    return combine_request_cdf([_rows(r)])


def part_request_cdf(tables: Tables) -> pd.DataFrame:
    """One part's requests (:mod:`.parts`)."""
    return _rows(tables.requests)


def combine_request_cdf(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' requests sorted by step and completion time, ranked within their step."""
    df = concat_parts(parts).sort_values(["step", "t_rel_s"]).reset_index(drop=True)
    n = df.groupby("step")["t_rel_s"].transform("size")
    df["frac"] = (df.groupby("step").cumcount() + 1) / n
    df["t_norm"] = df["t_rel_s"] / df.groupby("step")["t_rel_s"].transform("max")
    return df


def _rows(r: pd.DataFrame) -> pd.DataFrame:
    return r[["step", "worker", "request_id", "request_status", "rel_end_s"]].rename(columns={"rel_end_s": "t_rel_s"})


def cdf_quantiles(df: pd.DataFrame, quantiles: tuple[float, ...] = _style.QUANTILES) -> pd.DataFrame:
    """Per step: seconds by which P50/80/90/95/99/99.9 of requests had completed."""
    rows = [
        {"step": s, **{f"p{q * 100:g}": float(np.quantile(g["t_rel_s"], q)) for q in quantiles}}
        for s, g in df.groupby("step")
    ]
    return pd.DataFrame(rows)


def plot_request_cdf(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "request completion CDF")
    fig, ax = _style.new()
    steps = sorted(df["step"].unique())
    cmap = _style.plt.get_cmap("viridis")
    q = cdf_quantiles(df).set_index("step")
    for i, s in enumerate(steps):
        g = df[df["step"] == s]
        ax.plot(g["t_rel_s"], g["frac"], color=cmap(i / max(1, len(steps) - 1)), lw=1, label=f"step {s}")
        ax.scatter(q.loc[s].to_numpy(), list(_style.QUANTILES), color=cmap(i / max(1, len(steps) - 1)), s=10)
    ax.set_xlabel("seconds since rollout start")
    ax.set_ylabel("fraction of requests completed")
    _style.seconds_from_zero(ax, "x")
    _style.seconds_from_zero(ax, "y")
    ax.set_title("Request completion CDF per step (dots: P50/80/90/95/99/99.9)")
    if len(steps) <= 12:
        _style.legend(ax)
    return _style.save(fig, path)


MAX_CDF_POINTS = 400
"""Points per step in the HTML report's CDF (a 2M-span run has ~1,800 requests per step, 100 steps)."""


def downsample_cdf(g: pd.DataFrame, limit: int = MAX_CDF_POINTS) -> pd.DataFrame:
    """At most ``limit`` rows of one step's sorted CDF: evenly spaced ranks, plus the slowest 1% (at most a
    quarter of the budget; the tail is what a reader hovers over). The PNG and quantile dots use every request."""
    n = len(g)
    if n <= limit:
        return g
    tail = min(max(1, n // 100), limit // 4)
    keep = np.unique(np.r_[np.linspace(0, n - tail - 1, limit - tail).round().astype(int), np.arange(n - tail, n)])
    return g.iloc[keep]


def plotly_request_cdf(df: pd.DataFrame):  # -> plotly Figure
    import plotly.graph_objects as go

    fig = go.Figure()
    q = cdf_quantiles(df).set_index("step") if len(df) else None
    for s, g in df.groupby("step"):
        g = downsample_cdf(g)
        fig.add_trace(
            go.Scattergl(
                x=g["t_rel_s"],
                y=g["frac"],
                mode="lines",
                name=f"step {s}",
                text=g["request_id"],
                hovertemplate="%{text}<br>%{x:.2f} s<br>%{y:.3f}",
            )
        )
        fig.add_trace(
            go.Scatter(
                x=q.loc[s].to_numpy(),
                y=list(_style.QUANTILES),
                mode="markers",
                name=f"step {s} quantiles",
                showlegend=False,
                text=[f"P{x * 100:g}" for x in _style.QUANTILES],
                hovertemplate="step " + str(s) + " %{text}: %{x:.2f} s",
            )
        )
    fig.update_layout(
        title="Request completion CDF per step",
        xaxis_title="seconds since rollout start",
        yaxis_title="fraction completed",
    )
    return _style.plotly_seconds(fig, "xaxis", "yaxis")
