"""Engine seconds per turn (the sum of its engine calls): the ``turn_anomaly`` detector's input."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


def turn_engine_times(t: Tables) -> pd.DataFrame:
    """Engine seconds per turn span (sum of its engine calls) and the calls' time range."""
    cols = ["turn_span", "duration", "step", "worker", "turn_index", "request_span", "start_ns", "end_ns"]
    ev = t.events
    if ev.empty:
        return pd.DataFrame(columns=[*cols, "engine_s", "trace_id", "span_id"])
    eng = ev.loc[((ev["kind"] == "engine") & (ev["turn_span"] >= 0)).to_numpy(), [*cols, "trace_id", "span_id"]]
    g = eng.groupby("turn_span")
    out = pd.DataFrame(
        {
            "engine_s": g["duration"].sum(),
            "step": g["step"].first(),
            "worker": g["worker"].first(),
            "turn_index": g["turn_index"].first(),
            "request_span": g["request_span"].first(),
            "start_ns": g["start_ns"].min(),
            "end_ns": g["end_ns"].max(),
            "trace_id": g["trace_id"].first(),
            "span_id": g["span_id"].first(),
        }
    )
    return out.reset_index()
