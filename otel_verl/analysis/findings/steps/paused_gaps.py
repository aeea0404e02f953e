"""A request's wait for a rollout pause taken out of its gap: :func:`with_pauses`.

Why: under the asynchronous trainers a weight sync pauses the rollout (separate-async aborts the calls in flight and
resumes them on the new weights; colocate-async also sleeps the replicas while the trainer trains). A request in
flight then waits, covered by none of its engine, tool or reward spans: between the aborted attempt and its resume,
or before its next turn. That wait is the sync's cost to the rollout, not an unexplained ``gap``: told as a gap it
read "time between a request's spans took N s" on clean runs (most of the asynchronous benchmark's false alarms),
and it hid a slow replica behind a gap (its requests, in flight longer, waited out more syncs).

The decision: the uncovered time of a request that lies inside a rollout pause, plus the resume's lag right after
the pause (at most :data:`RESUME_LAG_S`), is a part of its own, :data:`~.kinds.PART_PAUSE`. It stays in the
request's account (its parts still add up to its duration) and in the step's ``async.rollout_paused_s``, and is
never an anomaly of its own: the weight sync is judged where it happened, as the step's ``update_weights`` part and
its trend. Only what is left is the gap. A request's part that its own spans cover (an engine call parked through a
pause) is excused by its share in the pause instead
(:data:`PAUSED_SHARE`). A streamed analysis sees a part's own
pauses here; pauses read in a later part still excuse a gap through that share.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common import kinds as k

PAUSED_SHARE = 0.5
"""An asynchronous step's occurrence that spent this share of its time in a rollout pause is no anomaly, and no part
of the population its part's norm and its groups' medians are read from (``step_summary._unpaused``)."""

RESUME_LAG_S = 2.0
"""How long after a pause's end a request's wait still belongs to the pause: verl's ``FullyAsyncLLMServerClient``
retries an empty load balancer every 1 s, and the resumed call is submitted again from the worker's event loop."""


def with_pauses(seg: pd.DataFrame, pauses: tuple[np.ndarray, np.ndarray]) -> pd.DataFrame:
    """``seg`` (:func:`~.segments.request_segments`) with each request's paused wait moved from its ``gap`` row to
    a :data:`~.kinds.PART_PAUSE` row (the same request, span row and window as the gap; only where it is > 0)."""
    starts, ends = (np.asarray(x, dtype=np.int64) for x in pauses)
    if not len(starts) or seg.empty:
        return seg
    gap = (seg["part"] == k.PART_GAP).to_numpy()
    spans = seg[~gap].drop_duplicates(["request_span", "span_row"])  # an engine call's split parts share one span
    held = spans.sort_values(["request_span", "start_ns"], kind="stable")
    rs = held["request_span"].to_numpy(dtype=np.int64)
    a, b = held["start_ns"].to_numpy(dtype=np.int64), held["end_ns"].to_numpy(dtype=np.int64)
    g = seg[gap]
    g_rs, g_start, g_end = (g[c].to_numpy(dtype=np.int64) for c in ("request_span", "start_ns", "end_ns"))
    first = np.r_[True, rs[1:] != rs[:-1]] if len(rs) else np.zeros(0, dtype=bool)
    last = np.r_[rs[1:] != rs[:-1], True] if len(rs) else np.zeros(0, dtype=bool)
    bounds = pd.DataFrame({"s": g_start, "e": g_end}, index=g_rs)
    # the uncovered stretches: before each span (from the previous span's end, or the request's start), and after
    # the request's last span; a request with no span is one stretch
    lo = np.where(first, bounds["s"].reindex(rs).to_numpy(dtype=np.int64), np.r_[0, b[:-1]] if len(b) else b)
    stretches = [(rs, lo, a), (rs[last], b[last], bounds["e"].reindex(rs[last]).to_numpy(dtype=np.int64))]
    bare = ~np.isin(g_rs, rs)
    stretches.append((g_rs[bare], g_start[bare], g_end[bare]))
    who = np.concatenate([x[0] for x in stretches])
    s0, s1 = np.concatenate([x[1] for x in stretches]), np.concatenate([x[2] for x in stretches])
    paused = pd.Series(_paused_s(starts, ends, s0, s1)).groupby(who).sum()
    moved = np.minimum(paused.reindex(g_rs).fillna(0.0).to_numpy(), g["value_s"].to_numpy(dtype=float))
    if not (moved > 0).any():
        return seg
    out = seg.copy()
    out.loc[gap, "value_s"] = g["value_s"].to_numpy(dtype=float) - moved
    pause = g[moved > 0].assign(value_s=moved[moved > 0])
    pause["part"] = pd.Series(np.full(len(pause), k.PART_PAUSE, dtype=object), index=pause.index, dtype=object)
    return pd.concat([out, pause], ignore_index=True)


def unpaused_quiet(quiet: pd.DataFrame, pauses: tuple[np.ndarray, np.ndarray]) -> pd.DataFrame:
    """``quiet`` (:func:`~.quiet.quiet_windows`) with each stretch's time in a rollout pause (plus the resume's lag,
    as for a gap) taken out of its ``seconds`` and ``weight``: a worker whose requests waited out a colocate-async
    replica sleep moved nothing for seconds, and that is the pause, not a stall (async_clean, --seed 4242: "worker 3
    stalled ... nothing else moved on it for 3.1 s" inside a weight sync). Sync runs have no pauses: unchanged."""
    starts, ends = (np.asarray(x, dtype=np.int64) for x in pauses)
    if not len(starts) or quiet.empty:
        return quiet
    lo, hi = (quiet[c].to_numpy(dtype=np.int64) for c in ("start_ns", "end_ns"))
    seconds = np.clip(quiet["seconds"].to_numpy(dtype=float) - _paused_s(starts, ends, lo, hi), 0.0, None)
    return quiet.assign(seconds=seconds, weight=seconds * quiet["in_flight"].to_numpy(dtype=float))


def _paused_s(starts: np.ndarray, ends: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Seconds of each stretch ``[lo, hi]`` inside the pauses (disjoint, sorted), plus, when a pause ends inside
    the stretch, the stretch's time after that end up to :data:`RESUME_LAG_S` (the resume's lag)."""
    hi = np.maximum(hi, lo)
    inside = (_before(starts, ends, hi) - _before(starts, ends, lo)) / 1e9
    j = np.searchsorted(ends, hi, side="right") - 1  # the last pause that ended by the stretch's end
    ok = (j >= 0) & (inside > 0)
    end = np.where(ok, ends[np.maximum(j, 0)], hi)
    ok &= end > lo
    lag = np.where(ok, np.minimum((hi - end) / 1e9, RESUME_LAG_S), 0.0)
    return np.minimum(inside + lag, (hi - lo) / 1e9)


def _before(starts: np.ndarray, ends: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Nanoseconds of the pauses before each instant ``t``."""
    whole = np.r_[0, np.cumsum(ends - starts)]
    i = np.searchsorted(starts, t, side="right")  # pauses that started by t
    over = np.where(i > 0, np.clip(ends[np.maximum(i - 1, 0)] - t, 0, None), 0)  # the last one's rest after t
    return whole[i] - over
