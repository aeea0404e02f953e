"""Who hangs under whom in a worker-step: its ids, the worker span's window, its requests, their turns, and the
parent of every other line's span. :func:`.batch.build` lays the spans out from these, in write order.

The rules: the worker spans its rollout lines, else the lines before the barrier wait (those after it would stretch
every worker to the end of the step, hiding the straggler), else all. A request id seen twice keeps its first place
and its last line. A request's turns are its turn lines (the first of each turn), else laid out end to end from its
``turn_timings``. Any other line hangs under its turn when its window fits the turn's (a laid-out turn always
fits), else under its request, else under the worker; after the barrier wait, and a barrier, under the gen phase.
Ids are hashes of where a span comes from (run, file, step, worker, role), so re-imports give identical spools;
a line's span id is its file's hash plus its line number (one hash per file, not one per span: an eighth of the
import once).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl import semconv as sc
from otel_verl.analysis.read.seed.rows import (
    ABORTED,
    BARRIER,
    REQUEST,
    TURN,
    WORKER,
    Column,
    StepRows,
    extra_of,
    request_id,
    turn_durations,
)

_MASK = (1 << 64) - 1
SLACK_NS = 1_000_000
"""A line's window may poke out of its turn by the timestamps' µs rounding; 1 ms is generous."""
SpanFields = tuple[str, str, str, str, int, int, dict[str, Any]]
"""One span: (trace id, span id, parent id or "", name, start ns, end ns, attributes; None values left out)."""


def stable_id(nbytes: int, *parts: object) -> str:
    """Deterministic hex id from its origin (file, line, role), so re-imports give identical spools."""
    return hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=nbytes).hexdigest()


def step_spans(run: str, step: int | None, lo: int, hi: int) -> list[SpanFields]:
    """A training step's step span and ``gen`` phase span around its workers."""
    trace = stable_id(16, run, step)
    step_id, gen_id = stable_id(8, run, step, "step"), gen_span_id(run, step)
    attrs = {sc.VERL_STEP: step}
    return [
        (trace, step_id, "", sc.SPAN_STEP, lo, hi, attrs),
        (trace, gen_id, step_id, sc.phase_span_name("gen"), lo, hi, {sc.VERL_PHASE_NAME: "gen", **attrs}),
    ]


def gen_span_id(run: str, step: int | None) -> str:
    """The id of a step's ``gen`` phase span, which its workers hang off."""
    return stable_id(8, run, step, "gen")


@dataclass
class Ids:
    """The worker-step's trace, its worker span's id, the id a span outside the worker hangs off (the gen phase's;
    the worker's own for a validation rollout) and each row's own span id."""

    trace: str
    base: int
    worker: np.uint64
    outer: np.uint64
    row: np.ndarray


def ids_of(r: StepRows) -> Ids:
    run, step, worker = r.run, r.step, r.worker
    trace = stable_id(16, run, step, "validate") if r.validate else stable_id(16, run, step)
    base = int(stable_id(8, run, r.rel, step, worker), 16)
    worker_hex = stable_id(8, run, step, worker, "validate" if r.validate else "worker")
    row = np.uint64(base) + (r.lineno.astype(np.uint64) << np.uint64(8))
    return Ids(trace, base, np.uint64(int(worker_hex, 16)), np.uint64(int(r.parent or worker_hex, 16)), row)


@dataclass
class Worker:
    """The worker span: the rows its window spans, its attributes; and where the barrier wait splits the rows."""

    window: np.ndarray
    extra: np.ndarray
    """Rows of a second rollout line of the same worker-step: generic spans."""
    barriers: np.ndarray
    post: np.ndarray
    """Rows after the barrier wait began (they hang off the gen phase)."""
    attrs: dict[str, Any]


def worker_of(r: StepRows, flag: dict[str, Any]) -> Worker:
    k, n = r.kinds, len(r.start)
    is_worker, barriers = k == WORKER, k == BARRIER
    worker_rows = np.flatnonzero(is_worker)
    body = ~is_worker & ~barriers
    post = body & (r.start >= r.start[barriers].min()) if barriers.any() else np.zeros(n, dtype=bool)
    window = next(m for m in (is_worker, body & ~post, ~post, np.ones(n, dtype=bool)) if m.any())
    rollout = r.obj(int(worker_rows[0])) if len(worker_rows) else None
    wextra = extra_of(rollout) if rollout is not None else {}
    attrs = {
        sc.VERL_WORKER_RANK: r.worker,
        sc.VERL_STEP: r.step,
        sc.VERL_WORKER_NUM_REQUESTS: wextra.get("total_requests", int(((k == REQUEST) | (k == ABORTED)).sum())),
        sc.VERL_WORKER_NUM_COMPLETED: wextra.get("completed_count"),
        sc.VERL_EVENT_ORIGIN: rollout["event"] if rollout is not None else None,
        sc.VERL_LEGACY_LINE: _raw(r, int(worker_rows[0])) if rollout is not None else None,
        **flag,
    }
    return Worker(window, worker_rows[1:], barriers, post, attrs)


@dataclass
class Requests:
    """The request lines (a span each) and the requests they make, one per id."""

    rows: np.ndarray
    attrs: list[dict[str, Any]]
    """Each request line's span attributes, in ``rows``' order."""
    timed: list[tuple[int, int, list[float]]]
    """Per request: (its span id, its line's row, its ``turn_timings``), in the order the ids first appear."""
    sids: np.ndarray
    of_row: np.ndarray
    """Each row's request (a position in ``timed``), -1 where none."""


def requests_of(r: StepRows, ids: Ids, flag: dict[str, Any]) -> Requests:
    k = r.kinds
    req_rows = np.flatnonzero((k == REQUEST) | (k == ABORTED))
    by_id: dict[str, tuple[int, int, list[float]]] = {}
    attrs = []
    aborted_rows = (k[req_rows] == ABORTED).tolist()
    for sid, aborted, row in zip(ids.row[req_rows].tolist(), aborted_rows, req_rows.tolist(), strict=True):
        d = r.obj(row)
        e = extra_of(d)
        rid = request_id(d) or f"{ids.base:016x}:{int(r.lineno[row])}"
        timings = turn_durations(e.get("turn_timings"))
        attrs.append(
            {
                sc.VERL_STEP: r.step,
                sc.VERL_WORKER_RANK: r.worker,
                sc.VERL_REQUEST_ID: rid,
                sc.VERL_REQUEST_STATUS: e.get("status") or ("aborted" if aborted else "completed"),
                sc.VERL_REQUEST_NUM_TURNS: e.get("turns", len(timings) if timings else None),
                sc.VERL_REWARD_SCORE: e.get("reward_score"),
                sc.VERL_REQUEST_RESPONSE_TOKENS: e.get("response_tokens", e.get("response_length")),
                sc.VERL_REQUEST_PROMPT_TOKENS: e.get("prompt_tokens"),
                sc.VERL_SAMPLE_INDEX: e.get("batch_data_id") if type(e.get("batch_data_id")) is int else None,
                sc.VERL_EVENT_ORIGIN: d["event"],
                sc.VERL_LEGACY_LINE: _raw(r, row),
                **flag,
            }
        )
        by_id[rid] = (sid, row, timings)
    sids = np.array([v[0] for v in by_id.values()], dtype=np.uint64)
    return Requests(req_rows, attrs, list(by_id.values()), sids, _positions(r.rid, list(by_id)))


@dataclass
class Turns:
    """The turns: from turn lines (``rows``), then laid out from ``turn_timings`` for the requests with none."""

    rows: np.ndarray
    request: np.ndarray
    """Laid-out turns from here on: their request, span id, window and turn index."""
    sid: np.ndarray
    start: np.ndarray
    end: np.ndarray
    index: np.ndarray


def turns_of(r: StepRows, ids: Ids, requests: Requests) -> Turns:
    req_of = requests.of_row
    cand = np.flatnonzero((r.kinds == TURN) & (req_of >= 0) & r.has_turn)
    rows = np.empty(0, dtype=np.int64)
    if len(cand):
        cand_keys = _keys(req_of[cand], r.turn[cand], np.unique(r.turn[cand]))
        rows = cand[np.sort(np.unique(cand_keys, return_index=True)[1])]
    with_lines = set(req_of[rows].tolist())
    t_req, t_sid, t_start, t_end, t_turn = [], [], [], [], []
    for pos, (req_sid, row, timings) in enumerate(requests.timed):
        if pos in with_lines:
            continue
        cur, lineno = int(r.start[row]), int(r.lineno[row])
        for i, td in enumerate(timings):
            t_end.append(cur + int(td * 1e9))
            t_sid.append((req_sid + 2 + i) & _MASK if i < 254 else int(stable_id(8, ids.base, lineno, "turn", i), 16))
            t_req.append(pos)
            t_start.append(cur)
            t_turn.append(i)
            cur = t_end[-1]
    return Turns(rows, _int(t_req), np.array(t_sid, dtype=np.uint64), _int(t_start), _int(t_end), _int(t_turn))


def event_parents(
    r: StepRows, rows: np.ndarray, ids: Ids, worker: Worker, requests: Requests, turns: Turns
) -> tuple[np.ndarray, np.ndarray]:
    """(parent span id, hangs under a request) of each of ``rows``: the worker's further rollout lines (first,
    under the worker) and every other line that is no request or turn of its own."""
    nx = len(worker.extra)
    req = np.where(worker.barriers[rows], -1, requests.of_row[rows])
    req[:nx] = -1
    found = req >= 0
    parents = np.where(worker.barriers[rows] | worker.post[rows], ids.outer, ids.worker)
    if len(requests.timed):
        parents = np.where(found, requests.sids[np.maximum(req, 0)], parents)
    turn_req = np.concatenate((requests.of_row[turns.rows], turns.request))
    if len(turn_req):
        space = np.unique(np.concatenate((r.turn[turns.rows], turns.index, r.event_turn[rows][found])))
        table_keys = _keys(turn_req, np.concatenate((r.turn[turns.rows], turns.index)), space)
        order = np.argsort(table_keys, kind="stable")
        table_keys = table_keys[order]
        t_sids = np.concatenate((ids.row[turns.rows], turns.sid))[order]
        lo = np.concatenate((r.start[turns.rows], turns.start))[order]
        hi = np.concatenate((r.end[turns.rows], turns.end))[order]
        exact = np.concatenate((np.ones(len(turns.rows), dtype=bool), np.zeros(len(turns.index), dtype=bool)))[order]
        wanted = _keys(np.maximum(req, 0), r.event_turn[rows], space)
        at = np.minimum(np.searchsorted(table_keys, wanted), len(table_keys) - 1)
        at = np.where(found & r.has_event_turn[rows] & (table_keys[at] == wanted), at, -1)
        start, end = r.start[rows], r.end[rows]
        fits = ~exact[at] | ((lo[at] - SLACK_NS <= start) & (end <= hi[at] + SLACK_NS))
        parents = np.where((at >= 0) & fits, t_sids[at], parents)
    return parents, found


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
