"""The one seed span builder: a worker-step's lines, as rows, → all its spans at once, as a batch.

Design (issue 42: one way to build seed spans). A front end reads a worker-step's lines into
:class:`.rows.StepRows` (a row per line: times, kind, request id, turn, the ``extra`` fields event spans
read): :mod:`.log_file` from parsed lines, any JSON type a damaged file holds kept as it is (Python lists), and
:mod:`.arrow` from Arrow's typed columns (the usual file). :func:`build` then makes every span of the
worker-step at once, as arrays: ids and parents (:mod:`.tree` decides who hangs under whom), names, windows,
which attributes each span has. The spans are in the order they are written: the worker, any further rollout line
(a generic span), the requests, the turns from turn lines, the turns laid out from ``turn_timings``, then every
other line's span. The worker's and the requests' attributes come from their lines' whole objects (a few lines a
file) as dicts; the rest are the rows' columns under masks. Two sinks take a batch (:mod:`.sinks`): one span
at a time (OTLP/JSON for ``import-legacy``, the kept line included) and span-table parts (``analyze``).

Damage rules (kept from the line-by-line builder): a turn that is a bool or no integer is no turn (the event
hangs off its request); request ids are text; ``e.get("turn", e.get("turn_index"))`` tells an absent key
from a null one; values of odd types pass to the sinks unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from otel_verl import semconv as sc
from otel_verl.analysis.read.seed.rows import (
    ABORTED,
    BARRIER,
    ENGINE,
    OTHER,
    PREPROCESS,
    REQUEST,
    REWARD,
    TOOL,
    TOOL_PARSE,
    WORKER,
    Column,
    StepRows,
)
from otel_verl.analysis.read.seed.tree import event_parents, ids_of, requests_of, turns_of, worker_of

FIXED_NAMES = {BARRIER: sc.SPAN_BARRIER, REWARD: sc.SPAN_REWARD, PREPROCESS: sc.SPAN_PREPROCESS}
FIXED_NAMES[TOOL_PARSE] = sc.SPAN_TOOL_PARSE
FORM_WORKER, FORM_REQUEST, FORM_TURN, FORM_TIMED, FORM_EVENT = range(5)
"""What a span of a batch is, which decides its attributes and their order: the worker, a request, a turn from
its turn line, a turn from ``turn_timings``, any other line (a barrier included)."""


@dataclass
class SpanBatch:
    """A worker-step's spans in write order: span i is ``form[i]`` of source row ``row[i]`` (-1: a laid-out turn)."""

    rows: StepRows
    trace: str
    worker_parent: str
    sid: np.ndarray
    parent: np.ndarray
    name: np.ndarray
    names: list[str]
    start: np.ndarray
    end: np.ndarray
    row: np.ndarray
    form: np.ndarray
    kind: np.ndarray
    """The row's kind for :data:`FORM_EVENT` spans (a second rollout line: ``OTHER``), else -1."""
    outer: np.ndarray
    """Event spans with no request: they carry step and worker."""
    timed_turn: np.ndarray
    """The turn index of :data:`FORM_TIMED` spans."""
    attrs: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Span position → attributes, for the worker and request spans (in write order, None values included)."""


def build(r: StepRows) -> SpanBatch:
    """Every span of the worker-step ``r``, in write order (parents: :mod:`.tree`)."""
    flag = {sc.VERL_VALIDATE: True} if r.validate else {}
    ids = ids_of(r)
    worker = worker_of(r, flag)
    requests = requests_of(r, ids, flag)
    turns = turns_of(r, ids, requests)
    rest = (r.kinds != WORKER) & (r.kinds != REQUEST) & (r.kinds != ABORTED)
    rest[turns.rows] = False
    rows = np.concatenate((worker.extra, np.flatnonzero(rest)))  # every event span's line
    parents, found = event_parents(r, rows, ids, worker, requests, turns)
    kinds = r.kinds[rows].copy()
    kinds[: len(worker.extra)] = OTHER
    names = _Names(r.event_names)
    name = _event_names(r, rows, kinds, names)

    nx, nr, nt, n_timed = len(worker.extra), len(requests.rows), len(turns.rows), len(turns.index)
    ne = len(rows) - nx
    events = rows[nx:]
    head = np.concatenate((worker.extra, requests.rows, turns.rows))
    u64 = np.uint64
    first = 1 + nx
    return SpanBatch(
        rows=r,
        trace=ids.trace,
        worker_parent=r.parent,
        sid=np.concatenate(([ids.worker], ids.row[head], turns.sid, ids.row[events])).astype(u64),
        parent=np.concatenate(
            (
                np.zeros(1, u64),
                parents[:nx],
                np.full(nr, ids.worker, u64),
                requests.sids[requests.of_row[turns.rows]],
                requests.sids[turns.request] if n_timed else np.zeros(0, u64),
                parents[nx:],
            )
        ).astype(u64),
        name=np.concatenate(
            (
                _int([names.code(sc.SPAN_WORKER)]),
                name[:nx],
                np.full(nr, names.code(sc.SPAN_REQUEST), np.int64),
                np.full(nt + n_timed, names.code(sc.SPAN_TURN), np.int64),
                name[nx:],
            )
        ),
        names=names.names,
        start=np.concatenate((_int([int(r.start[worker.window].min())]), r.start[head], turns.start, r.start[events])),
        end=np.concatenate((_int([int(r.end[worker.window].max())]), r.end[head], turns.end, r.end[events])),
        row=np.concatenate((_int([-1]), head, np.full(n_timed, -1, np.int64), events)).astype(np.int64),
        form=np.concatenate(
            (
                [FORM_WORKER],
                np.full(nx, FORM_EVENT),
                np.full(nr, FORM_REQUEST),
                np.full(nt, FORM_TURN),
                np.full(n_timed, FORM_TIMED),
                np.full(ne, FORM_EVENT),
            )
        ).astype(np.int8),
        kind=np.concatenate(([-1], kinds[:nx], np.full(nr + nt + n_timed, -1), kinds[nx:])).astype(np.int8),
        outer=np.concatenate(([False], ~found[:nx], np.zeros(nr + nt + n_timed, dtype=bool), ~found[nx:])),
        timed_turn=np.concatenate((np.zeros(1 + nx + nr + nt, np.int64), turns.index, np.zeros(ne, np.int64))),
        attrs={0: worker.attrs} | {first + i: a for i, a in enumerate(requests.attrs)},
    )


def _event_names(r: StepRows, rows: np.ndarray, kinds: np.ndarray, names: _Names) -> np.ndarray:
    """Each event span's name code: its line's event name, a fixed one for some kinds, the engine's and the tool's
    from the model and the tool (``text_completion <model>``, ``execute_tool <tool>``)."""
    name = r.name_codes[rows].astype(np.int64)
    for kind, fixed in FIXED_NAMES.items():
        name[kinds == kind] = names.code(fixed)
    for kind, col, name_of in ((ENGINE, r.model, sc.generate_span_name), (TOOL, r.tool, sc.tool_span_name)):
        at_kind = np.flatnonzero(kinds == kind)
        if len(at_kind):
            name[at_kind] = names.codes(col, rows[at_kind], name_of)
    return name


def _int(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


class _Names:
    """Span names as codes into a short list: a run has a few dozen names over hundreds of thousands of spans."""

    def __init__(self, first: list[str]) -> None:
        self.names: list[str] = list(first)
        self.index: dict[str, int] = {name: i for i, name in enumerate(first)}

    def code(self, name: str) -> int:
        if name not in self.index:
            self.index[name] = len(self.names)
            self.names.append(name)
        return self.index[name]

    def codes(self, values: Column, rows: np.ndarray, name_of: Callable[[Any], str]) -> np.ndarray:
        """Code of ``name_of(value)`` for the values at ``rows``: once per distinct value of an Arrow column,
        once per row of a list (its values may be of any JSON type)."""
        if isinstance(values, list):
            return np.array([self.code(name_of(values[i])) for i in rows.tolist()], dtype=np.int64)
        enc = values.take(pa.array(rows)).dictionary_encode()
        distinct = enc.dictionary.to_pylist()
        table = np.array([self.code(name_of(v)) for v in [*distinct, None]], dtype=np.int64)
        return table[enc.indices.fill_null(len(distinct)).to_numpy()]
