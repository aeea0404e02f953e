"""A request's time cut into the account's parts: :func:`request_segments`.

Why: the step's account walks the critical path, and on it a request is a chain of parts (preprocess, engine
call, tool parse, tool call, reward, and the time none of its spans covers). Each span of a request gets the
time only it covered: spans sorted by start, each keeps what lies after the latest end before it (a tool call
inside a turn that overlaps another keeps only its own remainder), so a request's parts add up to its duration
by construction, the rest being a ``gap``.

An engine call is split further when the engine's own span is under it (vLLM's ``llm_request``, joined by
:mod:`otel_verl.analysis.tables.engine_calls`): before the engine, queued, prefill, decode, and the rest
(engine's other time + the answer's way back), in proportion to the engine's account. Without it, a call with a
token count is ``decode`` (tokens × seconds per token, overheads included); without tokens, ``engine``.
Unknown spans below a request (the seed's wrapper events) are not parts: their time is told by the known spans
inside them, or is a gap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.tables.events import EVENT_COLUMNS, event_label

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

MAX_TURN_KEY = 15
"""Engine parts are judged per turn index (turn 5 carries a longer context than turn 0); past this index the
turns share one baseline (few requests get there)."""

SEGMENT_COLUMNS = (
    "request_span",
    "part",
    "key",
    "value_s",
    "tokens",
    "start_ns",
    "end_ns",
    "turn_index",
    "span_row",
    "by_engine",
)
"""``key``: what the part's baseline is kept per (turn index of engine parts, tool name, preprocess kind, else
``""``); ``tokens``: decoded tokens of a ``decode`` part; ``start_ns``/``end_ns``: the time the part alone held;
``span_row``: the span it came from (a row of the span table: its ids are looked up only for the few spans a
finding names, see :func:`span_ids`); ``by_engine``: the part's seconds come from the engine's own account."""

_PART_OF_KIND = {"tool": k.PART_TOOL, "tool_parse": k.PART_TOOL_PARSE, "preprocess": k.PART_PREPROCESS}
_PART_OF_KIND["reward"] = k.PART_REWARD
_ENGINE_SPLIT = (
    (k.PART_ENGINE_BEFORE, ("engine_before_s",)),
    (k.PART_ENGINE_QUEUE, ("engine_queue_s",)),
    (k.PART_PREFILL, ("engine_prefill_s",)),
    (k.PART_DECODE, ("engine_decode_s",)),
    (k.PART_ENGINE_OTHER, ("engine_other_s",)),
    (k.PART_ENGINE_AFTER, ("engine_after_s",)),
)


def request_segments(t: Tables) -> pd.DataFrame:
    """One row per (request, part occurrence): columns :data:`SEGMENT_COLUMNS`; gaps included, one per request.

    A worker span that holds no request span (a worker-level trace: detail ``worker``, the seed's worker-only
    logs) is a chain of parts too, made of the event spans right under it; its ``request_span`` is its own row."""
    req = containers(t).rename(columns={"request_span": "request_row"})
    ev = _container_events(t, req)
    if ev.empty and req.empty:
        return pd.DataFrame(columns=list(SEGMENT_COLUMNS))
    bounds = req.set_index("request_row")[["start_ns", "end_ns"]]
    # by request, start, end (stable): an order of the few columns read, not a sorted copy of every column
    # with its Arrow text
    rs, start, end = (ev[c].to_numpy(dtype=np.int64) for c in ("request_span", "start_ns", "end_ns"))
    order = np.lexsort((end, start, rs))
    rs, start, end = rs[order], start[order], end[order]
    # what each span alone held: from the latest end of the spans before it (same request) to its own end
    prev_end = pd.Series(end).groupby(rs, sort=False).cummax().groupby(rs, sort=False).shift(1)
    req_start = bounds["start_ns"].reindex(rs).to_numpy(dtype=np.int64)
    req_end = bounds["end_ns"].reindex(rs).to_numpy(dtype=np.int64)
    own_start = np.maximum(np.maximum(start, prev_end.fillna(0).to_numpy(dtype=np.int64)), req_start)
    own_end = np.minimum(end, req_end)
    own = np.clip(own_end - own_start, 0, None) / 1e9
    turn = ev["turn_index"].to_numpy(dtype=float, na_value=np.nan)[order]
    base = pd.DataFrame(
        {
            "request_span": rs,
            "kind": objects(ev["kind"].to_numpy(dtype=object)[order]),
            "value_s": own,
            "start_ns": own_start,
            "end_ns": np.maximum(own_end, own_start),
            "turn_index": turn,
            "span_row": ev["span_row"].to_numpy(dtype=np.int64)[order],
            "tokens": pd.to_numeric(ev["output_tokens"], errors="coerce").to_numpy(dtype=float)[order],
            "call_s": ev["duration"].to_numpy(dtype=float)[order],
        }
    )
    parts = [_other_parts(base[base["kind"] != "engine"], ev), *_engine_parts(t, base[base["kind"] == "engine"])]
    held = base.groupby("request_span")["value_s"].sum()
    dur = (req["end_ns"] - req["start_ns"]).to_numpy(dtype=float) / 1e9
    covered = held.reindex(req["request_row"].to_numpy()).fillna(0.0).to_numpy()
    gaps = pd.DataFrame(
        {
            "request_span": req["request_row"].to_numpy(dtype=np.int64),
            "part": objects(np.full(len(req), k.PART_GAP, dtype=object)),
            "key": objects(np.full(len(req), "", dtype=object)),
            "value_s": np.clip(dur - covered, 0, None),
            "tokens": np.nan,
            "start_ns": req["start_ns"].to_numpy(dtype=np.int64),
            "end_ns": req["end_ns"].to_numpy(dtype=np.int64),
            "turn_index": np.nan,
            "span_row": req["request_row"].to_numpy(dtype=np.int64),
            "by_engine": False,
        }
    )
    parts.append(gaps)
    return pd.concat([p for p in parts if len(p)], ignore_index=True)[list(SEGMENT_COLUMNS)]


def _texts(values: np.ndarray, index: pd.Index) -> pd.Series:
    """:func:`objects` aligned with ``index``, for ``assign``: a plain array or a scalar would be stored as Arrow
    strings, and turned back into objects per row for the step's statistics. The event columns are the narrow
    :data:`_SEGMENT_EVENT_COLUMNS`."""
    return pd.Series(np.asarray(values, dtype=object), index=index, dtype=object, copy=False)


def objects(values: np.ndarray) -> pd.Series:
    """A text column as plain objects. pandas 3 stores text as Arrow strings, and building or reading one per row
    makes Python strings anew each time: the part and key columns are compared again and again, and cost more
    as Arrow strings than all of the account's arithmetic."""
    return pd.Series(values, dtype=object, copy=False)


def span_ids(spans: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """``trace_id``/``span_id`` of span-table rows (an Arrow take: no Python string per row), indexed by row."""
    rows = np.asarray(rows, dtype=np.int64)
    return pd.DataFrame(
        {"trace_id": spans["trace_id"].iloc[rows].array, "span_id": spans["span_id"].iloc[rows].array}, index=rows
    )


TEXT_COLUMNS = ("part", "key")


def as_objects(df: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    """``columns`` as plain object arrays (:func:`objects`)."""
    return df.astype({c: object for c in columns if c in df})


def containers(t: Tables) -> pd.DataFrame:
    """What holds a chain of parts: every request span, and every worker span of a step that holds none
    (``request_span``: the span's row; ``step``, ``worker``, ``start_ns``, ``end_ns``)."""
    cols = ["request_span", "step", "worker", "start_ns", "end_ns"]
    r = t.requests
    r = r[r["request_row"] >= 0] if "request_row" in r else r.iloc[:0]
    req = pd.DataFrame({"request_span": r["request_row"].to_numpy(dtype=np.int64)}).assign(
        **{c: r[c].to_numpy() for c in cols[1:]}
    )
    bare = bare_workers(t)
    return pd.concat([req, bare[cols]], ignore_index=True) if len(bare) else req


def bare_workers(t: Tables) -> pd.DataFrame:
    """Worker spans of training steps that hold no request span, as containers (``request_span``: their row)."""
    sp = t.spans
    kind = sp["kind"].to_numpy()
    keep = (kind == "worker") & sp["step"].notna().to_numpy()
    if "validate" in sp:
        keep &= ~sp["validate"].fillna(False).to_numpy(dtype=bool)
    held = set(t.requests["worker_span"].dropna().astype(np.int64)) if len(t.requests) else set()
    rows = np.array([i for i in np.flatnonzero(keep) if i not in held], dtype=np.int64)
    w = sp.iloc[rows]
    return pd.DataFrame(
        {
            "request_span": rows,
            "step": w["step"].to_numpy(dtype=float, na_value=np.nan),
            "worker": w["worker"].to_numpy(dtype=float, na_value=np.nan),
            "start_ns": w["start_ns"].to_numpy(dtype=np.int64),
            "end_ns": w["end_ns"].to_numpy(dtype=np.int64),
        }
    )


def _container_events(t: Tables, holders: pd.DataFrame) -> pd.DataFrame:
    """Known event spans of each container: a request's from the events table, a bare worker's right under it."""
    ev = t.events
    keep = ev["kind"].isin(("engine", *_PART_OF_KIND)).to_numpy() & ev["request_span"].isin(holders["request_row"])
    # the columns the segments read, not the whole events table (its Arrow ids and names copied for nothing)
    ev = ev.loc[keep, [c for c in _SEGMENT_EVENT_COLUMNS if c in ev.columns]]
    ev = ev.assign(span_row=ev.index.to_numpy(dtype=np.int64))
    workers = set(holders["request_row"]) - set(t.requests.get("request_row", pd.Series(dtype=np.int64)))
    if not workers:
        return ev
    sp = t.spans
    own = sp["kind"].isin(("engine", *_PART_OF_KIND)).to_numpy() & (sp["request_span"].to_numpy() < 0)
    own &= sp["worker_span"].isin(list(workers)).to_numpy()
    if not own.any():
        return ev
    wev = sp.loc[own, [c for c in EVENT_COLUMNS if c in sp.columns]].copy()
    wev["request_span"] = wev["worker_span"].to_numpy()
    wev["span_row"] = wev.index.to_numpy(dtype=np.int64)
    wev["event"] = event_label(wev)
    return pd.concat([ev, wev[list(ev.columns)]], ignore_index=True)


_SEGMENT_EVENT_COLUMNS = (
    "request_span", "start_ns", "end_ns", "turn_index", "kind", "output_tokens", "duration", "event", "preprocess_kind"
)  # fmt: skip
"""What :func:`request_segments` and its parts read of an event."""


def turn_key(turn: np.ndarray) -> np.ndarray:
    """Baseline key of an engine part: its turn index (capped at :data:`MAX_TURN_KEY`), ``"?"`` when unknown."""
    out = np.full(len(turn), "?", dtype=object)
    ok = np.isfinite(turn)
    out[ok] = np.minimum(turn[ok], MAX_TURN_KEY).astype(np.int64).astype(str)
    return out


def _other_parts(base: pd.DataFrame, ev: pd.DataFrame) -> pd.DataFrame:
    """Tool, tool-parse, preprocess and reward parts; a tool is keyed by its name, a preprocess by its kind."""
    kind = base["kind"].to_numpy(dtype=object)
    key = np.full(len(base), "", dtype=object)
    rows = base["span_row"].to_numpy()
    by_row = ev.set_index("span_row")
    tool = kind == "tool"
    if tool.any():
        key[tool] = by_row["event"].reindex(rows[tool]).to_numpy(dtype=object)
    pre = kind == "preprocess"
    if pre.any() and "preprocess_kind" in by_row:
        key[pre] = by_row["preprocess_kind"].reindex(rows[pre]).astype(object).fillna("").to_numpy(dtype=object)
    codes, uniques = pd.factorize(kind)
    parts = np.array([_PART_OF_KIND.get(x, x) for x in uniques], dtype=object)[codes]
    return base.assign(part=_texts(parts, base.index), key=_texts(key, base.index), tokens=np.nan, by_engine=False)


def _engine_parts(t: Tables, ev: pd.DataFrame) -> list[pd.DataFrame]:
    """Engine calls as parts: split by the engine's own account where it is there, else decode/engine."""
    if ev.empty:
        return []
    key = turn_key(ev["turn_index"].to_numpy(dtype=float))
    ev = ev.assign(key=_texts(key, ev.index))
    account = _engine_account(t)
    rows = ev["span_row"].to_numpy()
    has = np.isin(rows, account.index.to_numpy()) if len(account) else np.zeros(len(ev), dtype=bool)
    out = []
    plain = ev[~has]
    if len(plain):
        tokens = plain["tokens"].to_numpy(dtype=float)
        part = np.where(np.isfinite(tokens) & (tokens > 0), k.PART_DECODE, k.PART_ENGINE)
        out.append(plain.assign(part=_texts(part, plain.index), by_engine=False))
    split = ev[has]
    if len(split):
        acc = account.reindex(split["span_row"].to_numpy())
        cols = [sum(acc[c].fillna(0.0).to_numpy(dtype=float) for c in cs) for _, cs in _ENGINE_SPLIT]
        total = np.sum(cols, axis=0)
        scale = np.where(total > 0, split["value_s"].to_numpy() / np.where(total > 0, total, 1.0), 0.0)
        tokens = acc["completion_tokens"].to_numpy(dtype=float)
        tokens = np.where(np.isfinite(tokens), tokens, split["tokens"].to_numpy(dtype=float))
        for (part, _), seconds in zip(_ENGINE_SPLIT, cols, strict=True):
            out.append(
                split.assign(
                    part=_texts(np.full(len(split), part, dtype=object), split.index),
                    value_s=seconds * scale,
                    tokens=tokens if part == k.PART_DECODE else np.nan,
                    by_engine=part != k.PART_ENGINE_AFTER,
                )
            )
        # a call the engine answered without any account (all zeros) keeps its time as one engine part
        empty = total <= 0
        if empty.any():
            out.append(
                split[empty].assign(
                    part=_texts(np.full(int(empty.sum()), k.PART_ENGINE, dtype=object), split.index[empty]),
                    by_engine=False,
                )
            )
    return out


def _engine_account(t: Tables) -> pd.DataFrame:
    """The engine's account per call of ours (by our ``text_completion`` span's row), summed over its engine
    spans."""
    calls = t.engine_calls
    if calls.empty:
        return pd.DataFrame()
    joined = calls[calls["joined"].to_numpy(dtype=bool)]
    if joined.empty:
        return pd.DataFrame()
    cols = ["engine_before_s", "engine_queue_s", "engine_prefill_s", "engine_decode_s", "engine_other_s"]
    g = joined.groupby("call_row")
    out = g[[*cols, "engine_after_s", "completion_tokens"]].sum(min_count=1)
    out["replica"] = g["replica"].first()
    return out
