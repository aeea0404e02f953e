"""tail_request: requests beyond their step's P99 and far above its median, named with the event that
dominated them."""

from __future__ import annotations

from typing import Any

import pandas as pd

from otel_verl.analysis.findings.record import Finding, event_phrase, evidence, fmt_s
from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.analysis.tables import Tables


def find_tail_requests(t: Tables, th: Thresholds) -> list[Finding]:
    """Requests beyond the step's P99 (and far above its median), named with the event that dominated them."""
    out: list[Finding] = []
    for step, grp in t.requests.groupby("step"):
        if len(grp) < 10:
            continue
        q = float(grp["duration"].quantile(th.tail_quantile))
        med = float(grp["duration"].median())
        tail = grp[(grp["duration"] > q) & (grp["duration"] >= th.tail_ratio * med)]
        for _, row in tail.nlargest(th.tail_max_per_step, "duration").iterrows():
            label, dur, turn, tid, sid = t.dominant_event(int(row["request_row"]))
            d = float(row["duration"])
            dom = f"; {fmt_s(dur)} of it ({dur / d:.0%}) in {event_phrase(label, turn)}" if label else ""
            out.append(
                Finding(
                    kind="tail_request",
                    severity="info",
                    step=int(step),
                    worker=_opt_int(row["worker"]),
                    request_id=str(row["request_id"]),
                    event=label or None,
                    metric="duration_s",
                    value=d,
                    baseline=q,
                    impact_s=d - med,
                    evidence=evidence(row["trace_id"], row["span_id"]) + evidence(tid, sid),
                    details={"p50_s": med, "turn_index": turn},
                    window_ns=(int(row["start_ns"]), int(row["end_ns"])),
                    message=f"request {row['request_id']} (worker {_opt_int(row['worker'])}, step {step}) took "
                    f"{fmt_s(d)}, above the step's P{th.tail_quantile * 100:g} of {fmt_s(q)}{dom}",
                )
            )
    return out


def _opt_int(v: Any) -> int | None:
    return None if pd.isna(v) else int(v)
