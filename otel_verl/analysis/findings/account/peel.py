"""The rollout's critical path, and what each anomaly cost the step: :func:`rollout_path`.

The rollout ends when its last request (plus its worker's finish) ends. Take away one request's anomalies and it
would have ended earlier, but the step would end with the next-latest request: what an anomaly cost the step is
only what it kept the step from ending sooner. Peeling finds it (HolisticTraceAnalysis's critical path, walked
backwards): repeatedly take the request that ends last; if it has anomalies, take them away and give the drop in
the rollout's end to its anomalies (in proportion to their seconds); stop when the request that ends last has none
left to take. That request is the *counterfactual* critical path: the usual part of the step's rollout. With
over-sampling the rollout ends at its k-th completion, and then when the aborted requests have stopped: one stuck
past that keeps the step waiting, and its anomalies own that time (:func:`abort_tail`).

So the rollout's time splits exactly into what each anomaly cost and the parts of the counterfactual path (time
before its request started, its segments net of anomalies, its worker's finish), plus the time after the last
worker (rollout overhead). Every second of the rollout is owned by exactly one part.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.steps.step_summary import StepSummary


@dataclass
class RolloutPath:
    """A step's rollout along its critical path."""

    parts: dict[str, float] = field(default_factory=dict)
    """Part → seconds of the rollout it owns (anomaly costs + the counterfactual path)."""
    cost: pd.Series = field(default_factory=lambda: pd.Series(dtype=float))
    """Anomaly row → seconds of the rollout it cost."""
    critical_request: int | None = None
    """The request that ended the rollout last (on the worker the barrier waited for)."""
    usual_worker: int | None = None
    """The worker and request that end the rollout once the anomalies are taken away."""
    usual_request: int | None = None
    rollout_s: float = 0.0


def rollout_path(s: StepSummary, anomalies: pd.DataFrame) -> RolloutPath | None:
    """Peel one step's rollout (module docstring); None when the step has no rollout."""
    if s.rollout is None:
        return None
    p0, p1 = s.rollout
    items = _items(s)
    if items.empty:
        return RolloutPath(parts={k.PART_ROLLOUT_OVERHEAD: (p1 - p0) / 1e9}, rollout_s=(p1 - p0) / 1e9)
    occ = s.occurrences
    a = anomalies.assign(
        request_span=occ["request_span"].to_numpy()[anomalies["occ"].to_numpy(dtype=np.int64)]
        if len(anomalies)
        else np.zeros(0, dtype=np.int64),
        worker=occ["worker"].to_numpy()[anomalies["occ"].to_numpy(dtype=np.int64)] if len(anomalies) else [],
    )
    # each item's anomaly rows: its own occurrences', and its worker's start and finish (request_span -1)
    own = _positions(a, a["request_span"].to_numpy() >= 0, "request_span")
    shared = _positions(a, a["request_span"].to_numpy() < 0, "worker")
    rows_of = []
    for rs, w in zip(items["request_span"].to_numpy(), items["worker"].to_numpy(dtype=float), strict=True):
        mine = list(own.get(rs, ())) if rs >= 0 else []
        if np.isfinite(w):
            mine += list(shared.get(float(w), ()))
        rows_of.append(np.asarray(mine, dtype=np.int64))
    x = a["x"].to_numpy(dtype=float)
    ends = items["end_ns"].to_numpy(dtype=float) / 1e9
    took = np.array([x[r].sum() for r in rows_of])
    done = ~items["aborted"].to_numpy(dtype=bool)
    drops, usual, level0 = peel(ends, took, int(done.sum()) if done.any() else len(ends))
    late = abort_tail(np.minimum(ends, p1 / 1e9), took, ~done, level0)
    cost = np.zeros(len(a))
    for i, drop in [*drops.items(), *late.items()]:
        cost[rows_of[i]] += drop * x[rows_of[i]] / took[i]
    crit = int(np.argmax(np.where(done, ends, -np.inf))) if done.any() else int(np.argmax(ends))
    path = RolloutPath(
        cost=pd.Series(cost, index=a.index),
        critical_request=_int(items["request_span"].iat[crit]),
        usual_worker=_int(items["worker"].iat[usual]),
        usual_request=_int(items["request_span"].iat[usual]),
        rollout_s=(p1 - p0) / 1e9,
    )
    parts: dict[str, float] = {}
    for part, cause, c in zip(a["part"], a["cause"], cost, strict=True):
        key = k.PART_STALL if cause == k.STALL else part
        parts[key] = parts.get(key, 0.0) + float(c)
    for part, seconds in _usual_parts(s, items.iloc[usual], a, rows_of[usual], p0).items():
        parts[part] = parts.get(part, 0.0) + seconds
    late_s = sum(late.values())
    parts[k.PART_ROLLOUT_OVERHEAD] = parts.get(k.PART_ROLLOUT_OVERHEAD, 0.0) + (p1 / 1e9 - level0 - late_s)
    path.parts = parts
    return path


def peel(ends: np.ndarray, took: np.ndarray, k: int) -> tuple[dict[int, float], int, float]:
    """Peel the rollout's end: (the drop each item's anomalies gave, the item that ends it once they are taken away,
    the end before any was).

    The rollout ends with its ``k``-th completion: the last request when every request completes (``k`` = all),
    the target count when over-sampling aborts the rest (those keep their cut-off end, which a counterfactual can
    only move earlier). Each round takes the anomalies away from the request whose taking-away lowers the end the
    most: the one holding the end if it has any, else one ending after it that would then end before it (an
    aborted request that, unslowed, would have completed instead of the one that ended the rollout)."""
    cur = ends.astype(float).copy()
    left = took > 0
    drops: dict[int, float] = {}

    def kth(v: np.ndarray) -> float:
        return float(np.partition(v, k - 1)[k - 1])

    level0 = level = kth(cur)
    while left.any():
        holder = int(np.flatnonzero(cur == level)[0])
        if left[holder]:
            pick = holder
        else:
            later = np.flatnonzero(left & (cur >= level) & (cur - took < level))
            if not len(later):
                break
            pick = int(later[np.argmin(cur[later] - took[later])])
        cur[pick] -= took[pick]
        left[pick] = False
        new = kth(cur)
        if level - new > 0:
            drops[pick] = drops.get(pick, 0.0) + level - new
        level = new
    return drops, int(np.flatnonzero(cur == level)[0]), level0


def abort_tail(ends: np.ndarray, took: np.ndarray, aborted: np.ndarray, level0: float) -> dict[int, float]:
    """Over-sampling aborts the rest at the ``k``-th completion (``level0``), and the rollout ends when they have
    stopped: at once, unless a request was stuck where the abort could not reach it (an engine call that never
    returned). Peeled like :func:`peel` above ``level0``: the drop each aborted request's anomalies gave (what
    they leave is the rollout's own overhead)."""
    cur = np.where(aborted, ends, -np.inf)
    left = aborted & (took > 0)
    drops: dict[int, float] = {}
    level = max(level0, float(cur.max()) if len(cur) else level0)
    while level > level0:
        holder = int(np.argmax(cur))
        if not left[holder]:
            break
        cur[holder] -= took[holder]
        left[holder] = False
        new = max(level0, float(cur.max()))
        if level - new > 0:
            drops[holder] = drops.get(holder, 0.0) + level - new
        level = new
    return drops


def _positions(a: pd.DataFrame, mask: np.ndarray, by: str) -> dict[object, np.ndarray]:
    """Row positions in ``a`` of the rows in ``mask``, grouped by ``by`` (``groupby.indices`` of a filtered frame
    counts positions in that frame, not in ``a``)."""
    where = np.flatnonzero(mask)
    return {key: where[pos] for key, pos in a.iloc[where].groupby(by).indices.items()}


def _items(s: StepSummary) -> pd.DataFrame:
    """One row per request (``end_ns`` = its end + its worker's finish); a worker without request spans is a request
    of its own in the summary (:func:`.segments.containers`)."""
    w = s.workers
    finish = {}
    if len(w):
        last = w["last_end_ns"].to_numpy(dtype=float)
        end = np.fmax(w["end_ns"].to_numpy(dtype=float), last)
        finish = dict(zip(w["worker"].to_numpy(dtype=float), np.nan_to_num(end - last), strict=True))
    r = s.requests
    items = pd.DataFrame(
        {
            "request_span": r["request_span"].to_numpy(dtype=np.int64),
            "worker": r["worker"].to_numpy(dtype=float),
            "start_ns": r["start_ns"].to_numpy(dtype=float),
            "end_ns": r["end_ns"].to_numpy(dtype=float)
            + np.array([finish.get(x, 0.0) for x in r["worker"].to_numpy(dtype=float)]),
            # an aborted request ends when the others complete (over-sampling cuts it then)
            "aborted": r["status"].to_numpy(dtype=object) == "aborted",
        }
    )
    return items


def _usual_parts(s: StepSummary, item: pd.Series, a: pd.DataFrame, rows: np.ndarray, p0: int) -> dict[str, float]:
    """The counterfactual critical request's parts, each net of the anomalies taken away from it."""
    occ = s.occurrences
    x_of = a.iloc[rows].groupby("occ")["x"].sum() if len(rows) else pd.Series(dtype=float)
    rs, w = int(item["request_span"]), item["worker"]
    parts: dict[str, float] = {}
    mine = occ[occ["request_span"].to_numpy() == rs]
    for idx, part, value in zip(mine.index, mine["part"], mine["value_s"], strict=True):
        parts[part] = parts.get(part, 0.0) + float(value) - float(x_of.get(idx, 0.0))
    workerwide = occ[(occ["request_span"].to_numpy() < 0) & (occ["worker"].to_numpy(dtype=float) == w)]
    start_x = sum(float(x_of.get(i, 0.0)) for i in workerwide.index[workerwide["part"] == k.PART_START])
    finish_x = sum(float(x_of.get(i, 0.0)) for i in workerwide.index[workerwide["part"] == k.PART_FINISH])
    finish = workerwide.loc[workerwide["part"] == k.PART_FINISH, "value_s"]
    parts[k.PART_FINISH] = (float(finish.iloc[0]) if len(finish) else 0.0) - finish_x
    parts[k.PART_START] = (float(item["start_ns"]) - p0) / 1e9 - start_x
    return parts


def _int(v: object) -> int | None:
    try:
        f = float(v)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return int(f) if np.isfinite(f) else None
