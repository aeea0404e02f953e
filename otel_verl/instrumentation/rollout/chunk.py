"""One ``verl.rollout.worker`` span per ``AgentLoopWorker.generate_sequences`` call (a worker chunk).

The chunk span is parented on the carrier the manager put into the batch (popped at every detail
level, so verl never sees it), made current while verl dispatches the chunk's trajectories, and ended
when dispatch returned and no trajectory of the chunk is left (V1's fire-and-forget dispatch: when the
tasks it spawned are done too). While a chunk is open, finished requests' spans are held
(:mod:`otel_verl.export.hold`); its end releases them off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanContext, Status, StatusCode

from otel_verl import semconv
from otel_verl.config import OtelVerlConfig
from otel_verl.export import flush, provider, tracing
from otel_verl.instrumentation import ray_carrier
from otel_verl.instrumentation.rollout import barriers
from otel_verl.instrumentation.rollout.attributes import ABORTED, COMPLETED, as_int
from otel_verl.recording.cutting import UNKNOWN_WORKERS, RequestSizes, TraceBudget
from otel_verl.recording.sampling import ChunkSampler
from otel_verl.wrapping import threads
from otel_verl.wrapping.registry import enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

WORKER_GENERATE = ("verl.experimental.agent_loop.agent_loop", "AgentLoopWorker.generate_sequences")
_ACTOR_RANK = re.compile(r"agent_loop_worker_(\d+)")
UNKNOWN = object()
"""A value not looked up yet."""
_SIZES = RequestSizes()
"""This process's largest request so far: what each new request reserves in its trace."""


def worker_rank() -> int | None:
    """This actor's index, from the name AgentLoopManager gives it (agent_loop_worker_<i>_<uid>)."""
    try:
        import ray

        if not ray.is_initialized():  # get_runtime_context() would start a local cluster
            return None
        name = ray.get_runtime_context().get_actor_name() or ""
    except Exception:
        return None
    match = _ACTOR_RANK.match(name)
    return int(match.group(1)) if match else None


def ensure_worker_tracing() -> int | None:
    """Set this process up as an AgentLoopWorker (the first hook that fires there); its rank."""
    rank = worker_rank()
    if tracing.get_state() is None:
        provider.setup_tracing(semconv.ProcessRole.AGENT_LOOP_WORKER.value, worker_rank=rank)
    return rank


class WorkerChunk:
    """The open ``verl.rollout.worker`` span; ends when dispatch returned and no request is left."""

    def __init__(
        self,
        span: trace.Span,
        step: int | None,
        rank: int | None,
        manager_span_id: int | None,
        config: OtelVerlConfig | None = None,
        sampler: ChunkSampler | None = None,
        budget: TraceBudget | None = None,
    ) -> None:
        self.span = span
        self.budget = budget
        """Which trace each request's spans go to (None: the chunk's own, or per ``OTEL_VERL_TRACE_PER_REQUEST``)."""
        self.config = config
        """The process's settings when the chunk started (None: no tracing set up, record with defaults)."""
        self.sampler = sampler
        self.step = step
        self.rank = rank
        self.manager_span_id = manager_span_id
        self.outstanding = 0
        self.dispatched = False
        self.requests = 0
        self.status_counts: dict[str, int] = {}
        self.end_ns: int | None = None
        self.pending_tasks = 0
        self.context: otel_context.Context | None = None
        """The context attached while the chunk runs (its span current)."""
        self.response_length: Any = UNKNOWN
        """``rollout_config.response_length``, read at the first request's end (an OmegaConf lookup)."""
        self.trainer_mode: str | None = None
        """verl's ``trainer.v1.trainer_mode`` ("" when not a V1 worker), read at the first sample group."""
        self.training = False
        """A training chunk (not validation): its end and the step it came in count for the barriers."""

    def track_tasks(self, tasks: set[asyncio.Task[Any]]) -> None:
        """Fire-and-forget dispatch (V1): the chunk lasts until the tasks it spawned are done."""
        for task in tasks:
            if not task.done():
                self.pending_tasks += 1
                task.add_done_callback(self._task_done)

    def _task_done(self, _task: asyncio.Task[Any]) -> None:
        self.pending_tasks -= 1
        self.maybe_end()

    def request_started(self) -> None:
        self.outstanding += 1
        self.requests += 1

    def request_finished(self, status: str) -> None:
        self.outstanding -= 1
        self.status_counts[status] = self.status_counts.get(status, 0) + 1
        self.maybe_end()

    def maybe_end(self) -> None:
        if self.dispatched and self.outstanding <= 0 and self.pending_tasks <= 0 and self.end_ns is None:
            self.end_ns = time.time_ns()
            try:
                self._end_span()
            finally:
                flush.hold_end()  # this chunk's spans go to the exporters (and are flushed) off the event loop

    def _end_span(self) -> None:
        if self.training:
            barriers.chunk_ended(self, self.end_ns or time.time_ns())
        if self.context is not None:
            threads.unexempt(self.context)
        span = self.span
        if self.sampler is not None:
            self._close_sampler(span)
        budget = self.budget
        if budget is not None and span.is_recording():
            try:
                for context, attributes in (*budget.cut_off_links(), *budget.slowest_links()):
                    span.add_link(context, attributes)
                span.set_attribute(semconv.VERL_WORKER_NUM_OWN_TRACE, budget.own_trace)
            except Exception:
                logger.debug("otel_verl: links to the cut-off requests not added", exc_info=True)
        if span.is_recording():
            span.set_attribute(semconv.VERL_WORKER_NUM_REQUESTS, self.requests)
            span.set_attribute(semconv.VERL_WORKER_NUM_COMPLETED, self.status_counts.get(COMPLETED, 0))
            span.set_attribute(semconv.VERL_WORKER_NUM_ABORTED, self.status_counts.get(ABORTED, 0))
        span.end(end_time=self.end_ns)

    def _close_sampler(self, span: trace.Span) -> None:
        """Emit the held requests that turned out slow; summarize the rest on the worker span."""
        try:
            keep, summary = self.sampler.close()  # type: ignore[union-attr]
            for recorder in keep:
                if recorder.sampled:  # type: ignore[attr-defined]
                    recorder.emit()  # type: ignore[attr-defined]
            if span.is_recording():
                span.set_attributes(summary)
        except Exception:
            logger.debug("otel_verl: sampling decision failed", exc_info=True)

    def info(self) -> dict[str, Any]:
        ctx = self.span.get_span_context()
        return {
            "end_ns": self.end_ns or time.time_ns(),
            "trace_id": format(ctx.trace_id, "032x"),
            "span_id": format(ctx.span_id, "016x"),
            "rank": self.rank if self.rank is not None else -1,
            "step": self.step,
            "manager_span_id": self.manager_span_id,
            "trace_spans": self.budget.used if self.budget is not None else 0,
        }


CURRENT_CHUNK: ContextVar[WorkerChunk | None] = ContextVar("otel_verl_worker_chunk", default=None)
"""The open worker chunk; asyncio copies it into every trajectory task verl spawns."""


def _batch_value(batch: Any, key: str) -> Any:
    """``key`` of the batch's meta info (legacy ``DataProto``) or its non-tensor data (V1 ``TensorDict``)."""
    meta = ray_carrier.meta_info_of(batch)
    if meta is not None:
        return meta.get(key)
    try:
        value = batch.get(key)
        return getattr(value, "data", value)
    except Exception:
        return None


def _batch_step(batch: Any) -> int | None:
    return as_int(_batch_value(batch, "global_steps"))


def _max_turns(worker: Any) -> int | None:
    """verl's ``multi_turn.max_assistant_turns`` of this worker (None: not set, or not found)."""
    try:
        return as_int(worker.rollout_config.multi_turn.max_assistant_turns)
    except Exception:
        return None


def _trace_budget(
    config: OtelVerlConfig, carrier: Any, span: trace.Span, parent: SpanContext | None, worker: Any
) -> TraceBudget | None:
    """The chunk's trace cutting (:mod:`otel_verl.recording.cutting`), from its settings and what the
    manager put beside the carrier; None when requests are not emitted or traces are never cut."""
    limit = config.trace_span_budget()
    if not config.detail_at_least("request") or (limit <= 0 and not config.trace_per_request):
        return None
    extras = ray_carrier.carrier_dict(carrier) or {}
    share = as_int(extras.get(semconv.CARRIER_SPAN_BUDGET_KEY))
    if share is None:  # no rollout manager: the chunk's trace is its own; an older one: assume 16 workers
        share = limit - 1 if parent is None else limit // UNKNOWN_WORKERS
    step = None  # no step span (a validation before training): a request in a trace of its own links to its worker
    step_hex = extras.get(semconv.CARRIER_STEP_SPAN_KEY)
    if parent is not None and isinstance(step_hex, str):
        try:
            step = SpanContext(parent.trace_id, int(step_hex, 16), True, parent.trace_flags)
        except ValueError:
            step = None
    events = config.detail_at_least("full")
    return TraceBudget(
        max(0, share),
        limit if limit > 0 else 2**62,
        _SIZES.estimate(events, _max_turns(worker) if _SIZES.largest == 0 else None),
        _SIZES,
        span.get_span_context(),
        step,
        per_request=config.trace_per_request,
    )


def _start_chunk(batch: Any, worker: Any = None) -> tuple[WorkerChunk, Any] | tuple[None, None]:
    rank = ensure_worker_tracing()
    state = tracing.get_state()
    config = state.config if state is not None else None
    if rank is None and state is not None:  # not a named Ray actor: the rank the process was set up with
        rank = as_int(state.provider.resource.attributes.get(semconv.VERL_WORKER_RANK))
    carrier = ray_carrier.pop_from_meta_info(batch)  # popped at every detail level: verl never sees it
    if carrier is None:
        carrier = ray_carrier.pop_from_tensordict(batch)
    if config is not None and not config.detail_at_least("worker"):
        return None, None
    parent_ctx = ray_carrier.context_from_carrier(carrier) if carrier is not None else None
    step = _batch_step(batch)
    attributes: dict[str, Any] = {}
    if rank is not None:
        attributes[semconv.VERL_WORKER_RANK] = rank
    if step is not None and step >= 0:
        attributes[semconv.VERL_STEP] = step
    validate = _batch_value(batch, "validate")
    if validate is not None:
        attributes[semconv.VERL_VALIDATE] = bool(validate)
    span = tracing.tracer().start_span(semconv.SPAN_WORKER, context=parent_ctx, attributes=attributes)
    manager_span_id = trace.get_current_span(parent_ctx).get_span_context().span_id if parent_ctx else None
    sampler = budget = None
    if config is not None:
        sampler = ChunkSampler(config.sample_ratio, config.sample_keep_slowest, config.detail_at_least("request"))
        parent = trace.get_current_span(parent_ctx).get_span_context() if parent_ctx else None
        budget = _trace_budget(config, carrier, span, parent, worker)
    chunk_step = step if step is not None and step >= 0 else None
    chunk = WorkerChunk(span, chunk_step, rank, manager_span_id, config, sampler, budget)
    if not validate:
        chunk.training = True
        started = getattr(span, "start_time", None) or time.time_ns()
        barriers.chunk_started(chunk, chunk_step, started, parent_ctx is not None)
    flush.hold_begin()  # balanced by hold_end() in chunk.maybe_end()
    chunk.context = ctx = trace.set_span_in_context(span)
    threads.exempt(ctx)  # verl's tokenizer work in executor threads carries nothing (see threads.exempt)
    token = otel_context.attach(ctx)
    chunk_token = CURRENT_CHUNK.set(chunk)
    return chunk, (token, chunk_token)


async def generate_sequences_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """``AgentLoopWorker.generate_sequences(batch)``: the chunk span around verl's dispatch of its trajectories.

    A subclass's override that calls ``super().generate_sequences`` belongs to the chunk its own call opened."""
    if not enabled() or CURRENT_CHUNK.get() is not None:
        return await wrapped(*args, **kwargs)
    batch = args[0] if args else kwargs.get("batch")
    chunk = tokens = None
    try:
        chunk, tokens = _start_chunk(batch, instance)
    except Exception:
        call_failed(WORKER_GENERATE)
    error: BaseException | None = None
    before = asyncio.all_tasks() if chunk is not None else set()
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as exc:
        error = exc
        raise
    finally:
        if chunk is not None:
            try:
                chunk.track_tasks(asyncio.all_tasks() - before)
                if error is not None and chunk.span.is_recording():
                    chunk.span.record_exception(error)
                    chunk.span.set_status(Status(StatusCode.ERROR, type(error).__qualname__))
                chunk.dispatched = True
                chunk.maybe_end()
                CURRENT_CHUNK.reset(tokens[1])
                otel_context.detach(tokens[0])
            except Exception:
                logger.debug("otel_verl: worker span could not end", exc_info=True)
    try:
        if chunk is not None and chunk.end_ns is not None:
            meta = ray_carrier.meta_info_of(result)
            if meta is not None and chunk.manager_span_id is not None:
                meta[ray_carrier.WORKER_INFO_KEY] = chunk.info()
    except Exception:
        logger.debug("otel_verl: worker info not attached", exc_info=True)
    return result
