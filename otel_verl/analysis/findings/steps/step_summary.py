"""One step reduced to what its account needs, with no baseline yet: :func:`summarize_steps` → :class:`StepSummary`.

Why a summary: the account compares a step with the run's usual values, which are known only once every step was
read. Whatever the step needs later (its phases, its workers, its requests' parts, where nothing moved) is kept
here, and the run's baselines are built from the summaries' histograms and group medians
(:mod:`.baselines`). Read whole or step by step, a run gives the same summaries, hence the same account.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.histograms import LogHistogram
from otel_verl.analysis.findings.steps.async_account import AsyncStep, async_accounts
from otel_verl.analysis.findings.steps.paused_gaps import PAUSED_SHARE, unpaused_quiet, with_pauses
from otel_verl.analysis.findings.steps.quiet import quiet_windows
from otel_verl.analysis.findings.steps.segments import (
    TEXT_COLUMNS,
    as_objects,
    bare_workers,
    request_segments,
    span_ids,
)
from otel_verl.analysis.findings.steps.step_metrics import step_metrics
from otel_verl.analysis.findings.steps.step_statistics import step_statistics
from otel_verl.analysis.tables.consumption import consuming_steps

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

BARE_WORKER = "worker"
"""``status`` of a summary's request row that is a worker span holding no request span."""

REQUEST_COLUMNS = (
    "request_span",
    "worker",
    "request_id",
    "sample_index",
    "rollout_n",
    "status",
    "start_ns",
    "end_ns",
    "replica",
    "num_turns",
    "trace_id",
    "span_id",
    "consumed_step",
    "policy_version",
    "consumer_wait_s",
    "group_span",
)
"""... ``consumed_step``, ``policy_version``, ``consumer_wait_s``: asynchronous trainers' step that took the sample
(:mod:`~otel_verl.analysis.tables.consumption`), its weights, and that step's trainer wait (NaN elsewhere);
``group_span``: its sample group's span id, which a later part's consuming update links
(:mod:`otel_verl.analysis.stream.consumers`)."""


@dataclass
class StepSummary:
    """One training step, baseline-free. Times are absolute ns; seconds are floats."""

    step: int
    start_ns: int
    end_ns: int
    trace_id: str | None
    span_id: str | None
    rollout: tuple[int, int] | None
    """The rollout's window (the phase holding the workers, else the workers' own span)."""
    phases: pd.DataFrame
    """Top-level phases: ``name``, ``seconds`` (time no earlier phase held), ``start_ns``, ``end_ns``, ``rollout``
    (the phase the workers ran in), ``trace_id``, ``span_id``."""
    workers: pd.DataFrame
    """``worker``, ``start_ns``, ``end_ns`` (its span, else its requests), ``first_start_ns``, ``last_end_ns``,
    ``barrier_s``, ``requests``, ``trace_id``, ``span_id``."""
    requests: pd.DataFrame
    """:data:`REQUEST_COLUMNS`."""
    occurrences: pd.DataFrame
    """Every part occurrence: the requests' segments (:mod:`.segments`) plus each worker's ``start`` and
    ``finish`` (``request_span`` -1), with ``worker``, ``replica`` and ``sample_index`` of their request."""
    quiet: pd.DataFrame
    """Longest stretches per worker with requests in flight and nothing starting or ending (:mod:`.quiet`)."""
    histograms: dict[tuple[str, str, str], LogHistogram] = field(default_factory=dict)
    """(part, key, metric) → the step's values, for the run's quantiles."""
    groups: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Median per (group type, group, part, key, metric): how the whole step, each worker, replica and sample
    group did, for telling a step-wide or local shift from the run's usual spread."""
    ids: pd.DataFrame = field(default_factory=pd.DataFrame)
    """``trace_id``/``span_id`` of every span the occurrences came from, indexed by their ``span_row``."""
    async_account: AsyncStep | None = None
    """Asynchronous trainers: who waited for whom in this step (:mod:`.async_account`); None for sync ones."""
    metrics: dict[str, float] = field(default_factory=dict)
    """The step's behaviour (tokens per call, calls per request...) and its system's speed (seconds per token,
    queueing...): :mod:`.step_metrics`."""

    def evidence_of(self, occ_rows: np.ndarray) -> list[dict[str, str]]:
        """Evidence entries (trace and span id) of some occurrences, in their order, each span once."""
        rows = self.occurrences["span_row"].to_numpy()[np.asarray(occ_rows, dtype=np.int64)]
        found = self.ids.reindex(list(dict.fromkeys(int(r) for r in rows)))
        return [
            {"trace_id": str(t), "span_id": str(sp)}
            for t, sp in zip(found["trace_id"], found["span_id"], strict=True)
            if isinstance(t, str) and isinstance(sp, str) and sp
        ]

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


def summarize_steps(t: Tables) -> list[StepSummary]:
    """Every training step of ``t`` (validation rollouts and spans without a step left out), in step order.

    The per-occurrence work (segments, histograms, group medians) runs once over all of ``t``'s steps, then is
    split by step: pandas' fixed cost per call, paid per step, made a long run many times slower
    (docs/performance.md)."""
    if t.steps.empty:
        return []
    req = _requests(t)
    sides = async_accounts(t)
    req["consumer_wait_s"] = req["consumed_step"].map({s: a.trainer_wait_s for s, a in sides.items()}).astype(float)
    seg = request_segments(t)
    pauses = next(iter(sides.values())).pauses if sides else None  # the run's pauses, shared by every step
    if pauses is not None:  # a request's wait for a rollout pause is the pause's, not its gap's
        seg = with_pauses(seg, pauses)
    seg = seg.merge(req[["request_span", "step", "worker", "replica", "sample_index"]], on="request_span", how="left")
    phases = _phases(t)
    quiet = quiet_windows(t)
    if pauses is not None:  # and a worker's stretch of nothing moving, its time in a pause: not a stall's
        quiet = unpaused_quiet(quiet, pauses)
    quiet_by_step = quiet.groupby("step", sort=False).indices
    req_by_step = req.groupby("step", sort=False).indices
    ph_by_step = phases.groupby("step", sort=False).indices if len(phases) else {}
    w_by_step = t.workers.groupby("step", sort=False).indices if len(t.workers) else {}
    steps = []
    worker_occ = [seg]
    worker_rows = _worker_rows(t)
    for row in t.steps.itertuples(index=False):
        step = int(row.step)
        w = t.workers.iloc[w_by_step.get(step, [])]
        r = req.iloc[req_by_step.get(step, [])]
        ph = phases.iloc[ph_by_step.get(step, [])] if len(phases) else _empty_phases()
        rollout = _rollout_window(ph, w, r)
        ph = ph.assign(rollout=_is_rollout(ph, rollout))
        wk = _workers(w, r)
        wk["span_row"] = [worker_rows.get((step, int(x)), -1) for x in wk["worker"]]
        worker_occ.append(_worker_occurrences(wk, rollout).assign(step=float(step)))
        steps.append((row, step, rollout, ph, wk, r))
    frames = [x for x in worker_occ if len(x)]
    occ = pd.concat(frames, ignore_index=True) if frames else seg.assign(step=np.nan).iloc[:0]
    occ = as_objects(occ, TEXT_COLUMNS)
    occ_by_step = occ.groupby("step", sort=False).indices
    hist, groups = step_statistics(_unpaused(occ, sides))
    out = []
    for row, step, rollout, ph, wk, r in steps:
        mine = occ.iloc[occ_by_step.get(float(step), [])].drop(columns="step").reset_index(drop=True)
        ids = span_ids(t.spans, pd.unique(mine["span_row"].to_numpy()[mine["span_row"].to_numpy() >= 0]))
        q = quiet.iloc[quiet_by_step.get(step, [])].drop(columns="step").reset_index(drop=True)
        out.append(
            StepSummary(
                step=step,
                start_ns=int(row.start_ns),
                end_ns=int(row.end_ns),
                trace_id=row.trace_id if isinstance(row.trace_id, str) else None,
                span_id=row.span_id if isinstance(row.span_id, str) else None,
                rollout=rollout,
                phases=ph.drop(columns=["step"], errors="ignore").reset_index(drop=True),
                workers=wk,
                requests=r[list(REQUEST_COLUMNS)].reset_index(drop=True),
                occurrences=mine,
                quiet=q,
                histograms=hist.get(float(step), {}),
                groups=groups.get(float(step), _empty_groups()),
                ids=ids,
                async_account=sides.get(step),
                metrics=step_metrics(mine, r),
            )
        )
    return out


def _unpaused(occ: pd.DataFrame, sides: dict[int, AsyncStep]) -> pd.DataFrame:
    """The occurrences a part's norm and its groups' medians are read from: in an asynchronous run, not those that
    mostly waited out a rollout pause (:data:`.paused_gaps.PAUSED_SHARE`), as no anomaly is told on them. Why: a
    colocate-async batch dispatched while the replicas slept parks its first engine calls through the pause (9.2 s
    against a usual 0.7 s); read into its step's median they moved the whole step 7.8x, and the step's unpaused
    calls, at 1.0x their usual, were told a warning "decoded at 6.64 ms/token, 1.0x the usual 6.49 ms/token: +3.7 s"
    (async_clean, --seed 9837 run 0). The pause itself is the weight sync's cost, judged where it happened."""
    if not sides or occ.empty:
        return occ
    pauses = next(iter(sides.values()))
    on = pauses.paused_share(occ["start_ns"].to_numpy(), occ["end_ns"].to_numpy())
    return occ[on < PAUSED_SHARE]


def _worker_rows(t: Tables) -> dict[tuple[int, int], int]:
    """(step, worker) → the row of its worker span (the evidence of the worker's own parts)."""
    sp = t.spans
    w = sp[(sp["kind"].to_numpy() == "worker") & sp["step"].notna().to_numpy() & sp["worker"].notna().to_numpy()]
    return {
        (int(a), int(b)): int(i)
        for a, b, i in zip(w["step"].to_numpy(), w["worker"].to_numpy(), w.index.to_numpy(), strict=True)
    }


def _requests(t: Tables) -> pd.DataFrame:
    """Requests with their replica (the engine that served their first call, when engine spans say)."""
    r = t.requests
    out = pd.DataFrame(
        {
            "request_span": r["request_row"].to_numpy(dtype=np.int64),
            "step": r["step"].to_numpy(dtype=float, na_value=np.nan),
            "worker": r["worker"].to_numpy(dtype=float, na_value=np.nan),
            "request_id": r["request_id"].to_numpy(dtype=object),
            "sample_index": pd.to_numeric(r.get("sample_index"), errors="coerce").to_numpy(dtype=float)
            if "sample_index" in r
            else np.nan,
            "rollout_n": pd.to_numeric(r.get("rollout_n"), errors="coerce").to_numpy(dtype=float)
            if "rollout_n" in r
            else np.nan,
            "status": r["request_status"].to_numpy(dtype=object),
            "start_ns": r["start_ns"].to_numpy(dtype=np.int64),
            "end_ns": r["end_ns"].to_numpy(dtype=np.int64),
            "num_turns": pd.to_numeric(r["num_turns"], errors="coerce").to_numpy(dtype=float),
            "trace_id": r["trace_id"].to_numpy(dtype=object),
            "span_id": r["span_id"].to_numpy(dtype=object),
        }
    )
    calls = t.engine_calls
    replica = pd.Series(dtype=object)
    if len(calls) and calls["joined"].any():
        j = calls[calls["joined"].to_numpy(dtype=bool)].sort_values("start_ns")
        replica = j.groupby("request_span")["replica"].first()
    out["replica"] = out["request_span"].map(replica).astype(object)
    taken = consuming_steps(t)  # asynchronous trainers: the step whose trainer took the sample, its weights
    for column in taken.columns:
        mapped = out["request_span"].map(taken[column])
        out[column] = mapped.astype(object if column == "group_span" else float)
    bare = bare_workers(t)
    if len(bare):  # a worker without request spans is its own chain of parts (:func:`.segments.request_segments`)
        out = pd.concat([out, bare.assign(status=BARE_WORKER, request_id=None, replica=None)], ignore_index=True)
    objects = ("request_id", "status", "trace_id", "span_id", "replica", "group_span")
    return as_objects(out[out["step"].notna()], objects)


def _empty_phases() -> pd.DataFrame:
    return pd.DataFrame(columns=["step", "name", "seconds", "start_ns", "end_ns", "trace_id", "span_id"])


def _phases(t: Tables) -> pd.DataFrame:
    """Top-level phase spans (their parent is not a phase) per step, each with the time no earlier phase held."""
    sp = t.spans
    kind = sp["kind"].to_numpy()
    ph = sp.loc[(kind == "phase") & sp["step"].notna().to_numpy(), ["step", "phase", "name", "start_ns", "end_ns"]]
    ph = ph.join(sp[["trace_id", "span_id", "parent_id"]])
    if "validate" in sp:
        ph = ph[~sp.loc[ph.index, "validate"].fillna(False).to_numpy(dtype=bool)]
    if ph.empty:
        return _empty_phases()
    phase_ids = set(ph["span_id"])
    ph = ph[~ph["parent_id"].isin(phase_ids)]
    ph = ph.assign(
        step=ph["step"].astype("int64"),
        name=ph["phase"].fillna(ph["name"].str.replace("verl.phase ", "", regex=False)).astype(str),
    ).sort_values(["step", "start_ns", "end_ns"])
    prev = ph.groupby("step")["end_ns"].cummax().groupby(ph["step"].to_numpy()).shift(1)
    own_start = np.maximum(ph["start_ns"].to_numpy(dtype=np.int64), prev.fillna(0).to_numpy(dtype=np.int64))
    ph["seconds"] = np.clip(ph["end_ns"].to_numpy(dtype=np.int64) - own_start, 0, None) / 1e9
    return ph[["step", "name", "seconds", "start_ns", "end_ns", "trace_id", "span_id"]]


def _rollout_window(ph: pd.DataFrame, w: pd.DataFrame, r: pd.DataFrame) -> tuple[int, int] | None:
    """The phase the workers ran in (the one overlapping most of their window, at least half of it: verl's V1
    trainer dispatches the rollout a few milliseconds before its ``gen`` timer starts), else the workers' own span."""
    starts = np.concatenate([w["start_ns"].to_numpy(dtype=float), r["start_ns"].to_numpy(dtype=float)])
    ends = np.concatenate([w["end_ns"].to_numpy(dtype=float), r["end_ns"].to_numpy(dtype=float)])
    starts, ends = starts[np.isfinite(starts)], ends[np.isfinite(ends)]
    if not len(starts):
        return None
    lo, hi = float(starts.min()), float(ends.max()) if len(ends) else float(starts.max())
    if len(ph):
        p0, p1 = ph["start_ns"].to_numpy(dtype=np.int64), ph["end_ns"].to_numpy(dtype=np.int64)  # exact: _is_rollout
        overlap = np.clip(np.minimum(p1.astype(float), hi) - np.maximum(p0.astype(float), lo), 0, None)
        best = int(np.argmax(overlap))
        if overlap[best] > 0 and overlap[best] >= 0.5 * (hi - lo):
            return int(p0[best]), int(p1[best])
    return int(lo), int(hi)


def _is_rollout(ph: pd.DataFrame, rollout: tuple[int, int] | None) -> np.ndarray:
    if rollout is None or ph.empty:
        return np.zeros(len(ph), dtype=bool)
    return (ph["start_ns"].to_numpy() == rollout[0]) & (ph["end_ns"].to_numpy() == rollout[1])


def _workers(w: pd.DataFrame, r: pd.DataFrame) -> pd.DataFrame:
    """Per worker: its window, when its first request started and its last ended, and its barrier wait."""
    cols = ["worker", "start_ns", "end_ns", "first_start_ns", "last_end_ns", "barrier_s", "requests"]
    if w.empty:
        return pd.DataFrame(columns=[*cols, "trace_id", "span_id"])
    out = w[["worker", "start_ns", "end_ns", "barrier_s", "trace_id", "span_id"]].copy()
    out["worker"] = out["worker"].astype("int64")
    g = r.groupby("worker")
    out["first_start_ns"] = out["worker"].map(g["start_ns"].min())
    out["last_end_ns"] = out["worker"].map(g["end_ns"].max())
    out["requests"] = out["worker"].map(g.size()).fillna(0).astype("int64")
    out["barrier_s"] = out["barrier_s"].fillna(0.0)
    return out[[*cols, "trace_id", "span_id"]].reset_index(drop=True)


def _worker_occurrences(wk: pd.DataFrame, rollout: tuple[int, int] | None) -> pd.DataFrame:
    """Each worker's ``start`` (rollout start → its first request) and ``finish`` (its last request → its end)."""
    has = wk["first_start_ns"].notna().to_numpy() if len(wk) else np.zeros(0, dtype=bool)
    if rollout is None or not has.any():
        return pd.DataFrame()
    w = wk[has]
    first = w["first_start_ns"].to_numpy(dtype=np.int64)
    last = w["last_end_ns"].to_numpy(dtype=np.int64)
    end = np.maximum(w["end_ns"].to_numpy(dtype=np.int64), last)
    common = {
        "request_span": -1,
        "by_engine": False,
        "key": "",
        "tokens": np.nan,
        "turn_index": np.nan,
        "worker": w["worker"].to_numpy(dtype=float),
        "replica": None,
        "sample_index": np.nan,
        "span_row": w["span_row"].to_numpy(dtype=np.int64),
    }
    start = pd.DataFrame(
        {**common, "part": k.PART_START, "value_s": np.clip(first - rollout[0], 0, None) / 1e9}
        | {"start_ns": np.full(len(w), rollout[0]), "end_ns": first}
    )
    finish = pd.DataFrame(
        {**common, "part": k.PART_FINISH, "value_s": (end - last) / 1e9} | {"start_ns": last, "end_ns": end}
    )
    return pd.concat([start, finish], ignore_index=True)


def _empty_groups() -> pd.DataFrame:
    return pd.DataFrame(columns=["group_type", "group", "part", "key", "metric", "median", "count"])
