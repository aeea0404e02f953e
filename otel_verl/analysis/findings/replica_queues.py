"""replica_imbalance and engine_queueing: engine calls waiting in the engine's queue, per step and replica.

verl's load balancer sends every turn of a conversation to the replica its first turn went to (sticky
sessions, verl#6533): long conversations pinned to one replica make it queue while another idles. From the
engine's own spans (``gen_ai.latency.time_in_queue`` and ``verl.engine.replica``, joined to our calls):

- ``replica_imbalance``: in one step one replica's calls queued ≥ ``replica_queue_min_s`` in total and hold
  ≥ ``replica_queue_share`` of the step's queued seconds, while another replica of the run queued almost
  nothing; says how long that replica sat idle meanwhile and how the conversations were spread.
- ``engine_queueing``: otherwise, a step whose engine calls spent ≥ ``engine_queue_fraction`` of their time
  queued (and ≥ ``replica_queue_min_s``): the engine(s) ran at capacity.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.record import Finding, evidence, fmt_s
from otel_verl.analysis.findings.thresholds import Thresholds, severity
from otel_verl.analysis.tables import Tables

QUEUED_S = 0.1
"""A call counts as queued when it waited at least this long in the engine's queue."""


def _idle_s(intervals: np.ndarray, lo: int, hi: int) -> float:
    """Seconds of [lo, hi] (ns) covered by none of ``intervals`` (rows of [start, end] ns)."""
    covered, cursor = 0, lo
    for start, end in intervals[np.argsort(intervals[:, 0])] if len(intervals) else ():
        start, end = max(int(start), cursor), min(int(end), hi)
        if end > start:
            covered += end - start
            cursor = end
    return max(0, (hi - lo) - covered) / 1e9


def find_replica_queues(t: Tables, th: Thresholds) -> list[Finding]:
    calls = t.engine_calls
    keep = calls["joined"].to_numpy(dtype=bool) & calls["step"].notna().to_numpy()
    keep &= ~calls["validate"].to_numpy(dtype=bool)
    c = calls.loc[keep]
    if c.empty:
        return []
    replicas = sorted(c["replica"].astype(str).unique())
    out: list[Finding] = []
    for step, s in c.groupby("step"):
        queued = s.groupby("replica")["engine_queue_s"].sum().reindex(replicas, fill_value=0.0)
        total = float(queued.sum())
        if total < th.replica_queue_min_s:
            continue
        worst = str(queued.idxmax())
        w = s[s["replica"] == worst]
        calm = [r for r in replicas if r != worst and queued[r] <= 0.1 * queued[worst]]
        if len(replicas) > 1 and queued[worst] >= th.replica_queue_share * total and calm:
            out.append(_imbalance(t, th, int(step), s, w, worst, calm, float(queued[worst])))
        elif total >= th.engine_queue_fraction * float(s["call_s"].sum()):
            out.append(_saturated(t, th, int(step), s, total))
    return out


def _spread(s: pd.DataFrame, replica: str) -> str:
    r = s[s["replica"] == replica]
    conversations = r["request_span"].nunique()
    per = len(r) / conversations if conversations else 0.0
    return f"{replica} served {len(r)} calls of {conversations} conversations ({per:.1f} turns each)"


def _imbalance(
    t: Tables, th: Thresholds, step: int, s: pd.DataFrame, w: pd.DataFrame, worst: str, calm: list[str], q: float
) -> Finding:
    lo = int((w["start_ns"]).min())
    hi = int(w.loc[w["engine_queue_s"] >= QUEUED_S, "end_ns"].max()) if (w["engine_queue_s"] >= QUEUED_S).any() else lo
    idle = {}
    for r in calm:
        mine = s.loc[s["replica"] == r, ["start_ns", "end_ns"]].to_numpy(dtype=np.int64)
        idle[r] = _idle_s(mine, lo, hi)
    other = max(idle, key=lambda r: idle[r])
    n_queued = int((w["engine_queue_s"] >= QUEUED_S).sum())
    longest = w.loc[w["engine_queue_s"].idxmax()]
    message = (
        f"step {step}: replica {worst} queued {n_queued} engine calls for {fmt_s(q)} in total (longest "
        f"{fmt_s(float(longest['engine_queue_s']))}) while replica {other} queued "
        f"{fmt_s(float(s.loc[s['replica'] == other, 'engine_queue_s'].sum()))} and sat idle {fmt_s(idle[other])} "
        f"of that time; {_spread(s, worst)}, {_spread(s, other)}: verl's sticky sessions keep every turn of a "
        f"conversation on the replica of its first turn (verl#6533)"
    )
    return Finding(
        kind="replica_imbalance",
        severity=severity(float(longest["engine_queue_s"]), t.median_rollout_s, th, th.replica_queue_min_s),
        step=step,
        event="queue",
        metric="replica_queue_s",
        value=q,
        baseline=float(s.loc[s["replica"] == other, "engine_queue_s"].sum()),
        impact_s=float(longest["engine_queue_s"]),
        evidence=evidence(longest["trace_id"], longest["call_span_id"])
        + evidence(longest["trace_id"], longest["span_id"]),
        details={
            "replica": worst,
            "idle_replica": other,
            "idle_s": idle[other],
            "queued_calls": n_queued,
            "queued_s_by_replica": {str(k): float(v) for k, v in s.groupby("replica")["engine_queue_s"].sum().items()},
            "calls_by_replica": {str(k): int(v) for k, v in s["replica"].value_counts().items()},
        },
        message=message,
    )


def _saturated(t: Tables, th: Thresholds, step: int, s: pd.DataFrame, total: float) -> Finding:
    longest = s.loc[s["engine_queue_s"].idxmax()]
    call_s = float(s["call_s"].sum())
    n_queued = int((s["engine_queue_s"] >= QUEUED_S).sum())
    return Finding(
        kind="engine_queueing",
        severity=severity(float(longest["engine_queue_s"]), t.median_rollout_s, th, th.replica_queue_min_s),
        step=step,
        event="queue",
        metric="engine_queue_s",
        value=total,
        baseline=call_s,
        impact_s=float(longest["engine_queue_s"]),
        evidence=evidence(longest["trace_id"], longest["call_span_id"])
        + evidence(longest["trace_id"], longest["span_id"]),
        details={
            "queued_calls": n_queued,
            "calls": len(s),
            "queue_fraction": total / call_s if call_s else None,
            "queued_s_by_replica": {str(k): float(v) for k, v in s.groupby("replica")["engine_queue_s"].sum().items()},
        },
        message=(
            f"step {step}: engine calls spent {fmt_s(total)} queued in the engine ({total / call_s:.0%} of their "
            f"{fmt_s(call_s)}; {n_queued} of {len(s)} calls queued, longest "
            f"{fmt_s(float(longest['engine_queue_s']))}): "
            "the engine ran at capacity (vLLM max_num_seqs or KV cache)"
        ),
    )
