"""``export-perfetto``: Chrome/Perfetto trace JSON (``traceEvents``) for ui.perfetto.dev.

Processes (tracks): ``trainer`` (pid 0: the steps on one lane, their phases below on lanes of their own,
validation passes, a V1 trainer's inner updates and weight syncs on a lane each), one ``worker <rank>`` per
worker (pid 10 + rank: the worker span and its barrier wait on lane 0 (an asynchronous trainer's overlapping chunks
on lanes of their own), then one lane per concurrent request, packed greedily over the whole run so that a lane never
holds two overlapping requests; a request's turns and events nest under it on its lane; V1 sample groups packed on
lanes of their own), and ``spans of no worker`` for the rest (an engine
span no call of ours parented). Every lane is named (``thread_name`` metadata).

Every slice is named by the one label mapping (:mod:`otel_verl.analysis.labels`: ``engine call``,
``tool: calculator``, ``phase: update_actor``, ``barrier wait``): Perfetto colours slices by name (it ignores
``cname``, google/perfetto#624), so one kind is one colour there too. ``args`` holds the raw span name, its
ids and every attribute the span had (contract attributes under their OTel keys, the rest as recorded).
"""

from __future__ import annotations

import heapq
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from otel_verl import semconv as sc
from otel_verl.analysis.labels import readable
from otel_verl.analysis.output_paths import prepare_file, writing
from otel_verl.analysis.read.span_columns import ATTR_COLUMNS
from otel_verl.analysis.read.step_split import owner_steps, take_rows

TRAINER_PID = 0
UNATTRIBUTED_PID = 1
WORKER_PID_BASE = 10
STEP_TID = 1
VALIDATION_TID = 2
TRAINER_LANES = {"update": (3, "inner updates"), "weight_sync": (4, "weight syncs")}
"""Trainer spans beside steps and phases (span kind → lane, its name): they read "spans of no worker" before."""
GROUP_TID_BASE = 10**6
"""A worker's sample-group lane k: GROUP_TID_BASE + k (a group spans several request lanes)."""
CHUNK_TID_BASE = 2 * 10**6
"""A worker's chunk lane k > 1: CHUNK_TID_BASE + k (an asynchronous trainer's chunks overlap)."""
PHASE_TID_BASE = 10
BARRIER_TID = 0
STATUS = {1: "OK", 2: "ERROR"}


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


def _meta(name: str, pid: int, tid: int, value: str) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "args": {"name": value}}


def _slice_names(sp: pd.DataFrame) -> list[str]:
    """``step 7``, ``worker 0``, ``request``, ``engine call``, ``phase: ref`` … (labels, per distinct name)."""
    labels = {n: readable(n) for n in pd.unique(sp["name"].astype(object))}
    out = []
    for kind, name, step, worker in zip(sp["kind"], sp["name"], sp["step"], sp["worker"], strict=True):
        if kind == "step" and pd.notna(step):
            out.append(f"step {int(step)}")
        elif kind == "worker" and pd.notna(worker):
            out.append(f"worker {int(worker)}")
        elif kind == "tool" or kind == "engine":
            out.append(readable(name) if kind == "tool" else readable("engine"))
        else:
            out.append(labels.get(name, readable(kind)))
    return out


def _args(sp: pd.DataFrame) -> list[dict[str, Any]]:
    """Per span: its raw name and ids, then every attribute it carried (one pass per column, not per cell)."""
    args: list[dict[str, Any]] = [
        {"span.name": n, "trace_id": t, "span_id": s}
        for n, t, s in zip(sp["name"].tolist(), sp["trace_id"].tolist(), sp["span_id"].tolist(), strict=True)
    ]
    columns = [(col, key) for key, (col, _) in ATTR_COLUMNS.items() if col in sp]
    columns += [("service", "service")] if "service" in sp else []
    for col, key in columns:
        values = sp[col]
        mask = values.notna().to_numpy(copy=True)
        for i, v in zip(np.flatnonzero(mask).tolist(), values[mask].tolist(), strict=True):
            args[i][key] = v if isinstance(v, (str, int, float, bool, list)) else str(v)
    if "status" in sp:  # OTel status codes: 0 unset (left out), 1 ok, 2 error
        status = pd.to_numeric(sp["status"], errors="coerce").to_numpy()
        for i in np.flatnonzero(status > 0).tolist():
            args[i]["status"] = STATUS.get(int(status[i]), str(status[i]))
    if "extra" in sp:
        extra = sp["extra"]
        has = (extra.notna() & (extra.astype(str) != "")).to_numpy()
        for i, v in zip(np.flatnonzero(has).tolist(), extra[has].tolist(), strict=True):
            try:
                more = json.loads(v) if isinstance(v, str) else v
            except ValueError:
                more = {"extra": v}
            if isinstance(more, dict):
                args[i].update({k: val for k, val in more.items() if k not in args[i]})
    return args


def perfetto_events(spans: pd.DataFrame) -> list[dict]:
    """Trace events (ph=X complete events, µs since the first span) plus process and lane names."""
    if spans.empty:
        return []
    sp = spans.reset_index(drop=True)
    t0 = int(sp["start_ns"].min())
    n = len(sp)
    pid = np.full(n, UNATTRIBUTED_PID, dtype=np.int64)
    tid = np.zeros(n, dtype=np.int64)
    meta: list[dict[str, Any]] = []
    kind = sp["kind"].to_numpy(dtype=object)
    worker = sp["worker"]
    has_worker = worker.notna().to_numpy()
    pid[has_worker] = WORKER_PID_BASE + worker[has_worker].astype("int64").to_numpy()
    # workers: the worker span and barrier on lane 0, requests packed on lanes 1.., their spans on theirs
    row_of = {int(r): i for i, r in enumerate(spans.index)}  # request_span holds the original row labels
    req = np.flatnonzero(has_worker & (kind == "request"))
    lane_of: dict[int, int] = {}
    max_lane: dict[int, int] = {}
    if len(req):  # packed per worker over the whole run: an asynchronous trainer's requests cross steps
        keys = sp.loc[req, ["worker"]].astype("float64")
        for _, idx in keys.groupby("worker").indices.items():
            rows = req[idx]
            lanes = assign_lanes(sp["start_ns"].to_numpy()[rows], sp["end_ns"].to_numpy()[rows])
            lane_of.update(zip(rows.tolist(), lanes.tolist(), strict=True))
            p = int(pid[rows[0]])
            max_lane[p] = max(max_lane.get(p, 0), int(lanes.max()))
    request_span = sp["request_span"].to_numpy() if "request_span" in sp else np.full(n, -1)
    for i in np.flatnonzero(has_worker).tolist():
        if kind[i] == "request":
            tid[i] = lane_of[i]
        elif request_span[i] >= 0:
            tid[i] = lane_of.get(row_of.get(int(request_span[i]), -1), BARRIER_TID)
    for w in sorted({int(x) for x in worker[has_worker]}):
        p = WORKER_PID_BASE + w
        meta += [
            _meta("process_name", p, 0, f"worker {w}"),
            _meta("thread_name", p, BARRIER_TID, "worker, barrier wait"),
        ]
        meta += [_meta("thread_name", p, lane, f"requests, lane {lane}") for lane in range(1, max_lane.get(p, 0) + 1)]
        chunks = np.flatnonzero(has_worker & ((kind == "worker") | (kind == "barrier")) & (pid == p))
        if len(chunks):  # an asynchronous trainer's chunks overlap: the second and later on lanes of their own
            lanes = assign_lanes(sp["start_ns"].to_numpy()[chunks], sp["end_ns"].to_numpy()[chunks])
            tid[chunks] = np.where(lanes == 1, BARRIER_TID, CHUNK_TID_BASE + lanes)
            meta += [
                _meta("thread_name", p, CHUNK_TID_BASE + lane, f"worker, barrier wait, {lane}")
                for lane in range(2, int(lanes.max()) + 1)
            ]
        groups = np.flatnonzero(has_worker & (kind == "group") & (pid == p))
        if len(groups):
            lanes = assign_lanes(sp["start_ns"].to_numpy()[groups], sp["end_ns"].to_numpy()[groups])
            tid[groups] = GROUP_TID_BASE + lanes
            meta += [
                _meta("thread_name", p, GROUP_TID_BASE + lane, f"sample groups, lane {lane}")
                for lane in range(1, int(lanes.max()) + 1)
            ]
    # the trainer: steps, then phases packed on lanes of their own, validation passes
    names = sp["name"].astype(object)
    trainer_kind = (kind == "step") | (kind == "phase") | np.isin(kind, list(TRAINER_LANES))
    trainer = ~has_worker & (trainer_kind | (names == sc.SPAN_VALIDATE).to_numpy())
    pid[trainer] = TRAINER_PID
    tid[~has_worker & (kind == "step")] = STEP_TID
    tid[trainer & (names == sc.SPAN_VALIDATE).to_numpy()] = VALIDATION_TID
    phases = np.flatnonzero(~has_worker & (kind == "phase"))
    if trainer.any():
        meta += [
            _meta("process_name", TRAINER_PID, 0, "trainer"),
            _meta("thread_name", TRAINER_PID, STEP_TID, "steps"),
            _meta("thread_name", TRAINER_PID, VALIDATION_TID, "validation"),
        ]
    for k, (lane, label) in TRAINER_LANES.items():
        mine = ~has_worker & (kind == k)
        if mine.any():
            tid[mine] = lane
            meta.append(_meta("thread_name", TRAINER_PID, lane, label))
    if len(phases):
        lanes = assign_lanes(sp["start_ns"].to_numpy()[phases], sp["end_ns"].to_numpy()[phases])
        tid[phases] = PHASE_TID_BASE + lanes
        for lane in range(1, int(lanes.max()) + 1):
            label = "phases" if lane == 1 else f"phases (nested or overlapping, {lane})"
            meta.append(_meta("thread_name", TRAINER_PID, PHASE_TID_BASE + lane, label))
    # spans of no worker and no trainer: lanes of their own
    rest = np.flatnonzero(pid == UNATTRIBUTED_PID)
    if len(rest):
        lanes = assign_lanes(sp["start_ns"].to_numpy()[rest], sp["end_ns"].to_numpy()[rest])
        tid[rest] = lanes
        meta.append(_meta("process_name", UNATTRIBUTED_PID, 0, "spans of no worker"))
        meta += [
            _meta("thread_name", UNATTRIBUTED_PID, lane, f"lane {lane}") for lane in range(1, int(lanes.max()) + 1)
        ]
    ts = (sp["start_ns"].to_numpy(dtype=np.int64) - t0) / 1000.0
    dur = np.maximum(0.0, (sp["end_ns"].to_numpy(dtype=np.int64) - sp["start_ns"].to_numpy(dtype=np.int64)) / 1000.0)
    slices = [
        {"ph": "X", "name": name, "cat": str(k), "pid": int(p), "tid": int(t), "ts": a, "dur": d, "args": arg}
        for name, k, p, t, a, d, arg in zip(
            _slice_names(sp), kind, pid.tolist(), tid.tolist(), ts.tolist(), dur.tolist(), _args(sp), strict=True
        )
    ]
    return meta + slices


def select_steps(spans: pd.DataFrame, steps: range | None) -> pd.DataFrame:
    """The spans of ``steps`` (all when None) by the analyzer's rule
    (:func:`~otel_verl.analysis.read.step_split.owner_steps`): a span without a step of its own (a weight sync, an
    engine span) goes with its trace's first step; a span whose trace has no step at all belongs to none and is left
    out."""
    if steps is None:
        return spans
    owner = owner_steps(spans)
    return take_rows(spans, np.flatnonzero((owner >= steps.start) & (owner < steps.stop)))  # NaN: neither


def write_perfetto(spans: pd.DataFrame, out: str | Path, steps: range | None = None) -> int:
    """Write ``{"traceEvents": [...]}`` of ``steps`` (all when None); returns the number of slices."""
    out = prepare_file(out)
    events = perfetto_events(select_steps(spans, steps))
    with writing(out):
        out.write_text(json.dumps({"traceEvents": events, "displayTimeUnit": "ms"}))
    return sum(e["ph"] == "X" for e in events)
