"""The Arrow reader's front end of the one seed span builder: a file's columns (:mod:`.arrow`) →
:class:`.rows.StepRows`, whose batch goes into the span table as whole parts.

The columns are typed (Arrow took the file only where every field the spans read has one JSON type), so the
``extra`` fields are arrays with nulls. Where a field's value depends on a key being absent rather than null
(``e.get("turn", e.get("turn_index"))``), the rows Arrow cannot tell apart are read back from their own line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl.analysis.read.seed import events as le
from otel_verl.analysis.read.seed.arrow import SeedColumns
from otel_verl.analysis.read.seed.batch import build
from otel_verl.analysis.read.seed.columns import SeedSpanColumns
from otel_verl.analysis.read.seed.rows import BARRIER, ENGINE, StepRows, row_kinds
from otel_verl.analysis.read.seed.sinks import add_to_table, valid_mask
from otel_verl.analysis.read.seed.spans import extra_of, request_id, turn_index


def add_spans(c: SeedColumns, run: str, rel: str, parent: str, cols: SeedSpanColumns) -> None:
    """Add the spans of file ``rel``'s worker-step (its columns ``c``) to ``cols``."""
    add_to_table(build(arrow_rows(c, run, rel, parent)), cols)


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
