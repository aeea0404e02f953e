"""Codes of rows by the values of a few columns: what ``pd.MultiIndex.from_arrays(cols).factorize()`` gives, 3–5×
cheaper on a 134k-row step (a MultiIndex's factorize builds a Python tuple per row: ~85 ms a step, three times a
step, in the account's norm lookups; here a tuple per distinct row only).
Any number of columns, missing values as values (an earlier two-column version in :mod:`.anomalies` gave a missing
value code -1 and so looked up the wrong pair)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def factorize_rows(columns: Sequence[pd.Series | np.ndarray]) -> tuple[np.ndarray, list[tuple]]:
    """(each row's code, the distinct value tuples in order of first appearance), as
    ``pd.MultiIndex.from_arrays(columns).factorize()`` (missing values are values).

    The columns are folded in one at a time, the combined code factorized again after each, so codes stay below
    the row count squared however many distinct values the columns hold (no int64 overflow); a tuple is built
    only per distinct row, from the row where it first appears."""
    codes = np.zeros(len(columns[0]), dtype=np.int64)
    levels = []
    for col in columns:
        level_codes, uniques = pd.factorize(np.asarray(col, dtype=object), use_na_sentinel=False)
        codes, _ = pd.factorize(codes * len(uniques) + level_codes)
        levels.append((level_codes, uniques))
    if len(codes) == 0:
        return codes.astype(np.intp), []
    _, first_rows = np.unique(codes, return_index=True)
    values = [uniques[level_codes[first_rows]] for level_codes, uniques in levels]
    return codes, list(zip(*values, strict=True))
