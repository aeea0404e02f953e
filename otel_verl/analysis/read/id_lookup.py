"""Find span ids among span ids fast: Arrow's hash lookup (the tree resolution and two detectors use it)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc


def arrow_strings(values: pd.Series) -> pa.Array:
    """The Arrow array behind a "str" column (no copy), or a converted one."""
    try:
        arr = pa.array(values.array)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        arr = None
    if arr is None or not (pa.types.is_string(arr.type) or pa.types.is_large_string(arr.type)):
        arr = pa.array([None if pd.isna(v) else str(v) for v in values.to_numpy(dtype=object)], type=pa.string())
    return arr


def lookup(keys: pd.Series, values: pd.Series) -> np.ndarray:
    """Position of each key's first occurrence in ``values``, -1 where absent (``Index.get_indexer`` for unique
    values). Arrow's hash lookup: 3x faster than pandas' on 2M ids, and no Python set of 2M strings."""
    k, v = arrow_strings(keys), arrow_strings(values)
    if k.type != v.type:
        k = k.cast(v.type)
    found = pc.index_in(k, value_set=v)
    return found.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
