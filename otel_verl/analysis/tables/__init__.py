"""Tables stage: the span table → the derived tables one analysis shares, built once (:class:`Tables`).

==================  ==========================================================================
module              table
==================  ==========================================================================
training_spans      the spans a training analysis looks at (with a step, no validation)
kind_codes          the span kind of each row as a code, for the builders' row masks
steps               one row per step: bounds, rollout window
workers             one row per (step, worker): rollout window, requests, barrier wait
requests            one row per request, sampled-out ones included (:mod:`.sampled_out`)
events              the work inside requests (engine, tool, reward...) with a readable label
worker_seconds      seconds of each worker's step per event bucket (concurrency-aware)
turns               engine seconds per turn
aborted             aborted requests and the time and tokens they threw away, per step
engine_calls        the engine's own span per call, joined to ours: queued / prefill / decode (per turn too)
baseline            the robust norm (median, MAD) "far above" is judged by
==================  ==========================================================================

Why one object: figures and detectors must agree on what a step's rollout or a worker's barrier wait
is, and at 2M spans each table is expensive enough to build once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from otel_verl.analysis.tables.events import events_table
from otel_verl.analysis.tables.kind_codes import Kinds
from otel_verl.analysis.tables.requests import requests_table
from otel_verl.analysis.tables.steps import steps_table
from otel_verl.analysis.tables.training_spans import training_spans
from otel_verl.analysis.tables.workers import workers_table


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
        sp = training_spans(spans)  # once: each table used to filter (and copy) the span table again
        kinds = Kinds(sp)  # once: each table compared the kind strings again
        steps = steps_table(spans, sp=sp, kinds=kinds)
        workers = workers_table(spans, sp=sp, kinds=kinds)
        return cls(
            spans,
            steps,
            workers,
            requests_table(spans, sp=sp, steps=steps, workers=workers, kinds=kinds),
            events_table(spans, sp=sp, kinds=kinds),
        )

    @cached_property
    def worker_seconds(self) -> pd.DataFrame:
        """Seconds per (step, worker, event bucket): see
        :func:`otel_verl.analysis.tables.worker_seconds.worker_event_seconds`."""
        from otel_verl.analysis.tables.worker_seconds import worker_event_seconds

        return worker_event_seconds(self.spans, self.workers)

    @cached_property
    def engine_calls(self) -> pd.DataFrame:
        """The engine's ``llm_request`` spans joined to our calls: :mod:`.engine_calls`."""
        from otel_verl.analysis.tables.engine_calls import engine_calls_table

        return engine_calls_table(self)

    @cached_property
    def engine_turns(self) -> pd.DataFrame:
        """Per turn: queued / prefill / decode... seconds of its engine calls: :mod:`.engine_calls`."""
        from otel_verl.analysis.tables.engine_calls import engine_turns_table

        return engine_turns_table(self)

    @property
    def median_rollout_s(self) -> float:
        vals = pd.to_numeric(self.steps["rollout_s"], errors="coerce").to_numpy(dtype=float)
        return float(np.nanmedian(vals)) if np.isfinite(vals).any() else float("nan")
