"""Requests the volume controls summarized instead of recording: rows of the requests table again.

Tail sampling (:mod:`otel_verl.recording.sampling`) and ``OTEL_VERL_DETAIL=worker`` drop request spans but
put every dropped request's start/end/status/turns/tokens on its worker span as parallel arrays.
:func:`sampled_out_requests` turns them back into rows of the requests table, so CDFs, percentiles
and tail detectors count every request. With ``OTEL_VERL_TRACE_PER_REQUEST`` a request is the root
of its own trace with a link to its worker span;
:func:`~otel_verl.analysis.read.hierarchy.adopt_linked_requests` treats that link as the parent, so the request
still sits below its worker (step/worker attribution, idle gaps).
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from otel_verl import semconv as sc
from otel_verl.analysis.read.span_columns import whole_numbers


def sampled_out_requests(spans: pd.DataFrame) -> pd.DataFrame:
    """One row per request summarized on a worker span (requests-table columns; no span of its own).

    Rows get negative index labels, so they never match a span row (no events, no request span).
    """
    workers = spans[(spans["kind"] == "worker").to_numpy()]  # first: a str.contains over 2M spans costs seconds
    workers = workers[workers["extra"].str.contains(sc.VERL_SAMPLED_OUT_START_NS, na=False)]
    parts = []
    for row, worker in workers.iterrows():
        try:
            extra = json.loads(worker["extra"])
            start = np.asarray(extra[sc.VERL_SAMPLED_OUT_START_NS], dtype=np.int64)
            end = np.asarray(extra[sc.VERL_SAMPLED_OUT_END_NS], dtype=np.int64)
        except (ValueError, KeyError, TypeError):
            continue
        n = len(start)
        if n == 0 or len(end) != n:
            continue

        def column(key: str, fill: object, n: int = n, extra: dict = extra) -> list:
            values = extra.get(key)
            return list(values) if isinstance(values, list) and len(values) == n else [fill] * n

        tokens = whole_numbers(pd.Series(column(sc.VERL_SAMPLED_OUT_RESPONSE_TOKENS, None), dtype=object))
        parts.append(
            pd.DataFrame(
                {
                    "step": worker["step"],
                    "worker": worker["worker"],
                    "request_id": None,
                    "request_status": column(sc.VERL_SAMPLED_OUT_STATUS, sc.RequestStatus.COMPLETED.value),
                    "num_turns": whole_numbers(
                        pd.Series(column(sc.VERL_SAMPLED_OUT_NUM_TURNS, None), dtype=object)
                    ).array,
                    "response_tokens": tokens.where(tokens >= 0).to_numpy(),
                    "reward_score": np.nan,
                    "start_ns": start,
                    "end_ns": end,
                    "duration": (end - start) / 1e9,
                    "trace_id": worker["trace_id"],
                    "span_id": None,
                    "worker_span": row,
                }
            )
        )
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, ignore_index=True)
    out.index = -1 - np.arange(len(out))
    return out


def with_sampled_out(req: pd.DataFrame, spans: pd.DataFrame) -> pd.DataFrame:
    """``req`` (request-span rows) plus the sampled-out requests of ``spans``' worker spans."""
    extra = sampled_out_requests(spans)
    if extra.empty:
        return req
    extra = extra.astype({c: req[c].dtype for c in ("step", "worker", "num_turns") if c in req})
    return pd.concat([req, extra[req.columns.intersection(extra.columns)]])


def sampled_out_counts(spans: pd.DataFrame) -> pd.Series:
    """Sampled-out requests per (step, worker), to add to the worker's request count."""
    rows = sampled_out_requests(spans)
    if rows.empty:
        return pd.Series(dtype=float)
    step = whole_numbers(rows["step"])
    worker = whole_numbers(rows["worker"])
    return rows.groupby([step, worker]).size()
