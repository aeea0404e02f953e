"""The workers table: one row per (step, worker), its rollout window, request count and barrier wait."""

from __future__ import annotations

import pandas as pd

from otel_verl.analysis.read.span_columns import whole_numbers
from otel_verl.analysis.tables import sampled_out
from otel_verl.analysis.tables.kind_codes import Kinds
from otel_verl.analysis.tables.training_spans import training_spans


def workers_table(spans: pd.DataFrame, *, sp: pd.DataFrame | None = None, kinds: Kinds | None = None) -> pd.DataFrame:
    """One row per (step, worker): rollout window, request count, barrier wait (verl.barrier duration)."""
    sp = training_spans(spans) if sp is None else sp
    k = Kinds.of(sp, kinds)
    has_worker = sp["worker"].notna().to_numpy()
    is_worker = k.mask("worker")
    cols = ["step", "worker", "kind", "start_ns", "end_ns", "trace_id", "span_id"]
    work = sp.loc[has_worker & (is_worker | k.mask("request")), cols]
    if work.empty:
        return pd.DataFrame(
            columns=[
                "step",
                "worker",
                "start_ns",
                "end_ns",
                "duration",
                "num_requests",
                "barrier_s",
                "trace_id",
                "span_id",
            ]
        )
    key = [whole_numbers(work["step"]), whole_numbers(work["worker"])]
    g = work.groupby(key)
    out = pd.DataFrame({"start_ns": g["start_ns"].min(), "end_ns": g["end_ns"].max()})
    ws = work[work["kind"] == "worker"]
    if len(ws):
        wg = ws.groupby([whole_numbers(ws["step"]), whole_numbers(ws["worker"])])
        first = wg.first()
        out.loc[first.index, "start_ns"] = wg["start_ns"].min()
        out.loc[first.index, "end_ns"] = wg["end_ns"].max()
        out["trace_id"] = first["trace_id"].reindex(out.index)
        out["span_id"] = first["span_id"].reindex(out.index)
    else:
        out["trace_id"] = None
        out["span_id"] = None
    reqs = work[work["kind"] == "request"]
    out["num_requests"] = (
        reqs.groupby([whole_numbers(reqs["step"]), whole_numbers(reqs["worker"])]).size().reindex(out.index).fillna(0)
    )
    # sampled-out requests are summarized on worker spans: only those rows are passed
    out["num_requests"] += (
        sampled_out.sampled_out_counts(sp.loc[has_worker & is_worker]).reindex(out.index).fillna(0).to_numpy()
    )
    bar = sp.loc[has_worker & k.mask("barrier"), ["step", "worker", "duration", "span_id", "trace_id"]]
    bg = bar.groupby([whole_numbers(bar["step"]), whole_numbers(bar["worker"])])
    out["barrier_s"] = bg["duration"].sum().reindex(out.index)
    out["barrier_span_id"] = bg["span_id"].first().reindex(out.index)
    out["barrier_trace_id"] = bg["trace_id"].first().reindex(out.index)
    out["duration"] = (out["end_ns"] - out["start_ns"]) / 1e9
    out.index.names = ["step", "worker"]
    return out.reset_index().sort_values(["step", "worker"]).reset_index(drop=True)
