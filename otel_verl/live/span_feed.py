"""Every process's spans to the live account: a ``SpanExporter`` beside the spool and OTLP ones.

It sits behind its own ``BatchSpanProcessor`` (:func:`otel_verl.export.provider.setup_tracing` adds it when
``OTEL_VERL_LIVE`` is on; :mod:`otel_verl.live.plug` hands it in through :mod:`otel_verl.export.live_feed`), so it
runs on that processor's export thread: never on verl's threads, never in the way of the spool or the OTLP exporter,
whatever the endpoint is. Each batch is split by ``verl.step`` as the spool splits it and encoded by the one
OTLP/JSON encoder (:func:`~otel_verl.export.encoding.request_line`): what the live account reads is what the spool
would hold, read by the same reader. Until the run's collector exists (:func:`~otel_verl.live.sink.find_sink`),
batches are dropped before they are encoded: a job whose trainer logs nowhere pays for a lookup every few seconds,
nothing more. It never raises and always reports success (a batch the live account misses is not a span lost: the
spool and the collector have it).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from otel_verl import semconv
from otel_verl.export.encoding import request_line
from otel_verl.live.sink import find_sink

logger = logging.getLogger(__name__)


class LiveSpanExporter(SpanExporter):
    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        self.spans_sent = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            sink = find_sink(self.run_id)
            if sink is None:
                return SpanExportResult.SUCCESS
            groups: dict[int | None, list[ReadableSpan]] = {}
            for span in spans:
                step = (span.attributes or {}).get(semconv.VERL_STEP)
                groups.setdefault(step if type(step) is int else None, []).append(span)
            sink.send([(step, len(group), request_line(group)) for step, group in groups.items()])
            self.spans_sent += len(spans)
        except Exception:
            logger.debug("otel_verl: live export failed", exc_info=True)
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        return None
