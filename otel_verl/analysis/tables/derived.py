"""Derived tables every figure and detector shares: steps, workers, requests, events.

Why a separate module: the same "what is a step's rollout window" or "how long did worker 3 wait
at the barrier" must mean the same thing in a figure and in a finding.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.read.span_columns import whole_numbers
from otel_verl.analysis.tables import sampled_out as volume

EVENT_KINDS = ("engine", "tool", "tool_parse", "preprocess", "reward", "other")
"""Span kinds that are work inside a request (``other`` = unknown spans below a request)."""


_int = whole_numbers


def event_label(ev: pd.DataFrame) -> pd.Series:
    """Human name of an event: ``engine``, ``tool calc``, ``reward``, ``preprocess initial_prompt``..."""
    label = ev["kind"].astype(object).copy()
    tool = ev["kind"] == "tool"
    if "tool_name" in ev and tool.any():
        tl = ev.loc[tool]  # only tool rows: string work on 2M event names would dominate the analysis
        names = (
            tl["tool_name"].astype(object).where(tl["tool_name"].notna(), tl["name"].str.replace("execute_tool ", ""))
        )
        label[tool] = "tool " + names.astype(str)
    other = ev["kind"] == "other"
    # a span without a name stays a label; a name that is not a string (a corrupt line) becomes one
    label[other] = ev.loc[other, "name"].astype(object).fillna("other").astype(str)
    return label


def training_spans(spans: pd.DataFrame) -> pd.DataFrame:
    """Spans with a step, minus validation rollouts (they would skew per-step baselines).

    ``spans`` itself (no copy of a multi-GB table) when nothing is left out; callers never modify it.
    """
    keep = spans["step"].notna().to_numpy(copy=True)
    if "validate" in spans and spans["validate"].notna().any():
        keep &= (spans["validate"].fillna(False) == False).to_numpy()  # noqa: E712 - nullable boolean
    return spans if keep.all() else spans[keep]


def steps_table(spans: pd.DataFrame, *, sp: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per step: step span bounds and the rollout window (gen phase, else worker span bounds).

    ``sp``: :func:`training_spans` of ``spans`` when the caller already has it (same for the tables below).
    """
    sp = training_spans(spans) if sp is None else sp
    if sp.empty:
        return pd.DataFrame(
            columns=[
                "step",
                "start_ns",
                "end_ns",
                "duration",
                "rollout_start_ns",
                "rollout_end_ns",
                "rollout_s",
                "trace_id",
                "span_id",
            ]
        )
    g = sp.groupby(_int(sp["step"]))
    out = pd.DataFrame({"start_ns": g["start_ns"].min(), "end_ns": g["end_ns"].max()})
    st = (
        sp[sp["kind"] == "step"]
        .drop_duplicates("step")
        .set_index(_int(sp.loc[sp["kind"] == "step", "step"].drop_duplicates()))
    )
    out.loc[st.index, "start_ns"] = st["start_ns"].to_numpy()
    out.loc[st.index, "end_ns"] = st["end_ns"].to_numpy()
    out["trace_id"] = st["trace_id"].reindex(out.index)
    out["span_id"] = st["span_id"].reindex(out.index)
    # boolean masks and only the needed columns: a row filter of the whole table copies ~50 columns
    kind = sp["kind"].to_numpy()
    work = sp.loc[(kind == "worker") | (kind == "request"), ["step", "start_ns", "end_ns"]]
    wg = work.groupby(_int(work["step"]))
    out["rollout_start_ns"] = wg["start_ns"].min().reindex(out.index)
    out["rollout_end_ns"] = wg["end_ns"].max().reindex(out.index)
    bar = sp.loc[kind == "barrier", ["step", "end_ns"]]
    if len(bar):
        out["rollout_end_ns"] = np.fmax(
            out["rollout_end_ns"], bar.groupby(_int(bar["step"]))["end_ns"].max().reindex(out.index)
        )
    gen = sp[(sp["kind"] == "phase") & (sp["phase"] == "gen")]
    if len(gen):
        gg = gen.groupby(_int(gen["step"]))
        has = out.index.isin(gg.groups.keys())
        out.loc[has, "rollout_start_ns"] = gg["start_ns"].min().reindex(out.index[has]).to_numpy()
        out.loc[has, "rollout_end_ns"] = gg["end_ns"].max().reindex(out.index[has]).to_numpy()
    out["rollout_start_ns"] = out["rollout_start_ns"].fillna(out["start_ns"])
    out["rollout_end_ns"] = out["rollout_end_ns"].fillna(out["end_ns"])
    out["duration"] = (out["end_ns"] - out["start_ns"]) / 1e9
    out["rollout_s"] = (out["rollout_end_ns"] - out["rollout_start_ns"]) / 1e9
    out.index.name = "step"
    return out.reset_index().sort_values("step").reset_index(drop=True)


def requests_table(
    spans: pd.DataFrame,
    *,
    sp: pd.DataFrame | None = None,
    steps: pd.DataFrame | None = None,
    workers: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per request span, with times relative to its step's rollout start and its worker's start."""
    sp = training_spans(spans) if sp is None else sp
    kind = sp["kind"].to_numpy()
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
    ]
    req = sp.loc[kind == "request", cols]
    req["step"] = _int(req["step"])
    req["worker"] = _int(req["worker"])
    req["request_status"] = req["request_status"].fillna("completed").astype(object)
    # turn counts from turn spans when the attribute is missing (sampled instrumentation)
    turn_parents = sp.loc[kind == "turn", "request_span"]
    turns = turn_parents.groupby(turn_parents.to_numpy()).size()
    idx = pd.Series(req.index, index=req.index)
    counted = idx.map(turns)
    req["num_turns"] = _int(req["num_turns"]).fillna(_int(counted))
    req = volume.with_sampled_out(req, sp)  # requests summarized on worker spans (tail sampling)
    steps = (steps_table(spans, sp=sp) if steps is None else steps).set_index("step")
    req["rel_end_s"] = (req["end_ns"] - req["step"].map(steps["rollout_start_ns"]).astype(float)) / 1e9
    w = (workers_table(spans, sp=sp) if workers is None else workers).set_index(["step", "worker"])["start_ns"]
    keys = pd.MultiIndex.from_arrays([req["step"], req["worker"]])
    req["worker_rel_end_s"] = (req["end_ns"] - w.reindex(keys).to_numpy()) / 1e9
    req["request_row"] = req.index
    return req.reset_index(drop=True)


def workers_table(spans: pd.DataFrame, *, sp: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (step, worker): rollout window, request count, barrier wait (verl.barrier duration)."""
    sp = training_spans(spans) if sp is None else sp
    has_worker = sp["worker"].notna().to_numpy()
    kind = sp["kind"].to_numpy()
    cols = ["step", "worker", "kind", "start_ns", "end_ns", "trace_id", "span_id"]
    work = sp.loc[has_worker & ((kind == "worker") | (kind == "request")), cols]
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
    key = [_int(work["step"]), _int(work["worker"])]
    g = work.groupby(key)
    out = pd.DataFrame({"start_ns": g["start_ns"].min(), "end_ns": g["end_ns"].max()})
    ws = work[work["kind"] == "worker"]
    if len(ws):
        wg = ws.groupby([_int(ws["step"]), _int(ws["worker"])])
        first = wg.first()
        out.loc[first.index, "start_ns"] = wg["start_ns"].min()
        out.loc[first.index, "end_ns"] = wg["end_ns"].max()
        out["trace_id"] = first["trace_id"].reindex(out.index)
        out["span_id"] = first["span_id"].reindex(out.index)
    else:
        out["trace_id"] = None
        out["span_id"] = None
    reqs = work[work["kind"] == "request"]
    out["num_requests"] = reqs.groupby([_int(reqs["step"]), _int(reqs["worker"])]).size().reindex(out.index).fillna(0)
    # sampled-out requests are summarized on worker spans: only those rows are passed
    out["num_requests"] += (
        volume.sampled_out_counts(sp.loc[has_worker & (kind == "worker")]).reindex(out.index).fillna(0).to_numpy()
    )
    bar = sp.loc[has_worker & (kind == "barrier"), ["step", "worker", "duration", "span_id", "trace_id"]]
    bg = bar.groupby([_int(bar["step"]), _int(bar["worker"])])
    out["barrier_s"] = bg["duration"].sum().reindex(out.index)
    out["barrier_span_id"] = bg["span_id"].first().reindex(out.index)
    out["barrier_trace_id"] = bg["trace_id"].first().reindex(out.index)
    out["duration"] = (out["end_ns"] - out["start_ns"]) / 1e9
    out.index.names = ["step", "worker"]
    return out.reset_index().sort_values(["step", "worker"]).reset_index(drop=True)


EVENT_COLUMNS = (
    "trace_id",
    "span_id",
    "parent_id",
    "name",
    "kind",
    "start_ns",
    "end_ns",
    "duration",
    "status",
    "step",
    "worker",
    "request_id",
    "turn_index",
    "request_span",
    "worker_span",
    "turn_span",
    "operation",
    "tool_name",
    "preprocess_kind",
    "stop_reason",
    "input_tokens",
    "output_tokens",
    "reward_score",
)
"""Columns of :func:`events_table` (not every span column: the table has ~80% of all rows)."""


def events_table(spans: pd.DataFrame, *, sp: pd.DataFrame | None = None) -> pd.DataFrame:
    """Event spans below a request (engine, tool, tool_parse, preprocess, reward, other) with their context,
    plus ``event`` (:func:`event_label`); columns: :data:`EVENT_COLUMNS`."""
    sp = training_spans(spans) if sp is None else sp
    keep = (sp["kind"].isin(EVENT_KINDS) & (sp["request_span"] >= 0)).to_numpy()
    ev = sp.loc[keep, [c for c in EVENT_COLUMNS if c in sp.columns]]
    ev["event"] = event_label(ev)
    ev["step"] = _int(ev["step"])
    ev["worker"] = _int(ev["worker"])
    ev["turn_index"] = _int(ev["turn_index"])
    return ev


def robust_baseline(values: np.ndarray, floor: float = 0.0) -> tuple[float, float]:
    """Median and scaled MAD (≈σ for normal data), the MAD floored so near-constant data is not 'infinitely' strict."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if len(values) == 0:
        return float("nan"), float("nan")
    med = float(np.median(values))
    mad = float(np.median(np.abs(values - med))) * 1.4826
    return med, max(mad, floor)
