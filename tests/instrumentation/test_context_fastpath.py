"""otel_verl's one-call context helpers behave exactly like the OTel API they stand in for."""

from __future__ import annotations

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled, suppress_instrumentation
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

from otel_verl.wrapping import context as _context


def test_uses_the_sdk_contextvar_and_agrees_with_the_api():
    assert _context._VAR is not None  # the default runtime context: the fast path is taken
    span = NonRecordingSpan(SpanContext(1, 2, is_remote=False, trace_flags=TraceFlags(1)))
    ctx = trace.set_span_in_context(span)
    token = _context.attach(ctx)
    try:
        assert _context.get_current() is otel_context.get_current() is ctx
        assert trace.get_current_span() is span
    finally:
        _context.detach(token)
    assert trace.get_current_span() is not span
    _context.detach(token)  # a second detach is the SDK's logged no-op, never an exception


def test_suppression_is_seen_like_the_instrumentation_utils():
    assert _context.instrumentation_enabled() is is_instrumentation_enabled() is True
    with suppress_instrumentation():
        assert _context.instrumentation_enabled() is is_instrumentation_enabled() is False
    token = otel_context.attach(otel_context.set_value("suppress_instrumentation", True))  # the legacy plain key
    try:
        assert _context.instrumentation_enabled() is is_instrumentation_enabled() is False
    finally:
        otel_context.detach(token)
