"""Spool exporter round trip, OTLP export (gRPC + HTTP) through the standard env vars, replay."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.trace import Link, Status, StatusCode

from otel_verl import semconv
from otel_verl.export import provider, tracing
from otel_verl.export.replay import ReplayError, replay
from otel_verl.export.spool import SpoolSpanExporter
from tests.otlp_receiver import Receiver, start_grpc, start_http
from tests.process_state import reset_tracing, wrapped_seams


def _make_spans(exporter) -> list:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    with tracer.start_as_current_span(semconv.SPAN_STEP, attributes={semconv.VERL_STEP: 4}) as step:  # noqa: SIM117
        with tracer.start_as_current_span(
            semconv.SPAN_REQUEST,
            attributes={
                semconv.VERL_STEP: 4,
                semconv.VERL_WORKER_RANK: 1,
                semconv.VERL_REQUEST_STATUS: "aborted",
                semconv.VERL_REWARD_SCORE: 0.5,
                semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["aborted"],
                semconv.VERL_VALIDATE: False,
            },
            links=[Link(step.get_span_context(), {"why": "test"})],
        ) as request:
            request.add_event("resumed", {"attempt": 2})
            request.set_status(Status(StatusCode.ERROR, "boom"))
    with tracer.start_as_current_span("orphan"):
        pass
    provider.shutdown()
    return [step, request]


def test_spool_round_trip(tmp_path):
    from otel_verl.analysis.read import load_spans

    exporter = SpoolSpanExporter(tmp_path, "run1", "worker_1")
    step, request = _make_spans(exporter)
    run = tmp_path / "run1"
    files = sorted(p.relative_to(run).as_posix() for p in run.rglob("*.jsonl"))
    assert files == ["no_step/worker_1.jsonl", "step_4/worker_1.jsonl"]
    # 0600 files in 0700 directories
    assert stat.S_IMODE((run / "step_4" / "worker_1.jsonl").stat().st_mode) == 0o600
    assert stat.S_IMODE((run / "step_4").stat().st_mode) == 0o700
    lines = [json.loads(raw) for raw in (run / "step_4" / "worker_1.jsonl").read_text().splitlines()]
    encoded = [s for line in lines for rs in line["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    span = next(s for s in encoded if s["name"] == semconv.SPAN_REQUEST)
    assert span["traceId"] == format(request.get_span_context().trace_id, "032x")
    assert span["spanId"] == format(request.get_span_context().span_id, "016x")
    assert span["parentSpanId"] == format(step.get_span_context().span_id, "016x")
    assert span["startTimeUnixNano"] == str(request.start_time) and span["endTimeUnixNano"] == str(request.end_time)
    assert span["status"] == {"code": 2, "message": "boom"}
    assert span["events"][0]["name"] == "resumed"
    assert span["links"][0]["spanId"] == format(step.get_span_context().span_id, "016x")
    attrs = {a["key"]: a["value"] for a in span["attributes"]}
    assert attrs[semconv.VERL_STEP] == {"intValue": "4"}
    assert attrs[semconv.VERL_REWARD_SCORE] == {"doubleValue": 0.5}
    assert attrs[semconv.VERL_VALIDATE] == {"boolValue": False}
    assert attrs[semconv.GEN_AI_RESPONSE_FINISH_REASONS] == {"arrayValue": {"values": [{"stringValue": "aborted"}]}}
    # and the analyzer reads it back
    table = load_spans(str(run))
    row = table[table.name == semconv.SPAN_REQUEST].iloc[0]
    assert row.request_status == "aborted" and row.step == 4 and row.worker == 1
    assert row.start_ns == request.start_time and row.end_ns == request.end_time


def test_unwritable_spool_never_raises(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    exporter = SpoolSpanExporter(blocker, "run", "trainer")
    provider = TracerProvider()
    with provider.get_tracer("t").start_as_current_span("x", attributes={semconv.VERL_STEP: 1}) as span:
        pass
    assert exporter.export([span]) is SpanExportResult.FAILURE
    assert exporter.spans_failed == 1


def test_spool_keeps_few_files_open_over_a_long_run(tmp_path):
    """200 steps in one process hold at most MAX_OPEN_FILES descriptors and MAX_CACHED_PATHS step paths
    (memory stays flat per step), and every line still lands."""
    from otel_verl.export import spool

    exporter = SpoolSpanExporter(tmp_path, "run", "trainer")
    tracer = TracerProvider().get_tracer("t")
    fd_dir = f"/proc/{os.getpid()}/fd"

    def open_under(root: Path) -> int:
        """This process's descriptors open on files under ``root`` (the rest of the test process, its threads
        and what earlier tests left behind, open and close others meanwhile)."""
        count = 0
        for fd in os.listdir(fd_dir):
            try:
                count += os.readlink(f"{fd_dir}/{fd}").startswith(f"{root}/")
            except OSError:  # closed since listed
                continue
        return count

    for step in range(200):
        with tracer.start_as_current_span("s", attributes={semconv.VERL_STEP: step}) as span:
            pass
        assert exporter.export([span]) is SpanExportResult.SUCCESS
        if step % 50 == 0:
            assert exporter.force_flush()
    assert len(exporter._handles) == spool.MAX_OPEN_FILES
    assert 1 <= len(exporter._paths) <= spool.MAX_CACHED_PATHS
    assert open_under(tmp_path / "run") == len(exporter._handles)
    exporter.shutdown()
    assert open_under(tmp_path) == 0
    written = sorted(tmp_path.joinpath("run").glob("step_*/trainer.jsonl"))
    assert len(written) == 200 and all(len(p.read_text().splitlines()) == 1 for p in written)
    # a late span for an old step reopens its file and appends
    exporter = SpoolSpanExporter(tmp_path, "run", "trainer")
    with tracer.start_as_current_span("late", attributes={semconv.VERL_STEP: 3}) as span:
        pass
    exporter.export([span])
    exporter.shutdown()
    assert len(tmp_path.joinpath("run", "step_3", "trainer.jsonl").read_text().splitlines()) == 2


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_otlp_export_through_standard_env(monkeypatch, tmp_path, protocol):
    receiver = Receiver()
    server, endpoint = (start_grpc if protocol == "grpc" else start_http)(receiver)
    try:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=rl-team")
        monkeypatch.setenv("OTEL_SERVICE_NAME", "my-verl-run")
        monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
        monkeypatch.setenv("OTEL_VERL_SPOOL", "true")
        monkeypatch.setenv("OTEL_VERL_SPOOL_DIR", str(tmp_path))
        reset_tracing()
        state = provider.setup_tracing("trainer", set_global=False)
        tracer = tracing.tracer()
        for i in range(50):
            with tracer.start_as_current_span(semconv.SPAN_STEP, attributes={semconv.VERL_STEP: i}):
                pass
        provider.shutdown_tracing()
        spans = receiver.spans()
        assert len(spans) == 50
        assert state.spool is not None and state.spool.spans_written == 50  # both, when asked
        resource = {a.key: a.value.string_value for a in receiver.requests[0].resource_spans[0].resource.attributes}
        assert resource["service.name"] == "my-verl-run"
        assert resource["deployment.environment"] == "test"
        assert resource[semconv.VERL_PROCESS_ROLE] == "trainer"
        assert receiver.headers[0]["x-tenant"] == "rl-team"
        # the delivery journal lists all 50: replay to the same endpoint sends nothing
        stats = replay(tmp_path, endpoint=endpoint, protocol=protocol)
        assert (stats.spans, stats.already_delivered, stats.sent) == (50, 50, 0)
        assert len(receiver.spans()) == 50
        # --ignore-journal (another backend): the same spans again, ids intact, once each
        before = {bytes(s.span_id) for s in spans}
        stats = replay(tmp_path, endpoint=endpoint, protocol=protocol, ignore_journal=True)
        assert stats.sent == 50
        replayed = receiver.spans()[50:]
        assert len(replayed) == 50 and {bytes(s.span_id) for s in replayed} == before
    finally:
        reset_tracing()
        server.stop(0) if protocol == "grpc" else server.shutdown()


def test_replay_bad_line_names_file_and_line(tmp_path):
    spool = tmp_path / "run" / "step_1"
    spool.mkdir(parents=True)
    good = json.dumps({"resourceSpans": []})
    (spool / "worker_0.jsonl").write_text(good + "\n" + '{"resourceSpans": [' + "\n")
    with pytest.raises(ReplayError, match=r"worker_0\.jsonl:2: "):
        replay(tmp_path, endpoint="http://127.0.0.1:9", protocol="http/protobuf")


def test_sdk_disabled_means_not_instrumented(monkeypatch):
    import otel_verl

    otel_verl.uninstrument()
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    otel_verl.instrument()
    assert wrapped_seams() == set()
    assert os.environ["OTEL_SDK_DISABLED"] == "true"


def test_bad_batch_env_value_falls_back_to_default(monkeypatch):
    monkeypatch.setenv("OTEL_VERL_SPOOL", "false")
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "lots")
    reset_tracing()
    try:
        state = provider.setup_tracing(
            "trainer", set_global=False, extra_exporters=[SpoolSpanExporter("/tmp", "x", "y")]
        )
        assert state.processors  # built with the default queue instead of raising
    finally:
        reset_tracing()
