"""Step duration vs interval between step starts, with outliers (robust z-score of rollout time)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.tables.baseline import robust_baseline
from otel_verl.analysis.tables.steps import steps_table

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


COLUMNS = ["step", "start_s", "duration_s", "rollout_s", "interval_s", "robust_z", "outlier"]


def compute_step_timing(spans: pd.DataFrame, k: float = 5.0, tables: Tables | None = None) -> pd.DataFrame:
    """Per step: duration, rollout time, interval to the next step start and an ``outlier`` flag."""
    s = tables.steps if tables is not None else steps_table(spans)
    return combine_step_timing([_rows(s)], k)


def part_step_timing(tables: Tables) -> pd.DataFrame:
    """One part's steps: start, duration, rollout (:mod:`.by_part`)."""
    return _rows(tables.steps)


def combine_step_timing(parts: Sequence[pd.DataFrame], k: float = 5.0) -> pd.DataFrame:
    """Starts relative to the run's first, intervals to the next step and the robust z over every step."""
    s = concat_parts(parts)
    if s.empty:
        return pd.DataFrame(columns=COLUMNS)
    df = pd.DataFrame(
        {
            "step": s["step"],
            "start_s": (s["start_ns"] - s["start_ns"].min()) / 1e9,
            "duration_s": s["duration"],
            "rollout_s": s["rollout_s"],
        }
    )
    df["interval_s"] = df["start_s"].shift(-1) - df["start_s"]
    med, mad = robust_baseline(df["rollout_s"].to_numpy(), floor=0.05 * float(np.nanmedian(df["rollout_s"])))
    df["robust_z"] = (df["rollout_s"] - med) / mad if mad > 0 else 0.0
    df["outlier"] = df["robust_z"] > k
    return df


def _rows(s: pd.DataFrame) -> pd.DataFrame:
    return s[["step", "start_ns", "duration", "rollout_s"]]


def plot_step_timing(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "step timing")
    fig, ax = _style.new()
    ax.plot(df["step"], df["duration_s"], marker="o", label="step duration")
    ax.plot(df["step"], df["interval_s"], marker="x", ls="--", label="interval to next step start")
    ax.plot(df["step"], df["rollout_s"], marker=".", label="rollout (gen) time")
    out = df[df["outlier"]]
    ax.scatter(out["step"], out["rollout_s"], s=120, facecolors="none", edgecolors="red", label="outlier")
    _style.integer_steps(ax)
    ax.set_xlabel("step")
    ax.set_ylabel("seconds")
    _style.seconds_from_zero(ax)
    ax.set_title("Step duration vs interval between steps")
    ax.legend()
    return _style.save(fig, path)


def plotly_step_timing(df: pd.DataFrame) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    for col, name in (
        ("duration_s", "step duration"),
        ("interval_s", "interval to next start"),
        ("rollout_s", "rollout time"),
    ):
        fig.add_trace(go.Scatter(x=df["step"], y=df[col], mode="lines+markers", name=name))
    out = df[df["outlier"]]
    fig.add_trace(
        go.Scatter(
            x=out["step"],
            y=out["rollout_s"],
            mode="markers",
            name="outlier",
            marker={"size": 16, "color": "rgba(0,0,0,0)", "line": {"color": "red", "width": 2}},
        )
    )
    fig.update_layout(title="Step duration vs interval between steps", xaxis_title="step", yaxis_title="seconds")
    _style.plotly_seconds(fig, "yaxis")
    return _style.plotly_integer_steps(fig, df["step"])
