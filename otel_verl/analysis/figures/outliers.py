"""Outlier requests (beyond the step's P99) broken into turns and events: what made them slow."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from otel_verl.analysis import model
from otel_verl.analysis.figures import _style

if TYPE_CHECKING:
    from otel_verl.analysis.detectors import Tables


def compute_outliers(
    spans: pd.DataFrame, quantile: float = 0.99, max_requests: int = 8, tables: Tables | None = None
) -> pd.DataFrame:
    """One row per event of the slowest requests above each step's ``quantile`` (at most ``max_requests`` overall)."""
    r = tables.requests if tables is not None else model.requests_table(spans)
    if r.empty:
        return pd.DataFrame(
            columns=["request_id", "step", "worker", "turn_index", "event", "start_rel_s", "duration_s"]
        )
    q = r.groupby("step")["duration"].transform(lambda s: s.quantile(quantile))
    top = r[r["duration"] > q].nlargest(max_requests, "duration")
    ev = tables.events if tables is not None else model.events_table(spans)
    ev = ev[ev["request_span"].isin(top["request_row"]).to_numpy()]
    start = ev["request_span"].map(top.set_index("request_row")["start_ns"])
    out = pd.DataFrame(
        {
            "request_id": ev["request_span"].map(top.set_index("request_row")["request_id"]),
            "step": ev["step"],
            "worker": ev["worker"],
            "turn_index": ev["turn_index"],
            "event": ev["event"],
            "start_rel_s": (ev["start_ns"] - start) / 1e9,
            "duration_s": ev["duration"],
            "request_duration_s": ev["request_span"].map(top.set_index("request_row")["duration"]),
        }
    )
    return out.sort_values(["request_duration_s", "start_rel_s"], ascending=[False, True]).reset_index(drop=True)


def plot_outliers(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "outlier requests")
    reqs = list(dict.fromkeys(df["request_id"]))
    events = sorted(df["event"].unique())
    cmap = _style.plt.get_cmap("tab10")
    colors = {e: cmap(i % 10) for i, e in enumerate(events)}
    fig, ax = _style.new((10, 1 + 0.6 * len(reqs)))
    for i, rid in enumerate(reqs):
        g = df[df["request_id"] == rid]
        for _, row in g.iterrows():
            ax.barh(
                i, row["duration_s"], left=row["start_rel_s"], color=colors[row["event"]], edgecolor="black", lw=0.3
            )
            if row["duration_s"] > 0.1 * g["request_duration_s"].iloc[0] and pd.notna(row["turn_index"]):
                ax.text(
                    row["start_rel_s"] + row["duration_s"] / 2,
                    i,
                    f"turn {int(row['turn_index']) + 1}",
                    ha="center",
                    va="center",
                    fontsize=7,
                )
    ax.set_yticks(range(len(reqs)), [f"{r} (step {df[df['request_id'] == r]['step'].iloc[0]})" for r in reqs])
    ax.invert_yaxis()
    handles = [_style.plt.Rectangle((0, 0), 1, 1, color=colors[e]) for e in events]
    ax.legend(handles, events, fontsize=7, loc="lower right")
    ax.set_xlabel("seconds since request start")
    ax.set_title("Outlier requests broken into events")
    return _style.save(fig, path)


def plotly_outliers(df: pd.DataFrame):
    import plotly.graph_objects as go

    fig = go.Figure()
    for e, g in df.groupby("event"):
        fig.add_trace(
            go.Bar(
                y=g["request_id"],
                x=g["duration_s"],
                base=g["start_rel_s"],
                orientation="h",
                name=e,
                text=g["turn_index"].map(lambda t: "" if pd.isna(t) else f"turn {int(t) + 1}"),
                hovertemplate="%{y}<br>" + e + " %{text}<br>%{x:.2f} s",
            )
        )
    fig.update_layout(
        barmode="overlay",
        title="Outlier requests broken into events",
        xaxis_title="seconds since request start",
        yaxis={"autorange": "reversed"},
    )
    return fig
