"""The submission gate of verl's vLLM server: how long a request is held before the engine while weights sync.

verl's ``vLLMHttpServer`` (0.9.1; verl#7511 on main) closes a gate in ``abort_all_requests`` before it pauses the
engine for a weight sync (with vLLM data-parallel > 1 the drain must see every admitted request) and opens it in
``open_submission_gate``; meanwhile ``generate`` parks in ``_park_until_admitted(request_id)``, or gets an aborted
output at once when the gate rejects late arrivals (a replica handed back to training). No engine span covers that
wait: vLLM has not seen the request yet. A request that finds the gate closed gets a ``verl.submission_hold`` span,
from its arrival at the gate to its admission (or rejection), under the engine call that waited (the carrier
:mod:`otel_verl.instrumentation.engine_link` exposes for the call); one that finds it open costs one attribute read
and gets nothing.
"""

from __future__ import annotations

import time
from typing import Any

from otel_verl import semconv
from otel_verl.export import provider, tracing
from otel_verl.instrumentation import engine_link, ray_carrier
from otel_verl.wrapping.registry import coroutine_wrapper, enabled
from otel_verl.wrapping.signatures import call_failed

VLLM_SERVER = "verl.workers.rollout.vllm_rollout.vllm_async_server"
GATE = (VLLM_SERVER, "vLLMHttpServer._park_until_admitted")


@coroutine_wrapper
def park_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``_park_until_admitted(request_id)``: verl's own coroutine when the gate is open, else it, timed."""
    if not getattr(instance, "_submission_paused", False) or not enabled():
        return wrapped(*args, **kwargs)
    request_id = args[0] if args else kwargs.get("request_id")
    return _held(wrapped(*args, **kwargs), request_id, engine_link.engine_carrier.get())


async def _held(call: Any, request_id: Any, carrier: dict[str, str] | None) -> Any:
    started_ns = time.time_ns()
    result = await call
    try:
        _emit(started_ns, time.time_ns(), request_id, carrier, rejected=result is not None)
    except Exception:
        call_failed(GATE)
    return result


def _emit(start_ns: int, end_ns: int, request_id: Any, carrier: dict[str, str] | None, rejected: bool) -> None:
    if tracing.get_state() is None:
        provider.setup_tracing(semconv.ProcessRole.SERVER.value)
    parent = ray_carrier.context_from_carrier(carrier) if carrier else None
    attributes: dict[str, Any] = {semconv.VERL_SUBMISSION_REJECTED: rejected}
    if request_id is not None:
        attributes[semconv.VERL_REQUEST_ID] = str(request_id)
    step = ray_carrier.step_from_context(parent)
    if step is not None:
        attributes[semconv.VERL_STEP] = step
    span = tracing.tracer().start_span(
        semconv.SPAN_SUBMISSION_HOLD, context=parent, attributes=attributes, start_time=start_ns
    )
    span.end(end_time=end_ns)
