"""slow_step: a step whose rollout took far longer than the other steps' (leave-one-out robust baseline)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.record import Finding, evidence, fmt_s
from otel_verl.analysis.findings.thresholds import Thresholds, far_above
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.baseline import robust_baseline


def find_slow_steps(t: Tables, th: Thresholds, stragglers: list[Finding]) -> list[Finding]:
    """Steps whose rollout took far longer than the other steps' (leave-one-out robust baseline)."""
    out: list[Finding] = []
    s = t.steps
    if len(s) < th.slow_step_min_steps + 1:
        return out
    vals = pd.to_numeric(s["rollout_s"], errors="coerce").to_numpy(dtype=float)
    for i, row in s.reset_index(drop=True).iterrows():
        others = np.delete(vals, i)
        med, mad = robust_baseline(others, floor=0.05 * float(np.nanmedian(others)))
        v = float(vals[i])
        if not far_above(v, med, mad, th.slow_step_k, th.slow_step_ratio, th.slow_step_min_s):
            continue
        step = int(row["step"])
        culprit = [f for f in stragglers if f.step == step]
        why = f"; {culprit[0].message}" if culprit else ""
        out.append(
            Finding(
                kind="slow_step",
                severity="critical" if v >= 3 * med and v - med >= th.critical_min_s else "warning",
                step=step,
                metric="rollout_s",
                value=v,
                baseline=med,
                impact_s=v - med,
                evidence=evidence(row["trace_id"], row["span_id"]),
                message=f"step {step} rollout took {fmt_s(v)}, {v / med:.1f}× the median of the other steps "
                f"({fmt_s(med)}){why}",
            )
        )
    return out
