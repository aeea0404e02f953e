"""Raw JSON texts (the ``msgspec.Raw`` slices of a line) as Arrow binary arrays, read by Arrow and numpy kernels.

Why: a decoded string is one Python object per value, created, then read again to fill an array; a ``Raw`` is a
view of the line. Joining a line's raws into one buffer and reading strings, ints and patterns with array
kernels leaves one Python step per value (the join), and touches each value while the line is still in cache.

Exactness: a text is read here only when it is plain (a string without escapes, a decimal int); anything else
is decoded by orjson, value by value, or raises :class:`Irregular` so the line is read the general way
(:class:`~otel_verl.analysis.read.otlp.documents.SpanColumns`). msgspec has already checked the JSON syntax of every
raw (control characters, escapes) but not its UTF-8: every text becomes an Arrow string through a validating cast.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc


class Irregular(ValueError):
    """Something only the general decoder reads exactly, or whose error must name its line."""


def binary(raws: list[Any]) -> pa.Array:
    """One Arrow binary array of byte strings (or ``msgspec.Raw``): one join, no object per value."""
    data = b"".join(raws)
    offsets = np.zeros(len(raws) + 1, dtype=np.int32)
    np.cumsum(np.fromiter(map(len, raws), dtype=np.int32, count=len(raws)), out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), len(raws), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def to_strings(arr: pa.Array) -> pa.Array:
    """Binary to Arrow strings, checking UTF-8 (a line msgspec accepted may still hold invalid bytes)."""
    try:
        return arr.cast(pa.string())
    except pa.ArrowInvalid:
        raise Irregular("text that is not UTF-8") from None


def plain_strings(arr: pa.Array) -> np.ndarray:
    """Which raws are a JSON string without escapes: ``"`` + text with no ``"`` or backslash + ``"``."""
    quoted = pc.and_(pc.starts_with(arr, '"'), pc.ends_with(arr, '"'))
    plain = pc.and_(pc.equal(pc.count_substring(arr, '"'), 2), pc.equal(pc.count_substring(arr, "\\"), 0))
    return pc.and_(quoted, plain).to_numpy(zero_copy_only=False)


def replace_at(arr: pa.Array, rows: np.ndarray, values: list[Any]) -> pa.Array:
    """``arr`` with ``values`` (Arrow strings, None for null) at ``rows``."""
    if not len(rows):
        return arr
    where = np.full(len(arr), -1, dtype=np.int64)
    where[rows] = np.arange(len(rows))
    fixed = pa.array(values, type=pa.string()).take(pa.array(np.maximum(where, 0)))
    return pc.if_else(pa.array(where >= 0), fixed, arr)


def unquoted_plain(arr: pa.Array) -> pa.Array | None:
    """The texts of raws that are all plain JSON strings (``"`` + no quote or backslash + ``"``), or None.

    One numpy pass over the bytes: as many quotes as two per raw, none escaped, each raw's first and last byte
    a quote, so every quote is a delimiter and dropping them leaves the texts, end to end (a fifth of the Arrow
    kernels' time for an id column)."""
    n = len(arr)
    offsets, data = _buffers(arr)
    if not n or np.diff(offsets).min() < 2:
        return None
    quote = data == 34
    if np.count_nonzero(quote) != 2 * n or np.count_nonzero(data == 92):
        return None
    rel = offsets - offsets[0]
    if not (quote[rel[:-1]].all() and quote[rel[1:] - 1].all()):
        return None
    text_offsets = (rel - 2 * np.arange(n + 1, dtype=np.int32)).astype(np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(text_offsets), pa.py_buffer(data[~quote])])


def json_strings(arr: pa.Array, absent: str, null: Callable[[], Any]) -> pa.Array:
    """Each raw JSON string decoded to an Arrow string: ``absent`` where the member was missing (empty raw),
    ``null()`` where it was ``null`` (None for a null; it raises :class:`Irregular` when null is not read here);
    a value that is not a string is :class:`Irregular` (the general decoder keeps it as it is)."""
    texts = unquoted_plain(arr)
    if texts is not None:
        return to_strings(texts)
    plain = plain_strings(arr)
    out = to_strings(pc.binary_slice(arr, 1, -1))
    odd = np.flatnonzero(~plain)
    if not len(odd):
        return out
    values = []
    for raw in arr.take(pa.array(odd)).to_pylist():
        if raw == b"":
            values.append(absent)
        elif raw == b"null":
            values.append(null())
        else:
            value = orjson.loads(raw)
            if not isinstance(value, str):
                raise Irregular("a span field that is not a string")
            values.append(value)
    return replace_at(out, odd, values)


def _buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, bytes) of a string or binary array; ``bytes`` starts at ``offsets[0]``."""
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[arr.offset : arr.offset + len(arr) + 1]
    if data_buf is None or not len(arr):
        return offsets, np.empty(0, np.uint8)
    return offsets, np.frombuffer(data_buf, dtype=np.uint8)[offsets[0] : offsets[-1]]


def decimal_mask(texts: pa.Array) -> np.ndarray:
    """Which texts are a plain decimal integer (``-?[0-9]+``), the form Python's ``int()`` and Arrow's cast
    read alike (Arrow's cast also reads ``0x10``, Python's ``int()`` also ``' 5'``, ``+5`` and ``1_0``)."""
    offsets, data = _buffers(texts)
    lengths = np.diff(offsets)
    digit = (data >= 48) & (data <= 57)
    bad = np.flatnonzero(~digit)
    ok = lengths > 0
    if texts.null_count:
        ok &= texts.is_valid().to_numpy(zero_copy_only=False)
    if len(bad):
        at = np.searchsorted(offsets[1:] - offsets[0], bad, side="right")  # the text each byte is in
        leading_minus = (data[bad] == 45) & (bad == offsets[at] - offsets[0]) & (lengths[at] >= 2)
        ok[at[~leading_minus]] = False
    return ok


def decimal_ints(texts: pa.Array) -> np.ndarray:
    """int64 of texts that must all be plain decimal integers within int64, else :class:`Irregular`."""
    if not decimal_mask(texts).all():
        raise Irregular("an int that is not a plain decimal")
    try:
        return pc.cast(texts.cast(pa.string()), pa.int64()).to_numpy(zero_copy_only=False)
    except pa.ArrowInvalid:
        raise Irregular("an int beyond int64") from None
