"""A worker-step's lines as rows: what the seed readers' front ends make (:mod:`.lines` from parsed lines,
:mod:`.arrow_spans` from Arrow's columns) and the span builder (:mod:`.batch`) takes.

Each row is a line, in file order, with the kind of span it makes (:func:`row_kinds`, decided by the worker-step's
other lines) and the fields the spans read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from otel_verl.analysis.read.seed import events as le

KINDS = ("other", "worker", "request", "aborted", "turn", "barrier", "engine", "tool", "reward", "preprocess")
KINDS += ("tool_parse",)
OTHER, WORKER, REQUEST, ABORTED, TURN, BARRIER, ENGINE, TOOL, REWARD, PREPROCESS, TOOL_PARSE = range(len(KINDS))

Column = list[Any] | pa.Array
"""A value per row: a list (the line reader's, any JSON type, None where absent) or an Arrow array (nulls)."""


@dataclass
class StepRows:
    """A worker-step's lines as rows, in file order: what :func:`.batch.build` needs of them."""

    run: str
    rel: str
    step: int | None
    worker: int | None
    validate: bool
    parent: str
    """The gen phase span's id ("" for a validation rollout: its workers are roots)."""
    kinds: np.ndarray
    """:data:`KINDS` index per row (:func:`row_kinds`)."""
    name_codes: np.ndarray
    """Each row's event name as a code into ``event_names`` (the names in the order they first appear)."""
    event_names: list[str]
    start: np.ndarray
    end: np.ndarray
    lineno: np.ndarray
    rid: Column
    """Request id per row (:func:`.spans.request_id`), null where none."""
    turn: np.ndarray
    """A turn line's own turn (``extra.turn``, :func:`.spans.turn_index`) as an int64 key (where ``has_turn``)."""
    has_turn: np.ndarray
    turn_value: Column
    """The same turn as written on the turn span (``turn`` is its key: equal values, equal keys)."""
    event_turn: np.ndarray
    """An event's turn, ``extra.turn`` else ``extra.turn_index``, cleaned, as a key in ``turn``'s key space."""
    has_event_turn: np.ndarray
    model: Column
    tool: Column
    """``extra.tool_name or extra.tool``."""
    pre_kind: Column
    """``extra.kind`` or the event's own preprocess kind (:data:`.events.PREPROCESS_KIND_OF`)."""
    output_tokens: Column
    """``extra.output_tokens``, else ``extra.generated_tokens`` where the first is absent."""
    input_tokens: Column
    obj: Callable[[int], dict[str, Any]]
    """Row → its line's whole JSON object (read for the worker's and the requests' rows only)."""
    raw: list[str | None] | None = None
    """Each row's original line where kept (``verl.legacy.line``)."""


def row_kinds(codes: np.ndarray, names: list[str]) -> np.ndarray:
    """The :data:`KINDS` index of each row, whose event name is ``names[codes[row]]``, where the worker-step's
    other lines decide.

    Why: ``async_generate_duration`` is the worker's whole rollout; with request lines beside it, it is the
    worker span (counting it as engine time would double the engine); alone (seed 000's worker-level logs) it
    is the only engine time there is. ``engine_async_generate_actual`` sits inside ``turn_engine_call`` and is
    left generic where both were written; turn lines without requests are generic too.
    """
    name_kinds = [_kind_index(e) for e in names]
    kinds = np.array(name_kinds, dtype=np.int8)[codes]
    has_req = REQUEST in name_kinds or ABORTED in name_kinds
    if has_req and le.ASYNC_GENERATE in names:
        rows = np.flatnonzero(codes == names.index(le.ASYNC_GENERATE))
        kinds[rows] = OTHER
        if le.WORKER_ROLLOUT not in names:
            kinds[rows[0]] = WORKER
    if le.ENGINE_ACTUAL in names and le.TURN_ENGINE in names:
        kinds[codes == names.index(le.ENGINE_ACTUAL)] = OTHER
    if not has_req and TURN in name_kinds:
        kinds[kinds == TURN] = OTHER
    return kinds


_KIND_INDEX: dict[str, int] = {}


def _kind_index(event: str) -> int:
    """:data:`KINDS` index of an event name, remembered (a run has a few dozen names)."""
    kind = _KIND_INDEX.get(event)
    if kind is None:
        if len(_KIND_INDEX) > 4096:
            _KIND_INDEX.clear()
        kind = _KIND_INDEX[event] = KINDS.index(le.kind_of(event))
    return kind
