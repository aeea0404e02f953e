"""A streamed asynchronous run's samples linked to the step that trained on them across parts: :class:`LateConsumers`.

Why: a streamed run is summarized one part (a step, or a window of steps) at a time, and under verl's asynchronous
trainers a group dispatched in step N is trained on by step N + 1's inner updates (``docs/trainers.md``,
"Consumption"): the consuming ``verl.update`` and its links sit in the next part. Summarized alone, the dispatch
step's requests had no ``consumed_step``, so :func:`~otel_verl.analysis.findings.causes.waited_for.waited_for` told
a hung reward at the step that dispatched it, held to that step's wait, never at the step that waited (issue 50,
must-have 5: the benchmark's ``async_reward`` class was told right in 0 of 4 runs). This keeps each summarized
step's unconsumed groups (span id → step, a few bytes a group) and, when a later part's updates link them, writes
the consuming step and its trainer wait into that step's stored requests. Groups no part consumes (the run's last
dispatch, a window cut before its consumer) stay unlinked, as before.

The same holds for the rollout's pauses (``AsyncStep.pauses``, "the run's", what excuses a request part that waited
one out): a group dispatched 2-3 steps ahead waits out later steps' weight syncs, which a part alone does not hold,
so each part's pauses join every summarized step's (linking the consumer without them turned a clean colocate run
3 batches ahead from silent to four warnings at the consuming steps, ``--classes async_stale --seed 9837``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from otel_verl.analysis.findings.steps.async_account import AsyncStep
from otel_verl.analysis.findings.steps.step_summary import StepSummary
from otel_verl.analysis.stream.store import PartStore
from otel_verl.analysis.tables import Tables
from otel_verl.analysis.tables.consumption import update_links
from otel_verl.analysis.tables.intervals import union


class LateConsumers:
    """:meth:`add` each part's tables and its new summaries, in step order."""

    def __init__(self, store: PartStore) -> None:
        self.store = store
        self.pending: dict[str, int] = {}
        """Sample group span id → the step whose stored requests hold it, not yet consumed."""
        self.accounts: list[AsyncStep] = []
        """Every summarized asynchronous step's account, each given the run's pauses so far."""

    def add(self, t: Tables, new: Sequence[StepSummary]) -> None:
        self._share_pauses([s.async_account for s in new if s.async_account is not None])
        waits = {s.step: s.async_account.trainer_wait_s for s in new if s.async_account is not None}
        links = update_links(t) if self.pending else {}
        found: dict[int, dict[str, int]] = {}
        for group, step in links.items():
            held = self.pending.pop(group, None)
            if held is not None and step in waits:
                found.setdefault(held, {})[group] = step
        for held, groups in found.items():
            self._link(held, groups, waits)
        for s in new:
            if s.async_account is None:
                continue
            r = s.requests
            open_ = r["consumed_step"].isna().to_numpy() & r["group_span"].notna().to_numpy()
            self.pending.update(dict.fromkeys(r["group_span"].to_numpy(dtype=object)[open_], s.step))

    def _share_pauses(self, new: list[AsyncStep]) -> None:
        if not new:
            return
        mine = self.accounts[0].pauses if self.accounts else new[0].pauses
        starts = np.concatenate([mine[0], *(a.pauses[0] for a in new)])
        ends = np.concatenate([mine[1], *(a.pauses[1] for a in new)])
        pauses = union(starts, ends)
        self.accounts += new
        for a in self.accounts:
            a.pauses = pauses

    def _link(self, step: int, groups: dict[str, int], waits: dict[int, float]) -> None:
        key = f"step{step}"
        r = self.store.get(key, "requests").copy()
        consumer = r["group_span"].map(groups).to_numpy(dtype=float)
        now = np.isfinite(consumer) & r["consumed_step"].isna().to_numpy()
        r.loc[now, "consumed_step"] = consumer[now]
        r.loc[now, "consumer_wait_s"] = [waits[int(c)] for c in consumer[now]]
        self.store.put(key, "requests", r)
