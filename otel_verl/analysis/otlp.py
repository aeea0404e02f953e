"""Decode OTLP/JSON ``ExportTraceServiceRequest`` documents into column lists.

Why columnar: a 2M-span load must stay linear and cheap, so spans never become Python objects;
each field is appended to one list and attributes of the contract go to sparse (row, value) lists
that turn into numpy arrays once at the end.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl.analysis.columns import ATTR_COLUMNS, BASE_COLUMNS

_HEX = set("0123456789abcdefABCDEF")


def _attr_value(value: dict[str, Any]) -> Any:
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
            return [_attr_value(x) for x in v.get("values", [])]
        if key == "kvlistValue":
            return {kv["key"]: _attr_value(kv.get("value", {})) for kv in v.get("values", [])}
        if key == "bytesValue":
            return v
    return None


def normalize_id(raw: str | None, nbytes: int) -> str:
    """Hex id from OTLP/JSON (hex) or protobuf's default JSON mapping (base64, e.g. Tempo)."""
    if not raw:
        return ""
    if len(raw) == 2 * nbytes and set(raw) <= _HEX:
        return raw.lower()
    try:
        return base64.b64decode(raw, validate=True).hex()
    except (binascii.Error, ValueError):
        return raw.lower()


class SpanColumns:
    """Accumulates spans from many documents; :meth:`frame` builds the span table once."""

    def __init__(self) -> None:
        self.base: dict[str, list[Any]] = {c: [] for c in BASE_COLUMNS if c != "duration"}
        self.sparse: dict[str, tuple[list[int], list[Any]]] = {col: ([], []) for col, _ in ATTR_COLUMNS.values()}
        self.n = 0

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
        b = self.base
        tid_l, sid_l, pid_l, name_l = b["trace_id"], b["span_id"], b["parent_id"], b["name"]
        st_l, en_l, code_l, msg_l = b["start_ns"], b["end_ns"], b["status"], b["status_message"]
        svc_l, links_l, extra_l = b["service"], b["links"], b["extra"]
        sparse = self.sparse
        attr_cols = ATTR_COLUMNS
        before = self.n
        n = self.n
        for rs in resource_spans:
            service = ""
            for kv in (rs.get("resource") or {}).get("attributes", ()):
                if kv.get("key") == "service.name":
                    service = _attr_value(kv.get("value", {})) or ""
            for ss in rs.get("scopeSpans", rs.get("instrumentationLibrarySpans", ())):
                for sp in ss.get("spans", ()):
                    tid_l.append(sp.get("traceId", ""))
                    sid_l.append(sp.get("spanId", ""))
                    pid_l.append(sp.get("parentSpanId") or "")
                    name_l.append(sp.get("name", ""))
                    st_l.append(int(sp.get("startTimeUnixNano", 0)))
                    en_l.append(int(sp.get("endTimeUnixNano", 0)))
                    status = sp.get("status")
                    if status:
                        code = status.get("code", 0)
                        if isinstance(code, str):
                            code = {"STATUS_CODE_OK": 1, "STATUS_CODE_ERROR": 2}.get(code, 0)
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
                        key = kv.get("key")
                        target = attr_cols.get(key)
                        value = _attr_value(kv.get("value") or {})
                        if target is not None:
                            rows, vals = sparse[target[0]]
                            rows.append(n)
                            if target[1] == "strlist":
                                value = ",".join(map(str, value)) if isinstance(value, list) else value
                            vals.append(value)
                        else:
                            if extra is None:
                                extra = {}
                            extra[key] = value
                    extra_l.append(json.dumps(extra) if extra else "")
                    n += 1
        self.n = n
        return n - before

    def frame(self) -> pd.DataFrame:
        """The span table: base columns, ``duration`` in seconds, one column per contract attribute."""
        n = self.n
        data: dict[str, Any] = {}
        b = self.base
        for col in ("trace_id", "span_id", "parent_id"):
            nbytes = 16 if col == "trace_id" else 8
            arr = pa.array(b[col], type=pa.string())
            lengths = pc.utf8_length(arr)
            odd = pc.and_(pc.not_equal(lengths, 2 * nbytes), pc.not_equal(lengths, 0))
            if pc.any(odd).as_py() or pc.any(pc.match_substring_regex(arr, "[A-F]")).as_py():
                arr = pa.array([normalize_id(v, nbytes) for v in b[col]], type=pa.string())
            data[col] = pd.array(arr, dtype=pd.ArrowDtype(pa.string())).astype("str")
        data["name"] = pd.array(b["name"], dtype=object)
        start = np.asarray(b["start_ns"], dtype=np.int64)
        end = np.asarray(b["end_ns"], dtype=np.int64)
        data["start_ns"] = start
        data["end_ns"] = end
        data["duration"] = (end - start) / 1e9
        data["status"] = np.asarray(b["status"], dtype=np.int8)
        data["status_message"] = pd.array(b["status_message"], dtype=object)
        data["service"] = pd.array(b["service"], dtype=object)
        data["links"] = pd.array(b["links"], dtype=object)
        data["extra"] = pd.array(b["extra"], dtype=object)
        for col, kind in ATTR_COLUMNS.values():
            rows, vals = self.sparse[col]
            idx = np.asarray(rows, dtype=np.int64)
            if kind == "int":
                arr = np.full(n, np.nan)
                if len(idx):
                    arr[idx] = _floats(vals)
                data[col] = pd.array(arr, dtype="Int64") if np.all(np.isnan(arr) | (arr == np.round(arr))) else arr
            elif kind == "float":
                arr = np.full(n, np.nan)
                if len(idx):
                    arr[idx] = _floats(vals)
                data[col] = arr
            elif kind == "bool":
                obj = np.full(n, None, dtype=object)
                if len(idx):
                    obj[idx] = [bool(v) for v in vals]
                data[col] = pd.array(obj, dtype="boolean")
            else:
                obj = np.full(n, None, dtype=object)
                if len(idx):
                    obj[idx] = [None if v is None else str(v) for v in vals]
                data[col] = pd.array(obj, dtype=object)
        return pd.DataFrame(data)


def _floats(vals: list[Any]) -> np.ndarray:
    """Fast path for clean numbers; per-value fallback only when some value is not numeric."""
    try:
        return np.asarray(vals, dtype=float)
    except (TypeError, ValueError):
        return np.asarray([_num(v) for v in vals], dtype=float)


def _num(v: Any) -> float:
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")
