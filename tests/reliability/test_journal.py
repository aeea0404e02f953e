"""The delivery journal and exactly-once replay, with the real OTel SDK exporters and a local OTLP receiver.

Fast cases (no collector): what the live exporter delivered is journaled and never replayed; a
second replay sends nothing; duplicated lines go once; a journal line cut short by a kill is
ignored; the exporter backs off while the endpoint is down and its SDK warnings stay at one a minute.
"""

from __future__ import annotations

import logging
import os
import stat

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider

from otel_verl import semconv
from otel_verl.config import OtelVerlConfig
from otel_verl.export import flush, provider, tracing
from otel_verl.export.journal import (
    JOURNAL_DIR,
    DeliveryJournal,
    JournalingExporter,
    read_delivered,
    span_key,
)
from otel_verl.export.replay import replay
from tests.otlp_receiver import Receiver, free_port, start_grpc
from tests.process_state import read_counts, reset_tracing


def make_spans(n: int, step: int = 1) -> list:
    tracer = TracerProvider().get_tracer("t")
    spans = []
    for _ in range(n):
        with tracer.start_as_current_span(semconv.SPAN_REQUEST, attributes={semconv.VERL_STEP: step}) as span:
            pass
        spans.append(span)
    return spans


def traced_run(monkeypatch, tmp_path, endpoint: str, n: int, run_id: str = "run") -> tracing.TracingState:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "1")
    reset_tracing()
    state = provider.setup_tracing(
        "trainer", config=OtelVerlConfig(spool=True, spool_dir=str(tmp_path), run_id=run_id), set_global=False
    )
    tracer = tracing.tracer()
    for i in range(n):
        with tracer.start_as_current_span(semconv.SPAN_STEP, attributes={semconv.VERL_STEP: i % 3}):
            pass
    flush.flush()
    return state


def test_live_deliveries_are_journaled_and_not_replayed(monkeypatch, tmp_path):
    receiver = Receiver()
    server, endpoint = start_grpc(receiver)
    try:
        state = traced_run(monkeypatch, tmp_path, endpoint, 40)
        provider.shutdown_tracing()
        assert len(receiver.spans()) == 40
        run_dir = tmp_path / "run"
        keys, files = read_delivered([run_dir])
        assert len(keys) == 40 and files == 1
        journal = next((run_dir / JOURNAL_DIR).glob("*.delivered"))
        assert stat.S_IMODE(journal.stat().st_mode) == 0o600
        assert stat.S_IMODE((run_dir / JOURNAL_DIR).stat().st_mode) == 0o700
        (counts,) = read_counts(run_dir)
        assert counts["spans_ended"] == counts["spans_spooled"] == counts["spans_delivered"] == 40
        assert state.journaled is not None and state.journaled.spans_delivered == 40
        stats = replay(run_dir, endpoint=endpoint, protocol="grpc")
        assert (stats.spans, stats.already_delivered, stats.sent) == (40, 40, 0)
        assert len(receiver.spans()) == 40
    finally:
        reset_tracing()
        server.stop(0)


def test_endpoint_down_then_replay_twice(monkeypatch, tmp_path, caplog):
    dead = f"http://127.0.0.1:{free_port()}"
    caplog.set_level(logging.WARNING)
    state = traced_run(monkeypatch, tmp_path, dead, 30)
    # more exports while the back-off is on: skipped at once, not retried against the dead endpoint
    for span in make_spans(5):
        flush.emit_built(lambda span=span: [span], 1)
    flush.flush()
    journaled = state.journaled
    assert journaled is not None and journaled.spans_delivered == 0
    assert journaled.spans_deferred > 0 and journaled.spans_failed > 0
    provider.shutdown_tracing()
    exporter_lines = [r for r in caplog.records if r.name.startswith(("opentelemetry.exporter", "otel_verl.export"))]
    assert len(exporter_lines) == 1, [r.getMessage() for r in exporter_lines]
    assert "spans stay in the spool" in exporter_lines[0].getMessage()

    receiver = Receiver()
    server, endpoint = start_grpc(receiver)
    try:
        first = replay(tmp_path, endpoint=endpoint, protocol="grpc")
        assert first.sent == first.spans == 35 and len(receiver.spans()) == 35
        second = replay(tmp_path, endpoint=endpoint, protocol="grpc")
        assert (second.sent, second.already_delivered) == (0, 35)
        assert len(receiver.spans()) == 35
    finally:
        server.stop(0)


def test_duplicate_lines_and_torn_journal_line(tmp_path):
    from otel_verl.export.spool import SpoolSpanExporter

    spool = SpoolSpanExporter(tmp_path, "run", "worker_0")
    spans = make_spans(6)
    spool.export(spans[:4])
    spool.export(spans[2:])  # spans 2, 3 twice in the spool
    spool.shutdown()
    journal = DeliveryJournal(tmp_path / "run" / JOURNAL_DIR / "worker_0-1.delivered")
    journal.record([span_key(spans[0].context.trace_id, spans[0].context.span_id)])
    journal.close()
    with open(journal.path, "a") as handle:  # a write cut short by SIGKILL
        handle.write(f"{spans[1].context.trace_id:032x}{spans[1].context.span_id:016x}"[:30])
    receiver = Receiver()
    server, endpoint = start_grpc(receiver)
    try:
        stats = replay(tmp_path, endpoint=endpoint, protocol="grpc")
        assert (stats.spans, stats.already_delivered, stats.duplicates, stats.sent) == (8, 1, 2, 5)
        sent = sorted(int.from_bytes(bytes(s.span_id), "big") for s in receiver.spans())
        assert sent == sorted(s.context.span_id for s in spans[1:])
        assert replay(tmp_path, endpoint=endpoint, protocol="grpc").sent == 0
    finally:
        server.stop(0)


def test_ignore_journal_resends_each_span_once(tmp_path):
    from otel_verl.export.spool import SpoolSpanExporter

    spool = SpoolSpanExporter(tmp_path, "run", "trainer")
    spans = make_spans(3)
    spool.export(spans)
    spool.shutdown()
    receiver = Receiver()
    server, endpoint = start_grpc(receiver)
    try:
        assert replay(tmp_path, endpoint=endpoint, protocol="grpc").sent == 3
        assert replay(tmp_path, endpoint=endpoint, protocol="grpc", ignore_journal=True).sent == 3
        assert len(receiver.spans()) == 6
    finally:
        server.stop(0)


def test_journaling_exporter_never_raises(tmp_path):
    class Raising(OTLPSpanExporter):
        def export(self, spans):
            raise RuntimeError("boom")

    blocker = tmp_path / "file"
    blocker.write_text("")
    exporter = JournalingExporter(Raising(endpoint="http://127.0.0.1:9"), DeliveryJournal(blocker / "x.delivered"))
    spans = make_spans(2)
    assert exporter.export(spans).name == "FAILURE"
    assert exporter.export(spans).name == "FAILURE"  # backed off: not even tried
    assert (exporter.spans_failed, exporter.spans_deferred) == (2, 2)
    # an unwritable journal is reported, not raised
    assert exporter.journal.record([1]) is False
    exporter.shutdown()
    assert not os.path.exists(blocker / "x.delivered")
