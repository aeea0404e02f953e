"""idle_gap: stretches of a worker's step with requests in flight waiting on the engine, but no span
starting or ending anywhere below the worker."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.record import Finding, evidence, fmt_s
from otel_verl.analysis.findings.thresholds import Thresholds, severity
from otel_verl.analysis.read.span_columns import whole_numbers
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.training_spans import training_spans


def find_idle_gaps(t: Tables, th: Thresholds) -> list[Finding]:
    """Stretches of a worker's step with requests in flight but no span starting or ending anywhere below it."""
    out: list[Finding] = []
    sp = training_spans(t.spans)
    keep = (sp["worker_span"] >= 0).to_numpy() & (sp["kind"] != "worker").to_numpy() & sp["step"].notna().to_numpy()
    step_s, worker_s = whole_numbers(sp["step"])[keep], whole_numbers(sp["worker"])[keep]
    ok = (step_s.notna() & worker_s.notna()).to_numpy()
    if not ok.any():
        return out
    # numpy over (step, worker) slices of one sorted copy: a pandas groupby of 2M rows took minutes
    steps = step_s.to_numpy(dtype=np.int64, na_value=0)[ok]
    workers = worker_s.to_numpy(dtype=np.int64, na_value=0)[ok]
    starts = sp["start_ns"].to_numpy()[keep][ok]
    ends = sp["end_ns"].to_numpy()[keep][ok]
    is_req = (sp["kind"].to_numpy()[keep] == "request")[ok]
    order = np.lexsort((workers, steps))
    steps, workers, starts, ends, is_req = steps[order], workers[order], starts[order], ends[order], is_req[order]
    cut = np.flatnonzero((np.diff(steps) != 0) | (np.diff(workers) != 0)) + 1
    wfirst = t.workers.drop_duplicates(["step", "worker"]).set_index(["step", "worker"])
    columns = ["step", "worker", "start_ns", "end_ns"]
    rows = (
        _RowsByWorker(t.requests, [*columns, "request_row"]),
        _RowsByWorker(t.events, [*columns, "kind", "event", "request_span"]),
    )
    for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(steps)], strict=True):
        step, worker = int(steps[lo]), int(workers[lo])
        times = np.unique(np.concatenate([starts[lo:hi], ends[lo:hi]]))
        if len(times) < 2:
            continue
        gaps = np.diff(times) / 1e9
        limit = max(th.idle_gap_min_s, th.idle_gap_rel * float(t.median_worker_s.get(step, 0.0)))
        big = np.flatnonzero(gaps >= limit)
        if not len(big):
            continue
        req = is_req[lo:hi]
        req_start, req_end = starts[lo:hi][req], ends[lo:hi][req]
        wrow = wfirst.loc[(step, worker)] if (step, worker) in wfirst.index else None
        wstart = int(wrow["start_ns"]) if wrow is not None else int(times[0])
        for i in big:
            a, b = int(times[i]), int(times[i + 1])
            if int(((req_start <= a) & (req_end >= b)).sum()) < th.idle_gap_min_inflight:
                continue
            found = _gap_finding(t, th, rows, step, worker, a, b, wstart, wrow, limit)
            if found is not None:
                out.append(found)
    return out


BUSY_KINDS = ("reward", "tool", "tool_parse", "preprocess")
"""A request inside one of these across a gap is busy with its own (slow) work, not waiting on the engine."""


class _RowsByWorker:
    """Some columns of a table's rows of each (step, worker), grouped once on first use.

    Why: each gap used to filter the whole events table (1.5M rows at 2M spans, every column) twice;
    with a hundred gaps that was most of the analysis.
    """

    def __init__(self, df: pd.DataFrame, columns: list[str]) -> None:
        self._df = df[columns]
        self._groups: dict[Any, np.ndarray] | None = None

    def of(self, step: int, worker: int) -> pd.DataFrame:
        if self._groups is None:
            df = self._df
            self._groups = {} if df.empty else df.groupby([df["step"], df["worker"]], sort=False).indices
        idx = self._groups.get((step, worker))
        return self._df.iloc[idx] if idx is not None else self._df.iloc[:0]


def _in_flight_events(ev: pd.DataFrame, a: int, b: int) -> tuple[Counter[str], set[int]]:
    """What the requests in flight did during [a, b] (labels of one worker's events covering it), and which
    requests were busy in a non-engine event the whole time."""
    if ev.empty:
        return Counter(), set()
    m = (ev["start_ns"] <= a).to_numpy() & (ev["end_ns"] >= b).to_numpy() & (ev["kind"] != "other").to_numpy()
    cover = ev.loc[m, ["event", "kind", "request_span"]]
    busy = {int(r) for r in cover.loc[cover["kind"].isin(BUSY_KINDS), "request_span"]}
    return Counter(str(e) for e in cover["event"]), busy


def _gap_finding(
    t: Tables,
    th: Thresholds,
    rows: tuple[_RowsByWorker, _RowsByWorker],
    step: int,
    worker: int,
    a: int,
    b: int,
    wstart: int,
    wrow: Any,
    limit: float,
) -> Finding | None:
    """An idle gap, or None when fewer than ``idle_gap_min_inflight`` of the requests in flight were waiting
    on the engine: requests sitting in their own slow reward or tool call are slow events, not a stall."""
    r = rows[0].of(step, worker)
    inflight = r[((r["start_ns"] <= a) & (r["end_ns"] >= b)).fillna(False).to_numpy(dtype=bool)]
    doing, busy = _in_flight_events(rows[1].of(step, worker), a, b)
    waiting = int((~inflight["request_row"].isin(list(busy))).sum())
    if waiting < th.idle_gap_min_inflight:
        return None
    length = (b - a) / 1e9
    rel_a, rel_b = (a - wstart) / 1e9, (b - wstart) / 1e9
    listed = ", ".join(f"{e} ×{n}" for e, n in doing.most_common())
    what = f"; the requests in flight were in: {listed}" if doing else ""
    return Finding(
        kind="idle_gap",
        severity=severity(length, t.median_rollout_s, th, limit),
        step=step,
        worker=worker,
        metric="gap_s",
        value=length,
        baseline=limit,
        impact_s=length,
        evidence=evidence(wrow["trace_id"], wrow["span_id"]) if wrow is not None else [],
        window_ns=(a, b),
        details={"pattern": "idle_gap", "gap_start_s": rel_a, "gap_end_s": rel_b, "in_flight": len(inflight)},
        message=(
            f"worker {worker} in step {step}: {len(inflight)} requests in flight but nothing started or "
            f"finished for {fmt_s(length)} (from {fmt_s(rel_a)} to {fmt_s(rel_b)} after the worker "
            f"started); the engine made no visible progress{what}"
        ),
    )
