"""The span kind of every row as an integer code, factorized once for all the table builders (:class:`Kinds`).

Why: ``kind`` is an object column (hierarchy.py says why); each ``spans["kind"] == "worker"`` compares every row's
Python string and ``Tables.build`` made ten of them. One factorize, then integer compares (what it saved:
docs/performance.md).
"""

from __future__ import annotations

import numpy as np
import pandas as pd


class Kinds:
    """Boolean row masks by span kind, for one span table (or the training spans of one)."""

    __slots__ = ("codes", "index")

    def __init__(self, spans: pd.DataFrame) -> None:
        codes, uniques = pd.factorize(spans["kind"].to_numpy(dtype=object), use_na_sentinel=True)
        self.codes = codes
        self.index = {name: i for i, name in enumerate(uniques)}

    @classmethod
    def of(cls, spans: pd.DataFrame, kinds: Kinds | None) -> Kinds:
        """``kinds`` when the caller has them (made from these same rows), else made here."""
        return kinds if kinds is not None else cls(spans)

    def mask(self, *names: str) -> np.ndarray:
        """Rows whose kind is one of ``names``."""
        found = [self.index[n] for n in names if n in self.index]
        if not found:
            return np.zeros(len(self.codes), dtype=bool)
        if len(found) == 1:
            return self.codes == found[0]
        return np.isin(self.codes, found)
