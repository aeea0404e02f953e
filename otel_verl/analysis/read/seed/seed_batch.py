"""The one seed span builder: a worker-step's lines, as rows, → all its spans at once, as a batch.

Design (issue 42: one way to build seed spans). A front end reads a worker-step's lines into
:class:`StepRows` (a row per line: times, kind, request id, turn, the ``extra`` fields event spans read):
:mod:`.seed_lines` from parsed lines, any JSON type a damaged file holds kept as it is (Python lists), and
:mod:`.seed_arrow_spans` from Arrow's typed columns (the usual file). :func:`build` then decides every span
of the worker-step in one place, as arrays: ids, parents, names, windows, which attributes each span has.
The spans are in the order they are written: the worker, any further rollout line (a generic span), the
requests, the turns from turn lines, the turns laid out from ``turn_timings``, then every other line's span.
The worker's and the requests' attributes come from their lines' whole objects (a few lines a file) as
dicts; the rest are the rows' columns under masks. Two sinks take a batch (:mod:`.seed_sinks`): one span at
a time (OTLP/JSON for ``import-legacy``, the kept line included) and span-table parts (``analyze``).

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
import pyarrow.compute as pc

from otel_verl import semconv as sc
from otel_verl.analysis.read.seed import seed_events as le
from otel_verl.analysis.read.seed.seed_spans import SLACK_NS, extra_of, request_id, stable_id, turn_durations

KINDS = ("other", "worker", "request", "aborted", "turn", "barrier", "engine", "tool", "reward", "preprocess")
KINDS += ("tool_parse",)
OTHER, WORKER, REQUEST, ABORTED, TURN, BARRIER, ENGINE, TOOL, REWARD, PREPROCESS, TOOL_PARSE = range(len(KINDS))
FIXED_NAMES = {BARRIER: sc.SPAN_BARRIER, REWARD: sc.SPAN_REWARD, PREPROCESS: sc.SPAN_PREPROCESS}
FIXED_NAMES[TOOL_PARSE] = sc.SPAN_TOOL_PARSE
FORM_WORKER, FORM_REQUEST, FORM_TURN, FORM_TIMED, FORM_EVENT = range(5)
"""What a span of a batch is, which decides its attributes and their order: the worker, a request, a turn from
its turn line, a turn from ``turn_timings``, any other line (a barrier included)."""

_MASK = (1 << 64) - 1
Column = list[Any] | pa.Array
"""A value per row: a list (the line reader's, any JSON type, None where absent) or an Arrow array (nulls)."""


@dataclass
class StepRows:
    """A worker-step's lines as rows, in file order: what :func:`build` needs of them."""

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
    """Request id per row (:func:`.seed_spans.request_id`), null where none."""
    turn: np.ndarray
    """A turn line's own turn (``extra.turn``, :func:`.seed_spans.turn_index`) as an int64 key (where ``has_turn``)."""
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
    """``extra.kind`` or the event's own preprocess kind (:data:`.seed_events.PREPROCESS_KIND_OF`)."""
    output_tokens: Column
    """``extra.output_tokens``, else ``extra.generated_tokens`` where the first is absent."""
    input_tokens: Column
    obj: Callable[[int], dict[str, Any]]
    """Row → its line's whole JSON object (read for the worker's and the requests' rows only)."""
    raw: list[str | None] | None = None
    """Each row's original line where kept (``verl.legacy.line``)."""


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


def build(r: StepRows) -> SpanBatch:
    """Every span of the worker-step ``r`` (see the module's docstring for the order and the parents)."""
    k, n = r.kinds, len(r.start)
    run, step, worker = r.run, r.step, r.worker
    trace = stable_id(16, run, step, "validate") if r.validate else stable_id(16, run, step)
    base = int(stable_id(8, run, r.rel, step, worker), 16)
    worker_hex = stable_id(8, run, step, worker, "validate" if r.validate else "worker")
    worker_id, outer_id = np.uint64(int(worker_hex, 16)), np.uint64(int(r.parent or worker_hex, 16))
    sids = np.uint64(base) + (r.lineno.astype(np.uint64) << np.uint64(8))
    flag = {sc.VERL_VALIDATE: True} if r.validate else {}

    # the worker: its window over its rollout lines, else the lines before the barrier wait (those after it would
    # stretch every worker to the end of the step, hiding the straggler), else all
    is_worker, barriers = k == WORKER, k == BARRIER
    worker_rows = np.flatnonzero(is_worker)
    body = ~is_worker & ~barriers
    post = body & (r.start >= r.start[barriers].min()) if barriers.any() else np.zeros(n, dtype=bool)
    window = next(m for m in (is_worker, body & ~post, ~post, np.ones(n, dtype=bool)) if m.any())
    is_req = (k == REQUEST) | (k == ABORTED)
    rollout = r.obj(int(worker_rows[0])) if len(worker_rows) else None
    wextra = extra_of(rollout) if rollout is not None else {}
    attrs: dict[int, dict[str, Any]] = {
        0: {
            sc.VERL_WORKER_RANK: worker,
            sc.VERL_STEP: step,
            sc.VERL_WORKER_NUM_REQUESTS: wextra.get("total_requests", int(is_req.sum())),
            sc.VERL_WORKER_NUM_COMPLETED: wextra.get("completed_count"),
            sc.VERL_EVENT_ORIGIN: rollout["event"] if rollout is not None else None,
            sc.VERL_LEGACY_LINE: _raw(r, int(worker_rows[0])) if rollout is not None else None,
            **flag,
        }
    }
    extra_workers = worker_rows[1:]  # a second rollout line of the same worker-step: a generic span

    # requests: a request id seen twice keeps its first place and its last line (a dict's update)
    req_rows = np.flatnonzero(is_req)
    requests: dict[str, tuple[int, int, list[float]]] = {}
    first = 1 + len(extra_workers)
    req_sid_list, aborted = sids[req_rows].tolist(), (k[req_rows] == ABORTED).tolist()
    for pos, row in enumerate(req_rows.tolist(), start=first):
        d = r.obj(row)
        e = extra_of(d)
        rid = request_id(d) or f"{base:016x}:{int(r.lineno[row])}"
        timings = turn_durations(e.get("turn_timings"))
        attrs[pos] = {
            sc.VERL_STEP: step,
            sc.VERL_WORKER_RANK: worker,
            sc.VERL_REQUEST_ID: rid,
            sc.VERL_REQUEST_STATUS: e.get("status") or ("aborted" if aborted[pos - first] else "completed"),
            sc.VERL_REQUEST_NUM_TURNS: e.get("turns", len(timings) if timings else None),
            sc.VERL_REWARD_SCORE: e.get("reward_score"),
            sc.VERL_REQUEST_RESPONSE_TOKENS: e.get("response_tokens", e.get("response_length")),
            sc.VERL_REQUEST_PROMPT_TOKENS: e.get("prompt_tokens"),
            sc.VERL_SAMPLE_INDEX: e.get("batch_data_id") if type(e.get("batch_data_id")) is int else None,
            sc.VERL_EVENT_ORIGIN: d["event"],
            sc.VERL_LEGACY_LINE: _raw(r, row),
            **flag,
        }
        requests[rid] = (req_sid_list[pos - first], row, timings)
    keys = list(requests)
    req_sids = np.array([v[0] for v in requests.values()], dtype=np.uint64)
    req_of = _positions(r.rid, keys)

    # turns from the seed's turn lines: the first line of each (request, turn)
    cand = np.flatnonzero((k == TURN) & (req_of >= 0) & r.has_turn)
    used_rows = np.empty(0, dtype=np.int64)
    if len(cand):
        cand_keys = _keys(req_of[cand], r.turn[cand], np.unique(r.turn[cand]))
        used_rows = cand[np.sort(np.unique(cand_keys, return_index=True)[1])]
    with_lines = set(req_of[used_rows].tolist())

    # turns laid out end to end from turn_timings, for the requests with no turn lines of their own
    t_req, t_sid, t_start, t_end, t_turn = [], [], [], [], []
    for pos, (req_sid, row, timings) in enumerate(requests.values()):
        if pos in with_lines:
            continue
        cur, lineno = int(r.start[row]), int(r.lineno[row])
        for i, td in enumerate(timings):
            t_end.append(cur + int(td * 1e9))
            t_sid.append((req_sid + 2 + i) & _MASK if i < 254 else int(stable_id(8, base, lineno, "turn", i), 16))
            t_req.append(pos)
            t_start.append(cur)
            t_turn.append(i)
            cur = t_end[-1]
    timed = _int(t_turn)
    n_timed = len(t_turn)

    # every other line: under its turn (when its window fits the turn's), else its request, else the worker
    # (after the barrier wait: the gen phase); a barrier under the gen phase
    rest = ~is_req & ~is_worker
    rest[used_rows] = False
    rows = np.concatenate((extra_workers, np.flatnonzero(rest)))
    ek = k[rows].copy()
    ek[: len(extra_workers)] = OTHER
    req = np.where(barriers[rows], -1, req_of[rows])
    req[: len(extra_workers)] = -1
    found = req >= 0
    parents = np.where(barriers[rows] | post[rows], outer_id, worker_id)
    if len(keys):
        parents = np.where(found, req_sids[np.maximum(req, 0)], parents)
    turn_req = np.concatenate((req_of[used_rows], _int(t_req)))
    if len(turn_req):
        space = np.unique(np.concatenate((r.turn[used_rows], timed, r.event_turn[rows][found])))
        table_keys = _keys(turn_req, np.concatenate((r.turn[used_rows], timed)), space)
        order = np.argsort(table_keys, kind="stable")
        table_keys = table_keys[order]
        t_sids = np.concatenate((sids[used_rows], np.array(t_sid, dtype=np.uint64)))[order]
        lo = np.concatenate((r.start[used_rows], _int(t_start)))[order]
        hi = np.concatenate((r.end[used_rows], _int(t_end)))[order]
        exact = np.concatenate((np.ones(len(used_rows), dtype=bool), np.zeros(n_timed, dtype=bool)))[order]
        wanted = _keys(np.maximum(req, 0), r.event_turn[rows], space)
        at = np.minimum(np.searchsorted(table_keys, wanted), len(table_keys) - 1)
        at = np.where(found & r.has_event_turn[rows] & (table_keys[at] == wanted), at, -1)
        start, end = r.start[rows], r.end[rows]
        fits = ~exact[at] | ((lo[at] - SLACK_NS <= start) & (end <= hi[at] + SLACK_NS))
        parents = np.where((at >= 0) & fits, t_sids[at], parents)

    names = _Names(r.event_names)
    name = r.name_codes[rows].astype(np.int64)
    for kind, fixed in FIXED_NAMES.items():
        name[ek == kind] = names.code(fixed)
    for kind, col, name_of in ((ENGINE, r.model, sc.generate_span_name), (TOOL, r.tool, sc.tool_span_name)):
        at_kind = np.flatnonzero(ek == kind)
        if len(at_kind):
            name[at_kind] = names.codes(col, rows[at_kind], name_of)

    # the batch, in write order
    nx, nr, nt, ne = len(extra_workers), len(req_rows), len(used_rows), len(rows) - len(extra_workers)
    events = rows[nx:]
    head = np.concatenate((extra_workers, req_rows, used_rows))
    u64 = np.uint64
    return SpanBatch(
        rows=r,
        trace=trace,
        worker_parent=r.parent,
        sid=np.concatenate(([worker_id], sids[head], np.array(t_sid, dtype=u64), sids[events])).astype(u64),
        parent=np.concatenate(
            (
                np.zeros(1, u64),
                parents[:nx],
                np.full(nr, worker_id, u64),
                req_sids[req_of[used_rows]],
                req_sids[_int(t_req)] if n_timed else np.zeros(0, u64),
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
        start=np.concatenate((_int([int(r.start[window].min())]), r.start[head], _int(t_start), r.start[events])),
        end=np.concatenate((_int([int(r.end[window].max())]), r.end[head], _int(t_end), r.end[events])),
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
        kind=np.concatenate(([-1], ek[:nx], np.full(nr + nt + n_timed, -1), ek[nx:])).astype(np.int8),
        outer=np.concatenate(([False], ~found[:nx], np.zeros(nr + nt + n_timed, dtype=bool), ~found[nx:])),
        timed_turn=np.concatenate((np.zeros(1 + nx + nr + nt, np.int64), timed, np.zeros(ne, np.int64))),
        attrs=attrs,
    )


def _raw(r: StepRows, row: int) -> str | None:
    return r.raw[row] if r.raw is not None else None


def _int(values: list[int]) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def _keys(request: np.ndarray, turn: np.ndarray, space: np.ndarray) -> np.ndarray:
    """One int64 per (request position, turn): the turn as its place in ``space`` (every turn that can match)."""
    return (request.astype(np.int64) << 32) | np.searchsorted(space, turn).astype(np.int64)


def _positions(values: Column, keys: list[str]) -> np.ndarray:
    """Position of each value in ``keys`` (the requests), -1 where absent or null."""
    if not keys:
        return np.full(len(values), -1, dtype=np.int64)
    if isinstance(values, list):
        position = {key: i for i, key in enumerate(keys)}
        return np.array([position.get(v, -1) for v in values], dtype=np.int64)
    return pc.index_in(values, value_set=pa.array(keys, pa.string())).fill_null(-1).to_numpy().astype(np.int64)


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
