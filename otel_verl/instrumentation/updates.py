"""One ``verl.update`` per inner update of a V1 step (``PPOTrainer._step_once``), linked to what it consumed.

verl's V1 ``step`` runs ``parameter_sync_step`` inner updates (separate-async; one otherwise): each samples a
mini-batch from the replay buffer (the ``gen`` phase) and trains on it (``old_log_prob`` ... ``update_actor``).
The span groups one update's phases (they carry :data:`~otel_verl.semconv.VERL_UPDATE_INDEX`), and when it
returns, the batch it trained on says which sample groups it consumed: one link per group to its span
(:mod:`otel_verl.instrumentation.rollout.group`, ids from the ``uid``), carrying the policy versions the
group was generated with and its staleness at this step, as verl's ``_compute_metrics`` defines it. The
links are made from the batch's TransferQueue tags (``global_steps``, ``min/max_global_steps``), which
verl's ``_step_once`` returns; nothing is read from TransferQueue.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

from otel_verl import semconv
from otel_verl.export import provider, tracing
from otel_verl.instrumentation import trainer
from otel_verl.instrumentation.sample_groups import group_span_id, group_trace_id, uid_of_key
from otel_verl.recording.recorder import current_request
from otel_verl.wrapping.registry import enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

STEP_ONCE = ("verl.trainer.ppo.v1.trainer_base", "PPOTrainer._step_once")
SYNC_MODES = frozenset({"sync"})
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def consumed_groups(batch: Any) -> dict[str, dict[str, int | None]]:
    """uid → the group's dispatch step, oldest/newest policy version and sample count, from the batch's tags."""
    groups: dict[str, dict[str, int | None]] = {}
    for key, tag in zip(getattr(batch, "keys", None) or (), getattr(batch, "tags", None) or (), strict=False):
        if not isinstance(tag, dict) or tag.get("is_padding", False) or not isinstance(key, str):
            continue
        group = groups.setdefault(uid_of_key(key), {"step": None, "min": None, "max": None, "oldest_max": None})
        group["samples"] = (group.get("samples") or 0) + 1
        step = _int(tag.get("global_steps"))
        low, high = _int(tag.get("min_global_steps")), _int(tag.get("max_global_steps"))
        if step is not None:
            group["step"] = step
        if low is not None:
            group["min"] = low if group["min"] is None else min(group["min"], low)
        if high is not None:
            group["max"] = high if group["max"] is None else max(group["max"], high)
            group["oldest_max"] = high if group["oldest_max"] is None else min(group["oldest_max"], high)
    return groups


def link_attributes(group: dict[str, int | None], consuming_step: int | None) -> dict[str, Any]:
    """What a consumption link says: dispatch step, policy versions, staleness (verl's definitions)."""
    attributes: dict[str, Any] = {}
    for key, attr in (
        ("step", semconv.VERL_DISPATCH_STEP),
        ("min", semconv.VERL_POLICY_VERSION_MIN),
        ("max", semconv.VERL_POLICY_VERSION_MAX),
        ("samples", semconv.VERL_GROUP_NUM_SAMPLES),
    ):
        if group.get(key) is not None:
            attributes[attr] = group[key]
    if consuming_step is not None and group["oldest_max"] is not None and group["min"] is not None:
        attributes[semconv.VERL_SAMPLE_STALENESS] = (consuming_step - 1) - group["oldest_max"]
        attributes[semconv.VERL_SAMPLE_STALENESS_WORST] = (consuming_step - 1) - group["min"]
    return attributes


def _start(instance: Any) -> tuple[trace.Span, object, int | None]:
    if tracing.get_state() is None:
        provider.setup_tracing(semconv.ProcessRole.TRAINER.value)
    index = _int(getattr(instance, "local_trigger_step", None))
    step = trainer.current_step()
    if step is None:
        step = _int(getattr(instance, "global_steps", None))
    attributes: dict[str, Any] = {}
    if step is not None:
        attributes[semconv.VERL_STEP] = step
    if index is not None:
        attributes[semconv.VERL_UPDATE_INDEX] = index
    span = tracing.tracer().start_span(semconv.SPAN_UPDATE, attributes=attributes)
    token = otel_context.attach(trace.set_span_in_context(span))
    previous = trainer.set_current_update(index)
    return span, token, previous


def _link_consumed(span: trace.Span, instance: Any, batch: Any) -> None:
    step = _int(getattr(instance, "global_steps", None))
    groups = consumed_groups(batch)
    own_traces = getattr(instance, "trainer_mode", "sync") not in SYNC_MODES
    step_trace = span.get_span_context().trace_id
    staleness: list[int] = []
    for uid, group in groups.items():
        attributes = link_attributes(group, step)
        if semconv.VERL_SAMPLE_STALENESS in attributes:
            staleness += [attributes[semconv.VERL_SAMPLE_STALENESS]] * int(group.get("samples") or 1)
        trace_id = group_trace_id(uid) if own_traces else step_trace
        span.add_link(SpanContext(trace_id, group_span_id(uid), is_remote=True, trace_flags=_SAMPLED), attributes)
    span.set_attribute(semconv.VERL_UPDATE_NUM_GROUPS, len(groups))
    span.set_attribute(semconv.VERL_UPDATE_NUM_SAMPLES, sum(int(g.get("samples") or 0) for g in groups.values()))
    if staleness:
        span.set_attribute(semconv.VERL_UPDATE_STALENESS_MAX, max(staleness))
        span.set_attribute(semconv.VERL_UPDATE_STALENESS_MEAN, sum(staleness) / len(staleness))


def _end(span: trace.Span, token: object, previous: int | None, instance: Any, batch: Any, error: Any) -> None:
    try:
        if span.is_recording():
            if error is not None:
                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
                span.set_attribute(semconv.ERROR_TYPE, type(error).__qualname__)
            elif batch is not None:
                try:
                    _link_consumed(span, instance, batch)
                except Exception:
                    call_failed(STEP_ONCE)
        span.end()
    finally:
        trainer.set_current_update(previous)
        otel_context.detach(token)  # type: ignore[arg-type]


def step_once_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``PPOTrainer._step_once(metrics, timing_raw, sample_batch_size)``: the inner update's span."""
    if not enabled() or current_request.get() is not None:
        return wrapped(*args, **kwargs)
    try:
        started = _start(instance)
    except Exception:
        call_failed(STEP_ONCE)
        return wrapped(*args, **kwargs)
    error: BaseException | None = None
    batch = None
    try:
        batch = wrapped(*args, **kwargs)
        return batch
    except BaseException as exc:
        error = exc
        raise
    finally:
        try:
            _end(*started, instance, batch, error)
        except Exception:
            logger.debug("otel_verl: inner update span could not end", exc_info=True)
