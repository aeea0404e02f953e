"""The batch decoder (otlp_batch) reads OTLP/JSON files exactly as the general decoder (SpanColumns) does.

Every comparison reads the same file both ways (``SpanColumns.batch_decoder`` off and on) and compares the
span table column for column, the load's counts and its ``file:line`` errors, with and without
``--skip-bad-lines``. The odd inputs are the ones each decoder reads its own way: ids in base64 or as
numbers, times as numbers, statuses, links, every AnyValue member and member order, several members, nulls,
escapes, keys spelled with escapes or twice, ints Python reads and Arrow would not (and back), values the
general decoder rejects (their line is the error), Jaeger/Tempo wrappers, bad JSON and bad UTF-8.
"""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import pytest

from otel_verl.analysis.errors import AnalysisInputError
from otel_verl.analysis.read import LoadStats, load_spans
from otel_verl.analysis.read.otlp import batch as otlp_batch
from otel_verl.analysis.read.otlp.documents import SpanColumns
from otel_verl.analysis.read.span_frame import frame_from_parts
from otel_verl.analysis.read.spool.files import read_files

TID, SID, PID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331", "00f067aa0ba902b7"
B64 = base64.b64encode(bytes.fromhex(TID)).decode()


def _read(path: Path, batch: bool, skip: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any]]:
    """(span table before the tree, or the error's text; the load's counts) with one decoder."""
    monkeypatch.setattr(SpanColumns, "batch_decoder", batch)
    cols, stats = SpanColumns(), LoadStats()
    try:
        read_files([path], cols, stats, skip, lambda n: None)
        result: Any = frame_from_parts(cols.take_parts())
    except AnalysisInputError as exc:
        result = str(exc)
    return result, {"lines": stats.lines, "bad": stats.bad_lines, "first_bad": stats.first_bad}


def _general_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the documents the general decoder reads (one entry per document)."""
    calls: list[int] = []
    real = SpanColumns.add_document

    def counted(self: SpanColumns, doc: Any) -> int:
        calls.append(1)
        return real(self, doc)

    monkeypatch.setattr(SpanColumns, "add_document", counted)
    return calls


def assert_same_reading(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for skip in (False, True):
        general = _read(path, False, skip, monkeypatch)
        batch = _read(path, True, skip, monkeypatch)
        assert type(general[0]) is type(batch[0]), (skip, general[0] if isinstance(general[0], str) else batch[0])
        if isinstance(general[0], str):
            assert batch[0] == general[0]  # a failed load's counts are not reported (the batch reads ahead)
        else:
            pd.testing.assert_frame_equal(batch[0], general[0])
            assert batch[1] == general[1]


def _span(i: int, **fields: Any) -> dict[str, Any]:
    span = {
        "traceId": TID,
        "spanId": f"{i:016x}",
        "parentSpanId": PID,
        "name": "verl.rollout.turn",
        "kind": 1,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + i),
        "endTimeUnixNano": str(1_700_000_001_000_000_000 + i),
        "attributes": [
            {"key": "verl.step", "value": {"intValue": "3"}},
            {"key": "verl.request.id", "value": {"stringValue": f"r{i}"}},
            {"key": "verl.engine.num_preempted", "value": {"intValue": "0"}},
        ],
        "status": {},
    }
    span.update(fields)
    return span


def _line(spans: list[dict[str, Any]], service: Any = "verl") -> bytes:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]}
    return orjson.dumps({"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]})


def _write(tmp_path: Path, lines: list[bytes]) -> Path:
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def test_the_planted_spool_reads_the_same_and_all_of_it_in_batches(
    planted_spool: Path, planted_spans: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _general_calls(monkeypatch)
    monkeypatch.setenv("OTEL_VERL_LOAD_JOBS", "1")
    monkeypatch.setattr(SpanColumns, "batch_decoder", False)
    general = load_spans(planted_spool)
    assert calls
    calls.clear()
    monkeypatch.setattr(SpanColumns, "batch_decoder", True)
    monkeypatch.setattr(otlp_batch, "BATCH_SPANS", 50)  # many batches, each across several lines
    batch = load_spans(planted_spool)
    assert not calls  # every line of the spool is read by the batch decoder
    pd.testing.assert_frame_equal(batch, general)
    pd.testing.assert_frame_equal(batch, planted_spans)


ATTRIBUTE_VALUES: list[Any] = [
    {"stringValue": "x"},
    {"stringValue": ""},
    {"intValue": "5"},
    {"intValue": 5},
    {"intValue": "-0"},
    {"intValue": "007"},
    {"intValue": " 5"},
    {"intValue": "+5"},
    {"intValue": "0x10"},
    {"intValue": "1_0"},
    {"intValue": "-"},
    {"intValue": "abc"},
    {"intValue": "99999999999999999999"},
    {"intValue": "9223372036854775807"},
    {"intValue": "-9223372036854775808"},
    {"intValue": 5.5},
    {"doubleValue": 0.5},
    {"doubleValue": 1},
    {"doubleValue": -0.0},
    {"doubleValue": 1e300},
    {"doubleValue": "NaN"},
    {"doubleValue": "Infinity"},
    {"doubleValue": "x"},
    {"boolValue": True},
    {"boolValue": False},
    {"boolValue": "yes"},
    {"boolValue": None},
    {"arrayValue": {"values": [{"stringValue": "a"}, {"intValue": "2"}]}},
    {"arrayValue": {"values": []}},
    {"arrayValue": {}},
    {"arrayValue": {"values": [{"arrayValue": {"values": [{"boolValue": True}, {"doubleValue": 2.5}]}}]}},
    {"arrayValue": {"values": [{"intValue": "99999999999999999999"}]}},
    {"arrayValue": None},
    {"kvlistValue": {"values": [{"key": "a", "value": {"intValue": "1"}}, {"key": "b"}]}},
    {"kvlistValue": {"values": [{"value": {"intValue": "1"}}]}},
    {"bytesValue": "AAEC"},
    {},
    None,
    {"stringValue": None},
    {"stringValue": None, "intValue": "3"},
    {"intValue": "3", "stringValue": "x"},
    {"stringValue": "x", "intValue": "3"},
    {"doubleValue": 1.5, "boolValue": True},
    {"boolValue": True, "doubleValue": 1.5},
    {"foo": 1},
    {"foo": 1, "intValue": "2"},
    {"intValue": None, "boolValue": True},
    {"stringValue": 'quote " and \\ backslash'},
    {"stringValue": "tab\tnewline\ncontrol\x01"},
    {"stringValue": "é ünïcödé 😀 \u2028 /"},
    {"stringValue": "nul\x00inside"},
    {"stringValue": 5},
    {"stringValue": ["a"]},
    "not an object",
    [1],
]


@pytest.mark.parametrize("key", ["verl.step", "verl.phase.name", "verl.validate", "verl.reward.score",
                                 "gen_ai.response.finish_reasons", "not.in.the.contract"])  # fmt: skip
@pytest.mark.parametrize("value", range(len(ATTRIBUTE_VALUES)))
def test_every_attribute_value_reads_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, value: int
) -> None:
    """Each value under a key of each column kind (int, str, bool, float, string list) and of ``extra``."""
    attr: dict[str, Any] = {"key": key}
    if ATTRIBUTE_VALUES[value] is not None or value % 2:
        attr["value"] = ATTRIBUTE_VALUES[value]
    odd = _span(1)
    odd["attributes"] = [*odd["attributes"], attr]
    assert_same_reading(_write(tmp_path, [_line([_span(0)]), _line([odd, _span(2)]), _line([_span(3)])]), monkeypatch)


RAW_SPANS = [  # span texts a JSON encoder would not write, or not this way
    '"attributes":[{"key":"verl\\u002estep","value":{"intValue":"4"}}]',
    '"attributes":[{"key":"x","value":{"intValue":"1"}},{"key":"x","value":{"stringValue":"2"}}]',
    '"attributes":[{"key":"x","value":{"intValue":"1"}},{"key":"\\u0078","value":{"intValue":"2"}}]',
    '"attributes":[{"key":"verl.step","value":{"intValue":"1"}},{"key":"verl.step","value":{"intValue":"2"}}]',
    '"attributes":[{"key":"","value":{"intValue":"1"}}]',
    '"attributes":[{"value":{"intValue":"1"}}]',
    '"attributes":[{"key":7,"value":{"intValue":"1"}}]',
    '"attributes":[{"key":"a","value": {"stringValue": "spaced" }}]',
    '"attributes":[{"key":"a","value":{"stringValue":"esc\\u00e9\\n\\"q\\""}}]',
    '"attributes":[{"key":"a","value":{"stringValue":"\\ud83d\\ude00"}}]',
    '"attributes":[{"key":"a","value":{"stringValue":"\\ud800"}}]',
    '"attributes":[{"key":"a","value":{"stringValue":"\\u0000"}}]',
    '"attributes":[{"key":"a","value":{"intValue":"1"},"extra":true}]',
    '"attributes":[{"key":"a","value":{"stringValue":"x","stringValue":"y"}}]',
    '"attributes":null',
    '"attributes":[7]',
    '"attributes":[]',
    '"name":"esc\\"aped\\u00e9"',
    '"name":null',
    '"name":7',
    '"name":{"a":1}',
    '"traceId":"' + B64 + '"',
    '"traceId":"' + TID.upper() + '"',
    '"traceId":null',
    '"traceId":12345',
    '"traceId":["a"]',
    '"traceId":"\\u0030af7651916cd43dd8448eb211c80319c"',
    '"spanId":null',
    '"spanId":""',
    '"parentSpanId":null',
    '"parentSpanId":""',
    '"parentSpanId":0',
    '"startTimeUnixNano":123',
    '"startTimeUnixNano":" 123"',
    '"startTimeUnixNano":"-1"',
    '"startTimeUnixNano":"9223372036854775808"',
    '"startTimeUnixNano":"1e3"',
    '"startTimeUnixNano":1.5',
    '"startTimeUnixNano":null',
    '"startTimeUnixNano":"0x10"',
    '"endTimeUnixNano":"+5"',
    '"status":null',
    '"status":[]',
    '"status":{"code":2,"message":"boom"}',
    '"status":{"code":"STATUS_CODE_ERROR"}',
    '"status":{"code":"STATUS_CODE_OK","message":"fine"}',
    '"status":{"code":"weird"}',
    '"status":{"message":null}',
    '"status":{"message":5}',
    '"status":{"code":300}',
    '"status":{"code":true}',
    '"status":{"code":1.0}',
    '"status":{ }',
    '"links":[]',
    '"links":null',
    '"links":[{"traceId":"' + B64 + '","spanId":"' + SID + '"},{"traceId":"' + TID + '"}]',
    '"links":"x"',
    '"links":[7]',
    '"events":[{"name":"e","attributes":[{"key":"k","value":{"intValue":"1"}}]}],"flags":256',
]


@pytest.mark.parametrize("text", RAW_SPANS)
def test_every_odd_span_field_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    regular = _line([_span(0), _span(1)])
    odd = regular.replace(b'"status":{}}', b'"status":{},' + text.encode() + b"}", 1)  # last: it wins
    assert odd != regular
    assert_same_reading(_write(tmp_path, [_line([_span(5)]), odd, _line([_span(6)])]), monkeypatch)


RAW_LINES = [
    b'{"resourceSpans":[]}',
    b'{"resourceSpans":[{"scopeSpans":[]}]}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[]}]}]}',
    b'{"resourceSpans":[{"resource":null,"scopeSpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"instrumentationLibrarySpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"scopeSpans":[],"instrumentationLibrarySpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"scopeSpans":null}]}',
    b'{"result":{"resourceSpans":[{"scopeSpans":[{"spans":[SPAN]}]}]}}',
    b'{"trace":{"batches":[{"scopeSpans":[{"spans":[SPAN]}]}]}}',
    b'{"batches":[{"scopeSpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"intValue":"7"}}]},'
    b'"scopeSpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"intValue":"0"}}]},'
    b'"scopeSpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name"}]},"scopeSpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":null}]},'
    b'"scopeSpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service\\u002ename","value":{"stringValue":"esc"}},'
    b'{"value":{"stringValue":"no key"}}]},"scopeSpans":[{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"a"}}]},'
    b'"scopeSpans":[{"spans":[SPAN]}]},{"resource":{"attributes":[{"key":"service.name","value":'
    b'{"stringValue":"b"}}]},"scopeSpans":[{"spans":[SPAN]},{"spans":[SPAN]}]}]}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[SPAN]}]}],"resourceSpans":[{"scopeSpans":[]}]}',
    b"[1, 2]",
    b"{}",
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[SPAN]}]}]',
    b'{"resourceSpans": NaN}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"\xff\xfe"}]}]}]}',
    b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"name":"\xc3\xa9 ok"}]}]}]}',
    b'{"timestamp":"2025-01-01T00:00:00","event":"gen","duration_sec":1.0,"step":1}',
    b"   ",
]


@pytest.mark.parametrize("text", RAW_LINES)
def test_every_odd_line_reads_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: bytes) -> None:
    line = text.replace(b"SPAN", json.dumps(_span(9)).encode())
    assert_same_reading(_write(tmp_path, [_line([_span(7)]), line, _line([_span(8)])]), monkeypatch)


def test_a_truncated_last_line_is_the_same_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "traces.jsonl"
    path.write_bytes(_line([_span(0)]) + b"\n" + _line([_span(1)])[:-20])
    assert_same_reading(path, monkeypatch)


def test_a_bad_value_in_a_long_batch_names_its_own_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch is read again line by line: the error is the bad line's, the skip drops only that line."""
    bad = _span(50)
    bad["attributes"] = [*bad["attributes"], {"key": "verl.turn.index", "value": {"intValue": "two"}}]
    lines = [_line([_span(i), _span(100 + i)]) for i in range(40)]
    lines[23] = _line([_span(23), bad])
    path = _write(tmp_path, lines)
    assert_same_reading(path, monkeypatch)
    batch, counts = _read(path, True, False, monkeypatch)
    assert f"{path}:24: " in batch
    batch, counts = _read(path, True, True, monkeypatch)
    assert len(batch) == 78 and counts["bad"] == 1


def _random_span(rng: random.Random, i: int) -> dict[str, Any]:
    keys = ["verl.step", "verl.worker.rank", "verl.request.id", "verl.turn.index", "gen_ai.usage.input_tokens",
            "gen_ai.response.finish_reasons", "verl.validate", "verl.reward.score", "verl.request.status",
            "gen_ai.provider.name", "verl.tool.parser", "verl.engine.num_preempted", "custom.value"]  # fmt: skip
    attrs = []
    for key in rng.sample(keys, rng.randint(0, len(keys))):
        value = rng.choice(ATTRIBUTE_VALUES[:-6] + [{"stringValue": f"v{rng.randint(0, 30)}"}] * 20
                           + [{"intValue": str(rng.randint(-5, 10**12))}] * 20)  # fmt: skip
        attrs.append({"key": key, "value": value})
    span = _span(i, attributes=attrs, traceId=f"{rng.randint(0, 5):032x}", name=rng.choice(["a", "b", "é"]))
    if rng.random() < 0.1:
        span["status"] = rng.choice([{"code": 2, "message": "x"}, None, {"code": "STATUS_CODE_OK"}])
    if rng.random() < 0.1:
        span["links"] = [{"traceId": TID, "spanId": SID}]
    return span


@pytest.mark.parametrize("seed", range(4))
def test_random_runs_read_the_same(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """Lines of random size holding random mixes of regular and odd attributes, read in small batches."""
    rng = random.Random(seed)
    monkeypatch.setattr(otlp_batch, "BATCH_SPANS", rng.choice([1, 7, 64, 1000]))
    spans = [_random_span(rng, i) for i in range(400)]
    lines, at = [], 0
    while at < len(spans):
        size = rng.choice([1, 3, 17, 60])
        lines.append(_line(spans[at : at + size], service=rng.choice(["verl", "verl.vllm"])))
        at += size
    assert_same_reading(_write(tmp_path, lines), monkeypatch)


def test_the_batch_decoder_reads_odd_but_valid_values_itself(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Escapes, base64 ids, doubles, arrays, an error status and links do not send a line the general way."""
    span = _span(1, traceId=B64, name='esc"aped', status={"code": 2, "message": "boom"})
    span["links"] = [{"traceId": TID, "spanId": SID}]
    span["attributes"] += [
        {"key": "verl.reward.score", "value": {"doubleValue": 0.25}},
        {"key": "gen_ai.response.finish_reasons", "value": {"arrayValue": {"values": [{"stringValue": "stop"}]}}},
        {"key": "note", "value": {"stringValue": 'a "quoted" é\n'}},
        {"key": "flag", "value": {"boolValue": True}},
    ]
    path = _write(tmp_path, [_line([span, _span(2)])])
    calls = _general_calls(monkeypatch)
    batch, _ = _read(path, True, False, monkeypatch)
    assert not calls
    assert batch["extra"].iloc[0] == '{"verl.engine.num_preempted":0,"note":"a \\"quoted\\" é\\n","flag":true}'
    assert batch["trace_id"].iloc[0] == TID and batch["status"].iloc[0] == 2 and batch["reward_score"].iloc[0] == 0.25
    assert_same_reading(path, monkeypatch)


def test_orjson_escapes_only_quote_backslash_and_control_characters() -> None:
    """What the batch decoder's plain strings rely on: every other code point is written as its UTF-8."""
    plain = "".join(chr(c) for c in range(0x20, 0x110000) if c not in (0x22, 0x5C) and not 0xD800 <= c < 0xE000)
    assert orjson.dumps(plain) == b'"' + plain.encode() + b'"'
    for c in [*range(0x20), 0x22, 0x5C]:
        assert orjson.dumps(chr(c)) != b'"' + chr(c).encode() + b'"'
