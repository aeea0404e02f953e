"""The Arrow reader: one seed log file with Arrow's JSON reader → columns → a worker-step's :class:`.rows.StepRows`,
or None: then :mod:`.log_file` reads it line by line.

Why: the line-by-line reader builds a dict, a datetime and a :class:`~.log_file.Line` per line, and the OTLP
path a dict of attributes per span: most of the CPU of ``analyze`` on seed logs (docs/performance.md). Arrow parses
the fields the spans use into typed columns (so the ``extra`` fields are arrays with nulls), which :func:`arrow_rows`
hands to the span builder (:mod:`.batch`). Where a field's value depends on a key being absent rather than null
(``e.get("turn", e.get("turn_index"))``), the rows Arrow cannot tell apart are read back from their own line.

Only the usual file qualifies, so that the answer is the line-by-line reader's to the byte: UTF-8 throughout,
each line one JSON object starting at its first byte (no blank line), every field the spans read of one JSON
type (Arrow refuses a file where a field changes type), naive ISO timestamps with ``T`` (what the seed's
``datetime.now().isoformat()`` writes), finite durations inside the timestamps' range, ``step`` and ``workid``
present on every line (JSON cannot tell an explicit null from a missing key in Arrow's columns, and the
two mean different things there), and one (validation?, step, worker) group. Anything else, bad lines
included, goes to the line-by-line reader, which reads odd files and names bad lines.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from otel_verl.analysis.read.seed import events as le
from otel_verl.analysis.read.seed import log_file
from otel_verl.analysis.read.seed.rows import (
    BARRIER,
    ENGINE,
    StepRows,
    extra_of,
    request_id,
    row_kinds,
    turn_index,
    valid_mask,
)
from otel_verl.analysis.read.span_columns import INT64_LIMIT

EXTRA_FIELDS: dict[str, pa.DataType] = {
    "request_id": pa.string(),
    "turn": pa.int64(),
    "turn_index": pa.int64(),
    "model": pa.string(),
    "output_tokens": pa.int64(),
    "generated_tokens": pa.int64(),
    "input_tokens": pa.int64(),
    "tool_name": pa.string(),
    "tool": pa.string(),
    "kind": pa.string(),
}
"""The fields of a line's ``extra`` the event and turn spans read (:class:`.rows.StepRows`);
request and worker lines are read whole, one by one (:meth:`SeedColumns.line`)."""
SCHEMA = pa.schema(
    [
        ("timestamp", pa.string()),
        ("event", pa.string()),
        ("duration_sec", pa.float64()),
        ("workid", pa.int64()),
        ("step", pa.int64()),
        ("validate", pa.bool_()),
        ("request_id", pa.string()),
        ("extra", pa.struct(list(EXTRA_FIELDS.items()))),
    ]
)
_PARSE = pj.ParseOptions(explicit_schema=SCHEMA, unexpected_field_behavior="ignore")
_ISO = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{6})?$"
"""Python's ``isoformat()`` of a naive datetime; Arrow's cast rejects impossible dates and times itself."""
_BLOCK = 64 << 20


@dataclass
class SeedColumns:
    """A file's lines as columns (row i is line i + 1), with its one (validation?, step, worker) group."""

    path: Path
    data: bytes
    line_starts: np.ndarray
    line_ends: np.ndarray
    event: pa.Array
    start: np.ndarray
    end: np.ndarray
    step: int | None
    worker: int | None
    validate: bool
    request_id: pa.Array
    """The top-level ``request_id`` (older seed lines), used where ``extra`` has none."""
    extra: dict[str, pa.Array]
    _escapes: list[int] | None = None

    @property
    def n(self) -> int:
        return len(self.start)

    def mentions(self, key: str) -> np.ndarray:
        """Per row: whether its line may hold the key ``key`` (its quoted name, or a ``\\u`` escape that could
        spell it); the rows without can be told apart from those with an explicit null without parsing."""
        if self._escapes is None:
            self._escapes = _find_all(self.data, b"\\u")
        hits = _find_all(self.data, f'"{key}"'.encode()) + self._escapes
        out = np.zeros(self.n, dtype=bool)
        out[np.searchsorted(self.line_starts, np.asarray(hits, dtype=np.int64), side="right") - 1] = True
        return out

    def line(self, row: int) -> dict[str, Any]:
        """Row ``row``'s whole JSON object, as the line-by-line reader has it."""
        return log_file._loads(self.data[self.line_starts[row] : self.line_ends[row]])


def _find_all(data: bytes, needle: bytes) -> list[int]:
    """Every offset of ``needle`` in ``data`` (``bytes.find``: a regex alternation was far slower,
    docs/performance.md)."""
    out: list[int] = []
    at = data.find(needle)
    while at >= 0:
        out.append(at)
        at = data.find(needle, at + 1)
    return out


def read_columns(path: Path) -> SeedColumns | None:
    """``path``'s columns, or None when the file is not the usual one (see the module's docstring)."""
    data = path.read_bytes()
    try:
        data.decode()  # Arrow leaves the bytes of fields it ignores unchecked
    except UnicodeDecodeError:
        return None
    raw = np.frombuffer(data, dtype=np.uint8)
    breaks = np.flatnonzero(raw == 10)
    ends = breaks if data.endswith(b"\n") else np.append(breaks, len(data))
    starts = np.concatenate(([0], breaks + 1))[: len(ends)]
    if not len(ends) or (ends <= starts).any() or (raw[starts] != ord("{")).any():
        return None
    try:
        table = pj.read_json(
            pa.py_buffer(data),
            read_options=pj.ReadOptions(use_threads=False, block_size=min(len(data) + 1, _BLOCK)),
            parse_options=_PARSE,
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeDecodeError):
        return None
    if table.num_rows != len(ends):  # a line of two objects
        return None
    cols = {name: table.column(name).combine_chunks() for name in SCHEMA.names}
    times = _times(cols["timestamp"], cols["duration_sec"])
    group = _group(path, cols)
    if times is None or group is None or cols["event"].null_count:
        return None
    extra = cols["extra"]
    fields = {name: extra.field(name) for name in EXTRA_FIELDS}
    if extra.null_count:  # a null ``extra`` has null fields (Arrow keeps a field's own values under it)
        fields = {name: pc.if_else(extra.is_valid(), arr, None) for name, arr in fields.items()}
    return SeedColumns(path, data, starts, ends, cols["event"], *times, *group, cols["request_id"], fields)


def _times(timestamp: pa.Array, duration: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    """(start, end) in ns as :func:`.log_file._fast` computes them, or None for anything it would not take."""
    if timestamp.null_count or not pc.all(pc.match_substring_regex(timestamp, _ISO)).as_py():
        return None
    try:
        end = timestamp.cast(pa.timestamp("us")).cast(pa.int64()).to_numpy() * 1000
    except (pa.ArrowInvalid, OverflowError):
        return None
    dur = duration.fill_null(0.0).to_numpy(zero_copy_only=False)
    if not np.isfinite(dur).all() or (dur < 0).any() or (dur * 1e9 > end).any():
        return None
    start = end - (dur * 1e9).astype(np.int64)  # int(float(dur) * 1e9): truncated toward zero
    if (start < 0).any() or (start > end).any() or (end >= INT64_LIMIT).any():
        return None
    return start, end


def _group(path: Path, cols: dict[str, pa.Array]) -> tuple[int | None, int | None, bool] | None:
    """The file's one (step, worker, validation?) or None: several, or a null where a default would apply."""
    in_val_dir = path.parent.name.startswith(log_file.VALIDATION_PREFIX)
    out: list[Any] = []
    for col, default in (("step", log_file.number_in(path.parent.name)), ("workid", log_file.number_in(path.stem))):
        arr = cols[col]
        if arr.null_count and (default is not None or arr.null_count != len(arr)):
            return None
        if arr.null_count:
            out.append(None)
            continue
        lo, hi = pc.min_max(arr).values()
        if lo != hi:
            return None
        out.append(lo.as_py())
    flags = cols["validate"]
    is_true = pc.fill_null(pc.equal(flags, True), False)
    if not in_val_dir and pc.any(is_true).as_py() and not pc.all(is_true).as_py():
        return None
    return out[0], out[1], in_val_dir or bool(len(flags) and pc.all(is_true).as_py())


def arrow_rows(c: SeedColumns, run: str, rel: str, parent: str) -> StepRows:
    """The file's rows for :func:`.batch.build`, from its columns."""
    enc = c.event.dictionary_encode()
    names: list[str] = enc.dictionary.to_pylist()
    codes = enc.indices.to_numpy()
    kinds = row_kinds(codes, names)
    rid = _request_ids(c)
    turn_col = c.extra["turn"]
    turn = turn_col.fill_null(0).to_numpy()
    event_turn, has_event_turn = _either(c, "turn", "turn_index", valid_mask(rid) & (kinds != BARRIER), turn_index)
    tokens, has_tokens = _either(c, "output_tokens", "generated_tokens", kinds == ENGINE, lambda v: v)
    ex = c.extra
    by_event = pa.array([le.PREPROCESS_KIND_OF.get(e) for e in names], pa.string()).take(pa.array(codes))
    return StepRows(
        run=run,
        rel=rel,
        step=c.step,
        worker=c.worker,
        validate=c.validate,
        parent=parent,
        kinds=kinds,
        name_codes=codes,
        event_names=names,
        start=c.start,
        end=c.end,
        lineno=np.arange(1, c.n + 1, dtype=np.int64),
        rid=rid,
        turn=turn,
        has_turn=valid_mask(turn_col),
        turn_value=turn,
        event_turn=event_turn,
        has_event_turn=has_event_turn,
        model=ex["model"],
        tool=pc.if_else(_filled(ex["tool_name"]), ex["tool_name"], ex["tool"]),
        pre_kind=pc.if_else(_filled(ex["kind"]), ex["kind"], by_event),
        output_tokens=pa.array(tokens, pa.int64(), mask=~has_tokens),
        input_tokens=ex["input_tokens"],
        obj=c.line,
    )


def _filled(arr: pa.Array) -> pa.Array:
    """Where a string is truthy in Python: neither null nor empty (``e.get("tool_name") or e.get("tool")``)."""
    return pc.fill_null(pc.not_equal(arr, ""), False)


def _request_ids(c: SeedColumns) -> pa.Array:
    """Each row's request id: ``extra.request_id``, else the top-level one where ``extra`` has no such key."""
    rid = c.extra["request_id"]
    unsure = np.flatnonzero(~valid_mask(rid) & valid_mask(c.request_id))
    if not len(unsure):
        return rid
    values = rid.to_pylist()
    for row in unsure:
        values[row] = request_id(c.line(int(row)))
    return pa.array(values, pa.string())


def _either(
    c: SeedColumns, key: str, alt: str, wanted: np.ndarray, clean: Callable[[Any], Any]
) -> tuple[np.ndarray, np.ndarray]:
    """``e.get(key, e.get(alt))`` for every row (int values, and where there is one) where ``wanted``. Where ``key``
    is null and ``alt`` is not, Arrow cannot tell a null ``key`` (no value) from a missing one (``alt``'s value):
    those rows are read back from their lines."""
    first, second = c.extra[key], c.extra[alt]
    has_first, has_second = valid_mask(first), valid_mask(second)
    values = first.fill_null(0).to_numpy().copy()
    present = has_first.copy()
    unsure = wanted & ~has_first & has_second
    if unsure.any():  # where the line never names ``key``, it is missing: ``alt``'s value, no parse needed
        absent = unsure & ~c.mentions(key)
        values[absent], present[absent] = second.fill_null(0).to_numpy()[absent], True
        unsure &= ~absent
    for i in np.flatnonzero(unsure):
        extra = extra_of(c.line(int(i)))
        value = clean(extra[key] if key in extra else extra.get(alt))
        if value is not None:
            values[i], present[i] = value, True
    return values, present
