"""An engine warming up: its first calls of the run are slower (kernels compiled, caches and graphs built on first
use), and that is information, not a fault.

Why: the real vLLM CPU demo, nothing planted, warned in 2 of 5 runs "engine calls took 0.16 s per request in the
engine call of turn index 0 on both workers, usually 0.03 s, in step 1" (issue 50). An expert reads that as the
engine's warm-up. The signature, read from the account alone:

* the cause is an engine part (the way to the engine, its queue, prefill, decode, the call as a whole);
* in the run's first step, on a group (every worker, a replica, a worker: the engine, not one request);
* only the first engine call of each request (turn index 0) moved, and the same step ran later calls
  (turn index ≥ 1) whose same part stayed inside its norm: the engine was slow at first, then not.

A run whose requests make one call each shows no later calls, so its first step's engine cause stays a cause (a
slow engine and a warming one cannot be told apart there). :func:`.severity.judge_cause` tells a warm-up as
information, evidence and cost kept (``details.warm_up``, ``details.judged.why`` = ``warm_up``).
"""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.account.step_account import StepAccount
from otel_verl.analysis.findings.causes.cause import Cause
from otel_verl.analysis.findings.common import kinds as k

ENGINE_PARTS = frozenset(
    {k.PART_ENGINE_BEFORE, k.PART_ENGINE_QUEUE, k.PART_PREFILL, k.PART_DECODE, k.PART_ENGINE_OTHER, k.PART_ENGINE}
)
"""The parts an engine call's time is split into (:mod:`.kinds`)."""
GROUP_SCOPES = frozenset({k.SCOPE_STEP, k.SCOPE_REPLICA, k.SCOPE_WORKER})


def mark_warm_up(causes: list[Cause], accounts: list[StepAccount]) -> None:
    """Mark ``details.warm_up`` on each cause that is the engine warming up (module docstring)."""
    if not accounts:
        return
    first = min(accounts, key=lambda a: a.step)
    for c in causes:  # an asynchronous run's cause is told where the trainer waited: its calls ran at its dispatch
        if c.details.get("dispatch_step", c.step) == first.step and _warming(c, first):
            c.details["warm_up"] = True


def _warming(c: Cause, a: StepAccount) -> bool:
    if c.kind == k.STALL or c.part not in ENGINE_PARTS or c.scope not in GROUP_SCOPES or c.details.get("tail"):
        return False
    if c.details.get("turn_index") != 0:  # a list (several turn indices) or a later turn: not the first calls
        return False
    occ = a.summary.occurrences
    if occ.empty:
        return False
    turn = occ["turn_index"].to_numpy(dtype=float)
    parts = occ["part"].to_numpy(dtype=object)
    if not ((parts == c.part) & (turn >= 1)).any():
        return False  # no later call of this part in the step to show the engine was fast again
    an = a.anomalies
    if an.empty:
        return True
    rows = an["occ"].to_numpy(dtype=np.int64)
    later = (an["part"].to_numpy(dtype=object) == c.part) & (turn[rows] >= 1)
    return not later.any()
