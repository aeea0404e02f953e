"""Rows of span-table parts (:meth:`~.otlp.documents.SpanColumns.take_parts`): which step and trace each row has, and
a subset.

Why on parts and not on the DataFrame: a step reader routes freshly parsed spans (to this step, a later one,
or the spans waiting for their trace's step) before any table is built, and parts pickle as plain buffers
when they are spilled to disk or cross a process boundary.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from otel_verl.analysis.read.span_columns import ATTR_COLUMNS, INT64_LIMIT
from otel_verl.analysis.read.span_frame import _concat_strings, _ids_clean, normalize_id

Part = dict[str, Any]

_ROW_COLUMNS = ("trace_id", "span_id", "parent_id", "name", "status_message", "service", "links", "extra")
_NUMBER_COLUMNS = ("start_ns", "end_ns", "status")


def raw_steps(part: Part) -> np.ndarray:
    """Each row's own ``verl.step`` (before the tree is resolved) as float64, NaN where it has none.

    A value that is not a whole number within int64 counts as none: the span table would not read it as a
    step either (:func:`otel_verl.analysis.read.span_frame.frame_from_parts`)."""
    out = np.full(part["n"], np.nan)
    idx, vals = part["step"]
    if len(idx):
        vals = np.asarray(vals, dtype=float)
        ok = np.isfinite(vals) & (vals == np.round(vals)) & (np.abs(vals) < INT64_LIMIT)
        out[idx[ok]] = vals[ok]
    return out


def trace_ids(part: Part) -> pa.Array:
    """Each row's trace id as lower-case hex Arrow strings (what the span table holds after normalising)."""
    arr = part["trace_id"]
    if isinstance(arr, pa.Array) and (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        if _ids_clean(arr, 16):
            return arr
        values = arr.to_pylist()
    else:
        values = list(arr)
    return pa.array([normalize_id(v, 16) for v in values], type=pa.string())


def select_rows(part: Part, rows: np.ndarray) -> Part:
    """The part made of ``rows`` (ascending positions), every column and sparse attribute kept aligned."""
    rows = np.asarray(rows, dtype=np.int64)
    if len(rows) == part["n"]:
        return part
    out: Part = {"n": len(rows)}
    taker = pa.array(rows)
    for col in _ROW_COLUMNS:
        arr = part[col]
        out[col] = arr.take(taker) if isinstance(arr, pa.Array) else arr[rows]
    for col in _NUMBER_COLUMNS:
        out[col] = part[col][rows]
    new_pos = np.full(part["n"], -1, dtype=np.int64)
    new_pos[rows] = np.arange(len(rows))
    for col, _kind in ATTR_COLUMNS.values():
        idx, vals = part[col]
        if not len(idx):
            out[col] = (idx, vals)
            continue
        moved = new_pos[idx]
        keep = moved >= 0
        if isinstance(vals, pa.Array):
            kept_vals = vals.filter(pa.array(keep))
        else:
            kept_vals = np.asarray(vals)[keep]
        out[col] = (moved[keep], kept_vals)
    return out


def split_rows(part: Part, mask: np.ndarray) -> tuple[Part | None, Part | None]:
    """(rows where ``mask``, the rest); None for an empty side, the part itself when one side has every row."""
    if mask.all():
        return part, None
    if not mask.any():
        return None, part
    return select_rows(part, np.flatnonzero(mask)), select_rows(part, np.flatnonzero(~mask))


def merge_parts(parts: list[Part], limit: int) -> list[Part]:
    """Consecutive parts joined while the joined one has at most ``limit`` rows (the same rows, in order).

    Why: the seed reader makes up to four parts a file (:mod:`otel_verl.analysis.read.seed.sinks`);
    every part costs each later stage a pass of its own."""
    out: list[Part] = []
    run: list[Part] = []
    for part in [*parts, None]:
        if part is None or (run and sum(p["n"] for p in run) + part["n"] > limit):
            if run:
                out.append(_concat(run))
            run = []
        if part is not None:
            run.append(part)
    return out


def _concat(parts: list[Part]) -> Part:
    if len(parts) == 1:
        return parts[0]
    out: Part = {"n": sum(p["n"] for p in parts)}
    for col in _ROW_COLUMNS:
        out[col] = _concat_strings([p[col] for p in parts])
    for col in _NUMBER_COLUMNS:
        out[col] = np.concatenate([p[col] for p in parts])
    offsets = np.cumsum([0] + [p["n"] for p in parts[:-1]])
    for col, kind in ATTR_COLUMNS.values():
        idx = np.concatenate([p[col][0] + off for p, off in zip(parts, offsets, strict=True)])
        values = [p[col][1] for p in parts]
        out[col] = (idx, _concat_strings(values) if kind in ("str", "strlist") else np.concatenate(values))
    return out
