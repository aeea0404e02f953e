"""Delivery journal: which spooled spans already reached the OTLP endpoint, so replay sends the rest once.

Layout: ``<spool>/<run>/.delivery/`` (0700) holds, per writer, an append-only ``*.delivered`` file
(0600) with one line per delivered span, ``<trace id><span id>`` in hex (48 characters). The live
exporter of each process writes ``<file_stem>-<pid>.delivered`` after every successful export;
``otel-verl replay`` writes ``replay-<pid>-<time>.delivered`` after every request the endpoint
accepted. A line cut short by a kill is ignored on reading (its span is simply sent again).

Each process also rewrites ``<file_stem>-<pid>.counts`` (JSON) when it flushes: spans ended, spooled,
delivered live and deferred to replay, so a run's completeness can be checked afterwards.

Why one journal for all endpoints: the normal use is "the collector was down (or restarted), send
what it missed", and endpoint strings differ for the same collector (localhost vs 127.0.0.1, gRPC vs
HTTP port). Replaying into a different backend wants ``--ignore-journal``.

The exactly-once guarantee has one window: a collector killed after it accepted a batch but before
its answer arrived looks like a failure here, so that batch is sent again by replay (at most one
in-flight batch per process per crash). See README "Delivery journal and replay".
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_verl.export.spool import make_private_dirs

logger = logging.getLogger(__name__)

JOURNAL_DIR = ".delivery"
JOURNAL_SUFFIX = ".delivered"
COUNTS_SUFFIX = ".counts"  # JSON, but not *.json: trace loaders glob that
_KEY_CHARS = 48  # 32 hex (trace id) + 16 hex (span id)
_HEX = frozenset("0123456789abcdef")


def span_key(trace_id: int, span_id: int) -> int:
    """One integer per span: trace id (128 bits) then span id (64 bits)."""
    return (trace_id << 64) | span_id


def key_from_bytes(trace_id: bytes, span_id: bytes) -> int:
    return int.from_bytes(trace_id + span_id, "big")


class DeliveryJournal:
    """Append-only file of delivered span keys; never raises (a failed write is logged once a minute)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._last_warning = float("-inf")
        self.recorded = 0
        self.failed = 0

    def record(self, keys: Iterable[int]) -> bool:
        data = "".join(f"{key:048x}\n" for key in keys).encode()
        if not data:
            return True
        count = len(data) // (_KEY_CHARS + 1)
        with self._lock:
            try:
                if self._fd is None:
                    make_private_dirs(self.path.parent)
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                written = 0
                while written < len(data):
                    written += os.write(self._fd, data[written:])
                self.recorded += count
                return True
            except Exception as exc:  # disk full, permissions: the spans are still in the spool
                self.failed += count
                now = time.monotonic()
                if now - self._last_warning >= 60.0:
                    self._last_warning = now
                    logger.warning(
                        "otel_verl: delivery journal %s not written (%s); replay may send those spans again",
                        self.path,
                        exc,
                    )
                return False

    def sync(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.fsync(self._fd)
                except OSError:
                    pass

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                try:
                    os.close(self._fd)
                except OSError:
                    pass
                self._fd = None


def read_delivered(run_dirs: Iterable[Path]) -> tuple[set[int], int]:
    """Union of every journal under ``<run>/.delivery``; returns (keys, number of journal files)."""
    keys: set[int] = set()
    files = 0
    for run_dir in run_dirs:
        directory = Path(run_dir) / JOURNAL_DIR
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob(f"*{JOURNAL_SUFFIX}")):
            files += 1
            try:
                with open(path, encoding="ascii", errors="replace") as handle:
                    for line in handle:
                        line = line.strip()
                        if len(line) == _KEY_CHARS and _HEX.issuperset(line):
                            keys.add(int(line, 16))
            except OSError as exc:
                logger.warning("otel_verl: delivery journal %s unreadable (%s); ignored", path, exc)
    return keys, files


def write_counts(path: Path, counts: dict[str, object]) -> None:
    """Atomically replace ``path`` (0600); never raises."""
    try:
        make_private_dirs(path.parent)
        tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            json.dump(counts, handle)
        os.replace(tmp, path)
    except Exception:
        logger.debug("otel_verl: counts file %s not written", path, exc_info=True)


class JournalingExporter(SpanExporter):
    """Wraps the live OTLP exporter: journals what it delivered and backs off while the endpoint is down.

    Runs on the batch processor's thread, never on the event loop. After a failed export the next
    attempts are skipped (returned as FAILURE at once, the spans stay in the spool for replay) for a
    back-off that doubles from ``min_backoff`` to ``max_backoff`` seconds; then one batch probes the
    endpoint. This keeps a dead collector from costing a full retry timeout per batch and from
    stalling the end-of-run flush. Only used with a spool: without one, skipping would lose spans.
    """

    def __init__(
        self,
        inner: SpanExporter,
        journal: DeliveryJournal,
        endpoint: str = "",
        min_backoff: float = 5.0,
        max_backoff: float = 60.0,
    ) -> None:
        self.inner = inner
        self.journal = journal
        self.endpoint = endpoint
        self.min_backoff = min_backoff
        self.max_backoff = max_backoff
        self._backoff = 0.0
        self._retry_at = 0.0
        self._last_warning = float("-inf")
        self.spans_delivered = 0
        self.spans_failed = 0
        self.spans_deferred = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        now = time.monotonic()
        if now < self._retry_at:
            self.spans_deferred += len(spans)
            return SpanExportResult.FAILURE
        gate = exporter_log_gate()
        gate.begin_capture()
        reason = None
        try:
            result = self.inner.export(spans)
        except Exception as exc:  # an exporter bug must not reach the processor thread's loop
            logger.debug("otel_verl: OTLP exporter raised", exc_info=True)
            result = SpanExportResult.FAILURE
            reason = f"{type(exc).__name__}: {exc}"
        finally:
            reason = gate.end_capture() or reason
        if result is SpanExportResult.SUCCESS:
            self._backoff = 0.0
            self._retry_at = 0.0
            self.spans_delivered += len(spans)
            self.journal.record(span_key(s.context.trace_id, s.context.span_id) for s in spans if s.context)
            return result
        self.spans_failed += len(spans)
        self._backoff = min(self.max_backoff, max(self.min_backoff, self._backoff * 2))
        self._retry_at = time.monotonic() + self._backoff
        self._warn(f"OTLP export to {self.endpoint or 'the endpoint'} failed ({reason or 'no reason given'})")
        return result

    def _warn(self, what: str) -> None:
        now = time.monotonic()
        if now - self._last_warning >= 60.0:
            self._last_warning = now
            logger.warning(
                "otel_verl: %s; spans stay in the spool, next attempt in %.0f s "
                "(`otel-verl replay` sends what was missed; at most one such warning a minute)",
                what,
                self._backoff,
            )

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        self.journal.sync()
        try:
            return self.inner.force_flush(timeout_millis)
        except Exception:
            return False

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception:
            logger.debug("otel_verl: OTLP exporter shutdown failed", exc_info=True)
        self.journal.close()


class ExporterLogGate(logging.Filter):
    """Filter for the OTLP SDK exporters' loggers: at most one WARNING-or-worse line per ``interval``.

    The SDK exporters log every retry and every failed batch; while a collector is down that is a line
    every few seconds per process. Between :meth:`begin_capture` and :meth:`end_capture` (around the journaling
    exporter's call into the SDK exporter) such records are held back and their last message handed to the
    caller, which reports it in its own rate-limited warning; elsewhere they are rate-limited here. Lower levels
    pass.
    """

    def __init__(self, interval: float = 60.0) -> None:
        super().__init__()
        self.interval = interval
        self._last = float("-inf")
        self._lock = threading.Lock()
        self._local = threading.local()
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        if getattr(self._local, "capturing", False):
            try:
                self._local.message = record.getMessage()
            except Exception:
                self._local.message = str(record.msg)
            self.suppressed += 1
            return False
        with self._lock:
            now = time.monotonic()
            if now - self._last >= self.interval:
                self._last = now
                return True
            self.suppressed += 1
            return False

    def begin_capture(self) -> None:
        self._local.capturing = True
        self._local.message = None

    def end_capture(self) -> str | None:
        self._local.capturing = False
        message, self._local.message = getattr(self._local, "message", None), None
        return message


_SDK_EXPORTER_LOGGERS = (
    "opentelemetry.exporter.otlp.proto.grpc.exporter",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)
_gate: ExporterLogGate | None = None


def exporter_log_gate() -> ExporterLogGate:
    """The process's gate, attached once to the SDK exporters' loggers."""
    global _gate
    if _gate is None:
        _gate = ExporterLogGate()
        for name in _SDK_EXPORTER_LOGGERS:
            logging.getLogger(name).addFilter(_gate)
    return _gate
