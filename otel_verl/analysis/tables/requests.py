"""The requests table: one row per request (sampled-out ones too), timed against its step and worker."""

from __future__ import annotations

import pandas as pd

from otel_verl.analysis.read.span_columns import whole_numbers
from otel_verl.analysis.tables import sampled_out
from otel_verl.analysis.tables.kind_codes import Kinds
from otel_verl.analysis.tables.steps import steps_table
from otel_verl.analysis.tables.training_spans import training_spans
from otel_verl.analysis.tables.workers import workers_table


def requests_table(
    spans: pd.DataFrame,
    *,
    sp: pd.DataFrame | None = None,
    steps: pd.DataFrame | None = None,
    workers: pd.DataFrame | None = None,
    kinds: Kinds | None = None,
) -> pd.DataFrame:
    """One row per request span, with times relative to its step's rollout start and its worker's start."""
    sp = training_spans(spans) if sp is None else sp
    k = Kinds.of(sp, kinds)
    cols = [
        "step",
        "worker",
        "request_id",
        "request_status",
        "num_turns",
        "response_tokens",
        "reward_score",
        "start_ns",
        "end_ns",
        "duration",
        "trace_id",
        "span_id",
        "worker_span",
        "sample_index",
        "rollout_n",
    ]
    req = sp.loc[k.mask("request"), [c for c in cols if c in sp.columns]]
    req["step"] = whole_numbers(req["step"])
    req["worker"] = whole_numbers(req["worker"])
    req["request_status"] = req["request_status"].fillna("completed").astype(object)
    # turn counts from turn spans when the attribute is missing (sampled instrumentation)
    turn_parents = sp.loc[k.mask("turn"), "request_span"]
    turns = turn_parents.groupby(turn_parents.to_numpy()).size()
    idx = pd.Series(req.index, index=req.index)
    counted = idx.map(turns)
    req["num_turns"] = whole_numbers(req["num_turns"]).fillna(whole_numbers(counted))
    # requests summarized on worker spans (tail sampling): only the worker rows are looked at
    req = sampled_out.with_sampled_out(req, sp.loc[k.mask("worker")])
    steps = (steps_table(spans, sp=sp, kinds=k) if steps is None else steps).set_index("step")
    req["rel_end_s"] = (req["end_ns"] - req["step"].map(steps["rollout_start_ns"]).astype(float)) / 1e9
    w = (workers_table(spans, sp=sp, kinds=k) if workers is None else workers).set_index(["step", "worker"])["start_ns"]
    keys = pd.MultiIndex.from_arrays([req["step"], req["worker"]])
    req["worker_rel_end_s"] = (req["end_ns"] - w.reindex(keys).to_numpy()) / 1e9
    req["request_row"] = req.index
    return req.reset_index(drop=True)
