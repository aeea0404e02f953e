"""The one OTLP/JSON span encoder: every span otel_verl writes (spool, ``import-legacy``, replayable lines) is
written by :func:`encode_span`, as one ``ExportTraceServiceRequest`` line of text (:func:`document_line`).

Pure functions, written as text directly, not as a dict tree for ``json``. Why: a verl worker's heap holds
millions of objects, and ~20 fresh dicts and lists per span make the cyclic GC run over and over on the
export thread, which then holds the GIL the rollout's event loop needs. Strings are not tracked by the GC, so text
costs a fraction of that (both measured: docs/performance.md).
Scalars are formatted inline; anything else (arrays, maps, bytes) goes through :func:`encode_value` and orjson.

The format is the collector ``file`` exporter's: ids are lowercase hex (OTLP/JSON, not protobuf JSON's
base64), 64-bit integers are strings, enums are numbers, NaN and the infinities are strings. A value
that can't be encoded is logged and skipped, never raised (the SDK's ``trace_encoder`` does the same);
a ``None`` attribute is left out. Three front ends feed it: :func:`node_json` (the recorder's spans, read
from their slots), :func:`span_json` (any SDK ``ReadableSpan``) and :func:`fields_json` (plain fields:
the seed-log importer, the benchmarks' synthetic spools). ``tests/instrumentation/test_recorded_span.py``
checks the output against the SDK's own OTLP encoder.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from json.encoder import encode_basestring as _quote  # C implementation: '"…"' with JSON escapes
from typing import Any

import orjson
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import SpanKind, StatusCode

from otel_verl.recording.spans import UNSET, RecordedSpan

logger = logging.getLogger(__name__)

_KIND = {
    SpanKind.INTERNAL: 1,
    SpanKind.SERVER: 2,
    SpanKind.CLIENT: 3,
    SpanKind.PRODUCER: 4,
    SpanKind.CONSUMER: 5,
}
_STATUS = {StatusCode.UNSET: 0, StatusCode.OK: 1, StatusCode.ERROR: 2}


def nonfinite_double(value: float) -> str:
    """proto3 JSON spells NaN and the infinities as strings (bare NaN is not JSON)."""
    return "NaN" if value != value else "Infinity" if value > 0 else "-Infinity"


def encode_value(value: Any) -> dict[str, Any] | None:
    """One non-scalar attribute value as an OTLP ``AnyValue`` dict (for orjson); None when it can't be encoded."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value if math.isfinite(value) else nonfinite_double(value)}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, bytes):
        return {"stringValue": value.hex()}
    if isinstance(value, Mapping):
        pairs = ((str(k), encode_value(v)) for k, v in value.items())
        return {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in pairs if v is not None]}}
    if isinstance(value, Sequence):
        values = [v for v in (encode_value(item) for item in value) if v is not None]
        return {"arrayValue": {"values": values}}
    return None


_keys: dict[str, str] = {}
"""Attribute key → its JSON-quoted form with the ``{"key":…,"value":`` prefix (keys are few and fixed)."""


def _key_prefix(key: str) -> str:
    prefix = _keys.get(key)
    if prefix is None:
        if len(_keys) > 4096:  # unbounded key sets (user attributes) must not grow this forever
            _keys.clear()
        prefix = _keys[key] = '{"key":' + _quote(key) + ',"value":'
    return prefix


def _double(value: float) -> str:
    if math.isfinite(value):
        return '{"doubleValue":' + repr(value) + "}"
    return '{"doubleValue":"' + nonfinite_double(value) + '"}'


_fragments: dict[tuple[str, Any, type], str] = {}
"""(key, value, type) → its encoded ``{"key":…,"value":{…}}``: step, rank, request id, names and kinds
repeat on every span of a request, so most attributes are one dict lookup."""

FRAGMENT_CACHE_SIZE = 1024
"""Entries kept before the cache starts over. Small on purpose: a request's spans are encoded one
after the other, so its id is reused while it is fresh, and every request brings new values (its id,
token counts, durations) that never come back. A large cache keeps each of them for thousands of
requests: a worker's memory grew step after step until it was full (docs/performance.md)."""


def _fragment(key: str, value: Any, t: type) -> str | None:
    if t is str:
        return _key_prefix(key) + '{"stringValue":' + _quote(value) + "}}"
    if t is int:
        return _key_prefix(key) + '{"intValue":"' + str(value) + '"}}'
    if t is bool:
        return _key_prefix(key) + ('{"boolValue":true}}' if value else '{"boolValue":false}}')
    if t is float:
        return _key_prefix(key) + _double(value) + "}"
    encoded = encode_value(value)
    if encoded is None:
        logger.debug("otel_verl: attribute %s of type %s skipped", key, t.__name__)
        return None
    return _key_prefix(key) + orjson.dumps(encoded, option=orjson.OPT_NON_STR_KEYS).decode() + "}"


def _tuple_fragment(key: str, value: tuple) -> str | None:
    """A tuple attribute; a tuple of strings is cached like a scalar (others could compare equal across
    types, ``(1,) == (True,)``, and are encoded each time). Why: uncached, the engine span's ``(stop,)`` went
    through ``encode_value`` (an ABC ``Mapping`` check) and orjson on every span (docs/performance.md)."""
    for item in value:
        if type(item) is not str:
            return _fragment(key, value, tuple)
    cache_key = (key, value, tuple)
    fragment = _fragments.get(cache_key)
    if fragment is None:
        fragment = _fragment(key, value, tuple)
        if fragment is None:
            return None
        if len(_fragments) >= FRAGMENT_CACHE_SIZE:
            _fragments.clear()
        _fragments[cache_key] = fragment
    return fragment


def attribute_items_json(attributes: Mapping[str, Any]) -> str:
    """The array's items, comma-separated; ``None`` values are left out, values that can't be encoded
    are skipped (logged)."""
    parts = []
    append = parts.append
    get = _fragments.get
    for key, value in attributes.items():
        t = type(value)
        if t is str or t is int or t is bool or t is float:  # hashable scalars: cached
            cache_key = (key, value, t)  # the type keeps True and 1 apart
            fragment = get(cache_key)
            if fragment is None:
                fragment = _fragment(key, value, t)
                if len(_fragments) >= FRAGMENT_CACHE_SIZE:
                    _fragments.clear()
                _fragments[cache_key] = fragment  # type: ignore[assignment]
        elif t is tuple:  # e.g. gen_ai.response.finish_reasons, the same (stop,) on every round trip
            fragment = _tuple_fragment(key, value)
            if fragment is None:
                continue
        elif value is None:  # not an OTel value (the SDK drops it too); plain-field writers pass them
            continue
        else:
            fragment = _fragment(key, value, t)
            if fragment is None:
                continue
        append(fragment)
    return ",".join(parts)


def attributes_json(attributes: Mapping[str, Any] | None) -> str:
    """The ``[{"key":…,"value":{…}}, …]`` array."""
    return "[" + attribute_items_json(attributes) + "]" if attributes else "[]"


def _kind(kind: SpanKind) -> str:
    return "1" if kind is SpanKind.INTERNAL else "3" if kind is SpanKind.CLIENT else str(_KIND.get(kind, 1))


def _status(code: StatusCode, description: str | None) -> str:
    fields = []
    if code is not StatusCode.UNSET:
        fields.append('"code":' + str(_STATUS.get(code, 0)))
    if description:
        fields.append('"message":' + _quote(description))
    return "{" + ",".join(fields) + "}"


def _link(link: Any) -> str:
    attributes = attributes_json(link.attributes)
    tail = ',"attributes":' + attributes + "}" if attributes != "[]" else "}"
    return f'{{"traceId":"{link.context.trace_id:032x}","spanId":"{link.context.span_id:016x}"' + tail


def _event(event: Any) -> str:
    attributes = attributes_json(event.attributes)
    tail = ',"attributes":' + attributes + "}" if attributes != "[]" else "}"
    return f'{{"timeUnixNano":"{event.timestamp}","name":{_quote(event.name)}' + tail


def _links(links: Sequence[Any]) -> str:
    return "[" + ",".join(_link(link) for link in links) + "]"


def encode_span(
    trace_hex: str,
    span_hex: str,
    parent_hex: str | None,
    name: str,
    kind: str,
    start_ns: int,
    end_ns: int,
    attributes: str,
    status: str = "{}",
    links: Sequence[Any] = (),
    events: str = "",
    trace_state: str | None = None,
) -> str:
    """One span object: every front end ends here. ``kind`` is the enum's number as text, ``attributes``
    an encoded array (:func:`attributes_json`), ``status`` an encoded object, ``events`` an encoded array
    or empty; ``links`` are SDK ``Link`` objects. Empty attributes, events and links are left out."""
    head = f'{{"traceId":"{trace_hex}","spanId":"{span_hex}",'
    if parent_hex:
        head += f'"parentSpanId":"{parent_hex}",'
    if trace_state:
        head += f'"traceState":{_quote(trace_state)},'
    out = (
        head
        + f'"name":{_quote(name)},"kind":{kind},'
        + f'"startTimeUnixNano":"{start_ns}","endTimeUnixNano":"{end_ns}"'
    )
    if attributes != "[]":
        out += ',"attributes":' + attributes
    if events:
        out += ',"events":' + events
    if links:
        out += ',"links":' + _links(links)
    return out + ',"status":' + status + "}"


def _node_attributes(node: RecordedSpan) -> str:
    """The node's attributes; a child's stamped request attributes are encoded once per request."""
    own = node.own
    if own is None:
        return attributes_json(node.attributes)
    shared = node.shared
    stamp = shared.stamp_json
    if stamp is None:
        stamp = shared.stamp_json = attribute_items_json(shared.stamp)
    rest = attribute_items_json(own) if own else ""
    return "[" + (stamp + "," + rest if stamp and rest else stamp or rest) + "]"


def node_json(node: RecordedSpan) -> str:
    """A recorder node, from its slots (ids formatted here, no SpanContext built)."""
    status = node.status
    return encode_span(
        node.shared.trace_hex,
        f"{node.span_id:016x}",
        f"{node.parent_id:016x}" if node.parent_id is not None else None,
        node.name,
        _kind(node.kind),
        node.start_ns,
        node.end_ns or node.start_ns,
        _node_attributes(node),
        "{}" if status is UNSET else _status(status.status_code, status.description),
        node.links,
    )


def span_json(span: ReadableSpan) -> str:
    """Any SDK ``ReadableSpan``."""
    if type(span) is RecordedSpan:
        return node_json(span)
    ctx = span.context
    parent = span.parent
    start = span.start_time or 0
    events = "[" + ",".join(_event(e) for e in span.events) + "]" if span.events else ""
    status = span.status
    return encode_span(
        f"{ctx.trace_id:032x}",
        f"{ctx.span_id:016x}",
        f"{parent.span_id:016x}" if parent is not None else None,
        span.name,
        _kind(span.kind),
        start,
        span.end_time or start,
        attributes_json(span.attributes),
        _status(status.status_code, status.description),
        span.links,
        events,
        ctx.trace_state.to_header() if ctx.trace_state else None,
    )


def fields_json(
    trace_hex: str,
    span_hex: str,
    parent_hex: str | None,
    name: str,
    start_ns: int,
    end_ns: int,
    attributes: Mapping[str, Any],
    kind: SpanKind = SpanKind.INTERNAL,
    status_code: StatusCode = StatusCode.UNSET,
    status_message: str | None = None,
) -> str:
    """A span from plain fields (ids as hex text; a ``None`` or empty parent: a root)."""
    return encode_span(
        trace_hex,
        span_hex,
        parent_hex,
        name,
        _kind(kind),
        start_ns,
        end_ns,
        attributes_json(attributes),
        "{}" if status_code is StatusCode.UNSET and not status_message else _status(status_code, status_message),
    )


_resources: dict[int, tuple[Resource, str]] = {}
"""id(resource) → (resource, its encoded ``{"resource":…,"scopeSpans":[`` prefix); one or two per process."""


def _resource_prefix(resource: Resource) -> str:
    cached = _resources.get(id(resource))
    if cached is None or cached[0] is not resource:
        if len(_resources) > 64:
            _resources.clear()
        attrs = attributes_json(resource.attributes)
        cached = _resources[id(resource)] = (resource, '{"resource":{"attributes":' + attrs + '},"scopeSpans":[')
    return cached[1]


def _scope_prefix(scope: InstrumentationScope | None) -> str:
    if scope is None:
        return '{"scope":{"name":""},"spans":['
    version = f',"version":{_quote(scope.version)}' if scope.version else ""
    return f'{{"scope":{{"name":{_quote(scope.name)}{version}}},"spans":['


def document_line(resource: Resource, scope: InstrumentationScope | None, spans: Sequence[str]) -> bytes:
    """Encoded spans of one resource and scope → one ``ExportTraceServiceRequest`` as a JSON line (with ``\\n``)."""
    return (
        '{"resourceSpans":[' + _resource_prefix(resource) + _scope_prefix(scope) + ",".join(spans) + "]}]}]}\n"
    ).encode()


def request_line(spans: Iterable[ReadableSpan]) -> bytes:
    """Spans (any resources/scopes) → one ``ExportTraceServiceRequest`` as a JSON line (with ``\\n``)."""
    by_resource: dict[int, tuple[Resource, dict[tuple[str, str | None], tuple[Any, list[str]]]]] = {}
    for span in spans:
        resource = span.resource
        entry = by_resource.get(id(resource))
        if entry is None:
            entry = by_resource[id(resource)] = (resource, {})
        scope = span.instrumentation_scope
        key = (scope.name, scope.version) if scope is not None else ("", None)
        scoped = entry[1].get(key)
        if scoped is None:
            scoped = entry[1][key] = (scope, [])
        scoped[1].append(span_json(span))
    resource_parts = []
    for resource, scopes in by_resource.values():
        scope_parts = [_scope_prefix(scope) + ",".join(encoded) + "]}" for scope, encoded in scopes.values()]
        resource_parts.append(_resource_prefix(resource) + ",".join(scope_parts) + "]}")
    return ('{"resourceSpans":[' + ",".join(resource_parts) + "]}\n").encode()
