"""Run every detector on the shared tables and order the result: :func:`diagnose`.

The detectors depend on each other in one way only: idle gaps and process stalls come first, because a
straggler is explained by its gap and a span a gap stretched is not a slow event of its own. Each
detector module is named after what it finds (``findings/<module>.py`` → finding kind):

=========================  ==================  ======================================================
module                     kind                finds
=========================  ==================  ======================================================
idle_gaps                  idle_gap            requests in flight, nothing moving on a worker
process_stalls             idle_gap (stall)    a paused process releasing a burst of spans at once
stragglers                 straggler_worker    a worker finishing far after the step's median worker
slow_steps                 slow_step           a step far slower than the others
tail_requests              tail_request        requests beyond the step's P99
slow_events                slow_event          reward/tool/preprocess spans far above their norm
turn_anomalies             turn_anomaly        turns whose engine time is far above their index's norm
aborted_waste              aborted_waste       time and tokens of aborted (over-sampled) requests
worker_died_mid_step       incomplete_worker   request spans whose worker span never arrived
worker_absent_from_step    missing_worker      a rank seen in other steps sent nothing in this one
engine_phases              engine_phase        a slow turn's engine call split by the engine's own account
replica_queues             replica_imbalance   one engine replica queues while another idles (or engine_queueing)
engine_orphans             engine_orphans      engine spans without our engine call as parent
=========================  ==================  ======================================================

:mod:`.causes` then groups them into one finding per cause and :mod:`.verdict` writes the headlines.
"""

from __future__ import annotations

import pandas as pd

from otel_verl.analysis.findings import process_stalls
from otel_verl.analysis.findings.aborted_waste import find_aborted_waste
from otel_verl.analysis.findings.causes import group_causes
from otel_verl.analysis.findings.engine_orphans import find_engine_orphans
from otel_verl.analysis.findings.engine_phases import find_engine_phases
from otel_verl.analysis.findings.flagged_spans import empty_flags, fold_into_gaps, group_findings
from otel_verl.analysis.findings.idle_gaps import find_idle_gaps
from otel_verl.analysis.findings.record import Finding, sort_findings
from otel_verl.analysis.findings.replica_queues import find_replica_queues
from otel_verl.analysis.findings.slow_events import flag_slow_events
from otel_verl.analysis.findings.slow_steps import find_slow_steps
from otel_verl.analysis.findings.stragglers import find_stragglers
from otel_verl.analysis.findings.tail_requests import find_tail_requests
from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.analysis.findings.turn_anomalies import flag_turns
from otel_verl.analysis.findings.worker_absent_from_step import find_missing_workers
from otel_verl.analysis.findings.worker_died_mid_step import find_incomplete_workers
from otel_verl.analysis.tables import Tables


def flag_all(t: Tables, th: Thresholds) -> pd.DataFrame:
    """Every slow event and turn anomaly candidate, one row per span (or turn)."""
    parts = [f for f in (flag_slow_events(t, th), flag_turns(t, th)) if len(f)]
    return pd.concat(parts, ignore_index=True) if parts else empty_flags()


def diagnose(t: Tables, thresholds: Thresholds | None = None) -> list[Finding]:
    """One finding per cause (:mod:`.causes`), ranked by the seconds of step time it lost; each cause's
    ``symptoms`` are the other detectors' findings it explains."""
    return group_causes(t, detect(t, thresholds))


def detect(t: Tables, thresholds: Thresholds | None = None) -> list[Finding]:
    """Every detector, capped per kind, sorted by severity then impact (before grouping into causes)."""
    th = thresholds or Thresholds()
    gaps = find_idle_gaps(t, th)
    flagged = flag_all(t, th)
    # what a slow event cost is measured against the worker's unaffected requests (no anomaly, gap or stall)
    flagged_rows = {int(r) for r in flagged["request_span"] if r >= 0}
    flagged = fold_into_gaps(flagged, gaps, th)
    stall_found, flagged = process_stalls.find_process_stalls(t, th, flagged)
    stragglers = find_stragglers(t, th, gaps + stall_found)
    found = (
        gaps
        + stall_found
        + stragglers
        + find_slow_steps(t, th, stragglers)
        + find_tail_requests(t, th)
        + group_findings(t, th, flagged, flagged_rows)
        + find_aborted_waste(t, th)
        + find_incomplete_workers(t.spans)
        + find_missing_workers(t)
        + find_engine_phases(t, th)
        + find_replica_queues(t, th)
        + find_engine_orphans(t, th)
    )
    capped: list[Finding] = []
    per_kind: dict[str, int] = {}
    for f in sort_findings(found):
        per_kind[f.kind] = per_kind.get(f.kind, 0) + 1
        if per_kind[f.kind] <= th.max_findings_per_kind:
            capped.append(f)
    return capped
