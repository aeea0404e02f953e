"""The live account's two ends, handed to the tracing side (which never imports :mod:`otel_verl.live`).

- verl's ``Tracking`` seams run :mod:`otel_verl.live.tracking`'s wrappers
  (:mod:`otel_verl.instrumentation.metrics_logger`);
- every process's provider gets the span feed (:mod:`otel_verl.live.span_feed`, :mod:`otel_verl.export.live_feed`).

:func:`plug_in` runs when ``otel_verl`` is imported (its ``__init__``), so that whichever comes first in a process,
``instrument()`` or ``setup_tracing``, finds both installed. It imports nothing heavy: the wrappers, the exporter and
its delay are imported when first used (as the provider imported the feed before).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from otel_verl.export import live_feed
from otel_verl.instrumentation import metrics_logger

if TYPE_CHECKING:
    from opentelemetry.sdk.trace.export import SpanExporter


def _init(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    from otel_verl.live.tracking import init_wrapper

    return init_wrapper(wrapped, instance, args, kwargs)


def _log(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    from otel_verl.live.tracking import log_wrapper

    return log_wrapper(wrapped, instance, args, kwargs)


def _finish(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    from otel_verl.live.tracking import finish_wrapper

    return finish_wrapper(wrapped, instance, args, kwargs)


def _exporter(run_id: str) -> SpanExporter:
    from otel_verl.live.span_feed import LiveSpanExporter

    return LiveSpanExporter(run_id)


def _delay_s() -> float:
    from otel_verl.live.collector import LIVE_DELAY_S

    return LIVE_DELAY_S


def plug_in() -> None:
    """Install the live account's seam work and span feed in this process (idempotent)."""
    metrics_logger.install(metrics_logger.LoggerHooks(init=_init, log=_log, finish=_finish))
    live_feed.install(live_feed.LiveFeed(exporter=_exporter, delay_s=_delay_s))
