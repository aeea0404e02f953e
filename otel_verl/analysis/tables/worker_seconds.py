"""Seconds of each worker's step per event bucket: the shared basis of the event-share table and the
per-worker phase bars.

Requests run concurrently, so summing their event durations would exceed the wall clock. Each instant
of a worker's rollout window goes to one bucket instead: the highest-priority event any of its
requests is in (:data:`PRIORITY`), ``request`` (in a request, between its calls), ``idle`` (no request in
flight), plus the worker's ``barrier`` wait. Logs with worker-level events only (the seed's
``preprocessing_duration``/``async_generate_duration`` per worker, imported by ``import-legacy``) have no
request spans: their worker-level event spans are swept the same way. Worker-level events after the
barrier (the seed's ``broadcast_duration``) are outside the rollout window and count as their own bucket.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from otel_verl.analysis.read.span_columns import whole_numbers
from otel_verl.analysis.tables.events import EVENT_KINDS, event_label
from otel_verl.analysis.tables.training_spans import training_spans

PRIORITY = ("engine", "tool", "reward", "preprocess", "tool_parse", "other", "request")
COLUMNS = ["step", "worker", "event", "seconds"]


def sweep(lo: int, hi: int, intervals: dict[str, tuple[np.ndarray, np.ndarray]], order: tuple[str, ...]) -> dict:
    """Seconds of [lo, hi] attributed to each bucket of ``order`` (first wins), the rest to ``idle``.

    One sort of every clipped start and end (+1 / -1 of its bucket); a bucket is open over a segment between
    two distinct times while its running sum is > 0. Segments are those of the distinct times in order (ties
    give zero-length gaps, dropped), so sums are the same floats as with one ``np.unique`` and a
    ``searchsorted`` per bucket, which took twice as long (seed logs, 8 workers × 20k spans a step)."""
    cats = list(intervals)  # every bucket's times split the segments, as before, even one not in ``order``
    times = [np.array([lo, hi], dtype=np.int64)]
    codes = [np.full(2, -1, dtype=np.int64)]
    signs = [np.zeros(2, dtype=np.int64)]
    for code, cat in enumerate(cats):
        s, e = intervals[cat]
        times += [np.clip(s, lo, hi), np.clip(e, lo, hi)]
        codes.append(np.full(len(s) + len(e), code, dtype=np.int64))
        signs += [np.ones(len(s), dtype=np.int64), np.full(len(e), -1, dtype=np.int64)]
    t = np.concatenate(times)
    by_time = np.argsort(t, kind="stable")
    t, code, sign = t[by_time], np.concatenate(codes)[by_time], np.concatenate(signs)[by_time]
    gap = np.diff(t)
    real = gap > 0  # the segment after each point; the last point of a tie carries the tie's sums
    seg = gap[real] / 1e9
    taken = np.zeros(len(seg), dtype=bool)
    out: dict[str, float] = {}
    for cat in order:
        if cat not in intervals:
            out[cat] = 0.0
            continue
        active = np.cumsum(np.where(code == cats.index(cat), sign, 0))[:-1][real] > 0
        out[cat] = float(seg[active & ~taken].sum())
        taken |= active
    out["idle"] = float(seg[~taken].sum())
    return out


def worker_event_seconds(spans: pd.DataFrame, workers: pd.DataFrame) -> pd.DataFrame:
    """One row per (step, worker, event bucket) with the seconds it took of that worker's step."""
    if workers.empty:
        return pd.DataFrame(columns=COLUMNS)
    wfirst = workers.drop_duplicates(["step", "worker"]).set_index(["step", "worker"])
    sp = training_spans(spans)
    rows = _request_buckets(sp, wfirst)
    done = {(r["step"], r["worker"]) for r in rows}
    rows += _worker_level_buckets(sp, wfirst, done)
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df[df["seconds"] > 0].reset_index(drop=True) if len(df) else df


def _request_buckets(sp: pd.DataFrame, wfirst: pd.DataFrame) -> list[dict]:
    """Buckets of workers with request spans (vectorized: a pandas groupby of 2M rows takes minutes)."""
    keep = (
        sp["kind"].isin((*EVENT_KINDS, "request")).to_numpy()
        & sp["worker"].notna().to_numpy()
        & (sp["request_span"] >= 0).to_numpy()
    )
    step_s, worker_s = whole_numbers(sp["step"])[keep], whole_numbers(sp["worker"])[keep]
    ok = (step_s.notna() & worker_s.notna()).to_numpy()
    steps = step_s.to_numpy(dtype=np.int64, na_value=0)[ok]
    workers = worker_s.to_numpy(dtype=np.int64, na_value=0)[ok]
    kind_codes, kind_names = pd.factorize(sp["kind"].to_numpy()[keep][ok], sort=True)
    starts = sp["start_ns"].to_numpy()[keep][ok]
    ends = sp["end_ns"].to_numpy()[keep][ok]
    order = np.lexsort((kind_codes, workers, steps))
    steps, workers, kind_codes, starts, ends = (a[order] for a in (steps, workers, kind_codes, starts, ends))
    cut = np.flatnonzero((np.diff(steps) != 0) | (np.diff(workers) != 0)) + 1
    rows: list[dict] = []
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
        secs = sweep(int(wr["start_ns"]), int(wr["end_ns"]), intervals, PRIORITY)
        secs["barrier"] = _barrier(wr)
        rows += [{"step": step, "worker": worker, "event": k, "seconds": v} for k, v in secs.items()]
    return rows


def _worker_level_buckets(sp: pd.DataFrame, wfirst: pd.DataFrame, done: set[tuple[int, int]]) -> list[dict]:
    """Worker-level event spans (no request above them): the rollout window of workers without request
    spans, and events after the barrier of any worker.

    The events after the barrier are summed for every worker at once (one groupby): a sub-frame and two
    filters per worker-step were most of this function's time (docs/performance.md).
    """
    keep = (
        sp["kind"].isin(EVENT_KINDS).to_numpy() & (sp["request_span"] < 0).to_numpy() & sp["worker"].notna().to_numpy()
    )
    ev = sp.loc[keep, ["step", "worker", "kind", "name", "start_ns", "end_ns", "duration"]]
    rows: list[dict] = []
    if not ev.empty:
        ev = ev.assign(event=event_label(ev), step=whole_numbers(ev["step"]), worker=whole_numbers(ev["worker"]))
        ev = ev[ev["step"].notna() & ev["worker"].notna()]
    after = _after_barrier(ev, wfirst)
    todo = {(int(s), int(w)) for s, w in wfirst.index} - done
    pending = ev[[(int(s), int(w)) in todo for s, w in zip(ev["step"], ev["worker"], strict=True)]] if todo else ev[:0]
    groups = dict(iter(pending.groupby(["step", "worker"]))) if not pending.empty else {}
    for (step, worker), wr in wfirst.iterrows():
        key = (int(step), int(worker))
        if key not in done:
            g = groups.get(key)
            lo, hi = int(wr["start_ns"]), int(wr["end_ns"])
            inside = g[g["start_ns"] < hi] if g is not None else None
            if inside is not None and len(inside):
                totals = inside.groupby("event")["duration"].sum()
                labels = sorted(totals.index, key=lambda e: (_rank(e), -totals[e]))
                intervals = {
                    e: (x["start_ns"].to_numpy(), x["end_ns"].to_numpy())
                    for e, x in inside.groupby("event")
                    if e in totals.index
                }
                secs = sweep(lo, hi, intervals, tuple(labels))
            else:
                secs = {"idle": (hi - lo) / 1e9}
            secs["barrier"] = _barrier(wr)
            rows += [{"step": key[0], "worker": key[1], "event": k, "seconds": v} for k, v in secs.items()]
        for e, seconds in after.get(key, ()):
            rows.append({"step": key[0], "worker": key[1], "event": e, "seconds": seconds})
    return rows


def _after_barrier(ev: pd.DataFrame, wfirst: pd.DataFrame) -> dict[tuple[int, int], list[tuple[str, float]]]:
    """(event, seconds) of the worker-level events that start at or after each worker's rollout end, by event."""
    if ev.empty or wfirst.empty:
        return {}
    ends = wfirst["end_ns"].reset_index()
    ends = ends.assign(step=whole_numbers(ends["step"]), worker=whole_numbers(ends["worker"])).rename(
        columns={"end_ns": "_hi"}
    )
    m = ev[["step", "worker", "event", "start_ns", "duration"]].merge(ends, on=["step", "worker"], sort=False)
    aft = m[m["start_ns"].to_numpy() >= m["_hi"].to_numpy()]
    out: dict[tuple[int, int], list[tuple[str, float]]] = {}
    for (step, worker, e), seconds in aft.groupby(["step", "worker", "event"])["duration"].sum().items():
        out.setdefault((int(step), int(worker)), []).append((str(e), float(seconds)))
    return out


def _rank(label: str) -> int:
    return PRIORITY.index(label) if label in PRIORITY else len(PRIORITY)


def _barrier(wr: pd.Series) -> float:
    b = wr["barrier_s"]
    return 0.0 if pd.isna(b) else float(b)
