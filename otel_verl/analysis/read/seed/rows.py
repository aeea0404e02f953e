"""A worker-step's lines as rows: what the seed readers make (:mod:`.log_file` from parsed lines, :mod:`.arrow`
from Arrow's columns) and the span builder (:mod:`.batch`) takes; and the damage rules for a line's fields that
both apply.

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

LEGACY_SERVICE = "otel-verl-legacy"
"""service.name of imported spans: ``export-legacy`` writes their stored lines back verbatim."""
_MAX_TURN_SECONDS = 1e9
"""Above this (or negative, NaN, infinite) a turn timing is damage, not a duration: it is left out."""

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
    """Request id per row (:func:`request_id`), null where none."""
    turn: np.ndarray
    """A turn line's own turn (``extra.turn``, :func:`turn_index`) as an int64 key (where ``has_turn``)."""
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


def extra_of(d: dict[str, Any]) -> dict[str, Any]:
    """A line's ``extra`` object, empty where it has none (or something else there)."""
    e = d.get("extra")
    return e if isinstance(e, dict) else {}


def request_id(d: dict[str, Any]) -> str | None:
    """A line's request id (``extra.request_id``, else the top-level one where ``extra`` has no such key), as text."""
    rid = extra_of(d).get("request_id", d.get("request_id"))
    return None if rid is None else str(rid)


def turn_index(value: Any) -> int | None:
    """An event's ``turn``/``turn_index`` as an int (None when damaged: the event then hangs off its request)."""
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return None


def turn_durations(timings: Any) -> list[float]:
    """``turn_timings`` as a list of seconds; accepts numbers or dicts with a duration-like key."""
    out: list[float] = []
    if not isinstance(timings, (list, tuple)):  # a damaged line: no per-turn timings, not a crash
        return out
    for t in timings:
        if isinstance(t, dict):
            t = next((t[k] for k in ("total_duration", "duration_sec", "duration", "total", "time") if k in t), None)
        if isinstance(t, (int, float)) and not isinstance(t, bool) and 0.0 <= t <= _MAX_TURN_SECONDS:
            out.append(float(t))
    return out


def valid_mask(arr: pa.Array) -> np.ndarray:
    """Where an Arrow array has a value (not null), as a numpy bool array."""
    return arr.is_valid().to_numpy(zero_copy_only=False)
