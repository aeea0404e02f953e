"""A step of a short run against its other steps: :func:`short_run_shifts`.

Why: whether a whole step moved is judged against how far the run's step medians usually stray
(:mod:`.baselines`), and two to five steps cannot say how far that is (with two, the run's median lies halfway
between them). A short run's step is compared with its other steps directly instead: its median of each part
against theirs, and the difference against what sampling alone would give (the standard error of two medians,
from each side's spread and count), so a step of eight requests is not called moved for a noisy median.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.account.baselines import Baselines
from otel_verl.analysis.findings.common.chance import run_chance
from otel_verl.analysis.findings.common.histograms import LogHistogram
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.steps.step_statistics import GROUP_STEP, METRIC_SECONDS
from otel_verl.analysis.findings.steps.step_summary import StepSummary

MEDIAN_SE = 1.2533
"""The standard error of a median, in standard deviations per 1/√n (a normal's)."""
NOISE_FLOOR = 0.05
"""The least noise a log ratio is judged against (as for groups: :data:`.anomalies.SCALE_FLOOR`)."""
COLUMNS = ["group_type", "group", "part", "metric", "log_ratio", "count", "median", "usual", "chance"]


def log_sd(h: LogHistogram) -> float:
    """The spread of log values from the interquartile range (a normal's σ); 1 when a quartile is not positive."""
    lo, hi = h.quantile(0.25), h.quantile(0.75)
    return float(np.log(hi / lo) / 1.349) if lo > 0 and hi > lo else (0.0 if lo > 0 and hi == lo else 1.0)


def short_run_shifts(s: StepSummary, b: Baselines, th: Thresholds) -> pd.DataFrame:
    """The step's parts whose median moved against the run's other steps: rows as
    :func:`.baselines.group_log_ratios` writes them (group type ``step``), only the moved ones."""
    others = b.other_steps.get(s.step, {})
    acc: dict[tuple[str, str], list[tuple[float, float, float, float]]] = {}
    for key, h in s.histograms.items():
        o = others.get(key)
        if o is None or not h.n or not o.n:
            continue
        m, m0 = h.median(), o.median()
        if not (m > 0 and m0 > 0):
            continue
        var = (log_sd(h) ** 2 / h.n + log_sd(o) ** 2 / o.n) * MEDIAN_SE**2
        acc.setdefault((key[0], key[2]), []).append((h.n, np.log(m / m0), var, m0))
    rows = []
    for (part, metric), items in acc.items():
        n = np.array([x[0] for x in items], dtype=float)
        lr = np.array([x[1] for x in items])
        var = np.array([x[2] for x in items])
        base = np.array([x[3] for x in items])
        total = n.sum()
        log_ratio = float((n * lr).sum() / total)
        noise = float(np.sqrt((n**2 * var).sum()) / total)
        usual = float((n * base).sum() / total)
        median = float((n * base * np.exp(lr)).sum() / total)
        moved = total >= th.shift_min_count and log_ratio >= np.log(th.shift_min_ratio)
        moved = moved and log_ratio >= th.shift_z * max(noise, NOISE_FLOOR)
        if moved and metric == METRIC_SECONDS:
            floor = th.occurrence_min_s * (th.fence_min_ratio if usual < th.occurrence_min_s else 1.0)
            moved = median - usual >= floor
        if moved:
            z = log_ratio / max(noise, NOISE_FLOOR)
            rows.append((GROUP_STEP, "", part, metric, log_ratio, total, median, usual, z))
    out = pd.DataFrame(rows, columns=COLUMNS)
    out["chance"] = run_chance(out["chance"].to_numpy(dtype=float), max(len(acc), 1)) if len(out) else []
    return out
