"""Cheap per-request recording; spans are completed and emitted when the request ends.

One SDK span per event costs ~20-30 µs (DESIGN.md). A trajectory instead records light nodes
(:class:`~otel_verl.export.recorded_span.Node`: name, start/end ``time_ns``, parent id, attributes),
with span ids drawn up front so a W3C carrier for the engine (and any nested instrumentation) can be
made while the request runs. When the request ends, its nodes — themselves ``ReadableSpan`` objects —
go to our span processors: the same moment a keep/sample decision can be made with the full picture.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.propagate import inject
from opentelemetry.trace import Link, NonRecordingSpan, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_verl import semconv
from otel_verl.export import setup
from otel_verl.export.hold import SpanHold
from otel_verl.export.recorded_span import Node, RequestShared, new_trace_id
from otel_verl.sampling import ChunkSampler

logger = logging.getLogger(__name__)

current_request: ContextVar[RequestRecorder | None] = ContextVar("otel_verl_request", default=None)
"""The trajectory being recorded in this asyncio task (copied into tasks it spawns)."""


class RequestRecorder:
    """Records one trajectory's turns and events; emits them as spans in :meth:`finish`.

    ``events=False`` (detail below ``full``): turns and events are counted but not recorded; they
    hand out one detached node that shares the request's span id, so carriers still name the request.
    ``spans=False`` (detail ``worker``): nothing is emitted and carriers say "not sampled", so remote
    processes record nothing either; the request reaches the worker span's summary via ``sampler``.
    ``own_trace``: the request is the root of a new trace, linked to ``parent`` (the worker span).
    """

    __slots__ = (
        "_detached",
        "_made_context",
        "current_turn",
        "events",
        "finished",
        "hold",
        "last_stop_reason",
        "late",
        "nodes",
        "resumes",
        "root",
        "sampled",
        "sampler",
        "shared",
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
        self.shared = shared = RequestShared(trace_id)
        self.root = root = Node(semconv.SPAN_REQUEST, parent_id, attributes, SpanKind.INTERNAL, shared)
        self.nodes: list[Node] = [root]
        self.events = events
        self.spans = spans
        self.sampler = sampler
        self.late = late
        """Root attributes worked out when the spans are built, off the event loop (``(fn, *args)``)."""
        self.hold = hold
        """The process's span hold, when the caller knows it (saves looking the tracing state up)."""
        self.status: str | None = None
        self._detached: Node | None = None
        self._made_context: tuple[otel_context.Context, Node, otel_context.Context] | None = None
        self.current_turn: Node | None = None
        self.turns = 0
        self.last_stop_reason: str | None = None
        self.resumes = 0
        self.finished = False

    # -- recording
    def start(
        self,
        name: str,
        parent: Node | None = None,
        attributes: dict[str, Any] | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Node:
        if not self.events:
            return self.detached()
        if parent is None:
            parent = self.current_turn or self.root
        node = Node(name, parent.span_id, attributes, kind, self.shared)
        self.nodes.append(node)
        return node

    def detached(self) -> Node:
        """The stand-in for unrecorded turns/events: never emitted, carries the request's span id."""
        node = self._detached
        if node is None:
            node = self._detached = Node("", None, None, SpanKind.INTERNAL, self.shared, self.root.span_id)
        return node

    @staticmethod
    def end(node: Node, attributes: Mapping[str, Any] | None = None, error: BaseException | None = None) -> None:
        if node.end_ns is None:
            node.end_ns = time.time_ns()
        if attributes:
            node.attributes.update(attributes)
        if error is not None:
            node.error = type(error).__qualname__
            node.attributes[semconv.ERROR_TYPE] = node.error

    def open_turn(self) -> Node:
        """Close the running turn, start turn ``self.turns``. Below full detail turns are not recorded:
        nothing happens here, each engine round trip counts one instead (:meth:`round_trip_turn`)."""
        if not self.events:
            return self.detached()
        self.close_turn()
        turn = Node(
            semconv.SPAN_TURN, self.root.span_id, {semconv.VERL_TURN_INDEX: self.turns}, SpanKind.INTERNAL, self.shared
        )
        self.nodes.append(turn)
        self.current_turn = turn
        self.turns += 1
        return turn

    def round_trip_turn(self) -> Node:
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
    ) -> Iterator[Node]:
        """Record an event around a block; an exception is recorded and re-raised unchanged."""
        node = self.start(name, attributes=attributes, kind=kind)
        try:
            yield node
        except BaseException as exc:
            self.end(node, error=exc)
            raise
        self.end(node)

    # -- context for nested instrumentation and the engine
    def span_context(self, node: Node) -> SpanContext:
        flags = TraceFlags(TraceFlags.SAMPLED if self.sampled else TraceFlags.DEFAULT)
        return SpanContext(self.trace_id, node.span_id, is_remote=False, trace_flags=flags)

    def otel_context(self, node: Node) -> otel_context.Context:
        """The current context with ``node`` as its span (and the step as baggage). Contexts are
        immutable: below full detail every tool call and reward asks for the same one, made once. At full
        detail each event has a node (and a context) of its own: kept on the recorder, it would live as
        long as the request, on the cyclic GC's lists."""
        current = otel_context.get_current()
        made = self._made_context
        if made is not None and made[0] is current and made[1] is node:
            return made[2]
        ctx = trace.set_span_in_context(NonRecordingSpan(self.span_context(node)), current)
        step = self.attribute(semconv.VERL_STEP)
        if step is not None:  # W3C baggage: remote reward/engine spans learn their step
            ctx = baggage.set_baggage(semconv.VERL_STEP, str(step), ctx)
        if node is self._detached:  # full detail: an event's own context is not kept past the event
            self._made_context = (current, node, ctx)
        return ctx

    def attribute(self, key: str) -> Any:
        """A root attribute, also one of the ``late`` ones (worked out now if asked for)."""
        value = self.root.attributes.get(key)
        late = self.late
        if value is None and late is not None:
            value = late[0](*late[1:]).get(key)
        return value

    def carrier(self, node: Node) -> dict[str, str]:
        """W3C ``traceparent`` (+ ``tracestate``) naming ``node`` as parent."""
        carrier: dict[str, str] = {}
        inject(carrier, context=self.otel_context(node))
        return carrier

    # -- the end
    def finish(
        self, status: str, attributes: Mapping[str, Any] | None = None, error: BaseException | None = None
    ) -> list[Node]:
        """End every open node; build the spans and hand them to the processors unless sampled out.

        The keep decision (``sampler``, see :mod:`otel_verl.sampling`) is taken here, once the whole
        request is known; a request held for the chunk-end decision is emitted by :meth:`emit`.
        """
        if self.finished:
            return []
        self.finished = True
        self.status = status
        self.close_turn()
        root = self.root
        root.attributes[semconv.VERL_REQUEST_STATUS] = status
        root.attributes[semconv.VERL_REQUEST_NUM_TURNS] = self.turns
        if self.resumes:
            root.attributes[semconv.VERL_REQUEST_NUM_RESUMES] = self.resumes
        self.end(root, attributes, error)
        if self.sampler is not None:
            if not self.sampler.admit(self, status) or not self.sampled:
                return []
        elif not self.sampled:
            return []
        return self.emit()

    def emit(self) -> list[Node]:
        """Hand this finished request's spans to the processors; while a rollout chunk is open they are
        held and completed (:meth:`build_spans`) at release time, off the event loop."""
        hold = self.hold
        if hold is None or not hold.add(self._completed_spans, len(self.nodes)):
            setup.emit_built(self._completed_spans, len(self.nodes))
        return self.nodes

    def _completed_spans(self) -> list[Node]:
        return self.build_spans(self.status or _COMPLETED)

    def build_spans(self, status: str) -> list[Node]:
        """The recorded nodes, completed as spans: end times, status, attributes stamped on children."""
        state = setup.get_state()
        shared = self.shared
        shared.resource = state.provider.resource if state is not None else None
        root = self.root
        end_default = root.end_ns
        root_attrs = root.attributes
        late = self.late
        if late is not None:
            self.late = None
            root_attrs.update({k: v for k, v in late[0](*late[1:]).items() if k not in root_attrs})
        stamp = shared.stamp = {k: root_attrs[k] for k in _STAMPED if k in root_attrs}
        if status == _FAILED and root.error is None:
            root.status = _ERROR
        for node in self.nodes:
            if node.end_ns is None:
                node.end_ns = end_default
            if node.error is not None:
                node.status = Status(StatusCode.ERROR, node.error)
            if node is not root and stamp:
                own = node.attributes
                if node.own is None and stamp.keys().isdisjoint(own):
                    node.own = own  # the spool encodes the stamp once per request, then these
                node.attributes = {**stamp, **own}
        return self.nodes


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

_ERROR = Status(StatusCode.ERROR)
_COMPLETED = semconv.RequestStatus.COMPLETED.value
_FAILED = semconv.RequestStatus.FAILED.value
_STAMPED = (semconv.VERL_STEP, semconv.VERL_WORKER_RANK, semconv.VERL_REQUEST_ID)
"""Request attributes copied onto every child span, so a turn or event alone is attributable."""
