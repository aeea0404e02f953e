"""Per-worker phase bars per step: each worker's step split into its main events and the barrier wait
(the seed's worker_0 / worker_1 bars: which worker computed, which one waited, and on what)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.labels import color, hatch, readable

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

PHASES = ("engine", "tool", "reward", "preprocess", "other", "idle", "barrier")
"""Stack order; ``other`` gathers tool parsing, unknown spans, request time without an event span and
worker-level events after the barrier (the seed's broadcast)."""


def _phase(label: str) -> str:
    if label.startswith("tool "):
        return "tool"
    return label if label in PHASES else "other"


def compute_worker_phases(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per (step, worker): seconds in each of :data:`PHASES`, plus rollout window, barrier and start offset."""
    from otel_verl.analysis.tables import Tables

    t = tables if tables is not None else Tables.build(spans)
    w, s = t.workers, t.steps.set_index("step")
    cols = ["step", "worker", "num_requests", "start_offset_s", "rollout_s", "barrier_s", *PHASES]
    if w.empty:
        return pd.DataFrame(columns=cols)
    df = pd.DataFrame({"step": w["step"], "worker": w["worker"], "num_requests": w["num_requests"]})
    df["start_offset_s"] = (w["start_ns"] - w["step"].map(s["rollout_start_ns"]).astype(float)) / 1e9
    df["rollout_s"] = w["duration"]
    df["barrier_s"] = w["barrier_s"].fillna((w.groupby("step")["end_ns"].transform("max") - w["end_ns"]) / 1e9)
    ws = t.worker_seconds
    if len(ws):
        wide = (
            ws.assign(phase=ws["event"].map(_phase))
            .pivot_table(index=["step", "worker"], columns="phase", values="seconds", aggfunc="sum")
            .reindex(columns=list(PHASES))
        )
        keys = pd.MultiIndex.from_arrays([df["step"], df["worker"]])
        for p in PHASES:
            df[p] = wide[p].reindex(keys).to_numpy(dtype=float)
    else:
        for p in PHASES:
            df[p] = np.nan
    # no bucket data (request spans sampled away): the window is rollout, the barrier stays the barrier
    missing = df[list(PHASES)].isna().all(axis=1)
    df.loc[missing, "other"] = df.loc[missing, "rollout_s"]
    df.loc[missing, "barrier"] = df.loc[missing, "barrier_s"]
    df[list(PHASES)] = df[list(PHASES)].fillna(0.0)
    return df[cols]


def part_worker_phases(tables: Tables) -> pd.DataFrame:
    """One part's frame: the figure is per step (:mod:`.by_part`)."""
    return compute_worker_phases(tables.spans, tables=tables)


def combine_worker_phases(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' frames in step order."""
    return concat_parts(parts)


def plot_worker_phases(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "worker phases")
    steps = sorted(df["step"].unique())
    workers = sorted(df["worker"].unique())
    # width grows with the bars but is capped: 100 steps x 8 workers made a 15,000-pixel PNG (30 s to draw)
    fig, ax = _style.new((min(24, max(9, 0.35 * len(steps) * len(workers) / 2)), 5))
    # thousands of bar patches took most of a 2M-span analysis: past 300 stacked segments, each phase of each
    # worker is one line collection as wide as its bar slot
    many = len(steps) * len(workers) * len(PHASES) > 300
    width = 0.8 / max(1, len(workers))
    lw = 0.8 * 72 * fig.get_figwidth() * width / max(1, len(steps))
    for j, w in enumerate(workers):
        g = df[df["worker"] == w].set_index("step").reindex(steps)
        x = np.arange(len(steps)) + j * width
        bottom = np.zeros(len(steps))
        for p in PHASES:
            h = g[p].to_numpy(dtype=float)
            h = np.where(np.isnan(h), 0.0, h)
            label = readable(p) if j == 0 else None
            if many:
                ax.vlines(x, bottom, bottom + h, colors=color(p), lw=lw, label=label)
            else:
                ax.bar(
                    x,
                    h,
                    width,
                    bottom=bottom,
                    color=color(p),
                    hatch=hatch(p) or None,
                    edgecolor="white",
                    lw=0.3,
                    label=label,
                )
            bottom += h
        if len(steps) * len(workers) <= 48:  # worker labels on the bars only while they stay readable
            for xi, top in zip(x, bottom, strict=True):
                ax.text(xi, top, f"w{w}", ha="center", va="bottom", fontsize=6)
    every = max(1, len(steps) // 40)  # at most ~40 tick labels
    ticks = np.arange(len(steps))[::every]
    ax.set_xticks(ticks + 0.4 - width / 2, [str(int(steps[i])) for i in ticks])
    ax.set_xlabel("step (one bar per worker)")
    ax.set_ylabel("seconds")
    _style.seconds_from_zero(ax)
    ax.set_title("Each worker's step by what its requests were doing, then its barrier wait (hatched)")
    _style.legend(ax)
    return _style.save(fig, path)


def plotly_worker_phases(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    x = [df["step"].astype(int).astype(str), "w" + df["worker"].astype(int).astype(str)]
    for p in PHASES:
        fig.add_trace(
            go.Bar(
                x=x,
                y=df[p],
                name=readable(p),
                marker_color=color(p),
                marker_pattern_shape="/" if hatch(p) else "",
                customdata=df[["step", "worker"]].to_numpy(),
                hovertemplate=f"{readable(p)}: %{{y:.2f}} s<extra>step %{{customdata[0]}}, "
                "worker %{customdata[1]}</extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        title="Each worker's step by what its requests were doing, then its barrier wait",
        yaxis_title="seconds",
        xaxis_title="step, then worker (w0 = worker 0)",
    )
    return _style.plotly_seconds(fig, "yaxis")
