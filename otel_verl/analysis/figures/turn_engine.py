"""Engine time per turn index, per step (seed: turn_difference)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.tables.events import events_table

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


def compute_turn_engine(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per (step, turn index): mean and max engine seconds of a turn, and how many turns."""
    ev = tables.events if tables is not None else events_table(spans)
    eng = ev.loc[
        ((ev["kind"] == "engine") & ev["turn_index"].notna()).to_numpy(),
        ["step", "turn_index", "turn_span", "duration"],
    ]
    if eng.empty:
        return pd.DataFrame(columns=["step", "turn_index", "mean_engine_s", "max_engine_s", "turns"])
    per_turn = eng.groupby(["step", "turn_index", "turn_span"], as_index=False)["duration"].sum()
    g = per_turn.groupby(["step", "turn_index"])["duration"]
    return pd.DataFrame({"mean_engine_s": g.mean(), "max_engine_s": g.max(), "turns": g.size()}).reset_index()


def part_turn_engine(tables: Tables) -> pd.DataFrame:
    """One part's frame: the figure is per step (:mod:`.by_part`)."""
    return compute_turn_engine(tables.spans, tables=tables)


def combine_turn_engine(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' frames in step order."""
    return concat_parts(parts)


def plot_turn_engine(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "engine time per turn")
    fig, ax = _style.new()
    for ti, g in df.groupby("turn_index"):
        ax.plot(g["step"], g["mean_engine_s"], marker="o", label=f"turn index {int(ti)}")
    _style.integer_steps(ax)
    ax.set_xlabel("step")
    ax.set_ylabel("mean engine seconds per turn")
    _style.seconds_from_zero(ax)
    ax.set_title("Engine generation time per turn index")
    ax.legend()
    return _style.save(fig, path)


def plotly_turn_engine(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for ti, g in df.groupby("turn_index"):
        fig.add_trace(
            go.Scatter(
                x=g["step"],
                y=g["mean_engine_s"],
                mode="lines+markers",
                name=f"turn index {int(ti)}",
                customdata=g["max_engine_s"],
                hovertemplate="mean %{y:.2f} s, max %{customdata:.2f} s",
            )
        )
    fig.update_layout(
        title="Engine time per turn index", xaxis_title="step", yaxis_title="mean seconds in engine calls per turn"
    )
    _style.plotly_seconds(fig, "yaxis")
    return _style.plotly_integer_steps(fig, df["step"])
