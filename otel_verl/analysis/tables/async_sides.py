"""Who was busy when, in a run of verl's asynchronous V1 trainers: the trainer's lane and the rollout's lanes.

In ``colocate_async`` and ``separate_async`` (``verl.trainer.mode`` on ``verl.step``) the trainer and the rollout
run side by side: inside a step the trainer runs its inner updates (``verl.update``), each opening with a
``verl.phase gen`` that is the trainer *waiting* for the replay buffer's sample, then syncs its weights
(``verl.weight_sync``); the rollout generates whatever groups were dispatched, in whatever step. Three tables:

=================  ==========================================================================================
:func:`async_steps`  the steps of an asynchronous trainer: ``step``, ``mode``, ``start_ns``, ``end_ns``, ids
:func:`trainer_lane` the trainer's intervals: ``step``, ``what`` (:data:`WAIT`, :data:`TRAIN`,
                     :data:`WEIGHT_SYNC`, or another top-level phase's name), ``phase``, ``start_ns``, ``end_ns``,
                     ``update_index``, and for syncs ``bytes``, ``replicas``, ``backend``, ``version``
:func:`rollout_lanes` per replica: ``replica``, ``what`` (:data:`BUSY`: a sample in flight, not paused;
                     :data:`GENERATING`: an engine call in flight, not paused; :data:`PAUSED`), ``start_ns``,
                     ``end_ns``
=================  ==========================================================================================

The rollout is **paused** (verl's ``CheckpointEngineManager``/``RolloutReplica`` calls, which make no span of
their own) during every weight sync (abort, transfer, resume: the ``verl.weight_sync`` span), and in
``colocate_async`` from the end of sampling (``on_sample_end`` aborts and sleeps the replicas, inside ``gen``)
until the step's weight sync resumes them. A replica is **busy** while a sample it serves is in flight (the agent
loop at work: engine calls, tools, rewards) and it is not paused, and **generating** while one of our engine calls
on it is in flight and it is not paused (a call parked at the closed gate is not generating). Replicas are told
apart by the engine's own span (``verl.engine.replica``): then only the calls an engine span joined count (a
client's outer wrapping call and a call refused at the closed gate have none), and a sample belongs to the
replica of its first such call; without engine spans the rollout is one lane, :data:`ALL_REPLICAS`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from otel_verl import semconv as sc
from otel_verl.analysis.read.span_columns import extra_attributes
from otel_verl.analysis.tables.intervals import minus, union

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

ASYNC_MODES = ("colocate_async", "separate_async")
"""verl's ``trainer.v1.trainer_mode`` values whose trainer and rollout run side by side."""
COLOCATE_ASYNC = "colocate_async"

WAIT = "wait"
"""The trainer waiting for samples: a ``gen`` phase inside an inner update."""
TRAIN = "train"
"""The inner update's other phases (old_log_prob, adv, update_actor …)."""
WEIGHT_SYNC = "weight_sync"
BUSY = "busy"
"""A replica with a sample (``verl.rollout.request``) in flight: the agent loop at work (engine calls, tools,
rewards, between turns)."""
GENERATING = "generating"
"""A replica with one of our engine calls in flight (verl#7601's "engine had a request in flight")."""
PAUSED = "paused"
ALL_REPLICAS = "all replicas"

STEP_COLUMNS = ["step", "mode", "first_step", "start_ns", "end_ns", "trace_id", "span_id"]
TRAINER_COLUMNS = [
    "step",
    "what",
    "phase",
    "start_ns",
    "end_ns",
    "update_index",
    "bytes",
    "replicas",
    "backend",
    "version",
    "trace_id",
    "span_id",
]
ROLLOUT_COLUMNS = ["replica", "what", "start_ns", "end_ns"]


def async_steps(t: Tables) -> pd.DataFrame:
    """The training steps whose ``verl.trainer.mode`` is asynchronous (empty for sync and legacy runs)."""
    sp = t.spans
    if sp.empty or t.steps.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    rows = sp[(sp["kind"].to_numpy() == "step") & sp["step"].notna().to_numpy()]
    if rows.empty:
        return pd.DataFrame(columns=STEP_COLUMNS)
    modes = [a.get(sc.VERL_TRAINER_MODE) for a in extra_attributes(rows["extra"])]
    mode_of = {int(s): m for s, m in zip(rows["step"].to_numpy(), modes, strict=True) if m in ASYNC_MODES}
    first_of = {
        int(s): _first_step(a.get(sc.VERL_TRAINER_FIRST_STEP))
        for s, a in zip(rows["step"].to_numpy(), extra_attributes(rows["extra"]), strict=True)
    }
    st = t.steps[t.steps["step"].isin(list(mode_of))]
    out = st[["step", "start_ns", "end_ns", "trace_id", "span_id"]].copy()
    out["step"] = out["step"].astype("int64")
    out["mode"] = out["step"].map(mode_of)
    out["first_step"] = out["step"].map(first_of).astype("int64")
    return out[STEP_COLUMNS].sort_values("step").reset_index(drop=True)


FRESH_RUN_FIRST_STEP = 1
"""verl's first step of a run that resumed from no checkpoint: the first step of spans recorded before
``verl.trainer.first_step`` was."""


def _first_step(value: Any) -> int:
    """The trainer's first step as its step span says it (``verl.trainer.first_step``), else a fresh run's."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else FRESH_RUN_FIRST_STEP


def trainer_lane(t: Tables, steps: pd.DataFrame | None = None) -> pd.DataFrame:
    """The trainer's intervals in the asynchronous steps (see the module's table)."""
    steps = async_steps(t) if steps is None else steps
    sp = t.spans
    if steps.empty:
        return pd.DataFrame(columns=TRAINER_COLUMNS)
    in_step = sp["step"].isin(steps["step"].tolist()).to_numpy()
    kind = sp["kind"].to_numpy()
    updates = sp[in_step & (kind == "update")]
    update_index = dict(
        zip(updates["span_id"], [a.get(sc.VERL_UPDATE_INDEX) for a in extra_attributes(updates["extra"])], strict=True)
    )
    step_ids = set(steps["span_id"].dropna())
    phases = sp[in_step & (kind == "phase")]
    inner = phases[phases["parent_id"].isin(list(update_index))]
    top = phases[phases["parent_id"].isin(list(step_ids)) & (phases["phase"] != "update_weights")]
    name = inner["phase"].fillna("?").astype(str)
    frames = [
        pd.DataFrame(
            {
                "step": inner["step"].to_numpy(dtype=np.int64),
                "what": np.where(name == "gen", WAIT, TRAIN),
                "phase": name.to_numpy(),
                "start_ns": inner["start_ns"].to_numpy(dtype=np.int64),
                "end_ns": inner["end_ns"].to_numpy(dtype=np.int64),
                "update_index": inner["parent_id"].map(update_index).to_numpy(dtype=object),
                "trace_id": inner["trace_id"].to_numpy(dtype=object),
                "span_id": inner["span_id"].to_numpy(dtype=object),
            }
        ),
        pd.DataFrame(
            {
                "step": top["step"].to_numpy(dtype=np.int64),
                "what": top["phase"].fillna("?").astype(str).to_numpy(),
                "phase": top["phase"].fillna("?").astype(str).to_numpy(),
                "start_ns": top["start_ns"].to_numpy(dtype=np.int64),
                "end_ns": top["end_ns"].to_numpy(dtype=np.int64),
                "trace_id": top["trace_id"].to_numpy(dtype=object),
                "span_id": top["span_id"].to_numpy(dtype=object),
            }
        ),
        _syncs(sp[in_step & (kind == "weight_sync")]),
    ]
    out = pd.concat([f for f in frames if len(f)], ignore_index=True) if any(len(f) for f in frames) else None
    if out is None:
        return pd.DataFrame(columns=TRAINER_COLUMNS)
    out = out.reindex(columns=TRAINER_COLUMNS)
    return out.sort_values(["start_ns", "end_ns"]).reset_index(drop=True)


def _syncs(ws: pd.DataFrame) -> pd.DataFrame:
    attrs = extra_attributes(ws["extra"])
    return pd.DataFrame(
        {
            "step": ws["step"].to_numpy(dtype=float),
            "what": WEIGHT_SYNC,
            "phase": None,
            "start_ns": ws["start_ns"].to_numpy(dtype=np.int64),
            "end_ns": ws["end_ns"].to_numpy(dtype=np.int64),
            "bytes": [_number(a.get(sc.VERL_SYNC_BYTES)) for a in attrs],
            "replicas": [_number(a.get(sc.VERL_SYNC_REPLICAS)) for a in attrs],
            "backend": [a.get(sc.VERL_SYNC_BACKEND) for a in attrs],
            "version": [_number(a.get(sc.VERL_SYNC_VERSION)) for a in attrs],
            "trace_id": ws["trace_id"].to_numpy(dtype=object),
            "span_id": ws["span_id"].to_numpy(dtype=object),
        }
    )


def _number(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else float("nan")


def pause_windows(t: Tables, steps: pd.DataFrame, lane: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """The union of the times the rollout was paused: every weight sync of the run (the first one before
    training too), and in ``colocate_async`` each step's end of sampling until its weight sync ended."""
    sp = t.spans
    ws = sp[sp["kind"].to_numpy() == "weight_sync"]
    starts = [ws["start_ns"].to_numpy(dtype=np.int64)]
    ends = [ws["end_ns"].to_numpy(dtype=np.int64)]
    colocate = steps[steps["mode"] == COLOCATE_ASYNC]
    for row in colocate.itertuples(index=False):
        mine = lane[lane["step"].to_numpy(dtype=float) == row.step]
        waits = mine[mine["what"] == WAIT]
        if waits.empty:
            continue
        syncs = mine[mine["what"] == WEIGHT_SYNC]
        resumed = int(syncs["end_ns"].max()) if len(syncs) else int(row.end_ns)
        starts.append(np.array([int(waits["end_ns"].min())], dtype=np.int64))
        ends.append(np.array([resumed], dtype=np.int64))
    return union(np.concatenate(starts), np.concatenate(ends))


def rollout_lanes(t: Tables, paused: tuple[np.ndarray, np.ndarray]) -> pd.DataFrame:
    """Per replica: when it had a sample in flight and was not paused (:data:`BUSY`), when one of our engine calls
    was in flight on it and it was not paused (:data:`GENERATING`), and when the rollout was paused
    (:data:`PAUSED`, the same windows for every replica: a weight sync updates them all)."""
    sp = t.spans
    calls = sp[sp["kind"].to_numpy() == "engine"]
    if calls.empty:
        return pd.DataFrame(columns=ROLLOUT_COLUMNS)
    call_replica = pd.Series(ALL_REPLICAS, index=calls.index, dtype=object)
    req = t.requests
    req_replica = pd.Series(ALL_REPLICAS, index=req["request_row"].to_numpy(), dtype=object)
    joined = t.engine_calls
    j = joined[joined["joined"].to_numpy(dtype=bool) & joined["replica"].notna().to_numpy()] if len(joined) else joined
    if len(j):  # the engine names its replica: lanes from the calls it served, and their samples
        by_row = j.drop_duplicates("call_row").set_index("call_row")["replica"].astype(str)
        calls = calls[calls.index.isin(by_row.index)]
        call_replica = by_row.reindex(calls.index).astype(object)
        first = j.sort_values("start_ns").drop_duplicates("request_span").set_index("request_span")["replica"]
        req_replica = first.astype(str).reindex(req["request_row"].to_numpy())
    frames = []
    req_start, req_end = req["start_ns"].to_numpy(dtype=np.int64), req["end_ns"].to_numpy(dtype=np.int64)
    for name in sorted(set(call_replica.dropna())):
        mine = calls[call_replica.to_numpy() == name]
        generating = minus(union(mine["start_ns"].to_numpy(), mine["end_ns"].to_numpy()), paused)
        has = req_replica.to_numpy() == name
        busy = minus(union(req_start[has], req_end[has]), paused)
        for what, (s, e) in ((BUSY, busy), (GENERATING, generating), (PAUSED, paused)):
            frames.append(pd.DataFrame({"replica": name, "what": what, "start_ns": s, "end_ns": e}))
    return pd.concat(frames, ignore_index=True)[ROLLOUT_COLUMNS]
