"""One ``verl.weight_sync`` per parameter sync: ``CheckpointEngineManager.update_weights(global_steps)``.

verl syncs the trainer's weights into the rollout replicas through this one method in every V1 mode (the
sync and colocate trainers' in-process ``naive`` backend, separate-async's NCCL/NIXL/... backends, also
when switching hybrid replicas back to rollout). The span says which version went out, over which backend,
to how many replicas; its duration is the sync's seconds, and the bytes are those the backend reports in
the metrics the method returns (verl's delta engines: ``checkpoint_engine/payload_mbytes``). Why parameter
sync grew (verl#4896) is then a question of these spans across steps.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from otel_verl import semconv
from otel_verl.export import provider, tracing
from otel_verl.instrumentation import trainer
from otel_verl.wrapping.registry import enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

UPDATE_WEIGHTS = ("verl.checkpoint_engine.base", "CheckpointEngineManager.update_weights")
PAYLOAD_MBYTES = "checkpoint_engine/payload_mbytes"


def _start(instance: Any, args: tuple, kwargs: dict) -> tuple[trace.Span, object]:
    if tracing.get_state() is None:
        provider.setup_tracing(semconv.ProcessRole.TRAINER.value)
    version = args[0] if args else kwargs.get("global_steps")
    attributes: dict[str, Any] = {}
    if isinstance(version, int) and not isinstance(version, bool):
        attributes[semconv.VERL_SYNC_VERSION] = version
    backend = getattr(instance, "backend", None)
    if isinstance(backend, str):
        attributes[semconv.VERL_SYNC_BACKEND] = backend
    replicas = getattr(instance, "replicas", None)
    if isinstance(replicas, list):
        attributes[semconv.VERL_SYNC_REPLICAS] = len(replicas)
    step = trainer.current_step()
    if step is not None:
        attributes[semconv.VERL_STEP] = step
    span = tracing.tracer().start_span(semconv.SPAN_WEIGHT_SYNC, attributes=attributes)
    return span, otel_context.attach(trace.set_span_in_context(span))


def _end(span: trace.Span, token: object, result: Any, error: BaseException | None) -> None:
    try:
        if span.is_recording():
            if error is not None:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
                span.set_attribute(semconv.ERROR_TYPE, type(error).__qualname__)
            elif isinstance(result, dict) and isinstance(result.get(PAYLOAD_MBYTES), (int, float)):
                span.set_attribute(semconv.VERL_SYNC_BYTES, int(result[PAYLOAD_MBYTES] * 2**20))
        span.end()
    finally:
        otel_context.detach(token)  # type: ignore[arg-type]


def update_weights_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """verl's ``@auto_await`` method: a plain call runs the sync (the trainer's), an awaiting caller gets the
    coroutine back; either way the span covers the sync itself."""
    if not enabled():
        return wrapped(*args, **kwargs)
    try:
        started = _start(instance, args, kwargs)
    except Exception:
        call_failed(UPDATE_WEIGHTS)
        return wrapped(*args, **kwargs)
    try:
        result = wrapped(*args, **kwargs)
    except BaseException as exc:
        _finish(started, None, exc)
        raise
    if inspect.iscoroutine(result):
        return _awaited(result, started)
    _finish(started, result, None)
    return result


async def _awaited(coro: Any, started: tuple[trace.Span, object]) -> Any:
    error: BaseException | None = None
    result = None
    try:
        result = await coro
        return result
    except BaseException as exc:
        error = exc
        raise
    finally:
        _finish(started, result, error)


def _finish(started: tuple[trace.Span, object], result: Any, error: BaseException | None) -> None:
    try:
        _end(*started, result, error)
    except Exception:
        logger.debug("otel_verl: weight sync span could not end", exc_info=True)
