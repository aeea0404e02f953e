"""The simulated engine's own spans, shaped exactly like vLLM 0.24's ``llm_request``.

Why: the analyzer's engine view (queued vs prefill vs decode per turn, replicas, orphans) must run in the
default CPU demo and in tests, without a real engine. vLLM's ``OutputProcessor.do_tracing`` makes one span
per *finished* request: name ``llm_request``, kind SERVER, scope ``vllm.tracing.otel``, started at the
request's arrival in the engine, parented on the trace headers it was handed (our ``text_completion``
span), with ``gen_ai.latency.*`` seconds and ``gen_ai.usage.*`` tokens; none for an aborted request. Here
the same, from the simulated engine's timeline. The spans go through an engine provider whose resource is
otel_verl's with ``service.name=<ours>.sim-engine`` (a real vLLM's are ``<ours>.vllm``, see
``instrumentation/vllm_tracing.py``; the service says which program wrote them) and ``verl.engine.replica``, and
whose one processor hands each ended span to otel_verl's processors of the moment (spool, OTLP).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind, Tracer

from otel_verl import semconv as sc

logger = logging.getLogger(__name__)


@dataclass
class EngineTimeline:
    """One request's life in the engine, as vLLM's ``RequestStateStats`` keeps it (``time.time()`` seconds)."""

    arrival: float
    queued: float = 0.0
    scheduled: float = 0.0
    first_token: float = 0.0
    last_token: float = 0.0

    def attributes(self, end: float, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        """vLLM's ``do_tracing`` attributes (same formulas: queue = scheduled − queued, prefill = first token −
        scheduled, decode = last token − first token, inference = last token − scheduled, e2e = end − arrival)."""
        return {
            sc.ENGINE_LATENCY_TTFT: self.first_token - self.arrival,
            sc.ENGINE_LATENCY_E2E: end - self.arrival,
            sc.ENGINE_LATENCY_QUEUE: self.scheduled - self.queued,
            sc.ENGINE_USAGE_PROMPT_TOKENS: prompt_tokens,
            sc.ENGINE_USAGE_COMPLETION_TOKENS: completion_tokens,
            sc.ENGINE_LATENCY_PREFILL: self.first_token - self.scheduled,
            sc.ENGINE_LATENCY_DECODE: self.last_token - self.first_token,
            sc.ENGINE_LATENCY_INFERENCE: self.last_token - self.scheduled,
        }


class _ForwardToOtelVerl(SpanProcessor):
    """Each ended engine span to otel_verl's processors, looked up per span (set up later, or again)."""

    def on_end(self, span: ReadableSpan) -> None:
        from otel_verl.export import tracing

        state = tracing.get_state()
        for processor in state.processors if state is not None else ():
            try:
                processor.on_end(span)
            except Exception:  # never break the engine's answer
                logger.debug("otel_verl demo: a span processor failed on an engine span", exc_info=True)


_tracers: dict[tuple[int, str], Tracer] = {}


def engine_tracer(replica: str) -> Tracer:
    """The engine tracer of this process and replica (otel_verl's tracing is set up first if it is not)."""
    key = (os.getpid(), replica)
    tracer = _tracers.get(key)
    if tracer is None:
        from otel_verl.export import provider, tracing

        state = tracing.get_state() or provider.setup_tracing(sc.ProcessRole.SERVER.value)
        base = state.provider.resource
        service = str(base.attributes.get("service.name") or "verl") + sc.SIM_ENGINE_SERVICE_SUFFIX
        resource = base.merge(
            Resource(
                {
                    "service.name": service,
                    "vllm.process_id": str(os.getpid()),
                    sc.VERL_ENGINE_REPLICA: replica,
                }
            )
        )
        engine = TracerProvider(resource=resource)
        engine.add_span_processor(_ForwardToOtelVerl())
        tracer = _tracers[key] = engine.get_tracer(sc.ENGINE_SCOPE)
    return tracer


STYLES = ("llm_request", "semconv", "semconv-phases")
"""The shapes the simulated engine's spans can take: vLLM 0.24's ``llm_request``; vLLM under
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` (vllm#47633: named ``"{operation} {model}"``, with
``gen_ai.operation.name`` and ``gen_ai.request.model``); that, with the child spans ``vllm.request.queue``,
``vllm.request.prefill`` and ``vllm.request.decode`` proposed in vllm#44402."""
OPERATION = "text_completion"
"""The GenAI operation of a token-in generate call (what verl's rollout servers make)."""


def record_llm_request(
    replica: str,
    carrier: dict[str, str] | None,
    timeline: EngineTimeline,
    *,
    request_id: str,
    prompt_tokens: int,
    completion_tokens: int,
    params: dict[str, Any],
    style: str = "llm_request",
    model: str = "model",
) -> None:
    """One finished request's engine span, parented on ``carrier`` as vLLM parents it on its
    ``trace_headers`` (no carrier: no parent, an orphan, as an engine started outside the job makes);
    ``style``: one of :data:`STYLES`."""
    try:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        end = time.time()
        attributes = timeline.attributes(end, prompt_tokens, completion_tokens)
        attributes[sc.ENGINE_REQUEST_ID] = request_id
        attributes[sc.VERL_ENGINE_REPLICA] = replica
        for key, attr in (
            ("top_p", sc.ENGINE_REQUEST_TOP_P),
            ("max_tokens", sc.ENGINE_REQUEST_MAX_TOKENS),
            ("temperature", sc.ENGINE_REQUEST_TEMPERATURE),
            ("n", sc.ENGINE_REQUEST_N),
        ):
            value = params.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value:
                attributes[attr] = value
        # vLLM extracts only the W3C trace context (``extract_trace_context``), not baggage
        context = TraceContextTextMapPropagator().extract(carrier) if carrier else None
        name = sc.ENGINE_SPAN_REQUEST
        if style != "llm_request":
            name = f"{OPERATION} {model}"
            attributes[sc.GEN_AI_OPERATION_NAME] = OPERATION
            attributes[sc.GEN_AI_REQUEST_MODEL] = model
        tracer = engine_tracer(replica)
        span = tracer.start_span(name, context=context, kind=SpanKind.SERVER, start_time=int(timeline.arrival * 1e9))
        span.set_attributes(attributes)
        if style == "semconv-phases":
            _phase_spans(tracer, span, timeline)
        span.end(end_time=int(end * 1e9))
    except Exception:  # tracing never changes the engine's answer
        logger.debug("otel_verl demo: llm_request span failed", exc_info=True)


def _phase_spans(tracer: Tracer, parent: Any, timeline: EngineTimeline) -> None:
    """vllm#44402's children of the request span: queued → scheduled, scheduled → first token, → last token."""
    from opentelemetry import trace

    context = trace.set_span_in_context(parent)
    for name, start, end in (
        ("vllm.request.queue", timeline.queued, timeline.scheduled),
        ("vllm.request.prefill", timeline.scheduled, timeline.first_token),
        ("vllm.request.decode", timeline.first_token, timeline.last_token),
    ):
        child = tracer.start_span(name, context=context, kind=SpanKind.INTERNAL, start_time=int(start * 1e9))
        child.end(end_time=int(end * 1e9))
