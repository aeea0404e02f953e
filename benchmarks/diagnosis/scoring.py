"""One run's ``findings.json`` scored against its ground truth: one record per plant, one per run.

Per plant (one step of a planted cause):

* ``named_first``: the first finding (in ``findings`` order) whose steps contain the plant's step, information
  kinds skipped, matches it;
* ``rank``: the first matching finding's place among the findings that match **no** plant of the run (it
  counts itself): five real causes in one run do not push each other out; ``plain_rank`` counts every cause
  finding before it. Information kinds are skipped in both (the contract ranks them last anyway). None when
  nothing matches;
* for a **slow step** (the plant cost ≥ :data:`SLOW` × the run's spread): ``explained`` = 1 − unexplained_s /
  excess_s of the step's account, clipped to [0, 1] (0 without an account or with no excess), and
  ``right_part`` = the excess the account gave to a part told as the plant's kind, over the plant's cost.

Per run: alarms (warning or critical findings). False alarms: those that match no plant and touch neither a
planted step nor a step the run's own tails made slow (:func:`natural_slow_steps`: the contract allows a
warning "when the step lost time well beyond the run's step-to-step spread", planted or not), and do not tell
the run's hot replica (:func:`on_hot_replica`); alarms on such natural slow steps or the hot replica are counted
apart. And each step account's invariant
``sum(parts.seconds) + unexplained_s == excess_s == duration_s - baseline_s`` (within :func:`tolerance`).
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from benchmarks.diagnosis import matching as m
from benchmarks.diagnosis.effects import Plant
from benchmarks.diagnosis.run_model import SimRun
from otel_verl.analysis.findings.common import kinds as k

SLOW = 2.0
"""A step whose plant cost at least this many spreads is a slow step (the issue's goal rows)."""
BUCKETS: tuple[tuple[str, float, float], ...] = (
    ("<1×", float("-inf"), 1.0),
    ("1–2×", 1.0, 2.0),
    ("2–5×", 2.0, 5.0),
    ("5–20×", 5.0, 20.0),
    ("≥20×", 20.0, float("inf")),
)
"""Size buckets: a plant's cost against the run's step-to-step spread."""


COSTLY_SHARE = 0.1
"""A slow step's plant that cost at least this share of its step must be told as a warning or worse (issue 40)."""
NATURAL = 3.0
"""A clean step this many spreads slower than its peers' median is slow on its own (:func:`natural_slow_steps`)."""


def bucket(size: float) -> str:
    return next(name for name, lo, hi in BUCKETS if lo <= size < hi)


def tolerance(duration: float) -> float:
    """Rounding allowed in an account's sums: 10 ms, or 0.1 % of the step."""
    return max(0.01, 1e-3 * abs(duration))


def _part_cause(part: dict[str, Any]) -> set[str]:
    cause = part.get("cause")
    if cause:
        return {str(cause)}
    kind = part.get("kind")
    if kind == k.PART_DECODE:
        return {k.LONG_RESPONSE, k.SLOW_DECODE}
    return {k.CAUSE_OF_PART[kind]} if kind in k.CAUSE_OF_PART else set()


def _right_part(plant: Plant, account: dict[str, Any]) -> float:
    seconds = 0.0
    for part in account.get("parts") or []:
        if plant.kind in _part_cause(part) and (plant.kind != k.SLOW_PHASE or part.get("phase") == plant.phase):
            seconds += float(part.get("seconds") or 0.0)
    return min(1.0, max(0.0, seconds / plant.cost)) if plant.cost > 0 else 0.0


def _explained(account: dict[str, Any] | None) -> float:
    if not account:
        return 0.0
    excess = float(account.get("excess_s") or 0.0)
    if excess <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - float(account.get("unexplained_s") or 0.0) / excess))


def invariant_holds(account: dict[str, Any]) -> bool:
    try:
        duration, baseline = float(account["duration_s"]), float(account["baseline_s"])
        excess, unexplained = float(account["excess_s"]), float(account["unexplained_s"])
        parts = sum(float(p.get("seconds") or 0.0) for p in account.get("parts") or [])
    except (KeyError, TypeError, ValueError):
        return False
    tol = tolerance(duration)
    return abs(parts + unexplained - excess) <= tol and abs(excess - (duration - baseline)) <= tol


def natural_slow_steps(run: SimRun) -> set[int]:
    """Steps of the clean twin at least :data:`NATURAL` spreads slower than the median of their peers (validation
    steps against validation steps, with fewer than 3 of them: always): slow by the run's own tails, where the
    contract allows a warning although nothing was planted."""
    durations = run.durations(clean=True)
    shape = run.shape
    testing = {
        s for s in range(1, shape.steps + 1) if shape.has_phases and shape.test_every and s % shape.test_every == 0
    }
    out = set()
    for group in (testing, set(range(1, shape.steps + 1)) - testing):
        if not group:
            continue
        if len(group) < 3:
            out |= group
            continue
        median = statistics.median(durations[s - 1] for s in group)
        out |= {s for s in group if durations[s - 1] - median >= NATURAL * run.spread}
    return out


def hot_replica(run: SimRun) -> int | None:
    """The replica that queues 10-100× more than the others in every step (:func:`.shape.draw_replica_load`), if
    the run has one."""
    q = run.shape.replica_queue
    return max(range(len(q)), key=lambda i: q[i]) if q and max(q) > 1 else None


def on_hot_replica(f: dict[str, Any], run: SimRun, hot: int | None) -> bool:
    """Whether finding ``f`` tells the hot replica: it names it, or most of the requests it names ran on it. That
    replica is a real straggler of the run's own making (a persistent one, issue 40), not a planted cause: what
    tells it is neither a false alarm nor a plant named."""
    if hot is None:
        return False
    d = m.details_of(f)
    if d.get("replica") is not None:
        return str(d["replica"]) == str(hot)
    ids = m.request_ids_of(f)
    if not ids:
        return False
    replica = {r.draw.request_id: r.draw.replica for st in run.steps for w in st.workers for r in w.requests}
    on = [replica.get(i) == hot for i in ids if i in replica]
    return bool(on) and 2 * sum(on) >= len(on)


def score_plant(plant: Plant, run: SimRun, findings: list[dict[str, Any]], accounts: dict[int, Any]) -> dict[str, Any]:
    n = run.shape.workers
    causes = [f for f in findings if m.is_cause(f)]
    others = [f for f in causes if not any(m.matches(p, f, n) for p in run.plants)]
    at_step = [f for f in causes if plant.step in m.steps_of(f)]
    hit = next((f for f in causes if m.matches(plant, f, n)), None)
    rank = plain = None
    if hit is not None:
        before = causes[: next(i for i, f in enumerate(causes) if f is hit)]
        plain = len(before) + 1
        rank = sum(1 for f in before if any(f is o for o in others)) + 1
    slow = plant.size >= SLOW
    account = accounts.get(plant.step)
    share = plant.cost / run.durations()[plant.step - 1]
    return {
        "kind": plant.kind,
        "scope": plant.scope,
        "format": run.fmt,
        "step": plant.step,
        "cost_s": round(plant.cost, 4),
        "size": round(plant.size, 4),
        "bucket": bucket(plant.size),
        "named_first": bool(at_step) and m.matches(plant, at_step[0], n),
        "first_kind": at_step[0].get("kind") if at_step else None,
        "rank": rank,
        "plain_rank": plain,
        "within_three": rank is not None and rank <= 3,
        "severity": hit.get("severity") if hit is not None else None,
        "share": round(share, 4),
        "costly": slow and share >= COSTLY_SHARE,
        "told": rank is not None and rank <= 3 and m.is_alarm(hit),
        "plain_within_three": plain is not None and plain <= 3,
        "located": any(m.located(plant, f, n) for f in causes),
        "slow": slow,
        "account": account is not None,
        "explained": _explained(account) if slow else None,
        "right_part": _right_part(plant, account) if slow and account else (0.0 if slow else None),
    }


def score_run(run: SimRun, document: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(the run's record, one record per plant) from ``findings.json``'s contents."""
    findings = [f for f in document.get("findings") or [] if isinstance(f, dict)]
    raw_accounts = document.get("steps")
    accounts = {int(a["step"]): a for a in raw_accounts or [] if isinstance(a, dict) and a.get("step") is not None}
    plants = [score_plant(p, run, findings, accounts) for p in run.plants]
    planted_steps = {p.step for p in run.plants}
    natural = natural_slow_steps(run)
    n = run.shape.workers
    alarms = [f for f in findings if m.is_alarm(f)]
    unplanted = [
        f for f in alarms if not any(m.matches(p, f, n) for p in run.plants) and not planted_steps & set(m.steps_of(f))
    ]
    hot = hot_replica(run)
    false = [f for f in unplanted if not natural & set(m.steps_of(f)) and not on_hot_replica(f, run, hot)]
    durations = dict(enumerate(run.durations(), start=1))
    broken = [a for a in accounts.values() if not invariant_holds(a)]
    off = [
        a
        for a in accounts.values()
        if a["step"] in durations
        and abs(float(a.get("duration_s") or 0.0) - durations[a["step"]]) > tolerance(durations[a["step"]])
    ]
    record = {
        "seed": run.seed,
        "format": run.fmt,
        "clean": not run.plants,
        "workers": n,
        "steps": run.shape.steps,
        "requests": run.shape.requests,
        "spread_s": round(run.spread, 4),
        "findings": len(findings),
        "has_accounts": raw_accounts is not None,
        "accounts": len(accounts),
        "invariant_failures": len(broken),
        "duration_mismatches": len(off),
        "natural_slow_steps": len(natural),
        "alarms": len(alarms),
        "alarms_on_natural_slow_steps": len(unplanted) - len(false),
        "false_alarms": len(false),
        "false_alarm_kinds": dict(Counter(str(f.get("kind")) for f in false)),
    }
    return record, plants
