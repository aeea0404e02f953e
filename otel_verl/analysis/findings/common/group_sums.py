"""Count-weighted means per group of rows: :func:`weighted_means`, the step's group medians' one aggregation.

Why not a groupby on the frame's text columns: the step's account and the stragglers' peers aggregate a few
hundred rows a step, and that groupby's fixed cost, paid per step, was most of their time (docs/performance.md,
"Figures quoted from code"). Here the keys are coded once (:func:`.row_codes.factorize_rows`) and one groupby runs on
the codes: pandas adds each group's values in row order however they are keyed, so the sums are the same to the
last bit (a plain ``np.bincount`` adds without pandas' compensation and is not).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common.row_codes import factorize_rows


def weighted_means(
    keys: Sequence[np.ndarray], count: np.ndarray, values: dict[str, np.ndarray]
) -> tuple[list[tuple], np.ndarray, dict[str, np.ndarray]]:
    """Per distinct row of ``keys`` (in order of first appearance, as ``groupby(keys, sort=False)``; keys are never
    missing here): (its key tuple, its summed ``count``, each of ``values`` weighted by ``count`` and summed, then
    divided by the summed count)."""
    codes, uniques = factorize_rows(keys)
    frame = pd.DataFrame({name: v * count for name, v in values.items()} | {"count": count}, index=codes)
    # codes number the groups in order of first appearance; grouped as the index (an array of keys is first looked
    # up as a column name, and the miss's message formats the array: the most of the call's time)
    sums = frame.groupby(level=0, sort=True).sum()
    total = sums["count"].to_numpy()
    return uniques, total, {name: sums[name].to_numpy() / total for name in values}
