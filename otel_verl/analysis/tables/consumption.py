"""Which step's trainer took each sample of an asynchronous run: :func:`consuming_steps`.

Why: under verl's asynchronous trainers a sample is dispatched in one step (its request sits under that step's
worker span) and trained on by a later one: the replay buffer hands it to whichever inner update samples it next.
A slow sample costs the step whose trainer *waited* for it, not the step that dispatched it (issue 50: a replica
decoding several times slower was told at the dispatching step, held to that step's wait, where the trainer that
waited minutes for those samples was another). The trace says which: each ``verl.update`` links to the sample
groups it consumed (``docs/trainers.md``, "Consumption"), and each request hangs under its group.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from otel_verl import semconv as sc
from otel_verl.analysis.read.span_columns import extra_attributes

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables

COLUMNS = ["consumed_step", "policy_version", "group_span"]


def update_links(t: Tables) -> dict[str, int]:
    """Sample group span id → the earliest step whose ``verl.update`` linked it (the part's links only: a streamed
    run's consuming update may sit in a later part, :mod:`otel_verl.analysis.stream.consumers`)."""
    sp = t.spans
    if sp.empty or "links" not in sp:
        return {}
    kind = sp["kind"].to_numpy()
    updates = sp[(kind == "update") & sp["step"].notna().to_numpy()]
    taken: dict[str, int] = {}
    for step, links in zip(updates["step"].to_numpy(dtype=float), updates["links"].to_numpy(dtype=object), strict=True):
        for link in str(links or "").split(","):
            group = link.rpartition(":")[2]
            if group and (group not in taken or step < taken[group]):
                taken[group] = int(step)
    return taken


def consuming_steps(t: Tables) -> pd.DataFrame:
    """Per request row (the index): ``consumed_step``, the step whose inner update linked the request's sample group
    (the first, should two), ``policy_version``, the newest weights its sample was generated with
    (``verl.policy.version.max``), and ``group_span``, its sample group's span id (what a later part's links name).
    Empty for runs without consumption links (sync and legacy trainers)."""
    taken = update_links(t)
    if not taken:
        return pd.DataFrame(columns=COLUMNS, dtype=float)
    sp = t.spans
    rows = t.requests["request_row"].to_numpy(dtype=np.int64)
    parents = sp.loc[rows, "parent_id"].to_numpy(dtype=object)
    versions = [a.get(sc.VERL_POLICY_VERSION_MAX) for a in extra_attributes(sp.loc[rows, "extra"])]
    return pd.DataFrame(
        {
            "consumed_step": [float(taken.get(p, np.nan)) if isinstance(p, str) else np.nan for p in parents],
            "policy_version": [float(v) if isinstance(v, int | float) else np.nan for v in versions],
            "group_span": [p if isinstance(p, str) else None for p in parents],
        },
        index=rows,
    )
