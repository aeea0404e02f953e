"""Request-completion CDF within each worker of a step (the seed's 150 s gap shows as a flat stretch)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from otel_verl.analysis.figures import _style
from otel_verl.analysis.figures.by_part import concat_parts
from otel_verl.analysis.tables.requests import requests_table

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


COLUMNS = ["step", "worker", "request_id", "t_rel_s"]


def compute_worker_cdf(spans: pd.DataFrame, step: int | None = None, tables: Tables | None = None) -> pd.DataFrame:
    """Per request of ``step`` (default: :func:`pick_step`'s): completion seconds since its worker started and the
    fraction of that worker's requests done. Requests without a known worker (no worker span, no rank attribute)
    have no worker timeline: left out."""
    r = tables.requests if tables is not None else requests_table(spans)
    return combine_worker_cdf([_ranked(_rows(r))], step)


def part_worker_cdf(tables: Tables) -> pd.DataFrame:
    """One part's requests with a worker timeline, ranked within their (step, worker) (:mod:`.by_part`; a step's
    requests are never split between parts)."""
    return _ranked(_rows(tables.requests))


def combine_worker_cdf(parts: Sequence[pd.DataFrame], step: int | None = None) -> pd.DataFrame:
    """The requests of one step, ``step`` or else :func:`pick_step`'s over every part: the figure draws one step,
    and a frame of every step's requests grew with the run (issue 31). ``parts`` is read twice, a part at a
    time (a streamed run's parts wait on disk)."""
    if step is None:
        last = [p.groupby(["step", "worker"])["t_rel_s"].max() for p in parts if len(p)]
        step = _most_lagging(pd.concat(last)) if last else None
    if step is None:
        first = next(iter(parts), None)
        return first.iloc[:0] if first is not None else pd.DataFrame(columns=[*COLUMNS, "frac"])
    df = concat_parts([p[p["step"] == step] for p in parts])
    return df.sort_values(["worker", "t_rel_s"], kind="stable").reset_index(drop=True)


def _rows(r: pd.DataFrame) -> pd.DataFrame:
    r = r[r["step"].notna() & r["worker"].notna() & r["worker_rel_end_s"].notna()] if len(r) else r
    if not len(r):
        return pd.DataFrame(columns=COLUMNS)
    return r[["step", "worker", "request_id", "worker_rel_end_s"]].rename(columns={"worker_rel_end_s": "t_rel_s"})


def _ranked(df: pd.DataFrame) -> pd.DataFrame:
    df = df.sort_values(["step", "worker", "t_rel_s"], kind="stable").reset_index(drop=True)
    g = df.groupby(["step", "worker"], sort=False)
    df["frac"] = (g.cumcount() + 1) / g["t_rel_s"].transform("size") if len(df) else pd.Series(dtype=float)
    return df


def pick_step(df: pd.DataFrame) -> int | None:
    """The step whose slowest worker finished last relative to its median worker (most telling for this view);
    ``None`` when no step has a worker timeline."""
    if df.empty:
        return None
    return _most_lagging(df.groupby(["step", "worker"])["t_rel_s"].max())


def _most_lagging(last: pd.Series) -> int | None:
    """The step of ``last`` (each (step, worker)'s last completion) whose slowest worker lagged its median most."""
    by_step = last.groupby(level="step")
    spread = (by_step.max() - by_step.median()).dropna()
    return None if spread.empty else int(spread.idxmax())


def plot_worker_cdf(df: pd.DataFrame, path: str | Path, step: int | None = None) -> Path:
    step = step if step is not None else pick_step(df)
    g = df[df["step"] == step] if step is not None else df.iloc[0:0]
    if g.empty:
        return _style.empty(path, "worker request CDF", "no request with a known worker in this trace")
    fig, ax = _style.new()
    for w, wg in g.groupby("worker"):
        ax.step(wg["t_rel_s"], wg["frac"], where="post", label=f"worker {w}")
    ax.set_xlabel("seconds since the worker started")
    ax.set_ylabel("fraction of the worker's requests completed")
    _style.seconds_from_zero(ax, "x")
    _style.seconds_from_zero(ax, "y")
    ax.set_title(f"Request completion per worker, step {step}")
    _style.legend(ax)
    return _style.save(fig, path)


def plotly_worker_cdf(df: pd.DataFrame, step: int | None = None) -> Any:
    import plotly.graph_objects as go

    step = step if step is not None else pick_step(df)
    fig = go.Figure()
    if step is None:
        return _style.plotly_note(fig, "no request with a known worker in this trace")
    for w, wg in df[df["step"] == step].groupby("worker"):
        fig.add_trace(
            go.Scatter(
                x=wg["t_rel_s"], y=wg["frac"], mode="lines", line_shape="hv", name=f"worker {w}", text=wg["request_id"]
            )
        )
    fig.update_layout(
        title=f"Request completion per worker, step {step}",
        xaxis_title="seconds since worker start",
        yaxis_title="fraction completed",
    )
    return _style.plotly_seconds(fig, "xaxis", "yaxis")
