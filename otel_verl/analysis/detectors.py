"""One function per finding kind; :func:`diagnose` runs them all and orders the result.

Each detector takes the span table (plus the shared derived tables) and returns findings; none
hard-codes steps, workers or counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis import model
from otel_verl.analysis.findings import Finding, evidence, fmt_s, sort_findings
from otel_verl.analysis.incomplete import find_incomplete_workers
from otel_verl.analysis.load import lookup
from otel_verl.analysis.thresholds import Thresholds, far_above


@dataclass
class Tables:
    """Derived tables computed once per diagnosis."""

    spans: pd.DataFrame
    steps: pd.DataFrame
    workers: pd.DataFrame
    requests: pd.DataFrame
    events: pd.DataFrame

    @classmethod
    def build(cls, spans: pd.DataFrame) -> Tables:
        sp = model.training_spans(spans)  # once: each table used to filter (and copy) the span table again
        steps = model.steps_table(spans, sp=sp)
        workers = model.workers_table(spans, sp=sp)
        return cls(
            spans,
            steps,
            workers,
            model.requests_table(spans, sp=sp, steps=steps, workers=workers),
            model.events_table(spans, sp=sp),
        )

    @cached_property
    def dominant_event_rows(self) -> pd.Series:
        """Row label in ``events`` of each request's longest event, by request span row (one groupby for all)."""
        ev = self.events
        if ev.empty:
            return pd.Series(dtype=np.int64)
        return ev["duration"].groupby(ev["request_span"].to_numpy()).idxmax()

    @property
    def median_rollout_s(self) -> float:
        return float(np.nanmedian(self.steps["rollout_s"])) if len(self.steps) else float("nan")


def _severity(excess_s: float, t: Tables, th: Thresholds, base: str = "warning") -> str:
    med = t.median_rollout_s
    return "critical" if np.isfinite(med) and med > 0 and excess_s >= th.critical_fraction * med else base


# ------------------------------------------------------------------ idle gaps
def find_idle_gaps(t: Tables, th: Thresholds) -> list[Finding]:
    """Stretches of a worker's step with requests in flight but no span starting or ending anywhere below it."""
    out: list[Finding] = []
    sp = t.spans
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
    med_worker = t.workers.groupby("step")["duration"].median()
    wfirst = t.workers.drop_duplicates(["step", "worker"]).set_index(["step", "worker"])
    for lo, hi in zip(np.r_[0, cut], np.r_[cut, len(steps)], strict=True):
        step, worker = int(steps[lo]), int(workers[lo])
        times = np.unique(np.concatenate([starts[lo:hi], ends[lo:hi]]))
        if len(times) < 2:
            continue
        gaps = np.diff(times) / 1e9
        limit = max(th.idle_gap_min_s, th.idle_gap_rel * float(med_worker.get(step, 0.0)))
        big = np.flatnonzero(gaps >= limit)
        if not len(big):
            continue
        req = is_req[lo:hi]
        req_start, req_end = starts[lo:hi][req], ends[lo:hi][req]
        wrow = wfirst.loc[(step, worker)] if (step, worker) in wfirst.index else None
        wstart = int(wrow["start_ns"]) if wrow is not None else int(times[0])
        for i in big:
            a, b = times[i], times[i + 1]
            inflight = int(((req_start <= a) & (req_end >= b)).sum())
            if inflight < th.idle_gap_min_inflight:
                continue
            length = (b - a) / 1e9
            ev = evidence(wrow["trace_id"], wrow["span_id"]) if wrow is not None else []
            rel_a, rel_b = (a - wstart) / 1e9, (b - wstart) / 1e9
            out.append(
                Finding(
                    kind="idle_gap",
                    severity=_severity(length, t, th),
                    step=step,
                    worker=worker,
                    metric="gap_s",
                    value=length,
                    baseline=limit,
                    impact_s=length,
                    evidence=ev,
                    details={"gap_start_s": rel_a, "gap_end_s": rel_b, "in_flight": inflight},
                    message=(
                        f"worker {worker} in step {step}: {inflight} requests in flight but nothing started or "
                        f"finished for {fmt_s(length)} (from {fmt_s(rel_a)} to {fmt_s(rel_b)} after the worker "
                        f"started); the engine made no visible progress"
                    ),
                )
            )
    return out


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
    return f"{label} call in turn {turn + 1}" if turn is not None and label == "engine" else label


def find_stragglers(t: Tables, th: Thresholds, gaps: list[Finding]) -> list[Finding]:
    """Workers finishing far after the step's median worker, with what the others paid at the barrier."""
    out: list[Finding] = []
    w = t.workers
    for step, grp in w.groupby("step"):
        if len(grp) < 2:
            continue
        rel_end = (grp["end_ns"] - grp["start_ns"].min()) / 1e9
        med_end = float(np.median(rel_end))
        med_dur = float(np.median(grp["duration"]))
        limit = max(th.straggler_min_s, th.straggler_rel * med_dur)
        for idx in grp.index[(rel_end - med_end) >= limit]:
            row = grp.loc[idx]
            worker = int(row["worker"])
            excess = float(rel_end[idx] - med_end)
            others = grp[grp.index != idx]
            wait = float(others["barrier_s"].sum()) if others["barrier_s"].notna().any() else float("nan")
            cause = ""
            my_gaps = [g for g in gaps if g.step == step and g.worker == worker]
            if my_gaps:
                g = max(my_gaps, key=lambda f: f.value)
                share = min(1.0, g.value / excess)
                cause = (
                    f"; {share:.0%} of that is one idle gap from {fmt_s(g.details['gap_start_s'])} to "
                    f"{fmt_s(g.details['gap_end_s'])}"
                )
            else:
                reqs = t.requests[(t.requests["step"] == step) & (t.requests["worker"] == worker)]
                if len(reqs):
                    last = reqs.loc[reqs["end_ns"].idxmax()]
                    label, dur, turn, _, _ = _dominant_event(t, int(last["request_row"]))
                    if label:
                        cause = (
                            f"; its last request {last['request_id']} spent {fmt_s(dur)} in "
                            f"{_event_phrase(label, turn)}"
                        )
            waited = (
                f"; the other {len(others)} workers waited {fmt_s(wait)} in total at the barrier"
                if np.isfinite(wait)
                else ""
            )
            out.append(
                Finding(
                    kind="straggler_worker",
                    severity=_severity(excess, t, th),
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
                        f"{cause}{waited}"
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
    vals = s["rollout_s"].to_numpy(dtype=float)
    for i, row in s.iterrows():
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
                severity="critical" if v >= 3 * med else "warning",
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
                    message=f"request {row['request_id']} (worker {row['worker']}, step {step}) took {fmt_s(d)}, "
                    f"above the step's P{th.tail_quantile * 100:g} of {fmt_s(q)}{dom}",
                )
            )
    return out


def _opt_int(v: Any) -> int | None:
    return None if pd.isna(v) else int(v)


# ------------------------------------------------------------------ slow events
def find_slow_events(t: Tables, th: Thresholds) -> list[Finding]:
    """Single reward/tool/preprocess/parse spans far slower than their own event type's norm."""
    out: list[Finding] = []
    cols = ["event", "duration", "request_span", "step", "worker", "trace_id", "span_id"]
    kind = t.events["kind"]
    # an unknown span inside a known event (the engine's own span under text_completion, verl.reward.compute
    # under verl.reward) is that event's inside: the event's own finding already names it
    other = (kind == "other").to_numpy()
    inner = np.zeros(len(kind), dtype=bool)
    if other.any():  # hash lookup, and only for "other" rows: isin on 2M Arrow strings took seconds
        inner[other] = lookup(t.events.loc[other, "parent_id"], t.events.loc[~other, "span_id"]) >= 0
    ev = t.events.loc[((kind != "engine") & ~inner).to_numpy(), cols]
    for label, grp in ev.groupby("event"):
        med, mad = model.robust_baseline(grp["duration"].to_numpy())
        limit_mask = (
            (grp["duration"] > med + th.event_k * mad)
            & (grp["duration"] >= th.event_ratio * med)
            & (grp["duration"] - med >= th.event_min_s)
        )
        for _, row in grp[limit_mask].nlargest(th.max_findings_per_kind, "duration").iterrows():
            d = float(row["duration"])
            rid = t.spans.at[int(row["request_span"]), "request_id"] if row["request_span"] >= 0 else None
            out.append(
                Finding(
                    kind="slow_event",
                    severity=_severity(d - med, t, th),
                    step=_opt_int(row["step"]),
                    worker=_opt_int(row["worker"]),
                    request_id=None if pd.isna(rid) else str(rid),
                    event=str(label),
                    metric="duration_s",
                    value=d,
                    baseline=med,
                    impact_s=d - med,
                    evidence=evidence(row["trace_id"], row["span_id"]),
                    message=f"{label} took {fmt_s(d)} for request {rid} (worker {row['worker']}, step {row['step']}); "
                    f"a {label} usually takes {fmt_s(med)} ({d / med if med else float('inf'):.0f}× slower)",
                )
            )
    return out


# ------------------------------------------------------------------ turn anomalies
def turn_engine_times(t: Tables) -> pd.DataFrame:
    """Engine seconds per turn span (sum of its engine calls), with step/worker/turn index."""
    cols = ["turn_span", "duration", "step", "worker", "turn_index", "request_span", "trace_id", "span_id"]
    eng = t.events.loc[((t.events["kind"] == "engine") & (t.events["turn_span"] >= 0)).to_numpy(), cols]
    if eng.empty:
        return pd.DataFrame(
            columns=["turn_span", "engine_s", "step", "worker", "turn_index", "request_span", "trace_id", "span_id"]
        )
    g = eng.groupby("turn_span")
    out = pd.DataFrame(
        {
            "engine_s": g["duration"].sum(),
            "step": g["step"].first(),
            "worker": g["worker"].first(),
            "turn_index": g["turn_index"].first(),
            "request_span": g["request_span"].first(),
            "trace_id": g["trace_id"].first(),
            "span_id": g["span_id"].first(),
        }
    )
    return out.reset_index()


def find_turn_anomalies(t: Tables, th: Thresholds) -> list[Finding]:
    """A turn whose engine time is far above the norm for that turn index (across all steps)."""
    out: list[Finding] = []
    turns = turn_engine_times(t)
    for ti, grp in turns.groupby("turn_index"):
        med, mad = model.robust_baseline(grp["engine_s"].to_numpy())
        mask = (
            (grp["engine_s"] > med + th.turn_k * mad)
            & (grp["engine_s"] >= th.turn_ratio * med)
            & (grp["engine_s"] - med >= th.turn_min_s)
        )
        for _, row in grp[mask].nlargest(th.max_findings_per_kind, "engine_s").iterrows():
            v = float(row["engine_s"])
            rid = t.spans.at[int(row["request_span"]), "request_id"] if row["request_span"] >= 0 else None
            out.append(
                Finding(
                    kind="turn_anomaly",
                    severity=_severity(v - med, t, th),
                    step=_opt_int(row["step"]),
                    worker=_opt_int(row["worker"]),
                    request_id=None if pd.isna(rid) else str(rid),
                    event="engine",
                    metric="engine_s",
                    value=v,
                    baseline=med,
                    impact_s=v - med,
                    evidence=evidence(row["trace_id"], row["span_id"]),
                    details={"turn_index": int(ti)},
                    message=f"turn {int(ti) + 1} of request {rid} (worker {row['worker']}, step {row['step']}) spent "
                    f"{fmt_s(v)} in the engine; turn {int(ti) + 1} usually takes {fmt_s(med)}",
                )
            )
    return out


# ------------------------------------------------------------------ aborted waste
def aborted_per_step(t: Tables) -> pd.DataFrame:
    """Per step: aborted requests, their tokens and seconds, and the share of request-seconds they used."""
    r = t.requests
    if r.empty:
        return pd.DataFrame(
            columns=["step", "requests", "aborted", "tokens_wasted", "seconds_wasted", "waste_fraction"]
        )
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
    return out.reset_index()


def find_aborted_waste(t: Tables, th: Thresholds) -> list[Finding]:
    """Over-sampled/aborted requests: count, tokens and seconds thrown away per step."""
    out: list[Finding] = []
    for _, row in aborted_per_step(t).iterrows():
        if row["aborted"] <= 0:
            continue
        frac = float(row["waste_fraction"]) if pd.notna(row["waste_fraction"]) else 0.0
        step = int(row["step"])
        ex = t.requests[(t.requests["step"] == step) & (t.requests["request_status"] == "aborted")].head(5)
        evs = [e for _, x in ex.iterrows() for e in evidence(x["trace_id"], x["span_id"])]
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
def _explained_by_gaps(found: list[Finding], gaps: list[Finding], th: Thresholds) -> list[Finding]:
    """Drop turn/event anomalies that an idle gap on the same worker already explains, and count them there.

    Why: a stall stretches every engine call in flight; reporting each of them as its own turn anomaly
    would bury the one real cause.
    """
    keep: list[Finding] = []
    for f in found:
        if f.kind in ("turn_anomaly", "slow_event"):
            g = next(
                (
                    g
                    for g in gaps
                    if g.step == f.step
                    and g.worker == f.worker
                    and f.impact_s <= g.value + max(th.turn_min_s, th.event_min_s)
                ),
                None,
            )
            if g is not None:
                g.details["stretched_" + f.kind] = g.details.get("stretched_" + f.kind, 0) + 1
                continue
        keep.append(f)
    return keep


def diagnose(spans: pd.DataFrame, thresholds: Thresholds | None = None, tables: Tables | None = None) -> list[Finding]:
    """Every detector, capped per kind, sorted by severity then impact."""
    th = thresholds or Thresholds()
    t = tables or Tables.build(spans)
    gaps = find_idle_gaps(t, th)
    stragglers = find_stragglers(t, th, gaps)
    found = (
        gaps
        + stragglers
        + find_slow_steps(t, th, stragglers)
        + find_tail_requests(t, th)
        + find_slow_events(t, th)
        + find_turn_anomalies(t, th)
        + find_aborted_waste(t, th)
        + find_incomplete_workers(spans)
    )
    found = _explained_by_gaps(found, gaps, th)
    capped: list[Finding] = []
    per_kind: dict[str, int] = {}
    for f in sort_findings(found):
        per_kind[f.kind] = per_kind.get(f.kind, 0) + 1
        if per_kind[f.kind] <= th.max_findings_per_kind:
            capped.append(f)
    return capped
