"""One anomaly row per (occurrence, cause): which of an occurrence's reasons tells it (:func:`one_row_each`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.steps.step_statistics import (
    GROUP_REPLICA,
    GROUP_SAMPLE,
    GROUP_STEP,
    GROUP_WORKER,
    METRIC_SECONDS,
)

GROUP_ORDER = (GROUP_STEP, GROUP_REPLICA, GROUP_WORKER, GROUP_SAMPLE)
"""When several groups of one occurrence moved, the broadest tells the story."""
SCOPE_OF_GROUP = {
    GROUP_STEP: k.SCOPE_STEP,
    GROUP_REPLICA: k.SCOPE_REPLICA,
    GROUP_WORKER: k.SCOPE_WORKER,
    GROUP_SAMPLE: k.SCOPE_SAMPLE,
}


EXPLAINED_SHARE = 0.5
"""A group tells an occurrence only when its move gives back at least this share of what the occurrence moved."""


def one_row_each(found: pd.DataFrame) -> pd.DataFrame:
    """One row per (occurrence, cause): the broadest scope, then the most seconds; but an occurrence beyond its fence
    by more than any of its groups moved (``moved``), or in seconds still beyond it without the group's move, is its
    own cause (the README stall's 190× calls were told at their worker's 1.4× move: 5.3 s of 20). A group whose move
    gives back less than half of the occurrence's own excess (a step 1.4× slower against a call 400× slower) comes
    after every row that does: it tells the occurrence only when nothing else does. A group that tells an occurrence
    beyond its own fence tells it with the occurrence's own seconds when those are more than the group's share (the
    demo's stalled calls lost 20 s each; their prompt's rollouts moved 6.5×, a share of 17 s)."""
    rank = found["scope"].map({SCOPE_OF_GROUP[g]: i for i, g in enumerate(GROUP_ORDER)}).fillna(len(GROUP_ORDER))
    shift = found["via"] == "shift"
    # the share of the occurrence a group's move gives back (1 − 1/moved) against the occurrence's own (1 − 1/ratio)
    with np.errstate(divide="ignore", invalid="ignore"):
        own = 1.0 - 1.0 / found["ratio"].to_numpy(dtype=float)
        minor = shift.to_numpy() & (1.0 - 1.0 / found["moved"].to_numpy(dtype=float) < EXPLAINED_SHARE * own)
    rank = rank.where(~minor, rank + len(GROUP_ORDER) + 1)
    by = [found["occ"], found["cause"]]
    ratio = found["moved"].where(shift).groupby(by).transform("max").fillna(np.inf)
    move = found["move"].where(shift).groupby(by).transform("max")
    seconds = found["metric"] == METRIC_SECONDS
    alone = ~shift & (found["beyond"] >= ratio)
    alone |= ~shift & seconds & move.notna() & (found["value"] - move >= found["value"] / found["beyond"])
    rank = rank.where(~alone, -1)
    own_s = found["x"].where(~shift).groupby(by).transform("max")
    one = (
        found.assign(_rank=rank.to_numpy(), _own=own_s.to_numpy())
        .sort_values(["occ", "cause", "_rank", "x"], ascending=[True, True, True, False], kind="stable")
        .drop_duplicates(["occ", "cause"])
    )
    one["x"] = np.fmax(one["x"].to_numpy(dtype=float), one["_own"].to_numpy(dtype=float))
    return one.drop(columns=["_rank", "_own"])
