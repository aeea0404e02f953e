"""Attribute values of a batch of spans read all at once from their raw JSON (:func:`read_values`), and what is
built from them: a contract column's sparse values (:func:`column_values`) and the ``extra`` text
(:func:`extra_json`).

Why in bulk: a real-size step has ~1M attributes. The general decoder routes them one by one in Python
and turns its lists into arrays later (costs: docs/performance.md). Here the common values are recognised by
their exact text with Arrow kernels: ``{"stringValue":"<plain text>"}``, ``{"intValue":"<decimal>"}``,
``{"boolValue":true|false}``; every other value (a double, an array, whitespace, escapes, several members) is
decoded by orjson and read by the general decoder's own code (:func:`general_value`), once per distinct text.
So each value reads exactly as the general decoder reads it, whatever the member order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl.analysis.read.otlp.documents import attr_value
from otel_verl.analysis.read.otlp.raw_json import Irregular, decimal_mask, replace_at, to_strings

STR, INT, BOOL, OBJ = range(4)
"""How a value was read: plain string, decimal int, boolean, or a Python object from :func:`general_value`."""

_STRING, _INT, _END = '{"stringValue":"', '{"intValue":"', '"}'
_TRUE, _FALSE = b'{"boolValue":true}', b'{"boolValue":false}'


class Values:
    """The values of ``m`` attributes, read once per distinct text: ``codes`` (each attribute's distinct text),
    and per distinct text how it was read, its string, int, or Python object (booleans and odd values)."""

    __slots__ = ("codes", "ints", "kind", "objects", "strings")

    def __init__(
        self, codes: np.ndarray, kind: np.ndarray, strings: pa.Array, ints: np.ndarray, objects: dict[int, Any]
    ) -> None:
        self.codes = codes
        self.kind = kind
        self.strings = strings
        """The text of each string value ("" elsewhere)."""
        self.ints = ints
        """Each int value as int64 (0 elsewhere)."""
        self.objects = objects
        """Distinct code -> Python value of every boolean and odd value."""

    def python(self, code: int) -> Any:
        """The value of a distinct text as the general decoder holds it."""
        kind = self.kind[code]
        if kind == STR:
            return self.strings[code].as_py()
        if kind == INT:
            return int(self.ints[code])
        return self.objects[code]


def general_value(raw: bytes) -> Any:
    """One attribute's ``value`` text read as :meth:`~.documents.SpanColumns._add` reads it (string member first, then
    int, then the first member in the text's key order); :class:`Irregular` where that raises."""
    try:
        v = (orjson.loads(raw) if raw else None) or {}
        value = v.get("stringValue")
        if value is None:
            value = v.get("intValue")
            value = int(value) if value is not None else attr_value(v)
    except (ValueError, TypeError, AttributeError, KeyError, orjson.JSONDecodeError) as exc:
        raise Irregular(f"an attribute value the general decoder rejects ({exc})") from None
    return value


def read_values(raws: pa.Array) -> Values:
    """Read ``m`` raw ``AnyValue`` texts, each distinct text once (a step's values repeat: steps, ranks, request
    ids, names; the dictionary costs 0.1 µs a span and spares the kernels and Python below most values)."""
    enc = raws.dictionary_encode()
    texts = enc.dictionary
    k = len(texts)
    string = pc.and_(pc.starts_with(texts, _STRING), pc.ends_with(texts, _END))
    string = pc.and_(string, pc.greater_equal(pc.binary_length(texts), len(_STRING) + len(_END)))
    content = pc.binary_slice(texts, len(_STRING), -len(_END))
    plain = pc.and_(pc.equal(pc.count_substring(content, '"'), 0), pc.equal(pc.count_substring(content, "\\"), 0))
    is_str = pc.and_(string, plain).to_numpy(zero_copy_only=False)
    strings = to_strings(pc.if_else(pa.array(is_str), content, pa.scalar(b"", pa.binary())))
    kind = np.full(k, OBJ, dtype=np.int8)
    kind[is_str] = STR
    ints = np.zeros(k, dtype=np.int64)
    rest = np.flatnonzero(~is_str)
    if len(rest):
        tail = texts.take(pa.array(rest))
        is_int = pc.and_(pc.starts_with(tail, _INT), pc.ends_with(tail, _END))
        is_int = pc.and_(is_int, pc.greater_equal(pc.binary_length(tail), len(_INT) + len(_END)))
        at = rest[is_int.to_numpy(zero_copy_only=False)]
        digits = pc.binary_slice(texts.take(pa.array(at)), len(_INT), -len(_END))
        decimal = decimal_mask(digits)
        if decimal.any():
            try:
                parsed = pc.cast(digits.filter(pa.array(decimal)).cast(pa.string()), pa.int64())
                ints[at[decimal]] = parsed.to_numpy(zero_copy_only=False)
                kind[at[decimal]] = INT
            except pa.ArrowInvalid:  # beyond int64: Python ints, as the general decoder holds them
                pass
    objects: dict[int, Any] = {}
    odd = np.flatnonzero(kind == OBJ)
    for code, raw in zip(odd.tolist(), texts.take(pa.array(odd)).to_pylist(), strict=True):
        if raw in (_TRUE, _FALSE):
            objects[code] = raw == _TRUE
            kind[code] = BOOL
        else:
            objects[code] = general_value(raw)
    return Values(enc.indices.to_numpy(zero_copy_only=False), kind, strings, ints, objects)


def column_values(values: Values, pos: np.ndarray, kind: str) -> Any:
    """A contract column's sparse values from the attributes at ``pos``, as ``SpanColumns.flush`` makes them:
    converted once per distinct value."""
    codes = values.codes[pos]
    kinds = values.kind[codes]
    if kind in ("int", "float"):
        if not len(pos):
            return np.empty(0)
        if (kinds == INT).all():
            return values.ints[codes].astype(np.float64)
        return _per_distinct(values, codes, _number, np.float64)
    if kind == "bool":
        return _per_distinct(values, codes, bool, bool)
    if (kinds == STR).all():
        return values.strings.take(pa.array(codes))
    return pa.array(_per_distinct(values, codes, _strlist if kind == "strlist" else _text, object), type=pa.string())


def _per_distinct(values: Values, codes: np.ndarray, convert: Any, dtype: Any) -> np.ndarray:
    distinct, inverse = np.unique(codes, return_inverse=True)
    return np.array([convert(values.python(c)) for c in distinct.tolist()], dtype=dtype)[inverse]


def _number(v: Any) -> float:
    """``np.asarray(values, float)`` of the general decoder, value by value: None is NaN."""
    if v is not None and not isinstance(v, (int, float)):
        raise Irregular("a number attribute holding text or a list")  # numpy's reading of those differs
    return np.nan if v is None else float(v)


def _text(v: Any) -> str | None:
    return None if v is None else v if isinstance(v, str) else str(v)


def _strlist(v: Any) -> str | None:
    return _text(",".join(map(str, v)) if isinstance(v, list) else v)


def _value_json(values: Values, codes: np.ndarray) -> pa.Array:
    """JSON text of the distinct values ``codes``, as orjson writes them (plain strings need no escaping)."""
    kind = values.kind[codes]
    out = pc.binary_join_element_wise('"', values.strings.take(pa.array(codes)), '"', "")
    is_int = kind == INT
    if is_int.any():
        out = pc.if_else(pa.array(is_int), pc.cast(pa.array(values.ints[codes]), pa.string()), out)
    other = np.flatnonzero(kind >= BOOL)
    if len(other):
        try:
            texts = [orjson.dumps(values.objects[c]).decode() for c in codes[other].tolist()]
        except (TypeError, orjson.JSONEncodeError):
            raise Irregular("a value orjson cannot write") from None
        out = replace_at(out, other, texts)
    return out


def extra_json(
    values: Values, pos: np.ndarray, rows: np.ndarray, keys: list[str], codes: np.ndarray, n: int
) -> pa.Array:
    """The ``extra`` column of ``n`` spans: each span's non-contract attributes (at ``pos``, in order; span
    ``rows``; key ``codes`` into the distinct ``keys``) as one compact JSON object, ``""`` when it has none.

    The text of ``orjson.dumps(dict)`` in the general decoder, built as Arrow strings: ``"key":`` + the value's
    JSON for each distinct (key, value) pair (a step's extras repeat: provider, parser, preemptions), joined per
    span. A key twice in one span (a dict keeps its first place and last value) is :class:`Irregular`."""
    if not len(pos):
        return pa.repeat(pa.scalar("", pa.string()), n)
    if np.bincount(rows * len(keys) + codes, minlength=n * len(keys)).max() > 1:
        raise Irregular("a key twice in one span")
    pairs, which = np.unique(codes * len(values.kind) + values.codes[pos], return_inverse=True)
    key_of, value_of = np.divmod(pairs, len(values.kind))
    prefix = pa.array([orjson.dumps(keys[k]).decode() + ":" for k in key_of.tolist()], type=pa.string())
    fragments = pc.binary_join_element_wise(prefix, _value_json(values, value_of), "").take(pa.array(which))
    counts = np.bincount(rows, minlength=n)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), fragments), ",")
    wrapped = pc.binary_join_element_wise("{", joined, "}", "")
    return pc.if_else(pa.array(counts > 0), wrapped, pa.scalar("", pa.string()))
