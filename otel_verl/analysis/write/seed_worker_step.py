"""The seed's once-per-worker-step events, derived from a (step, worker)'s spans for ``export-legacy``.

The seed's ``_req_level_generate_sequences`` logs, per worker and step, ``preprocessing_duration``
(turning the batch into requests), ``async_generate_duration`` (all its requests), ``barrier_wait_duration``
and ``total_step_duration`` (the whole call). Its step scripts read exactly one of each per worker-step:
``overview_duration.py`` takes the slowest worker's total per step, ``event_persentage_step.py`` divides
the three phases by the total, ``per_step_all_workers.py`` keeps the last value of each event.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from otel_verl.analysis.read.seed import events as le


@dataclass
class WorkerStepTimes:
    """Time bounds (ns) of one worker-step, gathered while its spans are exported."""

    start: int | None = None
    """Start of its rollout (the worker span; else its earliest line)."""
    rollout_end: int | None = None
    """End of its rollout (the worker span)."""
    first_request: int | None = None
    last_end: int | None = None
    """End of its last line, the barrier wait and what follows it included."""
    barrier_s: float = 0.0
    barrier_end: int | None = None
    earliest: int | None = None
    """Earliest start of a line before the barrier (the rollout start when there is no worker span)."""

    def see(self, kind: str, start: int, end: int, duration: float) -> None:
        if kind == "worker":
            self.start = start if self.start is None else min(self.start, start)
            self.rollout_end = end if self.rollout_end is None else max(self.rollout_end, end)
        elif kind in ("request", "aborted"):
            self.first_request = start if self.first_request is None else min(self.first_request, start)
        elif kind == "barrier":
            self.barrier_s += duration
            self.barrier_end = end if self.barrier_end is None else max(self.barrier_end, end)
        self.last_end = end if self.last_end is None else max(self.last_end, end)
        if kind != "barrier":
            self.earliest = start if self.earliest is None else min(self.earliest, start)


def missing_events(times: WorkerStepTimes, present: set[str]) -> list[tuple[int, str, float]]:
    """(end ns, event, seconds) of each of :data:`~otel_verl.analysis.read.seed.events.WORKER_STEP_EVENTS` not in
    ``present``: preprocessing = rollout start → first request, generate = first request → rollout end,
    barrier = the barrier spans (0 s at the rollout end without one), total = rollout start → last line."""
    start = times.start if times.start is not None else times.earliest
    if start is None or times.last_end is None:
        return []
    rollout_end = times.rollout_end if times.rollout_end is not None else times.last_end
    first = times.first_request if times.first_request is not None else start
    first = min(max(first, start), rollout_end)
    barrier_end = times.barrier_end if times.barrier_end is not None else rollout_end
    made = {
        le.PREPROCESS: (first, (first - start) / 1e9),
        le.ASYNC_GENERATE: (rollout_end, (rollout_end - first) / 1e9),
        le.BARRIER: (barrier_end, times.barrier_s),
        le.TOTAL_STEP: (times.last_end, (times.last_end - start) / 1e9),
    }
    return [(end, event, secs) for event, (end, secs) in made.items() if event not in present]


def entry(end_iso: str, event: str, seconds: float, worker: int, step: int) -> dict[str, Any]:
    """A seed line with the logger's key order: timestamp, event, duration_sec, workid, step."""
    return {"timestamp": end_iso, "event": event, "duration_sec": seconds, "workid": worker, "step": step}
