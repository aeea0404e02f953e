"""The request recorder: one trajectory's turns and events, recorded cheaply, emitted as spans at its end.

A trajectory records its turns and events as plain tuples (:data:`Event`: name, span id, parent id,
start ``time_ns``, kind), with span ids drawn up front so a W3C carrier for the engine (and any nested
instrumentation) can be made while the request runs. When the request ends, the keep/sample decision
is made with the full picture (:mod:`otel_verl.recording.sampling`), and the events become
:class:`~otel_verl.recording.spans.RecordedSpan` objects when they are handed to the span processors:
where the export side's :class:`~otel_verl.recording.delivery.Delivery` builds them (at a chunk's end, off
the event loop: :mod:`otel_verl.export.hold`).

Why tuples: a request's events live until its chunk ends, across many young-generation collections of
the cyclic GC, and every tracked object that does is promoted to the oldest generation, whose growth
sets off full collections of the worker's whole heap (long pauses with verl loaded: docs/performance.md,
``benchmarks/bench_demo_overhead.py``). The GC stops tracking a tuple of strings and ints at its first
pass (not one holding a dict, even an untracked one) and never tracks a dict made as a literal that
holds only such values. So the events are such tuples and their attributes such dicts, kept apart by
span id: a request costs the GC its recorder, its root span and two containers, not ~12 objects
(what that saved: docs/performance.md).
"""

from __future__ import annotations

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
from otel_verl.recording import delivery
from otel_verl.recording.cutting import TraceBudget
from otel_verl.recording.sampling import ChunkSampler
from otel_verl.recording.spans import RecordedSpan, RequestShared, children, new_span_id, new_trace_id, random_bits

logger = logging.getLogger(__name__)
_T = TypeVar("_T")

Event = tuple[str, int, "int | None", int, int]
"""A recorded turn or event: ``(name, span_id, parent_id, start_ns, kind)``, ``kind`` a ``SpanKind``
value. Its attributes and end time live on the recorder, by span id (:meth:`RequestRecorder.attributes_of`)."""
SPAN_ID = 1
"""The field instrumentation reads: carriers and nested events name their parent by it."""

current_request: ContextVar[RequestRecorder | None] = ContextVar("otel_verl_request", default=None)
"""The trajectory being recorded in this asyncio task (copied into tasks it spawns): set by the frame that
awaits the trajectory (:mod:`otel_verl.instrumentation.rollout.trajectory`), read by every hook below it."""


class RequestRecorder:
    """Records one trajectory's turns and events; emits them as spans in :meth:`finish`.

    ``events=False`` (detail below ``full``): turns and events are counted but not recorded; they
    hand out one detached event that shares the request's span id, so carriers still name the request.
    ``spans=False`` (detail ``worker``): nothing is emitted and carriers say "not sampled", so remote
    processes record nothing either; the request reaches the worker span's summary via ``sampler``.
    ``own_trace``: the request is the root of a new trace, linked to ``parent`` (the worker span).
    ``budget``: the chunk's trace cutting (:mod:`otel_verl.recording.cutting`): it places the request in
    the parent's trace or roots it in another, linked to the worker and step spans, and learns its size.
    """

    __slots__ = (
        "_built",
        "_detached",
        "_made_context",
        "budget",
        "carriers",
        "current_turn",
        "ends",
        "event_attributes",
        "events",
        "finished",
        "last_stop_reason",
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
        budget: TraceBudget | None = None,
    ) -> None:
        valid = parent is not None and parent.is_valid
        placed = None
        if budget is not None and valid and budget.cuts(parent):  # type: ignore[arg-type]
            # the step's trace (None) or another, decided now: see recording.cutting
            placed = budget.place((attributes or _NO_ATTRIBUTES).get(semconv.VERL_SAMPLE_INDEX))
        own_trace = own_trace or not valid or placed is not None
        self.sampled = (bool(parent.trace_flags.sampled) if valid else True) and spans  # type: ignore[union-attr]
        self.trace_id = placed or (new_trace_id() if own_trace else parent.trace_id)  # type: ignore[union-attr]
        self.root = RecordedSpan(
            semconv.SPAN_REQUEST,
            None if own_trace else parent.span_id,  # type: ignore[union-attr]
            attributes,
            SpanKind.INTERNAL,
            None,  # type: ignore[arg-type]
        )
        """The request span itself; its ``shared`` part is made when the spans are built."""
        if own_trace and valid:
            self.root.links = budget.links_for(parent) if placed is not None else (Link(parent),)  # type: ignore[union-attr,arg-type]
        self.budget = budget
        self.carriers = 0
        """Carriers handed out (engine round trips, remote reward): spans other processes may add to the trace."""
        self.recorded: list[Event] | None = None
        """Turns and events in the order they started (full detail; made with the first)."""
        self.event_attributes: dict[int, dict[str, Any]] = {}
        """span id -> attributes of a recorded event (and the detached one's scratch values)."""
        self.ends: dict[int, int] = {}
        """span id -> end ``time_ns`` of the recorded events that ended (the rest end with the request)."""
        self._built: list[RecordedSpan] | None = None
        self.events = events
        self.spans = spans
        self.sampler = sampler
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
        """A root attribute."""
        return self.root.attributes.get(key)

    def carrier(self, event: Event) -> dict[str, str]:
        """W3C ``traceparent`` (+ ``tracestate``) naming ``event`` as parent."""
        carrier: dict[str, str] = {}
        inject(carrier, context=self.otel_context(event))
        self.carriers += 1
        return carrier

    # -- the end
    def finish(
        self, status: str, attributes: Mapping[str, Any] | None = None, error: BaseException | None = None
    ) -> int:
        """End every open node and hand the spans to the processors unless sampled out: how many.

        The keep decision (``sampler``, see :mod:`otel_verl.recording.sampling`) is taken here, once the whole
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
        if self.budget is not None:
            self.budget.request_finished(self)
        if self.sampler is not None:
            if not self.sampler.admit(self, status) or not self.sampled:
                return 0
        elif not self.sampled:
            return 0
        return self.emit()

    def emit(self) -> int:
        """Hand this finished request's spans to the process's delivery (how many); the recorder itself is
        what is handed on, built (:meth:`build_spans`) when the export side asks: while a rollout chunk
        is open, at release time, off the event loop. Nothing installed (no tracing set up): dropped."""
        spans = 1 + len(self.recorded or ())
        target = delivery.current()
        if target is not None:
            target.deliver(self, spans)
        return spans

    def __call__(self) -> list[RecordedSpan]:
        """The spans, for the hold or the processors (built once)."""
        return self.build_spans(self.status or _COMPLETED)

    @property
    def nodes(self) -> list[RecordedSpan]:
        """This request's spans, root first (building them ends the recording: call after :meth:`finish`)."""
        return self()

    def build_spans(self, status: str) -> list[RecordedSpan]:
        """The recorded events as spans: end times, status, attributes stamped on children (built once)."""
        built = self._built
        if built is not None:
            return built
        target = delivery.current()
        root = self.root
        root.shared = shared = RequestShared(self.trace_id)
        shared.resource = target.resource if target is not None else None
        end_default = root.end_ns
        root_attrs = root.attributes
        shared.stamp = {k: root_attrs[k] for k in _STAMPED if k in root_attrs}
        if root.end_ns is None:
            root.end_ns = end_default = time.time_ns()
        if root.error is not None:
            root.status = Status(StatusCode.ERROR, root.error)
        elif status == _FAILED:
            root.status = _ERROR
        self._built = built = [root]
        built.extend(children(self.recorded or (), self.ends, self.event_attributes, end_default, shared))
        self.recorded = None
        self.event_attributes = {}
        return built


_time_ns = time.time_ns
_NO_ATTRIBUTES: dict[str, Any] = {}
_ERROR = Status(StatusCode.ERROR)
_INTERNAL = SpanKind.INTERNAL.value
_COMPLETED = semconv.RequestStatus.COMPLETED.value
_FAILED = semconv.RequestStatus.FAILED.value
_STAMPED = (semconv.VERL_STEP, semconv.VERL_WORKER_RANK, semconv.VERL_REQUEST_ID)
"""Request attributes copied onto every child span, so a turn or event alone is attributable."""
