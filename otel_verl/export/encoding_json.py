"""Pure functions: spans → one OTLP/JSON ``ExportTraceServiceRequest`` line, written as text directly.

Parses to the same object as ``encoding.encode_request(spans)``, without building that dict tree. Why: a
verl worker's heap holds millions of objects, and ~20 fresh dicts and lists per span make the
cyclic GC run over and over on the export thread, which then holds the GIL the rollout's event
loop needs (measured in a real AgentLoopWorker: ~38 µs of CPU per span with dicts). Strings are not
tracked by the GC, so this costs a few µs per span. Scalars are formatted inline; anything else
(arrays, maps, bytes) goes through :func:`otel_verl.export.encoding.encode_value` and orjson.
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

from otel_verl.export.encoding import _KIND, _STATUS, encode_value, nonfinite_double
from otel_verl.recording.spans import UNSET, RecordedSpan

logger = logging.getLogger(__name__)

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
requests: a worker's memory grew ~10 KiB per step until it was full (16,384 entries, ~4 MiB)."""


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
    types, ``(1,) == (True,)``, and are encoded each time). Measured: the engine span's ``(stop,)`` went
    through ``encode_value`` (its ``Mapping`` check is an ABC subclass check) and orjson on every span: an
    engine span's 11 attributes took 5.3 µs to encode, 1.7 µs cached (timeit)."""
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
    """The array's items, comma-separated; values that can't be encoded are skipped (logged)."""
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


def _links(links: Sequence[Any]) -> str:
    return (
        "["
        + ",".join(
            f'{{"traceId":"{link.context.trace_id:032x}","spanId":"{link.context.span_id:016x}",'
            f'"attributes":{attributes_json(link.attributes)}}}'
            for link in links
        )
        + "]"
    )


def _tail(attributes: str, events: str, links: Sequence[Any], status: str) -> str:
    """The fields after the times: attributes, events and links when present, then the status."""
    out = ""
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
    head = f'{{"traceId":"{node.shared.trace_hex}","spanId":"{node.span_id:016x}",'
    if node.parent_id is not None:
        head += f'"parentSpanId":"{node.parent_id:016x}",'
    status = node.status
    return (
        head
        + f'"name":{_quote(node.name)},"kind":{_kind(node.kind)},'
        + f'"startTimeUnixNano":"{node.start_ns}","endTimeUnixNano":"{node.end_ns or node.start_ns}"'
        + _tail(
            _node_attributes(node),
            "",
            node.links,
            "{}" if status is UNSET else _status(status.status_code, status.description),
        )
    )


def span_json(span: ReadableSpan) -> str:
    """Any SDK ``ReadableSpan``."""
    if type(span) is RecordedSpan:
        return node_json(span)
    ctx = span.context
    head = f'{{"traceId":"{ctx.trace_id:032x}","spanId":"{ctx.span_id:016x}",'
    parent = span.parent
    if parent is not None:
        head += f'"parentSpanId":"{parent.span_id:016x}",'
    if ctx.trace_state:
        head += f'"traceState":{_quote(ctx.trace_state.to_header())},'
    start = span.start_time or 0
    events = ""
    if span.events:
        events = (
            "["
            + ",".join(
                f'{{"timeUnixNano":"{e.timestamp}","name":{_quote(e.name)},"attributes":{attributes_json(e.attributes)}}}'
                for e in span.events
            )
            + "]"
        )
    status = span.status
    return (
        head
        + f'"name":{_quote(span.name)},"kind":{_kind(span.kind)},'
        + f'"startTimeUnixNano":"{start}","endTimeUnixNano":"{span.end_time or start}"'
        + _tail(attributes_json(span.attributes), events, span.links, _status(status.status_code, status.description))
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
