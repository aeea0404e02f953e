"""A judgement class run's ``findings.json`` against what it must tell (:class:`~.classes.Expect`): one record.

* ``named``: a finding tells the expected thing — ``short``: it matches the plant as the suite matches plants
  (kind, step, place: :mod:`.matching`); ``straggler``: kind ``straggler`` at the planted worker (at most three
  workers named) or replica, over at least half the planted steps; ``trend``: kind ``trend`` with the planted
  ``details.side`` and one of the planted factors in ``details.factor``; ``shift``: kind ``behaviour_shift`` at the
  planted step with a planted factor;
* ``alarm``: that finding is a warning or worse (the goal of ``short``);
* ``rank``: its place among the cause findings (information kinds skipped);
* ``told``: a finding telling it at warning or worse among the first three cause findings (the asynchronous classes'
  goal, issue 50); ``top3``: those three findings in a line each (what a class got instead);
* ``false_alarms``: warnings or worse that tell something else and touch no step the run's own tails made slow
  (a long run: :func:`.scoring.natural_slow_steps`; a short one: a step at least 1.5× the others' median). In a
  ``short`` run the planted step is excused too, as the suite excuses planted steps.
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from benchmarks.diagnosis import matching as m
from benchmarks.diagnosis.classes import SLOWED, Expect
from benchmarks.diagnosis.run_model import SimRun
from benchmarks.diagnosis.scoring import NATURAL, natural_slow_steps
from otel_verl.analysis.findings.common import kinds as k

SHORT_RUN = 8
"""Fewer steps than this: a natural slow step is one at least :data:`~.classes.SLOWED` × the others' median."""


def tells(expect: Expect, f: dict[str, Any], n_workers: int) -> bool:
    """Whether finding ``f`` tells what ``expect`` asks (module docstring)."""
    d = m.details_of(f)
    if expect.cls.startswith("async_"):
        from benchmarks.diagnosis.async_classes import tells_async

        return tells_async(expect, f, n_workers)
    if expect.cls == "short":
        return expect.plant is not None and m.matches(expect.plant, f, n_workers)
    if expect.kind not in m.kinds_of(f):
        return False
    if expect.cls == "straggler":
        if expect.scope == k.SCOPE_REPLICA:
            place = d.get("replica") is not None and str(d.get("replica")) == str(expect.replica)
        else:
            workers = m.workers_of(f)
            place = expect.worker in workers and len(workers) <= m.SMALL_SET and d.get("scope") != k.SCOPE_STEP
        return place and 2 * len(set(m.steps_of(f)) & set(expect.steps)) >= len(expect.steps)
    factor = d.get("factor")
    factors = {factor} if isinstance(factor, str) else set(factor or [])
    if expect.cls == "trend":
        return d.get("side") == expect.side and bool(factors & set(expect.factors))
    if expect.cls == "shift":
        return expect.steps[0] in m.steps_of(f) and bool(factors & set(expect.factors))
    return False


def natural_slow(run: SimRun) -> set[int]:
    """Steps the run's own tails slowed (a warning there is allowed, as :func:`natural_slow_steps` says): on a
    short run, those :data:`SLOWED` × the other steps' median, or :data:`NATURAL` spreads above it (the rule of
    :func:`natural_slow_steps`, which needs three peers)."""
    if run.shape.steps >= SHORT_RUN:
        return natural_slow_steps(run)
    durations = run.durations(clean=True)
    out = set()
    for i, d in enumerate(durations, start=1):
        others = [x for j, x in enumerate(durations, start=1) if j != i]
        usual = statistics.median(others) if others else d
        if others and (d >= SLOWED * usual or d - usual >= NATURAL * run.spread):
            out.add(i)
    return out


def _brief(f: dict[str, Any]) -> str:
    """One line of a finding, for the report of what a class got instead."""
    d = m.details_of(f)
    where = ", ".join(f"{key} {d[key]}" for key in ("scope", "phase", "replica", "part", "factor") if d.get(key))
    return f"{f.get('kind')}/{f.get('severity')} steps {m.steps_of(f)} ({where}): {str(f.get('message'))[:140]}"


def score_class_run(run: SimRun, expect: Expect, document: dict[str, Any]) -> dict[str, Any]:
    findings = [f for f in document.get("findings") or [] if isinstance(f, dict)]
    n = run.shape.workers
    causes = [f for f in findings if m.is_cause(f)]
    hit = next((f for f in causes if tells(expect, f, n)), None)
    excused = natural_slow(run)
    if expect.cls == "short":
        excused |= set(expect.steps)
    if expect.cls.startswith("async_"):
        # issue 50: the first step's wait is the pipeline filling, which a verdict must not warn about
        excused = (excused - {1}) | set(expect.steps) | {p.meta.get("waits_at", p.step) for p in run.plants}
    told = any(tells(expect, f, n) and m.is_alarm(f) for f in causes[:3])
    alarms = [f for f in findings if m.is_alarm(f)]
    false = [f for f in alarms if not tells(expect, f, n) and not excused & set(m.steps_of(f))]
    return {
        "class": expect.cls,
        "variant": expect.variant,
        "format": run.fmt,
        "steps": run.shape.steps,
        "workers": n,
        "expects": expect.kind is not None,
        "named": hit is not None,
        "alarm": hit is not None and m.is_alarm(hit),
        "severity": hit.get("severity") if hit else None,
        "rank": next((i for i, f in enumerate(causes, start=1) if f is hit), None),
        "told": told,
        "top3": [_brief(f) for f in causes[:3]],
        "first_kind": causes[0].get("kind") if causes else None,
        "alarms": len(alarms),
        "false_alarms": len(false),
        "false_alarm_kinds": dict(Counter(str(f.get("kind")) for f in false)),
        "verdict": (document.get("summary") or {}).get("verdict"),
        **{key: v for key, v in expect.size.items()},
    }
