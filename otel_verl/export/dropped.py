"""Counting the spans the SDK's BatchSpanProcessor drops, which it otherwise does silently.

The SDK's queue is a bounded deque: when it is full, ``appendleft`` pushes the oldest span out
(after one rate-limited log line). :class:`CountingBatchSpanProcessor` swaps in a deque that counts
those pushes (and spans ended after shutdown), so every drop is counted per process; the total is logged once at
shutdown and exposed as the OTel metric ``otel_verl.spans.dropped`` on the global (or a given)
MeterProvider.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Iterable
from typing import Any

from opentelemetry import metrics
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from otel_verl.recording.spans import RecordedSpan

logger = logging.getLogger(__name__)

METRIC_NAME = "otel_verl.spans.dropped"

_lock = threading.Lock()
_dropped = 0
_registered: set[int] = set()


def _count(n: int = 1) -> None:
    global _dropped
    with _lock:
        _dropped += n


class _CountingDeque(collections.deque):
    """The processor's queue: ``appendleft`` on a full deque pushes a span out; count it.

    Near the limit the check and the append hold a lock that ``pop`` (the export thread) takes too,
    so a pop racing with a full queue is not miscounted; far from it (the normal case) no lock is taken.
    """

    _MARGIN = 64
    """Appends from other threads that may land between a fast-path check and its append."""

    def __init__(self, items: Iterable[Any], maxlen: int | None) -> None:
        super().__init__(items, maxlen)
        self._mutex = threading.Lock()
        self._safe = (maxlen - self._MARGIN) if maxlen is not None else 1 << 62

    def appendleft(self, item: Any) -> None:
        if len(self) < self._safe:
            return super().appendleft(item)
        with self._mutex:
            if len(self) >= self.maxlen:  # type: ignore[operator]
                _count()
            super().appendleft(item)

    def pop(self) -> Any:
        if len(self) < self._safe:
            return super().pop()
        with self._mutex:
            return super().pop()


class CountingBatchSpanProcessor(BatchSpanProcessor):
    """A BatchSpanProcessor that counts what its queue drops (same behaviour otherwise)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._inner: Any = getattr(self, "_batch_processor", None)
        queue = getattr(self._inner, "_queue", None)
        if isinstance(queue, collections.deque):
            self._inner._queue = _CountingDeque(queue, queue.maxlen)
        else:  # a future SDK changed its internals: spans still flow, drops go uncounted
            logger.debug("otel_verl: BatchSpanProcessor internals changed; dropped spans are not counted")

    def on_end(self, span: ReadableSpan) -> None:
        inner = self._inner
        if inner is not None and type(span) is RecordedSpan:  # always sampled: skip building its SpanContext
            if inner._shutdown:
                _count()  # the SDK ignores spans ended after shutdown
            inner.emit(span)
            return
        if getattr(inner, "_shutdown", False) and span.context is not None and span.context.trace_flags.sampled:
            _count()
        super().on_end(span)


def _observe(_options: Any) -> Iterable[metrics.Observation]:
    yield metrics.Observation(_dropped)


def register_metric(meter_provider: metrics.MeterProvider | None = None) -> None:
    """Expose the count as an observable counter (once per provider; the global one is a proxy until set)."""
    provider = meter_provider or metrics.get_meter_provider()
    with _lock:
        if id(provider) in _registered:
            return
        _registered.add(id(provider))
    try:
        meter = provider.get_meter("otel_verl")
        meter.create_observable_counter(
            METRIC_NAME, callbacks=[_observe], unit="{span}", description="Spans dropped by a full export queue"
        )
    except Exception:
        logger.debug("otel_verl: dropped-span metric not registered", exc_info=True)


def log_total() -> None:
    """One warning at shutdown when anything was dropped."""
    if _dropped:
        logger.warning(
            "otel_verl: %d spans were dropped because an export queue was full; raise OTEL_VERL_MAX_QUEUE_SIZE",
            _dropped,
        )
