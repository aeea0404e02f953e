"""The spans an analysis of training looks at: those with a step, minus validation rollouts."""

from __future__ import annotations

import pandas as pd


def training_spans(spans: pd.DataFrame) -> pd.DataFrame:
    """Spans with a step, minus validation rollouts (they would skew per-step baselines).

    ``spans`` itself (no copy of a multi-GB table) when nothing is left out; callers never modify it.
    """
    keep = spans["step"].notna().to_numpy(copy=True)
    if "validate" in spans and spans["validate"].notna().any():
        keep &= (spans["validate"].fillna(False) == False).to_numpy()  # noqa: E712 - nullable boolean
    return spans if keep.all() else spans[keep]
