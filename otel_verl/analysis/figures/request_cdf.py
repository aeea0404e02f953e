"""Per-step CDF of request completion time (seed: '80% of requests finish in the first 40% of the time')."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.tables.requests import requests_table

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


MAX_CDF_POINTS = 400
"""Ranks kept per step (a real run has thousands of requests a step, a hundred steps and more: the frame would
grow with the run, and neither the figure nor a reader's hover needs more; issue 31)."""


def compute_request_cdf(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per step, its requests' completion times since the rollout start, ranked (:func:`part_request_cdf`)."""
    r = tables.requests if tables is not None else requests_table(spans)
    return combine_request_cdf([_ranked(_rows(r))])


def part_request_cdf(tables: Tables) -> pd.DataFrame:
    """One part's steps, each ranked and thinned (a step's requests are never split between parts)."""
    return _ranked(_rows(tables.requests))


def combine_request_cdf(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' steps in step order."""
    return concat_parts(parts).sort_values(["step", "rank"], kind="stable").reset_index(drop=True)


def _rows(r: pd.DataFrame) -> pd.DataFrame:
    return r[["step", "worker", "request_id", "request_status", "rel_end_s"]].rename(columns={"rel_end_s": "t_rel_s"})


def _ranked(df: pd.DataFrame) -> pd.DataFrame:
    """Each step's requests sorted by completion: ``rank`` (0 = first done), ``n`` (the step's requests), ``frac``
    (the fraction done), ``t_norm`` (of the step's last); thinned to :func:`thin_ranks` of each step."""
    df = df[df["step"].notna()].sort_values(["step", "t_rel_s"], kind="stable").reset_index(drop=True)
    g = df.groupby("step", sort=False)["t_rel_s"]
    df["rank"] = df.groupby("step", sort=False).cumcount()
    df["n"] = g.transform("size")
    df["frac"] = (df["rank"] + 1) / df["n"]
    df["t_norm"] = df["t_rel_s"] / g.transform("max")
    keep = [start + thin_ranks(n) for start, n in zip(*_step_runs(df), strict=True)]
    return df.iloc[np.concatenate(keep)].reset_index(drop=True) if keep else df


def _step_runs(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """First row and length of each step's run of rows in ``df`` (sorted by step)."""
    step = df["step"].to_numpy()
    if not len(step):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
    return starts, np.diff(np.r_[starts, len(step)])


def thin_ranks(n: int, limit: int = MAX_CDF_POINTS, quantiles: Sequence[float] = _style.QUANTILES) -> np.ndarray:
    """The ranks of ``n`` sorted values a CDF keeps: all when ``n ≤ limit``; else ``limit`` evenly spaced ranks
    with the slowest 1 % whole (at most a quarter of them: the tail is what a reader hovers over), plus the two
    order statistics each quantile interpolates between, so its dot is the exact quantile of every value."""
    if n <= limit:
        return np.arange(n)
    tail = min(max(1, n // 100), limit // 4)
    even = np.linspace(0, n - tail - 1, limit - tail).round().astype(np.int64)
    h = (n - 1) * np.asarray(quantiles, dtype=float)
    return np.unique(np.r_[even, np.arange(n - tail, n), np.floor(h), np.ceil(h)].astype(np.int64))


def cdf_quantiles(df: pd.DataFrame, quantiles: tuple[float, ...] = _style.QUANTILES) -> pd.DataFrame:
    """Per step: seconds by which P50/80/90/95/99/99.9 of requests had completed (numpy's linear quantile of
    every request, from the order statistics :func:`thin_ranks` kept)."""
    rows = []
    for s, g in df.groupby("step"):
        t = pd.Series(g["t_rel_s"].to_numpy(dtype=float), index=g["rank"].to_numpy())
        n = int(g["n"].iat[0])
        row = {"step": s}
        for q in quantiles:
            h = (n - 1) * q
            lo, hi = int(np.floor(h)), int(np.ceil(h))
            row[f"p{q * 100:g}"] = float(t[lo] + (h - lo) * (t[hi] - t[lo]))
        rows.append(row)
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


def plotly_request_cdf(df: pd.DataFrame):  # -> plotly Figure
    import plotly.graph_objects as go

    fig = go.Figure()
    q = cdf_quantiles(df).set_index("step") if len(df) else None
    for s, g in df.groupby("step"):
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
