"""A tracer provider handed in by the user (``VerlInstrumentor().instrument(tracer_provider=...)``).

OpenTelemetry's instrumentations take ``tracer_provider=`` and make their spans with it. otel_verl does
the same in the process where it is given: the step, phase and worker spans come from its tracers, and
the request spans (recorded cheaply, see :mod:`otel_verl.recording.recorder`) go to its span processors.
Everything else is the provider's business: otel_verl then builds no spool, OTLP or live exporter of its
own, keeps no resource of its own (spans carry the provider's), and never shuts the provider down (it
flushes it at exit).

It applies to one process: Ray actors run ``otel_verl.activate.setup`` and build their provider from the
environment unless the run's ``worker_process_setup_hook`` is a function of the user's that calls
``instrument(tracer_provider=...)`` there.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider

from otel_verl.config import OtelVerlConfig
from otel_verl.export import tracing
from otel_verl.export.ids import PlannedIds
from otel_verl.export.tracing import TracingState

logger = logging.getLogger(__name__)

_given: TracerProvider | None = None


def use_tracer_provider(given: Any) -> bool:
    """Make ``given`` the provider this process's tracing is set up around (None: build one from the
    environment, as without it). Returns False, with one warning, when it cannot be used: it is not an SDK
    ``TracerProvider`` (request spans are handed to its span processors), or tracing in this process was
    already set up around another provider."""
    global _given
    if given is None:
        _given = None
        return True
    if not isinstance(given, TracerProvider) or not hasattr(given, "_active_span_processor"):
        logger.warning(
            "otel_verl: tracer_provider=%s is not an OpenTelemetry SDK TracerProvider; otel_verl builds its own",
            type(given).__name__,
        )
        return False
    state = tracing.get_state()
    if state is not None and state.provider is not given:
        logger.warning(
            "otel_verl: tracing in this process is already set up; tracer_provider= is not used "
            "(pass it to the first instrument() of the process)"
        )
        return False
    if not isinstance(given.id_generator, PlannedIds):
        logger.info(
            "otel_verl: the tracer provider given draws its own span ids; the links from a V1 inner update "
            "to its sample groups need id_generator=otel_verl.export.ids.PlannedIds()"
        )
    _given = given
    return True


def given_provider() -> TracerProvider | None:
    """The provider handed in for this process, or None (otel_verl builds its own)."""
    return _given


class _ToProviderProcessors(SpanProcessor):
    """Request spans (built by the recorder, not by a tracer) handed to the given provider's processors."""

    def __init__(self, provider: TracerProvider) -> None:
        self._processors = provider._active_span_processor  # the SDK's one entry point to them

    def on_end(self, span: ReadableSpan) -> None:
        self._processors.on_end(span)


def around_given(given: TracerProvider, role: str, config: OtelVerlConfig, run_id: str) -> TracingState:
    """This process's tracing state on the given provider: no exporters of otel_verl's own."""
    return TracingState(
        provider=given,
        processors=[_ToProviderProcessors(given)],
        config=config,
        role=role,
        run_id=run_id,
        pid=os.getpid(),
        owns_global=False,
        owns_provider=False,
    )
