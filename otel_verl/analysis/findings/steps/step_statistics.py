"""A step's occurrences reduced to the numbers its baselines are built from: :func:`step_statistics`.

Per step, a histogram of every (part, key, metric)'s values, mergeable across steps (:mod:`.histograms`), and
the median of every group of occurrences (the whole step, each worker, replica and sample group), from which
:mod:`.baselines` learns how far groups usually stray. Metrics: seconds for every part; for decode also its
tokens and its seconds per token.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.histograms import N_BINS, LogHistogram
from otel_verl.analysis.findings.common.row_codes import factorize_rows

METRIC_SECONDS = "s"
METRIC_TOKENS = "tokens"
METRIC_RATE = "rate"
"""Seconds per token of a decode part."""
REPLICA_KEY = "@"
"""Joins a turn key and a replica in the engine queue's second key (:func:`replica_keys`)."""

GROUP_STEP = "step"
GROUP_WORKER = "worker"
GROUP_REPLICA = "replica"
GROUP_SAMPLE = "sample"


def replica_keys(part: np.ndarray, key: np.ndarray, replica: np.ndarray) -> np.ndarray:
    """Where an engine queue occurrence's replica is known, its second baseline key ``<turn>@<replica>``; else
    ``None``. A replica's queue follows its own load (its capacity, the requests routed to it): one replica that
    queues a second for half its calls must not set the fence of one that never queues (an 8 s wait there hid
    in the run's q95). Only the fences read these keys; the groups' medians keep the turn index alone."""
    out = np.full(len(part), None, dtype=object)
    ok = (part == k.PART_ENGINE_QUEUE) & pd.notna(replica)
    if ok.any():
        out[ok] = [replica_key(a, b) for a, b in zip(key[ok], replica[ok], strict=True)]
    return out


def replica_key(key: str, replica: object) -> str:
    """The engine queue's baseline key of turn key ``key`` on ``replica`` (:func:`replica_keys`)."""
    return f"{key}{REPLICA_KEY}{replica}"


def group_key(values: pd.Series) -> pd.Series:
    """A group's name as text: a worker rank or sample index as a whole number (``3``, not ``3.0``)."""
    if values.dtype.kind in "fi":
        return pd.Series(
            np.where(values.notna(), values.fillna(-1).astype(np.int64).astype(str), ""), index=values.index
        )
    return values.astype(str)


def step_statistics(
    occ: pd.DataFrame,
) -> tuple[dict[float, dict[tuple[str, str, str], LogHistogram]], dict[float, pd.DataFrame]]:
    """Per step: its histograms per (part, key, metric) and its medians per group (the whole step, each worker,
    replica and sample group). Rows are coded once, groups run on integer codes and a group's name is made per
    distinct value (not a groupby per group type on text columns, which was slower)."""
    if occ.empty:
        return {}, {}
    long = _metrics(occ)
    n = len(long)
    by_replica = replica_keys(long["part"].to_numpy(), long["key"].to_numpy(), long["replica"].to_numpy())
    extra = np.flatnonzero(pd.notna(by_replica) & (long["metric"].to_numpy() == METRIC_SECONDS))
    take = np.concatenate([np.arange(n), extra])  # the histograms also count engine queues per replica
    key = np.concatenate([long["key"].to_numpy(dtype=object), by_replica[extra]])
    columns = [long["step"].to_numpy(dtype=float)[take], long["part"].to_numpy(dtype=object)[take], key]
    columns.append(long["metric"].to_numpy(dtype=object)[take])
    codes, uniques = factorize_rows(columns)  # every occurrence has its step, part, key and metric
    width = N_BINS + 2  # bins -2 (not a number, not counted), -1 (zero or less), then 0..N_BINS-1
    cells = codes * width + LogHistogram.bins(long["v"].to_numpy(dtype=float)[take]) + 2
    table = np.bincount(cells, minlength=len(uniques) * width).reshape(len(uniques), width)
    hist: dict[float, dict[tuple[str, str, str], LogHistogram]] = {}
    for (step, part, key_, metric), row in zip(uniques, table, strict=True):
        hist.setdefault(step, {})[(part, key_, metric)] = LogHistogram.compact(row[2:], int(row[1]))
    v, base = long["v"].to_numpy(dtype=float), codes[:n]
    named = [np.array([u[i] for u in uniques], dtype=object) for i in range(4)]  # step, part, key, metric
    frames = [_medians(v, base, named, GROUP_STEP, np.zeros(n, dtype=np.int64), [""])]
    for group_type, col in ((GROUP_WORKER, "worker"), (GROUP_REPLICA, "replica"), (GROUP_SAMPLE, "sample_index")):
        ok = long[col].notna().to_numpy()
        if ok.any():
            raw_codes, raw = pd.factorize(long[col].to_numpy()[ok])
            name_codes, names = pd.factorize(group_key(pd.Series(raw)).to_numpy(dtype=object))
            frames.append(_medians(v[ok], base[ok], named, group_type, name_codes[raw_codes], list(names)))
    allg = pd.concat(frames, ignore_index=True)
    cols = ["group_type", "group", "part", "key", "metric", "median", "count"]
    return hist, {s: g[cols].reset_index(drop=True) for s, g in allg.groupby("step", sort=False)}


def _medians(
    v: np.ndarray, base: np.ndarray, named: list[np.ndarray], group_type: str, group: np.ndarray, names: list[str]
) -> pd.DataFrame:
    """Median and size of ``v`` per (row code, group), in order of first appearance (as a groupby on the
    columns with ``sort=False``); ``named``: each row code's step, part, key and metric."""
    pair, first = pd.factorize(base * len(names) + group)
    agg = pd.Series(v).groupby(pair, sort=True).agg(["median", "size"])
    row = first // len(names)
    return pd.DataFrame(
        {
            "step": named[0][row].astype(float),
            "group": np.array(names, dtype=object)[first % len(names)],
            "part": named[1][row],
            "key": named[2][row],
            "metric": named[3][row],
            "median": agg["median"].to_numpy(),
            "count": agg["size"].to_numpy(),
            "group_type": group_type,
        }
    )


def _metrics(occ: pd.DataFrame) -> pd.DataFrame:
    """Occurrences as (part, key, metric, v) rows: seconds for every part; tokens and seconds per token for decode."""
    base = occ[["step", "part", "key", "worker", "replica", "sample_index"]]
    rows = [base.assign(metric=METRIC_SECONDS, v=occ["value_s"].to_numpy(dtype=float))]
    tokens = occ["tokens"].to_numpy(dtype=float)
    dec = (occ["part"].to_numpy() == k.PART_DECODE) & np.isfinite(tokens) & (tokens > 0)
    if dec.any():
        rows.append(base[dec].assign(metric=METRIC_TOKENS, v=tokens[dec]))
        rows.append(base[dec].assign(metric=METRIC_RATE, v=occ["value_s"].to_numpy(dtype=float)[dec] / tokens[dec]))
    return pd.concat(rows, ignore_index=True)
