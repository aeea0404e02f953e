"""Trainer side of the rollout: the caller's context rides into each worker chunk; ``verl.barrier`` after it.

``AgentLoopManager.generate_sequences`` (and the V1 ``AgentLoopManagerTQ``) puts the carrier of the
phase that waits for the rollout into the batch (``DataProto.meta_info`` or the V1 TensorDict) and removes
it again when the call returns: the current span, or, where verl's V1 ``step`` dispatches before that phase
opens, the step's coming ``gen`` (:func:`otel_verl.instrumentation.trainer.dispatch_context`). Each legacy
worker chunk's end time comes back in the chunk output's ``meta_info``
(:data:`~otel_verl.instrumentation.ray_carrier.WORKER_INFO_KEY`) and is popped in ``DataProto.concat``
before verl merges the outputs, so verl never sees it; then one ``verl.barrier`` per worker spans
from its chunk's end to the slowest chunk's end. V1 workers answer nothing: the manager only remembers them,
to be told each step's sync point (:mod:`.barriers`).
"""

from __future__ import annotations

import inspect
import logging
import threading
from collections import OrderedDict
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext

from otel_verl import semconv
from otel_verl.export import tracing
from otel_verl.instrumentation import ray_carrier, trainer
from otel_verl.instrumentation.rollout import barriers
from otel_verl.instrumentation.rollout.attributes import as_int
from otel_verl.recording.cutting import UNKNOWN_WORKERS, worker_allotment
from otel_verl.wrapping.registry import enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

MANAGER_GENERATE = ("verl.experimental.agent_loop.agent_loop", "AgentLoopManager.generate_sequences")
CONCAT = ("verl.protocol", "DataProto.concat")

_worker_infos: dict[int, list[dict[str, Any]]] = {}
"""Worker-chunk results collected by the ``DataProto.concat`` wrapper, keyed by the manager span id."""
_infos_lock = threading.Lock()

_given: OrderedDict[int, int] = OrderedDict()
"""trace id → spans of that trace already given to rollouts (a step's rollout, then its validation):
the last few traces only. While a rollout runs it holds all it was given; when its chunks' answers are
back, what they really put in the trace (:func:`_settle`)."""
_GIVEN_TRACES = 16
_settling: dict[int, tuple[int, int, int]] = {}
"""manager span id → (trace id, spans given before this rollout, its fixed part: structure and per-worker spans)."""


def generate_sequences_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Carry the caller's context into every chunk; synthesize barrier spans after a legacy call."""
    if not enabled():
        return wrapped(*args, **kwargs)
    prompts = args[0] if args else kwargs.get("prompts")
    injected = None
    parent_id = None
    try:
        context = trainer.dispatch_context()
        span_ctx = trace.get_current_span(context).get_span_context()
        if span_ctx.is_valid:
            carrier = ray_carrier.current_carrier(context)
            parent_id = span_ctx.span_id
            carrier.update(_cutting_extras(instance, span_ctx, parent_id))
            if ray_carrier.put_in_meta_info(prompts, carrier):
                injected = "meta"
            elif prompts is not None and ray_carrier.put_in_tensordict(prompts, carrier):
                injected = "td"
                barriers.remember_workers(instance)
            with _infos_lock:
                _worker_infos[parent_id] = []
    except Exception:
        call_failed(MANAGER_GENERATE)
    finalize = _manager_finalizer(prompts, injected, parent_id)
    try:
        result = wrapped(*args, **kwargs)
    except BaseException:
        finalize()
        raise
    if inspect.iscoroutine(result):  # auto_await hands the coroutine to an awaiting caller
        return _finalize_after(result, finalize)
    finalize()
    return result


def _cutting_extras(instance: Any, span_ctx: SpanContext, manager_span_id: int) -> dict[str, str]:
    """What rides beside the carrier for trace cutting (:mod:`otel_verl.recording.cutting`): the step span's
    id, and each worker chunk's share of the step's trace (of what earlier rollouts in it left)."""
    extras: dict[str, str] = {}
    step = trainer.current_step_span()
    if step is not None and step.trace_id == span_ctx.trace_id:
        extras[semconv.CARRIER_STEP_SPAN_KEY] = format(step.span_id, "016x")
    config = tracing.current_config()
    budget = config.trace_span_budget()
    if budget <= 0 or config.trace_per_request:
        return extras
    workers = getattr(instance, "agent_loop_workers", None)
    count = len(workers) if isinstance(workers, (list, tuple)) else None
    with _infos_lock:
        used = _given.get(span_ctx.trace_id, 0)
        share, taken = worker_allotment(budget, count, used)
        _given[span_ctx.trace_id] = used + taken
        _settling[manager_span_id] = (span_ctx.trace_id, used, taken - share * (count or UNKNOWN_WORKERS))
        _given.move_to_end(span_ctx.trace_id)
        while len(_given) > _GIVEN_TRACES:
            _given.popitem(last=False)
    extras[semconv.CARRIER_SPAN_BUDGET_KEY] = str(share)
    return extras


def _settle(manager_span_id: int, infos: list[dict[str, Any]]) -> None:
    """The rollout is back: its trace is charged what its chunks really put there (their answers say), so a
    later rollout in the same step (a validation at ``test_freq``) gets the rest. Without answers (V1 collects
    its chunks elsewhere) the rollout keeps all it was given."""
    with _infos_lock:
        settling = _settling.pop(manager_span_id, None)
        if settling is None or not infos or settling[0] not in _given:
            return
        trace_id, before, fixed = settling
        _given[trace_id] = before + fixed + sum(as_int(info.get("trace_spans")) or 0 for info in infos)


async def _finalize_after(coro: Any, finalize: Any) -> Any:
    try:
        return await coro
    finally:
        finalize()


def _manager_finalizer(prompts: Any, injected: str | None, parent_id: int | None) -> Any:
    def finalize() -> None:
        try:
            if injected == "meta":
                ray_carrier.pop_from_meta_info(prompts)
            elif injected == "td":
                ray_carrier.pop_from_tensordict(prompts)
            if parent_id is not None:
                with _infos_lock:
                    infos = _worker_infos.pop(parent_id, [])
                _settle(parent_id, infos)
                barriers.emit_after_rollout(infos)
        except Exception:
            logger.debug("otel_verl: manager post-processing failed", exc_info=True)

    return finalize


def concat_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Pop worker-chunk end times before verl merges meta_info (so verl never sees them). The same wrapper on
    ``verl.protocol.DataProto.concat`` (``data``) and on what ``verl.DataProto`` resolves to (the NeoProto view's
    ``concat(items, new_index=False)`` on verl's ``neo``): the list is the first argument either way."""
    data = args[0] if args else kwargs.get("data", kwargs.get("items"))
    try:
        for item in data or ():
            meta = ray_carrier.meta_info_of(item)
            info = meta.pop(ray_carrier.WORKER_INFO_KEY, None) if meta is not None else None
            if info:
                with _infos_lock:
                    bucket = _worker_infos.get(info.get("manager_span_id", -1))
                    if bucket is not None:
                        bucket.append(info)
    except Exception:
        call_failed(CONCAT)
    return wrapped(*args, **kwargs)
