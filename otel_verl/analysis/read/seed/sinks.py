"""The two sinks of a :class:`.batch.SpanBatch`: one span at a time, or span-table parts (``analyze LOGDIR``),
with no OTLP/JSON dicts on the way.

:func:`emit_rows` hands each span to a sink with its attributes in the order the seed importer
has always written them (so ``import-legacy``'s OTLP/JSON, :func:`~otel_verl.export.encoding.fields_json`,
stays byte for byte the same), the kept line (``verl.legacy.line``) included. :func:`add_to_table` adds the
batch to a :class:`SeedSpanColumns`: from Arrow's typed columns as whole parts (the worker and
request spans, whose attributes are dicts, one by one); a batch whose columns hold any JSON type, or kept
lines, goes through :func:`emit_rows` into ``add_span``, which converts each value as the OTLP round trip does.

Why: building each span as an OTLP/JSON dict (attributes as ``{"key", "value": {"stringValue"}}`` lists) only for
:class:`~otel_verl.analysis.read.otlp.documents.SpanColumns` to take it apart again was over half of the load
(figures: docs/performance.md). Values are exactly what the OTLP round trip gives (``attr_value(any_value(v))``;
str and int pass as they are), so the table is the same either way.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from otel_verl import semconv as sc
from otel_verl.analysis.read.otlp.documents import SpanColumns, attr_value
from otel_verl.analysis.read.seed.batch import FORM_EVENT, FORM_TIMED, FORM_TURN, SpanBatch
from otel_verl.analysis.read.seed.rows import BARRIER, ENGINE, LEGACY_SERVICE, PREPROCESS, TOOL, Column, valid_mask
from otel_verl.analysis.read.span_columns import ATTR_COLUMNS
from otel_verl.export.encoding import encode_value

_ORIGIN, _LINE, _STEP, _WORKER = sc.VERL_EVENT_ORIGIN, sc.VERL_LEGACY_LINE, sc.VERL_STEP, sc.VERL_WORKER_RANK
_OPERATION, _TEXT_COMPLETION = sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_OP_TEXT_COMPLETION
_OUTPUT_TOKENS, _INPUT_TOKENS = sc.GEN_AI_USAGE_OUTPUT_TOKENS, sc.GEN_AI_USAGE_INPUT_TOKENS
_PREFIX = orjson.dumps({_LINE: ""})[:-2]
"""``{"verl.legacy.line":"`` as orjson writes it: the kept line's encoded text follows, then ``"}``."""


def _values(col: Column | np.ndarray) -> list[Any]:
    return col if isinstance(col, list) else col.tolist() if isinstance(col, np.ndarray) else col.to_pylist()


def emit_rows(b: SpanBatch, sink: Callable[..., Any]) -> list[Any]:
    """Hand every span of ``b`` to ``sink`` (:meth:`SeedSpanColumns.add_span` or
    :func:`~otel_verl.export.encoding.fields_json`: trace, span id, parent, name, start, end, attributes), in order,
    attributes as dicts (None values included: sinks skip them); returns what ``sink`` returned for each."""
    r = b.rows
    trace, step, worker, raw = b.trace, r.step, r.worker, r.raw
    sids, parents = _hex_ids(b.sid).to_pylist(), _hex_ids(b.parent).to_pylist()
    parents[0] = b.worker_parent
    names, event_names = b.names, r.event_names
    row_event = [event_names[c] for c in r.name_codes.tolist()]
    tool = pre = out = inp = turn_value = None
    results: list[Any] = []
    add = results.append
    starts, ends, rows, forms, kinds, outers = (a.tolist() for a in (b.start, b.end, b.row, b.form, b.kind, b.outer))
    for i, (name, form, row, k) in enumerate(zip(b.name.tolist(), forms, rows, kinds, strict=True)):
        if form == FORM_EVENT:
            attrs: dict[str, Any] = {_ORIGIN: row_event[row]}
            if raw is not None and raw[row] is not None:  # left out rather than None: one attribute fewer to skip
                attrs[_LINE] = raw[row]
            if k == BARRIER:
                attrs[_WORKER] = worker
                attrs[_STEP] = step
            elif outers[i]:
                attrs[_STEP] = step
                attrs[_WORKER] = worker
            if k == ENGINE:
                if out is None:
                    out, inp = _values(r.output_tokens), _values(r.input_tokens)
                attrs[_OPERATION] = _TEXT_COMPLETION
                attrs[_OUTPUT_TOKENS] = out[row]
                attrs[_INPUT_TOKENS] = inp[row]
            elif k == TOOL:
                if tool is None:
                    tool = _values(r.tool)
                attrs[_OPERATION] = sc.GEN_AI_OP_EXECUTE_TOOL
                attrs[sc.GEN_AI_TOOL_NAME] = tool[row]
            elif k == PREPROCESS:
                if pre is None:
                    pre = _values(r.pre_kind)
                attrs[sc.VERL_PREPROCESS_KIND] = pre[row]
        elif form == FORM_TURN:
            if turn_value is None:
                turn_value = _values(r.turn_value)
            line = raw[row] if raw is not None else None
            attrs = {sc.VERL_TURN_INDEX: turn_value[row], _ORIGIN: row_event[row], _LINE: line}
        elif form == FORM_TIMED:
            attrs = {sc.VERL_TURN_INDEX: int(b.timed_turn[i])}
        else:
            attrs = b.attrs[i]
        add(sink(trace, sids[i], parents[i], names[name], starts[i], ends[i], attrs))
    return results


def add_to_table(b: SpanBatch, cols: SeedSpanColumns) -> None:
    """Add the spans of ``b`` to ``cols``, in order (see the module's docstring for how)."""
    r = b.rows
    if r.raw is not None or isinstance(r.model, list):
        emit_rows(b, cols.add_span)
        return
    m = len(b.sid)
    singles = sorted(b.attrs)
    at = 0
    for pos in [*singles, m]:
        if pos > at:
            cols.add_part(_part(b, np.arange(at, pos)))
        if pos < m:
            parent = b.worker_parent if pos == 0 else f"{int(b.parent[pos]):016x}"
            name = b.names[int(b.name[pos])]
            cols.add_span(
                b.trace, f"{int(b.sid[pos]):016x}", parent, name, int(b.start[pos]), int(b.end[pos]), b.attrs[pos]
            )
        at = pos + 1


def _part(b: SpanBatch, at: np.ndarray) -> dict[str, Any]:
    """The spans at positions ``at`` (none of them the worker's or a request's) as one span-table part
    (:meth:`~otel_verl.analysis.read.otlp.documents.SpanColumns.flush`'s layout)."""
    r, n = b.rows, len(at)
    rows, form, kind, outer = b.row[at], b.form[at], b.kind[at], b.outer[at]
    take = pa.array(np.maximum(rows, 0))
    engine, tool, pre, turn = kind == ENGINE, kind == TOOL, kind == PREPROCESS, form == FORM_TURN
    turns = b.timed_turn[at].astype(float)
    turns[turn] = np.asarray(r.turn_value)[rows[turn]]
    tools, pre_kinds = r.tool.take(take), r.pre_kind.take(take)
    out, inp = r.output_tokens.take(take), r.input_tokens.take(take)
    none = np.zeros(n, dtype=bool)
    attrs: dict[str, tuple[Any, np.ndarray]] = {
        "event_origin": (
            pa.array(r.event_names, pa.string()).take(pa.array(r.name_codes).take(take)),
            form != FORM_TIMED,
        ),
        "turn_index": (turns, turn | (form == FORM_TIMED)),
        "step": (np.full(n, float(r.step or 0)), outer if r.step is not None else none),
        "worker": (np.full(n, float(r.worker or 0)), outer if r.worker is not None else none),
        "operation": (pa.array(np.where(engine, _TEXT_COMPLETION, sc.GEN_AI_OP_EXECUTE_TOOL)), engine | tool),
        "output_tokens": (out.fill_null(0).to_numpy(), engine & valid_mask(out)),
        "input_tokens": (inp.fill_null(0).to_numpy(), engine & valid_mask(inp)),
        "tool_name": (tools, tool & valid_mask(tools)),
        "preprocess_kind": (pre_kinds, pre & valid_mask(pre_kinds)),
    }
    part: dict[str, Any] = {
        "n": n,
        "trace_id": pa.repeat(pa.scalar(b.trace, pa.string()), n),
        "span_id": _hex_ids(b.sid[at]),
        "parent_id": _hex_ids(b.parent[at]),
        "name": pa.array(b.names, pa.string()).take(pa.array(b.name[at])),
        "extra": pa.repeat(pa.scalar("", pa.string()), n),
        "start_ns": b.start[at],
        "end_ns": b.end[at],
        **constant_columns(LEGACY_SERVICE, n),
    }
    for col, col_kind in ATTR_COLUMNS.values():
        values, mask = attrs.get(col, (None, none))
        idx = np.flatnonzero(mask).astype(np.int64)
        if col_kind in ("int", "float"):
            part[col] = (idx, np.asarray(values, dtype=float)[idx] if len(idx) else np.empty(0))
        elif col_kind == "bool":
            part[col] = (idx, np.asarray(values, dtype=bool)[idx] if len(idx) else np.empty(0, dtype=bool))
        else:
            part[col] = (idx, values.take(pa.array(idx)) if len(idx) else pa.array([], type=pa.string()))
    return part


def _hex_ids(ids: np.ndarray) -> pa.Array:
    """uint64 span ids as 16-digit lower-case hex strings (``f"{x:016x}"``), in one buffer."""
    data = ids.astype(">u8").tobytes().hex().encode()
    offsets = np.arange(0, 16 * len(ids) + 1, 16, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), len(ids), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def any_value(v: Any) -> dict[str, Any]:
    """Python value → OTLP ``AnyValue``, as the spool's encoder writes it (anything it doesn't know: its string)."""
    return encode_value(v) or {"stringValue": str(v)}


def _dumps(extra: dict[str, Any]) -> bytes:
    """What :class:`SpanColumns` stores as ``extra``: compact JSON, ``json`` for what orjson refuses."""
    try:
        return orjson.dumps(extra)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(extra, separators=(",", ":")).encode()


class SeedSpanColumns(SpanColumns):
    """:class:`SpanColumns` fed span by span (:meth:`add_span` takes a span as :func:`emit_rows` hands it)."""

    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service
        b = self.base
        self._appends = tuple(
            b[c].append for c in ("trace_id", "span_id", "parent_id", "name", "start_ns", "end_ns", "extra")
        )
        self._lines: list[str] = []
        """Kept seed lines of spans whose only extra attribute is that line, encoded by :meth:`flush`..."""
        self._line_rows: list[int] = []
        """... and their rows since the last flush."""
        self._only_lines = True
        """No span since the last flush had other extra attributes."""

    def add_span(
        self, trace: str, sid: str, parent: str, name: str, start: int, end: int, attrs: dict[str, Any]
    ) -> None:
        """One span (times already checked by the seed reader); attributes of the contract go to their columns,
        the rest (the kept seed line) to ``extra`` as the OTLP path writes it. The attribute loop mirrors
        :meth:`SpanColumns.add_document`'s on purpose: a shared helper, a call per attribute, made that reader
        (Jaeger's and Tempo's traces) 12-30 % slower (docs/performance.md); change them together."""
        a_trace, a_sid, a_parent, a_name, a_start, a_end, a_extra = self._appends
        a_trace(trace)
        a_sid(sid)
        a_parent(parent)
        a_name(name)
        a_start(start)
        a_end(end)
        n = self.n
        targets = self._targets
        extra = None
        for key, value in attrs.items():
            if value is None:
                continue
            t = type(value)
            if t is not str and t is not int:
                value = attr_value(any_value(value))
            target = targets.get(key)
            if target is not None:
                add_row, add_value, join = target
                add_row(n)
                if join and isinstance(value, list):
                    value = ",".join(map(str, value))
                add_value(value)
            else:
                if extra is None:
                    extra = {}
                extra[key] = value
        if extra is None:
            a_extra(b"")
        elif len(extra) == 1 and _LINE in extra and type(extra[_LINE]) is str:
            self._lines.append(extra[_LINE])  # encoded in one batch by flush
            self._line_rows.append(n - self._flushed)
            a_extra(b"")
        else:
            a_extra(_dumps(extra))
            self._only_lines = False
        self.n = n + 1

    def flush(self) -> None:
        """:meth:`SpanColumns.flush`, the pending kept seed lines encoded in one go (:func:`encode_lines`)."""
        rows, lines = self._line_rows, self._lines
        self._line_rows, self._lines = [], []
        n = self.n - self._flushed
        encoded = encode_lines(lines, rows, n) if lines and self._only_lines else None
        if lines and encoded is None:  # other extra attributes too, or an ambiguous split: one line at a time
            extra = self.base["extra"]
            for row, line in zip(rows, lines, strict=True):
                extra[row] = _dumps({_LINE: line})
        self._only_lines = True
        super().flush()  # the constant columns' lists are empty: their columns are made here, whole
        if n == 0:
            return
        part = self.parts[-1]
        if encoded is not None:
            part["extra"] = encoded
        part.update(constant_columns(self.service, n))


def constant_columns(service: str, n: int) -> dict[str, Any]:
    """The columns every seed span of a part has the same value in: status (0, no message), service, links.

    Each text column as one repeated Arrow value, not a list of n equal strings converted."""
    text = {"status_message": "", "service": service, "links": ""}
    return {col: pa.repeat(pa.scalar(value, pa.string()), n) for col, value in text.items()} | {
        "status": np.zeros(n, dtype=np.int8)
    }


def encode_lines(lines: list[str], rows: list[int], n: int) -> pa.Array | None:
    """The ``extra`` column of ``n`` rows: ``{"verl.legacy.line": line}`` (compact JSON, as orjson writes that
    dict) at ``rows``, empty elsewhere, as one Arrow array built from one ``orjson.dumps(lines)`` buffer;
    None where splitting that buffer is ambiguous.

    Why: orjson.dumps of one dict per span is slow when the results are kept (allocator churn), and a
    Python bytes object per span costs as much again to concatenate and convert (docs/performance.md). Elements
    of the dumped list are separated
    by ``","``, which an encoded string never contains (its quotes are escaped); a count or length mismatch
    falls back to one dumps per line.
    """
    try:
        body = orjson.dumps(lines)[2:-2]  # '["a","b"]' -> 'a","b'
    except (TypeError, orjson.JSONEncodeError):
        return None
    ends, pos, clean = [], 0, True
    for _ in range(len(lines) - 1):
        pos, skipped = _separator(body, pos)
        if pos < 0:
            return None
        clean = clean and not skipped
        ends.append(pos)
        pos += 3
    if _separator(body, pos)[0] >= 0:
        return None
    ends.append(len(body))
    ends_a = np.asarray(ends, dtype=np.int64)
    lengths = np.zeros(n, dtype=np.int64)
    lengths[np.asarray(rows, dtype=np.int64)] = np.diff(ends_a, prepend=-3) - 3 + len(_PREFIX) + 2
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if clean:  # every '","' a separator: one replace builds the column
        data = b"".join((_PREFIX, body.replace(b'","', b'"}' + _PREFIX), b'"}'))
    else:
        starts = [0, *(e + 3 for e in ends[:-1])]
        data = b"".join(x for a, b in zip(starts, ends, strict=True) for x in (_PREFIX, body[a:b], b'"}'))
    if offsets[-1] != len(data) or len(data) >= 2**31:
        return None
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
    return pa.Array.from_buffers(pa.string(), n, buffers)


def _separator(body: bytes, pos: int) -> tuple[int, bool]:
    """Index of the next ``","`` from ``pos`` that ends an element (its quote not escaped by an odd run of
    backslashes, as in an element ending ``\\",``), or -1; and whether an escaped match was skipped.
    Searching from just after an element's opening quote, a match is either that or a real separator."""
    skipped = False
    while True:
        pos = body.find(b'","', pos)
        if pos <= 0 or body[pos - 1] != 92:  # no backslash before it: a closing quote
            return pos, skipped
        run = pos - 1
        while run >= 0 and body[run] == 92:
            run -= 1
        if (pos - 1 - run) % 2 == 0:  # an even run of backslashes escapes itself, not the quote
            return pos, skipped
        skipped = True
        pos += 1
