"""Workers that never finished a step: a process died (OOM, SIGKILL, node loss) in the middle of it.

The worker span ends when the worker's chunk ends, so a dead worker leaves request spans (flushed
while it ran) whose parent, the worker span, is nowhere in the data. Everything after the worker's
last flush is lost; the finding says how much survived, and the other detectors keep working on the
rest (the analyzer must report a broken run, not fail on it).
"""

from __future__ import annotations

import pandas as pd

from otel_verl import semconv
from otel_verl.analysis.findings.common import kinds
from otel_verl.analysis.findings.common.record import Finding, evidence
from otel_verl.analysis.read.id_lookup import lookup


def find_incomplete_workers(spans: pd.DataFrame) -> list[Finding]:
    if spans.empty or "parent_id" not in spans:
        return []
    names = spans["name"]
    requests = spans[names == semconv.SPAN_REQUEST]
    parents = requests["parent_id"]
    # a request's parent is its worker span: looked up among the worker spans first, and only the parents not
    # found there among every span (hash lookups: a set of every id + isin was far slower, docs/performance.md)
    unknown = lookup(parents, spans.loc[names == semconv.SPAN_WORKER, "span_id"]) < 0
    if unknown.any():
        unknown[unknown] = lookup(parents[unknown], spans["span_id"]) < 0
    orphans = requests[(parents.notna() & (parents != "")).to_numpy() & unknown]
    found = []
    for parent, group in orphans.groupby("parent_id", sort=False):
        step = _int(group["step"].dropna().iloc[0]) if "step" in group and group["step"].notna().any() else None
        worker = _int(group["worker"].dropna().iloc[0]) if "worker" in group and group["worker"].notna().any() else None
        who = f"worker {worker}" if worker is not None else "a worker"
        when = f" in step {step}" if step is not None else ""
        found.append(
            Finding(
                kind=kinds.INCOMPLETE_WORKER,
                severity="critical",
                message=(
                    f"{who}{when} never finished: its worker span is missing while {len(group)} of its requests "
                    "were recorded; the process died or was killed mid-step, so its spans after the last flush are "
                    "lost and timings of that step are incomplete"
                ),
                metric="requests_recorded",
                value=float(len(group)),
                step=step,
                worker=worker,
                evidence=evidence(group["trace_id"].iloc[0], group["span_id"].iloc[0]),
                details={"missing_worker_span_id": str(parent)},
            )
        )
    return found


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
