"""One ``verl.rollout.request`` per trajectory: ``AgentLoopWorker._run_agent_loop``, recorded in a frame of ours.

The wrapper makes the trajectory's :class:`~otel_verl.recording.recorder.RequestRecorder` and hands verl
a coroutine that awaits verl's own: it sets :data:`~otel_verl.recording.recorder.current_request` in
the trajectory's task (every hook below reads it), and when verl's coroutine returns or raises it ends
the request with its status, reward score and error (:func:`end_request`). ``_agent_loop_postprocess``
closes the last turn and notes the token counts.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace

from otel_verl import semconv
from otel_verl.export import tracing
from otel_verl.instrumentation.rollout.attributes import FAILED, as_int, request_status, trajectory_attributes
from otel_verl.instrumentation.rollout.chunk import (
    CURRENT_CHUNK,
    UNKNOWN,
    WorkerChunk,
    ensure_worker_tracing,
    worker_rank,
)
from otel_verl.instrumentation.rollout.group import sample_finished
from otel_verl.instrumentation.rollout.hooks import RequestSpan, any_hook, hook_inputs, request_ending, request_started
from otel_verl.recording.recorder import RequestRecorder, current_request
from otel_verl.wrapping.registry import coroutine_wrapper, enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"
RUN_AGENT_LOOP = (AGENT_LOOP_MODULE, "AgentLoopWorker._run_agent_loop")
POSTPROCESS = (AGENT_LOOP_MODULE, "AgentLoopWorker._agent_loop_postprocess")
_VERSIONS = (
    ("min_global_steps", semconv.VERL_POLICY_VERSION_MIN),
    ("max_global_steps", semconv.VERL_POLICY_VERSION_MAX),
)

_Hooked = tuple[RequestSpan | None, dict[str, Any]]
"""The span handed to the user's request hook and the inputs, for the response hook."""


def _request_recorder(chunk: WorkerChunk | None, args: tuple, kwargs: dict) -> RequestRecorder | None:
    """The recorder of a trajectory starting now, under the current span (None below ``worker`` detail)."""
    config = chunk.config if chunk is not None else None
    if config is None:
        if tracing.get_state() is None:
            ensure_worker_tracing()
        config = tracing.current_config()
    if not config.detail_at_least("worker"):
        return None
    trajectory = args[1] if len(args) > 1 else kwargs.get("trajectory", {})
    rank = chunk.rank if chunk is not None else worker_rank()
    attributes = trajectory_attributes(
        trajectory, kwargs.get("session_id"), kwargs.get("agent_name"), chunk.step if chunk else None, rank
    )
    return RequestRecorder(
        trace.get_current_span().get_span_context(),
        attributes,
        events=config.detail_at_least("full"),
        spans=config.detail_at_least("request"),
        own_trace=config.trace_per_request and (chunk is None or chunk.budget is None),
        sampler=chunk.sampler if chunk is not None else None,
        budget=chunk.budget if chunk is not None else None,
    )


@coroutine_wrapper
def run_agent_loop_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """One recorder per trajectory (a nested ``_run_agent_loop`` belongs to the running one)."""
    if current_request.get() is not None or not enabled():
        return wrapped(*args, **kwargs)
    chunk = CURRENT_CHUNK.get()
    hooked: _Hooked | None = None
    try:
        recorder = _request_recorder(chunk, args, kwargs)
        if recorder is not None and any_hook():  # the user's hooks (instrument(request_hook=...))
            inputs = hook_inputs(args, kwargs)
            hooked = (request_started(recorder, inputs), inputs)
    except Exception:
        call_failed(RUN_AGENT_LOOP)
        recorder = None
    call = wrapped(*args, **kwargs)
    if recorder is None:
        return call
    return _recorded_trajectory(call, recorder, chunk, instance, hooked)


async def _recorded_trajectory(
    call: Any, recorder: RequestRecorder, chunk: WorkerChunk | None, instance: Any, hooked: _Hooked | None = None
) -> Any:
    """Await verl's trajectory coroutine with ``recorder`` current; end the request when it is done.

    What this frame keeps while the trajectory runs (seconds, across many young-generation collections)
    is promoted to the GC's oldest generation, and enough of that triggers full collections of the
    worker's whole heap: so neither the call's arguments nor a context-variable token stay here (figures:
    docs/performance.md). Only the user's hooks, when set, keep the inputs (``hooked``).
    """
    current_request.set(recorder)  # unset again with set(None): the value before was None (checked by the caller)
    if chunk is not None:
        chunk.request_started()
    error: BaseException | None = None
    result = None
    try:
        result = await call
        return result
    except BaseException as exc:
        error = exc
        raise
    finally:
        current_request.set(None)
        end_request(recorder, chunk, instance, result, error, hooked)


def end_request(
    recorder: RequestRecorder,
    chunk: WorkerChunk | None,
    instance: Any,
    result: Any,
    error: BaseException | None,
    hooked: _Hooked | None = None,
) -> None:
    """The request's status, reward score and end; the chunk counts it as finished whatever happens."""
    status = FAILED
    try:
        if hooked is not None:
            request_ending(hooked[0], hooked[1], result if error is None else None)
        extra: dict[str, Any] = {}
        if error is None:
            score = getattr(result, "reward_score", None)
            if isinstance(score, (int, float)) and not isinstance(score, bool):
                extra[semconv.VERL_REWARD_SCORE] = float(score)
            response_length = chunk.response_length if chunk is not None else UNKNOWN
            if response_length is UNKNOWN:
                response_length = getattr(getattr(instance, "rollout_config", None), "response_length", None)
                if chunk is not None:
                    chunk.response_length = response_length
            recorder.root.attributes.update(extra)
            status = request_status(recorder, response_length)
        recorder.finish(status, extra, error)
        sample_finished(recorder.root.attributes)
    except Exception:
        logger.debug("otel_verl: request spans could not be built", exc_info=True)
    finally:
        if chunk is not None:
            chunk.request_finished(status)


@coroutine_wrapper
def postprocess_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Around ``AgentLoopWorker._agent_loop_postprocess(output, ...)``: the agent loop (any kind) has
    returned: close the last turn, note token counts. At entry, so no frame wraps the call itself."""
    recorder = current_request.get()
    if recorder is not None:
        try:
            recorder.close_turn()
            output = args[0] if args else kwargs.get("output")
            attrs = recorder.root.attributes
            response_ids = getattr(output, "response_ids", None)
            prompt_ids = getattr(output, "prompt_ids", None)
            if response_ids is not None:
                attrs[semconv.VERL_REQUEST_RESPONSE_TOKENS] = len(response_ids)
            if prompt_ids is not None:
                attrs[semconv.VERL_REQUEST_PROMPT_TOKENS] = len(prompt_ids)
            extra = getattr(output, "extra_fields", None)
            if isinstance(extra, dict):  # the policy versions verl's client noted (min/max_global_steps)
                for key, attr in _VERSIONS:
                    version = as_int(extra.get(key))
                    if version is not None:
                        attrs[attr] = version
        except Exception:
            call_failed(POSTPROCESS)
    return wrapped(*args, **kwargs)
