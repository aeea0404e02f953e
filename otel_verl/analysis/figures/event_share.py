"""Average % of step time per event, barrier wait included (the seed's 74% generate / 19% preprocess table).

Each worker's step is split into event buckets by :mod:`otel_verl.analysis.tables.worker_seconds` (concurrent requests
counted once per instant, worker-level events for logs without request spans, barrier wait and
post-barrier events); the seconds are summed over workers, so shares add up to 100% per step.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.labels import color, readable

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

COLUMNS = ["step", "event", "seconds", "percent"]


def compute_event_share(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per (step, event bucket): seconds summed over workers and % of the workers' step time."""
    from otel_verl.analysis.tables import Tables

    t = tables if tables is not None else Tables.build(spans)
    df = t.worker_seconds
    if df.empty:
        return pd.DataFrame(columns=COLUMNS)
    per = df.groupby(["step", "event"], as_index=False)["seconds"].sum()
    total = per.groupby("step")["seconds"].transform("sum")
    per["percent"] = 100 * per["seconds"] / total.where(total > 0)
    return per[COLUMNS]


def part_event_share(tables: Tables) -> pd.DataFrame:
    """One part's frame: the figure is per step (:mod:`.by_part`)."""
    return compute_event_share(tables.spans, tables=tables)


def combine_event_share(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' frames in step order."""
    return concat_parts(parts)


def event_share_table(df: pd.DataFrame) -> pd.DataFrame:
    """Average % of step time per event over all steps, largest first (the seed's table).

    A step without an event counts as 0% for it, so the averages still add up to 100%.
    """
    if df.empty:
        return pd.DataFrame(columns=["event", "avg_percent"])
    wide = df.pivot_table(index="step", columns="event", values="percent", aggfunc="sum").fillna(0.0)
    t = wide.mean().rename("avg_percent").rename_axis("event").reset_index()
    return t.sort_values("avg_percent", ascending=False).reset_index(drop=True)


def plot_event_share(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "event share")
    fig, (ax1, ax2) = _style.plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 2]})
    t = event_share_table(df)
    ax1.axis("off")
    ax1.table(
        cellText=[[readable(e), f"{p:.2f}%"] for e, p in zip(t["event"], t["avg_percent"], strict=True)],
        cellColours=[[color(e), "white"] for e in t["event"]] or None,
        colLabels=["what the workers did", "average % of step time"],
        loc="center",
    )
    for e, g in df.groupby("event"):
        ax2.plot(g["step"], g["percent"], marker=".", label=readable(e), color=color(e))
    _style.integer_steps(ax2)
    _style.seconds_from_zero(ax2)
    ax2.set_xlabel("step")
    ax2.set_ylabel("% of the workers' step time")
    ax2.grid(alpha=0.3)
    _style.legend(ax2)
    fig.suptitle("Share of the workers' step time per kind of work (barrier wait included)")
    return _style.save(fig, path)


def plotly_event_share(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for e, g in df.groupby("event"):
        fig.add_trace(
            go.Scatter(
                x=g["step"],
                y=g["percent"],
                mode="lines+markers",
                name=readable(e),
                line_color=color(e),
                customdata=g["seconds"],
                hovertemplate=f"{readable(e)}: %{{y:.1f}} % (%{{customdata:.1f}} worker-seconds)"
                "<extra>step %{x}</extra>",
            )
        )
    fig.update_layout(
        title="Share of the workers' step time per kind of work, per step",
        xaxis_title="step",
        yaxis_title="% of the workers' step time",
    )
    _style.plotly_seconds(fig, "yaxis")
    return _style.plotly_integer_steps(fig, df["step"])
