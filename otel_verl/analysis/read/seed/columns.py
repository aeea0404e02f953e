"""Seed spans straight into span-table columns (``analyze LOGDIR``), with no OTLP/JSON dicts on the way.

Why: building each span as an OTLP/JSON dict (attributes as ``{"key", "value": {"stringValue"}}``
lists) only for :class:`~otel_verl.analysis.read.otlp.documents.SpanColumns` to take it apart again was
over half of the load (figures: docs/performance.md).
Values are exactly what the OTLP round trip gives (``attr_value(any_value(v))``; str and int pass
as they are), so the table is the same either way.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pyarrow as pa

from otel_verl import semconv as sc
from otel_verl.analysis.read.otlp.documents import SpanColumns, attr_value
from otel_verl.export.encoding import encode_value

_LINE = sc.VERL_LEGACY_LINE
_PREFIX = orjson.dumps({_LINE: ""})[:-2]
"""``{"verl.legacy.line":"`` as orjson writes it: the kept line's encoded text follows, then ``"}``."""


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
    """:class:`SpanColumns` fed span by span (:meth:`add_span` is a ``seed_spans.SpanSink``)."""

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
