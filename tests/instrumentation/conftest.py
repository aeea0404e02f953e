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


@pytest.fixture(scope="session", params=["legacy", "v1-sync"])
def planted_run(request, tmp_path_factory):
    """The trainer's planted demo run (tests/instrumentation/planted_run.py), shared by test_plants.py,
    test_validation.py and test_ray_propagation.py."""
    from tests.instrumentation.planted_run import run_planted

    return run_planted(request.param, str(tmp_path_factory.mktemp(f"plants-{request.param}")))
