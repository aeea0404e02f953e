"""The line reader's front end of the one seed span builder: a worker-step's lines → :class:`.rows.StepRows`.

Every file the Arrow reader refuses comes here (damaged, unusual, or with its lines kept for ``import-legacy``
and ``export-legacy``): the ``extra`` values the spans carry stay as the line has them, of any JSON type
(Python lists), so the sinks write them as they always have. A turn beyond int64 (damage), or within 4096 of
its bottom, gets a key of its own from -2⁶³ up, one per value, so equal turns still meet.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from otel_verl.analysis.read.seed import events as le
from otel_verl.analysis.read.seed.batch import build
from otel_verl.analysis.read.seed.columns import SeedSpanColumns
from otel_verl.analysis.read.seed.log_file import Line
from otel_verl.analysis.read.seed.rows import ENGINE, PREPROCESS, TOOL, TURN, StepRows, row_kinds
from otel_verl.analysis.read.seed.sinks import add_to_table, emit_rows
from otel_verl.analysis.read.seed.spans import turn_index
from otel_verl.export.encoding import fields_json

_NO_EXTRA: dict[str, Any] = {}
_INT64 = 1 << 63


def worker_step_spans(
    lines: list[Line], run: str, rel: str, key: tuple[bool, int | None, int | None], parent: str,
    cols: SeedSpanColumns | None = None,
) -> list[str]:  # fmt: skip
    """The spans of one (validation?, step, worker) group ``key`` of file ``rel``'s lines: into ``cols`` (an
    empty list back), else as OTLP/JSON span objects (:func:`~otel_verl.export.encoding.fields_json`)."""
    batch = build(line_rows(lines, run, rel, key, parent))
    if cols is not None:
        add_to_table(batch, cols)
        return []
    return emit_rows(batch, fields_json)


def line_rows(lines: list[Line], run: str, rel: str, key: tuple[bool, int | None, int | None], parent: str) -> StepRows:
    """A worker-step's lines (one group of :func:`.spans.group_lines`) as rows, applying the damage rules
    of :mod:`.batch`; each field is read only on the rows whose kind uses it."""
    ds = [x.d for x in lines]
    events = [d["event"] for d in ds]  # a str: the reader checks it
    index: dict[str, int] = {}
    codes = np.array([index.setdefault(e, len(index)) for e in events], dtype=np.int64)
    names = list(index)
    kinds = row_kinds(codes, names)
    n = len(lines)
    # comprehensions, not one loop over rows: about a third of the time
    es = [e if (e := d.get("extra")).__class__ is dict else _NO_EXTRA for d in ds]
    rid = [
        r if (r := e.get("request_id", d.get("request_id"))) is None or r.__class__ is str else str(r)
        for d, e in zip(ds, es, strict=True)
    ]
    event_turn = [
        None if r is None else t if (t := e.get("turn", e.get("turn_index"))) is None or t.__class__ is int
        else turn_index(t)
        for r, e in zip(rid, es, strict=True)
    ]  # fmt: skip
    turn: list[int | None] = [None] * n
    for i in np.flatnonzero(kinds == TURN).tolist():
        if rid[i] is not None:
            turn[i] = turn_index(es[i].get("turn"))
    model, tool, pre, out, inp = ([None] * n for _ in range(5))
    for i in np.flatnonzero(kinds == ENGINE).tolist():
        e = es[i]
        model[i] = e.get("model")
        out[i] = e.get("output_tokens", e.get("generated_tokens"))
        inp[i] = e.get("input_tokens")
    for i in np.flatnonzero(kinds == TOOL).tolist():
        tool[i] = es[i].get("tool_name") or es[i].get("tool")
    for i in np.flatnonzero(kinds == PREPROCESS).tolist():
        pre[i] = es[i].get("kind") or le.PREPROCESS_KIND_OF.get(events[i])
    beyond: dict[int, int] = {}
    turn_keys, has_turn = _turn_keys(turn, beyond)
    event_keys, has_event_turn = _turn_keys(event_turn, beyond)
    val, step, worker = key
    times = np.array([(x.start, x.end, x.lineno) for x in lines], dtype=np.int64).reshape(-1, 3)
    raw: list[str | None] | None = [x.raw for x in lines]
    if lines[0].raw is None and all(line is None for line in raw):  # type: ignore[union-attr]
        raw = None
    return StepRows(
        run=run,
        rel=rel,
        step=step,
        worker=worker,
        validate=val,
        parent=parent,
        kinds=kinds,
        name_codes=codes,
        event_names=names,
        start=times[:, 0].copy(),
        end=times[:, 1].copy(),
        lineno=times[:, 2].copy(),
        rid=rid,
        turn=turn_keys,
        has_turn=has_turn,
        turn_value=turn,
        event_turn=event_keys,
        has_event_turn=has_event_turn,
        model=model,
        tool=tool,
        pre_kind=pre,
        output_tokens=out,
        input_tokens=inp,
        obj=lambda row: lines[row].d,
        raw=raw,
    )


def _turn_keys(values: list[int | None], beyond: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Turns as int64 keys and where there is one; a turn beyond int64 keyed from -2⁶³ up, one key per value."""
    if values.count(None) == len(values):
        return np.zeros(len(values), dtype=np.int64), np.zeros(len(values), dtype=bool)
    has = np.array([v is not None for v in values], dtype=bool)
    try:
        keys = np.array([0 if v is None else v for v in values], dtype=np.int64)
        if not len(keys) or keys.min() >= -_INT64 + 4096:
            return keys, has
    except OverflowError:
        keys = np.zeros(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        if v is not None:
            keys[i] = v if -_INT64 + 4096 <= v < _INT64 else beyond.setdefault(v, -_INT64 + len(beyond))
    return keys, has
