"""Pure functions: SDK ``ReadableSpan`` → OTLP/JSON dicts, the collector ``file`` exporter's format.

Ids are lowercase hex (OTLP/JSON), 64-bit integers are strings, enums are numbers. A value that
can't be encoded is logged and skipped, never raised (the SDK's trace_encoder does the same).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

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


def _double(value: float) -> dict[str, Any]:
    return {"doubleValue": value if math.isfinite(value) else nonfinite_double(value)}


def encode_value(value: Any) -> dict[str, Any] | None:
    """One attribute value as an OTLP ``AnyValue``; None when it can't be encoded."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return _double(value)
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


def encode_attributes(attributes: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Attributes as OTLP key/value pairs; the scalar types are dispatched inline (the spool's hot loop)."""
    if not attributes:
        return []
    out = []
    append = out.append
    for key, value in attributes.items():
        t = type(value)
        if t is str:
            append({"key": key, "value": {"stringValue": value}})
        elif t is int:
            append({"key": key, "value": {"intValue": str(value)}})
        elif t is float:
            append({"key": key, "value": _double(value)})
        elif t is bool:
            append({"key": key, "value": {"boolValue": value}})
        else:
            encoded = encode_value(value)
            if encoded is None:
                logger.debug("otel_verl: attribute %s of type %s skipped", key, t.__name__)
                continue
            append({"key": key, "value": encoded})
    return out


def _hex_trace(trace_id: int) -> str:
    return format(trace_id, "032x")


def _hex_span(span_id: int) -> str:
    return format(span_id, "016x")


def _encode_kind(kind: SpanKind) -> int:
    return 1 if kind is SpanKind.INTERNAL else _KIND.get(kind, 1)  # enum hashing is slow; INTERNAL is common


def _encode_status(code: StatusCode, description: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if code is not StatusCode.UNSET:
        status["code"] = _STATUS.get(code, 0)
    if description:
        status["message"] = description
    return status


def _encode_links(links: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {
            "traceId": _hex_trace(link.context.trace_id),
            "spanId": _hex_span(link.context.span_id),
            "attributes": encode_attributes(link.attributes),
        }
        for link in links
    ]


def encode_span(span: ReadableSpan) -> dict[str, Any]:
    ctx = span.context
    kind = span.kind
    out: dict[str, Any] = {
        "traceId": f"{ctx.trace_id:032x}",
        "spanId": f"{ctx.span_id:016x}",
        "name": span.name,
        "kind": _encode_kind(kind),
        "startTimeUnixNano": str(span.start_time or 0),
        "endTimeUnixNano": str(span.end_time or span.start_time or 0),
    }
    parent = span.parent
    if parent is not None:
        out["parentSpanId"] = f"{parent.span_id:016x}"
    if ctx.trace_state:
        out["traceState"] = ctx.trace_state.to_header()
    attrs = encode_attributes(span.attributes)
    if attrs:
        out["attributes"] = attrs
    if span.events:
        out["events"] = [
            {"timeUnixNano": str(e.timestamp), "name": e.name, "attributes": encode_attributes(e.attributes)}
            for e in span.events
        ]
    if span.links:
        out["links"] = _encode_links(span.links)
    span_status = span.status
    out["status"] = _encode_status(span_status.status_code, span_status.description)
    return out


def encode_request(spans: Iterable[ReadableSpan]) -> dict[str, Any]:
    """Spans (any resources/scopes) → one ``ExportTraceServiceRequest`` dict."""
    by_resource: dict[int, tuple[Resource, dict[tuple[str, str | None], list[dict[str, Any]]]]] = {}
    for span in spans:
        resource = span.resource
        _, scopes = by_resource.setdefault(id(resource), (resource, {}))
        scope = span.instrumentation_scope
        key = (scope.name, scope.version) if scope is not None else ("", None)
        scopes.setdefault(key, []).append(encode_span(span))
    resource_spans = []
    for resource, scopes in by_resource.values():
        scope_spans = []
        for (name, version), encoded in scopes.items():
            scope: dict[str, Any] = {"name": name}
            if version:
                scope["version"] = version
            scope_spans.append({"scope": scope, "spans": encoded})
        resource_spans.append(
            {"resource": {"attributes": encode_attributes(resource.attributes)}, "scopeSpans": scope_spans}
        )
    return {"resourceSpans": resource_spans}
