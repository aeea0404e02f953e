"""The verdict a reader sees first: one headline per slow step ("step 7 took 137 s (5.1× the median)
because worker 3 …") and one sentence for the whole run (a clean run says so)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.causes import stretched_turns
from otel_verl.analysis.findings.record import Finding, fmt_s
from otel_verl.analysis.labels import readable
from otel_verl.analysis.tables import Tables

SERIOUS = ("critical", "warning")


def because(c: Finding) -> str:
    """What the cause did, in one clause that starts with the worker: the specific call, tool, reward or gap."""
    w = f"worker {c.worker}" if c.worker is not None else "a worker"
    rid = c.request_id or "?"
    usual = f" (usually {fmt_s(c.baseline)})" if c.baseline is not None and c.baseline == c.baseline else ""
    d = c.details
    if c.kind == "idle_gap" and d.get("pattern") == "process_stall":
        return f"{w}'s process paused for about {fmt_s(c.value)}"
    if c.kind == "idle_gap" and (turns := stretched_turns(c)):
        return (
            f"{w} waited {fmt_s(c.value)} on the engine calls of turn index {turns} of "
            f"{d.get('in_flight', '?')} requests: nothing started or finished from {fmt_s(d['gap_start_s'])} "
            f"to {fmt_s(d['gap_end_s'])} after it started"
        )
    if c.kind == "idle_gap":
        return (
            f"{w} stalled mid-rollout for {fmt_s(c.value)}: {d.get('in_flight', '?')} requests in flight and "
            f"nothing started or finished from {fmt_s(d['gap_start_s'])} to {fmt_s(d['gap_end_s'])} after it started"
        )
    if c.kind == "turn_anomaly":
        return (
            f"{w} waited {fmt_s(c.value)} on the engine call of turn index {d.get('turn_index')} "
            f"of request {rid}{usual}"
        )
    if c.kind == "slow_event":
        many = f" (and {d['count'] - 1} more requests)" if d.get("count", 1) > 1 else ""
        return f"{w}'s {readable(c.event)} took {fmt_s(c.value)} for request {rid}{many}{usual}"
    if c.kind == "straggler_worker":
        return f"{w} finished {fmt_s(c.value)} after the median worker"
    return c.message


SLOW_STEP_RATIO = 1.5
"""A step with fewer other steps than a slow_step baseline needs (a 3-step demo) still gets a headline when
its rollout took this multiple of the others' median and a serious cause lost it time."""


def headlines(t: Tables, causes: list[Finding]) -> list[str]:
    """One line per slow step, costliest first: a step with a slow_step finding, or one that took
    :data:`SLOW_STEP_RATIO` × the other steps' median and whose costliest cause is a warning or worse."""
    out: list[tuple[float, str]] = []
    for step in sorted({c.step for c in causes if c.step is not None}):
        mine = [c for c in causes if c.step == step]
        slow = any(f.kind == "slow_step" for c in mine for f in c.with_symptoms())
        top = max(mine, key=lambda c: c.seconds)
        took, ratio = _step_took(t, step)
        if not slow and not (top.severity in SERIOUS and top.seconds > 0 and ratio >= SLOW_STEP_RATIO):
            continue
        why = "no single worker or call explains it" if top.kind == "slow_step" else f"because {because(top)}"
        cost = f"; that cost the step {fmt_s(top.seconds)}" if top.kind != "slow_step" and top.seconds > 0 else ""
        out.append((top.seconds, f"step {step} took {took} {why}{cost}"))
    return [line for _, line in sorted(out, key=lambda x: -x[0])]


def verdict(t: Tables, causes: list[Finding]) -> str:
    """The run in one sentence."""
    serious = [c for c in causes if c.severity in SERIOUS]
    n_steps, n_workers = len(t.steps), int(t.workers["worker"].nunique()) if len(t.workers) else 0
    if not serious:
        minor = f" ({len(causes)} minor notes below)" if causes else ""
        return (
            f"No problems found: {n_steps} steps, {n_workers} workers and {len(t.requests)} requests ran without a "
            f"stall, a slow call or a straggling worker{minor}."
        )
    lost = sum(c.seconds for c in serious)
    steps = sorted({c.step for c in serious if c.step is not None})
    where = f" in step{'s' if len(steps) > 1 else ''} {', '.join(map(str, steps))}" if steps else ""
    return f"{len(serious)} problem{'s' if len(serious) > 1 else ''}{where}, costing {fmt_s(lost)} of rollout time."


def _step_took(t: Tables, step: int) -> tuple[str, float]:
    """(``137 s (5.1× the median)``, 5.1): the step's rollout time against the other steps' median."""
    s = t.steps
    vals = pd.to_numeric(s["rollout_s"], errors="coerce").to_numpy(dtype=float)
    mine = (s["step"] == step).to_numpy()
    if not mine.any() or not np.isfinite(vals[mine]).any():
        return "longer than usual", float("inf")
    v = float(vals[mine][0])
    others = vals[~mine]
    others = others[np.isfinite(others)]
    if not len(others) or np.median(others) <= 0:
        return fmt_s(v), float("inf")
    ratio = v / float(np.median(others))
    return f"{fmt_s(v)} ({ratio:.1f}× the median)", ratio
