"""``verl.reward`` per request, also when computed remotely by a RewardLoopWorker.

Client side: ``AgentLoopWorker._compute_score`` is the reward event. When verl sends the score
to a RewardLoopWorker actor, the ``DataProto`` it builds for that call gets the event's carrier in
``meta_info`` (only DataProtos created while ``_compute_score`` runs, in that asyncio task); the
actor's wrapper removes it and parents ``verl.reward.compute`` on it.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from otel_verl import semconv
from otel_verl.export import flush, provider, tracing
from otel_verl.instrumentation import ray_carrier
from otel_verl.recording.recorder import current_request
from otel_verl.wrapping.registry import coroutine_wrapper, enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"
REWARD_LOOP_MODULE = "verl.experimental.reward_loop.reward_loop"
SPAN_REWARD_COMPUTE = "verl.reward.compute"
REMOTE_SCORE = (REWARD_LOOP_MODULE, "RewardLoopWorker.compute_score")
CLIENT_SCORE = (AGENT_LOOP_MODULE, "AgentLoopWorker._compute_score")

_pending_carrier: ContextVar[dict[str, str] | None] = ContextVar("otel_verl_reward_carrier", default=None)


@coroutine_wrapper
def compute_score_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    recorder = current_request.get()
    # scored in this process (or later by the trainer's reward phase): nothing to record or carry
    if recorder is None or getattr(instance, "reward_loop_worker_handles", None) is None or not enabled():
        return wrapped(*args, **kwargs)
    outputs = args[0] if args else kwargs.get("outputs")
    try:
        already_scored = outputs[-1].reward_score is not None
    except Exception:
        already_scored = False
    if already_scored:  # scored by the agent loop itself
        return wrapped(*args, **kwargs)
    return _recorded_remote_score(recorder, outputs, wrapped, args, kwargs)


async def _recorded_remote_score(recorder: Any, outputs: Any, wrapped: Any, args: tuple, kwargs: dict) -> Any:
    node = recorder.start(
        semconv.SPAN_REWARD, parent_id=recorder.root.span_id, attributes={semconv.VERL_REWARD_REMOTE: True}
    )
    token = _pending_carrier.set(recorder.carrier(node))
    context_token = otel_context.attach(recorder.otel_context(node))
    try:
        call = wrapped(*args, **kwargs)
        del wrapped, args, kwargs  # not kept alive (and on the GC's lists) while the reward worker scores
        result = await call
    except BaseException as exc:
        recorder.end(node, error=exc)
        raise
    finally:
        otel_context.detach(context_token)
        _pending_carrier.reset(token)
    try:
        score = outputs[-1].reward_score
        if isinstance(score, (int, float)) and not isinstance(score, bool):
            recorder.attributes_of(node)[semconv.VERL_REWARD_SCORE] = float(score)
    except Exception:
        pass
    recorder.end(node)
    return result


def dataproto_post_init_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    result = wrapped(*args, **kwargs)
    carrier = _pending_carrier.get()
    if carrier:
        ray_carrier.put_in_meta_info(instance, carrier)
    return result


async def reward_worker_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    data = args[0] if args else kwargs.get("data")
    carrier = ray_carrier.pop_from_meta_info(data)
    if carrier is None or not enabled():
        return await wrapped(*args, **kwargs)
    span = None
    try:
        if tracing.get_state() is None:
            provider.setup_tracing(semconv.ProcessRole.REWARD.value)
        parent = ray_carrier.context_from_carrier(carrier)
        attributes: dict[str, Any] = {semconv.VERL_REWARD_REMOTE: True}
        step = ray_carrier.step_from_context(parent)
        if step is not None:
            attributes[semconv.VERL_STEP] = step
        span = tracing.tracer().start_span(SPAN_REWARD_COMPUTE, context=parent, attributes=attributes)
    except Exception:
        call_failed(REMOTE_SCORE)
    # current while the reward manager runs: the reward function's own spans (in verl's executor
    # threads too, see threads.py) nest under verl.reward.compute
    token = otel_context.attach(trace.set_span_in_context(span)) if span is not None else None
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        if span is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, type(exc).__qualname__))
            span.end()
        raise
    finally:
        if token is not None:
            otel_context.detach(token)
    if span is not None:
        try:
            score = result.get("reward_score") if isinstance(result, dict) else None
            if isinstance(score, (int, float)) and not isinstance(score, bool):
                span.set_attribute(semconv.VERL_REWARD_SCORE, float(score))
        finally:
            span.end()
            flush.flush_async()
    return result
