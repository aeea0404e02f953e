"""A run's numbers step after step: how much they moved and how surely (Theil-Sen slope, Mann-Kendall test).

Both are rank-based, so the slow steps every run has (a validation pass, a step whose longest request ran eight
turns) neither make a trend nor hide one.
"""

from __future__ import annotations

import numpy as np

MAX_PAIRS = 200_000
"""At most this many pairs are measured (all of them up to 632 steps)."""


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    if n * (n - 1) // 2 <= MAX_PAIRS:
        return np.triu_indices(n, 1)
    i, j = np.random.default_rng(n).integers(0, n, size=(2, MAX_PAIRS))
    keep = i < j
    return i[keep], j[keep]


def theil_sen(x: np.ndarray, y: np.ndarray) -> float:
    """The median of the slopes between every two points (NaN with fewer than two distinct x)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    i, j = _pairs(len(x))
    dx = x[j] - x[i]
    keep = dx != 0
    return float(np.median((y[j] - y[i])[keep] / dx[keep])) if keep.any() else float("nan")


def mann_kendall_z(x: np.ndarray, y: np.ndarray) -> float:
    """Mann-Kendall's z of ``y`` rising with ``x`` (positive: rising; |z| ≥ 3 is a trend a clean run shows with
    a chance of about 0.3 %)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    order = np.argsort(x[ok], kind="stable")
    y = y[ok][order]
    n = len(y)
    if n < 3:
        return 0.0
    i, j = _pairs(n)
    s = float(np.sign(y[j] - y[i]).sum()) * (n * (n - 1) / 2) / len(i)
    var = n * (n - 1) * (2 * n + 5) / 18.0
    return (s - np.sign(s)) / np.sqrt(var) if s else 0.0


def change_over(x: np.ndarray, y: np.ndarray) -> float:
    """How much ``y`` moved from the first ``x`` to the last, along its Theil-Sen slope."""
    x = np.asarray(x, dtype=float)
    slope = theil_sen(x, y)
    return slope * float(np.nanmax(x) - np.nanmin(x)) if np.isfinite(slope) else 0.0


def log_change_over(x: np.ndarray, y: np.ndarray) -> float:
    """How much ``log y`` moved over the run (0 where ``y`` is not positive throughout)."""
    y = np.asarray(y, dtype=float)
    if not len(y) or not (np.isfinite(y) & (y > 0)).all():
        return 0.0
    return change_over(x, np.log(y))
