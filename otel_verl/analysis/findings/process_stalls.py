"""Process stalls: a worker process paused (CPU starvation, GC, a blocked event loop) and then finished
everything it had been holding at once.

The pattern: slow spans of several different requests, started at different times, all end within a
few milliseconds of each other, after a stretch in which nothing else on that worker ended. Every one
of them is "far above its norm", but the culprit is the pause, not N slow preprocess calls: it is
reported once, as an ``idle_gap`` finding with ``details.pattern = "process_stall"``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.record import Finding, evidence, fmt_s
from otel_verl.analysis.findings.thresholds import Thresholds, severity
from otel_verl.analysis.tables import Tables

SPREAD_RATIO = 4.0
"""The burst's spans started at least this many times further apart than they ended (else they are
simply equally slow, e.g. one planted slow reward on every rollout of a sample)."""
QUIET_SHARE = 0.5
"""Nothing else on the worker ended for at least this share of the spans' typical excess."""
WORKER_KINDS = ("request", "engine", "tool", "tool_parse", "preprocess", "reward")
"""Spans the worker process itself ends (unknown spans may come from the engine or reward actors)."""


def find_process_stalls(t: Tables, th: Thresholds, flagged: pd.DataFrame) -> tuple[list[Finding], pd.DataFrame]:
    """Stall findings, and the flagged spans they do not explain."""
    out: list[Finding] = []
    taken: list[int] = []
    ok = flagged["step"].notna() & flagged["worker"].notna() if len(flagged) else pd.Series(dtype=bool)
    for (step, worker), g in flagged[ok].groupby(["step", "worker"]) if len(flagged) else ():
        g = g.sort_values("end_ns")
        ends = g["end_ns"].to_numpy(dtype=np.int64)
        cut = np.flatnonzero(np.diff(ends) > th.stall_burst_s * 1e9) + 1
        for idx in np.split(np.arange(len(g)), cut):
            burst = g.iloc[idx]
            found = _stall(t, th, int(step), int(worker), burst)
            if found is not None:
                out.append(found)
                taken.extend(burst.index)
    return out, flagged.drop(index=taken)


def _ends_before(t: Tables, step: int, worker: int, before: int) -> int | None:
    """Latest end of a span the worker process recorded, strictly before ``before`` (ns)."""
    best = None
    for table, kinds in ((t.events, WORKER_KINDS), (t.requests, None)):
        if table.empty:
            continue
        m = (table["step"] == step) & (table["worker"] == worker) & (table["end_ns"] < before)
        if kinds is not None:
            m &= table["kind"].isin(kinds)
        m = m.fillna(False).to_numpy(dtype=bool)
        if m.any():
            e = int(table["end_ns"].to_numpy()[m].max())
            best = e if best is None else max(best, e)
    return best


def _stall(t: Tables, th: Thresholds, step: int, worker: int, burst: pd.DataFrame) -> Finding | None:
    reqs = burst.loc[burst["request_span"] >= 0, "request_span"].nunique()
    if reqs < th.stall_min_requests:
        return None
    starts = burst["start_ns"].to_numpy(dtype=np.int64)
    ends = burst["end_ns"].to_numpy(dtype=np.int64)
    start_spread, end_spread = int(starts.max() - starts.min()), int(ends.max() - ends.min())
    if start_spread <= 0 or start_spread < SPREAD_RATIO * end_spread:
        return None
    w = t.workers[(t.workers["step"] == step) & (t.workers["worker"] == worker)]
    w0 = int(w["start_ns"].iloc[0]) if len(w) else int(starts.min())
    release = int(ends.min())
    before = _ends_before(t, step, worker, release - 1_000_000)
    quiet_from = max(before, w0) if before is not None else w0
    quiet_s = (release - quiet_from) / 1e9
    excess = (burst["value"] - burst["baseline"]).to_numpy(dtype=float)
    if quiet_s < QUIET_SHARE * float(np.median(excess)):
        return None
    stall_s = min(quiet_s, float(excess.max()))
    limit = max(th.idle_gap_min_s, th.idle_gap_rel * float(t.median_worker_s.get(step, 0.0)))
    sev = severity(stall_s, t.median_rollout_s, th, limit)
    events = Counter(str(e) for e in burst["event"])
    what = ", ".join(f"{e} ×{n}" for e, n in events.most_common())
    rel = lambda ns: (ns - w0) / 1e9  # noqa: E731
    wrow = w.iloc[0] if len(w) else None
    ev = evidence(wrow["trace_id"], wrow["span_id"]) if wrow is not None else []
    ev += [e for _, x in burst.nlargest(4, "value").iterrows() for e in evidence(x["trace_id"], x["span_id"])]
    kinds = " / ".join(dict.fromkeys("slow " + str(e).split(" ")[0] for e in events))
    return Finding(
        kind="idle_gap",
        severity=sev,
        step=step,
        worker=worker,
        metric="process_stall_s",
        value=stall_s,
        baseline=limit,
        impact_s=stall_s,
        evidence=ev,
        window_ns=(quiet_from, release),
        details={
            "pattern": "process_stall",
            "gap_start_s": rel(quiet_from),
            "gap_end_s": rel(release),
            "spans": len(burst),
            "requests": int(reqs),
            "events": dict(events),
            "started_from_s": rel(int(starts.min())),
            "started_to_s": rel(int(starts.max())),
            "release_spread_s": end_spread / 1e9,
            "request_ids": [r for r in dict.fromkeys(burst["request_id"]) if isinstance(r, str)][:20],
        },
        message=(
            f"worker {worker} in step {step}: its process stalled for about {fmt_s(stall_s)} (from "
            f"{fmt_s(rel(quiet_from))} to {fmt_s(rel(release))} after the worker started): nothing on the worker "
            f"finished, then {len(burst)} spans of {reqs} requests ({what}) that had started between "
            f"{fmt_s(rel(int(starts.min())))} and {fmt_s(rel(int(starts.max())))} all ended within "
            f"{max(1, round(end_spread / 1e6))} ms of each other; a process-wide pause (CPU starvation, GC or "
            f"a blocked event loop), not {kinds}"
        ),
    )
