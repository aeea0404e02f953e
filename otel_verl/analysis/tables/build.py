"""The derived tables one analysis shares (steps, workers, requests, events, per-worker event seconds).

Why one object: figures and detectors must agree on what a step's rollout or a worker's barrier wait
is, and at 2M spans each table is expensive enough to build once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from otel_verl.analysis.tables import derived as model


@dataclass
class Tables:
    """Derived tables computed once per analysis."""

    spans: pd.DataFrame
    steps: pd.DataFrame
    workers: pd.DataFrame
    requests: pd.DataFrame
    events: pd.DataFrame

    @classmethod
    def build(cls, spans: pd.DataFrame) -> Tables:
        sp = model.training_spans(spans)  # once: each table used to filter (and copy) the span table again
        steps = model.steps_table(spans, sp=sp)
        workers = model.workers_table(spans, sp=sp)
        return cls(
            spans,
            steps,
            workers,
            model.requests_table(spans, sp=sp, steps=steps, workers=workers),
            model.events_table(spans, sp=sp),
        )

    @cached_property
    def dominant_event_rows(self) -> pd.Series:
        """Row label in ``events`` of each request's longest event, by request span row (one groupby for all)."""
        ev = self.events
        if ev.empty:
            return pd.Series(dtype=np.int64)
        return ev["duration"].groupby(ev["request_span"].to_numpy()).idxmax()

    @cached_property
    def worker_seconds(self) -> pd.DataFrame:
        """Seconds per (step, worker, event bucket): see
        :func:`otel_verl.analysis.tables.worker_seconds.worker_event_seconds`."""
        from otel_verl.analysis.tables.worker_seconds import worker_event_seconds

        return worker_event_seconds(self.spans, self.workers)

    @property
    def median_rollout_s(self) -> float:
        vals = pd.to_numeric(self.steps["rollout_s"], errors="coerce").to_numpy(dtype=float)
        return float(np.nanmedian(vals)) if np.isfinite(vals).any() else float("nan")

    @cached_property
    def median_worker_s(self) -> pd.Series:
        """Median worker rollout seconds per step."""
        if self.workers.empty:
            return pd.Series(dtype=float)
        return self.workers.groupby("step")["duration"].median()
