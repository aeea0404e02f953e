"""The line reader's front end of the one seed span builder: a worker-step's lines → :class:`.seed_batch.StepRows`.

Every file the Arrow reader refuses comes here (damaged, unusual, or with its lines kept for ``import-legacy``
and ``export-legacy``): the ``extra`` values the spans carry stay as the line has them, of any JSON type
(Python lists), so the sinks write them as they always have. A turn beyond int64 (damage) (or within 4096 of
its bottom) gets a key of its own from -2⁶³ up, one per value, so equal turns still meet.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from otel_verl.analysis.read.seed import seed_events as le
from otel_verl.analysis.read.seed.seed_batch import ENGINE, PREPROCESS, TOOL, TURN, StepRows, build, row_kinds
from otel_verl.analysis.read.seed.seed_columns import SeedSpanColumns
from otel_verl.analysis.read.seed.seed_read import Line
from otel_verl.analysis.read.seed.seed_sinks import add_to_table, emit_rows
from otel_verl.analysis.read.seed.seed_spans import turn_index
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
    out: list[str] = []
    emit_rows(batch, lambda *span: out.append(fields_json(*span)))
    return out


def line_rows(lines: list[Line], run: str, rel: str, key: tuple[bool, int | None, int | None], parent: str) -> StepRows:
    """A worker-step's lines (one group of :func:`.seed_spans.group_lines`) as rows, applying the damage rules
    of :mod:`.seed_batch`; each field is read only on the rows whose kind uses it."""
    events = [x.d["event"] for x in lines]  # a str: the reader checks it
    event = pa.array(events, pa.string())
    kinds, codes, names = row_kinds(event)
    n = len(lines)
    rid: list[str | None] = [None] * n
    turn: list[int | None] = [None] * n
    event_turn: list[int | None] = [None] * n
    model, tool, pre, out, inp = ([None] * n for _ in range(5))
    for i, (x, k) in enumerate(zip(lines, kinds.tolist(), strict=True)):
        d = x.d
        e = d.get("extra")
        if e.__class__ is not dict:
            e = _NO_EXTRA
        r = e.get("request_id", d.get("request_id"))
        if r is not None:
            rid[i] = r if r.__class__ is str else str(r)
            t = e.get("turn", e.get("turn_index"))
            event_turn[i] = t if t is None or t.__class__ is int else turn_index(t)
            if k == TURN:
                turn[i] = turn_index(e.get("turn"))
        if k == ENGINE:
            model[i] = e.get("model")
            out[i] = e.get("output_tokens", e.get("generated_tokens"))
            inp[i] = e.get("input_tokens")
        elif k == TOOL:
            tool[i] = e.get("tool_name") or e.get("tool")
        elif k == PREPROCESS:
            pre[i] = e.get("kind") or le.PREPROCESS_KIND_OF.get(events[i])
    beyond: dict[int, int] = {}
    turn_keys, has_turn = _turn_keys(turn, beyond)
    event_keys, has_event_turn = _turn_keys(event_turn, beyond)
    val, step, worker = key
    return StepRows(
        run=run,
        rel=rel,
        step=step,
        worker=worker,
        validate=val,
        parent=parent,
        event=event,
        kinds=kinds,
        name_codes=codes,
        event_names=names,
        start=np.array([x.start for x in lines], dtype=np.int64),
        end=np.array([x.end for x in lines], dtype=np.int64),
        lineno=np.array([x.lineno for x in lines], dtype=np.int64),
        rid=pa.array(rid, pa.string()),
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
        raw=[x.raw for x in lines],
    )


def _turn_keys(values: list[int | None], beyond: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Turns as int64 keys and where there is one; a turn beyond int64 keyed from -2⁶³ up, one key per value."""
    keys = np.zeros(len(values), dtype=np.int64)
    has = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        if v is None:
            continue
        has[i] = True
        keys[i] = v if -_INT64 + 4096 <= v < _INT64 else beyond.setdefault(v, -_INT64 + len(beyond))
    return keys, has
