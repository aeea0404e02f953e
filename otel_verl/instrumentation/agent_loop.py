"""Worker, request, turn, preprocess, tool-parse and barrier spans around verl's agent loop.

Manager side (trainer process): the carrier of the current span rides into each worker chunk
(``DataProto.meta_info`` or the V1 TensorDict) and is removed again when the call returns; worker
chunk end times come back in the chunk's ``meta_info`` and are popped in ``DataProto.concat``
before verl merges them, so the manager can synthesize one ``verl.barrier`` per worker.

Worker side: one ``verl.rollout.worker`` span per chunk, one :class:`RequestRecorder` per
trajectory (``_run_agent_loop``), turns opened by ``ToolAgentLoop._handle_generating_state``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import re
import threading
import time
from contextvars import ContextVar
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanContext, Status, StatusCode

from otel_verl import semconv
from otel_verl.export import setup
from otel_verl.instrumentation import _context, idle, propagation, threads
from otel_verl.instrumentation._wrap import Expected, call_failed, coroutine_wrapper, enabled, expect
from otel_verl.recorder import (
    RequestPlan,
    RequestRecorder,
    adopt_request,
    clear_hand_over,
    current_request,
    hand_over,
)
from otel_verl.sampling import ChunkSampler

logger = logging.getLogger(__name__)

AGENT_LOOP_MODULE = "verl.experimental.agent_loop.agent_loop"
TOOL_AGENT_MODULE = "verl.experimental.agent_loop.tool_agent_loop"
TOOL_PARSER_MODULE = "verl.experimental.agent_loop.tool_parser"
PROTOCOL_MODULE = "verl.protocol"
TQ_MODULE = "verl.trainer.ppo.v1.agent_loop_tq"

WORKER_INFO_KEY = semconv.CARRIER_KEY + ".worker"
MANAGER_GENERATE = (AGENT_LOOP_MODULE, "AgentLoopManager.generate_sequences")
CONCAT = (PROTOCOL_MODULE, "DataProto.concat")
WORKER_GENERATE = (AGENT_LOOP_MODULE, "AgentLoopWorker.generate_sequences")
RUN_AGENT_LOOP = (AGENT_LOOP_MODULE, "AgentLoopWorker._run_agent_loop")
POSTPROCESS = (AGENT_LOOP_MODULE, "AgentLoopWorker._agent_loop_postprocess")
_ACTOR_RANK = re.compile(r"agent_loop_worker_(\d+)")

# Worker-chunk results collected by the DataProto.concat wrapper, keyed by the manager span id.
_worker_infos: dict[int, list[dict[str, Any]]] = {}
_infos_lock = threading.Lock()


# ------------------------------------------------------------------ helpers
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


def _ensure_worker_tracing() -> int | None:
    rank = worker_rank()
    if setup.get_state() is None:
        setup.setup_tracing(semconv.ProcessRole.AGENT_LOOP_WORKER.value, worker_rank=rank)
    return rank


def _as_int(value: Any) -> int | None:
    if type(value) is int:  # the common case, on every trajectory: no checks
        return value
    try:
        if value is None or isinstance(value, bool):
            return None
        return int(value.item() if hasattr(value, "item") else value)
    except Exception:
        return None


# ------------------------------------------------------------------ manager side
def _manager_generate_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Carry the caller's context into every chunk; synthesize barrier spans after a legacy call."""
    if not enabled():
        return wrapped(*args, **kwargs)
    prompts = args[0] if args else kwargs.get("prompts")
    injected = None
    parent_id = None
    try:
        span_ctx = trace.get_current_span().get_span_context()
        if span_ctx.is_valid:
            carrier = propagation.current_carrier()
            parent_id = span_ctx.span_id
            if propagation.put_in_meta_info(prompts, carrier):
                injected = "meta"
            elif prompts is not None and propagation.put_in_tensordict(prompts, carrier):
                injected = "td"
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


async def _finalize_after(coro: Any, finalize: Any) -> Any:
    try:
        return await coro
    finally:
        finalize()


def _manager_finalizer(prompts: Any, injected: str | None, parent_id: int | None) -> Any:
    def finalize() -> None:
        try:
            if injected == "meta":
                propagation.pop_from_meta_info(prompts)
            elif injected == "td":
                propagation.pop_from_tensordict(prompts)
            if parent_id is not None:
                with _infos_lock:
                    infos = _worker_infos.pop(parent_id, [])
                _emit_barriers(infos, time.time_ns())
        except Exception:
            logger.debug("otel_verl: manager post-processing failed", exc_info=True)

    return finalize


def _emit_barriers(infos: list[dict[str, Any]], manager_end_ns: int) -> None:
    """One ``verl.barrier`` per worker: from its chunk end to the slowest chunk's end."""
    if not infos:
        return
    slowest = max(infos, key=lambda info: info["end_ns"])
    tracer = setup.tracer()
    for info in infos:
        parent = SpanContext(
            int(info["trace_id"], 16),
            int(info["span_id"], 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
        ctx = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        attributes = {
            semconv.VERL_WORKER_RANK: info.get("rank", -1),
            semconv.VERL_BARRIER_SLOWEST_RANK: slowest.get("rank", -1),
        }
        if info.get("step") is not None:
            attributes[semconv.VERL_STEP] = info["step"]
        span = tracer.start_span(semconv.SPAN_BARRIER, context=ctx, attributes=attributes, start_time=info["end_ns"])
        span.end(end_time=max(slowest["end_ns"], info["end_ns"]))


def _concat_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Pop worker-chunk end times before verl merges meta_info (so verl never sees them)."""
    data = args[0] if args else kwargs.get("data")
    try:
        for item in data or ():
            meta = getattr(item, "meta_info", None)
            info = meta.pop(WORKER_INFO_KEY, None) if isinstance(meta, dict) else None
            if info:
                with _infos_lock:
                    bucket = _worker_infos.get(info.get("manager_span_id", -1))
                    if bucket is not None:
                        bucket.append(info)
    except Exception:
        call_failed(CONCAT)
    return wrapped(*args, **kwargs)


# ------------------------------------------------------------------ worker side
class WorkerChunk:
    """The open ``verl.rollout.worker`` span; ends when dispatch returned and no request is left."""

    def __init__(
        self,
        span: trace.Span,
        step: int | None,
        rank: int | None,
        manager_span_id: int | None,
        sampler: ChunkSampler | None = None,
    ) -> None:
        self.span = span
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
        self.plan: RequestPlan | None = None
        """What the chunk's trajectories share (None below ``worker`` detail: nothing is recorded)."""
        self.context: otel_context.Context | None = None
        """The context attached while the chunk runs: a trajectory started in it has the chunk's plan."""
        self.response_length: Any = _UNKNOWN
        """``rollout_config.response_length``, read at the first request's end (an OmegaConf lookup)."""
        self.launched: dict[Any, tuple[RequestRecorder, Any]] = {}
        """Trajectory coroutines made since the last :meth:`_bind`: coroutine -> (recorder, worker)."""

    def track_tasks(self, tasks: set[asyncio.Task[Any]]) -> None:
        """Fire-and-forget dispatch (V1): the chunk lasts until the tasks it spawned are done."""
        for task in tasks:
            if not task.done():
                self.pending_tasks += 1
                task.add_done_callback(self._task_done)

    def _task_done(self, _task: asyncio.Task[Any]) -> None:
        self.pending_tasks -= 1
        self.maybe_end()

    def launch(self, call: Any, recorder: RequestRecorder, instance: Any) -> bool:
        """Record the trajectory coroutine ``call`` with no frame of ours around it (False: frame it).

        verl runs each trajectory as a task of its own, made from the coroutine right after this
        call returns. One callback, scheduled before the first of those tasks can start, finds them
        (:meth:`_bind`) and has each end its request when it is done; the recorder reaches the task
        through :func:`~otel_verl.recorder.hand_over`. A frame around the trajectory would be passed
        through at each of its ~30 suspensions, and kept alive, with what it holds, for seconds.
        """
        if not _frameless:
            return False
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        launched = self.launched
        if not launched:
            loop.call_soon(self._bind)
        launched[call] = (recorder, instance)
        hand_over(call, recorder)
        self.request_started()
        return True

    def _bind(self) -> None:
        """The tasks of the trajectories launched since the last call: each ends its request when done."""
        launched, self.launched = self.launched, {}
        try:
            for task in asyncio.all_tasks():
                entry = launched.pop(task.get_coro(), None)
                if entry is not None:
                    task.add_done_callback(functools.partial(_trajectory_done, self, *entry))
                    if not launched:
                        break
        except Exception:
            logger.debug("otel_verl: trajectory tasks not found", exc_info=True)
        if launched:  # awaited in place, or made into a task later: its end cannot be seen without a frame
            _not_tasks(len(launched))
            for recorder, _instance in launched.values():
                recorder.finished = True
                self.request_lost()
            self.maybe_end()

    def request_started(self) -> None:
        self.outstanding += 1
        self.requests += 1

    def request_lost(self) -> None:
        """Undo :meth:`request_started` for a request whose end cannot be seen (nothing is recorded)."""
        self.outstanding -= 1
        self.requests -= 1

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
                setup.hold_end()  # this chunk's spans go to the exporters (and are flushed) off the event loop

    def _end_span(self) -> None:
        if self.context is not None:
            threads.unexempt(self.context)
        span = self.span
        if self.sampler is not None:
            self._close_sampler(span)
        if span.is_recording():
            span.set_attribute(semconv.VERL_WORKER_NUM_REQUESTS, self.requests)
            span.set_attribute(
                semconv.VERL_WORKER_NUM_COMPLETED, self.status_counts.get(semconv.RequestStatus.COMPLETED.value, 0)
            )
            span.set_attribute(
                semconv.VERL_WORKER_NUM_ABORTED, self.status_counts.get(semconv.RequestStatus.ABORTED.value, 0)
            )
        span.end(end_time=self.end_ns)

    def _close_sampler(self, span: trace.Span) -> None:
        """Emit the held requests that turned out slow; summarize the rest on the worker span."""
        try:
            keep, summary = self.sampler.close()  # type: ignore[union-attr]
            for recorder in keep:
                if recorder.sampled:
                    recorder.emit()
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
        }


def _start_chunk(batch: Any, worker: Any) -> tuple[WorkerChunk, Any] | tuple[None, None]:
    rank = _ensure_worker_tracing()
    state = setup.get_state()
    config = state.config if state is not None else None
    if rank is None and state is not None:  # not a named Ray actor: the rank the process was set up with
        rank = _as_int(state.provider.resource.attributes.get(semconv.VERL_WORKER_RANK))
    carrier = propagation.pop_from_meta_info(batch)  # popped at every detail level: verl never sees it
    if carrier is None:
        carrier = propagation.pop_from_tensordict(batch)
    idle.retire_for_rollout(state, worker)
    if config is not None and not config.detail_at_least("worker"):
        return None, None
    parent_ctx = propagation.context_from_carrier(carrier) if carrier is not None else None
    step = None
    meta = getattr(batch, "meta_info", None)
    if isinstance(meta, dict):
        step = _as_int(meta.get("global_steps"))
    else:
        try:
            step = _as_int(getattr(batch.get("global_steps"), "data", batch.get("global_steps")))
        except Exception:
            step = None
    attributes: dict[str, Any] = {}
    if rank is not None:
        attributes[semconv.VERL_WORKER_RANK] = rank
    if step is not None and step >= 0:
        attributes[semconv.VERL_STEP] = step
    validate = meta.get("validate") if isinstance(meta, dict) else None
    if validate is not None:
        attributes[semconv.VERL_VALIDATE] = bool(validate)
    span = setup.tracer().start_span(semconv.SPAN_WORKER, context=parent_ctx, attributes=attributes)
    manager_span_id = trace.get_current_span(parent_ctx).get_span_context().span_id if parent_ctx else None
    sampler = None
    if config is not None:
        sampler = ChunkSampler(config.sample_ratio, config.sample_keep_slowest, config.detail_at_least("request"))
    chunk = WorkerChunk(span, step if step is not None and step >= 0 else None, rank, manager_span_id, sampler)
    if config is not None:
        chunk.plan = RequestPlan(
            span.get_span_context(),
            events=config.detail_at_least("full"),
            spans=config.detail_at_least("request"),
            own_trace=config.trace_per_request,
            sampler=sampler,
            hold=state.hold if state is not None else None,
        )
    setup.hold_begin()  # balanced by hold_end() in chunk.maybe_end()
    chunk.context = ctx = trace.set_span_in_context(span)
    threads.exempt(ctx)  # verl's tokenizer work in executor threads carries nothing (see threads.exempt)
    token = otel_context.attach(ctx)
    chunk_token = _CHUNK.set(chunk)
    return chunk, (token, chunk_token)


async def _worker_generate_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    if not enabled():
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
                clear_hand_over()
                _CHUNK.reset(tokens[1])
                otel_context.detach(tokens[0])
            except Exception:
                logger.debug("otel_verl: worker span could not end", exc_info=True)
    try:
        if chunk is not None and chunk.end_ns is not None:
            meta = getattr(result, "meta_info", None)
            if isinstance(meta, dict) and chunk.manager_span_id is not None:
                meta[WORKER_INFO_KEY] = chunk.info()
    except Exception:
        logger.debug("otel_verl: worker info not attached", exc_info=True)
    return result


_ABORTED, _TRUNCATED, _COMPLETED, _FAILED = (
    s.value
    for s in (
        semconv.RequestStatus.ABORTED,
        semconv.RequestStatus.TRUNCATED,
        semconv.RequestStatus.COMPLETED,
        semconv.RequestStatus.FAILED,
    )
)


def _request_status(recorder: RequestRecorder, response_length: int | None) -> str:
    stop = (recorder.last_stop_reason or "").lower()
    if stop in ("aborted", "abort"):
        return _ABORTED
    tokens = recorder.root.attributes.get(semconv.VERL_REQUEST_RESPONSE_TOKENS)
    if stop == "length" or (response_length and isinstance(tokens, int) and tokens >= response_length):
        return _TRUNCATED
    return _COMPLETED


_TRAJECTORY_INTS = (("sample_index", semconv.VERL_SAMPLE_INDEX), ("rollout_n", semconv.VERL_ROLLOUT_N))
_UNKNOWN = object()


def _trajectory_attributes(
    trajectory: Any, session_id: Any, agent: Any, chunk_step: int | None, rank: int | None
) -> dict[str, Any]:
    """The request span's descriptive attributes: step, sample index, rollout n, validate, agent, rank."""
    attributes: dict[str, Any] = {}
    if not isinstance(trajectory, dict):
        trajectory = {}
    step = _as_int(trajectory.get("step"))
    if step is not None and step >= 0:
        attributes[semconv.VERL_STEP] = step
    elif chunk_step is not None:
        attributes[semconv.VERL_STEP] = chunk_step
    for key, attr in _TRAJECTORY_INTS:
        value = _as_int(trajectory.get(key))
        if value is not None:
            attributes[attr] = value
    session = _as_int(session_id)
    if session is not None:
        attributes[semconv.VERL_ROLLOUT_N] = session
    attributes[semconv.VERL_VALIDATE] = bool(trajectory.get("validate", False))
    if isinstance(agent, str):
        attributes[semconv.VERL_REQUEST_AGENT] = agent
    if rank is not None:
        attributes[semconv.VERL_WORKER_RANK] = rank
    return attributes


def _request_recorder(chunk: WorkerChunk | None, args: tuple, kwargs: dict) -> RequestRecorder | None:
    """The recorder of a trajectory starting now (None below ``worker`` detail).

    In a chunk's own context (verl's case: one task per trajectory, spawned by the chunk) the chunk's
    plan has the parent and the settings, and the descriptive attributes are worked out when the spans
    are built, after the chunk: the event loop pays only for the recorder itself.
    """
    trajectory = args[1] if len(args) > 1 else kwargs.get("trajectory", {})
    if chunk is not None and chunk.plan is not None and _context.get_current() is chunk.context:
        late = (
            _trajectory_attributes,
            trajectory,
            kwargs.get("session_id"),
            kwargs.get("agent_name"),
            chunk.step,
            chunk.rank,
        )
        return RequestRecorder.in_chunk(chunk.plan, None, late)
    state = setup.get_state()
    if state is None:
        _ensure_worker_tracing()
        state = setup.get_state()
    config = state.config if state is not None else None
    if config is not None and not config.detail_at_least("worker"):
        return None
    rank = chunk.rank if chunk is not None else worker_rank()
    attributes = _trajectory_attributes(
        trajectory, kwargs.get("session_id"), kwargs.get("agent_name"), chunk.step if chunk else None, rank
    )
    parent = trace.get_current_span().get_span_context()
    if config is None:
        return RequestRecorder(parent, attributes)
    return RequestRecorder(
        parent,
        attributes,
        events=config.detail_at_least("full"),
        spans=config.detail_at_least("request"),
        own_trace=config.trace_per_request,
        sampler=chunk.sampler if chunk is not None else None,
    )


@coroutine_wrapper
def _run_agent_loop_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """One recorder per trajectory. In a worker chunk verl gets its own coroutine back and the request
    ends with the task verl makes of it (:meth:`WorkerChunk.launch`); elsewhere a frame records it."""
    if (current_request.get() or adopt_request()) is not None or not enabled():
        return wrapped(*args, **kwargs)
    chunk: WorkerChunk | None = _CHUNK.get()
    try:
        recorder = _request_recorder(chunk, args, kwargs)
    except Exception:
        call_failed(RUN_AGENT_LOOP)
        recorder = None
    call = wrapped(*args, **kwargs)
    if recorder is None:
        return call
    try:
        if chunk is not None and chunk.launch(call, recorder, instance):
            return call
    except Exception:
        logger.debug("otel_verl: trajectory not handed over to its task", exc_info=True)
    return _recorded_trajectory(call, recorder, chunk, instance)


async def _recorded_trajectory(call: Any, recorder: RequestRecorder, chunk: WorkerChunk | None, instance: Any) -> Any:
    """A trajectory that is not its own task (or not in a chunk), recorded by awaiting it here.

    What this frame keeps while the trajectory runs (seconds, across many young-generation collections)
    is promoted to the GC's oldest generation, and enough of that triggers full collections of the
    worker's whole heap: so neither the call's arguments nor a context-variable token stay here.
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
        _end_request(recorder, chunk, instance, result, error)


def _trajectory_done(chunk: WorkerChunk, recorder: RequestRecorder, instance: Any, task: asyncio.Task[Any]) -> None:
    """A handed-over trajectory's task is done: end its request from the task's outcome.

    The exception is read from ``task._exception``, not ``task.exception()``: that would mark it
    retrieved, and asyncio's "exception was never retrieved" log is for verl's code to trigger or not.
    """
    result = error = None
    try:
        if task.cancelled():
            error = asyncio.CancelledError()
        else:
            error = getattr(task, "_exception", _UNKNOWN)
            if error is _UNKNOWN:  # not asyncio's Task: its public accessor, then
                error = task.exception()
            if error is None:
                result = task.result()
    except BaseException as exc:
        error = exc
    _end_request(recorder, chunk, instance, result, error)


def _end_request(
    recorder: RequestRecorder, chunk: WorkerChunk | None, instance: Any, result: Any, error: BaseException | None
) -> None:
    """The request's status, reward score and end; the chunk counts it as finished whatever happens."""
    status = _FAILED
    try:
        extra: dict[str, Any] = {}
        if error is None:
            score = getattr(result, "reward_score", None)
            if isinstance(score, (int, float)) and not isinstance(score, bool):
                extra[semconv.VERL_REWARD_SCORE] = float(score)
            response_length = chunk.response_length if chunk is not None else _UNKNOWN
            if response_length is _UNKNOWN:
                response_length = getattr(getattr(instance, "rollout_config", None), "response_length", None)
                if chunk is not None:
                    chunk.response_length = response_length
            recorder.root.attributes.update(extra)
            status = _request_status(recorder, response_length)
        recorder.finish(status, extra, error)
    except Exception:
        logger.debug("otel_verl: request spans could not be built", exc_info=True)
    finally:
        if chunk is not None:
            chunk.request_finished(status)


_frameless = True
"""False once a trajectory did not run as a task of its own: from then on this process frames them all."""


def _not_tasks(count: int) -> None:
    global _frameless
    if _frameless:
        _frameless = False
        logger.warning(
            "otel_verl: %d trajectory coroutine(s) of AgentLoopWorker._run_agent_loop did not run as an asyncio "
            "task of their own; their request spans are lost, and from now on trajectories are recorded in a frame",
            count,
        )


@coroutine_wrapper
def _postprocess_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Around ``AgentLoopWorker._agent_loop_postprocess(output, ...)``: the agent loop (any kind) has
    returned: close the last turn, note token counts. At entry, so no frame wraps the rollout itself."""
    recorder = current_request.get() or adopt_request()
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
        except Exception:
            call_failed(POSTPROCESS)
    return wrapped(*args, **kwargs)


@coroutine_wrapper
def _generating_state_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Each entry into the GENERATING state starts a new turn (verl awaits the call at once)."""
    recorder = current_request.get() or adopt_request()
    if recorder is not None:
        try:
            recorder.open_turn()
        except Exception:
            logger.debug("otel_verl: turn could not open", exc_info=True)
    return wrapped(*args, **kwargs)


def _event_wrapper(name: str, attributes: dict[str, Any]):
    """A wrapper recording one event (preprocess) inside the current request.

    No ``enabled()`` check here, nor in the tool-parse wrapper: a trajectory has a recorder only when it
    started outside ``suppress_instrumentation``, and these seams are verl's own code, never user code.
    """

    @coroutine_wrapper
    def wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        recorder = current_request.get() or adopt_request()
        if recorder is None or not recorder.events:
            return wrapped(*args, **kwargs)
        # a literal copy, not dict(): a dict made by calling dict() starts tracked by the cyclic GC, and
        # only a full collection would untrack it (and the recorded event holding it)
        return recorder.timed(name, {**attributes}, wrapped(*args, **kwargs))

    return wrapper


@coroutine_wrapper
def _tool_parse_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    recorder = current_request.get() or adopt_request()
    if recorder is None or not recorder.events:
        return wrapped(*args, **kwargs)
    attributes = {semconv.VERL_TOOL_PARSER: type(instance).__name__}
    return recorder.timed(semconv.SPAN_TOOL_PARSE, attributes, wrapped(*args, **kwargs), _tool_call_count)


def _tool_call_count(result: Any) -> dict[str, int]:
    """``extract_tool_calls`` returns ``(text, tool_calls)``."""
    calls = result[1] if isinstance(result, tuple) and len(result) > 1 else None
    return {semconv.VERL_TOOL_CALL_COUNT: len(calls) if calls is not None else 0}


_CHUNK: ContextVar[WorkerChunk | None] = ContextVar("otel_verl_worker_chunk", default=None)
"""The open worker chunk; asyncio copies it into every trajectory task verl spawns."""

_PARSERS = (
    "HermesToolParser",
    "GptOssToolParser",
    "Qwen3XMLToolParser",
    "GLMToolParser",
    "SeedToolParser",
    "MiniMaxToolParser",
    "KimiToolParser",
    "DeepSeekV4ToolParser",
    "Gemma4ToolParser",
)

SEAMS = (
    (*MANAGER_GENERATE, lambda: _manager_generate_wrapper),
    (TQ_MODULE, "AgentLoopManagerTQ.generate_sequences", lambda: _manager_generate_wrapper),
    (*CONCAT, lambda: _concat_wrapper),
    (*WORKER_GENERATE, lambda: _worker_generate_wrapper),
    (*RUN_AGENT_LOOP, lambda: _run_agent_loop_wrapper),
    (*POSTPROCESS, lambda: _postprocess_wrapper),
    (TOOL_AGENT_MODULE, "ToolAgentLoop._handle_generating_state", lambda: _generating_state_wrapper),
    (
        AGENT_LOOP_MODULE,
        "AgentLoopBase.ct_build_initial_tokens",
        lambda: _event_wrapper(semconv.SPAN_PREPROCESS, {semconv.VERL_PREPROCESS_KIND: "initial_prompt"}),
    ),
    (
        AGENT_LOOP_MODULE,
        "AgentLoopBase.ct_merge_assistant_token",
        lambda: _event_wrapper(semconv.SPAN_PREPROCESS, {semconv.VERL_PREPROCESS_KIND: "merge_assistant"}),
    ),
    (
        AGENT_LOOP_MODULE,
        "AgentLoopBase.ct_merge_context_msg",
        lambda: _event_wrapper(semconv.SPAN_PREPROCESS, {semconv.VERL_PREPROCESS_KIND: "merge_context"}),
    ),
    *((TOOL_PARSER_MODULE, f"{name}.extract_tool_calls", lambda: _tool_parse_wrapper) for name in _PARSERS),
)
_EVENT_METHODS = (
    "_handle_generating_state",
    "ct_build_initial_tokens",
    "ct_merge_assistant_token",
    "ct_merge_context_msg",
    "extract_tool_calls",
)
FULL_DETAIL_SEAMS = frozenset((module, path) for module, path, _ in SEAMS if path.endswith(_EVENT_METHODS))
"""Seams that only record turns and events: wrapped at ``full`` detail only (below it a turn is counted
per engine round trip, see ``RequestRecorder.round_trip_turn``), so lower levels do not pay for them."""

PER_REQUEST_SEAMS = frozenset({RUN_AGENT_LOOP, POSTPROCESS})
"""Seams called once per trajectory, besides the turn and event seams: not wrapped at ``step`` detail,
which records nothing per request, so its rollout pays for no hook at all. The chunk seams
(``generate_sequences``, ``concat``) stay at every level: once per chunk, and they remove a carrier
whatever this process's level is."""

_MANAGER = Expected(("prompts",), "verl.barrier spans and the step-to-worker parent links")
SIGNATURES = expect(
    {
        MANAGER_GENERATE: _MANAGER,
        (TQ_MODULE, "AgentLoopManagerTQ.generate_sequences"): _MANAGER,
        CONCAT: Expected(("data",), "verl.barrier spans"),
        WORKER_GENERATE: Expected(("batch",), "verl.rollout.worker spans"),
        POSTPROCESS: Expected(("output",), "request token counts and the end of the last turn"),
        RUN_AGENT_LOOP: Expected(
            ("sampling_params", "trajectory", "*", "agent_name"),
            "verl.rollout.request spans and everything below them (turns, engine calls, tools, rewards)",
        ),
    }
)
