"""How unlikely an anomaly is in a clean run of the same size: the evidence a cause's severity rests on.

An occurrence is an anomaly once it passes its part's fence (:func:`.baselines.fence`), a group once it strays
``shift_z`` robust deviations (:mod:`.anomalies`); a clean run passes those now and then, the more often the more
values it has. :func:`run_chance` says how often: the chance that the most extreme of ``n`` clean values lies at
least ``z`` standard deviations out, ``1 − Φ(z)ⁿ`` (the norms' widths are a normal's in log space; an
occurrence's ``n`` is every value of its part in the run, :meth:`.baselines.Baselines.tested`). A cause
whose chance is below ``evidence_chance`` lies far outside its norm for a run of this size (:mod:`.severity`).
"""

from __future__ import annotations

import math

import numpy as np

_ERFC = np.vectorize(math.erfc, otypes=[float])


def upper_tail(z: np.ndarray | float) -> np.ndarray:
    """``1 − Φ(z)``, exact far out (where ``1 − cdf`` would round to 0)."""
    return 0.5 * _ERFC(np.asarray(z, dtype=float) / math.sqrt(2.0))


def run_chance(z: np.ndarray | float, n: np.ndarray | float) -> np.ndarray:
    """The chance that the largest of ``n`` clean values lies at least ``z`` standard deviations out."""
    tail = np.clip(upper_tail(z), 0.0, 1.0 - 1e-16)
    n = np.maximum(np.asarray(n, dtype=float), 1.0)
    return -np.expm1(n * np.log1p(-tail))
