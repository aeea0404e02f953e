"""An engine warming up: its first calls of the run are slower (kernels compiled, caches and graphs built on first
use), and that is information, not a fault.

Why: the real vLLM CPU demo, nothing planted, warned in 2 of 5 runs "engine calls took 0.16 s per request in the
engine call of turn index 0 on both workers, usually 0.03 s, in step 1" (issue 50). An expert reads that as the
engine's warm-up. The signature, read from the account alone:

* the cause is an engine part (the way to the engine, its queue, prefill, decode, the call as a whole);
* in the run's first step, on a group (every worker, a replica, a worker: the engine, not one request);
* only the first engine call of each request (turn index 0) moved, and the same step ran later calls
  (turn index ≥ 1) of that part that stayed inside their norm or strayed at most a :data:`WARM_MARGIN`-th as far
  (their median ratio to the usual against the first calls'): the engine was slow at first, then much less so;
* it does not recur: no later step has a group's first calls of that part slow again (a cause of its own).

Why the margin and not "later calls inside their norm": under load (the real vLLM demo at load average ~26) every
call of step 1 ran slower, and its first calls took 5.4 s against a usual 0.05 s; the old rule read the later calls'
own slowness as the engine staying slow and told a critical "slow engine" on turn index 0. Load slows the first and
the later calls alike; a warm-up slows the first ones far more.

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
WARM_MARGIN = 2.0
"""The first calls' median ratio to their usual is at least this multiple of the later calls' (module docstring)."""


def mark_warm_up(causes: list[Cause], accounts: list[StepAccount]) -> None:
    """Mark ``details.warm_up`` on each cause that is the engine warming up (module docstring)."""
    if not accounts:
        return
    first = min(accounts, key=lambda a: a.step)
    at = [c.details.get("dispatch_step", c.step) for c in causes]  # async: a cause's calls ran at its dispatch
    again = {c.part for c, s in zip(causes, at, strict=True) if s != first.step and _first_calls_of_a_group(c)}
    for c, s in zip(causes, at, strict=True):
        if s == first.step and c.part not in again and _warming(c, first):
            c.details["warm_up"] = True


def _first_calls_of_a_group(c: Cause) -> bool:
    """An engine part's cause on a group, told on the first engine calls (turn index 0) alone."""
    if c.kind == k.STALL or c.part not in ENGINE_PARTS or c.scope not in GROUP_SCOPES or c.details.get("tail"):
        return False
    return c.details.get("turn_index") == 0  # a list (several turn indices) or a later turn: not the first calls


def _warming(c: Cause, a: StepAccount) -> bool:
    if not _first_calls_of_a_group(c):
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
    mine = an["part"].to_numpy(dtype=object) == c.part
    ratio = an["ratio"].to_numpy(dtype=float)
    first, later = ratio[mine & (turn[rows] == 0)], ratio[mine & (turn[rows] >= 1)]
    if not len(later):
        return True
    return len(first) > 0 and float(np.median(first)) >= WARM_MARGIN * float(np.median(later))
