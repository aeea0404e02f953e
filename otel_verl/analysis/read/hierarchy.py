"""Resolve the span tree: each span's kind, and the step, worker, request and turn it belongs to.

Why: instrumentation only promises ids on the request/worker spans; events below them are attributed
through the parent chain. With ``OTEL_VERL_TRACE_PER_REQUEST`` a request is the root of its own trace with a
link to its worker span: :func:`adopt_linked_requests` treats that link as the parent, as it does for a V1
sample group that is a trace of its own (async trainers). An engine's request span named like one of our
engine calls is told apart by :func:`engine_request_mask`."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from otel_verl import semconv as sc
from otel_verl.analysis.read.id_lookup import arrow_strings, lookup

KIND_BY_NAME = {
    sc.SPAN_STEP: "step",
    sc.SPAN_UPDATE: "update",
    sc.SPAN_WEIGHT_SYNC: "weight_sync",
    sc.SPAN_WORKER: "worker",
    sc.SPAN_GROUP: "group",
    sc.SPAN_REQUEST: "request",
    sc.SPAN_TURN: "turn",
    sc.SPAN_TOOL_PARSE: "tool_parse",
    sc.SPAN_PREPROCESS: "preprocess",
    sc.SPAN_REWARD: "reward",
    sc.SPAN_BARRIER: "barrier",
    sc.SPAN_GENERATE: "generate",  # a fully-async round trip: a container of engine calls, as a turn is
}


def classify(names: pd.Series) -> np.ndarray:
    """Span kind from its name: step/phase/worker/request/turn/engine/tool/... or ``other``."""
    # a run has a few dozen distinct names: classify those, then spread (2M rows cost one factorize)
    codes, uniques = pd.factorize(names, use_na_sentinel=True)
    u = pd.Series(uniques, dtype=object)
    kinds = u.map(KIND_BY_NAME).to_numpy(dtype=object)
    s = u.astype(str)
    kinds[pd.isna(kinds) & s.str.startswith(sc.SPAN_PHASE_PREFIX + " ").to_numpy()] = "phase"
    kinds[pd.isna(kinds) & s.str.startswith(sc.GEN_AI_OP_TEXT_COMPLETION).to_numpy()] = "engine"
    kinds[pd.isna(kinds) & s.str.startswith(sc.GEN_AI_OP_EXECUTE_TOOL).to_numpy()] = "tool"
    kinds[pd.isna(kinds)] = "other"
    return np.append(kinds, "other")[codes]  # code -1 (a missing name) -> "other"


def engine_request_mask(spans: pd.DataFrame, kind: np.ndarray | None = None) -> np.ndarray:
    """Rows that are an engine's own request span: vLLM's ``llm_request``, or the ``"{operation} {model}"`` it
    is named under the latest GenAI conventions (vllm#47633). The renamed one can be named exactly like our
    ``text_completion <model>``; it is the engine's when it carries what only the engine's span has: vLLM's
    ``gen_ai.latency.*`` numbers, the engine's service (``<ours>.vllm``, the demo's ``<ours>.sim-engine``) or
    engine phase children (``vllm.request.queue/prefill/decode``, vllm#44402)."""
    if spans.empty:
        return np.zeros(0, dtype=bool)
    # the names' tests run once per distinct name (a step has a few dozen), then spread by code: six string
    # kernels over every row of a step were a visible share of the main process's time (docs/performance.md)
    codes, uniques = pd.factorize(spans["name"], use_na_sentinel=True)
    names = arrow_strings(pd.Series(uniques, dtype=object))

    def per_row(mask: pa.Array) -> np.ndarray:  # code -1 (no name): False
        return np.append(mask.fill_null(False).to_numpy(zero_copy_only=False), False)[codes]

    legacy = per_row(pc.equal(names, sc.ENGINE_SPAN_REQUEST))
    named = per_row(functools.reduce(pc.or_, [pc.starts_with(names, op + " ") for op in sc.ENGINE_OPERATIONS]))
    if not named.any():
        return legacy
    own = np.zeros(len(spans), dtype=bool)
    rows = np.flatnonzero(named)  # only they can be the engine's (reading every row's text cost more)
    if "extra" in spans:
        extra = arrow_strings(spans["extra"].iloc[rows].fillna(""))
        own[rows] |= pc.match_substring(extra, "gen_ai.latency.").fill_null(False).to_numpy(zero_copy_only=False)
    if "service" in spans:
        service = arrow_strings(spans["service"].iloc[rows].fillna("").astype(str))
        for suffix in sc.ENGINE_SERVICE_SUFFIXES:
            own[rows] |= pc.ends_with(service, suffix).fill_null(False).to_numpy(zero_copy_only=False)
    phase = per_row(pc.starts_with(names, sc.ENGINE_PHASE_SPAN_PREFIX))
    if phase.any():
        own |= spans["span_id"].isin(set(spans["parent_id"].to_numpy()[phase])).to_numpy()
    return legacy | (named & own)


def holders_of_engine_calls(kind: np.ndarray, parent_idx: np.ndarray) -> np.ndarray:
    """``kind`` with each engine call that holds engine calls made ``generate``: spools written before
    ``verl.generate`` named a fully-async round trip ``text_completion`` too, its attempts under it. The attempt
    is the engine call (the engine's span nests under it, its usage is its own); counting the round trip as well
    gave it the attempt's time and tokens twice."""
    engine = kind == "engine"
    parents = parent_idx[engine]
    parents = parents[parents >= 0]
    holders = parents[kind[parents] == "engine"]
    if len(holders) == 0:
        return kind
    kind = kind.copy()
    kind[holders] = "generate"
    return kind


def _ancestor(parent_idx: np.ndarray, is_target: np.ndarray) -> np.ndarray:
    """Row index of each span's nearest ancestor-or-self with ``is_target`` (-1 if none within 127 levels).

    Pointer doubling: after round k, ``found`` covers each row and its first 2^k - 1 ancestors and ``jump`` is
    its 2^k-th ancestor, so a tree of depth d takes log2(d) rounds instead of d; a parent cycle (corrupt ids)
    ends with the rounds."""
    n = len(parent_idx)
    found = np.where(is_target, np.arange(n), -1)
    jump = parent_idx.copy()
    for _ in range(7):
        has = jump >= 0
        todo = (found < 0) & has
        if not todo.any():
            break
        safe = np.where(has, jump, 0)
        found = np.where(todo, found[safe], found)
        jump = np.where(has, jump[safe], -1)
    return found


def adopt_linked_requests(
    kind: np.ndarray,
    links: pd.Series,
    find: Callable[[pd.Series], np.ndarray],
    parent_idx: np.ndarray,
    composite: bool,
) -> np.ndarray:
    """Parent row of each span, where a parentless request span's first link stands in for its parent, and so
    does an async V1 sample group's (a trace of its own, linked to the worker span that dispatched it).

    ``find`` maps span keys (span id, or span id + trace id when ``composite``) to rows, -1 when absent.
    """
    orphan = (parent_idx < 0) & ((kind == "request") | (kind == "group"))
    if not orphan.any():
        return parent_idx
    first = links[orphan].fillna("").astype(str).str.split(",").str[0]
    has = first.str.contains(":", regex=False).to_numpy()
    if not has.any():
        return parent_idx
    trace_span = first[has].str.split(":", n=1, expand=True)
    key = trace_span[1] + trace_span[0] if composite else trace_span[1]
    found = find(key)
    out = parent_idx.copy()
    rows = np.flatnonzero(orphan)[has]
    ok = found >= 0
    out[rows[ok]] = found[ok]
    return out


def resolve_hierarchy(spans: pd.DataFrame, unique_span_ids: bool | None = None) -> pd.DataFrame:
    """Add ``kind``, ``request_span``, ``worker_span``, ``turn_span`` and inherit step/worker/request ids.
    ``unique_span_ids``: whether every span id is distinct, when the caller knows (else checked here).

    Why: instrumentation only promises ids on the request/worker spans; events below them are
    attributed through the parent chain. Missing parents (sampled spans) simply stay unresolved.
    """
    spans = spans.copy(deep=False)  # only whole columns are added or replaced below
    # object dtype on purpose: pandas 3 would store Arrow strings, and every ``kind.to_numpy()`` of the
    # analysis (a dozen) then rebuilt 2M Python strings; here they point at the ten interned labels
    kinds = classify(spans["name"])
    kinds[engine_request_mask(spans)] = "other"  # the engine's own request span, as vLLM's llm_request always was
    spans["kind"] = pd.Series(kinds, index=spans.index, dtype=object)
    # span ids are unique across traces in practice; (span, trace) keys only when they are not. Both the
    # check and the lookups hash Arrow strings: a pandas Index of 2M ids cost seconds to build.
    keys = spans["span_id"]
    if unique_span_ids is None:
        unique_span_ids = len(pc.unique(arrow_strings(keys))) == len(keys)  # count_distinct is 3x slower
    composite = not unique_span_ids
    if composite:
        keys = keys.astype(str) + spans["trace_id"].astype(str)
        parent_key = spans["parent_id"].astype(str) + spans["trace_id"].astype(str)
    else:
        parent_key = spans["parent_id"]
    parent_idx = lookup(parent_key, keys)
    kind = spans["kind"].to_numpy()
    parent_idx = adopt_linked_requests(kind, spans["links"], lambda k: lookup(k, keys), parent_idx, composite)
    held = holders_of_engine_calls(kind, parent_idx)
    if held is not kind:
        kind = held
        spans["kind"] = pd.Series(kind, index=spans.index, dtype=object)
    for target, col in (
        ("request", "request_span"),
        ("worker", "worker_span"),
        ("turn", "turn_span"),
        ("step", "step_span"),
    ):
        spans[col] = _ancestor(parent_idx, kind == target)
    for col, via in (
        ("step", "request_span"),
        ("worker", "request_span"),
        ("request_id", "request_span"),
        ("step", "worker_span"),
        ("worker", "worker_span"),
        ("turn_index", "turn_span"),
        ("step", "step_span"),
        # a validation rollout's events are validation too (verl validates inside training steps)
        ("validate", "request_span"),
        ("validate", "worker_span"),
    ):
        anc = spans[via].to_numpy()
        missing = spans[col].isna().to_numpy() & (anc >= 0)
        if missing.any():
            spans[col] = _inherit(spans[col], missing, anc[missing])
    return spans


def _inherit(column: pd.Series, missing: np.ndarray, source: np.ndarray) -> Any:
    """``column`` with the rows in ``missing`` taken from rows ``source``, same dtype (vectorized for Int64)."""
    if isinstance(column.dtype, (pd.Int64Dtype, pd.BooleanDtype)):
        boolean = isinstance(column.dtype, pd.BooleanDtype)
        data = column.to_numpy(dtype=bool if boolean else np.int64, na_value=False if boolean else 0)
        mask = column.isna().to_numpy().copy()
        data[missing], mask[missing] = data[source], mask[source]
        return pd.arrays.BooleanArray(data, mask) if boolean else pd.arrays.IntegerArray(data, mask)
    if column.dtype == np.float64:
        values = column.to_numpy(copy=True)
        values[missing] = values[source]
        return values
    values = column.to_numpy(dtype=object, copy=True)
    values[missing] = values[source]
    return pd.array(values, dtype=column.dtype) if column.dtype != object else values
