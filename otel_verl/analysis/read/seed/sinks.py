"""The two sinks of a :class:`.batch.SpanBatch`: one span at a time, or span-table parts.

:func:`emit_rows` hands each span to a ``SpanSink`` with its attributes in the order the seed importer
has always written them (so ``import-legacy``'s OTLP/JSON, :func:`~otel_verl.export.encoding.fields_json`,
stays byte for byte the same), the kept line (``verl.legacy.line``) included. :func:`add_to_table` adds the
batch to a :class:`.columns.SeedSpanColumns`: from Arrow's typed columns as whole parts (the worker and
request spans, whose attributes are dicts, one by one); a batch whose columns hold any JSON type, or kept
lines, goes through :func:`emit_rows` into ``add_span``, which converts each value as the OTLP round trip does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from otel_verl import semconv as sc
from otel_verl.analysis.read.seed.batch import FORM_EVENT, FORM_TIMED, FORM_TURN, SpanBatch
from otel_verl.analysis.read.seed.columns import SeedSpanColumns, constant_columns
from otel_verl.analysis.read.seed.rows import BARRIER, ENGINE, PREPROCESS, TOOL, Column
from otel_verl.analysis.read.seed.spans import LEGACY_SERVICE
from otel_verl.analysis.read.span_columns import ATTR_COLUMNS

_ORIGIN, _LINE, _STEP, _WORKER = sc.VERL_EVENT_ORIGIN, sc.VERL_LEGACY_LINE, sc.VERL_STEP, sc.VERL_WORKER_RANK
_OPERATION, _TEXT_COMPLETION = sc.GEN_AI_OPERATION_NAME, sc.GEN_AI_OP_TEXT_COMPLETION
_OUTPUT_TOKENS, _INPUT_TOKENS = sc.GEN_AI_USAGE_OUTPUT_TOKENS, sc.GEN_AI_USAGE_INPUT_TOKENS


def _values(col: Column | np.ndarray) -> list[Any]:
    return col if isinstance(col, list) else col.tolist() if isinstance(col, np.ndarray) else col.to_pylist()


def emit_rows(b: SpanBatch, sink: Callable[..., Any]) -> list[Any]:
    """Hand every span of ``b`` to ``sink`` (a :data:`.spans.SpanSink`, or
    :func:`~otel_verl.export.encoding.fields_json`), in order, attributes as dicts (None values included: sinks
    skip them); returns what ``sink`` returned for each."""
    r = b.rows
    trace, step, worker, raw = b.trace, r.step, r.worker, r.raw
    sids, parents = _hex_list(b.sid), _hex_list(b.parent)
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


def _hex_list(ids: np.ndarray) -> list[str]:
    """uint64 ids as 16-digit lower-case hex strings (``f"{x:016x}"``), cut from one hex dump."""
    text = ids.astype(">u8").tobytes().hex()
    return [text[i : i + 16] for i in range(0, len(text), 16)]


def valid_mask(arr: pa.Array) -> np.ndarray:
    """Where an Arrow array has a value (not null), as a numpy bool array."""
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _hex_ids(ids: np.ndarray) -> pa.Array:
    """uint64 span ids as 16-digit lower-case hex strings (``f"{x:016x}"``), in one buffer."""
    data = ids.astype(">u8").tobytes().hex().encode()
    offsets = np.arange(0, 16 * len(ids) + 1, 16, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), len(ids), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
