"""Torn spool lines: a write cut short (ENOSPC) or a writer killed mid-line never corrupts the next line.

The spool (otel_verl/export/spool.py) undoes a partial write by truncating the file back; when it
cannot, or when it opens a file whose last line has no newline, the next line starts with a newline
so the fragment is a line of its own: replay and the analyzer name it (file:line) or count it with
``--skip-bad-lines``, and every other line parses. No verl needed; real spans, real files.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from typer.testing import CliRunner

from otel_verl import semconv
from otel_verl.cli import app
from otel_verl.export.replay import ReplayError, spool_files, validate
from otel_verl.export.spool import SpoolSpanExporter
from tests.otlp_receiver import Receiver, start_grpc


def make_spans(n: int, step: int = 1) -> list:
    tracer = TracerProvider().get_tracer("t")
    spans = []
    for _ in range(n):
        with tracer.start_as_current_span(semconv.SPAN_REQUEST, attributes={semconv.VERL_STEP: step}) as span:
            pass
        spans.append(span)
    return spans


class HalfWriteThenENOSPC:
    """Replaces ``os.write``: the next spool write goes through by half, the one after raises ENOSPC."""

    def __init__(self) -> None:
        self.real = os.write
        self.state = "off"

    def __call__(self, fd: int, data: Any) -> int:
        if self.state == "half":
            self.state = "full"
            return self.real(fd, bytes(data[: len(data) // 2]))
        if self.state == "full":
            self.state = "off"
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return self.real(fd, data)


def lines_of(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines()


def span_ids(lines: list[bytes]) -> list[int]:
    out = []
    for line in lines:
        doc = json.loads(line)
        out += [int(s["spanId"], 16) for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    return out


@pytest.fixture
def enospc(monkeypatch) -> HalfWriteThenENOSPC:
    fault = HalfWriteThenENOSPC()
    monkeypatch.setattr(os, "write", fault)
    return fault


def test_partial_write_is_truncated_away(tmp_path, enospc):
    spool = SpoolSpanExporter(tmp_path, "run", "worker_0")
    spans = make_spans(9)
    path = tmp_path / "run" / "step_1" / "worker_0.jsonl"
    assert spool.export(spans[:3]).name == "SUCCESS"
    size = path.stat().st_size
    enospc.state = "half"
    assert spool.export(spans[3:6]).name == "FAILURE"
    assert path.stat().st_size == size  # the half line was cut off again
    assert spool.export(spans[6:]).name == "SUCCESS"
    spool.shutdown()
    lines = lines_of(path)
    assert len(lines) == 2 and path.read_bytes().endswith(b"\n")
    assert span_ids(lines) == [s.context.span_id for s in spans[:3] + spans[6:]]
    assert (spool.spans_written, spool.spans_failed) == (6, 3)


def test_untruncatable_partial_write_stays_an_isolated_bad_line(tmp_path, enospc, monkeypatch):
    """ftruncate failing too (e.g. EIO): the fragment is left, but the next line starts on a line of its own."""

    def no_truncate(fd: int, length: int) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "ftruncate", no_truncate)
    spool = SpoolSpanExporter(tmp_path, "run", "worker_0")
    spans = make_spans(9)
    spool.export(spans[:3])
    enospc.state = "half"
    spool.export(spans[3:6])
    spool.export(spans[6:])
    spool.shutdown()
    path = tmp_path / "run" / "step_1" / "worker_0.jsonl"
    lines = lines_of(path)
    assert len(lines) == 3
    assert span_ids([lines[0], lines[2]]) == [s.context.span_id for s in spans[:3] + spans[6:]]
    with pytest.raises(ValueError):
        json.loads(lines[1])  # the torn half line, alone

    # replay names it; --skip-bad-lines counts exactly that one line and sends the rest
    with pytest.raises(ReplayError, match=rf"^{path}:2: "):
        validate(spool_files(tmp_path / "run"), skip_bad_lines=False)
    receiver = Receiver()
    server, endpoint = start_grpc(receiver)
    try:
        result = CliRunner().invoke(
            app, ["replay", str(tmp_path / "run"), "--endpoint", endpoint, "--protocol", "grpc", "--skip-bad-lines"]
        )
    finally:
        server.stop(0)
    assert result.exit_code == 0, result.output
    assert "1 bad lines skipped" in " ".join(result.output.split())
    assert len(receiver.spans()) == 6


def test_line_torn_by_a_killed_writer_is_not_joined(tmp_path):
    """A file whose last line has no newline (writer SIGKILLed mid-line): a new writer starts a fresh line."""
    path = tmp_path / "run" / "step_1" / "worker_0.jsonl"
    first = SpoolSpanExporter(tmp_path, "run", "worker_0")
    spans = make_spans(4)
    first.export(spans[:2])
    first.shutdown()
    with open(path, "ab") as handle:
        handle.write(b'{"resourceSpans": [{"resou')  # the kill
    second = SpoolSpanExporter(tmp_path, "run", "worker_0")
    second.export(spans[2:])
    second.shutdown()
    lines = lines_of(path)
    assert len(lines) == 3
    assert span_ids([lines[0], lines[2]]) == [s.context.span_id for s in spans]
    with pytest.raises(ReplayError, match=rf"^{path}:2: "):
        validate(spool_files(tmp_path / "run"), skip_bad_lines=False)
