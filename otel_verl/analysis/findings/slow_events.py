"""slow_event candidates: reward, tool, preprocess, tool_parse and unknown spans far above their event type's
norm (all steps). :mod:`.flagged_spans` turns them into findings."""

from __future__ import annotations

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.flagged_spans import MAX_FLAGGED_PER_TYPE, empty_flags, far_above_norm, flag_rows
from otel_verl.analysis.findings.thresholds import Thresholds
from otel_verl.analysis.read.id_lookup import lookup
from otel_verl.analysis.tables import Tables


def flag_slow_events(t: Tables, th: Thresholds) -> pd.DataFrame:
    """Reward/tool/preprocess/tool_parse/unknown spans far above their event type's norm (all steps)."""
    if t.events.empty:
        return empty_flags()
    kind = t.events["kind"]
    # an unknown span inside a known event (the engine's own span under text_completion, verl.reward.compute
    # under verl.reward) is that event's inside: the event's own finding already names it
    other = (kind == "other").to_numpy()
    inner = np.zeros(len(kind), dtype=bool)
    if other.any():  # hash lookup, and only for "other" rows: isin on 2M Arrow strings took seconds
        inner[other] = lookup(t.events.loc[other, "parent_id"], t.events.loc[~other, "span_id"]) >= 0
    cols = ["event", "duration", "request_span", "step", "worker", "turn_index", "start_ns", "end_ns"]
    ev = t.events.loc[((kind != "engine") & ~inner).to_numpy(), [*cols, "trace_id", "span_id"]]
    frames = []
    for label, grp in ev.groupby("event"):
        mask, med = far_above_norm(grp["duration"], th.event_k, th.event_ratio, th.event_min_s)
        if mask.any():
            hit = grp[mask].nlargest(MAX_FLAGGED_PER_TYPE, "duration")
            frames.append(flag_rows(t, hit, "slow_event", str(label), "duration", med))
    return pd.concat(frames, ignore_index=True) if frames else empty_flags()
