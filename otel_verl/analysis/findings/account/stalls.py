"""Stalls: a worker that held its requests still (its process paused, its event loop blocked): :func:`with_stalls`.

A stretch with several requests in flight and nothing starting or ending below the worker,
heavier (seconds × requests in flight) than the run's stretches of nothing moving (:mod:`.quiet`,
:mod:`.baselines`), is a stall, unless the engine's own account says where the time went (queued, prefill,
decoding: each request is then told by its part), the requests were decoding answers far longer than usual, or
every request in flight sat in one part that was slow across the worker and is told as such (a slow reward holds
its requests still together, and is a slow reward). The
stall's seconds are taken from what the stretched parts were blamed for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.account.anomaly_rows import anomaly_rows
from otel_verl.analysis.findings.account.baselines import Baselines
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.chance import run_chance
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.steps.step_statistics import METRIC_SECONDS, METRIC_TOKENS
from otel_verl.analysis.findings.steps.step_summary import StepSummary

UNCOVERED = (k.PART_GAP, k.PART_PAUSE)
"""Parts no span of the request holds (the gap, a wait for a rollout pause): each spans its whole request."""


def with_stalls(s: StepSummary, b: Baselines, th: Thresholds, found: pd.DataFrame) -> pd.DataFrame:
    """Stretches of nothing moving beyond the run's fence, with ``stall_min_in_flight`` requests or more in flight:
    the parts they stretched give that time to a ``stall``, unless the engine or one slow part accounts for it."""
    q = s.quiet
    if q.empty or not np.isfinite(b.stall_fence):
        return found
    q = q[(q["in_flight"].to_numpy() >= th.stall_min_in_flight) & (q["weight"].to_numpy() > b.stall_fence)]
    if q.empty:
        return found
    occ = s.occurrences
    extra = []
    found = found.copy()
    rows_of = _RequestRows(occ)
    starts, ends = occ["start_ns"].to_numpy(), occ["end_ns"].to_numpy()
    for w in q.itertuples(index=False):
        if _engine_accounts_for(occ, w) or _long_answers(occ, w, b):
            continue
        if _one_part_moved(occ, w, b, th) and _told(found, w, occ):
            continue
        overlap_s = np.clip(np.minimum(ends, w.end_ns) - np.maximum(starts, w.start_ns), 0, None) / 1e9
        for req in w.requests:
            rows = rows_of(req)
            if not len(rows) or overlap_s[rows].max() <= 0:
                continue
            i = int(rows[np.argmax(overlap_s[rows])])  # the first of the request's rows that overlapped most
            took = min(float(overlap_s[i]), float(w.seconds))  # a rollout pause's share is not the stall's
            # the stall's seconds come out of what the stretched part was already blamed for
            here = found.index[found["occ"].to_numpy() == i]
            for j in here:
                cut = min(float(found.at[j, "x"]), took)
                found.at[j, "x"] = float(found.at[j, "x"]) - cut
            extra.append(
                anomaly_rows(
                    np.array([i]),
                    k.STALL,
                    occ["part"].iat[i],
                    np.array([took]),
                    k.SCOPE_WORKER,
                    str(w.worker),
                    METRIC_SECONDS,
                    np.array([w.seconds]),
                    np.array([0.0]),
                    chance=run_chance(b.stall_norm.z(np.array([w.weight])), b.stall_norm.count),
                )
            )
    found = found[found["x"].to_numpy(dtype=float) > 0]
    return pd.concat([found, *extra], ignore_index=True) if extra else found


class _RequestRows:
    """A request's occurrence rows (ascending), gap and pause rows left out: a gap row spans its whole request (it is
    the rest, not a time of its own), so it is never the part a stall stretched. Each request's rows are found once,
    not once per stretch (a step's account at 4,096 requests, issue 43)."""

    def __init__(self, occ: pd.DataFrame) -> None:
        self.rows = np.flatnonzero(~np.isin(occ["part"].to_numpy(), UNCOVERED))
        self.requests = occ["request_span"].to_numpy()[self.rows]
        self.found: dict[Any, np.ndarray] = {}

    def __call__(self, request: Any) -> np.ndarray:
        if request not in self.found:
            self.found[request] = self.rows[self.requests == request]
        return self.found[request]


def _one_part_moved(occ: pd.DataFrame, w: Any, b: Baselines, th: Thresholds) -> bool:
    """Whether every request in flight was in the same part and that part was slow across the worker: every
    reward of the worker 100 s slower holds its requests still together, and that is a slow reward. A stall holds
    requests in whatever part they were and leaves the same part alone before and after it: so the worker's
    occurrences of that part outside the stretch decide (slow as a rule there too: the part), and when every one
    of them overlapped it, their typical excess (about the stretch: the part)."""
    held = _holding(occ, w)
    parts = set(occ["part"].to_numpy()[held])
    if len(parts) != 1:
        return False
    (part,) = parts
    mine = (occ["part"].to_numpy() == part) & (occ["worker"].to_numpy(dtype=float) == float(w.worker))
    outside = mine & ((occ["end_ns"].to_numpy() <= w.start_ns) | (occ["start_ns"].to_numpy() >= w.end_ns))
    keys = occ["key"].to_numpy()
    value = occ["value_s"].to_numpy(dtype=float)

    def usual(rows: np.ndarray) -> np.ndarray:
        return np.array([(n.median if (n := b.norm(part, key, METRIC_SECONDS)) else np.nan) for key in keys[rows]])

    if outside.any():
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = value[outside] / usual(outside)
        ratio = ratio[np.isfinite(ratio)]
        return bool(len(ratio) and np.median(ratio) >= th.shift_min_ratio)
    excess = value[mine] - usual(mine)
    excess = excess[np.isfinite(excess)]
    return bool(len(excess) and np.median(excess) >= 0.5 * float(w.seconds))


def _told(found: pd.DataFrame, w: Any, occ: pd.DataFrame) -> bool:
    """Whether the part that held the requests is a cause of its own (beyond its fence): a part seen only in the
    stretch itself (an engine call aborted mid-stall: no tokens, no engine spans) has too few values elsewhere to
    earn a fence, and the stretch is then told as what it is, a stall."""
    held = np.flatnonzero(_holding(occ, w))
    return bool(len(found) and (found["occ"].isin(held) & (found["x"].to_numpy(dtype=float) > 0)).any())


def _long_answers(occ: pd.DataFrame, w: Any, b: Baselines) -> bool:
    """Whether the requests in flight were decoding answers far longer than usual (three times the tokens, as a
    rule): nothing moves while they decode, and that is a long response, not a stall."""
    held = _holding(occ, w) & (occ["part"].to_numpy() == k.PART_DECODE)
    tokens = occ["tokens"].to_numpy(dtype=float)
    held &= np.isfinite(tokens) & (tokens > 0)
    if not held.any():
        return False
    usual = np.array(
        [
            (n.median if (n := b.norm(k.PART_DECODE, key, METRIC_TOKENS)) else np.nan)
            for key in occ["key"].to_numpy()[held]
        ]
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = tokens[held] / usual
    ratio = ratio[np.isfinite(ratio)]
    return bool(len(ratio) and np.median(ratio) >= 3.0)


def _holding(occ: pd.DataFrame, w: Any) -> np.ndarray:
    """Occurrences of the requests in flight that overlap the stretch (a gap row spans its whole request: never)."""
    held = occ["request_span"].isin(list(w.requests)).to_numpy() & (occ["start_ns"].to_numpy() < w.end_ns)
    return held & (occ["end_ns"].to_numpy() > w.start_ns) & (~np.isin(occ["part"].to_numpy(), UNCOVERED))


def _engine_accounts_for(occ: pd.DataFrame, w: Any) -> bool:
    """Whether the engine's own account says where most of the stretch went (queued, prefill, decoding, on the
    way to it): then each request is told by its own part; a paused worker shows in the parts the engine does
    not see (the answer's way back, a tool, a reward, time between spans)."""
    held = occ["request_span"].isin(list(w.requests)).to_numpy() & (occ["start_ns"].to_numpy() <= w.start_ns)
    held = held & (occ["end_ns"].to_numpy() >= w.end_ns) & (~np.isin(occ["part"].to_numpy(), UNCOVERED))
    if not held.any():
        return False
    return bool(occ["by_engine"].to_numpy(dtype=bool)[held].mean() > 0.5)
