"""Trainer phases as causes: a phase that took longer than usual cost its step its excess (the trainer's phases run
one after another), judged against the phase's own step-to-step spread."""

from __future__ import annotations

from typing import Any

import numpy as np

from otel_verl.analysis.findings.account.step_account import Part, StepAccount
from otel_verl.analysis.findings.causes.cause import Cause
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import evidence


def phase_spreads(accounts: list[StepAccount]) -> dict[str, tuple[float, float]]:
    """Per trainer phase: the median and robust spread (1.4826 × MAD) of its seconds over the steps it ran in."""
    values: dict[str, list[float]] = {}
    for a in accounts:
        for p in a.parts:
            if p.kind == k.PART_PHASE and p.phase is not None:
                values.setdefault(p.phase, []).append(p.value_s)
    out = {}
    for name, vs in values.items():
        arr = np.asarray(vs, dtype=float)
        med = float(np.median(arr))
        out[name] = (med, float(np.median(np.abs(arr - med))) * 1.4826)
    return out


def phase_cause(a: StepAccount, p: Part, norm: tuple[float, float] | None) -> Cause:
    """A trainer phase that took longer than usual: its excess is what it cost (the trainer's phases run one
    after another). Far outside the phase's own step-to-step spread it is an anomaly; else the phase's own
    variation (``details.tail``)."""
    ph = a.summary.phases
    row = ph[(ph["name"] == p.phase).to_numpy() & ~ph["rollout"].to_numpy(dtype=bool)]
    ev = evidence(row["trace_id"].iat[0], row["span_id"].iat[0]) if len(row) else []
    details: dict[str, Any] = {"phase": p.phase, "metric": "s", "value": p.value_s, "usual": p.baseline_s}
    details["ratio"] = p.value_s / p.baseline_s if p.baseline_s > 0 else float("inf")
    med, spread = norm if norm is not None else (p.baseline_s, 0.0)
    scale = max(spread, PHASE_SPREAD_FLOOR * max(med, 0.0), 1e-3)
    if (p.value_s - med) / scale < PHASE_Z or details["ratio"] < PHASE_MIN_RATIO:
        details["tail"] = True
    return Cause(k.SLOW_PHASE, k.SCOPE_PHASE, str(p.phase), a.step, p.seconds, p.kind, details=details, evidence=ev)


PHASE_Z = 4.0
"""A phase this many of its robust standard deviations above its median is an anomaly..."""
PHASE_MIN_RATIO = 1.25
"""...and this multiple of its median..."""
PHASE_SPREAD_FLOOR = 0.02
"""...its spread never taken below this share of its median (a phase that always takes the same time)."""
