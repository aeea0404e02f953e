"""straggler_worker: a worker finishing far after the step's median worker, with why (its idle gap or stall,
its last request's main event, or the event it spent longest in) and what the others paid at the barrier."""

from __future__ import annotations

from typing import Any

import numpy as np

from otel_verl.analysis.findings.record import Finding, event_phrase, evidence, fmt_s
from otel_verl.analysis.findings.thresholds import Thresholds, severity
from otel_verl.analysis.tables import Tables


def find_stragglers(t: Tables, th: Thresholds, gaps: list[Finding]) -> list[Finding]:
    """Workers finishing far after the step's median worker, with what the others paid at the barrier."""
    out: list[Finding] = []
    for step, grp in t.workers.groupby("step"):
        if len(grp) < 2:
            continue
        rel_end = (grp["end_ns"] - grp["start_ns"].min()) / 1e9
        med_end = float(np.median(rel_end))
        limit = max(th.straggler_min_s, th.straggler_rel * float(np.median(grp["duration"])))
        for idx in grp.index[(rel_end - med_end) >= limit]:
            row = grp.loc[idx]
            worker = int(row["worker"])
            excess = float(rel_end[idx] - med_end)
            others = grp[grp.index != idx]
            wait = float(others["barrier_s"].sum()) if others["barrier_s"].notna().any() else float("nan")
            waited = (
                f"; the other {len(others)} workers waited {fmt_s(wait)} in total at the barrier"
                if np.isfinite(wait)
                else ""
            )
            out.append(
                Finding(
                    kind="straggler_worker",
                    severity=severity(excess, t.median_rollout_s, th, limit),
                    step=int(step),
                    worker=worker,
                    metric="finish_after_median_s",
                    value=excess,
                    baseline=med_end,
                    impact_s=excess,
                    evidence=evidence(row["trace_id"], row["span_id"]),
                    details={"others_barrier_wait_s": wait},
                    message=(
                        f"worker {worker} finished {fmt_s(excess)} after the median worker in step {step}"
                        f"{_cause(t, step, worker, excess, gaps)}{waited}"
                    ),
                )
            )
    return out


def _cause(t: Tables, step: Any, worker: int, excess: float, gaps: list[Finding]) -> str:
    """Why a straggler was late: its largest idle gap or process stall, else its last request's main event."""
    mine = [g for g in gaps if g.step == step and g.worker == worker]
    if mine:
        g = max(mine, key=lambda f: f.value)
        what = "a process stall" if g.details.get("pattern") == "process_stall" else "one idle gap"
        return (
            f"; {min(1.0, g.value / excess):.0%} of that is {what} from {fmt_s(g.details['gap_start_s'])} to "
            f"{fmt_s(g.details['gap_end_s'])}"
        )
    reqs = t.requests[((t.requests["step"] == step) & (t.requests["worker"] == worker)).fillna(False)]
    if len(reqs):
        last = reqs.loc[reqs["end_ns"].idxmax()]
        label, dur, turn, _, _ = t.dominant_event(int(last["request_row"]))
        if label:
            return f"; its last request {last['request_id']} spent {fmt_s(dur)} in {event_phrase(label, turn)}"
    return _bucket_cause(t, step, worker)


def _bucket_cause(t: Tables, step: Any, worker: int) -> str:
    """For logs without requests: the event that took this worker longest compared with the step's median worker."""
    ws = t.worker_seconds
    ws = ws[(ws["step"] == step) & ~ws["event"].isin(("barrier", "idle"))] if len(ws) else ws
    if ws.empty:
        return ""
    wide = ws.pivot_table(index="worker", columns="event", values="seconds", aggfunc="sum").fillna(0.0)
    if worker not in wide.index or len(wide) < 2:
        return ""
    excess = wide.loc[worker] - wide.median()
    event = str(excess.idxmax())
    if excess[event] <= 0:
        return ""
    return f"; its {event} took {fmt_s(wide.loc[worker, event])}, the median worker's {fmt_s(wide[event].median())}"
