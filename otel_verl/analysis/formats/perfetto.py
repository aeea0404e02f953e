"""``export-perfetto``: Chrome/Perfetto trace JSON (``traceEvents``).

One process per (step, worker) — pid = worker, named ``worker <rank>`` — and one lane (tid) per
concurrent request, assigned greedily so that a lane never holds two overlapping requests. The
request's turns and events go on the same lane (Perfetto nests complete events by time).
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path

import numpy as np
import pandas as pd

from otel_verl.analysis.output_paths import prepare_file, writing

BARRIER_TID = 0


def assign_lanes(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Greedy interval partitioning: lane i is reused once its last request ended (minimal lane count)."""
    order = np.lexsort((ends, starts))  # zero-length requests first at equal starts
    lanes = np.zeros(len(starts), dtype=np.int64)
    free: list[tuple[int, int]] = []  # (end, lane)
    next_lane = 1
    for i in order:
        if free and free[0][0] <= starts[i]:
            _, lane = heapq.heappop(free)
        else:
            lane, next_lane = next_lane, next_lane + 1
        lanes[i] = lane
        heapq.heappush(free, (int(ends[i]), lane))
    return lanes


def perfetto_events(spans: pd.DataFrame) -> list[dict]:
    """Trace events (ph=X complete events, µs) plus process/thread name metadata."""
    sp = spans[spans["worker"].notna()]
    if sp.empty:
        return []
    t0 = int(spans["start_ns"].min())
    events: list[dict] = []
    req = sp[sp["kind"] == "request"]
    lane_of: dict[int, int] = {}
    for (_step, _worker), g in req.groupby([sp.loc[req.index, "step"], sp.loc[req.index, "worker"]], dropna=False):
        lanes = assign_lanes(g["start_ns"].to_numpy(), g["end_ns"].to_numpy())
        lane_of.update(zip(g.index.tolist(), lanes.tolist(), strict=True))
    workers = sorted({int(w) for w in sp["worker"]})
    for w in workers:
        events.append({"ph": "M", "name": "process_name", "pid": w, "tid": 0, "args": {"name": f"worker {w}"}})
        events.append(
            {"ph": "M", "name": "thread_name", "pid": w, "tid": BARRIER_TID, "args": {"name": "worker / barrier"}}
        )
    for row in sp.itertuples(index=True):
        if row.kind in ("request",):
            tid = lane_of[row.Index]
        elif row.request_span >= 0:
            tid = lane_of.get(int(row.request_span), BARRIER_TID)
        else:
            tid = BARRIER_TID
        args = {"step": int(row.step) if pd.notna(row.step) else None, "span_id": row.span_id, "trace_id": row.trace_id}
        if pd.notna(row.request_id):
            args["request_id"] = row.request_id
        if pd.notna(row.turn_index):
            args["turn"] = int(row.turn_index)
        events.append(
            {
                "ph": "X",
                "name": row.name,
                "cat": row.kind,
                "pid": int(row.worker),
                "tid": int(tid),
                "ts": (int(row.start_ns) - t0) / 1000.0,
                "dur": max(0.0, (row.end_ns - row.start_ns) / 1000.0),
                "args": args,
            }
        )
    return events


def write_perfetto(spans: pd.DataFrame, out: str | Path) -> int:
    """Write ``{"traceEvents": [...]}``; returns the number of complete events."""
    out = prepare_file(out)
    events = perfetto_events(spans)
    with writing(out):
        out.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return sum(e["ph"] == "X" for e in events)
