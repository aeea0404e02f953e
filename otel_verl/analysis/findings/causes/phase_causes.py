"""Trainer phases as causes: a phase that took longer than usual cost its step its excess (the trainer's phases run
one after another), judged against the phase's own step-to-step spread.

Every trainer phase is one (update_actor, old_log_prob, the weight sync ``update_weights``, an asynchronous trainer's
wait for samples ``gen``). Its evidence is its own history (not the wait's: it is the rollout seen by the consumer,
judged by the run's steps): the trainer is one process, so a phase has no peers in
its step. Far outside its spread it is an anomaly whose ``details.chance`` (how likely the slowest of a clean run's
``n`` steps lies that far out, :func:`.chance.run_chance`) :func:`.severity.judge_cause` weighs as it weighs a
rollout part's: a phase 1.4x its usual that cost 15 % of its step is a warning though the run's steps stray widely
(a held-out run's update_actor, +27.5 s, was a note with no evidence while the step spread alone judged it)."""

from __future__ import annotations

from typing import Any

import numpy as np

from otel_verl.analysis.findings.account.step_account import Part, StepAccount
from otel_verl.analysis.findings.causes.cause import Cause
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.chance import run_chance
from otel_verl.analysis.findings.common.record import evidence


def phase_spreads(accounts: list[StepAccount]) -> dict[str, tuple[float, float, int]]:
    """Per trainer phase: the median and robust spread (1.4826 × MAD) of its seconds over the steps it ran in, and
    how many steps that is."""
    values: dict[str, list[float]] = {}
    for a in accounts:
        for p in a.parts:
            if p.kind == k.PART_PHASE and p.phase is not None:
                values.setdefault(p.phase, []).append(p.value_s)
    out = {}
    for name, vs in values.items():
        arr = np.asarray(vs, dtype=float)
        med = float(np.median(arr))
        out[name] = (med, float(np.median(np.abs(arr - med))) * 1.4826, len(arr))
    return out


def phase_cause(a: StepAccount, p: Part, norm: tuple[float, float, int] | None) -> Cause:
    """A trainer phase that took longer than usual: its excess is what it cost (the trainer's phases run one
    after another). Far outside the phase's own step-to-step spread it is an anomaly with the ``chance`` a clean
    run of its steps shows it; else the phase's own variation (``details.tail``)."""
    ph = a.summary.phases
    row = ph[(ph["name"] == p.phase).to_numpy() & ~ph["rollout"].to_numpy(dtype=bool)]
    ev = evidence(row["trace_id"].iat[0], row["span_id"].iat[0]) if len(row) else []
    details: dict[str, Any] = {"phase": p.phase, "metric": "s", "value": p.value_s, "usual": p.baseline_s}
    details["ratio"] = p.value_s / p.baseline_s if p.baseline_s > 0 else float("inf")
    med, spread, n = norm if norm is not None else (p.baseline_s, 0.0, 1)
    scale = max(spread, PHASE_SPREAD_FLOOR * max(med, 0.0), 1e-3)
    z = (p.value_s - med) / scale
    if a.summary.async_account is not None and p.phase == WAIT_PHASE:
        # the trainer's wait is a hinge (none while the rollout runs ahead: a median of 0.01 s and no spread in a
        # train-bound run), so its own history is no norm: it varies as the rollout it waits for, which the run's
        # steps measure (its part of the rollout's causes told at this step: :func:`.waited_for.the_wait_left`)
        details |= {"tail": True, "trainer_wait": True}
    elif z < PHASE_Z or details["ratio"] < PHASE_MIN_RATIO:
        details["tail"] = True
    else:
        # the spread read from n steps is itself uncertain (a MAD's relative standard error ~1.17/sqrt(n)): the
        # chance is taken in a width that much wider, as an occurrence's is (:func:`.baselines.fence`)
        details["chance"] = float(run_chance(z / (1.0 + MAD_ERROR / np.sqrt(max(n, 1))), max(n, 1)))
    return Cause(k.SLOW_PHASE, k.SCOPE_PHASE, str(p.phase), a.step, p.seconds, p.kind, details=details, evidence=ev)


WAIT_PHASE = "gen"
"""An asynchronous trainer's wait for samples (verl's ``gen`` timer around its take from the replay buffer)."""
PHASE_Z = 4.0
"""A phase this many of its robust standard deviations above its median is an anomaly..."""
PHASE_MIN_RATIO = 1.25
"""...and this multiple of its median..."""
PHASE_SPREAD_FLOOR = 0.02
"""...its spread never taken below this share of its median (a phase that always takes the same time)."""
MAD_ERROR = 1.166
"""A normal sample's MAD is uncertain by about this over √n of its value."""
