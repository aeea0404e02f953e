"""Fixtures: an in-memory exporter behind otel_verl's own provider, instrumented verl."""

from __future__ import annotations

import os

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_verl
from otel_verl.export import flush, provider
from tests.process_state import reset_tracing

pytest.importorskip("verl", reason="needs the verl extra")


@pytest.fixture
def memory_exporter(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OTEL_VERL_SPOOL", "false")
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    reset_tracing()
    exporter = InMemorySpanExporter()
    provider.setup_tracing("agent_loop_worker", worker_rank=0, extra_exporters=[exporter], set_global=False)
    otel_verl.instrument()
    yield exporter
    otel_verl.uninstrument()
    reset_tracing()


def finished(exporter: InMemorySpanExporter) -> list:
    flush.flush()
    return list(exporter.get_finished_spans())


@pytest.fixture
def spans_of(memory_exporter):
    return lambda: finished(memory_exporter)


os.environ.setdefault("VERL_LOGGING_LEVEL", "ERROR")
