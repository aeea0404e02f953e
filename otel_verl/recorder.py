"""Cheap per-request recording; spans are completed and emitted when the request ends.

One SDK span per event costs ~20-30 µs (DESIGN.md). A trajectory instead records its turns and events
as plain tuples (:data:`Event`: name, span id, parent id, start ``time_ns``, kind), with span
ids drawn up front so a W3C carrier for the engine (and any nested instrumentation) can be made while
the request runs. When the request ends, the keep/sample decision is made with the full picture, and
the events become :class:`~otel_verl.export.recorded_span.Node` spans (``ReadableSpan`` objects) when
they are handed to our span processors: at a chunk's end, off the event loop.

Why tuples: a request's events live until its chunk ends, across many young-generation collections of
the cyclic GC, and every tracked object that does is promoted to the oldest generation, whose growth
sets off full collections of the worker's whole heap (~0.3 s each with verl loaded; see
``benchmarks/bench_demo_overhead.py``). The GC stops tracking a tuple of strings and ints at its first
pass (not one holding a dict, even an untracked one) and never tracks a dict made as a literal that
holds only such values. So the events are such tuples and their attributes such dicts, kept apart by
span id: a request costs the GC its recorder, its root span and two containers, not ~12 objects.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.propagate import inject
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_verl import semconv
from otel_verl.export import setup
from otel_verl.export.hold import SpanHold
from otel_verl.export.recorded_span import Node, RequestShared, new_span_id, new_trace_id, random_bits
from otel_verl.sampling import ChunkSampler

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

Event = tuple[str, int, "int | None", int, int]
"""A recorded turn or event: ``(name, span_id, parent_id, start_ns, kind)``, ``kind`` a ``SpanKind``
value. Its attributes and end time live on the recorder, by span id (:meth:`RequestRecorder.attributes_of`)."""
SPAN_ID = 1
"""The field instrumentation reads: carriers and nested events name their parent by it."""

current_request: ContextVar[RequestRecorder | None] = ContextVar("otel_verl_request", default=None)
"""The trajectory being recorded in this asyncio task (copied into tasks it spawns). Read it as
``current_request.get() or adopt_request()``: a trajectory handed over to its task (:func:`hand_over`)
sets it at its first hook."""

_handed_over: ContextVar[tuple[Any, RequestRecorder] | None] = ContextVar("otel_verl_handed_over", default=None)
"""``(coroutine, recorder)`` of the trajectory whose coroutine was made last in this context."""


def hand_over(call: Any, recorder: RequestRecorder) -> None:
    """``recorder`` records ``call``, a trajectory coroutine verl is about to run as a task of its own
    (``asyncio.create_task(self._run_agent_loop(...))``), with no frame of ours around it.

    The task copies this context when it is made, right after; inside it, the first hook to look for
    the request (:func:`adopt_request`) finds the pair and checks that its task runs ``call`` itself.
    In the context that made the coroutine the pair stays behind, stale, and adopts nothing there
    (that task runs another coroutine) until :func:`clear_hand_over`.
    """
    _handed_over.set((call, recorder))


def clear_hand_over() -> None:
    """Drop the stale hand-over of the chunk that made the trajectories (called when it returns)."""
    _handed_over.set(None)


def adopt_request() -> RequestRecorder | None:
    """The recorder handed over to the trajectory this task runs (None: no such trajectory); sets
    :data:`current_request` in the task's own context, so later hooks and tasks it spawns see it."""
    handed = _handed_over.get()
    if handed is None:
        return None
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no event loop running in this thread
        return None
    if task is None or task.get_coro() is not handed[0]:
        return None
    recorder = handed[1]
    current_request.set(recorder)
    _handed_over.set(None)  # the task's own copy: it would keep verl's coroutine alive from its context
    return recorder


class RequestRecorder:
    """Records one trajectory's turns and events; emits them as spans in :meth:`finish`.

    ``events=False`` (detail below ``full``): turns and events are counted but not recorded; they
    hand out one detached event that shares the request's span id, so carriers still name the request.
    ``spans=False`` (detail ``worker``): nothing is emitted and carriers say "not sampled", so remote
    processes record nothing either; the request reaches the worker span's summary via ``sampler``.
    ``own_trace``: the request is the root of a new trace, linked to ``parent`` (the worker span).
    """

    __slots__ = (
        "_built",
        "_detached",
        "_made_context",
        "current_turn",
        "ends",
        "event_attributes",
        "events",
        "finished",
        "hold",
        "last_stop_reason",
        "late",
        "recorded",
        "resumes",
        "root",
        "sampled",
        "sampler",
        "spans",
        "status",
        "trace_id",
        "turns",
    )

    def __init__(
        self,
        parent: SpanContext | None,
        attributes: dict[str, Any] | None = None,
        *,
        events: bool = True,
        spans: bool = True,
        own_trace: bool = False,
        sampler: ChunkSampler | None = None,
        late: LateAttributes | None = None,
        hold: SpanHold | None = None,
    ) -> None:
        plan = RequestPlan(parent, events=events, spans=spans, own_trace=own_trace, sampler=sampler, hold=hold)
        self._from_plan(plan, attributes, late)

    @classmethod
    def in_chunk(
        cls,
        plan: RequestPlan,
        attributes: dict[str, Any] | None,
        late: LateAttributes | None,
    ) -> RequestRecorder:
        """A trajectory of a rollout chunk: what the constructor derives from the parent, ``plan`` holds
        already (worked out once per chunk: the rollout's event loop pays per request only for this)."""
        recorder = cls.__new__(cls)
        recorder._from_plan(plan, attributes, late)
        return recorder

    def _from_plan(self, plan: RequestPlan, attributes: dict[str, Any] | None, late: LateAttributes | None) -> None:
        self.sampled = plan.sampled
        own = plan.own_trace
        self._setup(
            new_trace_id() if own else plan.trace_id,
            None if own else plan.parent_id,
            attributes,
            plan.events,
            plan.spans,
            plan.sampler,
            late,
            plan.hold,
        )
        if own and plan.link is not None:
            self.root.links = plan.link

    def _setup(
        self,
        trace_id: int,
        parent_id: int | None,
        attributes: dict[str, Any] | None,
        events: bool,
        spans: bool,
        sampler: ChunkSampler | None,
        late: LateAttributes | None,
        hold: SpanHold | None,
    ) -> None:
        self.trace_id = trace_id
        self.root = Node(semconv.SPAN_REQUEST, parent_id, attributes, SpanKind.INTERNAL, None)  # type: ignore[arg-type]
        """The request span itself; its ``shared`` part is made when the spans are built."""
        self.recorded: list[Event] | None = None
        """Turns and events in the order they started (full detail; made with the first)."""
        self.event_attributes: dict[int, dict[str, Any]] = {}
        """span id -> attributes of a recorded event (and the detached one's scratch values)."""
        self.ends: dict[int, int] = {}
        """span id -> end ``time_ns`` of the recorded events that ended (the rest end with the request)."""
        self._built: list[Node] | None = None
        self.events = events
        self.spans = spans
        self.sampler = sampler
        self.late = late
        """Root attributes worked out when the spans are built, off the event loop (``(fn, *args)``)."""
        self.hold = hold
        """The process's span hold, when the caller knows it (saves looking the tracing state up)."""
        self.status: str | None = None
        self._detached: Event | None = None
        self._made_context: tuple[otel_context.Context, Event, otel_context.Context] | None = None
        self.current_turn: Event | None = None
        self.turns = 0
        self.last_stop_reason: str | None = None
        self.resumes = 0
        self.finished = False

    # -- recording
    def start(
        self,
        name: str,
        parent_id: int | None = None,
        attributes: dict[str, Any] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Event:
        """Start an event under ``parent_id`` (default: the running turn, else the request)."""
        if not self.events:
            return self.detached()
        if parent_id is None:
            turn = self.current_turn
            parent_id = turn[SPAN_ID] if turn is not None else self.root.span_id
        return self._record(name, parent_id, attributes if attributes is not None else {}, kind.value)

    def _record(self, name: str, parent_id: int, attributes: dict[str, Any], kind: int) -> Event:
        event = (name, span_id := random_bits(64) or new_span_id(), parent_id, _time_ns(), kind)
        self.event_attributes[span_id] = attributes
        recorded = self.recorded
        if recorded is None:
            self.recorded = [event]
        else:
            recorded.append(event)
        return event

    async def timed(
        self,
        name: str,
        attributes: dict[str, Any],
        call: Awaitable[_T],
        summarize: Callable[[_T], Mapping[str, Any]] | None = None,
    ) -> _T:
        """Await ``call`` (verl's coroutine) as an event under the running turn; ``summarize(result)``
        adds attributes at its end. Below full detail nothing is recorded (:meth:`start` hands out the
        detached event).

        The rollout's preprocess and tool-parse events, ~5 per trajectory, share this one frame (each
        had a wrapper coroutine of its own).
        """
        try:
            event = self.start(name, attributes=attributes)
        except Exception:
            return await call
        try:
            result = await call
        except BaseException as exc:
            self.end(event, error=exc)
            raise
        self.end(event)
        if summarize is not None:
            try:
                attributes.update(summarize(result))
            except Exception:
                logger.debug("otel_verl: %s attributes not recorded", name, exc_info=True)
        return result

    def detached(self) -> Event:
        """The stand-in for unrecorded turns/events: never emitted, carries the request's span id."""
        event = self._detached
        if event is None:
            event = self._detached = ("", self.root.span_id, None, 0, 0)
        return event

    def attributes_of(self, event: Event) -> dict[str, Any]:
        """A recorded event's attributes, to add to (the detached event's are a scratch dict, never emitted)."""
        attributes = self.event_attributes.get(event[SPAN_ID])
        if attributes is None:
            attributes = self.event_attributes[event[SPAN_ID]] = {}
        return attributes

    def end(
        self, event: Event, attributes: Mapping[str, Any] | None = None, error: BaseException | None = None
    ) -> None:
        """End a recorded event (a second end keeps the first end time); ``error`` marks it failed."""
        if event is self._detached:
            return
        span_id = event[SPAN_ID]
        self.ends.setdefault(span_id, _time_ns())
        own = self.event_attributes[span_id]
        if attributes:
            own.update(attributes)
        if error is not None:
            own[semconv.ERROR_TYPE] = type(error).__qualname__

    def fail(self, event: Event, error_type: str) -> None:
        """Mark an event failed without an exception (e.g. a tool that returned an error)."""
        self.attributes_of(event)[semconv.ERROR_TYPE] = error_type

    def open_turn(self) -> Event:
        """Close the running turn, start turn ``self.turns``. Below full detail turns are not recorded:
        nothing happens here, each engine round trip counts one instead (:meth:`round_trip_turn`)."""
        if not self.events:
            return self.detached()
        self.close_turn()
        turn = self._record(semconv.SPAN_TURN, self.root.span_id, {semconv.VERL_TURN_INDEX: self.turns}, _INTERNAL)
        self.current_turn = turn
        self.turns += 1
        return turn

    def round_trip_turn(self) -> Event:
        """The turn a top-level engine round trip runs in: at full detail the one the GENERATING state
        opened (opened here if none is); below it every round trip is one turn, counted, not recorded."""
        if not self.events:
            self.turns += 1
            return self.detached()
        return self.current_turn if self.current_turn is not None else self.open_turn()

    def close_turn(self) -> None:
        if self.current_turn is not None:
            self.end(self.current_turn)
            self.current_turn = None

    @contextmanager
    def event(
        self, name: str, attributes: dict[str, Any] | None = None, kind: SpanKind = SpanKind.INTERNAL
    ) -> Iterator[Event]:
        """Record an event around a block; an exception is recorded and re-raised unchanged."""
        node = self.start(name, attributes=attributes, kind=kind)
        try:
            yield node
        except BaseException as exc:
            self.end(node, error=exc)
            raise
        self.end(node)

    # -- context for nested instrumentation and the engine
    def span_context(self, event: Event) -> SpanContext:
        flags = TraceFlags(TraceFlags.SAMPLED if self.sampled else TraceFlags.DEFAULT)
        return SpanContext(self.trace_id, event[SPAN_ID], is_remote=False, trace_flags=flags)

    def otel_context(self, event: Event) -> otel_context.Context:
        """The current context with ``event`` as its span (and the step as baggage). Contexts are
        immutable: below full detail every tool call and reward asks for the same one, made once. At full
        detail each event has a node (and a context) of its own: kept on the recorder, it would live as
        long as the request, on the cyclic GC's lists."""
        current = otel_context.get_current()
        made = self._made_context
        if made is not None and made[0] is current and made[1] is event:
            return made[2]
        ctx = trace.set_span_in_context(NonRecordingSpan(self.span_context(event)), current)
        step = self.attribute(semconv.VERL_STEP)
        if step is not None:  # W3C baggage: remote reward/engine spans learn their step
            ctx = baggage.set_baggage(semconv.VERL_STEP, str(step), ctx)
        if event is self._detached:  # full detail: an event's own context is not kept past the event
            self._made_context = (current, event, ctx)
        return ctx

    def attribute(self, key: str) -> Any:
        """A root attribute, also one of the ``late`` ones (worked out now if asked for)."""
        value = self.root.attributes.get(key)
        late = self.late
        if value is None and late is not None:
            value = late[0](*late[1:]).get(key)
        return value

    def carrier(self, event: Event) -> dict[str, str]:
        """W3C ``traceparent`` (+ ``tracestate``) naming ``event`` as parent."""
        carrier: dict[str, str] = {}
        inject(carrier, context=self.otel_context(event))
        return carrier

    # -- the end
    def finish(
        self, status: str, attributes: Mapping[str, Any] | None = None, error: BaseException | None = None
    ) -> int:
        """End every open node and hand the spans to the processors unless sampled out: how many.

        The keep decision (``sampler``, see :mod:`otel_verl.sampling`) is taken here, once the whole
        request is known; a request held for the chunk-end decision is emitted by :meth:`emit`.
        """
        if self.finished:
            return 0
        self.finished = True
        self.status = status
        self.close_turn()
        root = self.root
        root.attributes[semconv.VERL_REQUEST_STATUS] = status
        root.attributes[semconv.VERL_REQUEST_NUM_TURNS] = self.turns
        if self.resumes:
            root.attributes[semconv.VERL_REQUEST_NUM_RESUMES] = self.resumes
        if root.end_ns is None:
            root.end_ns = time.time_ns()
        if attributes:
            root.attributes.update(attributes)
        if error is not None:
            root.error = type(error).__qualname__
            root.attributes[semconv.ERROR_TYPE] = root.error
        if self.sampler is not None:
            if not self.sampler.admit(self, status) or not self.sampled:
                return 0
        elif not self.sampled:
            return 0
        return self.emit()

    def emit(self) -> int:
        """Hand this finished request's spans to the processors (how many); while a rollout chunk is open
        they are held and built (:meth:`build_spans`, the recorder itself is the held part) at release
        time, off the event loop."""
        spans = 1 + len(self.recorded or ())
        hold = self.hold
        if hold is None or not hold.add(self, spans):
            setup.emit_built(self, spans)
        return spans

    def __call__(self) -> list[Node]:
        """The spans, for the hold or the processors (built once)."""
        return self.build_spans(self.status or _COMPLETED)

    @property
    def nodes(self) -> list[Node]:
        """This request's spans, root first (building them ends the recording: call after :meth:`finish`)."""
        return self()

    def build_spans(self, status: str) -> list[Node]:
        """The recorded events as spans: end times, status, attributes stamped on children (built once)."""
        built = self._built
        if built is not None:
            return built
        state = setup.get_state()
        root = self.root
        root.shared = shared = RequestShared(self.trace_id)
        shared.resource = state.provider.resource if state is not None else None
        end_default = root.end_ns
        root_attrs = root.attributes
        late = self.late
        if late is not None:
            self.late = None
            root_attrs.update({k: v for k, v in late[0](*late[1:]).items() if k not in root_attrs})
        stamp = shared.stamp = {k: root_attrs[k] for k in _STAMPED if k in root_attrs}
        if root.end_ns is None:
            root.end_ns = end_default = time.time_ns()
        if root.error is not None:
            root.status = Status(StatusCode.ERROR, root.error)
        elif status == _FAILED:
            root.status = _ERROR
        self._built = built = [root]
        ends, attributes = self.ends, self.event_attributes
        error_key = semconv.ERROR_TYPE
        for name, span_id, parent_id, start_ns, kind in self.recorded or ():
            node = Node.completed(name, span_id, parent_id, start_ns, ends.get(span_id, end_default), kind, shared)
            own = attributes[span_id]
            error = own.get(error_key)
            if error is not None:
                node.status = Status(StatusCode.ERROR, str(error))
            if stamp:
                if stamp.keys().isdisjoint(own):
                    node.own = own  # the spool encodes the stamp once per request, then these
                node.attributes = {**stamp, **own}
            else:
                node.attributes = own
            built.append(node)
        self.recorded = None
        self.event_attributes = {}
        return built


class RequestPlan:
    """What every trajectory of one rollout chunk shares: parent ids, detail flags, sampler, hold."""

    __slots__ = ("events", "hold", "link", "own_trace", "parent_id", "sampled", "sampler", "spans", "trace_id")

    def __init__(
        self,
        parent: SpanContext | None,
        *,
        events: bool,
        spans: bool,
        own_trace: bool,
        sampler: ChunkSampler | None,
        hold: SpanHold | None,
    ) -> None:
        valid = parent is not None and parent.is_valid
        self.sampled = (bool(parent.trace_flags.sampled) if valid else True) and spans  # type: ignore[union-attr]
        self.own_trace = own_trace or not valid
        self.trace_id = parent.trace_id if valid else 0  # type: ignore[union-attr]
        self.parent_id = parent.span_id if valid else None  # type: ignore[union-attr]
        self.link: tuple[Link, ...] | None = (Link(parent),) if valid and own_trace else None  # type: ignore[arg-type]
        self.events = events
        self.spans = spans
        self.sampler = sampler
        self.hold = hold


LateAttributes = tuple[Any, ...]
"""``(fn, *args)``: the request's descriptive attributes, ``fn(*args)``, worked out when its spans are built
(one flat tuple: it lives until then, and each object that does costs the cyclic GC)."""

_time_ns = time.time_ns
_ERROR = Status(StatusCode.ERROR)
_INTERNAL = SpanKind.INTERNAL.value
_COMPLETED = semconv.RequestStatus.COMPLETED.value
_FAILED = semconv.RequestStatus.FAILED.value
_STAMPED = (semconv.VERL_STEP, semconv.VERL_WORKER_RANK, semconv.VERL_REQUEST_ID)
"""Request attributes copied onto every child span, so a turn or event alone is attributable."""
