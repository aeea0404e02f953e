"""Mergeable quantiles of positive values: a fixed log-spaced histogram (:class:`LogHistogram`).

Why: the account judges every engine call, tool call and reward against what that part usually takes in the
whole run, but a streamed analysis sees one step at a time. A histogram per step, summed, gives the same
quantiles whichever way the run was read, in constant memory (a few KB per part). 40 bins per decade keep a
quantile within 3 % of the exact one (the bin's geometric middle), far inside the run-to-run noise the
thresholds work with.
"""

from __future__ import annotations

import numpy as np

DECADES = (-6, 6)
"""Values from 1 µs (or 1e-6 of a unit) to 1e6 units; smaller ones count as the floor, larger as the top."""
BINS_PER_DECADE = 40
N_BINS = (DECADES[1] - DECADES[0]) * BINS_PER_DECADE
_LOG_LOW = DECADES[0]
_COUNT_BITS = 40
_COUNT_LIMIT = 1 << _COUNT_BITS
"""A packed bin's count (:meth:`LogHistogram.compact`) below 2⁴⁰; a histogram with a larger one stays dense."""


class LogHistogram:
    """Counts of positive values in log-spaced bins; zero and negative values are counted apart."""

    __slots__ = ("_counts", "_packed", "zeros")

    def __init__(self, counts: np.ndarray | None = None, zeros: int = 0) -> None:
        self._counts: np.ndarray | None = np.zeros(N_BINS, dtype=np.int64) if counts is None else counts
        self._packed: np.ndarray | None = None
        self.zeros = zeros

    @classmethod
    def compact(cls, counts: np.ndarray, zeros: int) -> LogHistogram:
        """A histogram kept for the run's end (a step's, for the baselines): its non-zero bins only, each bin and
        count packed in one int64, the dense counts made again when read.

        Why: a step keeps one histogram per (part, key, metric) to the run's end (hundreds a step), and a step's
        values fill a few dozen of the 480 bins (memory saved: docs/performance.md)."""
        counts = np.asarray(counts, dtype=np.int64)
        if counts.max(initial=0) >= _COUNT_LIMIT:
            return cls(counts.copy(), zeros)
        h = cls.__new__(cls)
        nonzero = np.flatnonzero(counts)
        h._counts, h._packed, h.zeros = None, (nonzero << _COUNT_BITS) | counts[nonzero], zeros
        return h

    @property
    def counts(self) -> np.ndarray:
        """Counts per bin (dense; made from the packed bins of a :meth:`compact` histogram on each read)."""
        if self._counts is not None:
            return self._counts
        out = np.zeros(N_BINS, dtype=np.int64)
        out[self._packed >> _COUNT_BITS] = self._packed & (_COUNT_LIMIT - 1)
        return out

    @counts.setter
    def counts(self, value: np.ndarray) -> None:
        self._counts, self._packed = value, None

    @classmethod
    def of(cls, values: np.ndarray) -> LogHistogram:
        h = cls()
        h.add(values)
        return h

    @staticmethod
    def bins(values: np.ndarray) -> np.ndarray:
        """Each value's bin: -1 for zero or negative, -2 for NaN/inf (not counted)."""
        v = np.asarray(values, dtype=float)
        out = np.full(len(v), -2, dtype=np.int64)
        finite = np.isfinite(v)
        out[finite & (v <= 0)] = -1
        pos = finite & (v > 0)
        out[pos] = np.clip(np.floor((np.log10(v[pos]) - _LOG_LOW) * BINS_PER_DECADE), 0, N_BINS - 1)
        return out

    def add(self, values: np.ndarray) -> None:
        b = self.bins(values)
        self.zeros += int((b == -1).sum())
        ok = b >= 0
        if ok.any():
            self.counts += np.bincount(b[ok], minlength=N_BINS)

    def merge(self, other: LogHistogram) -> None:
        self.counts += other.counts
        self.zeros += other.zeros

    @property
    def n(self) -> int:
        return int(self.counts.sum()) + self.zeros

    def quantile(self, q: float) -> float:
        """The ``q`` quantile (0..1): the geometric middle of the bin it falls in; NaN when empty."""
        n = self.n
        if n == 0:
            return float("nan")
        rank = q * (n - 1)
        if rank < self.zeros:
            return 0.0
        cum = np.cumsum(self.counts)
        i = int(np.searchsorted(cum, rank - self.zeros, side="right"))
        i = min(i, N_BINS - 1)
        return float(10 ** (_LOG_LOW + (i + 0.5) / BINS_PER_DECADE))

    def median(self) -> float:
        return self.quantile(0.5)
