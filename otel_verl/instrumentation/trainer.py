"""Step and phase spans from verl's timers, in the trainer (TaskRunner) process.

Every ``marked_timer``/``simple_timer`` goes through ``verl.utils.profiler.performance._timer`` at
call time, so one wrapper sees all phases of both trainers (V1 ``PPOTrainer`` and legacy
``RayPPOTrainer``). The timer named ``step`` becomes ``verl.step`` carrying the trainer's
``global_steps``; the others become ``verl.phase <name>`` children. Timers that verl runs inside a
trajectory (``generate_sequences``, ``tool_calls``, ``compute_score`` metrics) are left to the
rollout instrumentation, which records them as events.

The rollout's worker spans hang under the phase that waits for them (:func:`dispatch_context`); the phases
where the V1 trainers stop the rollout tell the workers their barrier's end (:mod:`.rollout.barriers`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Generator
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Status, StatusCode

from otel_verl import semconv
from otel_verl.export import flush, provider, tracing
from otel_verl.export.ids import planned_ids
from otel_verl.instrumentation.rollout import barriers
from otel_verl.recording.recorder import current_request
from otel_verl.wrapping.registry import enabled, generator_wrapper
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

TIMER_MODULE = "verl.utils.profiler.performance"

STEP_TIMER = "step"
GEN_TIMER = "gen"
"""The phase that waits for the rollout (legacy: around the dispatch; V1: for the replay buffer's sample)."""
ROLLOUT_METRIC_TIMERS = frozenset({"generate_sequences", "tool_calls", "compute_score"})

_active_trainer: Any = None
_current_step: int | None = None
_step_span: trace.Span | None = None
_current_update: int | None = None
_step_counter = 0
_first_step: int | None = None
"""The first step the tracked trainer ran (``verl.trainer.first_step``)."""
_planned_gen: trace.SpanContext | None = None
"""The open step's ``gen`` span, planned when verl's V1 ``step`` dispatched the rollout before opening it."""
_gen_ended: float | None = None
"""``time.monotonic()`` when the last ``gen`` phase ended (:func:`rollout_ended_at`)."""
_ids = RandomIdGenerator()


def track_trainer(trainer: Any) -> None:
    """Read ``trainer.global_steps`` for step spans (done automatically for verl's trainers)."""
    global _active_trainer, _gen_ended, _first_step
    if trainer is not _active_trainer:
        _gen_ended = None  # a new trainer's rollouts have not ended yet
        _first_step = None
    _active_trainer = trainer


def in_process() -> bool:
    """A trainer is tracked, or a step is open, in this process."""
    return _active_trainer is not None or _current_step is not None


def active_trainer_mode() -> str | None:
    """The tracked trainer's mode as verl's V1 trainers name it (``sync``, ``colocate_async`` …), else None."""
    mode = getattr(_active_trainer, "trainer_mode", None)
    return mode if isinstance(mode, str) else None


def rollout_ended_at() -> float | None:
    """When (``time.monotonic()``) this process's last ``gen`` phase ended: in the synchronous trainers, every
    trajectory of the step had ended by then (the live account's settle counts the workers' hold from it)."""
    return _gen_ended


def current_step() -> int | None:
    """The step whose span is open in this process, if any."""
    return _current_step


def current_step_span() -> trace.SpanContext | None:
    """The open ``verl.step`` span's context, if any (requests cut out of its trace link to it)."""
    span = _step_span
    return span.get_span_context() if span is not None else None


def dispatch_context() -> otel_context.Context | None:
    """The context a rollout dispatched now hangs under: the phase that will wait for it.

    verl's legacy trainer dispatches inside its ``gen`` timer (the current span: None is returned). Its V1
    ``step`` dispatches in ``prepare_step``, directly in the step, and opens ``gen`` a few milliseconds later
    in the inner update that samples the replay buffer: then the step's first ``gen`` span gets an id planned
    here, and the workers hang under it. Their spans start before their parent by that gap (the dispatch
    itself); verl's timer keeps its own start (docs/trainers.md)."""
    global _planned_gen
    step = _step_span
    if step is None or trace.get_current_span().get_span_context() != step.get_span_context():
        return None
    context = step.get_span_context()
    if _planned_gen is None or _planned_gen.trace_id != context.trace_id:
        _planned_gen = trace.SpanContext(context.trace_id, _ids.generate_span_id(), False, context.trace_flags)
    return trace.set_span_in_context(trace.NonRecordingSpan(_planned_gen))


def set_current_update(index: int | None) -> int | None:
    """The inner update (``verl.update``) now open, whose phases carry its index; returns the previous one."""
    global _current_update
    previous, _current_update = _current_update, index
    return previous


def _trainer_mode() -> str | None:
    mode = getattr(_active_trainer, "trainer_mode", None)
    return mode if isinstance(mode, str) else None


def _step_attributes(step: int) -> dict[str, Any]:
    """``verl.step``, the trainer's first step and, for verl's trainers, which trainer ran it (mode, inner updates
    per step)."""
    global _first_step
    if _first_step is None:
        _first_step = step
    attributes: dict[str, Any] = {semconv.VERL_STEP: step, semconv.VERL_TRAINER_FIRST_STEP: _first_step}
    mode = _trainer_mode()
    if mode is not None:
        attributes[semconv.VERL_TRAINER_MODE] = mode
        inner = getattr(_active_trainer, "parameter_sync_step", None)
        if isinstance(inner, int) and not isinstance(inner, bool):
            attributes[semconv.VERL_PARAMETER_SYNC_STEP] = inner
    elif type(_active_trainer).__name__ == "RayPPOTrainer" or any(
        c.__name__ == "RayPPOTrainer" for c in type(_active_trainer).__mro__
    ):
        attributes[semconv.VERL_TRAINER_MODE] = "legacy"
    return attributes


def _global_step() -> int:
    global _step_counter
    steps = getattr(_active_trainer, "global_steps", None)
    if isinstance(steps, int):
        return steps
    _step_counter += 1
    return _step_counter


def _phase_edge(name: str, edge: str, at_ns: int | None) -> None:
    """Tell the rollout's barriers that a phase of the open step started or ended."""
    step, span = _current_step, _step_span
    if step is None or span is None:
        return
    try:
        barriers.phase_edge(_trainer_mode(), name, edge, step, span.get_span_context().span_id, at_ns or time.time_ns())
    except Exception:
        logger.debug("otel_verl: the workers were not told the sync point", exc_info=True)


def _start(name: str) -> tuple[trace.Span, object, int | None]:
    global _current_step, _step_span, _planned_gen
    if tracing.get_state() is None:
        provider.setup_tracing(semconv.ProcessRole.TRAINER.value)
    tracer = tracing.tracer()
    previous = _current_step
    if name == STEP_TIMER:
        step = _global_step()
        _current_step = step
        _planned_gen = None
        span = _step_span = tracer.start_span(semconv.SPAN_STEP, attributes=_step_attributes(step))
    else:
        attributes: dict[str, Any] = {semconv.VERL_PHASE_NAME: name}
        step = _current_step
        if step is None:  # V1 validates (``testing``) after its step's timer closed, in the same iteration
            trainer_step = getattr(_active_trainer, "global_steps", None)
            step = trainer_step if isinstance(trainer_step, int) and not isinstance(trainer_step, bool) else None
        if step is not None:
            attributes[semconv.VERL_STEP] = step
        if _current_update is not None:
            attributes[semconv.VERL_UPDATE_INDEX] = _current_update
        planned = _planned_gen if name == GEN_TIMER else None
        if planned is not None and trace.get_current_span().get_span_context().trace_id == planned.trace_id:
            _planned_gen = None  # the step's first gen: the dispatched workers' parent
            with planned_ids(planned.trace_id, planned.span_id):
                span = tracer.start_span(semconv.phase_span_name(name), attributes=attributes)
        else:
            span = tracer.start_span(semconv.phase_span_name(name), attributes=attributes)
        _phase_edge(name, "start", getattr(span, "start_time", None))
    token = otel_context.attach(trace.set_span_in_context(span))
    return span, token, previous


def _end(name: str, span: trace.Span, token: object, previous: int | None, error: BaseException | None) -> None:
    global _current_step, _step_span, _planned_gen, _gen_ended
    try:
        if error is not None and span.is_recording():
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
            span.set_attribute(semconv.ERROR_TYPE, type(error).__qualname__)
        span.end()
        if name != STEP_TIMER:
            _phase_edge(name, "end", getattr(span, "end_time", None))
        if name == GEN_TIMER:
            _gen_ended = time.monotonic()
    finally:
        try:
            otel_context.detach(token)  # type: ignore[arg-type]
        except Exception:
            logger.debug("otel_verl: context detach failed for timer %s", name, exc_info=True)
        if name == STEP_TIMER:
            _current_step = previous
            _step_span = None
            _planned_gen = None
            flush.flush_async()


def _traced_timer(wrapped: Any, args: tuple, kwargs: dict, name: str) -> Generator[Any, Any, Any]:
    try:
        started = _start(name)
    except Exception:
        logger.debug("otel_verl: could not start span for timer %s", name, exc_info=True)
        started = None
    error: BaseException | None = None
    try:
        return (yield from wrapped(*args, **kwargs))
    except BaseException as exc:
        error = exc
        raise
    finally:
        if started is not None:
            try:
                _end(name, *started, error)
            except Exception:
                logger.debug("otel_verl: could not end span for timer %s", name, exc_info=True)


@generator_wrapper
def timer_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    name = args[0] if args else kwargs.get("name")
    # timers inside a trajectory are not phases
    if (current_request.get()) is not None or not enabled():
        return wrapped(*args, **kwargs)
    if not isinstance(name, str):
        call_failed((TIMER_MODULE, "_timer"), f"timer name is {type(name).__name__}, not str")
        return wrapped(*args, **kwargs)
    if name in ROLLOUT_METRIC_TIMERS and _current_step is None and _active_trainer is None:
        return wrapped(*args, **kwargs)
    return _traced_timer(wrapped, args, kwargs, name)


def fit_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Remember the trainer (for ``global_steps``); flush once training ends."""
    try:
        track_trainer(instance)
        if tracing.get_state() is None:
            provider.setup_tracing(semconv.ProcessRole.TRAINER.value)
    except Exception:
        logger.debug("otel_verl: trainer tracking failed", exc_info=True)
    try:
        return wrapped(*args, **kwargs)
    finally:
        flush.flush_async()


def validate_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``verl.validate`` around verl's ``_validate``: the validation rollout's worker spans go under it.

    verl runs ``_validate`` before training outside any timer (the rollout's spans were roots of traces
    of their own) and every ``test_freq`` steps inside the step's ``testing`` timer (then it nests there).
    """
    if not enabled() or current_request.get() is not None:
        return wrapped(*args, **kwargs)
    try:
        if _active_trainer is None:
            track_trainer(instance)
        if tracing.get_state() is None:
            provider.setup_tracing(semconv.ProcessRole.TRAINER.value)
        step = getattr(instance, "global_steps", None)
        attributes: dict[str, Any] = {semconv.VERL_VALIDATE: True}
        if isinstance(step, int):
            attributes[semconv.VERL_STEP] = step
        span = tracing.tracer().start_span(semconv.SPAN_VALIDATE, attributes=attributes)
        token = otel_context.attach(trace.set_span_in_context(span))
    except Exception:
        call_failed(("verl.trainer.ppo.ray_trainer", "RayPPOTrainer._validate"))
        return wrapped(*args, **kwargs)
    error: BaseException | None = None
    try:
        return wrapped(*args, **kwargs)
    except BaseException as exc:
        error = exc
        raise
    finally:
        try:
            _end("validate", span, token, None, error)
        except Exception:
            logger.debug("otel_verl: could not end the validation span", exc_info=True)
