"""The rows :mod:`.anomalies` and :mod:`.stalls` write: one per (occurrence, cause), :data:`ANOMALY_COLUMNS`."""

from __future__ import annotations

import numpy as np
import pandas as pd

ANOMALY_COLUMNS = (
    "occ",
    "cause",
    "part",
    "x",
    "scope",
    "group",
    "metric",
    "value",
    "usual",
    "ratio",
    "via",
    "beyond",
    "move",
    "chance",
    "moved",
)
"""``occ``: row of the step's occurrences; ``x``: seconds beyond the usual; ``value``/``usual``/``ratio``: the
metric that moved (seconds, tokens or seconds per token), its usual value and their ratio; ``via``: ``outlier``
(the occurrence alone) or ``shift`` (its group moved); ``beyond``: an outlier's value over its fence; ``move``: the
seconds a shifted group's median moved; ``chance``: how likely a clean run of this size shows something this
far out (:mod:`.chance`); ``moved``: a shifted group's median over the run's (its ratio; NaN for an outlier)."""


def anomaly_rows(
    idx, cause, part, x, scope, group, metric, value, usual, beyond=None, move=None, chance=None, moved=None
) -> pd.DataFrame:
    value = np.asarray(value, dtype=float)
    usual = np.asarray(usual, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(usual > 0, value / usual, np.inf)
    return pd.DataFrame(
        {
            "occ": np.asarray(idx, dtype=np.int64),
            "cause": cause,
            "part": part,
            "x": np.asarray(x, dtype=float),
            "scope": scope,
            "group": group,
            "metric": metric,
            "value": value,
            "usual": usual,
            "ratio": ratio,
            "via": "shift" if beyond is None else "outlier",
            "beyond": np.nan if beyond is None else np.asarray(beyond, dtype=float),
            "move": np.nan if move is None else move,
            "chance": np.nan if chance is None else np.asarray(chance, dtype=float),
            "moved": np.nan if moved is None else np.asarray(moved, dtype=float),
        }
    )
