"""Stalls: a worker that held its requests still (its process paused, its event loop blocked): :func:`with_stalls`.

A stretch with several requests in flight, of different prompts, and nothing starting or ending below the worker,
heavier (seconds × requests in flight) than the run's stretches of nothing moving (:mod:`.quiet`,
:mod:`.baselines`), is a stall, unless the engine's own account says where the time went (queued, prefill,
decoding: each request is then told by its part) or every request in flight sat in one part that was slow across
the worker by about the stretch (a slow reward holds its requests still together, and is a slow reward). The
stall's seconds are taken from what the stretched parts were blamed for.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from otel_verl.analysis.findings import kinds as k
from otel_verl.analysis.findings.anomaly_rows import anomaly_rows
from otel_verl.analysis.findings.baselines import Baselines
from otel_verl.analysis.findings.step_summary import METRIC_SECONDS, StepSummary
from otel_verl.analysis.findings.thresholds import Thresholds


def with_stalls(s: StepSummary, b: Baselines, th: Thresholds, found: pd.DataFrame) -> pd.DataFrame:
    """Stretches of nothing moving beyond the run's fence, with requests of two or more prompts in flight: the
    parts they stretched give that time to a ``stall`` (a stretch within one prompt's rollouts stays theirs)."""
    q = s.quiet
    if q.empty or not np.isfinite(b.stall_fence):
        return found
    q = q[(q["in_flight"].to_numpy() >= th.stall_min_in_flight) & (q["weight"].to_numpy() > b.stall_fence)]
    if q.empty:
        return found
    occ = s.occurrences
    samples = s.requests.set_index("request_span")["sample_index"]
    extra = []
    found = found.copy()
    for w in q.itertuples(index=False):
        prompts = {x for x in samples.reindex(list(w.requests)).to_numpy(dtype=float) if np.isfinite(x)}
        if len(prompts) == 1 and len(w.requests) > 1:
            continue
        if _engine_accounts_for(occ, w) or _one_part_moved(occ, w, b):
            continue
        for req in w.requests:
            # a gap row spans its whole request (it is the rest, not a time of its own): never the part stretched
            mine = (occ["request_span"].to_numpy() == req) & (occ["part"].to_numpy() != k.PART_GAP)
            overlap = np.minimum(occ["end_ns"].to_numpy(), w.end_ns) - np.maximum(
                occ["start_ns"].to_numpy(), w.start_ns
            )
            overlap = np.where(mine, np.clip(overlap, 0, None) / 1e9, 0.0)
            if overlap.max(initial=0.0) <= 0:
                continue
            i = int(np.argmax(overlap))
            took = float(overlap[i])
            # the stall's seconds come out of what the stretched part was already blamed for
            here = found.index[found["occ"].to_numpy() == i]
            for j in here:
                cut = min(float(found.at[j, "x"]), took)
                found.at[j, "x"] = float(found.at[j, "x"]) - cut
            extra.append(
                anomaly_rows(
                    np.array([i]),
                    k.STALL,
                    occ["part"].iat[i],
                    np.array([took]),
                    k.SCOPE_WORKER,
                    str(w.worker),
                    METRIC_SECONDS,
                    np.array([w.seconds]),
                    np.array([0.0]),
                )
            )
    found = found[found["x"].to_numpy(dtype=float) > 0]
    return pd.concat([found, *extra], ignore_index=True) if extra else found


def _one_part_moved(occ: pd.DataFrame, w: Any, b: Baselines) -> bool:
    """Whether every request in flight was in the same part and that part was slow across the worker by about the
    stretch: every reward of the worker 100 s slower holds its requests still together, and that is a slow reward
    (its typical excess on the worker is the stretch). A stall stretches only what was in flight: the part's typical
    occurrence on the worker stays about usual."""
    held = occ["request_span"].isin(list(w.requests)).to_numpy() & (occ["start_ns"].to_numpy() < w.end_ns)
    held = held & (occ["end_ns"].to_numpy() > w.start_ns) & (occ["part"].to_numpy() != k.PART_GAP)
    parts = set(occ["part"].to_numpy()[held])
    if len(parts) != 1:
        return False
    (part,) = parts
    mine = (occ["part"].to_numpy() == part) & (occ["worker"].to_numpy(dtype=float) == float(w.worker))
    keys = occ["key"].to_numpy()[mine]
    usual = np.array([(n.median if (n := b.norm(part, key, METRIC_SECONDS)) else np.nan) for key in keys])
    excess = occ["value_s"].to_numpy(dtype=float)[mine] - usual
    excess = excess[np.isfinite(excess)]
    return bool(len(excess) and np.median(excess) >= 0.5 * float(w.seconds))


def _engine_accounts_for(occ: pd.DataFrame, w: Any) -> bool:
    """Whether the engine's own account says where most of the stretch went (queued, prefill, decoding, on the
    way to it): then each request is told by its own part; a paused worker shows in the parts the engine does
    not see (the answer's way back, a tool, a reward, time between spans)."""
    held = occ["request_span"].isin(list(w.requests)).to_numpy() & (occ["start_ns"].to_numpy() <= w.start_ns)
    held = held & (occ["end_ns"].to_numpy() >= w.end_ns) & (occ["part"].to_numpy() != k.PART_GAP)
    if not held.any():
        return False
    return bool(occ["by_engine"].to_numpy(dtype=bool)[held].mean() > 0.5)
