"""``verl.barrier``: per worker and step, the time the worker waited, its work done, for the step's sync point.

The sync point, by trainer (docs/trainers.md, "The trace of each mode"):

- legacy ``RayPPOTrainer``: ``AgentLoopManager.generate_sequences`` returns when the slowest worker's chunk is
  back, so a worker waits from its chunk's end to the slowest chunk's end. The manager collects the chunks' end
  times (:mod:`.manager`) and the trainer's process emits the barriers (:func:`emit_after_rollout`).
- V1 ``sync`` and ``colocate_async``: the dispatch returns at once and the trainer's ``gen`` waits for the
  replay buffer's batch; the rollout stops at the end of ``gen`` (verl's ``on_sample_end`` puts the replicas to
  sleep, colocate-async aborting the unfinished requests first): :data:`~otel_verl.semconv.BARRIER_SAMPLE_END`.
- V1 ``separate_async``: the rollout runs on beside the training and stops only for the weight sync, at the start
  of the step's ``update_weights``: :data:`~otel_verl.semconv.BARRIER_WEIGHT_SYNC`.

V1 workers send nothing back to the trainer (their samples go to TransferQueue), so the trainer tells each worker
actor the sync point (:func:`announce`: one fire-and-forget ``__ray_call__`` each, nothing waited for) and the
worker emits its own barrier (:func:`at_sync_point`) under the worker span of the chunk it was handed in that
step: from the end of its last chunk to the sync point, or 0 s at the sync point when it still had work in flight
(async trainers: that work is aborted or paused there and goes on later; ``verl.barrier.requests_in_flight`` says
how many requests).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext, TraceFlags

from otel_verl import semconv
from otel_verl.export import tracing
from otel_verl.wrapping.registry import enabled

logger = logging.getLogger(__name__)

SYNC_POINTS: dict[str, tuple[str, str, str]] = {
    "sync": ("gen", "end", semconv.BARRIER_SAMPLE_END),
    "colocate_async": ("gen", "end", semconv.BARRIER_SAMPLE_END),
    "separate_async": ("update_weights", "start", semconv.BARRIER_WEIGHT_SYNC),
}
"""verl's ``trainer.v1.trainer_mode`` → (phase, which edge of it, what the barrier says it ended at)."""
_STEPS_KEPT = 8
_ENDED_KEPT = 64
_SAMPLED = TraceFlags(TraceFlags.SAMPLED)


# ---------------------------------------------------------------- legacy: the trainer's process, after the rollout
def emit_after_rollout(infos: list[dict[str, Any]]) -> None:
    """One barrier per worker chunk of a blocking rollout: from the chunk's end to the slowest chunk's end."""
    if not infos:
        return
    slowest = max(infos, key=lambda info: info["end_ns"])
    for info in infos:
        parent = SpanContext(int(info["trace_id"], 16), int(info["span_id"], 16), is_remote=True, trace_flags=_SAMPLED)
        attributes = {
            semconv.VERL_WORKER_RANK: info.get("rank", -1),
            semconv.VERL_BARRIER_SLOWEST_RANK: slowest.get("rank", -1),
            semconv.VERL_BARRIER_SYNC_POINT: semconv.BARRIER_SLOWEST_WORKER,
        }
        if info.get("step") is not None:
            attributes[semconv.VERL_STEP] = info["step"]
        _emit(parent, info["end_ns"], max(slowest["end_ns"], info["end_ns"]), attributes)


def _emit(parent: SpanContext, start_ns: int, end_ns: int, attributes: dict[str, Any]) -> None:
    context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
    tracer = tracing.tracer()
    span = tracer.start_span(semconv.SPAN_BARRIER, context=context, attributes=attributes, start_time=start_ns)
    span.end(end_time=end_ns)


# ---------------------------------------------------------------- V1, trainer's process: announce the sync point
_workers: list[Any] = []
"""The worker actors of the last V1 dispatch (``AgentLoopManagerTQ.agent_loop_workers``)."""
_announced: int | None = None
"""The ``verl.step`` span whose sync point was announced last (a step has one)."""


def remember_workers(manager: Any) -> None:
    """The V1 manager's worker actors, told each step's sync point."""
    global _workers
    workers = getattr(manager, "agent_loop_workers", None)
    if isinstance(workers, (list, tuple)):
        _workers = list(workers)


def phase_edge(mode: str | None, phase: str, edge: str, step: int, step_span_id: int, at_ns: int) -> None:
    """A phase of the step ``step_span_id`` started or ended (:mod:`otel_verl.instrumentation.trainer`); at the
    mode's sync point, the first in the step, announce it."""
    global _announced
    point = SYNC_POINTS.get(mode or "")
    if point is None or (phase, edge) != point[:2] or step_span_id == _announced or not _workers:
        return
    _announced = step_span_id
    announce(step, at_ns, point[2])


def announce(step: int, at_ns: int, point: str) -> None:
    """Tell each worker actor the step's sync point; nothing is waited for (the calls' results are dropped)."""
    for worker in _workers:
        try:
            worker.__ray_call__.remote(at_sync_point, step, at_ns, point)
        except Exception:
            logger.debug("otel_verl: a worker was not told the sync point", exc_info=True)


# ---------------------------------------------------------------- V1, worker's process: its chunks and its barrier
class _WorkerRollout:
    """This worker process's training chunks: the open ones, the last ended ones, each step's chunk span."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.open: dict[int, tuple[Any, int]] = {}
        """id(chunk) → (the open chunk: its ``outstanding`` requests are in flight, its start)."""
        self.ended: deque[tuple[int, int]] = deque(maxlen=_ENDED_KEPT)
        """(start, end) of the last chunks that ended."""
        self.by_step: OrderedDict[int, tuple[SpanContext, int, int | None]] = OrderedDict()
        """step → (the span of the chunk dispatched in that step, its start, the worker's rank)."""

    def wait_before(self, sync_ns: int) -> tuple[int | None, int]:
        """(when this worker's work before ``sync_ns`` ended, None if some was still in flight then; the requests
        in flight then). Chunks that started after the sync point (a later dispatch told first) do not count."""
        open_then = [chunk for chunk, start in self.open.values() if start <= sync_ns]
        if open_then or any(start <= sync_ns < end for start, end in self.ended):
            return None, sum(int(getattr(chunk, "outstanding", 0) or 0) for chunk in open_then)
        return max((end for _, end in self.ended if end <= sync_ns), default=None), 0


_rollout = _WorkerRollout()


def chunk_started(chunk: Any, step: int | None, start_ns: int, in_step: bool) -> None:
    """A training chunk began (:mod:`.chunk`); ``in_step``: dispatched inside a step's trace (not a warm-up)."""
    with _rollout.lock:
        _rollout.open[id(chunk)] = (chunk, start_ns)
        if in_step and step is not None:
            _rollout.by_step[step] = (chunk.span.get_span_context(), start_ns, chunk.rank)
            _rollout.by_step.move_to_end(step)
            while len(_rollout.by_step) > _STEPS_KEPT:
                _rollout.by_step.popitem(last=False)


def chunk_ended(chunk: Any, end_ns: int) -> None:
    with _rollout.lock:
        opened = _rollout.open.pop(id(chunk), None)
        if opened is not None:
            _rollout.ended.append((opened[1], end_ns))


def at_sync_point(_worker: Any, step: int, sync_ns: int, point: str) -> None:
    """In the worker actor (``__ray_call__``): its barrier of ``step``, under the chunk it was handed then."""
    try:
        if not enabled():
            return
        with _rollout.lock:
            chunk = _rollout.by_step.get(step)
            if chunk is None:  # no chunk of this step came here: nothing to wait for
                return
            idle_since, in_flight = _rollout.wait_before(sync_ns)
        parent, chunk_start, rank = chunk
        start = sync_ns if idle_since is None else min(max(idle_since, chunk_start), sync_ns)
        attributes: dict[str, Any] = {
            semconv.VERL_STEP: step,
            semconv.VERL_BARRIER_SYNC_POINT: point,
            semconv.VERL_BARRIER_REQUESTS_IN_FLIGHT: in_flight,
        }
        if rank is not None:
            attributes[semconv.VERL_WORKER_RANK] = rank
        _emit(parent, start, sync_ns, attributes)
    except Exception:
        logger.debug("otel_verl: barrier at the sync point not emitted", exc_info=True)
