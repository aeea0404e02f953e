"""One ``verl.rollout.group`` per V1 sample group: ``AgentLoopWorkerTQ._run_prompt`` (one prompt, its rollout.n
samples), in the AgentLoopWorker.

Why a span per group: in verl's async V1 trainers a group is dispatched in one step, generated across the
next ones (partial rollout resumes on new weights) and consumed by whichever inner update samples it from
the replay buffer; it belongs to no single step. So there the group is the root of a trace of its own,
linked to the worker span that dispatched it, and the consuming inner update links to it
(:mod:`otel_verl.instrumentation.updates`); the ids follow from the prompt's ``uid``
(:mod:`otel_verl.instrumentation.sample_groups`). Under the sync trainer (and for validation) it is consumed
in the step that dispatched it, so it stays in that step's trace, under its worker span.

The group's samples (``verl.rollout.request``) are its children; when one ends it reports its policy
versions here (:func:`sample_finished`), and the group span carries their range and count.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link

from otel_verl import semconv
from otel_verl.export import tracing
from otel_verl.export.ids import planned_ids
from otel_verl.instrumentation.rollout.attributes import as_int
from otel_verl.instrumentation.rollout.chunk import CURRENT_CHUNK
from otel_verl.instrumentation.sample_groups import group_span_id, group_trace_id
from otel_verl.wrapping.registry import coroutine_wrapper, enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

TQ_MODULE = "verl.trainer.ppo.v1.agent_loop_tq"
RUN_PROMPT = (TQ_MODULE, "AgentLoopWorkerTQ.__ray_actor_class__._run_prompt")
ASYNC_MODES = frozenset({"colocate_async", "separate_async"})


class SampleGroup:
    """The open group span and what its samples reported."""

    __slots__ = ("samples", "span", "version_max", "version_min")

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self.samples = 0
        self.version_min: int | None = None
        self.version_max: int | None = None


CURRENT_GROUP: ContextVar[SampleGroup | None] = ContextVar("otel_verl_sample_group", default=None)
"""The group whose samples run in this task (asyncio copies it into each sample's task)."""


def trainer_mode(worker: Any) -> str | None:
    """verl's ``trainer.v1.trainer_mode`` from the worker's config (looked up once per chunk)."""
    chunk = CURRENT_CHUNK.get()
    mode = getattr(chunk, "trainer_mode", None) if chunk is not None else None
    if mode is None:
        try:
            mode = str(worker.config.trainer.v1.trainer_mode)
        except Exception:
            mode = ""
        if chunk is not None:
            chunk.trainer_mode = mode
    return mode or None


def _start_group(worker: Any, args: tuple, kwargs: dict) -> tuple[SampleGroup, object] | None:
    chunk = CURRENT_CHUNK.get()
    if chunk is None:  # below ``worker`` detail, or no chunk span: nothing to hang the group on
        return None
    prompt = args[0] if args else kwargs.get("prompt")
    trajectory = args[2] if len(args) > 2 else kwargs.get("trajectory")
    uid = prompt.get("uid") if isinstance(prompt, dict) else None
    if not isinstance(uid, str) or not isinstance(trajectory, dict):
        call_failed(RUN_PROMPT, "no prompt uid or trajectory info")
        return None
    validate = bool(trajectory.get("validate", False))
    attributes: dict[str, Any] = {semconv.VERL_GROUP_UID: uid, semconv.VERL_VALIDATE: validate}
    for key, attr in (("step", semconv.VERL_STEP), ("sample_index", semconv.VERL_SAMPLE_INDEX)):
        value = as_int(trajectory.get(key))
        if value is not None and value >= 0:
            attributes[attr] = value
    if chunk.rank is not None:
        attributes[semconv.VERL_WORKER_RANK] = chunk.rank
    dispatched_by = trace.get_current_span().get_span_context()
    own_trace = trainer_mode(worker) in ASYNC_MODES and not validate
    tracer = tracing.tracer()
    if own_trace:
        with planned_ids(group_trace_id(uid), group_span_id(uid)):
            links = [Link(dispatched_by)] if dispatched_by.is_valid else []
            span = tracer.start_span(
                semconv.SPAN_GROUP, context=otel_context.Context(), attributes=attributes, links=links
            )
    else:
        with planned_ids(dispatched_by.trace_id, group_span_id(uid)):
            span = tracer.start_span(semconv.SPAN_GROUP, attributes=attributes)
    group = SampleGroup(span)
    token = otel_context.attach(trace.set_span_in_context(span))
    CURRENT_GROUP.set(group)  # this task is the group's own (verl spawns one per prompt)
    return group, token


def sample_finished(attributes: dict[str, Any]) -> None:
    """A sample of the current group ended: its policy versions (request span attributes) widen the group's."""
    group = CURRENT_GROUP.get()
    if group is None:
        return
    group.samples += 1
    low = attributes.get(semconv.VERL_POLICY_VERSION_MIN)
    high = attributes.get(semconv.VERL_POLICY_VERSION_MAX)
    if isinstance(low, int):
        group.version_min = low if group.version_min is None else min(group.version_min, low)
    if isinstance(high, int):
        group.version_max = high if group.version_max is None else max(group.version_max, high)


def _end_group(group: SampleGroup, token: object, error: BaseException | None) -> None:
    span = group.span
    try:
        if span.is_recording():
            span.set_attribute(semconv.VERL_GROUP_NUM_SAMPLES, group.samples)
            if group.version_min is not None:
                span.set_attribute(semconv.VERL_POLICY_VERSION_MIN, group.version_min)
            if group.version_max is not None:
                span.set_attribute(semconv.VERL_POLICY_VERSION_MAX, group.version_max)
            if error is not None:
                span.record_exception(error)
                span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__qualname__))
                span.set_attribute(semconv.ERROR_TYPE, type(error).__qualname__)
        span.end()
    finally:
        CURRENT_GROUP.set(None)
        otel_context.detach(token)  # type: ignore[arg-type]


@coroutine_wrapper
def run_prompt_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``_run_prompt(prompt, sampling_params, trajectory, trace)``: the group span around verl's coroutine."""
    if not enabled() or CURRENT_GROUP.get() is not None:
        return wrapped(*args, **kwargs)
    return _grouped(wrapped(*args, **kwargs), instance, args, kwargs)


async def _grouped(call: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    try:
        started = _start_group(instance, args, kwargs)
    except Exception:
        call_failed(RUN_PROMPT)
        started = None
    if started is None:
        return await call
    error: BaseException | None = None
    try:
        return await call
    except BaseException as exc:
        error = exc
        raise
    finally:
        try:
            _end_group(*started, error)
        except Exception:
            logger.debug("otel_verl: sample group span could not end", exc_info=True)
