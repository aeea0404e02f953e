"""A guard around every exporter otel_verl installs: a failing exporter never reaches verl or the logs twice.

The SDK's batch processor already catches an exporter's exception, but logs it as an ERROR with a
traceback (repeated every 20 s) that does not say what is lost. The guard turns any exception of
``export``/``force_flush``/``shutdown`` into FAILURE/False and one warning a minute naming the exporter;
the other exporters (spool, OTLP) are separate processors and keep receiving every span.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

logger = logging.getLogger(__name__)

WARNING_INTERVAL_S = 60.0


class GuardedExporter(SpanExporter):
    """Delegates to ``inner``; exceptions become a failed export and a rate-limited warning."""

    def __init__(self, inner: SpanExporter) -> None:
        self.inner = inner
        self.name = type(inner).__name__
        self.failures = 0
        self.spans_lost = 0
        self._last_warning: float | None = None
        self._lock = threading.Lock()

    def _warn(self, action: str, exc: BaseException, spans: int = 0) -> None:
        with self._lock:
            self.failures += 1
            self.spans_lost += spans
            now = time.monotonic()
            if self._last_warning is not None and now - self._last_warning < WARNING_INTERVAL_S:
                return
            self._last_warning = now
        lost = f"; {spans} spans not exported by it" if spans else ""
        logger.warning(
            "otel_verl: span exporter %s failed in %s (%s: %s)%s; other exporters still receive every span "
            "(repeats are counted, not logged, for a minute)",
            self.name,
            action,
            type(exc).__name__,
            str(exc)[:200],
            lost,
        )

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            return self.inner.export(spans)
        except Exception as exc:
            self._warn("export", exc, len(spans))
            return SpanExportResult.FAILURE

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        try:
            return self.inner.force_flush(timeout_millis)
        except Exception as exc:
            self._warn("force_flush", exc)
            return False

    def shutdown(self) -> None:
        try:
            self.inner.shutdown()
        except Exception as exc:
            self._warn("shutdown", exc)
