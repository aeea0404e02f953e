"""An asynchronous run's slow rollout part is told at the step whose trainer waited for it: :func:`waited_for`.

Why: under verl's asynchronous trainers the rollout is a producer running alongside the trainer. A request sits
under the worker span of the step that dispatched it, but the trainer that waited for its sample is the step whose
inner update took its group (:mod:`otel_verl.analysis.tables.consumption`), often a later one. The part cost that
step at most what its trainer waited for samples (``StepAccount.held_to_the_wait``), so that is where it is told,
and with the dispatch that produced it: ``details.dispatch_step`` (the step that dispatched the requests) and
``details.policy_version`` (the newest weights they were generated with). Without consumption links (spans of a
step missing, a window that does not hold the consuming update) the part stays at its dispatching step, held to
that step's wait, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from otel_verl.analysis.findings.common.kinds import PART_PHASE

if TYPE_CHECKING:
    import pandas as pd

    from otel_verl.analysis.findings.account.step_account import StepAccount
    from otel_verl.analysis.findings.causes.cause import Cause


def waited_for(a: StepAccount, reqs: pd.DataFrame, cost: float, details: dict[str, Any]) -> tuple[int, float]:
    """(the step a rollout cause is told at, what it cost that step) for the anomalies of ``reqs`` that cost ``a``'s
    rollout ``cost`` seconds; for an asynchronous run it adds the dispatch to ``details``. The step whose trainer
    took most of the requests' samples (the later on a tie) waited for them."""
    if a.summary.async_account is None or not len(reqs) or "consumed_step" not in reqs:
        return a.step, a.held_to_the_wait(cost)
    steps = reqs["consumed_step"].to_numpy(dtype=float)
    waits = reqs["consumer_wait_s"].to_numpy(dtype=float)
    known = np.isfinite(steps) & np.isfinite(waits)
    details["dispatch_step"] = a.step
    versions = reqs["policy_version"].to_numpy(dtype=float)
    if np.isfinite(versions).any():
        details["policy_version"] = int(np.nanmax(versions))
    if not known.any():
        return a.step, a.held_to_the_wait(cost)
    values, counts = np.unique(steps[known], return_counts=True)
    step = int(values[counts == counts.max()].max())
    return step, min(cost, float(waits[known][steps[known] == step][0]))


def the_wait_left(causes: list[Cause]) -> list[Cause]:
    """One cause, one name: an asynchronous step's wait for samples (its ``gen`` phase, ``details.trainer_wait``) is
    what the rollout's causes told at that step cost its trainer (each held to that wait). The wait keeps only what
    they leave unexplained, and is not told where they explain it whole: a clean run's step 9 told "gen took 25.2 s
    (usually 0.01 s): +25.1 s" beside the two long answers it waited for (+20.0 s, +18.0 s)."""
    explained: dict[int, float] = {}
    waits = {c.step for c in causes if c.details.get("trainer_wait")}
    for c in causes:
        if c.step in waits and c.part != PART_PHASE and not c.details.get("stall_echo"):
            explained[c.step] = explained.get(c.step, 0.0) + c.seconds
    out = []
    for c in causes:
        if c.details.get("trainer_wait") and explained.get(c.step, 0.0) > 0:
            c.details["explained_s"] = explained[c.step]
            c.seconds -= explained[c.step]
            if c.seconds <= 0:
                continue
        out.append(c)
    return out


def dispatch_words(details: dict[str, Any], steps: list[int]) -> str:
    """``" (the trainer waited for them; dispatched in step 2, weight version 1)"`` where the trainer waited in
    another step than the one that dispatched the requests, else nothing (a cause told over several steps too)."""
    dispatch = details.get("dispatch_step")
    if dispatch is None or len(steps) != 1 or steps == [dispatch]:  # a recurring cause: per step in per_step
        return ""
    version = details.get("policy_version")
    weights = f", weight version {version}" if version is not None else ""
    return f" (the trainer waited for them; dispatched in step {dispatch}{weights})"
