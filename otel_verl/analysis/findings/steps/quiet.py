"""Where nothing moved on a worker while requests were in flight: :func:`quiet_windows`.

Why: a stalled worker (its process paused, its event loop blocked, its engine hung) shows in no span of its own:
every span in flight simply lasts longer. What gives it away is a stretch in which no span below the worker
started or ended although several requests were in flight. The longest such stretches per worker and step are
kept here, baseline-free; :mod:`.anomalies` decides which of them were stalls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

CANDIDATES = 10
"""The longest stretches per worker and step whose requests in flight are counted..."""
KEEP_PER_WORKER = 3
"""...and the ones kept: the heaviest (seconds × requests in flight). A stall holds many requests still; the
long stretches at a rollout's tail hold one or two."""
MIN_QUIET_S = 0.01
QUIET_COLUMNS = ("step", "worker", "start_ns", "end_ns", "seconds", "in_flight", "weight", "requests")


def quiet_windows(t: Tables) -> pd.DataFrame:
    """Per (step, worker): its heaviest stretches with no span starting or ending below it, with the requests in
    flight across each (``requests``: a tuple of request span rows; ``weight``: seconds × requests in flight, the
    request-seconds that stood still). Columns :data:`QUIET_COLUMNS`."""
    sp = t.spans
    kind = sp["kind"].to_numpy()
    keep = (sp["worker_span"].to_numpy() >= 0) & (kind != "worker") & (kind != "barrier")
    keep &= sp["step"].notna().to_numpy() & sp["worker"].notna().to_numpy()
    if "validate" in sp:
        keep &= ~sp["validate"].fillna(False).to_numpy(dtype=bool)
    if not keep.any():
        return pd.DataFrame(columns=list(QUIET_COLUMNS))
    step = sp["step"].to_numpy(dtype=np.int64, na_value=0)[keep]
    worker = sp["worker"].to_numpy(dtype=np.int64, na_value=0)[keep]
    times = np.concatenate([sp["start_ns"].to_numpy()[keep], sp["end_ns"].to_numpy()[keep]]).astype(np.int64)
    step, worker = np.tile(step, 2), np.tile(worker, 2)
    order = np.lexsort((times, worker, step))
    step, worker, times = step[order], worker[order], times[order]
    same = (np.diff(step) == 0) & (np.diff(worker) == 0)
    gap = np.diff(times)
    ok = same & (gap >= MIN_QUIET_S * 1e9)
    idx = np.flatnonzero(ok)
    if not len(idx):
        return pd.DataFrame(columns=list(QUIET_COLUMNS))
    cand = pd.DataFrame(
        {"step": step[idx], "worker": worker[idx], "start_ns": times[idx], "end_ns": times[idx + 1], "gap": gap[idx]}
    )
    cand = cand.sort_values("gap", ascending=False, kind="stable").groupby(["step", "worker"]).head(CANDIDATES)
    req = t.requests
    req = req[req["request_row"] >= 0][["step", "worker", "request_row", "start_ns", "end_ns"]].astype(
        {"step": "int64", "worker": "int64"}
    )
    m = cand.reset_index(drop=True).reset_index(names="cand").merge(req, on=["step", "worker"], suffixes=("", "_r"))
    inflight = m[(m["start_ns_r"] <= m["start_ns"]) & (m["end_ns_r"] >= m["end_ns"])]
    held = inflight.groupby("cand")["request_row"].agg(tuple)
    out = cand.reset_index(drop=True)
    out["requests"] = [held.get(i, ()) for i in range(len(out))]
    out["in_flight"] = [len(x) for x in out["requests"]]
    out["seconds"] = out["gap"] / 1e9
    out["weight"] = out["seconds"] * out["in_flight"]
    out = out.sort_values("weight", ascending=False, kind="stable").groupby(["step", "worker"]).head(KEEP_PER_WORKER)
    return out[list(QUIET_COLUMNS)].sort_values(["step", "worker", "start_ns"]).reset_index(drop=True)
