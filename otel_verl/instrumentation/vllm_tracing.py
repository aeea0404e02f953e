"""vLLM's own spans go where otel_verl's go: one trace, one destination, whichever initialises first.

The fault (issue 24): vLLM's ``init_otel_tracer`` builds its own ``TracerProvider`` with an OTLP exporter to
the engine's ``otlp_traces_endpoint``, makes it the process's *global* provider and writes
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` into the environment; its ``llm_request`` span (one per finished
request, parented on the ``trace_headers`` otel_verl hands the engine) is made with the global tracer. In the
rollout server's process, whichever of vLLM and otel_verl set the global provider first decided where the
engine's spans went, and otel_verl, set up after vLLM, read vLLM's endpoint as its own.

The fix, three seams in the engine's process (the Ray actor running verl's ``vLLMHttpServer``):

- ``init_tracer`` (as ``AsyncLLM``/``LLMEngine`` bound it) and ``vllm.tracing.otel.init_otel_tracer``:
  vLLM's switch is kept (the engine traces iff ``otlp_traces_endpoint`` is set) but vLLM builds no provider,
  no exporter, writes no environment variable. It gets a tracer of the *engine provider*: an SDK provider
  whose resource is otel_verl's with ``service.name=<ours>.vllm``, and whose only processor hands each ended
  span to otel_verl's processors (spool, OTLP, counts) of the moment. The engine provider also becomes the
  global one if none is set yet, so vLLM's decorator-made loading spans in this process go there too.
- ``output_processor.instrument_manual``: ``llm_request`` is made with the engine tracer, never the global
  one, so it reaches otel_verl's exporters also when vLLM's own provider became global first (vLLM started
  before ``instrument()``); vLLM's provider then receives nothing more.
- ``vLLMHttpServer.launch_server``: engine tracing on with ``disable_log_stats=True`` (verl's default) makes
  vLLM 0.24 assert on the first finished request; one warning naming the fix, verl's config untouched.

Not covered: vLLM's engine-core and worker processes (spawned by multiprocessing, where otel_verl is not
activated) trace their loading spans only if ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is in the environment,
with vLLM's own provider. Their request path makes no spans.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.trace import SpanKind

from otel_verl import semconv
from otel_verl.export import provider, tracing
from otel_verl.export.otlp import otlp_endpoint
from otel_verl.instrumentation.engine_link import carrier_in_flight, follow_calls
from otel_verl.wrapping.registry import coroutine_wrapper, enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

VLLM_OTEL_MODULE = "vllm.tracing.otel"
VLLM_OUTPUT_PROCESSOR_MODULE = "vllm.v1.engine.output_processor"
VLLM_SERVER_MODULE = "verl.workers.rollout.vllm_rollout.vllm_async_server"

ENGINE_SERVICE_SUFFIX = ".vllm"
"""The engine's spans carry ``service.name`` = otel_verl's service name + this (``verl.vllm`` by default)."""
ENGINE_SPAN = "llm_request"
"""vLLM's span for one request in the engine (``do_tracing``)."""
ABORTED = "aborted"
"""verl's ``TokenOutput.stop_reason`` for a request aborted in the engine or refused at its gate."""
ENGINE_SCOPE = VLLM_OTEL_MODULE
"""The scope vLLM itself makes ``llm_request`` under (``trace.get_tracer(__name__)`` in vllm.tracing.otel)."""

_lock = threading.Lock()
_engine: tuple[int, TracerProvider] | None = None
"""(pid, the engine provider) of this process."""
_warned_log_stats = False
_noted_endpoint = False
_replica_rank: int | None = None
"""verl's ``replica_rank`` of the vLLMHttpServer in this process (read at ``launch_server``)."""
_aborts_traced: set[str] = set()
"""The calls (by their carrier's ``traceparent``, not verl's request id, which repeats) whose aborted
``llm_request`` vLLM made (parent restored here): no stand-in needed."""


class ForwardToOtelVerl(SpanProcessor):
    """Hands each ended engine span to otel_verl's processors: the same spool, OTLP exporter and counts.

    It looks the processors up per span, so spans follow otel_verl's tracing as it is now (set up again
    after a fork or a test reset); none are kept here, so nothing is left to flush.
    """

    def on_end(self, span: ReadableSpan) -> None:
        state = tracing.get_state()
        if state is None:
            return
        for processor in state.processors:
            try:
                processor.on_end(span)
            except Exception:  # a processor must never break vLLM's output loop
                logger.debug("otel_verl: span processor failed on an engine span", exc_info=True)


def engine_resource(base: Resource, extra: Mapping[str, Any] | None = None) -> Resource:
    """otel_verl's resource, renamed ``<service>.vllm``, with vLLM's own resource attributes."""
    service = str(base.attributes.get("service.name") or provider.DEFAULT_SERVICE_NAME)
    attributes: dict[str, Any] = {"service.name": service + ENGINE_SERVICE_SUFFIX, "vllm.process_id": str(os.getpid())}
    if _replica_rank is not None:
        attributes[semconv.VERL_ENGINE_REPLICA] = _replica_rank
    attributes.update({k: v for k, v in (extra or {}).items() if isinstance(v, (str, bool, int, float))})
    return base.merge(Resource(attributes))


def engine_provider(extra: Mapping[str, Any] | None = None) -> TracerProvider:
    """This process's engine provider (built once; otel_verl's tracing is set up first if it is not yet)."""
    global _engine
    with _lock:
        if _engine is not None and _engine[0] == os.getpid():
            return _engine[1]
        state = tracing.get_state() or provider.setup_tracing(semconv.ProcessRole.SERVER.value, set_global=False)
        engine = TracerProvider(resource=engine_resource(state.provider.resource, extra))
        engine.add_span_processor(ForwardToOtelVerl())
        _engine = (os.getpid(), engine)
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        trace.set_tracer_provider(engine)  # vLLM's @instrument loading spans in this process
    return engine


def _note_endpoint(endpoint: Any) -> None:
    """One line saying where the engine's spans go instead of vLLM's own endpoint."""
    global _noted_endpoint
    if _noted_endpoint:
        return
    _noted_endpoint = True
    state = tracing.get_state()
    places = []
    if state is not None and state.spool is not None:
        places.append(f"spool {state.spool.run_dir}")
    if state is not None and len(state.exporters) > (1 if state.spool is not None else 0):
        places.append(f"OTLP {otlp_endpoint() or 'default endpoint'}")
    logger.info(
        "otel_verl: vLLM's spans go with otel_verl's (%s), not to vLLM's own otlp_traces_endpoint=%s",
        ", ".join(places) or "nowhere: otel_verl exports nothing in this process",
        endpoint,
    )


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


_INIT_TRACER_PARAMS = ("instrumenting_module_name", "otlp_traces_endpoint", "extra_attributes")
_INSTRUMENT_MANUAL_PARAMS = ("span_name", "start_time", "end_time", "attributes", "context", "kind")


def _as_known(args: tuple, kwargs: dict, params: tuple[str, ...]) -> dict[str, Any] | None:
    """The call's arguments by name when they are exactly vLLM 0.24's parameters, else None.

    These two seams *replace* vLLM's function (its own provider, exporter and global tracer are what the
    fix keeps out), so unlike every other seam they do not call it; a call they cannot read as today's
    signature goes to vLLM's own function unchanged."""
    if len(args) > len(params) or not set(kwargs) <= set(params[len(args) :]):
        return None
    return {**dict(zip(params, args, strict=False)), **kwargs}


def init_tracer_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """vLLM's tracing switch, with otel_verl's engine provider in place of vLLM's own provider."""
    if not enabled():
        return wrapped(*args, **kwargs)
    known = _as_known(args, kwargs, _INIT_TRACER_PARAMS)
    if (
        known is None
        or not isinstance(known.get("instrumenting_module_name"), str)
        or not isinstance(known.get("otlp_traces_endpoint"), str)
        or not isinstance(known.get("extra_attributes") or {}, Mapping)
    ):
        return wrapped(*args, **kwargs)
    try:
        name = _arg(args, kwargs, 0, "instrumenting_module_name")
        extra = dict(_arg(args, kwargs, 2, "extra_attributes") or {})
        extra["vllm.instrumenting_module_name"] = str(name)
        tracer = engine_provider(extra).get_tracer(str(name))
        _note_endpoint(_arg(args, kwargs, 1, "otlp_traces_endpoint"))
        return tracer
    except Exception:
        call_failed((VLLM_OTEL_MODULE, "init_otel_tracer"))
        return wrapped(*args, **kwargs)


def _smart_context() -> Any:
    """vLLM's own fallback parent when a request brought no trace headers (current span, else env)."""
    smart = getattr(sys.modules.get(VLLM_OTEL_MODULE), "_get_smart_context", None)
    return smart() if callable(smart) else None


def _restore_aborted_parent(attributes: Any, context: Any) -> tuple[Any, Any]:
    """vLLM's engine core ends an aborted request with an output that carries no trace headers (vLLM 0.24:
    ``EngineCore`` builds ``EngineCoreOutput(req_id, [], finish_reason=ABORT)``), so its ``llm_request``
    would be the root of a trace of its own. Every other output carries them. A span without a parent
    whose request is one of verl's in-flight calls gets that call's carrier back, and says it was aborted; one
    whose id several in-flight calls share (verl's ``det-{priority}`` ids) stays an orphan, and each call gets
    :func:`record_aborted`'s stand-in: the analyzer counts an orphan, never an engine span under another call."""
    if context is not None and trace.get_current_span(context).get_span_context().is_valid:
        return attributes, context
    request_id = str((attributes or {}).get("gen_ai.request.id"))
    carrier = carrier_in_flight(request_id)
    if carrier is None:
        return attributes, context
    _aborts_traced.add(_call_key(carrier))
    return {**(attributes or {}), semconv.VERL_ENGINE_STOP_REASON: ABORTED}, propagate.extract(dict(carrier))


def _call_key(carrier: Mapping[str, str]) -> str:
    """One server call: its carrier's ``traceparent`` (the turn's engine round trip's own span)."""
    return str(carrier.get("traceparent"))


def instrument_manual_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``llm_request`` made as vLLM makes it, with the engine tracer instead of the global one."""
    if not enabled():
        return wrapped(*args, **kwargs)
    known = _as_known(args, kwargs, _INSTRUMENT_MANUAL_PARAMS)
    if (
        known is None
        or not isinstance(known.get("span_name"), str)
        or not isinstance(known.get("start_time"), int)
        or not isinstance(known.get("end_time"), (int, type(None)))
        or not isinstance(known.get("attributes") or {}, Mapping)
    ):
        return wrapped(*args, **kwargs)
    try:
        name = _arg(args, kwargs, 0, "span_name")
        start_time = _arg(args, kwargs, 1, "start_time")
        end_time = _arg(args, kwargs, 2, "end_time")
        attributes = _arg(args, kwargs, 3, "attributes")
        context = _arg(args, kwargs, 4, "context")
        kind = _arg(args, kwargs, 5, "kind")
        tracer = engine_provider().get_tracer(ENGINE_SCOPE)
        attributes, context = _restore_aborted_parent(attributes, context)
        span_kwargs: dict[str, Any] = {
            "name": name,
            "context": context if context is not None else _smart_context(),
            "start_time": start_time,
        }
        if kind is not None:
            span_kwargs["kind"] = kind
        span = tracer.start_span(**span_kwargs)
    except Exception:
        call_failed((VLLM_OUTPUT_PROCESSOR_MODULE, "instrument_manual"))
        return wrapped(*args, **kwargs)
    if attributes:
        span.set_attributes(attributes)
    if _replica_rank is not None:
        span.set_attribute(semconv.VERL_ENGINE_REPLICA, _replica_rank)
    if end_time is not None:
        span.end(end_time=end_time)
    else:
        span.end()
    return None


def engine_tracing_endpoint(rollout_config: Any) -> Any:
    """The ``otlp_traces_endpoint`` verl will hand vLLM (``rollout.engine_kwargs.vllm``), or None."""
    try:
        engine_kwargs = rollout_config.get("engine_kwargs", {}).get("vllm", {}) or {}
        return engine_kwargs.get("otlp_traces_endpoint")
    except Exception:
        return None


def warn_if_tracing_will_crash(rollout_config: Any) -> bool:
    """One warning per process when vLLM tracing is on with ``disable_log_stats=True`` (True: warned now)."""
    global _warned_log_stats
    if _warned_log_stats or not engine_tracing_endpoint(rollout_config):
        return False
    if not getattr(rollout_config, "disable_log_stats", False):
        return False
    _warned_log_stats = True
    logger.warning(
        "otel_verl: vLLM tracing is on (rollout.engine_kwargs.vllm.otlp_traces_endpoint) but "
        "rollout.disable_log_stats=True: vLLM 0.24 then asserts on the first finished request, its output "
        "handler dies and every later request fails with EngineDeadError. "
        "Fix: set actor_rollout_ref.rollout.disable_log_stats=False."
    )
    return True


@coroutine_wrapper
def launch_server_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Before verl launches vLLM: the replica's rank for the engine's spans, and the disable_log_stats check
    (verl's config is only read)."""
    global _replica_rank
    try:
        rank = getattr(instance, "replica_rank", None)
        _replica_rank = rank if isinstance(rank, int) else None
        warn_if_tracing_will_crash(instance.config)
    except Exception:
        call_failed((VLLM_SERVER_MODULE, "vLLMHttpServer.launch_server"))
    return wrapped(*args, **kwargs)


def _after_server_call(
    carrier: Mapping[str, str], started_ns: int, request_id: str, args: tuple, kwargs: dict, output: Any
) -> None:
    """After verl's ``vLLMHttpServer.generate`` handed the engine our carrier
    (:func:`otel_verl.instrumentation.engine_link.server_generate_wrapper`): the engine's side of an aborted
    request ended (:func:`record_aborted`) where vLLM traced nothing for it."""
    traced = _call_key(carrier) in _aborts_traced
    _aborts_traced.discard(_call_key(carrier))
    if getattr(output, "stop_reason", None) == ABORTED and _engine is not None and not traced:
        try:
            record_aborted(carrier, started_ns, _arg(args, kwargs, 0, "prompt_ids"), output, request_id)
        except Exception:
            call_failed((VLLM_SERVER_MODULE, "vLLMHttpServer.generate"))


follow_calls(_after_server_call)


def record_aborted(carrier: Mapping[str, str], started_ns: int, prompt_ids: Any, output: Any, request_id: Any) -> None:
    """An aborted request vLLM did not trace (aborted in the frontend, ``OutputProcessor.abort_requests``,
    which skips tracing; or refused at verl's gate before reaching vLLM) would leave the turn's engine call
    without an engine span. This one stands in: the same name,
    scope, service and parent as vLLM's, from verl's call into the engine to the abort, with the tokens
    generated until then and ``verl.engine.stop_reason=aborted``. Made only where vLLM traces (its
    tracer was set up in this process)."""
    ended_ns = time.time_ns()
    attributes: dict[str, Any] = {
        semconv.VERL_ENGINE_STOP_REASON: ABORTED,
        "gen_ai.usage.completion_tokens": len(getattr(output, "token_ids", None) or ()),
        "gen_ai.latency.e2e": (ended_ns - started_ns) / 1e9,
    }
    if prompt_ids is not None:
        attributes["gen_ai.usage.prompt_tokens"] = len(prompt_ids)
    if request_id is not None:
        attributes["gen_ai.request.id"] = str(request_id)
    if _replica_rank is not None:
        attributes[semconv.VERL_ENGINE_REPLICA] = _replica_rank
    span = engine_provider().get_tracer(ENGINE_SCOPE).start_span(
        ENGINE_SPAN, context=propagate.extract(dict(carrier)), kind=SpanKind.SERVER, start_time=started_ns,
        attributes=attributes,
    )  # fmt: skip
    span.end(end_time=ended_ns)
