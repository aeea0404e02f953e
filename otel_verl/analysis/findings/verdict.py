"""The verdict a reader sees first: one headline per slow step ("step 7: rollout took 20.5 s, 33× the 0.61 s
median rollout; the step took 21.1 s (usually 1.2 s), because …") and one sentence for the whole run (a healthy
run says so; an incomplete one says what is missing, never "No problems found")."""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings import kinds as k
from otel_verl.analysis.findings.diagnose import Diagnosis
from otel_verl.analysis.findings.record import Finding, fmt_s


def headlines(d: Diagnosis) -> list[str]:
    """One line per step with a warning or worse, the step that lost most first."""
    by_step = {a.step: a for a in d.accounts}
    rollouts = np.array([a.rollout_s for a in d.accounts], dtype=float)
    med_rollout = float(np.nanmedian(rollouts)) if np.isfinite(rollouts).any() else float("nan")
    lines: list[tuple[float, str]] = []
    for step, a in by_step.items():
        top = _top_cause(d.findings, step)
        if top is None:
            continue
        took = _took(a.rollout_s, med_rollout, a.duration_s, a.baseline_s, top.kind == k.SLOW_PHASE)
        lines.append((a.excess_s, f"step {step}: {took}, because {top.message}"))
    return [line for _, line in sorted(lines, key=lambda x: -x[0])]


def verdict(d: Diagnosis, workers: int, requests: int) -> str:
    """The run in one sentence; an asynchronous run's balance (generation- or train-bound) follows it."""
    bound = next((f for f in d.findings if f.kind in (k.GENERATION_BOUND, k.TRAIN_BOUND)), None)
    balance = f" {bound.message.split('. ')[0]}." if bound is not None else ""
    return _verdict(d, workers, requests) + balance


def _verdict(d: Diagnosis, workers: int, requests: int) -> str:
    serious = [f for f in d.findings if f.serious and f.kind in k.CAUSES]
    missing = [f for f in d.findings if f.kind in (k.MISSING_DATA, k.MISSING_WORKER, k.INCOMPLETE_WORKER)]
    steps = len(d.accounts)
    if serious:
        lost = sum(f.seconds for f in serious)
        where = sorted({s for f in serious for s in f.steps})
        plural = "s" if len(where) > 1 else ""
        at = f" in step{plural} {', '.join(map(str, where))}" if where else ""
        n = len(serious)
        gaps = f"; {len(missing)} note{'s' if len(missing) > 1 else ''} on missing data below" if missing else ""
        return f"{n} problem{'s' if n > 1 else ''}{at}, costing {fmt_s(lost)} of step time{gaps}."
    if missing:
        what = "; ".join(f.message for f in missing[:2])
        return f"No cause found in what was read, but the data is incomplete: {what}."
    spread = f" (steps vary by ±{fmt_s(d.spread.spread)})" if np.isfinite(d.spread.spread) else ""
    return (
        f"No problems found: {steps} steps, {workers} workers and {requests} requests ran within the run's normal "
        f"variation{spread}; the long tail is described below."
    )


def _top_cause(findings: list[Finding], step: int) -> Finding | None:
    """The costliest serious cause of one step (findings are ranked: the first one that names the step)."""
    return next((f for f in findings if f.serious and f.kind in k.CAUSES and step in f.steps), None)


def _took(rollout: float, med_rollout: float, duration: float, usual: float, trainer: bool) -> str:
    step = f"the step took {fmt_s(duration)} (usually {fmt_s(usual)})"
    if trainer or not np.isfinite(rollout) or not np.isfinite(med_rollout) or med_rollout <= 0:
        return step
    return (
        f"rollout took {fmt_s(rollout)}, {rollout / med_rollout:.1f}× the {fmt_s(med_rollout)} median rollout; {step}"
    )
