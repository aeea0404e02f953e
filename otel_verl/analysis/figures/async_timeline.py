"""Who waited for whom: the trainer's timeline above the rollout's, for verl's asynchronous V1 trainers.

Top lane, the trainer: waiting for samples (each inner update's ``gen``), training (the update's other phases),
weight syncs. Below, one lane per rollout replica: working (a sample in flight, not paused), generating (an engine
call in flight, drawn thinner over it) and paused
(weight syncs; in colocate_async also asleep while the trainer trains); blank is idle. The same clock for both, in
seconds since the first step started, with a line at each step's start (:mod:`otel_verl.analysis.tables.async_sides`).

Each row carries its ``step`` (a rollout interval: the step whose window it starts in) and absolute ns times, so
frames of parts of a run concatenate into the whole run's frame. Sync trainers: an empty frame (no figure).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.labels import color, hatch, phase_key, readable
from otel_verl.analysis.tables.async_sides import (
    BUSY,
    GENERATING,
    TRAIN,
    WAIT,
    WEIGHT_SYNC,
    async_steps,
    pause_windows,
    rollout_lanes,
    trainer_lane,
)

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

COLUMNS = ["lane", "row", "key", "step", "start_ns", "end_ns", "step_start_ns"]
TRAINER = "trainer"
ROLLOUT = "rollout"
KEYS = {
    WAIT: "trainer_wait",
    TRAIN: "trainer_train",
    WEIGHT_SYNC: "weight_sync",
    BUSY: "rollout_busy",
    GENERATING: "rollout_generating",
}
THIN = ("rollout_generating",)
"""Drawn thinner, over the samples in flight."""
PAUSED_KEY = "rollout_paused"
MAX_STEPS = 40
"""The figure draws the first this many asynchronous steps (a longer run's lanes would be a blur)."""
NONE = "not an asynchronous trainer (no verl.step with verl.trainer.mode colocate_async / separate_async)"
TITLE = "Who waited for whom: the trainer (top) and each rollout replica (below)"


def part_async_timeline(t: Tables) -> pd.DataFrame:
    """One part of a run's rows (:mod:`.by_part`): absolute times, so the parts' rows concatenate. A part's rollout
    lanes see only its own spans: samples a step dispatched that run on into the next part are drawn from both."""
    return compute_async_timeline(t.spans, t)


def compute_async_timeline(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """One row per interval: ``lane`` (trainer / rollout), ``row`` (``trainer``, ``replica <name>``), ``key`` (the
    label mapping's), ``step``, ``start_ns``/``end_ns``, and ``step_start_ns`` (its step's start)."""
    from otel_verl.analysis.tables import Tables

    t = tables if tables is not None else Tables.build(spans)
    steps = async_steps(t)
    if steps.empty:
        return pd.DataFrame(columns=COLUMNS)
    lane = trainer_lane(t, steps)
    paused = pause_windows(t, steps, lane)
    rollout = rollout_lanes(t, paused)
    lo, hi = int(steps["start_ns"].min()), int(steps["end_ns"].max())
    starts = steps["start_ns"].to_numpy(dtype=np.int64)
    trainer = pd.DataFrame(
        {
            "lane": TRAINER,
            "row": TRAINER,
            "key": [KEYS.get(w, phase_key(str(w))) for w in lane["what"]],
            "start_ns": lane["start_ns"].to_numpy(dtype=np.int64),
            "end_ns": lane["end_ns"].to_numpy(dtype=np.int64),
        }
    )
    roll = pd.DataFrame(
        {
            "lane": ROLLOUT,
            "row": [f"replica {r}" for r in rollout["replica"]],
            "key": [KEYS.get(w, PAUSED_KEY) for w in rollout["what"]],
            "start_ns": np.clip(rollout["start_ns"].to_numpy(dtype=np.int64), lo, hi),
            "end_ns": np.clip(rollout["end_ns"].to_numpy(dtype=np.int64), lo, hi),
        }
    )
    out = pd.concat([trainer, roll], ignore_index=True)
    out = out[(out["end_ns"] > out["start_ns"]) & (out["end_ns"] > lo) & (out["start_ns"] < hi)]
    i = np.clip(np.searchsorted(starts, out["start_ns"].to_numpy(), side="right") - 1, 0, len(starts) - 1)
    out = out.assign(step=steps["step"].to_numpy()[i], step_start_ns=starts[i])
    return out[COLUMNS].sort_values(["lane", "row", "start_ns"], ascending=[False, True, True]).reset_index(drop=True)


def _shown(df: pd.DataFrame) -> tuple[pd.DataFrame, int, list[str]]:
    """The first :data:`MAX_STEPS` steps, the clock's zero, and the rows top to bottom."""
    first = sorted(df["step"].unique())[:MAX_STEPS]
    df = df[df["step"].isin(first)]
    zero = int(df["step_start_ns"].min())
    rows = [TRAINER, *sorted(r for r in df["row"].unique() if r != TRAINER)]
    return df, zero, rows


def plot_async_timeline(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "who waited for whom", NONE)
    import matplotlib.pyplot as plt

    df, zero, rows = _shown(df)
    replicas = len(rows) - 1
    fig, (top, bottom) = plt.subplots(
        2, 1, sharex=True, figsize=(12, 2.2 + 0.5 * replicas), gridspec_kw={"height_ratios": [1, max(1, replicas)]}
    )
    for ax, lane_rows in ((top, rows[:1]), (bottom, rows[1:])):
        for y, row in enumerate(lane_rows):
            for key, g in sorted(df[df["row"] == row].groupby("key"), key=lambda kv: kv[0] in THIN):
                s = (g["start_ns"].to_numpy() - zero) / 1e9
                w = (g["end_ns"].to_numpy() - g["start_ns"].to_numpy()) / 1e9
                half = 0.2 if key in THIN else 0.4
                ax.broken_barh(
                    list(zip(s, w, strict=True)),
                    (y - half, 2 * half),
                    facecolors=color(key),
                    hatch=hatch(key) or None,
                    edgecolor="white",
                    lw=0.2,
                )
        ax.set_yticks(range(len(lane_rows)), lane_rows)
        ax.invert_yaxis()
        for s in (np.unique(df["step_start_ns"].to_numpy()) - zero) / 1e9:
            ax.axvline(s, color="#555", lw=0.6, ls=":")
    bottom.set_xlabel("seconds since the first step started (dotted: each step's start)")
    _style.seconds_from_zero(bottom, "x")
    top.set_title(TITLE)
    keys = list(dict.fromkeys(df.sort_values("lane", ascending=False)["key"]))
    _style.legend(top, *_style.handles(keys))
    return _style.save(fig, path)


def plotly_async_timeline(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    if df.empty:
        return _style.plotly_note(go.Figure(), NONE)
    df, zero, rows = _shown(df)
    fig = make_subplots(
        rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.06, row_heights=[0.25, 0.75], subplot_titles=None
    )
    groups = sorted(df.groupby(["lane", "key"], sort=False), key=lambda kv: kv[0][1] in THIN)
    for (lane, key), g in groups:
        start = (g["start_ns"].to_numpy() - zero) / 1e9
        width = (g["end_ns"].to_numpy() - g["start_ns"].to_numpy()) / 1e9
        fig.add_trace(
            go.Bar(
                x=width,
                base=start,
                y=g["row"],
                orientation="h",
                width=0.35 if key in THIN else 0.7,
                name=readable(key),
                legendgroup=key,
                marker={"color": color(key), "pattern": {"shape": "/" if hatch(key) else ""}},
                customdata=np.c_[g["step"].to_numpy(), start + width],
                hovertemplate=f"{readable(key)}: %{{base:.2f}}–%{{customdata[1]:.2f}} s (%{{x:.2f}} s)"
                "<extra>step %{customdata[0]}</extra>",
            ),
            row=1 if lane == TRAINER else 2,
            col=1,
        )
    for s in (np.unique(df["step_start_ns"].to_numpy()) - zero) / 1e9:
        fig.add_vline(x=float(s), line={"color": "#555", "width": 1, "dash": "dot"})
    fig.update_yaxes(categoryorder="array", categoryarray=rows[:1], row=1, col=1)
    fig.update_yaxes(categoryorder="array", categoryarray=rows[:0:-1], row=2, col=1)
    fig.update_layout(
        title=TITLE, barmode="overlay", bargap=0.3, height=260 + 40 * len(rows), legend={"traceorder": "normal"}
    )
    fig.update_xaxes(title_text="seconds since the first step started (dotted: each step's start)", row=2, col=1)
    return _style.plotly_seconds(fig, "xaxis2")
