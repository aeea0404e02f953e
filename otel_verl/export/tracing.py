"""This process's tracing state: what its setup built (:class:`TracingState`), and how code finds it.

Kept apart from :mod:`otel_verl.export.provider` (which builds it) so the recorder and the background
flush can read it without importing the exporters. ``get_state`` checks the pid: a forked child sees
no state, and builds its own provider instead of writing through its parent's exporter threads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter

from otel_verl.config import OtelVerlConfig
from otel_verl.export.hold import SpanHold
from otel_verl.export.journal import JournalingExporter
from otel_verl.export.spool import SpoolSpanExporter
from otel_verl.recording.spans import SCOPE_NAME
from otel_verl.version import __version__


class SpanCounter(SpanProcessor):
    """Counts spans handed to the processors (created and ended), for the run's ``*.counts`` file."""

    def __init__(self) -> None:
        self.count = 0

    def on_end(self, span: ReadableSpan) -> None:
        self.count += 1  # one int add under the GIL; exact enough for a completeness check


@dataclass
class TracingState:
    """What ``setup_tracing`` built in this process."""

    provider: TracerProvider
    processors: list[SpanProcessor]
    config: OtelVerlConfig
    role: str
    run_id: str
    pid: int
    owns_global: bool
    spool: SpoolSpanExporter | None = None
    exporters: list[SpanExporter] = field(default_factory=list)
    journaled: JournalingExporter | None = None
    """The live OTLP exporter wrapped with the delivery journal (only when a spool is written)."""
    ended: SpanCounter | None = None
    hold: SpanHold | None = None
    """Request spans waiting for their rollout chunk to end (:mod:`otel_verl.export.hold`)."""
    owns_provider: bool = True
    """False: the provider was handed in (:mod:`otel_verl.export.given_provider`); flushed, never shut down."""


_state: TracingState | None = None


def get_state() -> TracingState | None:
    """The current process's state, or None (not set up, or inherited across a fork)."""
    state = _state
    return state if state is not None and state.pid == os.getpid() else None


def set_state(state: TracingState | None) -> None:
    """Install (or drop) this process's state: :mod:`otel_verl.export.provider` only."""
    global _state
    _state = state


def current_config() -> OtelVerlConfig:
    """This process's otel_verl settings: its tracing setup's, or the environment's before setup."""
    state = get_state()
    return state.config if state is not None else OtelVerlConfig()


def tracer() -> trace.Tracer:
    state = get_state()
    provider = state.provider if state is not None else trace.get_tracer_provider()
    return provider.get_tracer(SCOPE_NAME, __version__)
