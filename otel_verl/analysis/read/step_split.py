"""Split a whole span table by step with the rule of :mod:`.step_stream`: what ``iter_steps`` yields, from a table
already in memory (a run small enough to load whole, or a test comparing the two reads).

The rule: step s holds every span whose resolved step is s, and every span with no step whose trace's first
step (the smallest step among the trace's spans) is s. Spans of traces without any step come last, once.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np
import pandas as pd

from otel_verl.analysis.read.step_stream import StepSpans

POSITION_COLUMNS = ("request_span", "worker_span", "turn_span", "step_span")
"""Columns that hold row positions in the table (:func:`~otel_verl.analysis.read.hierarchy.resolve_hierarchy`)."""


def owner_steps(frame: pd.DataFrame) -> np.ndarray:
    """Each row's step under the rule (NaN: the row belongs to no step)."""
    step = pd.to_numeric(frame["step"], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    codes, _ = pd.factorize(frame["trace_id"], use_na_sentinel=False)
    first = np.full(codes.max() + 1 if len(codes) else 0, np.inf)
    has = ~np.isnan(step)
    np.minimum.at(first, codes[has], step[has])
    first[np.isinf(first)] = np.nan
    return np.where(has, step, first[codes])


def take_rows(frame: pd.DataFrame, rows: np.ndarray) -> pd.DataFrame:
    """Rows (positions) of ``frame`` as their own table: positions renumbered, -1 where they pointed outside."""
    sub = frame.iloc[rows]
    sub.index = pd.Index(np.asarray(rows, dtype=np.int64))  # their positions, which own_positions maps
    return own_positions(sub)


def own_positions(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its positions pointing at its own rows.

    A table the user filtered (``spans[spans.service == "verl"]``) keeps the positions of the whole table, which
    its index still names (``load_spans`` numbers rows 0..n-1): they are renumbered here, -1 where they pointed
    at a row left out.
    """
    index = frame.index
    if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
        return frame
    if not pd.api.types.is_integer_dtype(index) or (len(index) and index.min() < 0):
        raise ValueError("a span table's index must be the row numbers load_spans gave it (or reset_index it)")
    old = index.to_numpy(dtype=np.int64)
    cols = [c for c in POSITION_COLUMNS if c in frame]
    top = max([int(old.max()) if len(old) else 0, *(int(frame[c].max()) for c in cols if len(frame))])
    new_pos = np.full(top + 2, -1, dtype=np.int64)  # the last slot answers position -1
    new_pos[old] = np.arange(len(old))
    sub = frame.reset_index(drop=True)
    for col in cols:
        sub[col] = new_pos[sub[col].to_numpy(dtype=np.int64)]
    return sub


def split_by_step(frame: pd.DataFrame, window: int = 1) -> Iterator[StepSpans]:
    """The table's steps (or windows of ``window`` consecutive steps) in order, then the rows of no step."""
    owner = owner_steps(frame)
    steps = np.unique(owner[~np.isnan(owner)])
    for i in range(0, len(steps), window):
        group = steps[i : i + window]
        rows = np.flatnonzero(np.isin(owner, group))
        yield StepSpans(tuple(int(s) for s in group), take_rows(frame, rows))
    rest = np.flatnonzero(np.isnan(owner))
    if len(rest):
        yield StepSpans((), take_rows(frame, rest))


def concat_steps(parts: Iterable[StepSpans]) -> pd.DataFrame:
    """One table of several step tables (``analyze --steps A:B`` until the analysis itself goes step by step):
    positions moved by each table's offset."""
    frames, offset = [], 0
    for part in parts:
        frame = part.spans.copy(deep=False)
        for col in POSITION_COLUMNS:
            if col in frame:
                pos = frame[col].to_numpy(dtype=np.int64)
                frame[col] = np.where(pos >= 0, pos + offset, -1)
        frames.append(frame)
        offset += len(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
