"""Aborted / over-sampled requests per step: count, tokens and seconds wasted (seed 002)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.labels import color

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

NONE = "no aborted requests"


def compute_aborted(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per step: requests, aborted, tokens_wasted, seconds_wasted, waste_fraction."""
    from otel_verl.analysis.tables import Tables
    from otel_verl.analysis.tables.aborted import aborted_per_step

    return aborted_per_step(tables if tables is not None else Tables.build(spans))


def part_aborted(tables: Tables) -> pd.DataFrame:
    """One part's frame: the figure is per step (:mod:`.by_part`)."""
    return compute_aborted(tables.spans, tables=tables)


def combine_aborted(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' frames in step order."""
    return concat_parts(parts)


def plot_aborted(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "aborted requests")
    if not (df["aborted"] > 0).any():
        return _style.empty(path, "aborted / over-sampled requests", f"{NONE} in {len(df)} steps")
    fig, axes = _style.plt.subplots(1, 3, figsize=(13, 4))
    for ax, col, title in zip(
        axes,
        ("aborted", "tokens_wasted", "seconds_wasted"),
        ("aborted requests", "tokens wasted", "request-seconds wasted"),
        strict=True,
    ):
        ax.bar(df["step"], df[col], color="indianred", label=title)
        if col == "seconds_wasted" and "engine_seconds_wasted" in df:
            ax.bar(
                df["step"], df["engine_seconds_wasted"], color=color("engine"), width=0.5, label="of it in engine calls"
            )
            ax.legend(fontsize=7)
        ax.set_title(title)
        ax.set_xlabel("step")
        _style.integer_steps(ax)
        _style.seconds_from_zero(ax)
        ax.grid(alpha=0.3)
    return _style.save(fig, path)


def plotly_aborted(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    if not (df["aborted"] > 0).any():
        return _style.plotly_note(fig, f"{NONE} in {len(df)} steps")
    fig.add_trace(
        go.Bar(
            x=df["step"],
            y=df["aborted"],
            name="aborted requests",
            customdata=df[["tokens_wasted", "seconds_wasted"]].to_numpy(),
            hovertemplate="%{y} aborted<br>%{customdata[0]} tokens<br>%{customdata[1]:.1f} s",
        )
    )
    fig.update_layout(
        title="Aborted / over-sampled requests per step", xaxis_title="step", yaxis_title="aborted requests"
    )
    _style.plotly_seconds(fig, "yaxis")
    return _style.plotly_integer_steps(fig, df["step"])
