"""Average % of step time per event, barrier wait included (the seed's 74% generate / 19% preprocess table).

Requests run concurrently, so summing their event durations would exceed the wall clock. Instead each
instant of a worker's step (rollout + barrier wait) goes to one bucket: the highest-priority event any
of its requests is in (engine > tool > reward > preprocess > tool_parse > other > request without an
event span > idle), or the barrier. Shares therefore add up to 100% per worker.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from otel_verl.analysis import model
from otel_verl.analysis.figures import _style

if TYPE_CHECKING:
    from otel_verl.analysis.detectors import Tables

PRIORITY = ("engine", "tool", "reward", "preprocess", "tool_parse", "other", "request")
BUCKETS = (*PRIORITY, "idle", "barrier")


def _sweep(lo: int, hi: int, intervals: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Seconds of [lo, hi] attributed to each bucket by priority."""
    pts = [np.array([lo, hi])] + [np.clip(np.concatenate([s, e]), lo, hi) for s, e in intervals.values()]
    bounds = np.unique(np.concatenate(pts))
    seg = np.diff(bounds) / 1e9
    taken = np.zeros(len(seg), dtype=bool)
    out: dict[str, float] = {}
    size = len(bounds) + 1
    for cat in PRIORITY:
        if cat not in intervals:
            out[cat] = 0.0
            continue
        s, e = intervals[cat]
        # +1 at each start, -1 at each end: running sum > 0 where some interval of this bucket is open
        cnt = np.bincount(np.searchsorted(bounds, np.clip(s, lo, hi)), minlength=size) - np.bincount(
            np.searchsorted(bounds, np.clip(e, lo, hi)), minlength=size
        )
        active = np.cumsum(cnt)[: len(seg)] > 0
        mine = active & ~taken
        out[cat] = float(seg[mine].sum())
        taken |= active
    out["idle"] = float(seg[~taken].sum())
    return out


def compute_event_share(spans: pd.DataFrame, tables: Tables | None = None) -> pd.DataFrame:
    """Per (step, event bucket): seconds summed over workers and % of the workers' step time."""
    w = tables.workers if tables is not None else model.workers_table(spans)
    sp = model.training_spans(spans)
    keep = (
        sp["kind"].isin((*model.EVENT_KINDS, "request")).to_numpy()
        & sp["worker"].notna().to_numpy()
        & (sp["request_span"] >= 0).to_numpy()
    )
    step_s, worker_s = model._int(sp["step"])[keep], model._int(sp["worker"])[keep]
    ok = (step_s.notna() & worker_s.notna()).to_numpy()
    # numpy slices of one sorted copy per (step, worker), then per kind: a pandas groupby of 2M rows is minutes
    steps = step_s.to_numpy(dtype=np.int64, na_value=0)[ok]
    workers = worker_s.to_numpy(dtype=np.int64, na_value=0)[ok]
    kind_codes, kind_names = pd.factorize(sp["kind"].to_numpy()[keep][ok], sort=True)
    starts = sp["start_ns"].to_numpy()[keep][ok]
    ends = sp["end_ns"].to_numpy()[keep][ok]
    order = np.lexsort((kind_codes, workers, steps))
    steps, workers, kind_codes, starts, ends = (a[order] for a in (steps, workers, kind_codes, starts, ends))
    cut = np.flatnonzero((np.diff(steps) != 0) | (np.diff(workers) != 0)) + 1
    wfirst = w.drop_duplicates(["step", "worker"]).set_index(["step", "worker"])
    rows = []
    for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(steps)], strict=True):
        if hi <= lo:
            continue
        step, worker = int(steps[lo]), int(workers[lo])
        if (step, worker) not in wfirst.index:
            continue
        wr = wfirst.loc[(step, worker)]
        kc = kind_codes[lo:hi]
        kcut = np.r_[lo, lo + np.flatnonzero(np.diff(kc)) + 1, hi]
        intervals = {str(kind_names[kind_codes[a]]): (starts[a:b], ends[a:b]) for a, b in itertools.pairwise(kcut)}
        secs = _sweep(int(wr["start_ns"]), int(wr["end_ns"]), intervals)
        b = wr["barrier_s"]
        secs["barrier"] = 0.0 if pd.isna(b) else float(b)
        for k, v in secs.items():
            rows.append({"step": step, "worker": worker, "event": k, "seconds": v})
    df = pd.DataFrame(rows, columns=["step", "worker", "event", "seconds"])
    if df.empty:
        return pd.DataFrame(columns=["step", "event", "seconds", "percent"])
    per = df.groupby(["step", "event"], as_index=False)["seconds"].sum()
    per["percent"] = 100 * per["seconds"] / per.groupby("step")["seconds"].transform("sum")
    return per


def event_share_table(df: pd.DataFrame) -> pd.DataFrame:
    """Average % of step time per event over all steps, largest first (the seed's table)."""
    t = df.groupby("event", as_index=False)["percent"].mean().rename(columns={"percent": "avg_percent"})
    return t.sort_values("avg_percent", ascending=False).reset_index(drop=True)


def plot_event_share(df: pd.DataFrame, path: str | Path) -> Path:
    if df.empty:
        return _style.empty(path, "event share")
    fig, (ax1, ax2) = _style.plt.subplots(1, 2, figsize=(13, 5), gridspec_kw={"width_ratios": [1, 2]})
    t = event_share_table(df)
    ax1.axis("off")
    ax1.table(
        cellText=[[e, f"{p:.2f}%"] for e, p in zip(t["event"], t["avg_percent"], strict=True)],
        colLabels=["event", "avg % of step time"],
        loc="center",
    )
    for e, g in df.groupby("event"):
        ax2.plot(g["step"], g["percent"], marker=".", label=e)
    ax2.set_xlabel("step")
    ax2.set_ylabel("% of worker step time")
    ax2.grid(alpha=0.3)
    ax2.legend(fontsize=7)
    fig.suptitle("Share of step time per event (barrier wait included)")
    return _style.save(fig, path)


def plotly_event_share(df: pd.DataFrame):
    import plotly.graph_objects as go

    fig = go.Figure()
    for e, g in df.groupby("event"):
        fig.add_trace(go.Scatter(x=g["step"], y=g["percent"], mode="lines+markers", name=e))
    fig.update_layout(title="Share of step time per event per step", xaxis_title="step", yaxis_title="%")
    return fig
