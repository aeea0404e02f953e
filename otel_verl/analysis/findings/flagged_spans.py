"""Flagged spans (slow_event and turn_anomaly candidates) → findings, rated by what they cost their worker.

Pipeline (run by :func:`otel_verl.analysis.findings.diagnose.diagnose`): :mod:`.slow_events` and
:mod:`.turn_anomalies` flag every span far above the norm of its event type (or turn index);
:func:`fold_into_gaps` drops those an idle gap stretched (only when the span overlaps it);
:mod:`.process_stalls` takes the bursts a paused process released; :func:`group_findings` reports what is
left once per (step, worker, event[, turn index]) with a count."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.record import Finding, evidence, fmt_range, fmt_s
from otel_verl.analysis.findings.thresholds import Thresholds, severity
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.baseline import robust_baseline

FLAG_COLUMNS = [
    "kind",
    "event",
    "step",
    "worker",
    "request_span",
    "request_id",
    "turn_index",
    "start_ns",
    "end_ns",
    "value",
    "baseline",
    "trace_id",
    "span_id",
]


MAX_FLAGGED_PER_TYPE = 5000
"""Flagged spans kept per event type (slowest first): a pathological run still diagnoses in seconds."""


def empty_flags() -> pd.DataFrame:
    df = pd.DataFrame({c: pd.Series(dtype=object) for c in FLAG_COLUMNS})
    return df.astype({"request_span": np.int64, "start_ns": np.int64, "end_ns": np.int64, "value": float})


def flag_rows(t: Tables, hit: pd.DataFrame, kind: str, event: str, value: str, med: float) -> pd.DataFrame:
    rs = hit["request_span"].to_numpy(dtype=np.int64)
    # positions first, then objects: converting the whole 2M-row Arrow column per event type took seconds
    rid = t.spans["request_id"].iloc[np.where(rs >= 0, rs, 0)].to_numpy(dtype=object)
    return pd.DataFrame(
        {
            "kind": kind,
            "event": event,
            "step": hit["step"].to_numpy(),
            "worker": hit["worker"].to_numpy(),
            "request_span": rs,
            "request_id": np.where(rs >= 0, rid, None),
            "turn_index": hit["turn_index"].to_numpy(),
            "start_ns": hit["start_ns"].to_numpy(),
            "end_ns": hit["end_ns"].to_numpy(),
            "value": hit[value].to_numpy(dtype=float),
            "baseline": med,
            "trace_id": hit["trace_id"].to_numpy(),
            "span_id": hit["span_id"].to_numpy(),
        }
    )


def far_above_norm(values: pd.Series, k: float, ratio: float, min_s: float) -> tuple[pd.Series, float]:
    med, mad = robust_baseline(values.to_numpy())
    return (values > med + k * mad) & (values >= ratio * med) & (values - med >= min_s), med


def fold_into_gaps(flagged: pd.DataFrame, gaps: list[Finding], th: Thresholds) -> pd.DataFrame:
    """Drop the flagged spans an idle gap explains; list them on the gap.

    A span is explained when it overlaps the gap and what is left of its excess outside the gap would not
    have been flagged (below the detector's ``min_s``). Why: a stall stretches every call in flight, and
    reporting each would bury the one real cause; but a slow span that ran before or after the gap, or is
    still far too slow without it, is a culprit of its own (``details.gap_overlap_s`` says how much of it
    the gap took).
    """
    if flagged.empty or not gaps:
        return flagged
    flagged = flagged.copy()
    flagged["gap_overlap_s"] = 0.0
    keep = np.ones(len(flagged), dtype=bool)
    step, worker = flagged["step"].to_numpy(dtype=object), flagged["worker"].to_numpy(dtype=object)
    start, end = flagged["start_ns"].to_numpy(dtype=np.int64), flagged["end_ns"].to_numpy(dtype=np.int64)
    excess = (flagged["value"] - flagged["baseline"]).to_numpy(dtype=float)
    min_s = np.where(flagged["kind"].to_numpy() == "turn_anomaly", th.turn_min_s, th.event_min_s)
    for g in gaps:
        if g.window_ns is None:
            continue
        a, b = g.window_ns
        overlap = (np.minimum(end, b) - np.maximum(start, a)).clip(min=0) / 1e9
        mine = keep & (step == g.step) & (worker == g.worker) & (overlap > 0)
        flagged.loc[mine, "gap_overlap_s"] = np.maximum(flagged.loc[mine, "gap_overlap_s"], overlap[mine])
        hit = mine & (excess - overlap < min_s)
        for i in np.flatnonzero(hit):
            row = flagged.iloc[i]
            key = "stretched_" + str(row["kind"])
            g.details[key] = g.details.get(key, 0) + 1
            listed = g.details.setdefault("stretched", [])
            if len(listed) < 20:
                listed.append(
                    {
                        "kind": str(row["kind"]),
                        "event": str(row["event"]),
                        "request_id": row["request_id"],
                        "turn_index": None if pd.isna(row["turn_index"]) else int(row["turn_index"]),
                        "overlap_s": round(float(overlap[i]), 3),
                    }
                )
        keep &= ~hit
    return flagged[keep]


def _normal_end(t: Tables, flagged_rows: set[int]) -> dict[tuple[int, int], int]:
    """Per (step, worker): when its last unaffected request ended (no slow span of its own, none a gap or a
    stall stretched), else the worker start."""
    r = t.requests
    out: dict[tuple[int, int], int] = {}
    for _, w in t.workers.iterrows():
        out[(int(w["step"]), int(w["worker"]))] = int(w["start_ns"])
    if r.empty:
        return out
    normal = r[~r["request_row"].isin(list(flagged_rows)) & r["step"].notna() & r["worker"].notna()]
    for (s, w), end in normal.groupby(["step", "worker"])["end_ns"].max().items():
        out[(int(s), int(w))] = int(end)
    return out


def group_findings(t: Tables, th: Thresholds, flagged: pd.DataFrame, flagged_rows: set[int]) -> list[Finding]:
    """One finding per (kind, step, worker, event[, turn index]), rated by how much later it made its worker finish.

    Groups are summarized and rated in one pass; Finding objects (messages, evidence) are built only for the
    ``max_findings_per_kind`` most severe and costly groups of each kind (a 2M-span run has thousands of groups).
    """
    if flagged.empty:
        return []
    f = flagged.copy()
    f["excess"] = f["value"] - f["baseline"]
    req_end = t.requests.set_index("request_row")["end_ns"] if len(t.requests) else pd.Series(dtype=np.int64)
    f["req_end"] = f["request_span"].map(req_end).fillna(f["end_ns"]).astype(np.int64)
    if "gap_overlap_s" not in f:
        f["gap_overlap_s"] = 0.0
    f["turn_key"] = f["turn_index"].where(f["kind"] == "turn_anomaly", -1).fillna(-1).astype(np.int64)
    # spans a gap partly stretched are a different story from spans slow on their own: not one finding
    f["in_gap"] = f["gap_overlap_s"] > 0
    f["step_key"] = f["step"].fillna(-1).astype(np.int64)
    f["worker_key"] = f["worker"].fillna(-1).astype(np.int64)
    keys = ["kind", "step_key", "worker_key", "event", "turn_key", "in_gap"]
    groups = f.groupby(keys, sort=False)
    summ = groups.agg(excess=("excess", "max"), last=("req_end", "max")).reset_index()
    normal_end = _normal_end(t, flagged_rows)
    base = [normal_end.get((int(s), int(w))) for s, w in zip(summ["step_key"], summ["worker_key"], strict=True)]
    summ["base"] = base
    summ["cost"] = [
        e if b is None else float(np.clip((last - b) / 1e9, 0.0, e))
        for e, last, b in zip(summ["excess"], summ["last"], base, strict=True)
    ]
    med = t.median_rollout_s
    summ["severity"] = [
        severity(c, med, th, th.turn_min_s if k == "turn_anomaly" else th.event_min_s)
        for c, k in zip(summ["cost"], summ["kind"], strict=True)
    ]
    summ["rank"] = summ["severity"].map({"critical": 0, "warning": 1, "info": 2})
    summ = summ.sort_values(["rank", "cost"], ascending=[True, False])
    top = summ.groupby("kind", sort=False).head(th.max_findings_per_kind)
    wstart = {(int(w["step"]), int(w["worker"])): int(w["start_ns"]) for _, w in t.workers.iterrows()}
    out = []
    for row in top.itertuples(index=False):
        g = groups.get_group(tuple(getattr(row, k) for k in keys)).sort_values("value", ascending=False)
        step, worker, ti = _opt(row.step_key), _opt(row.worker_key), _opt(row.turn_key)
        out.append(_finding(th, g, str(row.kind), step, worker, str(row.event), ti, row, wstart))
    return out


def _opt(v: Any) -> int | None:
    return None if pd.isna(v) or int(v) < 0 else int(v)


def _finding(
    th: Thresholds,
    g: pd.DataFrame,
    kind: str,
    step: int | None,
    worker: int | None,
    label: str,
    ti: int | None,
    rated: Any,
    wstart: dict[tuple[int, int], int],
) -> Finding:
    """The finding of one group; ``rated`` carries its cost, severity and the worker's unaffected end (base)."""
    top = g.iloc[0]
    med = float(top["baseline"])
    excess, cost, sev = float(rated.excess), float(rated.cost), str(rated.severity)
    base = None if rated.base is None or pd.isna(rated.base) else int(rated.base)
    key = (step, worker) if step is not None and worker is not None else None
    rids = list(dict.fromkeys(r for r in g["request_id"] if isinstance(r, str)))
    w0 = wstart.get(key) if key else None
    where = f"worker {_s(worker)}, step {_s(step)}"
    if w0 is not None:
        where += (
            f", {fmt_s((int(g['start_ns'].min()) - w0) / 1e9)} to {fmt_s((int(g['end_ns'].max()) - w0) / 1e9)} "
            "after the worker started"
        )
    n = len(g)
    took = fmt_range(float(g["value"].min()), float(g["value"].max()))
    if kind == "turn_anomaly":
        what = f"turn index {_s(ti)}"
        head = (
            f"the engine call of {what} of request {rids[0] if rids else '?'} ({where}) spent {took} in the engine"
            if n == 1
            else f"the engine call of {what} spent {took} in the engine in {n} requests "
            f"({where}; slowest: {rids[0] if rids else '?'})"
        )
        norm = f"{what} usually takes {fmt_s(med)}"
    else:
        head = (
            f"{label} took {took} for request {rids[0] if rids else '?'} ({where})"
            if n == 1
            else f"{label} took {took} in {n} requests ({where}; slowest: {rids[0] if rids else '?'})"
        )
        ratio = float(top["value"]) / med if med else float("inf")
        norm = f"a {label} usually takes {fmt_s(med)} ({ratio:.0f}× slower)"
    end_rel = fmt_s((base - w0) / 1e9) if base is not None and w0 is not None else "?"
    if base is None:
        effect = ""
    elif cost > 0:
        effect = (
            f"; it kept worker {_s(worker)} busy {fmt_s(cost)} past its last unaffected request (done at {end_rel})"
        )
    else:
        effect = f"; it did not delay worker {_s(worker)}: its unaffected requests ran until {end_rel}"
    evs = [e for _, x in g.head(5).iterrows() for e in evidence(x["trace_id"], x["span_id"])]
    details: dict[str, Any] = {
        "count": n,
        "request_ids": rids[:20],
        "excess_s": excess,
        "worker_delay_s": cost,
    }
    if w0 is not None:
        details["first_start_s"] = (int(g["start_ns"].min()) - w0) / 1e9
        details["last_end_s"] = (int(g["end_ns"].max()) - w0) / 1e9
    if kind == "turn_anomaly":
        details["turn_index"] = ti
    in_gap = float(g["gap_overlap_s"].max())
    if in_gap > 0:
        details["gap_overlap_s"] = in_gap
        effect += f"; up to {fmt_s(in_gap)} of it was inside an idle gap of the worker, the rest is its own"
    return Finding(
        kind=kind,
        severity=sev,
        step=step,
        worker=worker,
        request_id=rids[0] if rids else None,
        event=label,
        metric="engine_s" if kind == "turn_anomaly" else "duration_s",
        value=float(top["value"]),
        baseline=med,
        impact_s=cost,
        evidence=evs,
        details=details,
        window_ns=(int(g["start_ns"].min()), int(g["end_ns"].max())),
        message=f"{head}; {norm}{effect}",
    )


def _s(v: Any) -> str:
    return "?" if v is None else str(v)
