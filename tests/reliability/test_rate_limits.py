"""At most one warning a minute, on a fake clock: guard, journaling exporter, SDK exporter log gate, journal, spool.

Each limiter reads ``time.monotonic`` from its own module; the tests swap that module's ``time`` for a
clock they move by hand, so "one a minute" is checked exactly: many failures inside 60 s give one
warning, and 61 s after the first a second one is allowed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_verl.export import guard, journal, spool
from otel_verl.export.guard import GuardedExporter
from otel_verl.export.journal import DeliveryJournal, ExporterLogGate, JournalingExporter
from otel_verl.export.spool import SpoolSpanExporter

SDK_LOGGER = "opentelemetry.exporter.otlp.proto.grpc.exporter"


class FakeClock:
    """Stands in for a module's ``time``: ``monotonic()`` moves only when the test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def monotonic(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def __getattr__(self, name: str) -> Any:  # anything else (strftime, ...) from the real module
        return getattr(time, name)


@pytest.fixture
def clock(monkeypatch) -> FakeClock:
    fake = FakeClock()
    for module in (guard, journal, spool):
        monkeypatch.setattr(module, "time", fake)
    return fake


@pytest.fixture
def sdk_logger(monkeypatch) -> logging.Logger:
    """The SDK exporter's logger without the process-wide gate earlier tests attached (each test adds its own)."""
    logger = logging.getLogger(SDK_LOGGER)
    monkeypatch.setattr(logger, "filters", [])
    return logger


def ours(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


def spans(n: int = 2) -> list[ReadableSpan]:
    tracer = TracerProvider().get_tracer("t")
    out = []
    for _ in range(n):
        with tracer.start_as_current_span("s") as span:
            pass
        out.append(span)
    return out


class Raising(SpanExporter):
    def export(self, batch: Sequence[ReadableSpan]) -> SpanExportResult:
        raise ConnectionError("down")


class Failing(SpanExporter):
    """What the SDK's OTLP exporter does when the collector is down: FAILURE (after logging its own error)."""

    def __init__(self) -> None:
        self.calls = 0

    def export(self, batch: Sequence[ReadableSpan]) -> SpanExportResult:
        self.calls += 1
        logging.getLogger(SDK_LOGGER).error("Failed to export span batch, error code: StatusCode.UNAVAILABLE")
        return SpanExportResult.FAILURE


def test_guard_one_warning_a_minute(clock, caplog):
    caplog.set_level(logging.WARNING)
    guarded = GuardedExporter(Raising())
    for _ in range(30):  # a failure every 2 s for 60 s: one warning
        assert guarded.export(spans()) is SpanExportResult.FAILURE
        clock.advance(1.999)
    assert len(ours(caplog)) == 1 and "Raising failed in export (ConnectionError: down)" in ours(caplog)[0]
    clock.advance(61 - 30 * 1.999)  # 61 s after the first warning
    guarded.export(spans())
    assert len(ours(caplog)) == 2
    assert (guarded.failures, guarded.spans_lost) == (31, 62)  # every failure counted, logged or not


def test_journaling_exporter_backs_off_and_warns_once_a_minute(clock, caplog, monkeypatch, sdk_logger, tmp_path: Path):
    caplog.set_level(logging.WARNING)
    gate = ExporterLogGate()
    sdk_logger.addFilter(gate)
    inner = Failing()
    exporter = JournalingExporter(inner, DeliveryJournal(tmp_path / "j.delivered"), "http://collector:4317")
    monkeypatch.setattr(journal, "_gate", gate)  # the gate JournalingExporter captures the SDK's lines with
    try:
        warned_at = []
        for second in range(76):  # one batch a second
            before = len(ours(caplog))
            exporter.export(spans())
            if len(ours(caplog)) > before:
                warned_at.append(second)
            clock.advance(1.0)
    finally:
        sdk_logger.removeFilter(gate)
    # probes at 0, 5, 15, 35 and 75 s (back-off 5 → 10 → 20 → 40 s); every other batch deferred at once
    assert inner.calls == 5
    assert exporter.spans_failed == 2 * 5 and exporter.spans_deferred == 2 * 71
    # the failed probes at 5, 15 and 35 s are inside the minute: only the first and the one at 75 s warn
    assert warned_at == [0, 75]
    assert "OTLP export to http://collector:4317 failed (Failed to export span batch" in ours(caplog)[0]
    assert gate.suppressed == 5  # the SDK's own error lines never reached the log


def test_exporter_log_gate_outside_capture(clock, caplog, sdk_logger):
    caplog.set_level(logging.WARNING)
    gate = ExporterLogGate()
    sdk = sdk_logger
    sdk.addFilter(gate)
    try:
        for _ in range(12):  # SDK retry warnings every 5 s
            sdk.warning("Transient error StatusCode.UNAVAILABLE encountered while exporting traces, retrying")
            clock.advance(5.0)
        assert len(ours(caplog)) == 1
        clock.advance(1.0)  # 61 s after the first
        sdk.warning("Transient error StatusCode.UNAVAILABLE encountered while exporting traces, retrying")
    finally:
        sdk.removeFilter(gate)
    assert len(ours(caplog)) == 2 and gate.suppressed == 11
    info = logging.LogRecord(SDK_LOGGER, logging.INFO, __file__, 1, "below WARNING", None, None)
    assert gate.filter(info) is True


def test_journal_and_spool_write_failures_once_a_minute(clock, caplog, tmp_path: Path):
    caplog.set_level(logging.WARNING)
    (tmp_path / "file").write_text("")
    unwritable = DeliveryJournal(tmp_path / "file" / "x.delivered")
    blocked = SpoolSpanExporter(tmp_path / "file", "run", "worker_0")
    for _ in range(6):
        assert unwritable.record([1, 2]) is False
        assert blocked.export(spans()) is SpanExportResult.FAILURE
        clock.advance(10.0)
    assert len(ours(caplog)) == 2  # one each
    clock.advance(1.0)  # 61 s
    unwritable.record([3])
    blocked.export(spans())
    assert len(ours(caplog)) == 4
    assert unwritable.failed == 13 and blocked.spans_failed == 14
