"""What each part of a streamed run leaves for the end, kept on disk (:class:`PartStore`).

Why on disk: at real size a step's summary holds one row per part occurrence (about one a span:
docs/performance.md) and its figure parts one row per request; kept in memory for a run of 100-200 steps they
would make the analysis grow with the run again. Each value is pickled once, when its part is analysed, and read
back when the end needs it (the account walks the steps in order, a few times): a small cache keeps the last few
values read, so a walk reads each file once and memory holds a few steps' frames, not the run's. Pickle keeps every
dtype as it was (object columns with ``None`` or ``NaN``, Arrow strings, nullable integers), so what comes back
is what went in; a frame's repetitive text columns travel as codes (:func:`_packed`) and come back as the same
plain objects. Everything lives in one temporary directory, removed on :meth:`PartStore.close`; a forked
figure worker reads the same files.
"""

from __future__ import annotations

import pickle
import shutil
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from pandas.api.types import infer_dtype

CACHED = 2
"""Values of each name kept in memory after they were read (a step's occurrences and the previous step's)."""


class PartStore:
    """Values by (key, name), on disk; ``key`` is a part's or a step's, ``name`` what the value is."""

    def __init__(self, directory: str | Path | None = None, cached: int = CACHED) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="otel-verl-parts-", dir=directory))
        self._cached = cached
        self._cache: dict[str, OrderedDict[str, Any]] = {}
        self.bytes = 0
        """Bytes written so far (the benchmark reports it)."""

    def __enter__(self) -> PartStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _path(self, key: str, name: str) -> Path:
        return self.dir / f"{key}.{name}.pkl"

    def put(self, key: str, name: str, value: Any) -> None:
        path = self._path(key, name)
        self._cache.get(name, OrderedDict()).pop(key, None)  # a value put again is read back anew
        with path.open("wb") as fh:
            pickle.dump(_packed(value), fh, protocol=pickle.HIGHEST_PROTOCOL)
            self.bytes += fh.tell()

    def get(self, key: str, name: str) -> Any:
        """The value put under (key, name): from the cache, else read back (and cached)."""
        cache = self._cache.setdefault(name, OrderedDict())
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
        with self._path(key, name).open("rb") as fh:
            value = _unpacked(pickle.load(fh))  # our own temporary files
        cache[key] = value
        if len(cache) > self._cached:
            cache.popitem(last=False)
        return value

    def close(self) -> None:
        self._cache.clear()
        shutil.rmtree(self.dir, ignore_errors=True)


DISTINCT_PER = 10
"""A text column is packed when it holds at most one distinct value per this many rows."""


class _Packed:
    """A frame whose repetitive text columns travel as codes (:func:`_packed`)."""

    def __init__(self, frame: pd.DataFrame, text: list[str]) -> None:
        self.frame, self.text = frame, text


def _packed(value: Any) -> Any:
    """A frame's object columns of few distinct texts (one per :data:`DISTINCT_PER` rows at most, no missing
    value) as categoricals: pickle writes each object of a column one by one, and the occurrences' ``part`` and
    ``key`` made reading a step's occurrences back several times slower (docs/performance.md). Anything else as is."""
    if not isinstance(value, pd.DataFrame) or value.columns.has_duplicates:
        return value
    text = {}
    for c in value.columns[[dtype == np.dtype(object) for dtype in value.dtypes]]:
        if not isinstance(c, str):  # assign() takes names only
            continue
        codes, uniques = pd.factorize(value[c].to_numpy(), use_na_sentinel=False)
        if len(uniques) * DISTINCT_PER <= len(value) and infer_dtype(uniques, skipna=False) == "string":
            text[c] = pd.Categorical.from_codes(codes, uniques)
    return _Packed(value.assign(**text), list(text)) if text else value


def _unpacked(value: Any) -> Any:
    if not isinstance(value, _Packed):
        return value
    frame = value.frame
    return frame.assign(**{c: frame[c].astype(object) for c in value.text})
