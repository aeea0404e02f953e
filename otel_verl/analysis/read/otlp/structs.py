"""The shape of an OTLP/JSON trace line as the batch decoder (:mod:`.batch`) reads it: msgspec structs
whose leaves stay raw JSON (``msgspec.Raw``, a view of the line).

Why: msgspec decodes a line into these slotted structs skipping every field the span table does not read
(``kind``, ``flags``, ``events``...), with no dict per object, no string object per value and no cyclic-GC
tracking; the leaves are read in bulk by :mod:`.raw_json` (about half the cost of orjson's dicts:
docs/performance.md).

A line that is not of this shape (not an object, another top-level key such as a Jaeger/Tempo wrapper, a
span or attribute that is not an object, a list that is ``null``) fails to decode and goes the general way
(:class:`~otel_verl.analysis.read.otlp.documents.SpanColumns`), which gives its reading or its ``file:line`` error.
"""

from __future__ import annotations

import msgspec
from msgspec import Raw, Struct, UnsetType

NO_RAW: Raw = Raw(b"")
"""An absent member: empty bytes (a present one is at least one byte of JSON)."""


class KeyValue(Struct, gc=False):
    key: Raw = NO_RAW
    value: Raw = NO_RAW


class Span(Struct, gc=False):
    traceId: Raw = NO_RAW
    spanId: Raw = NO_RAW
    parentSpanId: Raw = NO_RAW
    name: Raw = NO_RAW
    startTimeUnixNano: Raw = NO_RAW
    endTimeUnixNano: Raw = NO_RAW
    attributes: list[KeyValue] = []
    status: Raw = NO_RAW
    links: Raw = NO_RAW


class ScopeSpans(Struct, gc=False):
    spans: list[Span] = []


class Resource(Struct, gc=False):
    attributes: list[KeyValue] = []


class ResourceSpans(Struct, gc=False):
    resource: Resource | None = None
    scopeSpans: list[ScopeSpans] | UnsetType = msgspec.UNSET
    instrumentationLibrarySpans: list[ScopeSpans] | UnsetType = msgspec.UNSET
    """The name of ``scopeSpans`` before OTLP 0.15 (old collectors and Jaeger exports)."""


class TraceRequest(Struct, forbid_unknown_fields=True, gc=False):
    """An ``ExportTraceServiceRequest``: the spool's and the collector file exporter's line."""

    resourceSpans: list[ResourceSpans]


LINE_DECODER = msgspec.json.Decoder(TraceRequest)
