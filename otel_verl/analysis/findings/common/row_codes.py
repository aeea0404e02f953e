"""Codes of rows by the values of a few columns: what ``pd.MultiIndex.from_arrays(cols).factorize()`` gives, cheaper
(a MultiIndex's factorize builds a Python tuple per row, three times a step in the account's norm lookups; here a
tuple per distinct row only; figures: docs/performance.md). Any number of columns, missing values as values."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def factorize_rows(columns: Sequence[pd.Series | np.ndarray]) -> tuple[np.ndarray, list[tuple]]:
    """(each row's code, the distinct value tuples in order of first appearance), as
    ``pd.MultiIndex.from_arrays(columns).factorize()`` (missing values are values).

    The columns are folded in one at a time, the combined code factorized again after each, so codes stay below
    the row count squared however many distinct values the columns hold (no int64 overflow); a tuple is built
    only per distinct row, from the row where it first appears. Numeric columns are factorized as numbers (not
    boxed to objects first, which was slower) and their values given back as Python numbers, as the boxed column
    gave them."""
    codes = np.zeros(len(columns[0]), dtype=np.int64)
    levels = []
    for col in columns:
        numeric = isinstance(col.dtype, np.dtype) and col.dtype.kind in "biuf"  # not pandas' nullable ones
        values = np.asarray(col) if numeric else np.asarray(col, dtype=object)
        level_codes, uniques = pd.factorize(values, use_na_sentinel=False)
        codes, _ = pd.factorize(codes * len(uniques) + level_codes)
        levels.append((level_codes, uniques))
    if len(codes) == 0:
        return codes.astype(np.intp), []
    first_rows = _first_rows(codes)
    values = [uniques[level_codes[first_rows]].tolist() for level_codes, uniques in levels]
    return codes, list(zip(*values, strict=True))


def _first_rows(codes: np.ndarray) -> np.ndarray:
    """The row where each code first appears, codes being numbered in order of first appearance (as
    ``pd.factorize`` numbers them): the rows where the running maximum grows. O(n), where ``np.unique``'s
    ``return_index`` sorts."""
    peak = np.maximum.accumulate(codes)
    return np.flatnonzero(np.concatenate([[True], peak[1:] > peak[:-1]]))
