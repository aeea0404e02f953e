"""The time window of a load (``--since``/``--until``/``--lookback``): whole traces and steps, never single spans;
and what an empty load says about the selection that emptied it (:func:`no_spans_message`)."""

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


def steps_words(steps: range) -> str:
    """``--steps`` as words: ``step 7``, ``steps 5 to 9``, ``steps from 5 on``, ``steps up to 9``."""
    lo, hi = steps.start, steps.stop - 1
    open_lo, open_hi = lo <= -(2**62), hi >= 2**62  # parse_step_range's open ends
    if lo == hi:
        return f"step {lo}"
    if open_lo and open_hi:
        return "any step"
    return f"steps up to {hi}" if open_lo else f"steps from {lo} on" if open_hi else f"steps {lo} to {hi}"


def no_spans_message(
    source: str,
    *,
    service: str | None = None,
    steps: range | None = None,
    since_ns: int | None = None,
    until_ns: int | None = None,
    first_bad: list[str] | None = None,
    bad_lines: int = 0,
) -> str:
    """``SOURCE: no spans found`` and the selection that left none, naming only what was selected: a service,
    ``--steps``, a time window; with nothing selected, that the source itself holds none."""
    selected = [f"for service {service!r}"] if service else []
    selected += [f"in {steps_words(steps)}"] if steps is not None else []
    selected += (
        ["in the time window (--since/--until/--lookback)"] if since_ns is not None or until_ns is not None else []
    )
    why = " ".join(selected) if selected else "(it holds no trace spans)"
    skipped = f" ({bad_lines} bad lines skipped; first: {first_bad[0]})" if first_bad else ""
    return f"{source}: no spans found {why}{skipped}"
