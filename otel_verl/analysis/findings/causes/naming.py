"""The causes a step's account names: :func:`name_causes`.

A cause is a part of a step's account that moved (``Part.seconds`` > 0), told by what moved and where:

* the anomalies that cost the step that part's time (:mod:`.anomalies`, :mod:`.peel`) name it and its scope —
  the whole step (every worker moved: the step's cause, told once), a replica, a worker, one prompt's rollouts
  (a sample group), one request;
* what the anomalies do not cover is the usual critical path running long (more turns, a longer answer than the
  usual path's): told on the request that ended the rollout, marked ``details.tail``;
* a trainer phase is its own cause (``slow_phase``).

A cause never claims more than its step lost (its step's excess). One that recurs (the same kind at the same place:
a phase, a worker, a replica, every worker) is one finding listing its ``steps``. Severity is earned by seconds
lost and by the evidence that it is not the run's usual (:mod:`.severity`); a part far outside its norm on every
worker is told even when overlapping requests hid its cost (a note below the floor, before it costs more). No
baseline: told by its anomalies (its peers are their evidence); asynchronous: where the trainer waited (.waited_for).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.account.baselines import Baselines
from otel_verl.analysis.findings.account.step_account import Part, StepAccount, StepSpread
from otel_verl.analysis.findings.causes.cause import Cause
from otel_verl.analysis.findings.causes.messages import describe, requests_named
from otel_verl.analysis.findings.causes.phase_causes import phase_cause, phase_spreads
from otel_verl.analysis.findings.causes.severity import Judgement, Levels, carrying, judge_cause
from otel_verl.analysis.findings.causes.waited_for import the_wait_left, waited_for
from otel_verl.analysis.findings.causes.warm_up import mark_warm_up
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import SEVERITIES, Finding, evidence, sort_findings
from otel_verl.analysis.findings.common.step_cause import as_stall, told_as_stall
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.steps.step_statistics import METRIC_RATE, METRIC_TOKENS
from otel_verl.analysis.findings.steps.step_summary import BARE_WORKER

MERGED_SCOPES = (k.SCOPE_STEP, k.SCOPE_PHASE, k.SCOPE_WORKER, k.SCOPE_REPLICA)
"""Causes at these scopes recur as one finding (same kind, same place); a request or a prompt is new each step."""


def name_causes(
    accounts: list[StepAccount], spread: StepSpread, b: Baselines, th: Thresholds
) -> tuple[list[Finding], StepSpread]:
    """Every cause of every step, recurring ones merged, ranked (:func:`.record.sort_findings`), and the run's
    spread measured again without the steps those causes made slow (a slow trainer phase included, which the
    first measure could not tell)."""
    phases = phase_spreads(accounts)
    causes: list[Cause] = []
    for a in accounts:
        causes.extend(_step_causes(a, b, th, phases) if np.isfinite(a.baseline_s) else _anomalies_only(a))
    _mark_stall_echoes(causes)
    mark_warm_up(causes, accounts)
    causes = _without_members(the_wait_left(causes))
    named = {a.step: 0.0 for a in accounts}
    for c in causes:
        if not c.details.get("tail"):
            named[c.step] += c.seconds
    spread = StepSpread.of(accounts, th, np.array([named[a.step] for a in accounts]))
    kept = [c for c in causes if _reported(c, accounts, spread, th)]
    levels = {a.step: spread.without(a.step) for a in accounts}
    return sort_findings(_merge(kept, accounts, levels, th, carrying(kept, accounts, levels, th))), spread


def _mark_stall_echoes(causes: list[Cause]) -> None:
    """A stall (told as one, as the demo's) holds every request in flight on its worker, so their engine calls,
    tools, rewards, own short stalls look slow from inside it: a small cause on a stalled worker of the same step is
    the stall seen from another side, kept as a note (``details.stall_echo``) unless it cost a good share of it."""
    stalls: dict[int, list[Cause]] = {}
    for c in causes:
        if (c.kind == k.STALL or told_as_stall(c.kind, c.details | {"part": c.part})) and not c.details.get("tail"):
            stalls.setdefault(c.step, []).append(c)
    for c in causes:
        if c.step not in stalls or not c.workers or c.scope == k.SCOPE_STEP:
            continue
        for st in stalls[c.step]:
            if st is not c and set(c.workers) <= set(st.workers) and c.seconds < STALL_ECHO_SHARE * st.seconds:
                c.details["stall_echo"] = True


STALL_ECHO_SHARE = 0.1
"""...below this share of the stall's seconds (a second real cause on a stalled worker costs more than that)."""


def _spans(c: Cause) -> set[int]:
    """The request spans a cause happened in."""
    return {int(x) for x in c.requests["request_span"]} if len(c.requests) and "request_span" in c.requests else set()


def _without_members(causes: list[Cause]) -> list[Cause]:
    """One cause, one name: the usual path running long, told on a request that belongs to another cause of the
    same step (the prompt's rollouts that stalled, the worker that stalled), is that cause seen again."""
    members: dict[int, set[int]] = {}
    for c in causes:
        if not c.details.get("tail"):
            members.setdefault(c.step, set()).update(_spans(c))
    out = []
    for c in causes:
        mine = _spans(c)
        if c.details.get("tail") and mine and mine <= members.get(c.step, set()):
            continue
        out.append(c)
    return out


def _judged(c: Cause, a: StepAccount, level: tuple[float, float], th: Thresholds, carries: bool) -> Judgement:
    """A cause's severity: one judgement for every kind (:func:`.severity.judge_cause`)."""
    return judge_cause(c, a, level, th, carries)


def _anomalies_only(a: StepAccount) -> list[Cause]:
    """A step with no baseline to tell its parts' excess by (a run of one step): its anomalies, each as what it
    cost the step (peeled), judged against the step's own peers."""
    an = a.anomalies
    if an.empty:
        return []
    cost = an["cost"].to_numpy(dtype=float)
    return _anomaly_causes(a, an.iloc[np.flatnonzero(cost > 0)])


def _step_causes(a: StepAccount, b: Baselines, th: Thresholds, phases: dict[str, tuple[float, float]]) -> list[Cause]:
    out: list[Cause] = []
    limit = max(a.excess_s, 0.0)
    an = a.anomalies
    cost = an["cost"].to_numpy(dtype=float) if len(an) else np.zeros(0)
    account_part = np.where(an["cause"].to_numpy() == k.STALL, k.PART_STALL, an["part"].to_numpy()) if len(an) else []
    for p in a.parts:
        if p.seconds <= 0 or p.kind == k.PART_PAUSE:  # a wait for a weight sync: the sync's, judged as its phase
            continue
        if p.kind == k.PART_PHASE:
            out.append(phase_cause(a, p, phases.get(p.phase)))
            continue
        mine = np.flatnonzero((np.asarray(account_part) == p.kind) & (cost > 0)) if len(an) else np.zeros(0, int)
        total = float(cost[mine].sum()) if len(mine) else 0.0
        # what an anomaly cost is how much sooner the step would have ended without it (the peel's drop), even
        # when the step's usual path happened to be short this time; only its severity is held to the excess
        out.extend(_anomaly_causes(a, an.iloc[mine]))
        rest = p.seconds - min(total, p.seconds)
        if rest > 0 and a.path is not None:
            out.append(_tail_cause(a, p, min(rest, limit), b))
    out.extend(_degraded(a, th))
    return out


def _requests_of(a: StepAccount, occ_rows: np.ndarray) -> pd.DataFrame:
    occ = a.summary.occurrences
    spans = occ["request_span"].to_numpy()[occ_rows]
    req = a.summary.requests.set_index("request_span")
    return req.reindex(pd.unique(spans[spans >= 0])).reset_index()


def _anomaly_causes(a: StepAccount, rows: pd.DataFrame) -> list[Cause]:
    """The part's anomalies that cost the step, one cause per (kind, place): a group's own place (the step, a
    replica, a worker, a sample group), else for single requests their prompt when they are most of its rollouts,
    else their worker (two workers' outliers are two causes, not one)."""
    out = []
    if rows.empty:
        return out
    occ = a.summary.occurrences
    place = _places(a, rows)
    for (cause, scope, where), g in rows.assign(_scope=place[0], _where=place[1]).groupby(
        ["cause", "_scope", "_where"], sort=False
    ):
        occ_rows = g["occ"].to_numpy(dtype=np.int64)
        reqs = _requests_of(a, occ_rows)
        workers = sorted({int(w) for w in occ["worker"].to_numpy(dtype=float)[occ_rows] if np.isfinite(w)})
        top = g.loc[g["cost"].idxmax()]
        # what it did is told by the occurrences that cost the step (a sample group's other turns moved less)
        told = g[g["cost"].to_numpy() >= 0.5 * float(top["cost"])] if float(top["cost"]) > 0 else g
        details = {
            "metric": str(top["metric"]),
            "value": float(np.median(told["value"])),
            "usual": float(np.median(told["usual"])),
            "ratio": float(np.median(told["ratio"])),
            "occurrences": int(g["occ"].nunique()),
            "key": str(occ["key"].iat[int(top["occ"])]),
            "chance": float(np.nanmin(g["chance"].to_numpy(dtype=float), initial=1.0)),
            # the most one occurrence alone (beyond its fence) took over its usual (.severity.judge_cause)
            "outlier_s": float(g["x"].to_numpy(dtype=float)[g["via"].to_numpy() == "outlier"].max(initial=0.0)),
        }
        turn = occ["turn_index"].to_numpy(dtype=float)[told["occ"].to_numpy(dtype=np.int64)]
        turns = sorted({int(x) for x in turn if np.isfinite(x)})
        if turns:
            details["turn_index"] = turns[0] if len(turns) == 1 else turns
        still = _stood_still(a, occ_rows, float(g["x"].max())) if scope in (k.SCOPE_REQUEST, k.SCOPE_SAMPLE) else 0.0
        if still:
            details["stalled_s"] = still
            details["by_engine"] = bool(occ["by_engine"].to_numpy(dtype=bool)[occ_rows].any())
        ev = a.summary.evidence_of(occ_rows[np.argsort(-g["cost"].to_numpy())][:5])
        step, seconds = waited_for(a, reqs, float(g["cost"].sum()), details)  # async: the step that waited
        if still and not details["by_engine"] and cause == k.SLOW_DECODE and len(workers) == 1:
            # the calls' seconds per token moved while nothing moved on their worker, and no engine span says the
            # engine spent them: the worker stood still (a paused process stretches the calls it holds)
            cause, scope, where = k.STALL, k.SCOPE_WORKER, str(workers[0])
            details |= {"metric": "s", "value": still, "usual": 0.0, "ratio": float("inf"), "rate": details["value"]}
        out.append(Cause(cause, scope, where, step, seconds, str(top["part"]), workers, reqs, details, ev))
    return out


def _places(a: StepAccount, rows: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(scope, where) of each anomaly row: its group's, or for a request's own anomaly its prompt (when the rows of
    that cause hold at least half of the prompt's rollouts in the step) or its worker."""
    occ = a.summary.occurrences
    scope = rows["scope"].to_numpy(dtype=object).copy()
    where = rows["group"].astype(str).to_numpy(dtype=object).copy()
    where[scope == k.SCOPE_STEP] = ""
    idx = rows["occ"].to_numpy(dtype=np.int64)
    own = occ["request_span"].to_numpy()[idx] < 0  # a worker's own part: its start, its finish
    causes = rows["cause"].to_numpy(dtype=object)
    everyone = {float(w) for w in a.summary.workers["worker"]}
    for cause in set(causes[own & (scope == k.SCOPE_WORKER)]):
        mine = own & (scope == k.SCOPE_WORKER) & (causes == cause)
        if len(everyone) > 1 and {float(w) for w in occ["worker"].to_numpy(dtype=float)[idx][mine]} >= everyone:
            scope[mine], where[mine] = k.SCOPE_STEP, ""  # every worker's: the step's cause, told once
    spans = occ["request_span"].to_numpy()[idx]
    # a sample group that moved with one rollout of it in the step is that request
    for smp in set(where[scope == k.SCOPE_SAMPLE]):
        mine = (scope == k.SCOPE_SAMPLE) & (where == smp)
        if len(set(spans[mine])) < 2:
            scope[mine] = k.SCOPE_REQUEST
    single = scope == k.SCOPE_REQUEST
    if not single.any():
        return scope, where
    sample = occ["sample_index"].to_numpy(dtype=float)[idx]
    worker = occ["worker"].to_numpy(dtype=float)[idx]
    rollouts = pd.Series(a.summary.requests["sample_index"].to_numpy(dtype=float)).value_counts()
    for cause in set(causes[single]):
        mine = single & (causes == cause)
        for smp in {x for x in sample[mine] if np.isfinite(x)}:
            group = mine & (sample == smp)
            hit = len(set(spans[group]))
            if hit > 1 and hit * 2 >= rollouts.get(smp, 0):
                scope[group], where[group] = k.SCOPE_SAMPLE, str(int(smp))
    rest = single & (scope == k.SCOPE_REQUEST)
    where[rest] = [str(int(w)) if np.isfinite(w) else "" for w in worker[rest]]
    scope[rest & (causes == k.STALL)] = k.SCOPE_WORKER  # an answer the worker took late: the worker stalled
    # a worker span without request spans stood in for a request: its anomalies are the worker's
    status = a.summary.requests.set_index("request_span")["status"].reindex(spans).to_numpy(dtype=object)
    scope[rest & (status == BARE_WORKER)] = k.SCOPE_WORKER
    return scope, where


def _stood_still(a: StepAccount, occ_rows: np.ndarray, x: float) -> float:
    """Seconds nothing moved on the occurrences' own worker while they held it (two or more requests in flight, the
    stretch inside them and at least half their excess), else 0: a stall of one prompt's rollouts is told by its
    part, with this as the telling detail (another worker's stretch was once told as theirs)."""
    q = a.summary.quiet
    if q.empty or x <= 0:
        return 0.0
    occ = a.summary.occurrences
    starts = occ["start_ns"].to_numpy(dtype=float)[occ_rows]
    ends = occ["end_ns"].to_numpy(dtype=float)[occ_rows]
    workers = occ["worker"].to_numpy(dtype=float)[occ_rows]
    best = 0.0
    for w in q.itertuples(index=False):
        slack = 0.2 * (w.end_ns - w.start_ns)
        if w.in_flight < 2 or w.seconds < 0.5 * x:
            continue
        if ((workers == w.worker) & (starts <= w.start_ns + slack) & (ends >= w.end_ns - slack)).any():
            best = max(best, float(w.seconds))
    return best


def _tail_cause(a: StepAccount, p: Part, seconds: float, b: Baselines) -> Cause:
    """The usual critical path ran long in this part: told on the request (or worker) that ends the rollout once
    the anomalies are taken away; it ended it only if none held a later one (``details.ended_rollout``)."""
    path = a.path
    occ = a.summary.occurrences
    rs = path.usual_request if path.usual_request is not None else -1
    kind = k.CAUSE_OF_PART.get(p.kind, k.SLOW_ENGINE)
    details: dict[str, Any] = {"tail": True, "metric": "s", "value": p.value_s, "usual": p.baseline_s}
    details["ended_rollout"] = path.usual_request == path.critical_request
    details["ratio"] = p.value_s / p.baseline_s if p.baseline_s > 0 else float("inf")
    if p.kind == k.PART_DECODE:
        kind, details = _decode_tail(occ[occ["request_span"].to_numpy() == rs], b, details)
    reqs = a.summary.requests[a.summary.requests["request_span"] == rs]
    workers = [path.usual_worker] if path.usual_worker is not None else []
    ev = []
    if len(reqs):
        ev = evidence(reqs["trace_id"].iat[0], reqs["span_id"].iat[0])
        turns = reqs["num_turns"].to_numpy(dtype=float)
        if np.isfinite(turns).all():
            details["turns"] = int(turns[0])
    bare = len(reqs) and reqs["status"].iat[0] == BARE_WORKER
    if p.kind in (k.PART_START, k.PART_FINISH) or rs < 0 or bare:
        return Cause(kind, k.SCOPE_WORKER, str(path.usual_worker), a.step, seconds, p.kind, workers, reqs, details, ev)
    return Cause(kind, k.SCOPE_REQUEST, "", a.step, seconds, p.kind, workers, reqs, details, ev)


def _decode_tail(mine: pd.DataFrame, b: Baselines, details: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A long decode on the usual path: a long answer or a slow rate, whichever is further above usual."""
    dec = mine[(mine["part"] == k.PART_DECODE).to_numpy() & (mine["tokens"].to_numpy(dtype=float) > 0)]
    if dec.empty:
        return k.SLOW_DECODE, details
    n = float(dec["tokens"].sum())
    n0 = sum((x.median if (x := b.norm(k.PART_DECODE, key, METRIC_TOKENS)) else 0.0) for key in dec["key"])
    r0 = np.nanmedian([(x.median if (x := b.norm(k.PART_DECODE, key, METRIC_RATE)) else np.nan) for key in dec["key"]])
    rate = float(dec["value_s"].sum()) / n
    by_tokens = n0 > 0 and (n / n0) >= (rate / r0 if r0 and np.isfinite(r0) else 0.0)
    if by_tokens:
        return k.LONG_RESPONSE, details | {"metric": METRIC_TOKENS, "value": n, "usual": n0, "ratio": n / n0}
    return k.SLOW_DECODE, details | {"metric": METRIC_RATE, "value": rate, "usual": float(r0), "ratio": rate / r0}


def _degraded(a: StepAccount, th: Thresholds) -> list[Cause]:
    """Parts far outside their norm on every worker that cost the step little: still a cause, at no seconds."""
    an = a.anomalies
    if an.empty:
        return []
    step_wide = an[(an["scope"] == k.SCOPE_STEP).to_numpy() & (an["cost"].to_numpy(dtype=float) <= 0)]
    out = []
    for (cause, part), g in step_wide.groupby(["cause", "part"], sort=False):
        occ_rows = g["occ"].to_numpy(dtype=np.int64)
        ratio = float(np.median(g["ratio"]))
        if float(np.median(g["x"])) < 3 * th.occurrence_min_s:
            continue  # far outside its norm in ratio, but a few milliseconds a request
        details = {
            "metric": str(g["metric"].iat[0]),
            "value": float(np.median(g["value"])),
            "usual": float(np.median(g["usual"])),
            "ratio": ratio,
            "degraded": True,
            "occurrences": len(g),
        }
        out.append(Cause(cause, k.SCOPE_STEP, "", a.step, 0.0, str(part), [], _requests_of(a, occ_rows), details))
    return out


def _reported(c: Cause, accounts: list[StepAccount], spread: StepSpread, th: Thresholds) -> bool:
    a = next(x for x in accounts if x.step == c.step)
    if c.details.get("degraded"):
        return c.details.get("ratio", 0.0) >= th.degraded_ratio
    sp = spread.spread if np.isfinite(spread.spread) else 0.0
    usual = a.baseline_s if np.isfinite(a.baseline_s) else a.duration_s - c.seconds
    if c.details.get("tail") and not spread.measured:
        # the usual path running long with no spread to tell it from noise: only when it cost what a warning would
        return c.seconds >= max(th.warning_min_s, th.warning_fraction * usual)
    # an anomaly (an occurrence or a group beyond its own norm) is worth reporting from half a spread; the usual
    # path running long only from a whole one
    k_spread = th.info_spread * (1.0 if c.details.get("tail") else 0.5)
    return c.seconds >= max(k_spread * sp, th.info_fraction * usual, 1e-3)


def _merge(
    causes: list[Cause], accounts: list[StepAccount], levels: Levels, th: Thresholds, carried: set[int]
) -> list[Finding]:
    """``causes`` as findings, one per recurring (kind, scope, place), judged against their step's ``levels``."""
    groups: dict[tuple, list[Cause]] = {}
    for c in causes:
        key = (c.kind, c.scope, c.where) if c.scope in MERGED_SCOPES else (c.kind, c.scope, c.where, c.step, id(c))
        groups.setdefault(key, []).append(c)
    by_step = {a.step: a for a in accounts}
    out = []
    for group in groups.values():
        group.sort(key=lambda c: -c.seconds)
        top = group[0]
        judged = [_judged(c, by_step[c.step], levels[c.step], th, id(c) in carried) for c in group]
        worst = min(judged, key=lambda j: SEVERITIES.index(j.severity))
        sev_rank = SEVERITIES.index(worst.severity)
        steps = sorted({c.step for c in group})
        workers = sorted({w for c in group for w in c.workers})
        reqs = (
            pd.concat([c.requests for c in group if len(c.requests)], ignore_index=True)
            if any(len(c.requests) for c in group)
            else pd.DataFrame()
        )
        details = dict(top.details) | {"scope": top.scope, "part": top.part, **requests_named(reqs)}
        ids = details["request_ids"]  # one per request: verl's ids repeat (full_determinism's det-N)
        details["judged"] = worst.as_json()
        if top.scope in (k.SCOPE_REPLICA, k.SCOPE_SAMPLE):
            details["replica" if top.scope == k.SCOPE_REPLICA else "sample_index"] = top.where
        if len(reqs) and top.scope != k.SCOPE_REPLICA:
            replicas = {r for r in reqs.get("replica", pd.Series(dtype=object)) if isinstance(r, str)}
            if len(replicas) == 1:
                details["replica"] = replicas.pop()
        if len(group) > 1:
            details["per_step"] = {str(c.step): round(c.seconds, 3) for c in sorted(group, key=lambda c: c.step)}
        f = Finding(
            kind=as_stall(top.kind, details),
            severity=("critical", "warning", "info")[sev_rank],
            message="",
            metric=str(details.get("metric", "")),
            value=float(details.get("value", float("nan"))),
            baseline=details.get("usual"),
            step=steps[0] if len(steps) == 1 else None,
            steps=steps,
            worker=workers[0] if len(workers) == 1 else None,
            workers=workers,
            request_id=ids[0] if len(ids) == 1 else None,
            seconds=float(sum(c.seconds for c in group)),
            peak_s=float(top.seconds),
            evidence=[e for c in group for e in c.evidence][:10],
            details=details,
        )
        f.message = describe(f, by_step[top.step], reqs)
        out.append(f)
    return out
