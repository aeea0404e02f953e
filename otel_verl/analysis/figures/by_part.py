"""Figures a part of a run at a time (issue 31): every figure's frame is built from per-part results.

A streamed analysis reads a run a step (or a window of steps) at a time and never holds the whole span table, so
each figure is cut in two: ``part_x(tables)`` reduces one part's tables to what the figure needs of it (small:
rows per step, per worker, per request or per turn index; picklable), and ``combine_x(parts)`` builds the figure's
frame from the parts of the whole run, in step order. ``compute_x(spans, tables=...)`` is
``combine_x([part_x(tables)])``, so the whole run and the run read step by step give the same frame by
construction; ``tests/analysis/test_figure_parts.py`` checks it for every figure on every test run.

Most figures are per step already (their frame is grouped by step), so their part is their frame on the part
and the combine is :func:`concat_parts`. The others combine with a documented step: the step timing's intervals
and robust z (over every step), the trainer phases' stack order (each phase's first start in the run), the
engine phases' means per turn index (sums and counts of the parts), the worker CDF's step (picked over every
part's last completions, then only its rows read), and the outliers' top-k (:mod:`.outliers`). The CDFs rank
within a step in the part: a step's spans are never split between parts (the readers hand out whole steps)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd


def concat_parts(parts: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """The parts' rows, in order, with a fresh index. Empty parts are left out (an empty frame's all-object
    columns would turn the others' numbers into objects); all empty: the first part as it is."""
    full = [p for p in parts if len(p)]
    if not full:
        return parts[0].reset_index(drop=True) if len(parts) else pd.DataFrame()
    if len(full) == 1:
        return full[0].reset_index(drop=True)
    return pd.concat(full, ignore_index=True)
