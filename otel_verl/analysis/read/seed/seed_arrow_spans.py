"""One seed worker-step's spans from its columns (:mod:`.seed_arrow`), the same spans :class:`.seed_spans.WorkerStep`
makes from its lines, in the same order, into a :class:`.seed_columns.SeedSpanColumns`.

The few lines that carry totals (the worker's rollout line, each request's completion line, the turns laid out
from a request's ``turn_timings``) go through ``WorkerStep`` itself, one by one; turn lines and event lines, the
bulk, are made as arrays and handed over as whole parts (``add_part``). Where a field's value depends on a key
being absent rather than null (``e.get("turn", e.get("turn_index"))``), the rows Arrow cannot tell apart are
read back from their own line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl import semconv as sc
from otel_verl.analysis.read.seed import seed_events as le
from otel_verl.analysis.read.seed import seed_spans
from otel_verl.analysis.read.seed.seed_arrow import SeedColumns
from otel_verl.analysis.read.seed.seed_columns import SeedSpanColumns, constant_columns
from otel_verl.analysis.read.seed.seed_read import Line
from otel_verl.analysis.read.span_columns import ATTR_COLUMNS

KINDS = ("other", "worker", "request", "aborted", "turn", "barrier", "engine", "tool", "reward", "preprocess")
KINDS += ("tool_parse",)
OTHER, WORKER, REQUEST, ABORTED, TURN, BARRIER, ENGINE, TOOL, REWARD, PREPROCESS, TOOL_PARSE = range(len(KINDS))
_FIXED_NAMES = {
    BARRIER: sc.SPAN_BARRIER,
    REWARD: sc.SPAN_REWARD,
    PREPROCESS: sc.SPAN_PREPROCESS,
    TOOL_PARSE: sc.SPAN_TOOL_PARSE,
}
_KEY_RANGE = 1 << 31
"""Turn indices are packed with their request's position into one int64 key; beyond ±2³¹ the file falls back."""


def row_kinds(event: pa.Array) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(kind per row, event name per row as a code, the names): :func:`.seed_spans.kinds_in_context` on arrays."""
    enc = event.dictionary_encode()
    names: list[str] = enc.dictionary.to_pylist()
    codes = enc.indices.to_numpy()
    name_kind = np.array([KINDS.index(le.kind_of(e)) for e in names], dtype=np.int8)
    kinds = name_kind[codes]
    has_req = bool(np.isin(name_kind, (REQUEST, ABORTED)).any())
    if has_req and le.ASYNC_GENERATE in names:
        rows = np.flatnonzero(codes == names.index(le.ASYNC_GENERATE))
        kinds[rows] = OTHER
        if le.WORKER_ROLLOUT not in names:
            kinds[rows[0]] = WORKER
    if le.ENGINE_ACTUAL in names and le.TURN_ENGINE in names:
        kinds[codes == names.index(le.ENGINE_ACTUAL)] = OTHER
    if not has_req:
        kinds[kinds == TURN] = OTHER
    return kinds, codes, names


def add_spans(c: SeedColumns, run: str, rel: str, parent: str, cols: SeedSpanColumns) -> bool:
    """Add the worker-step's spans to ``cols``; False (nothing added) when the file needs the line-by-line path."""
    kinds, name_codes, names = row_kinds(c.event)
    worker_rows = np.flatnonzero(kinds == WORKER)
    if len(worker_rows) > 1 or _beyond_keys(c.extra["turn"]) or _beyond_keys(c.extra["turn_index"]):
        return False
    ws = seed_spans.WorkerStep(run, c.step, c.worker, c.validate, rel, parent, cols.add_span)
    body = (kinds != BARRIER) & (kinds != WORKER)
    barriers = kinds == BARRIER
    post = body & (c.start >= c.start[barriers].min()) if barriers.any() else np.zeros(c.n, dtype=bool)
    window = next(m for m in (kinds == WORKER, body & ~post, ~post, np.ones(c.n, dtype=bool)) if m.any())
    is_req = (kinds == REQUEST) | (kinds == ABORTED)
    rollout = _line(c, int(worker_rows[0])) if len(worker_rows) else None
    ws.worker_span(rollout, int(c.start[window].min()), int(c.end[window].max()), int(is_req.sum()))

    req_rows = np.flatnonzero(is_req)
    requests = ws.requests([_line(c, int(r)) for r in req_rows], [KINDS[k] for k in kinds[req_rows]])
    keys = list(requests)
    req_sids = np.array([int(requests[k][0], 16) for k in keys], dtype=np.uint64)
    req_of = _positions(_request_ids(c), keys)
    sids = np.uint64(ws.base) + (np.arange(1, c.n + 1, dtype=np.uint64) << np.uint64(8))

    # turn spans from the seed's turn lines: the first line of each (request, turn index)
    turn_col = c.extra["turn"]
    turn = turn_col.fill_null(0).to_numpy()
    cand = np.flatnonzero((kinds == TURN) & (req_of >= 0) & _valid(turn_col))
    cand_keys = _keys(req_of[cand], turn[cand])
    first = np.sort(np.unique(cand_keys, return_index=True)[1])
    used, used_keys = cand[first], cand_keys[first]
    attrs = {"turn_index": (turn[used], None), "event_origin": (c.event.take(pa.array(used)), None)}
    _add(cols, _part(ws.trace, sids[used], req_sids[req_of[used]], _constant(sc.SPAN_TURN, len(used)), c, used, attrs))

    # turns laid out from turn_timings, for requests with no turn lines: one by one, as few as requests
    timed = ws.timing_turns(requests, {keys[i] for i in np.unique(req_of[used])})
    position = {k: i for i, k in enumerate(keys)}
    t_keys = _keys(
        np.array([position[r] for r, _ in timed], dtype=np.int64), np.array([i for _, i in timed], dtype=np.int64)
    )
    turns = _TurnTable(
        np.concatenate((used_keys, t_keys)),
        np.concatenate((sids[used], np.array([int(v[0], 16) for v in timed.values()], dtype=np.uint64))),
        np.concatenate((c.start[used], np.array([v[1] for v in timed.values()], dtype=np.int64))),
        np.concatenate((c.end[used], np.array([v[2] for v in timed.values()], dtype=np.int64))),
        np.concatenate((np.ones(len(used), dtype=bool), np.zeros(len(timed), dtype=bool))),
    )
    rest = ~is_req & (kinds != WORKER)
    rest[used] = False
    rows = np.flatnonzero(rest)
    parents = _event_parents(c, ws, rows, kinds, req_of, req_sids, post, turns)
    _add(cols, _events(c, ws, rows, kinds[rows], req_of[rows] >= 0, parents, sids, name_codes, names))
    return True


def _add(cols: SeedSpanColumns, part: dict[str, Any]) -> None:
    if part["n"]:
        cols.add_part(part)


class _TurnTable:
    """Turn spans by (request position, turn index) key: span id, window, and whether the window is exact."""

    def __init__(self, keys: np.ndarray, sids: np.ndarray, start: np.ndarray, end: np.ndarray, exact: np.ndarray):
        order = np.argsort(keys, kind="stable")
        self.keys, self.sids, self.start, self.end, self.exact = (a[order] for a in (keys, sids, start, end, exact))

    def find(self, keys: np.ndarray, valid: np.ndarray) -> np.ndarray:
        """Position of each key in the (non-empty) table, -1 where absent or not ``valid``."""
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(valid & (self.keys[pos] == keys), pos, -1)


def _event_parents(
    c: SeedColumns,
    ws: seed_spans.WorkerStep,
    rows: np.ndarray,
    kinds: np.ndarray,
    req_of: np.ndarray,
    req_sids: np.ndarray,
    post: np.ndarray,
    turns: _TurnTable,
) -> np.ndarray:
    """Each event's parent span id: its turn (when its window fits the turn's), else its request, else the
    worker (or, after the barrier, the step's gen phase); a barrier's is the gen phase."""
    k = kinds[rows]
    start, end = c.start[rows], c.end[rows]
    req = np.where(k == BARRIER, -1, req_of[rows])
    found = req >= 0
    turn_i, has_turn = _either(c, rows, "turn", "turn_index", found, seed_spans._turn_index)
    outer = np.uint64(int(ws.parent or ws.worker_id, 16))
    parents = np.where((k == BARRIER) | post[rows], outer, np.uint64(int(ws.worker_id, 16)))
    if len(req_sids):
        parents = np.where(found, req_sids[np.maximum(req, 0)], parents)
    if len(turns.keys):
        at = turns.find(_keys(np.maximum(req, 0), turn_i), found & has_turn)
        slack = seed_spans._SLACK_NS
        fits = ~turns.exact[at] | ((turns.start[at] - slack <= start) & (end <= turns.end[at] + slack))
        parents = np.where((at >= 0) & fits, turns.sids[at], parents)
    return parents


def _events(
    c: SeedColumns,
    ws: seed_spans.WorkerStep,
    rows: np.ndarray,
    k: np.ndarray,
    found: np.ndarray,
    parents: np.ndarray,
    sids: np.ndarray,
    name_codes: np.ndarray,
    event_names: list[str],
) -> dict[str, Any]:
    """The event spans of ``rows``: names and attributes as :meth:`.seed_spans.WorkerStep._event` gives them."""
    found = found & (k != BARRIER)
    engine, tool, pre = k == ENGINE, k == TOOL, k == PREPROCESS
    take = pa.array(rows)
    ex = {name: c.extra[name].take(take) for name in ("model", "tool_name", "tool", "kind", "input_tokens")}
    codes = name_codes[rows]
    events = pa.array(event_names, pa.string()).take(pa.array(codes))
    tools = pc.if_else(_filled(ex["tool_name"]), ex["tool_name"], ex["tool"])
    by_event = pa.array([le.PREPROCESS_KIND_OF.get(e) for e in event_names], pa.string()).take(pa.array(codes))
    pre_kinds = pc.if_else(_filled(ex["kind"]), ex["kind"], by_event)
    names = _Names(event_names)  # an event's own name is its code: the names' order is the events'
    name = codes.astype(np.int64)
    for kind, fixed in _FIXED_NAMES.items():
        name[k == kind] = names.code(fixed)
    name[engine] = names.codes(ex["model"], sc.generate_span_name)[engine]
    name[tool] = names.codes(tools, sc.tool_span_name)[tool]
    tokens, has_tokens = _either(c, rows, "output_tokens", "generated_tokens", engine, lambda v: v)
    none = np.zeros(len(rows), dtype=bool)
    attrs: dict[str, tuple[Any, np.ndarray | None]] = {
        "event_origin": (events, None),
        "step": (np.full(len(rows), float(c.step or 0)), ~found if c.step is not None else none),
        "worker": (np.full(len(rows), float(c.worker or 0)), ~found if c.worker is not None else none),
        "operation": (
            pa.array(np.where(engine, sc.GEN_AI_OP_TEXT_COMPLETION, sc.GEN_AI_OP_EXECUTE_TOOL)),
            engine | tool,
        ),
        "output_tokens": (tokens, engine & has_tokens),
        "input_tokens": (ex["input_tokens"].fill_null(0).to_numpy(), engine & _valid(ex["input_tokens"])),
        "tool_name": (tools, tool & _valid(tools)),
        "preprocess_kind": (pre_kinds, pre & _valid(pre_kinds)),
    }
    return _part(ws.trace, sids[rows], parents, names.array(name), c, rows, attrs)


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

    def codes(self, values: pa.Array, name_of: Callable[[Any], str]) -> np.ndarray:
        """Code of ``name_of(value)`` for each value (None for a null), computed once per distinct value."""
        enc = values.dictionary_encode()
        distinct = enc.dictionary.to_pylist()
        table = np.array([self.code(name_of(v)) for v in [*distinct, None]], dtype=np.int64)
        return table[enc.indices.fill_null(len(distinct)).to_numpy()]

    def array(self, codes: np.ndarray) -> pa.Array:
        return pa.array(self.names, pa.string()).take(pa.array(codes))


def _line(c: SeedColumns, row: int) -> Line:
    """Row ``row`` as the line-by-line reader's :class:`~.seed_read.Line` (its text not kept)."""
    return Line(c.line(row), None, int(c.start[row]), int(c.end[row]), row + 1, c.step, c.worker, c.validate)


def _valid(arr: pa.Array) -> np.ndarray:
    return arr.is_valid().to_numpy(zero_copy_only=False)


def _filled(arr: pa.Array) -> pa.Array:
    """Where a string is truthy in Python: neither null nor empty (``e.get("tool_name") or e.get("tool")``)."""
    return pc.fill_null(pc.not_equal(arr, ""), False)


def _beyond_keys(arr: pa.Array) -> bool:
    if not arr.null_count < len(arr):
        return False
    lo, hi = pc.min_max(arr).values()
    return not -_KEY_RANGE <= lo.as_py() <= hi.as_py() < _KEY_RANGE


def _keys(request: np.ndarray, turn: np.ndarray) -> np.ndarray:
    """One int64 per (request position, turn index); both checked to fit (:data:`_KEY_RANGE`)."""
    return (request.astype(np.int64) << 32) | (turn.astype(np.int64) + _KEY_RANGE)


def _request_ids(c: SeedColumns) -> pa.Array:
    """Each row's request id: ``extra.request_id``, else the top-level one where ``extra`` has no such key."""
    rid = c.extra["request_id"]
    unsure = np.flatnonzero(~_valid(rid) & _valid(c.request_id))
    if not len(unsure):
        return rid
    values = rid.to_pylist()
    for row in unsure:
        values[row] = seed_spans._request_id(c.line(int(row)))
    return pa.array(values, pa.string())


def _positions(values: pa.Array, keys: list[str]) -> np.ndarray:
    """Position of each value in ``keys`` (the requests), -1 where absent or null."""
    if not keys:
        return np.full(len(values), -1)
    return pc.index_in(values, value_set=pa.array(keys, pa.string())).fill_null(-1).to_numpy().astype(np.int64)


def _either(
    c: SeedColumns, rows: np.ndarray, key: str, alt: str, wanted: np.ndarray, clean: Callable[[Any], Any]
) -> tuple[np.ndarray, np.ndarray]:
    """``e.get(key, e.get(alt))`` for ``rows`` (int values, and where there is one) where ``wanted``. Where ``key`` is
    null and ``alt`` is not, Arrow cannot tell a null ``key`` (no value) from a missing one (``alt``'s value):
    those rows are read back from their lines."""
    first, second = c.extra[key].take(pa.array(rows)), c.extra[alt].take(pa.array(rows))
    has_first, has_second = _valid(first), _valid(second)
    values = first.fill_null(0).to_numpy().copy()
    present = has_first.copy()
    unsure = wanted & ~has_first & has_second
    if unsure.any():  # where the line never names ``key``, it is missing: ``alt``'s value, no parse needed
        absent = unsure & ~c.mentions(key)[rows]
        values[absent], present[absent] = second.fill_null(0).to_numpy()[absent], True
        unsure &= ~absent
    for i in np.flatnonzero(unsure):
        extra = seed_spans._extra(c.line(int(rows[i])))
        value = clean(extra[key] if key in extra else extra.get(alt))
        if value is not None:
            values[i], present[i] = value, True
    return values, present


def _constant(text: str, n: int) -> pa.Array:
    return pa.repeat(pa.scalar(text, pa.string()), n)


def _hex_ids(ids: np.ndarray) -> pa.Array:
    """uint64 span ids as 16-digit lower-case hex strings (``f"{x:016x}"``), in one buffer."""
    data = ids.astype(">u8").tobytes().hex().encode()
    offsets = np.arange(0, 16 * len(ids) + 1, 16, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), len(ids), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _part(
    trace: str,
    sids: np.ndarray,
    parents: np.ndarray,
    names: pa.Array,
    c: SeedColumns,
    rows: np.ndarray,
    attrs: dict[str, tuple[Any, np.ndarray | None]],
) -> dict[str, Any]:
    """A span-table part (:meth:`~otel_verl.analysis.read.otlp_json.SpanColumns.flush`'s layout) of ``rows``'
    spans; ``attrs``: column → (a value per row, the rows that have one; None: all)."""
    n = len(rows)
    part: dict[str, Any] = {
        "n": n,
        "trace_id": _constant(trace, n),
        "span_id": _hex_ids(sids),
        "parent_id": _hex_ids(parents.astype(np.uint64)),
        "name": names,
        "extra": _constant("", n),
        "start_ns": c.start[rows],
        "end_ns": c.end[rows],
        **constant_columns(seed_spans.LEGACY_SERVICE, n),
    }
    for col, kind in ATTR_COLUMNS.values():
        values, mask = attrs.get(col, (None, np.zeros(n, dtype=bool)))
        idx = np.arange(n, dtype=np.int64) if mask is None else np.flatnonzero(mask).astype(np.int64)
        if kind in ("int", "float"):
            part[col] = (idx, np.asarray(values, dtype=float)[idx] if len(idx) else np.empty(0))
        elif kind == "bool":
            part[col] = (idx, np.asarray(values, dtype=bool)[idx] if len(idx) else np.empty(0, dtype=bool))
        else:
            part[col] = (idx, values.take(pa.array(idx)) if len(idx) else pa.array([], type=pa.string()))
    return part
