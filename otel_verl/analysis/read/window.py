"""The time window of a load (``--since``/``--until``/``--lookback``): whole traces and steps, never single spans."""

from __future__ import annotations

import numpy as np
import pandas as pd


def in_window(frame: pd.DataFrame, since_ns: int | None, until_ns: int | None) -> pd.DataFrame:
    """Whole traces (and whole steps) that overlap [since, until], never single spans.

    Why: cutting by span start splits a step (its worker span starts before the window, its requests
    inside), and the half step then looks like a worker that died. A trace is kept when its time range
    overlaps the window; a step is kept whole when any trace of it is.
    """
    if frame.empty:
        return frame
    lo = since_ns if since_ns is not None else np.iinfo(np.int64).min
    hi = until_ns if until_ns is not None else np.iinfo(np.int64).max
    codes, _ = pd.factorize(frame["trace_id"], use_na_sentinel=False)
    first = np.full(codes.max() + 1, np.iinfo(np.int64).max)
    last = np.full(codes.max() + 1, np.iinfo(np.int64).min)
    np.minimum.at(first, codes, frame["start_ns"].to_numpy(dtype=np.int64))
    np.maximum.at(last, codes, frame["end_ns"].to_numpy(dtype=np.int64))
    keep_trace = (last >= lo) & (first <= hi)
    keep = keep_trace[codes]
    if "step" in frame and frame["step"].notna().any():
        step = frame["step"]
        kept_steps = pd.unique(step[keep & step.notna().to_numpy()])
        in_step = step.isin(kept_steps).fillna(False).to_numpy(dtype=bool)
        keep_trace[np.unique(codes[in_step])] = True  # every trace that holds a span of a kept step
        keep = keep_trace[codes]
    return frame if keep.all() else frame[keep]
