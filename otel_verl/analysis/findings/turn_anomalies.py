"""turn_anomaly candidates: turns whose engine time is far above the norm of their turn index (all steps).
:mod:`.flagged_spans` turns them into findings."""

from __future__ import annotations

import pandas as pd

from otel_verl.analysis.findings.flagged_spans import MAX_FLAGGED_PER_TYPE, empty_flags, far_above_norm, flag_rows
from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.turns import turn_engine_times


def flag_turns(t: Tables, th: Thresholds) -> pd.DataFrame:
    """Turns whose engine time is far above the norm of their turn index (all steps)."""
    turns = turn_engine_times(t)
    frames = []
    for _ti, grp in turns.groupby("turn_index"):
        mask, med = far_above_norm(grp["engine_s"], th.turn_k, th.turn_ratio, th.turn_min_s)
        if mask.any():
            hit = grp[mask].nlargest(MAX_FLAGGED_PER_TYPE, "engine_s")
            frames.append(flag_rows(t, hit, "turn_anomaly", "engine", "engine_s", med))
    return pd.concat(frames, ignore_index=True) if frames else empty_flags()
