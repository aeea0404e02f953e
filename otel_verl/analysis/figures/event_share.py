"""Average % of step time per event, barrier wait included (the seed's 74% generate / 19% preprocess table).

Requests run concurrently, so summing their event durations would exceed the wall clock. Instead each
instant of a worker's step (rollout + barrier wait) goes to one bucket: the highest-priority event any
of its requests is in (engine > tool > reward > preprocess > tool_parse > other > request without an
event span > idle), or the barrier. Shares therefore add up to 100% per worker.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from otel_verl.analysis import model
from otel_verl.analysis.figures import _style

PRIORITY = ("engine", "tool", "reward", "preprocess", "tool_parse", "other", "request")
BUCKETS = (*PRIORITY, "idle", "barrier")


def _sweep(lo: int, hi: int, intervals: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Seconds of [lo, hi] attributed to each bucket by priority."""
    pts = [np.array([lo, hi])] + [np.clip(np.concatenate([s, e]), lo, hi) for s, e in intervals.values()]
    bounds = np.unique(np.concatenate(pts))
    seg = np.diff(bounds) / 1e9
    taken = np.zeros(len(seg), dtype=bool)
    out: dict[str, float] = {}
    for cat in PRIORITY:
        if cat not in intervals:
            out[cat] = 0.0
            continue
        s, e = intervals[cat]
        cnt = np.zeros(len(bounds) + 1)
        np.add.at(cnt, np.searchsorted(bounds, np.clip(s, lo, hi)), 1)
        np.add.at(cnt, np.searchsorted(bounds, np.clip(e, lo, hi)), -1)
        active = np.cumsum(cnt)[: len(seg)] > 0
        mine = active & ~taken
        out[cat] = float(seg[mine].sum())
        taken |= active
    out["idle"] = float(seg[~taken].sum())
    return out


def compute_event_share(spans: pd.DataFrame) -> pd.DataFrame:
    """Per (step, event bucket): seconds summed over workers and % of the workers' step time."""
    w = model.workers_table(spans)
    sp = model.training_spans(spans)
    sp = sp[sp["kind"].isin((*model.EVENT_KINDS, "request")) & sp["worker"].notna()]
    sp = sp[(sp["request_span"] >= 0)]
    rows = []
    for (step, worker), g in sp.groupby([model._int(sp["step"]), model._int(sp["worker"])]):
        wr = w[(w["step"] == step) & (w["worker"] == worker)]
        if wr.empty:
            continue
        lo, hi = int(wr["start_ns"].iloc[0]), int(wr["end_ns"].iloc[0])
        intervals = {k: (kg["start_ns"].to_numpy(), kg["end_ns"].to_numpy()) for k, kg in g.groupby("kind")}
        secs = _sweep(lo, hi, intervals)
        b = wr["barrier_s"].iloc[0]
        secs["barrier"] = 0.0 if pd.isna(b) else float(b)
        for k, v in secs.items():
            rows.append({"step": int(step), "worker": int(worker), "event": k, "seconds": v})
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
