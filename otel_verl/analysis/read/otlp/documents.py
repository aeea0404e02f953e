"""Decode OTLP/JSON ``ExportTraceServiceRequest`` documents into column lists.

Why columnar: a 2M-span load must stay linear and cheap, so spans never become Python objects;
each field is appended to one list and attributes of the contract go to sparse (row, value) lists
that turn into numpy arrays once at the end.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa

from otel_verl.analysis.read.span_columns import ATTR_COLUMNS, BASE_COLUMNS, INT64_LIMIT
from otel_verl.analysis.read.span_frame import _strings, frame_from_parts, normalize_id


def attr_value(value: dict[str, Any]) -> Any:
    """One OTLP ``AnyValue`` as a plain Python value (ints arrive as strings in OTLP/JSON)."""
    for key, v in value.items():
        if key == "stringValue":
            return v
        if key == "intValue":
            return int(v)
        if key == "doubleValue":
            return float(v)
        if key == "boolValue":
            return bool(v)
        if key == "arrayValue":
            return [attr_value(x) for x in v.get("values", [])]
        if key == "kvlistValue":
            return {kv["key"]: attr_value(kv.get("value", {})) for kv in v.get("values", [])}
        if key == "bytesValue":
            return v
    return None


def _out_of_range(start: int, end: int) -> None:
    """A span time outside int64 ns: raised while the line is read, so the error names it (numpy's
    int64 conversion happens later, for many lines at once, and could not say which)."""
    field, value = ("startTimeUnixNano", start) if not 0 <= start < INT64_LIMIT else ("endTimeUnixNano", end)
    raise ValueError(f"{field} {value} out of range")


def _text(value: Any) -> str:
    """A span name that is not a string (a damaged or foreign line) kept as its JSON text."""
    try:
        return json.dumps(value, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)


class SpanColumns:
    """Accumulates spans from many documents; :meth:`frame` builds the span table once.

    The general decoder: any document, every odd input read leniently. Files of OTLP/JSON lines go through
    the batch decoder (:mod:`.batch`, about twice as fast) and come here only for the lines it does not
    read exactly; ``batch_decoder = False`` reads them all here (the benchmark's "before", a check)."""

    batch_decoder: bool = True

    def __init__(self) -> None:
        self.base: dict[str, list[Any]] = {c: [] for c in BASE_COLUMNS if c != "duration"}
        self.sparse: dict[str, tuple[list[int], list[Any]]] = {col: ([], []) for col, _ in ATTR_COLUMNS.values()}
        self._targets = {
            key: (self.sparse[col][0].append, self.sparse[col][1].append, kind == "strlist")
            for key, (col, kind) in ATTR_COLUMNS.items()
        }  # attribute key -> (append row, append value, join list values)
        self.n = 0
        self.parts: list[dict[str, Any]] = []
        """Compact (numpy/Arrow) batches of already converted spans; see :meth:`flush`."""
        self._flushed = 0

    def add_document(self, doc: Any) -> int:
        """Add every span of one ExportTraceServiceRequest (or Jaeger/Tempo wrapper); returns count."""
        if not isinstance(doc, dict):
            raise ValueError("not an OTLP/JSON object")
        if "result" in doc and isinstance(doc["result"], dict):
            doc = doc["result"]
        elif "trace" in doc and isinstance(doc["trace"], dict):
            doc = doc["trace"]
        resource_spans = doc.get("resourceSpans", doc.get("batches"))
        if resource_spans is None:
            raise ValueError("no 'resourceSpans' key: not an OTLP/JSON trace document")
        mark = self._mark()
        try:
            return self._add(resource_spans)
        except BaseException:
            self._rollback(mark)  # a bad line adds nothing, so columns stay aligned when it is skipped
            raise

    def _mark(self) -> tuple[int, dict[str, int], dict[str, int]]:
        return (
            self.n,
            {c: len(v) for c, v in self.base.items()},
            {c: len(rows) for c, (rows, _) in self.sparse.items()},
        )

    def _rollback(self, mark: tuple[int, dict[str, int], dict[str, int]]) -> None:
        self.n, base, sparse = mark
        for c, length in base.items():
            del self.base[c][length:]
        for c, length in sparse.items():
            rows, vals = self.sparse[c]
            del rows[length:], vals[length:]

    def _add(self, resource_spans: Any) -> int:
        b = self.base
        tid_l, sid_l, pid_l, name_l = b["trace_id"], b["span_id"], b["parent_id"], b["name"]
        st_l, en_l, code_l, msg_l = b["start_ns"], b["end_ns"], b["status"], b["status_message"]
        svc_l, links_l, extra_l = b["service"], b["links"], b["extra"]
        targets = self._targets
        any_value = attr_value
        dumps = orjson.dumps
        before = self.n
        n = self.n
        for rs in resource_spans:
            service = ""
            for kv in (rs.get("resource") or {}).get("attributes", ()):
                if kv.get("key") == "service.name":
                    service = attr_value(kv.get("value", {})) or ""
            for ss in rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", ())):
                for sp in ss.get("spans", ()):
                    tid_l.append(sp.get("traceId", ""))
                    sid_l.append(sp.get("spanId", ""))
                    pid_l.append(sp.get("parentSpanId") or "")
                    name = sp.get("name", "")
                    name_l.append(name if name.__class__ is str else _text(name))
                    start, end = int(sp.get("startTimeUnixNano", 0)), int(sp.get("endTimeUnixNano", 0))
                    if not (0 <= start < INT64_LIMIT and 0 <= end < INT64_LIMIT):
                        _out_of_range(start, end)
                    st_l.append(start)
                    en_l.append(end)
                    status = sp.get("status")
                    if status:
                        code = status.get("code", 0)
                        if isinstance(code, str):
                            code = {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code, 0)
                        elif not isinstance(code, (int, float)) or not -128 <= code < 128:
                            raise ValueError(f"status code {code!r} is not an OTLP status code")  # not at flush
                        code_l.append(code)
                        msg_l.append(status.get("message", ""))
                    else:
                        code_l.append(0)
                        msg_l.append("")
                    svc_l.append(service)
                    links = sp.get("links")
                    if links:
                        links_l.append(
                            ",".join(
                                f"{normalize_id(lk.get('traceId'), 16)}:{normalize_id(lk.get('spanId'), 8)}"
                                for lk in links
                            )
                        )
                    else:
                        links_l.append("")
                    extra = None
                    for kv in sp.get("attributes", ()):
                        v = kv.get("value") or {}
                        # fast path for the common one-key AnyValues; anything else goes through attr_value
                        value = v.get("stringValue")
                        if value is None:
                            value = v.get("intValue")
                            value = int(value) if value is not None else any_value(v)
                        target = targets.get(kv.get("key"))
                        if target is not None:
                            add_row, add_value, join = target
                            add_row(n)
                            if join and isinstance(value, list):
                                value = ",".join(map(str, value))
                            add_value(value)
                        else:
                            if extra is None:
                                extra = {}
                            extra[kv.get("key")] = value
                    if extra:
                        try:
                            extra_l.append(dumps(extra))  # bytes; decoded once per part in flush
                        except (TypeError, orjson.JSONEncodeError):  # non-str key, int beyond 64 bits...
                            extra_l.append(json.dumps(extra, separators=(",", ":")).encode())
                    else:
                        extra_l.append(b"")
                    n += 1
        self.n = n
        return n - before

    def flush(self) -> None:
        """Turn the Python lists of the spans added since the last flush into one compact part.

        Why: a span's Python objects are large (docs/performance.md); converted every ``FLUSH_SPANS`` spans, a
        large load holds compact arrays instead of GBs of lists, and a worker process returns parts
        that pickle as plain buffers.
        """
        n = self.n - self._flushed
        if n == 0:
            return
        b = self.base
        part: dict[str, Any] = {"n": n}
        for col in ("trace_id", "span_id", "parent_id", "name", "status_message", "service", "links"):
            part[col] = _strings(b[col])
            b[col].clear()
        part["extra"] = pa.array(b["extra"], type=pa.binary()).cast(pa.string())  # compact JSON bytes
        b["extra"].clear()
        for col in ("start_ns", "end_ns"):
            part[col] = np.asarray(b[col], dtype=np.int64)
            b[col].clear()
        part["status"] = np.asarray(b["status"], dtype=np.int8)
        b["status"].clear()
        for col, kind in ATTR_COLUMNS.values():
            rows, vals = self.sparse[col]
            idx = np.asarray(rows, dtype=np.int64) - self._flushed
            if kind in ("int", "float"):
                conv: Any = _floats(vals) if len(idx) else np.empty(0)
            elif kind == "bool":
                conv = np.array([bool(v) for v in vals], dtype=bool)
            else:
                try:  # already strings (or None): straight to Arrow
                    conv = pa.array(vals, type=pa.string())
                except (pa.ArrowTypeError, pa.ArrowInvalid):
                    conv = _strings([None if v is None else str(v) for v in vals])
            part[col] = (idx, conv)
            rows.clear()
            vals.clear()
        self.parts.append(part)
        self._flushed = self.n

    def add_part(self, part: dict[str, Any]) -> None:
        """A part built elsewhere (the batch decoder), after every span added so far."""
        self.flush()
        self.parts.append(part)
        self.n += part["n"]
        self._flushed = self.n

    def maybe_flush(self) -> None:
        """:meth:`flush` once ``FLUSH_SPANS`` spans are pending (call between documents)."""
        if self.n - self._flushed >= FLUSH_SPANS:
            self.flush()

    def take_parts(self) -> list[dict[str, Any]]:
        """Every span added so far as parts (emptied here, so each part has one owner)."""
        self.flush()
        parts, self.parts = self.parts, []
        return parts

    def frame(self) -> pd.DataFrame:
        """The span table: base columns, ``duration`` in seconds, one column per contract attribute."""
        return frame_from_parts(self.take_parts())


FLUSH_SPANS = 200_000


def _floats(vals: list[Any]) -> np.ndarray:
    """Fast path for clean numbers; per-value fallback only when some value is not numeric (a list value,
    which numpy would read as a row of a 2-D array, counts as not numeric: NaN)."""
    try:
        out = np.asarray(vals, dtype=float)
        if out.ndim == 1:
            return out
    except (TypeError, ValueError):
        pass
    return np.asarray([_num(v) for v in vals], dtype=float)


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")
