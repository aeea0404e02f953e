"""Recorder nodes are the ReadableSpans the processors get: every exporter must see the same span.

The spool writes JSON text from the nodes' slots (no SpanContext, no dict tree); the SDK's OTLP
encoder goes through the ReadableSpan properties. Both must agree with a plain SDK ``ReadableSpan``
of the same content, and otel_verl's one text encoder with the SDK's own OTLP encoder (its protobuf
message in proto3 JSON, ids turned to hex as OTLP/JSON has them) on any attribute values.
"""

from __future__ import annotations

import base64
import math

import orjson
import pytest
from google.protobuf.json_format import MessageToDict, ParseDict
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from otel_verl import semconv
from otel_verl.config import OtelVerlConfig
from otel_verl.export import encoding, provider, tracing
from otel_verl.export.encoding import request_line
from otel_verl.recording.recorder import RequestRecorder
from otel_verl.recording.spans import RecordedSpan
from tests.process_state import reset_tracing


@pytest.fixture
def worker_span(tmp_path):
    reset_tracing()
    config = OtelVerlConfig(spool=True, spool_dir=str(tmp_path), run_id="nodes")
    provider.setup_tracing("agent_loop_worker", worker_rank=3, config=config, set_global=False)
    span = tracing.tracer().start_span(semconv.SPAN_WORKER, attributes={semconv.VERL_STEP: 7})
    yield span
    span.end()
    reset_tracing()


def _record(parent, *, own_trace=False, fail=False) -> RequestRecorder:
    attrs = {semconv.VERL_STEP: 7, semconv.VERL_WORKER_RANK: 3, semconv.VERL_REQUEST_ID: "r-1"}
    rec = RequestRecorder(parent, attrs, own_trace=own_trace)
    rec.end(rec.start(semconv.SPAN_PREPROCESS, attributes={semconv.VERL_PREPROCESS_KIND: "initial_prompt"}))
    rec.open_turn()
    engine = rec.start("text_completion m", attributes={semconv.GEN_AI_OPERATION_NAME: "x"}, kind=SpanKind.CLIENT)
    rec.end(engine, {semconv.GEN_AI_USAGE_OUTPUT_TOKENS: 12, semconv.GEN_AI_RESPONSE_FINISH_REASONS: ["stop"]})
    tool = rec.start("execute_tool calc")
    rec.end(tool, error=ValueError("bad"))
    rec.start(semconv.SPAN_TOOL_PARSE)  # never ended: takes the request's end
    rec.finish("failed" if fail else "completed", {semconv.VERL_REWARD_SCORE: 0.25})
    return rec


def _hex_ids(value: object) -> object:
    """proto3 JSON → OTLP/JSON: ids as hex, not base64; span ``flags`` (an optional field otel_verl does not
    write) left out; a bytes value as the hex string otel_verl writes (it records none itself)."""
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key in ("traceId", "spanId", "parentSpanId"):
            out[key] = base64.b64decode(item).hex()
        elif key == "bytesValue":
            out["stringValue"] = base64.b64decode(item).hex()
        elif key != "flags":
            out[key] = _hex_ids(item)
    return out


def sdk_reference(spans) -> dict:
    """What the SDK's own OTLP encoder makes of ``spans``, as OTLP/JSON."""
    return _hex_ids(MessageToDict(encode_spans(spans), use_integers_for_enums=True))


def as_parsed_by_protobuf(line: bytes) -> dict:
    """An OTLP/JSON line read strictly into the protobuf message (what ``replay`` sends) and written back:
    empty arrays and default values fall away on both sides, as in the SDK's message."""
    request = orjson.loads(line)
    for resource_spans in request["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for item in (span, *span.get("links", ())):
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in item:
                            item[key] = base64.b64encode(bytes.fromhex(item[key])).decode()
    message = ParseDict(request, ExportTraceServiceRequest())  # unknown fields are errors here
    return _hex_ids(MessageToDict(message, use_integers_for_enums=True))


def _by_id(request: dict) -> dict[str, dict]:
    spans = [s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    return {s["spanId"]: s for s in spans}


@pytest.mark.parametrize("own_trace", [False, True], ids=["child", "own_trace"])
@pytest.mark.parametrize("fail", [False, True], ids=["completed", "failed"])
def test_spool_encoding_of_nodes_equals_sdk_spans(worker_span, own_trace, fail):
    rec = _record(worker_span.get_span_context(), own_trace=own_trace, fail=fail)
    nodes = rec.nodes
    assert all(type(n) is RecordedSpan for n in nodes)
    fast = orjson.loads(request_line(nodes))
    assert fast == sdk_reference([n.as_sdk_span() for n in nodes])
    assert orjson.loads(request_line([n.as_sdk_span() for n in nodes])) == fast
    spans = _by_id(fast)
    assert len(spans) == 6  # request, preprocess, turn, engine, tool, tool parse
    root = spans[f"{rec.root.span_id:016x}"]
    if own_trace:
        assert "parentSpanId" not in root and root["links"][0]["spanId"] == f"{worker_span.context.span_id:016x}"
    else:
        assert root["parentSpanId"] == f"{worker_span.context.span_id:016x}"
    assert root["status"] == ({"code": 2} if fail else {})
    tool = next(s for s in spans.values() if s["name"] == "execute_tool calc")
    assert tool["status"] == {"code": 2, "message": "ValueError"}
    parse = next(s for s in spans.values() if s["name"] == semconv.SPAN_TOOL_PARSE)
    assert parse["endTimeUnixNano"] == root["endTimeUnixNano"]
    stamped = {a["key"] for a in parse["attributes"]}
    assert {semconv.VERL_STEP, semconv.VERL_WORKER_RANK, semconv.VERL_REQUEST_ID} <= stamped


def test_sdk_otlp_encoder_reads_nodes_like_sdk_spans(worker_span):
    rec = _record(worker_span.get_span_context())
    from_nodes = encode_spans(rec.nodes)
    from_plain = encode_spans([n.as_sdk_span() for n in rec.nodes])
    assert from_nodes == from_plain
    spans = from_nodes.resource_spans[0].scope_spans[0].spans
    assert {s.span_id for s in spans} == {n.span_id.to_bytes(8, "big") for n in rec.nodes}
    assert from_nodes.resource_spans[0].scope_spans[0].scope.name == "otel_verl"


def test_nodes_pass_through_other_sdk_processors(worker_span):
    """A user's processor gets nodes as ReadableSpans with the usual properties."""
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    tracing.get_state().processors.append(processor)
    rec = _record(worker_span.get_span_context())
    got = exporter.get_finished_spans()
    assert len(got) == len(rec.nodes) and all(isinstance(s, ReadableSpan) for s in got)
    root = next(s for s in got if s.name == semconv.SPAN_REQUEST)
    assert root.context.trace_id == worker_span.context.trace_id
    assert root.parent.span_id == worker_span.context.span_id
    assert root.attributes[semconv.VERL_REWARD_SCORE] == 0.25
    assert root.status.status_code is StatusCode.UNSET and root.events == () and root.dropped_attributes == 0
    assert '"name": "verl.rollout.request"' in root.to_json()
    assert root.resource is tracing.get_state().provider.resource


_scalars = st.one_of(
    st.text(max_size=20),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
)
_values = st.one_of(
    _scalars,
    st.lists(st.one_of(st.text(max_size=5), st.integers(-5, 5)), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(-5, 5), max_size=2),
    st.binary(max_size=4),
)


def _loads_nan_aware(raw: bytes) -> object:
    """Parse, mapping NaN (unequal to itself) to a marker so two encodings compare equal."""

    def fix(value: object) -> object:
        if isinstance(value, float) and math.isnan(value):
            return "NaN"
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return value

    return fix(orjson.loads(raw))


@settings(max_examples=150, deadline=None)
@given(
    name=st.text(min_size=1, max_size=30),
    attributes=st.dictionaries(st.text(min_size=1, max_size=12), _values, max_size=6),
    description=st.one_of(st.none(), st.text(max_size=20)),
    event_attributes=st.dictionaries(st.text(min_size=1, max_size=5), _scalars, max_size=2),
)
def test_text_encoder_equals_the_sdk_encoder(name, attributes, description, event_attributes):
    """Quotes, control characters, unicode, int64 bounds, NaN/inf, arrays, maps, bytes, events, links."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": name, "n": 1}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer('scope "x"', "1.0")
    with (
        tracer.start_as_current_span("parent") as parent,
        tracer.start_as_current_span(
            name, attributes=attributes, links=[Link(parent.get_span_context(), attributes)]
        ) as span,
    ):
        span.add_event(name, event_attributes)
        if description is not None:
            span.set_status(Status(StatusCode.ERROR, description))
    spans = exporter.get_finished_spans()
    text = request_line(spans)
    assert text.endswith(b"\n") and text.count(b"\n") == 1
    assert _loads_nan_aware(orjson.dumps(as_parsed_by_protobuf(text))) == _loads_nan_aware(
        orjson.dumps(sdk_reference(spans))
    )


def test_the_attribute_fragment_cache_stays_small_over_many_requests():
    """Every request brings values that never come back (its id, token counts): the cache starts over
    at its size, so a long run's worker does not keep them (it grew ~10 KiB per step before)."""
    for i in range(3 * encoding.FRAGMENT_CACHE_SIZE):
        attrs = {semconv.VERL_STEP: 7, semconv.VERL_REQUEST_ID: f"req-{i}", semconv.VERL_REQUEST_RESPONSE_TOKENS: i}
        encoded = orjson.loads(encoding.attributes_json(attrs))
        assert len(encoding._fragments) <= encoding.FRAGMENT_CACHE_SIZE
    assert encoded == [  # still right after the cache started over
        {"key": semconv.VERL_STEP, "value": {"intValue": "7"}},
        {"key": semconv.VERL_REQUEST_ID, "value": {"stringValue": f"req-{i}"}},
        {"key": semconv.VERL_REQUEST_RESPONSE_TOKENS, "value": {"intValue": str(i)}},
    ]


def test_timed_events_nest_under_the_turn_and_fail_like_verl(worker_span):
    """``RequestRecorder.timed`` (preprocess, tool parse): the event spans exactly the awaited call, sits
    under the running turn, takes ``summarize``'s attributes; an exception from verl's coroutine marks
    the event failed and reaches verl unchanged; a ``summarize`` that raises costs only its attributes."""
    import asyncio

    rec = RequestRecorder(worker_span.get_span_context(), {semconv.VERL_STEP: 7})
    boom = RuntimeError("tokenizer died")

    async def parse() -> tuple[str, list[str]]:
        await asyncio.sleep(0.01)
        return "text", ["call-1", "call-2"]

    async def fail() -> None:
        raise boom

    async def rollout() -> None:
        rec.open_turn()
        summarize = lambda result: {semconv.VERL_TOOL_CALL_COUNT: len(result[1])}  # noqa: E731
        assert await rec.timed(semconv.SPAN_TOOL_PARSE, {semconv.VERL_TOOL_PARSER: "H"}, parse(), summarize) == (
            "text",
            ["call-1", "call-2"],
        )
        with pytest.raises(RuntimeError) as raised:
            await rec.timed(semconv.SPAN_PREPROCESS, {semconv.VERL_PREPROCESS_KIND: "merge_context"}, fail())
        assert raised.value is boom
        unreadable = lambda result: {"n": len(result)}  # noqa: E731  (None has no len)
        assert await rec.timed(semconv.SPAN_PREPROCESS, {}, asyncio.sleep(0), unreadable) is None

    asyncio.run(rollout())
    rec.finish("completed")
    turn, parsed, failed, last = rec.nodes[1:]
    assert parsed.parent.span_id == failed.parent.span_id == turn.context.span_id
    assert parsed.attributes[semconv.VERL_TOOL_CALL_COUNT] == 2
    assert parsed.attributes[semconv.VERL_TOOL_PARSER] == "H"
    assert parsed.end_time - parsed.start_time >= 10_000_000  # the awaited sleep is inside the event
    assert parsed.end_time <= failed.start_time
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes[semconv.ERROR_TYPE] == "RuntimeError"
    assert last.status.status_code is StatusCode.UNSET and "n" not in last.attributes
