"""Unions of time intervals (ns), and how much of a window they cover: the arithmetic of who was busy when.

Why a module: the asynchronous account asks the same three questions of every lane (how long was the trainer
waiting inside this step, how long was a replica generating and not paused), and a union must not count two
overlapping engine calls twice.
"""

from __future__ import annotations

import numpy as np


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted, disjoint intervals covering the same instants as ``[starts[i], ends[i]]``."""
    s = np.asarray(starts, dtype=np.int64)
    e = np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if not len(s):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = np.argsort(s, kind="stable")
    s, e = s[order], np.maximum.accumulate(e[order])
    # a new interval starts where its start lies beyond every earlier end
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > e[:-1]
    group = np.cumsum(new) - 1
    out_e = np.zeros(group[-1] + 1, dtype=np.int64)
    np.maximum.at(out_e, group, e)
    return s[new], out_e


def covered_s(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> float:
    """Seconds of ``[lo, hi]`` inside the union of the intervals."""
    s, e = union(starts, ends)
    return float(np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None).sum()) / 1e9


def disjoint_covered_s(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> float:
    """:func:`covered_s` of intervals already disjoint and sorted (a :func:`union`): only those meeting the window
    are read, so a run's steps cost one pass over a replica's intervals, not one each."""
    i = int(np.searchsorted(ends, lo, side="right"))
    j = int(np.searchsorted(starts, hi, side="left"))
    if j <= i:
        return 0.0
    return float(np.clip(np.minimum(ends[i:j], hi) - np.maximum(starts[i:j], lo), 0, None).sum()) / 1e9


def minus(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The instants of union ``a`` outside union ``b`` (both as :func:`union` returns them)."""
    a_s, a_e = a
    b_s, b_e = b
    if not len(a_s) or not len(b_s):
        return a_s, a_e
    points = np.unique(np.concatenate([a_s, a_e, b_s, b_e]))
    lo, hi = points[:-1], points[1:]
    mid = lo + (hi - lo) // 2
    keep = _inside(mid, a_s, a_e) & ~_inside(mid, b_s, b_e) & (hi > lo)
    return union(lo[keep], hi[keep])


def _inside(t: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    i = np.searchsorted(s, t, side="right") - 1
    ok = i >= 0
    out = np.zeros(len(t), dtype=bool)
    out[ok] = t[ok] < e[i[ok]]
    return out
