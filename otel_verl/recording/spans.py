"""A request's spans as light ``ReadableSpan`` objects: :class:`RecordedSpan`, built from what the recorder kept.

The request recorder (:mod:`otel_verl.recording.recorder`) makes the request's own :class:`RecordedSpan`
when it starts and one per recorded turn or event when its spans are built (at release time, off the
event loop); the spans themselves go to the span processors. The exporters recognise them (and read
their ids directly) by importing this module only, not the recorder.

Why not SDK spans while the request runs: a recorded event is one tuple on the rollout's event loop
(its cost against the seed logger's: benchmarks/RESULTS.md, row 1); an SDK span would add
``start_span``/``end`` (locks, processors, a ``SpanContext``) per event there.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

from otel_verl.semconv import ERROR_TYPE
from otel_verl.version import __version__

SCOPE_NAME = "otel_verl"
SCOPE = InstrumentationScope(SCOPE_NAME, __version__)
SAMPLED = TraceFlags(TraceFlags.SAMPLED)
UNSET = Status(StatusCode.UNSET)
_EMPTY_RESOURCE = Resource.get_empty()
_rand = random.Random()
random_bits = _rand.getrandbits
"""``random_bits(64) or new_span_id()``: a span id in one C call on the recording hot path (0 is not valid)."""
_KINDS = {kind.value: kind for kind in SpanKind}


def new_span_id() -> int:
    span_id = _rand.getrandbits(64)
    while span_id == 0:
        span_id = _rand.getrandbits(64)
    return span_id


def new_trace_id() -> int:
    trace_id = _rand.getrandbits(128)
    while trace_id == 0:
        trace_id = _rand.getrandbits(128)
    return trace_id


class RequestShared:
    """What a request's spans share: trace id, resource, the attributes stamped onto every child.

    Nodes point here rather than at their recorder, so a finished request is freed by reference
    counting alone (no recorder ↔ node cycle for the cyclic GC to find).
    """

    __slots__ = ("_trace_hex", "resource", "stamp", "stamp_json", "trace_id")

    def __init__(self, trace_id: int) -> None:
        self.trace_id = trace_id
        self._trace_hex: str | None = None
        self.resource: Resource | None = None
        self.stamp: dict[str, Any] = {}
        self.stamp_json: str | None = None
        """``stamp`` encoded by the spool's text encoder, once per request (on the export thread)."""

    @property
    def trace_hex(self) -> str:
        """The trace id as 32 hex digits, formatted on first use (by an exporter, off the event loop)."""
        text = self._trace_hex
        if text is None:
            text = self._trace_hex = f"{self.trace_id:032x}"
        return text


def children(
    recorded: Iterable[tuple[str, int, int | None, int, int]],
    ends: Mapping[int, int],
    attributes: Mapping[int, dict[str, Any]],
    end_default: int,
    shared: RequestShared,
) -> Iterator[RecordedSpan]:
    """A request's recorded events (``(name, span id, parent id, start ns, kind)`` tuples, their end times
    and attributes by span id) as spans: an event never ended ends with the request (``end_default``), an
    ``error.type`` attribute makes its status ERROR, and the request's ``shared.stamp`` goes onto each."""
    stamp = shared.stamp
    error_key = ERROR_TYPE
    for name, span_id, parent_id, start_ns, kind in recorded:
        node = RecordedSpan.completed(name, span_id, parent_id, start_ns, ends.get(span_id, end_default), kind, shared)
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
        yield node


class RecordedSpan(ReadableSpan):
    """One recorded span of a request. It *is* the ``ReadableSpan`` handed to the span processors.

    A request's own node is made when it starts; its turns and events are recorded as plain tuples and
    become nodes (:meth:`completed`) when the spans are built, off the event loop.
    ``SpanContext`` objects (costly to make: docs/performance.md) are made only if an exporter asks for
    ``context``/``parent`` (the SDK's OTLP encoder does, on its export thread; the spool's encoder reads the ids
    directly).
    ``ReadableSpan.__init__`` is deliberately not called: every property it backs is overridden here.
    """

    __slots__ = ("attributes", "end_ns", "kind", "name", "parent_id", "shared", "span_id", "start_ns")

    # Set on few nodes: class defaults, so a new node assigns only the slots above (a ``ReadableSpan``
    # instance has a ``__dict__`` anyway, where the few overrides go).
    error: str | None = None
    status: Status = UNSET
    links: tuple[Link, ...] = ()
    own: dict[str, Any] | None = None
    """A child's own attributes once ``attributes`` holds the request's stamp too (None: not split)."""
    _context: SpanContext | None = None
    _parent: SpanContext | None = None

    def __init__(
        self,
        name: str,
        parent_id: int | None,
        attributes: dict[str, Any] | None,
        kind: SpanKind,
        shared: RequestShared,
    ) -> None:
        self.name = name
        self.span_id = random_bits(64) or new_span_id()  # 0 is not a valid span id
        self.parent_id = parent_id
        self.start_ns = time.time_ns()
        self.end_ns: int | None = None
        self.attributes: dict[str, Any] = attributes if attributes is not None else {}
        self.kind = kind
        self.shared = shared

    @classmethod
    def completed(
        cls,
        name: str,
        span_id: int,
        parent_id: int | None,
        start_ns: int,
        end_ns: int | None,
        kind: int,
        shared: RequestShared,
    ) -> RecordedSpan:
        """A recorded event as a span (``kind``: a ``SpanKind`` value); the caller sets ``attributes``."""
        node = cls.__new__(cls)
        node.name = name
        node.span_id = span_id
        node.parent_id = parent_id
        node.start_ns = start_ns
        node.end_ns = end_ns
        node.kind = _KINDS[kind]
        node.shared = shared
        return node

    # -- the ReadableSpan interface, read by exporters after the request ended
    def get_span_context(self) -> SpanContext:
        context = self._context
        if context is None:
            context = self._context = SpanContext(self.shared.trace_id, self.span_id, False, SAMPLED)
        return context

    @property
    def context(self) -> SpanContext:  # type: ignore[override]
        return self.get_span_context()

    @property
    def parent(self) -> SpanContext | None:  # type: ignore[override]
        if self.parent_id is None:
            return None
        parent = self._parent
        if parent is None:
            parent = self._parent = SpanContext(self.shared.trace_id, self.parent_id, False, SAMPLED)
        return parent

    @property
    def start_time(self) -> int:  # type: ignore[override]
        return self.start_ns

    @property
    def end_time(self) -> int | None:  # type: ignore[override]
        return self.end_ns

    @property
    def events(self) -> tuple[()]:  # type: ignore[override]
        return ()

    @property
    def resource(self) -> Resource:  # type: ignore[override]
        resource = self.shared.resource
        return resource if resource is not None else _EMPTY_RESOURCE

    @property
    def instrumentation_scope(self) -> InstrumentationScope:  # type: ignore[override]
        return SCOPE

    @property
    def instrumentation_info(self) -> None:  # type: ignore[override]
        return None

    dropped_attributes = dropped_events = dropped_links = 0  # type: ignore[assignment]

    def to_json(self, indent: int | None = 4) -> str:
        return self.as_sdk_span().to_json(indent)

    def as_sdk_span(self) -> ReadableSpan:
        """A plain SDK ``ReadableSpan`` with the same content (for code that wants one)."""
        return ReadableSpan(
            name=self.name,
            context=self.context,
            parent=self.parent,
            resource=self.resource,
            attributes=dict(self.attributes),
            links=self.links,
            kind=self.kind,
            status=self.status,
            start_time=self.start_ns,
            end_time=self.end_ns,
            instrumentation_scope=SCOPE,
        )
