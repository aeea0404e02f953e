"""Per-worker bars per step: rollout time and barrier wait (the seed's worker_0/worker_1 view)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from otel_verl.analysis import model
from otel_verl.analysis.figures import _style

if TYPE_CHECKING:
    from otel_verl.analysis.detectors import Tables


def compute_worker_phases(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per (step, worker): seconds from rollout start to first request, rollout, barrier wait."""
    w = tables.workers if tables is not None else model.workers_table(spans)
    s = (tables.steps if tables is not None else model.steps_table(spans)).set_index("step")
    df = pd.DataFrame({"step": w["step"], "worker": w["worker"], "num_requests": w["num_requests"]})
    df["start_offset_s"] = (w["start_ns"] - w["step"].map(s["rollout_start_ns"]).astype(float)) / 1e9
    df["rollout_s"] = w["duration"]
    df["barrier_s"] = w["barrier_s"].fillna((w.groupby("step")["end_ns"].transform("max") - w["end_ns"]) / 1e9)
    return df


def plot_worker_phases(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "worker phases")
    steps = sorted(df["step"].unique())
    workers = sorted(df["worker"].unique())
    # width grows with the bars but is capped: 100 steps x 8 workers made a 15,000-pixel PNG (30 s to draw)
    fig, ax = _style.new((min(24, max(9, 0.35 * len(steps) * len(workers) / 2)), 5))
    # hundreds of bar patches (hatched) took most of a 2M-span analysis: past 400 bars, each worker's bars
    # are one line collection instead, as wide as a bar slot
    many = len(steps) * len(workers) > 400
    width = 0.8 / max(1, len(workers))
    lw = 0.8 * 72 * fig.get_figwidth() * width / max(1, len(steps))
    cmap = _style.plt.get_cmap("tab10")
    for j, w in enumerate(workers):
        g = df[df["worker"] == w].set_index("step").reindex(steps)
        x = np.arange(len(steps)) + j * width
        roll, wait = g["rollout_s"].to_numpy(dtype=float), g["barrier_s"].to_numpy(dtype=float)
        if many:
            ax.vlines(x, 0, roll, colors=[cmap(j % 10)], lw=lw, label=f"worker {w} rollout")
            ax.vlines(x, roll, roll + wait, colors="lightgrey", lw=lw, label="barrier wait" if j == 0 else None)
            continue
        ax.bar(x, roll, width, color=cmap(j % 10), label=f"worker {w} rollout")
        ax.bar(x, wait, width, bottom=roll, color="lightgrey", hatch="//", label="barrier wait" if j == 0 else None)
    every = max(1, len(steps) // 40)  # at most ~40 tick labels
    ticks = np.arange(len(steps))[::every]
    ax.set_xticks(ticks + 0.4 - width / 2, [str(steps[i]) for i in ticks])
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    ax.set_title("Per-worker rollout time (color) and barrier wait (grey) per step")
    if len(workers) <= 16:
        ax.legend(fontsize=7, ncol=2)
    return _style.save(fig, path)


def plotly_worker_phases(df: pd.DataFrame):
    import plotly.graph_objects as go

    fig = go.Figure()
    x = [df["step"].astype(str), "w" + df["worker"].astype(str)]
    fig.add_trace(go.Bar(x=x, y=df["rollout_s"], name="rollout"))
    fig.add_trace(go.Bar(x=x, y=df["barrier_s"], name="barrier wait", marker_color="lightgrey"))
    fig.update_layout(barmode="stack", title="Per-worker rollout and barrier wait per step", yaxis_title="seconds")
    return fig
