"""The span table's sparse string columns: the offsets-only scatter equals Arrow's masked ``take``.

``_scatter_strings`` builds a full-length column from the sparse (row, value) pairs of a part by writing new
offsets over the values' own bytes; whenever its preconditions do not hold (rows repeated or out of order, a
null value) it must fall back to the ``take``, where the last value of a row wins. Each case is compared with
the ``take`` on the same input, and sliced arrays (an offset into shared buffers) are included since parts
concatenated or split by step carry them.
"""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from otel_verl.analysis.read.span_frame import _scatter_strings


def _take(values: pa.Array, idx: np.ndarray, n: int) -> pa.Array:
    where = np.full(n, -1, dtype=np.int64)
    where[idx] = np.arange(len(idx))
    return values.take(pa.array(where, mask=where < 0))


CASES = [
    (["a", "bb", "", "é"], [0, 2, 5, 6], 8),  # ascending, an empty string among them
    (["x"], [3], 4),
    (["x", "y"], [0, 1], 2),  # dense
    (["x", "y", "z"], [2, 2, 5], 6),  # a key twice in a span: the last wins
    (["x", "y"], [4, 1], 6),  # out of order
    (["x", None, "z"], [0, 1, 3], 4),  # a null value
    ([], [], 5),
]


@pytest.mark.parametrize(("texts", "rows", "n"), CASES)
def test_the_scatter_equals_the_take(texts: list[str | None], rows: list[int], n: int) -> None:
    values, idx = pa.array(texts, type=pa.string()), np.asarray(rows, dtype=np.int64)
    got = _scatter_strings(values, idx, n)
    got.validate(full=True)
    assert got.equals(_take(values, idx, n))


def test_a_slice_of_shared_buffers_scatters_its_own_values() -> None:
    whole = pa.array([f"v{i}" * (i % 4) for i in range(40)], type=pa.string())
    values = whole.slice(7, 20)
    idx = np.arange(20, dtype=np.int64) * 3 + 1
    got = _scatter_strings(values, idx, 64)
    got.validate(full=True)
    assert got.equals(_take(values, idx, 64))
    assert got.null_count == 64 - 20


@pytest.mark.parametrize("seed", range(5))
def test_random_sparse_columns_scatter_like_the_take(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 300)
    rows = sorted(rng.sample(range(n), rng.randint(0, n)))
    values = pa.array([rng.choice(["", "a", "ünï", "x" * rng.randint(1, 30)]) for _ in rows], type=pa.string())
    idx = np.asarray(rows, dtype=np.int64)
    got = _scatter_strings(values, idx, n)
    got.validate(full=True)
    assert got.equals(_take(values, idx, n))
