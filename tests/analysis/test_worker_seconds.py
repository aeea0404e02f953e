"""The sweep that splits a worker's step into event buckets (:func:`otel_verl.analysis.tables.worker_seconds.sweep`):
first bucket wins where several are open, the rest idle, the same floats as the formula it replaced."""

from __future__ import annotations

import numpy as np
import pytest

from otel_verl.analysis.tables.worker_seconds import PRIORITY, sweep


def _reference(lo: int, hi: int, intervals: dict, order: tuple[str, ...]) -> dict:
    """The earlier formula: the distinct times, then each bucket's open count by ``searchsorted``."""
    pts = [np.array([lo, hi])] + [np.clip(np.concatenate([s, e]), lo, hi) for s, e in intervals.values()]
    bounds = np.unique(np.concatenate(pts))
    seg = np.diff(bounds) / 1e9
    taken = np.zeros(len(seg), dtype=bool)
    out: dict[str, float] = {}
    for cat in order:
        if cat not in intervals:
            out[cat] = 0.0
            continue
        s, e = intervals[cat]
        size = len(bounds) + 1
        cnt = np.bincount(np.searchsorted(bounds, np.clip(s, lo, hi)), minlength=size) - np.bincount(
            np.searchsorted(bounds, np.clip(e, lo, hi)), minlength=size
        )
        active = np.cumsum(cnt)[: len(seg)] > 0
        out[cat] = float(seg[active & ~taken].sum())
        taken |= active
    out["idle"] = float(seg[~taken].sum())
    return out


def _ns(*seconds: float) -> np.ndarray:
    return (np.array(seconds) * 1e9).astype(np.int64)


def test_first_bucket_wins_the_rest_is_idle() -> None:
    got = sweep(0, 10**10, {"tool": (_ns(3), _ns(6)), "engine": (_ns(1, 2), _ns(4, 3))}, PRIORITY)
    assert got["engine"] == pytest.approx(3.0) and got["tool"] == pytest.approx(2.0)
    assert got["idle"] == pytest.approx(5.0) and got["reward"] == 0.0
    assert list(got) == [*PRIORITY, "idle"]


@pytest.mark.parametrize("seed", range(4))
def test_same_floats_as_the_earlier_formula(seed: int) -> None:
    """Ties, empty and zero-length intervals, intervals past the window, a bucket outside ``order``."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        lo = int(rng.integers(0, 1000))
        hi = lo + int(rng.integers(0, 5000))
        intervals = {}
        for cat in (*PRIORITY, "not-in-order"):
            if rng.random() < 0.3:
                continue
            n = int(rng.integers(0, 30))
            s = rng.integers(lo - 500, hi + 500, n) if rng.random() < 0.5 else rng.integers(lo - 5, lo + 50, n)
            e = s if rng.random() < 0.2 else s + rng.integers(0, 800, n)
            intervals[cat] = (s.astype(np.int64), e.astype(np.int64))
        got, expected = sweep(lo, hi, intervals, PRIORITY), _reference(lo, hi, intervals, PRIORITY)
        assert list(got) == list(expected) and got == expected  # exactly, not approximately
