"""One function per finding kind; :func:`diagnose` runs them all and orders the result.

Each detector takes the shared derived tables and returns findings; none hard-codes steps, workers or
counts. slow_event/turn_anomaly live in :mod:`otel_verl.analysis.findings.flagged_spans`, process stalls in
:mod:`otel_verl.analysis.findings.process_stalls`, workers that sent nothing for a step in
:mod:`otel_verl.analysis.findings.worker_absent_from_step`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.findings import flagged_spans as anomalies
from otel_verl.analysis.findings import process_stalls as stalls
from otel_verl.analysis.findings.record import Finding, evidence, fmt_s, sort_findings
from otel_verl.analysis.findings.thresholds import Thresholds, far_above, severity
from otel_verl.analysis.findings.worker_absent_from_step import find_missing_workers
from otel_verl.analysis.findings.worker_died_mid_step import find_incomplete_workers
from otel_verl.analysis.tables import derived as model
from otel_verl.analysis.tables.build import Tables

__all__ = ["Tables", "aborted_per_step", "diagnose", "turn_engine_times"]

turn_engine_times = anomalies.turn_engine_times


# ------------------------------------------------------------------ idle gaps
def find_idle_gaps(t: Tables, th: Thresholds) -> list[Finding]:
    """Stretches of a worker's step with requests in flight but no span starting or ending anywhere below it."""
    out: list[Finding] = []
    sp = model.training_spans(t.spans)
    keep = (sp["worker_span"] >= 0).to_numpy() & (sp["kind"] != "worker").to_numpy() & sp["step"].notna().to_numpy()
    step_s, worker_s = model._int(sp["step"])[keep], model._int(sp["worker"])[keep]
    ok = (step_s.notna() & worker_s.notna()).to_numpy()
    if not ok.any():
        return out
    # numpy over (step, worker) slices of one sorted copy: a pandas groupby of 2M rows took minutes
    steps = step_s.to_numpy(dtype=np.int64, na_value=0)[ok]
    workers = worker_s.to_numpy(dtype=np.int64, na_value=0)[ok]
    starts = sp["start_ns"].to_numpy()[keep][ok]
    ends = sp["end_ns"].to_numpy()[keep][ok]
    is_req = (sp["kind"].to_numpy()[keep] == "request")[ok]
    order = np.lexsort((workers, steps))
    steps, workers, starts, ends, is_req = steps[order], workers[order], starts[order], ends[order], is_req[order]
    cut = np.flatnonzero((np.diff(steps) != 0) | (np.diff(workers) != 0)) + 1
    wfirst = t.workers.drop_duplicates(["step", "worker"]).set_index(["step", "worker"])
    columns = ["step", "worker", "start_ns", "end_ns"]
    rows = (
        _RowsByWorker(t.requests, [*columns, "request_row"]),
        _RowsByWorker(t.events, [*columns, "kind", "event", "request_span"]),
    )
    for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(steps)], strict=True):
        step, worker = int(steps[lo]), int(workers[lo])
        times = np.unique(np.concatenate([starts[lo:hi], ends[lo:hi]]))
        if len(times) < 2:
            continue
        gaps = np.diff(times) / 1e9
        limit = max(th.idle_gap_min_s, th.idle_gap_rel * float(t.median_worker_s.get(step, 0.0)))
        big = np.flatnonzero(gaps >= limit)
        if not len(big):
            continue
        req = is_req[lo:hi]
        req_start, req_end = starts[lo:hi][req], ends[lo:hi][req]
        wrow = wfirst.loc[(step, worker)] if (step, worker) in wfirst.index else None
        wstart = int(wrow["start_ns"]) if wrow is not None else int(times[0])
        for i in big:
            a, b = int(times[i]), int(times[i + 1])
            if int(((req_start <= a) & (req_end >= b)).sum()) < th.idle_gap_min_inflight:
                continue
            found = _gap_finding(t, th, rows, step, worker, a, b, wstart, wrow, limit)
            if found is not None:
                out.append(found)
    return out


BUSY_KINDS = ("reward", "tool", "tool_parse", "preprocess")
"""A request inside one of these across a gap is busy with its own (slow) work, not waiting on the engine."""


class _RowsByWorker:
    """Some columns of a table's rows of each (step, worker), grouped once on first use.

    Why: each gap used to filter the whole events table (1.5M rows at 2M spans, every column) twice;
    with a hundred gaps that was most of the analysis.
    """

    def __init__(self, df: pd.DataFrame, columns: list[str]) -> None:
        self._df = df[columns]
        self._groups: dict[Any, np.ndarray] | None = None

    def of(self, step: int, worker: int) -> pd.DataFrame:
        if self._groups is None:
            df = self._df
            self._groups = {} if df.empty else df.groupby([df["step"], df["worker"]], sort=False).indices
        idx = self._groups.get((step, worker))
        return self._df.iloc[idx] if idx is not None else self._df.iloc[:0]


def _in_flight_events(ev: pd.DataFrame, a: int, b: int) -> tuple[Counter[str], set[int]]:
    """What the requests in flight did during [a, b] (labels of one worker's events covering it), and which
    requests were busy in a non-engine event the whole time."""
    if ev.empty:
        return Counter(), set()
    m = (ev["start_ns"] <= a).to_numpy() & (ev["end_ns"] >= b).to_numpy() & (ev["kind"] != "other").to_numpy()
    cover = ev.loc[m, ["event", "kind", "request_span"]]
    busy = {int(r) for r in cover.loc[cover["kind"].isin(BUSY_KINDS), "request_span"]}
    return Counter(str(e) for e in cover["event"]), busy


def _gap_finding(
    t: Tables,
    th: Thresholds,
    rows: tuple[_RowsByWorker, _RowsByWorker],
    step: int,
    worker: int,
    a: int,
    b: int,
    wstart: int,
    wrow: Any,
    limit: float,
) -> Finding | None:
    """An idle gap, or None when fewer than ``idle_gap_min_inflight`` of the requests in flight were waiting
    on the engine: requests sitting in their own slow reward or tool call are slow events, not a stall."""
    r = rows[0].of(step, worker)
    inflight = r[((r["start_ns"] <= a) & (r["end_ns"] >= b)).fillna(False).to_numpy(dtype=bool)]
    doing, busy = _in_flight_events(rows[1].of(step, worker), a, b)
    waiting = int((~inflight["request_row"].isin(list(busy))).sum())
    if waiting < th.idle_gap_min_inflight:
        return None
    length = (b - a) / 1e9
    rel_a, rel_b = (a - wstart) / 1e9, (b - wstart) / 1e9
    listed = ", ".join(f"{e} ×{n}" for e, n in doing.most_common())
    what = f"; the requests in flight were in: {listed}" if doing else ""
    return Finding(
        kind="idle_gap",
        severity=severity(length, t.median_rollout_s, th, limit),
        step=step,
        worker=worker,
        metric="gap_s",
        value=length,
        baseline=limit,
        impact_s=length,
        evidence=evidence(wrow["trace_id"], wrow["span_id"]) if wrow is not None else [],
        window_ns=(a, b),
        details={"pattern": "idle_gap", "gap_start_s": rel_a, "gap_end_s": rel_b, "in_flight": len(inflight)},
        message=(
            f"worker {worker} in step {step}: {len(inflight)} requests in flight but nothing started or "
            f"finished for {fmt_s(length)} (from {fmt_s(rel_a)} to {fmt_s(rel_b)} after the worker "
            f"started); the engine made no visible progress{what}"
        ),
    )


# ------------------------------------------------------------------ stragglers
def _dominant_event(t: Tables, request_row: int) -> tuple[str, float, Any, Any, Any]:
    """The event (label, seconds, turn, trace, span) that took most of one request's time."""
    row = t.dominant_event_rows.get(request_row)
    if row is None:
        return ("", 0.0, None, None, None)
    top = t.events.loc[row]
    turn = top["turn_index"]
    return (
        str(top["event"]),
        float(top["duration"]),
        None if pd.isna(turn) else int(turn),
        top["trace_id"],
        top["span_id"],
    )


def _event_phrase(label: str, turn: Any) -> str:
    return f"the {label} call of turn index {turn}" if turn is not None and label == "engine" else label


def _cause(t: Tables, step: Any, worker: int, excess: float, gaps: list[Finding]) -> str:
    """Why a straggler was late: its largest idle gap or process stall, else its last request's main event."""
    mine = [g for g in gaps if g.step == step and g.worker == worker]
    if mine:
        g = max(mine, key=lambda f: f.value)
        what = "a process stall" if g.details.get("pattern") == "process_stall" else "one idle gap"
        return (
            f"; {min(1.0, g.value / excess):.0%} of that is {what} from {fmt_s(g.details['gap_start_s'])} to "
            f"{fmt_s(g.details['gap_end_s'])}"
        )
    reqs = t.requests[((t.requests["step"] == step) & (t.requests["worker"] == worker)).fillna(False)]
    if len(reqs):
        last = reqs.loc[reqs["end_ns"].idxmax()]
        label, dur, turn, _, _ = _dominant_event(t, int(last["request_row"]))
        if label:
            return f"; its last request {last['request_id']} spent {fmt_s(dur)} in {_event_phrase(label, turn)}"
    return _bucket_cause(t, step, worker)


def _bucket_cause(t: Tables, step: Any, worker: int) -> str:
    """For logs without requests: the event that took this worker longest compared with the step's median worker."""
    ws = t.worker_seconds
    ws = ws[(ws["step"] == step) & ~ws["event"].isin(("barrier", "idle"))] if len(ws) else ws
    if ws.empty:
        return ""
    wide = ws.pivot_table(index="worker", columns="event", values="seconds", aggfunc="sum").fillna(0.0)
    if worker not in wide.index or len(wide) < 2:
        return ""
    excess = wide.loc[worker] - wide.median()
    event = str(excess.idxmax())
    if excess[event] <= 0:
        return ""
    return f"; its {event} took {fmt_s(wide.loc[worker, event])}, the median worker's {fmt_s(wide[event].median())}"


def find_stragglers(t: Tables, th: Thresholds, gaps: list[Finding]) -> list[Finding]:
    """Workers finishing far after the step's median worker, with what the others paid at the barrier."""
    out: list[Finding] = []
    for step, grp in t.workers.groupby("step"):
        if len(grp) < 2:
            continue
        rel_end = (grp["end_ns"] - grp["start_ns"].min()) / 1e9
        med_end = float(np.median(rel_end))
        limit = max(th.straggler_min_s, th.straggler_rel * float(np.median(grp["duration"])))
        for idx in grp.index[(rel_end - med_end) >= limit]:
            row = grp.loc[idx]
            worker = int(row["worker"])
            excess = float(rel_end[idx] - med_end)
            others = grp[grp.index != idx]
            wait = float(others["barrier_s"].sum()) if others["barrier_s"].notna().any() else float("nan")
            waited = (
                f"; the other {len(others)} workers waited {fmt_s(wait)} in total at the barrier"
                if np.isfinite(wait)
                else ""
            )
            out.append(
                Finding(
                    kind="straggler_worker",
                    severity=severity(excess, t.median_rollout_s, th, limit),
                    step=int(step),
                    worker=worker,
                    metric="finish_after_median_s",
                    value=excess,
                    baseline=med_end,
                    impact_s=excess,
                    evidence=evidence(row["trace_id"], row["span_id"]),
                    details={"others_barrier_wait_s": wait},
                    message=(
                        f"worker {worker} finished {fmt_s(excess)} after the median worker in step {step}"
                        f"{_cause(t, step, worker, excess, gaps)}{waited}"
                    ),
                )
            )
    return out


# ------------------------------------------------------------------ slow steps
def find_slow_steps(t: Tables, th: Thresholds, stragglers: list[Finding]) -> list[Finding]:
    """Steps whose rollout took far longer than the other steps' (leave-one-out robust baseline)."""
    out: list[Finding] = []
    s = t.steps
    if len(s) < th.slow_step_min_steps + 1:
        return out
    vals = pd.to_numeric(s["rollout_s"], errors="coerce").to_numpy(dtype=float)
    for i, row in s.reset_index(drop=True).iterrows():
        others = np.delete(vals, i)
        med, mad = model.robust_baseline(others, floor=0.05 * float(np.nanmedian(others)))
        v = float(vals[i])
        if not far_above(v, med, mad, th.slow_step_k, th.slow_step_ratio, th.slow_step_min_s):
            continue
        step = int(row["step"])
        culprit = [f for f in stragglers if f.step == step]
        why = f"; {culprit[0].message}" if culprit else ""
        out.append(
            Finding(
                kind="slow_step",
                severity="critical" if v >= 3 * med and v - med >= th.critical_min_s else "warning",
                step=step,
                metric="rollout_s",
                value=v,
                baseline=med,
                impact_s=v - med,
                evidence=evidence(row["trace_id"], row["span_id"]),
                message=f"step {step} rollout took {fmt_s(v)}, {v / med:.1f}× the median of the other steps "
                f"({fmt_s(med)}){why}",
            )
        )
    return out


# ------------------------------------------------------------------ tail requests
def find_tail_requests(t: Tables, th: Thresholds) -> list[Finding]:
    """Requests beyond the step's P99 (and far above its median), named with the event that dominated them."""
    out: list[Finding] = []
    for step, grp in t.requests.groupby("step"):
        if len(grp) < 10:
            continue
        q = float(grp["duration"].quantile(th.tail_quantile))
        med = float(grp["duration"].median())
        tail = grp[(grp["duration"] > q) & (grp["duration"] >= th.tail_ratio * med)]
        for _, row in tail.nlargest(th.tail_max_per_step, "duration").iterrows():
            label, dur, turn, tid, sid = _dominant_event(t, int(row["request_row"]))
            d = float(row["duration"])
            dom = f"; {fmt_s(dur)} of it ({dur / d:.0%}) in {_event_phrase(label, turn)}" if label else ""
            out.append(
                Finding(
                    kind="tail_request",
                    severity="info",
                    step=int(step),
                    worker=_opt_int(row["worker"]),
                    request_id=str(row["request_id"]),
                    event=label or None,
                    metric="duration_s",
                    value=d,
                    baseline=q,
                    impact_s=d - med,
                    evidence=evidence(row["trace_id"], row["span_id"]) + evidence(tid, sid),
                    details={"p50_s": med, "turn_index": turn},
                    message=f"request {row['request_id']} (worker {_opt_int(row['worker'])}, step {step}) took "
                    f"{fmt_s(d)}, above the step's P{th.tail_quantile * 100:g} of {fmt_s(q)}{dom}",
                )
            )
    return out


def _opt_int(v: Any) -> int | None:
    return None if pd.isna(v) else int(v)


# ------------------------------------------------------------------ aborted waste
def aborted_per_step(t: Tables) -> pd.DataFrame:
    """Per step: aborted requests, their tokens and seconds, and the share of request-seconds they used."""
    r = t.requests
    cols = ["step", "requests", "aborted", "tokens_wasted", "seconds_wasted", "request_seconds", "waste_fraction"]
    r = r[r["step"].notna()] if len(r) else r
    if r.empty:
        return pd.DataFrame(columns=cols)
    ab = r["request_status"] == "aborted"
    tokens = pd.to_numeric(r["response_tokens"], errors="coerce")
    eng = t.events.loc[(t.events["kind"] == "engine").to_numpy(), ["output_tokens", "request_span"]]
    out_tok = pd.to_numeric(eng["output_tokens"], errors="coerce").groupby(eng["request_span"]).sum()
    tokens = tokens.fillna(r["request_row"].map(out_tok)).fillna(0)
    df = pd.DataFrame(
        {
            "step": r["step"],
            "ab": ab,
            "tok": tokens.where(ab, 0),
            "sec": r["duration"].where(ab, 0),
            "dur": r["duration"],
        }
    )
    g = df.groupby("step")
    out = pd.DataFrame(
        {
            "requests": g.size(),
            "aborted": g["ab"].sum(),
            "tokens_wasted": g["tok"].sum(),
            "seconds_wasted": g["sec"].sum(),
            "request_seconds": g["dur"].sum(),
        }
    )
    out["waste_fraction"] = out["seconds_wasted"] / out["request_seconds"].where(out["request_seconds"] > 0)
    return out.reset_index()[cols]


def find_aborted_waste(t: Tables, th: Thresholds) -> list[Finding]:
    """Over-sampled/aborted requests: count, tokens and seconds thrown away per step."""
    out: list[Finding] = []
    for _, row in aborted_per_step(t).iterrows():
        if row["aborted"] <= 0:
            continue
        frac = float(row["waste_fraction"]) if pd.notna(row["waste_fraction"]) else 0.0
        step = int(row["step"])
        ex = t.requests[((t.requests["step"] == step) & (t.requests["request_status"] == "aborted")).fillna(False)]
        evs = [e for _, x in ex.head(5).iterrows() for e in evidence(x["trace_id"], x["span_id"])]
        out.append(
            Finding(
                kind="aborted_waste",
                severity="warning" if frac >= th.aborted_warn_fraction else "info",
                step=step,
                metric="seconds_wasted",
                value=float(row["seconds_wasted"]),
                baseline=float(row["request_seconds"]),
                impact_s=float(row["seconds_wasted"]),
                evidence=evs,
                details={
                    "aborted": int(row["aborted"]),
                    "requests": int(row["requests"]),
                    "tokens_wasted": int(row["tokens_wasted"]),
                    "waste_fraction": frac,
                },
                message=f"step {step}: {int(row['aborted'])} of {int(row['requests'])} requests were aborted, "
                f"throwing away {int(row['tokens_wasted'])} tokens and {fmt_s(float(row['seconds_wasted']))} "
                f"of request time ({frac:.0%})",
            )
        )
    return out


# ------------------------------------------------------------------ all together
def diagnose(spans: pd.DataFrame, thresholds: Thresholds | None = None, tables: Tables | None = None) -> list[Finding]:
    """Every detector, capped per kind, sorted by severity then impact."""
    th = thresholds or Thresholds()
    t = tables or Tables.build(spans)
    gaps = find_idle_gaps(t, th)
    flagged = anomalies.flag_all(t, th)
    # what a slow event cost is measured against the worker's unaffected requests (no anomaly, gap or stall)
    flagged_rows = {int(r) for r in flagged["request_span"] if r >= 0}
    flagged = anomalies.fold_into_gaps(flagged, gaps, th)
    stall_found, flagged = stalls.find_process_stalls(t, th, flagged)
    stragglers = find_stragglers(t, th, gaps + stall_found)
    found = (
        gaps
        + stall_found
        + stragglers
        + find_slow_steps(t, th, stragglers)
        + find_tail_requests(t, th)
        + anomalies.group_findings(t, th, flagged, flagged_rows)
        + find_aborted_waste(t, th)
        + find_incomplete_workers(spans)
        + find_missing_workers(t)
    )
    capped: list[Finding] = []
    per_kind: dict[str, int] = {}
    for f in sort_findings(found):
        per_kind[f.kind] = per_kind.get(f.kind, 0) + 1
        if per_kind[f.kind] <= th.max_findings_per_kind:
            capped.append(f)
    return capped
