"""Parts of the span table (from either decoder) into the span table, and the Arrow string helpers both use.

Why apart from the decoders: the table is built once from compact parts (Arrow strings, numpy numbers), whoever
made them (:class:`~otel_verl.analysis.read.otlp.documents.SpanColumns`, :mod:`.otlp.batch`, the seed readers, a
spilled step), so it needs none of the decoding; trace, span and parent ids are checked here once per column
(:func:`_ids_clean`) and normalized span by span only when some id is not clean hex.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl.analysis.read.span_columns import ATTR_COLUMNS, INT64_LIMIT

_HEX = set("0123456789abcdefABCDEF")


def normalize_id(raw: Any, nbytes: int) -> str:
    """Hex id from OTLP/JSON (hex) or protobuf's default JSON mapping (base64, e.g. Tempo)."""
    if raw is None or raw == "":
        return ""
    if not isinstance(raw, str):  # an id written as a number, list...: kept as text, never a crash
        raw = str(raw)
    if len(raw) == 2 * nbytes and set(raw) <= _HEX:
        return raw.lower()
    try:
        return base64.b64decode(raw, validate=True).hex()
    except (binascii.Error, ValueError):
        return raw.lower()


def _strings(values: list[Any]) -> pa.Array | np.ndarray:
    """Arrow strings (compact); an object array when some value is not a string (kept as it was)."""
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return np.fromiter(values, dtype=object, count=len(values))  # 1-D even when the values are equal-length lists


def _concat_strings(chunks: list[pa.Array | np.ndarray]) -> pa.Array | np.ndarray:
    if all(isinstance(c, pa.Array) for c in chunks):
        return pa.concat_arrays(chunks) if chunks else pa.array([], type=pa.string())
    return np.concatenate([c if isinstance(c, np.ndarray) else _objects(c) for c in chunks])


def _objects(arr: pa.Array | np.ndarray) -> np.ndarray:
    """Object array of Python strings (None for nulls), one object per distinct value: ids repeat a lot."""
    if isinstance(arr, np.ndarray):
        return arr
    enc = pc.dictionary_encode(arr)
    uniques = np.array([*enc.dictionary.to_pylist(), None], dtype=object)
    idx = enc.indices.to_numpy(zero_copy_only=False)
    if enc.indices.null_count:
        idx = pc.fill_null(enc.indices, len(uniques) - 1).to_numpy()
    return uniques[idx]


def _str_column(arr: pa.Array | np.ndarray) -> Any:
    """What the DataFrame constructor makes of Python strings: pandas ≥ 3 infers its Arrow-backed "str" dtype
    (so hand it the Arrow array, no 2M Python objects on the way), older pandas keeps objects."""
    if isinstance(arr, pa.Array) and _INFER_STR and arr.null_count < len(arr):
        return pd.array(arr, dtype="str")
    return _objects(arr)


_INFER_STR = pd.DataFrame({"x": np.array(["a"], dtype=object)})["x"].dtype != object
"""pandas ≥ 3 (or future.infer_string) turns object columns of strings into "str"; probed, not version-parsed."""


def _ids_clean(arr: pa.Array, nbytes: int) -> bool:
    """Every id already lower-case hex of ``2 * nbytes`` characters (or empty): nothing to normalize.

    Read from the Arrow buffers with numpy (lengths from the offsets, a byte scan for A-F): Arrow's
    ``utf8_length`` and a regex over the three id columns took far longer (docs/performance.md). Ids with nulls
    or non-ASCII bytes take the Arrow kernels, whose answer counts characters."""
    wide = pa.types.is_large_string(arr.type)
    if arr.null_count == 0 and (wide or pa.types.is_string(arr.type)):
        _, offsets_buf, data_buf = arr.buffers()
        offsets = np.frombuffer(offsets_buf, dtype=np.int64 if wide else np.int32)[
            arr.offset : arr.offset + len(arr) + 1
        ]
        lengths = np.diff(offsets)
        data = (
            np.frombuffer(data_buf, dtype=np.uint8)[offsets[0] : offsets[-1]]
            if data_buf is not None and len(arr)
            else np.empty(0, np.uint8)
        )
        if not (data >= 128).any():
            return not (((lengths != 2 * nbytes) & (lengths != 0)).any() or ((data >= 65) & (data <= 70)).any())
    lengths = pc.utf8_length(arr)
    odd = pc.and_(pc.not_equal(lengths, 2 * nbytes), pc.not_equal(lengths, 0))
    return not (pc.any(odd).as_py() or pc.any(pc.match_substring_regex(arr, "[A-F]")).as_py())


def frame_from_parts(parts: list[dict[str, Any]]) -> pd.DataFrame:
    """Concatenate parts (from one or several :class:`~.otlp.documents.SpanColumns`) into the span table, in order."""
    n = sum(p["n"] for p in parts)
    offsets = np.cumsum([0] + [p["n"] for p in parts])[:-1]
    data: dict[str, Any] = {}
    for col in ("trace_id", "span_id", "parent_id"):
        nbytes = 16 if col == "trace_id" else 8
        arr = _concat_strings([p[col] for p in parts])
        if isinstance(arr, np.ndarray):
            arr = pa.array([normalize_id(v, nbytes) for v in arr], type=pa.string())
        elif not _ids_clean(arr, nbytes):
            arr = pa.array([normalize_id(v, nbytes) for v in arr.to_pylist()], type=pa.string())
        data[col] = pd.array(arr, dtype="str")
    data["name"] = _str_column(_concat_strings([p["name"] for p in parts]))
    start = np.concatenate([p["start_ns"] for p in parts]) if parts else np.empty(0, dtype=np.int64)
    end = np.concatenate([p["end_ns"] for p in parts]) if parts else np.empty(0, dtype=np.int64)
    data["start_ns"] = start
    data["end_ns"] = end
    data["duration"] = (end - start) / 1e9
    data["status"] = np.concatenate([p["status"] for p in parts]) if parts else np.empty(0, dtype=np.int8)
    for col in ("status_message", "service", "links", "extra"):
        data[col] = _str_column(_concat_strings([p[col] for p in parts]))
    for col, kind in ATTR_COLUMNS.values():
        idx = np.concatenate([p[col][0] + off for p, off in zip(parts, offsets, strict=True)] or [np.empty(0, int)])
        if kind in ("int", "float"):
            vals = np.concatenate([p[col][1] for p in parts]) if len(idx) else np.empty(0)
            if kind == "int":  # float columns skip these passes
                nan = np.isnan(vals)
                if np.all(nan | (np.abs(vals) < INT64_LIMIT) & (vals == np.round(vals))):  # int64 each, or missing
                    # Int64 straight from the sparse values: a full float column converted after the fact
                    # touched several times the memory (page faults were most of a frame build: docs/performance.md)
                    ints = np.zeros(n, dtype=np.int64)
                    mask = np.ones(n, dtype=bool)
                    ints[idx] = np.where(nan, 0, vals).astype(np.int64)
                    mask[idx] = nan
                    data[col] = pd.arrays.IntegerArray(ints, mask)
                    continue
            arr = np.full(n, np.nan)  # a float column (an int one with a fraction or beyond int64 too)
            arr[idx] = vals
            data[col] = arr
        elif kind == "bool":
            values = np.zeros(n, dtype=bool)
            mask = np.ones(n, dtype=bool)
            if len(idx):
                values[idx] = np.concatenate([p[col][1] for p in parts])
                mask[idx] = False
            data[col] = pd.arrays.BooleanArray(values, mask)
        else:
            values = _concat_strings([p[col][1] for p in parts])
            if isinstance(values, pa.Array) and len(idx) and _INFER_STR:
                # scatter the sparse values into a full-length Arrow array (nulls elsewhere), no Python objects
                data[col] = _str_column(_scatter_strings(values, idx, n))
            else:
                obj = np.full(n, None, dtype=object)
                if len(idx):
                    obj[idx] = _objects(values)
                data[col] = obj
    return pd.DataFrame(data, copy=False)  # the arrays are fresh: no second copy of the whole table


def _scatter_strings(values: pa.Array, idx: np.ndarray, n: int) -> pa.Array:
    """A full-length string array with ``values`` at rows ``idx`` and nulls elsewhere.

    Rows in ascending order, each once, no null among the values (every part the decoders make, but for a key
    twice in a span): the values' bytes are already in row order, so only new offsets and a validity bitmap
    are made (a masked ``take`` copied every string; docs/performance.md). Otherwise the ``take``, where the
    last of a row's values wins."""
    if (
        pa.types.is_string(values.type)
        and values.null_count == 0
        and len(idx) == len(values)
        and (len(idx) < 2 or bool((np.diff(idx) > 0).all()))
    ):
        ends = np.frombuffer(values.buffers()[1], dtype=np.int32)[values.offset : values.offset + len(values) + 1]
        lengths = np.zeros(n, dtype=np.int32)
        lengths[idx] = np.diff(ends)
        offsets = np.empty(n + 1, dtype=np.int32)
        offsets[0] = ends[0]
        np.cumsum(lengths, out=offsets[1:])
        offsets[1:] += ends[0]
        valid = np.zeros(n, dtype=bool)
        valid[idx] = True
        bitmap = pa.py_buffer(np.packbits(valid, bitorder="little"))
        return pa.Array.from_buffers(
            pa.string(), n, [bitmap, pa.py_buffer(offsets), values.buffers()[2]], null_count=n - len(idx)
        )
    where = np.full(n, -1, dtype=np.int64)
    where[idx] = np.arange(len(idx))
    return values.take(pa.array(where, mask=where < 0))
