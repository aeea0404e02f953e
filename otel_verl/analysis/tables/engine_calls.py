"""The engine's own view of each engine call: vLLM's ``llm_request`` span joined to our ``text_completion``.

Why: our ``text_completion`` span says how long a turn waited for the engine, not why. vLLM makes one
``llm_request`` span per finished request, parented on the carrier we hand it, with its own account in
``gen_ai.latency.*`` seconds. Joined (``llm_request`` → parent ``text_completion`` → turn → request →
worker/step), one engine call splits into:

=====================  =====================================================================================
column                 seconds
=====================  =====================================================================================
``engine_before_s``    from our call's start to the engine's arrival time: Ray hops, verl's load balancer
``engine_queue_s``     vLLM ``time_in_queue``: waiting for a running slot / KV cache in the engine's scheduler
``engine_prefill_s``   vLLM ``time_in_model_prefill``: scheduled → first token
``engine_decode_s``    vLLM ``time_in_model_decode``: first → last token
``engine_other_s``     the rest of vLLM's ``e2e`` (input processing before the scheduler, output handling)
``engine_after_s``     from the engine's end to our call's end: the answer's way back
=====================  =====================================================================================

They add up to our call's seconds (``call_s``). The engine's request span is ``llm_request`` (vLLM 0.24) or
``"{operation} {model}"`` (vLLM under the latest GenAI conventions, vllm#47633); where it has children
``vllm.request.queue/prefill/decode`` (vllm#44402), their seconds are its queue, prefill and decode.
The engine's spans come without our attributes (no step,
no worker): they are attributed through their parent. One whose parent is not one of our engine calls (an
engine started outside the job, trace headers lost, its parent sampled away) is an **orphan**: loaded,
counted, left out of every per-turn join. The attributes the engine sets are not columns of the span
table; they are read here from ``extra`` for the engine spans only (nothing is parsed when there are none).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from otel_verl import semconv as sc
from otel_verl.analysis.read.hierarchy import engine_request_mask
from otel_verl.analysis.read.id_lookup import arrow_strings, lookup
from otel_verl.analysis.read.span_columns import extra_attributes

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

PHASES = ("before", "queue", "prefill", "decode", "other", "after")
"""The parts of one engine call, in time order; column ``engine_<phase>_s`` each."""
PHASE_COLUMNS = tuple(f"engine_{p}_s" for p in PHASES)

_NUMBERS = {
    "engine_e2e_s": sc.ENGINE_LATENCY_E2E,
    "engine_queue_s": sc.ENGINE_LATENCY_QUEUE,
    "engine_prefill_s": sc.ENGINE_LATENCY_PREFILL,
    "engine_decode_s": sc.ENGINE_LATENCY_DECODE,
    "engine_ttft_s": sc.ENGINE_LATENCY_TTFT,
    "prompt_tokens": sc.ENGINE_USAGE_PROMPT_TOKENS,
    "completion_tokens": sc.ENGINE_USAGE_COMPLETION_TOKENS,
}
_REPLICA_KEYS = (sc.VERL_ENGINE_REPLICA, "vllm.process_id", "process.pid")

CALL_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_id",
    "service",
    "replica",
    "joined",
    "call_row",
    "call_span_id",
    "turn_span",
    "request_span",
    "step",
    "worker",
    "request_id",
    "turn_index",
    "validate",
    "start_ns",
    "end_ns",
    "call_start_ns",
    "call_end_ns",
    "call_s",
    *dict.fromkeys([*_NUMBERS, *PHASE_COLUMNS]),
)


def engine_request_rows(spans: pd.DataFrame) -> np.ndarray:
    """Row positions of the engine's request spans: ``llm_request``, or vLLM's ``"{operation} {model}"`` under the
    latest GenAI conventions (:func:`~otel_verl.analysis.read.hierarchy.engine_request_mask`)."""
    if spans.empty:
        return np.empty(0, dtype=np.int64)
    return np.flatnonzero(engine_request_mask(spans))


def _phase_children(spans: pd.DataFrame, request_ids: pd.Series) -> dict[str, np.ndarray]:
    """Seconds of each engine request's ``vllm.request.queue/prefill/decode`` children (vllm#44402), per part;
    NaN where a request has no child of that part."""
    out = {part: np.full(len(request_ids), np.nan) for part in sc.ENGINE_PHASE_SPANS.values()}
    names = arrow_strings(spans["name"])
    child = pc.starts_with(names, sc.ENGINE_PHASE_SPAN_PREFIX).fill_null(False).to_numpy(zero_copy_only=False)
    if not child.any():
        return out
    kids = spans.loc[child, ["parent_id", "name", "start_ns", "end_ns"]]
    kids = kids.assign(part=kids["name"].map(sc.ENGINE_PHASE_SPANS), seconds=(kids.end_ns - kids.start_ns) / 1e9)
    sums = kids.dropna(subset=["part"]).groupby(["parent_id", "part"])["seconds"].sum()
    for part in out:
        if part in sums.index.get_level_values("part"):
            out[part] = request_ids.map(sums.xs(part, level="part")).to_numpy(dtype=float)
    return out


def _number(values: list[Any]) -> np.ndarray:
    return pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").to_numpy(dtype=float)


def engine_calls_table(t: Tables) -> pd.DataFrame:
    """One row per ``llm_request`` span (orphans included, ``joined`` False): the engine's numbers, the
    call of ours it answered and the split of that call (module docstring); columns :data:`CALL_COLUMNS`."""
    spans = t.spans
    rows = engine_request_rows(spans)
    if len(rows) == 0:
        return pd.DataFrame(columns=list(CALL_COLUMNS))
    er = spans.iloc[rows]
    attrs = extra_attributes(er["extra"]) if "extra" in er else [{} for _ in rows]
    out = pd.DataFrame(
        {c: er[c].to_numpy() for c in ("trace_id", "span_id", "parent_id", "service", "start_ns", "end_ns")}
    )
    for col, key in _NUMBERS.items():
        out[col] = _number([a.get(key) for a in attrs])
    # the engine's own phase spans, where it makes them, are its account; its span is its e2e
    for part, seconds in _phase_children(spans, er["span_id"]).items():
        col = f"engine_{part}_s"
        out[col] = np.where(np.isnan(seconds), out[col].to_numpy(dtype=float), seconds)
    span_s = (out["end_ns"].to_numpy(dtype=float) - out["start_ns"].to_numpy(dtype=float)) / 1e9
    out["engine_e2e_s"] = np.where(np.isnan(out["engine_e2e_s"]), span_s, out["engine_e2e_s"])
    replica = [next((str(a[k]) for k in _REPLICA_KEYS if a.get(k) not in (None, "")), None) for a in attrs]
    out["replica"] = pd.Series(replica, dtype=object).fillna(pd.Series(er["service"].to_numpy(dtype=object)))
    # the parent: one of our engine calls (the same trace), else an orphan
    parent = lookup(er["parent_id"], spans["span_id"])
    safe = np.where(parent >= 0, parent, 0)
    kind = spans["kind"].iloc[safe].to_numpy(dtype=object)
    same_trace = spans["trace_id"].iloc[safe].to_numpy(dtype=object) == er["trace_id"].to_numpy(dtype=object)
    joined = (parent >= 0) & (kind == "engine") & same_trace
    out["joined"] = joined
    out["call_row"] = np.where(joined, parent, -1)
    for col, src in (
        ("call_span_id", "span_id"),
        ("turn_span", "turn_span"),
        ("request_span", "request_span"),
        ("step", "step"),
        ("worker", "worker"),
        ("request_id", "request_id"),
        ("turn_index", "turn_index"),
        ("validate", "validate"),
        ("call_start_ns", "start_ns"),
        ("call_end_ns", "end_ns"),
        ("call_s", "duration"),
    ):
        values = spans[src].iloc[safe].to_numpy(dtype=object) if src in spans else np.full(len(rows), None, object)
        values = np.where(joined, values, None)
        out[col] = values
    for col in ("turn_span", "request_span", "call_start_ns", "call_end_ns"):
        out[col] = pd.to_numeric(out[col], errors="coerce").fillna(-1).astype(np.int64)
    for col in ("step", "worker", "turn_index"):
        out[col] = pd.to_numeric(out[col], errors="coerce").astype("Int64")
    out["call_s"] = pd.to_numeric(out["call_s"], errors="coerce")
    out["validate"] = np.array([v is True or v is np.True_ for v in out["validate"]], dtype=bool)
    _split(out)
    return out[list(CALL_COLUMNS)]


def _split(out: pd.DataFrame) -> None:
    """The six parts of each joined call (NaN for orphans); clipped at 0 (clocks of two processes)."""
    joined = out["joined"].to_numpy()
    before = (out["start_ns"].to_numpy(dtype=float) - out["call_start_ns"].to_numpy(dtype=float)) / 1e9
    after = (out["call_end_ns"].to_numpy(dtype=float) - out["end_ns"].to_numpy(dtype=float)) / 1e9
    e2e = out["engine_e2e_s"].to_numpy(dtype=float)
    inside = np.nan_to_num(out[["engine_queue_s", "engine_prefill_s", "engine_decode_s"]].to_numpy(dtype=float))
    out["engine_before_s"] = np.where(joined, np.clip(before, 0, None), np.nan)
    out["engine_after_s"] = np.where(joined, np.clip(after, 0, None), np.nan)
    out["engine_other_s"] = np.clip(e2e - inside.sum(axis=1), 0, None)
    for col in ("engine_queue_s", "engine_prefill_s", "engine_decode_s"):
        out[col] = out[col].clip(lower=0)


TURN_COLUMNS = (
    "turn_span",
    "request_span",
    "step",
    "worker",
    "request_id",
    "turn_index",
    "replica",
    "calls",
    "call_s",
    "engine_e2e_s",
    *PHASE_COLUMNS,
    "prompt_tokens",
    "completion_tokens",
    "trace_id",
    "span_id",
    "engine_span_id",
)


def engine_turns_table(t: Tables) -> pd.DataFrame:
    """Per turn (training steps, validation left out): the parts of its engine calls summed; columns
    :data:`TURN_COLUMNS` (``span_id`` is our ``text_completion``, ``engine_span_id`` the engine's span)."""
    calls = t.engine_calls
    keep = calls["joined"].to_numpy(dtype=bool) & (calls["turn_span"].to_numpy() >= 0)
    keep &= calls["step"].notna().to_numpy() & ~calls["validate"].to_numpy(dtype=bool)
    c = calls.loc[keep]
    if c.empty:
        return pd.DataFrame(columns=list(TURN_COLUMNS))
    g = c.groupby("turn_span", sort=True)
    sums = g[["call_s", "engine_e2e_s", *PHASE_COLUMNS, "prompt_tokens", "completion_tokens"]].sum(min_count=1)
    first = g[["request_span", "step", "worker", "request_id", "turn_index", "replica", "trace_id"]].first()
    out = first.join(sums)
    out["calls"] = g.size()
    out["span_id"] = g["call_span_id"].first()
    out["engine_span_id"] = g["span_id"].first()
    return out.reset_index()[list(TURN_COLUMNS)]


def engine_summary(t: Tables) -> dict[str, Any]:
    """findings.json's ``summary.engine``: how many engine spans came, joined or orphaned, per replica, and
    the share of our engine calls (training and validation) that have the engine's span under them."""
    calls = t.engine_calls
    ours = int((t.spans["kind"] == "engine").sum()) if len(t.spans) else 0
    joined = calls.loc[calls["joined"].to_numpy(dtype=bool)]
    answered = int(joined["call_row"].nunique()) if len(joined) else 0
    return {
        "llm_request_spans": len(calls),
        "joined": len(joined),
        "orphans": int(len(calls) - len(joined)),
        "replicas": {str(k): int(v) for k, v in joined["replica"].value_counts().sort_index().items()},
        "engine_calls": ours,
        "engine_calls_with_engine_span": answered,
        "share_with_engine_span": round(answered / ours, 4) if ours else None,
    }
