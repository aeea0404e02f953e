"""Compare a step-at-a-time read with the whole-run read split by the same rule (tests of iter_steps)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.read.step_split import POSITION_COLUMNS, split_by_step
from otel_verl.analysis.read.step_stream import StepSpans


def canonical(frame: pd.DataFrame, drop: tuple[str, ...] = ()) -> pd.DataFrame:
    """The table in (trace, span) order, positions replaced by the span id they point at ("" for none), missing
    values as None: what is compared when row order and a column's dtype for all-missing values may differ
    (an all-missing string column is object dtype in one table and Arrow strings in another)."""
    out = frame.drop(columns=list(drop)).copy()
    ids = out["span_id"].astype(str).to_numpy()
    for col in POSITION_COLUMNS:
        pos = out[col].to_numpy(dtype=np.int64)
        out[col] = np.where(pos >= 0, ids[np.maximum(pos, 0)], "")
    out = out.sort_values(["trace_id", "span_id"]).reset_index(drop=True)
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype) in ("str", "string"):
            out[col] = out[col].astype(object).where(out[col].notna(), None)
    return out


def assert_same_steps(streamed: list[StepSpans], whole: pd.DataFrame, window: int = 1, drop: tuple = ()) -> None:
    """Every step (window) of ``streamed`` holds exactly the rows of ``whole`` the rule gives it, resolved alike."""
    expected = {s.steps: s.spans for s in split_by_step(whole, window)}
    got = {s.steps: s.spans for s in streamed}
    assert list(got) == list(expected)
    assert sum(len(f) for f in got.values()) == len(whole)
    for steps, frame in expected.items():
        pd.testing.assert_frame_equal(canonical(got[steps], drop), canonical(frame, drop), check_dtype=False)
