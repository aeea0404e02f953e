"""Lines of OTLP/JSON (spool, collector file archive) to parts of the span table, a batch of lines at a time.

Why: the general decoder (:class:`~otel_verl.analysis.read.otlp.documents.SpanColumns`) spends most of a load's CPU
on a real-size step: orjson's dicts, a Python loop over every attribute, lists turned into arrays long after
their objects left the cache. Here msgspec decodes each line into structs whose leaves stay raw JSON
(:mod:`.structs`); while the line is in cache, each field's raws of all its spans are joined into one
buffer (:meth:`LineBatch.add`: one list comprehension and one join per field); a batch of lines then becomes
one part with Arrow and numpy kernels (:func:`_part`, :mod:`.raw_json`, :mod:`.values`). Measured numbers:
``benchmarks/bench_decode.py``, docs/performance.md.

The part equals what the general decoder makes of the same lines, column for column
(``tests/analysis/test_load_fast.py``). A line that is not of the typed shape goes the general way at once; a
batch holding anything only the general decoder reads exactly (:class:`~.raw_json.Irregular`: an int beyond
int64, a key twice in a span, a span time out of range, a value it would reject...) is decoded again line by
line the general way, so every error names its ``file:line`` and ``--skip-bad-lines`` skips just that line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import msgspec
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl.analysis.read.otlp.documents import attr_value
from otel_verl.analysis.read.otlp.raw_json import Irregular, decimal_ints, json_strings, replace_at, unquoted_plain
from otel_verl.analysis.read.otlp.structs import LINE_DECODER
from otel_verl.analysis.read.otlp.values import column_values, extra_json, read_values
from otel_verl.analysis.read.span_columns import ATTR_COLUMNS
from otel_verl.analysis.read.span_frame import normalize_id

Part = dict[str, Any]

BATCH_SPANS = 16384
"""Spans gathered before they become a part: a part costs ~100 array calls, so batches this size make that
fixed cost negligible a span (docs/performance.md); what a batch holds is compact (joined bytes), not decoded
objects."""

_FIELDS = ("traceId", "spanId", "parentSpanId", "name", "startTimeUnixNano", "endTimeUnixNano", "status", "links")
_COLUMNS = list(ATTR_COLUMNS.values())
_COLUMN_OF_KEY = {key: i for i, key in enumerate(ATTR_COLUMNS)}
_STATUS_CODES = {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}


class _Raws:
    """The raw texts of one field, joined line by line: bytes and each text's length."""

    __slots__ = ("chunks", "lengths")

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.lengths: list[np.ndarray] = []

    def add(self, raws: list[Any]) -> None:
        self.chunks.append(b"".join(raws))
        # np.fromiter with a count: array("i").extend(map(len, ...)) converted each int the slow way (3x)
        self.lengths.append(np.fromiter(map(len, raws), dtype=np.int32, count=len(raws)))

    def array(self) -> pa.Array:
        lengths = np.concatenate(self.lengths) if self.lengths else np.empty(0, np.int32)
        offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
        np.cumsum(lengths, out=offsets[1:])
        data = pa.py_buffer(b"".join(self.chunks))
        return pa.Array.from_buffers(pa.binary(), len(lengths), [None, pa.py_buffer(offsets), data])


class LineBatch:
    """Decoded lines waiting to become one part: :meth:`add` a line, :meth:`take` the part."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.lines: list[tuple[bytes, int]] = []
        """(line, line number) of every line in the batch: decoded again the general way if it is irregular."""
        self.n = 0
        self.fields = {f: _Raws() for f in _FIELDS}
        self.keys, self.values = _Raws(), _Raws()
        self.per_span: list[int] = []
        self.services: list[str] = []
        self.counts: list[int] = []

    def __len__(self) -> int:
        return self.n

    def add(self, raw: bytes, lineno: int) -> bool:
        """Decode one line into the batch; False (and nothing kept) when it is not of the typed shape."""
        try:
            if not raw.isascii():
                raw.decode()  # all of it UTF-8, as json.loads demands: msgspec leaves unread text raw and unchecked
            doc = LINE_DECODER.decode(raw)
            chunks = []
            for rs in doc.resourceSpans:
                service = _service(rs.resource)
                scopes = rs.scopeSpans
                if scopes is msgspec.UNSET:
                    scopes = () if rs.instrumentationLibrarySpans is msgspec.UNSET else rs.instrumentationLibrarySpans
                chunks.extend((service, ss.spans) for ss in scopes)
        except (msgspec.MsgspecError, ValueError, TypeError, AttributeError, KeyError):  # Irregular: ValueError
            return False
        for service, spans in chunks:
            # one comprehension per field (CPython 3.11 specializes the slot loads; map(attrgetter) costs 2-3x)
            f = self.fields
            f["traceId"].add([sp.traceId for sp in spans])
            f["spanId"].add([sp.spanId for sp in spans])
            f["parentSpanId"].add([sp.parentSpanId for sp in spans])
            f["name"].add([sp.name for sp in spans])
            f["startTimeUnixNano"].add([sp.startTimeUnixNano for sp in spans])
            f["endTimeUnixNano"].add([sp.endTimeUnixNano for sp in spans])
            f["status"].add([sp.status for sp in spans])
            f["links"].add([sp.links for sp in spans])
            self.keys.add([kv.key for sp in spans for kv in sp.attributes])
            self.values.add([kv.value for sp in spans for kv in sp.attributes])
            self.per_span.extend([len(sp.attributes) for sp in spans])
            self.services.append(service)
            self.counts.append(len(spans))
            self.n += len(spans)
        self.lines.append((raw, lineno))
        return True

    def take(self) -> Part:
        """The batch as a part of the span table (``SpanColumns.flush``'s layout); the batch is emptied.
        Raises :class:`Irregular` (batch kept) when only the general decoder reads it exactly."""
        try:
            part = _part(self)
        except (ValueError, TypeError, AttributeError, KeyError, OverflowError, pa.ArrowException) as exc:
            raise Irregular(str(exc)) from exc
        self.clear()
        return part


def _service(resource: Any) -> str:
    """``service.name`` of a resource as the general decoder reads it (the last one wins)."""
    service: Any = ""
    for kv in resource.attributes if resource is not None else ():
        if orjson.loads(bytes(kv.key)) == "service.name":
            value = orjson.loads(bytes(kv.value)) if len(kv.value) else {}
            service = attr_value(value) or ""
    if not isinstance(service, str):
        raise Irregular("a service name that is not a string")
    return service


def _null() -> Any:
    return None


def _irregular_null() -> Any:
    raise Irregular("a null the general decoder reads its own way")


def _times(arr: pa.Array) -> np.ndarray:
    """Span times: ``"123"`` (OTLP/JSON) or ``123``, 0 when absent; :class:`Irregular` outside int64 ns."""
    texts = unquoted_plain(arr)
    if texts is None:
        quoted = pc.and_(pc.starts_with(arr, '"'), pc.ends_with(arr, '"'))
        texts = pc.if_else(quoted, pc.binary_slice(arr, 1, -1), arr)
        texts = pc.if_else(pc.equal(pc.binary_length(arr), 0), pa.scalar(b"0", pa.binary()), texts)
    ns = decimal_ints(texts)
    if len(ns) and ns.min() < 0:
        raise Irregular("a span time out of range")
    return ns


def _status(arr: pa.Array) -> tuple[np.ndarray, pa.Array]:
    """(code, message) of each span: ``{}`` or absent read in bulk, any other status as the general decoder."""
    empty = pc.or_(pc.equal(pc.binary_length(arr), 0), pc.equal(arr, pa.scalar(b"{}", pa.binary())))
    odd = np.flatnonzero(~empty.to_numpy(zero_copy_only=False))
    codes = np.zeros(len(arr), dtype=np.int8)
    messages = pa.repeat(pa.scalar("", pa.string()), len(arr))
    if len(odd):
        texts = []
        for i, raw in zip(odd.tolist(), arr.take(pa.array(odd)).to_pylist(), strict=True):
            status = orjson.loads(raw)
            code, message = 0, ""
            if status:
                code = status.get("code", 0)
                if isinstance(code, str):
                    code = _STATUS_CODES.get(code, 0)
                message = status.get("message", "")
            if type(code) is not int or not -128 <= code <= 127 or not (message is None or isinstance(message, str)):
                raise Irregular("a status the general decoder reads its own way")
            codes[i] = code
            texts.append(message)
        messages = replace_at(messages, odd, texts)
    return codes, messages


def _links(arr: pa.Array) -> pa.Array:
    """``trace:span,...`` of each span's links, decoded only for the spans that have some."""
    has = np.flatnonzero(pc.greater(pc.binary_length(arr), 0).to_numpy(zero_copy_only=False))
    out = pa.repeat(pa.scalar("", pa.string()), len(arr))
    texts = []
    for raw in arr.take(pa.array(has)).to_pylist():
        links = orjson.loads(raw)
        texts.append(
            ",".join(f"{normalize_id(lk.get('traceId'), 16)}:{normalize_id(lk.get('spanId'), 8)}" for lk in links)
            if links
            else ""
        )
    return replace_at(out, has, texts)


def _service_column(services: list[str], counts: list[int]) -> pa.Array:
    if len(set(services)) <= 1:
        return pa.repeat(pa.scalar(services[0] if services else "", pa.string()), sum(counts))
    return pa.array(services, type=pa.string()).take(pa.array(np.repeat(np.arange(len(services)), counts)))


def _part(batch: LineBatch) -> Part:
    n = batch.n
    f = {name: raws.array() for name, raws in batch.fields.items()}
    part: Part = {"n": n}
    part["trace_id"] = json_strings(f["traceId"], "", _null)
    part["span_id"] = json_strings(f["spanId"], "", _null)
    part["parent_id"] = json_strings(f["parentSpanId"], "", lambda: "")
    part["name"] = json_strings(f["name"], "", _irregular_null)
    part["start_ns"], part["end_ns"] = _times(f["startTimeUnixNano"]), _times(f["endTimeUnixNano"])
    part["status"], part["status_message"] = _status(f["status"])
    part["service"] = _service_column(batch.services, batch.counts)
    part["links"] = _links(f["links"])
    per_span = np.array(batch.per_span, dtype=np.int64)
    rows = np.repeat(np.arange(n, dtype=np.int64), per_span)
    enc = batch.keys.array().dictionary_encode()
    raw_keys = enc.dictionary.to_pylist()
    keys = [orjson.loads(k) if k else None for k in raw_keys]
    if not all(isinstance(k, str) for k in keys):
        raise Irregular("an attribute key that is not a string")
    distinct = {k: i for i, k in reversed(list(enumerate(keys)))}  # one code per key however it was spelled
    key_codes = np.array([distinct[k] for k in keys] or [0], dtype=np.int64)[enc.indices.to_numpy(zero_copy_only=False)]
    column = np.array([_COLUMN_OF_KEY.get(k, -1) for k in keys] or [0], dtype=np.int64)[key_codes]
    values = read_values(batch.values.array())
    order = np.argsort(column.astype(np.int8), kind="stable")  # radix sort: 4x an int64 argsort
    bounds = np.searchsorted(column[order], np.arange(-1, len(_COLUMNS) + 1))
    extra = order[bounds[0] : bounds[1]]
    part["extra"] = extra_json(values, extra, rows[extra], keys, key_codes[extra], n)
    for i, (col, kind) in enumerate(_COLUMNS):
        pos = order[bounds[i + 1] : bounds[i + 2]]
        part[col] = (rows[pos], column_values(values, pos, kind))
    return part


def read_lines(
    lines: Iterable[tuple[bytes, int]],
    batch: LineBatch,
    general: Callable[[bytes, int], None],
    add_part: Callable[[Part], None],
) -> None:
    """Feed ``(line, line number)`` pairs through ``batch``; ``general(line, lineno)`` reads a line the general
    way (and handles its error); ``add_part`` receives each part. Spans keep the lines' order."""
    for raw, lineno in lines:
        if not batch.add(raw, lineno):
            finish(batch, general, add_part)
            general(raw, lineno)
        elif len(batch) >= BATCH_SPANS:
            finish(batch, general, add_part)
    finish(batch, general, add_part)


def finish(batch: LineBatch, general: Callable[[bytes, int], None], add_part: Callable[[Part], None]) -> None:
    """The batch's part to ``add_part``; an irregular batch's lines to ``general``, one by one."""
    if not batch.n:
        batch.clear()  # lines without spans add nothing, as in the general decoder
        return
    try:
        part = batch.take()
    except Irregular:
        lines = batch.lines
        batch.clear()
        for raw, lineno in lines:
            general(raw, lineno)
        return
    add_part(part)
