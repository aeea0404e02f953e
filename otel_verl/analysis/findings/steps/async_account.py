"""Who waited for whom in a step of an asynchronous V1 trainer: :func:`async_accounts` → :class:`AsyncStep`.

Per step (its wall time W, the ``verl.step`` span), from :mod:`otel_verl.analysis.tables.async_sides`:

- ``trainer_wait_s``: the trainer waiting for samples (its inner updates' ``gen`` phases, the replay buffer's
  ``sample``); ``trainer_idle_ratio`` = trainer_wait_s / W (verl#7601's trainer idle);
- ``rollout_paused_s``: the rollout paused inside W (weight syncs; in colocate_async also asleep while the
  trainer trains);
- per replica, idle = W − the time it had a sample in flight and was not paused; ``rollout_idle_ratio`` is the
  replicas' mean (verl#7601's rollout idle, over all replicas), ``replicas`` each one's; ``rollout_no_work_s``
  (idle, not paused: every group it was given was done; the replay buffer waits for the trainer to take them)
  is the replicas' mean too; ``engine_idle_ratio`` the same with an engine call in flight instead of a sample
  (verl#7601's literal "no request in flight": it counts a sample's tools, reward and turns as idle);
- ``weight_sync_s`` (the ``verl.weight_sync`` spans' seconds), ``weight_sync_bytes``, ``_replicas``, ``_backend``.

Sync trainers (``v1-sync``, legacy) have no such step: the key is null in findings.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from otel_verl.analysis.tables.async_sides import (
    BUSY,
    GENERATING,
    TRAIN,
    WAIT,
    WEIGHT_SYNC,
    async_steps,
    pause_windows,
    rollout_lanes,
    trainer_lane,
)
from otel_verl.analysis.tables.intervals import covered_s, disjoint_covered_s

if TYPE_CHECKING:
    from otel_verl.analysis.tables import Tables


@dataclass
class AsyncStep:
    """One asynchronous step's two sides (seconds)."""

    step: int
    mode: str
    wall_s: float
    trainer_wait_s: float
    trainer_train_s: float
    updates: int
    rollout_paused_s: float
    rollout_idle_s: float
    rollout_no_work_s: float
    engine_idle_s: float = float("nan")
    """The replicas' mean time with no engine call in flight, or paused."""
    replicas: dict[str, float] = field(default_factory=dict)
    """Each replica's idle ratio."""
    weight_sync_s: float = 0.0
    weight_syncs: int = 0
    weight_sync_bytes: float = float("nan")
    weight_sync_replicas: float = float("nan")
    weight_sync_backend: str | None = None
    evidence: list[dict[str, str]] = field(default_factory=list)
    """The step's weight syncs and its longest wait."""
    first_step: int = 1
    """The trainer's first step (``verl.trainer.first_step``): where its pipeline filled (:attr:`fills_pipeline`)."""
    pauses: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    )
    """The run's rollout pauses (disjoint, sorted; shared by every step): :meth:`paused_share`."""

    def paused_share(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Each interval's share spent while the rollout was paused (a weight sync; colocate_async asleep while
        the trainer trains): a request part that mostly waited out a pause shows the price of overlap, counted in
        the step's ``rollout_paused_s``, not a slow part (a clean colocate_async demo's engine waits of 0.7-1 s,
        against a usual 0.04 s, lay 97-99 % inside pauses)."""
        s, e = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
        paused = np.array([disjoint_covered_s(*self.pauses, int(a), int(b)) for a, b in zip(s, e, strict=True)])
        return np.where(e > s, paused * 1e9 / np.maximum(e - s, 1), 0.0) if len(s) else np.zeros(0)

    @property
    def fills_pipeline(self) -> bool:
        """The trainer's first step: it waits for the first samples, which no earlier step produced ahead. Known
        from the step span (the run's, not the analysis's, first step: ``analyze --steps 5:10`` fills nothing)."""
        return self.step == self.first_step

    @property
    def trainer_idle_ratio(self) -> float:
        return self.trainer_wait_s / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def rollout_idle_ratio(self) -> float:
        return self.rollout_idle_s / self.wall_s if self.wall_s > 0 else float("nan")

    @property
    def engine_idle_ratio(self) -> float:
        return self.engine_idle_s / self.wall_s if self.wall_s > 0 else float("nan")

    def to_json(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "wall_s": _r(self.wall_s),
            "trainer_wait_s": _r(self.trainer_wait_s),
            "trainer_train_s": _r(self.trainer_train_s),
            "trainer_idle_ratio": _r(self.trainer_idle_ratio),
            "updates": self.updates,
            "rollout_paused_s": _r(self.rollout_paused_s),
            "rollout_no_work_s": _r(self.rollout_no_work_s),
            "rollout_idle_ratio": _r(self.rollout_idle_ratio),
            "engine_idle_ratio": _r(self.engine_idle_ratio),
            "replicas": {name: _r(v) for name, v in self.replicas.items()},
            "weight_sync_s": _r(self.weight_sync_s),
            "weight_syncs": self.weight_syncs,
            "weight_sync_bytes": None if not np.isfinite(self.weight_sync_bytes) else int(self.weight_sync_bytes),
            "weight_sync_replicas": None
            if not np.isfinite(self.weight_sync_replicas)
            else int(self.weight_sync_replicas),
            "weight_sync_backend": self.weight_sync_backend,
        }


def async_accounts(t: Tables) -> dict[int, AsyncStep]:
    """Every asynchronous step's :class:`AsyncStep` (empty for a sync or legacy run)."""
    steps = async_steps(t)
    if steps.empty:
        return {}
    lane = trainer_lane(t, steps)
    paused = pause_windows(t, steps, lane)
    rollout = rollout_lanes(t, paused)
    busy = _by_replica(rollout, BUSY)
    generating = _by_replica(rollout, GENERATING)
    out = {}
    for row in steps.itertuples(index=False):
        lo, hi = int(row.start_ns), int(row.end_ns)
        wall = (hi - lo) / 1e9
        mine = lane[lane["step"].to_numpy(dtype=float) == row.step]
        waits, syncs = mine[mine["what"] == WAIT], mine[mine["what"] == WEIGHT_SYNC]
        trains = mine[mine["what"] == TRAIN]
        paused_s = disjoint_covered_s(paused[0], paused[1], lo, hi)
        idle = {str(name): wall - disjoint_covered_s(s, e, lo, hi) for name, (s, e) in busy.items()}
        mean_idle = float(np.mean(list(idle.values()))) if idle else wall
        engine_idle = [wall - disjoint_covered_s(s, e, lo, hi) for s, e in generating.values()]
        out[int(row.step)] = AsyncStep(
            step=int(row.step),
            mode=str(row.mode),
            wall_s=wall,
            trainer_wait_s=covered_s(waits["start_ns"].to_numpy(), waits["end_ns"].to_numpy(), lo, hi),
            trainer_train_s=covered_s(trains["start_ns"].to_numpy(), trains["end_ns"].to_numpy(), lo, hi),
            updates=int(mine["update_index"].dropna().nunique()),
            rollout_paused_s=paused_s,
            rollout_idle_s=mean_idle,
            rollout_no_work_s=max(mean_idle - paused_s, 0.0),
            engine_idle_s=float(np.mean(engine_idle)) if engine_idle else wall,
            replicas={name: v / wall if wall > 0 else float("nan") for name, v in idle.items()},
            weight_sync_s=float((syncs["end_ns"] - syncs["start_ns"]).sum()) / 1e9,
            weight_syncs=len(syncs),
            weight_sync_bytes=_sum(syncs["bytes"]),
            weight_sync_replicas=_max(syncs["replicas"]),
            weight_sync_backend=next((str(b) for b in syncs["backend"] if isinstance(b, str)), None),
            evidence=_evidence(syncs, waits),
            first_step=int(row.first_step),
            pauses=paused,
        )
    return out


def _by_replica(rollout: Any, what: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each replica's intervals of one kind, disjoint and sorted as :func:`.async_sides.rollout_lanes` made them."""
    if rollout.empty:
        return {}
    mine = rollout[rollout["what"] == what].sort_values("start_ns")
    return {
        str(name): (g["start_ns"].to_numpy(dtype=np.int64), g["end_ns"].to_numpy(dtype=np.int64))
        for name, g in mine.groupby("replica")
    }


def _evidence(syncs: Any, waits: Any) -> list[dict[str, str]]:
    rows = list(syncs.itertuples(index=False))
    if len(waits):
        rows.append(waits.loc[(waits["end_ns"] - waits["start_ns"]).idxmax()])
    return [
        {"trace_id": r.trace_id, "span_id": r.span_id}
        for r in rows
        if isinstance(r.trace_id, str) and isinstance(r.span_id, str)
    ]


def _sum(values: Any) -> float:
    v = np.asarray(values, dtype=float)
    return float(np.nansum(v)) if np.isfinite(v).any() else float("nan")


def _max(values: Any) -> float:
    v = np.asarray(values, dtype=float)
    return float(np.nanmax(v)) if np.isfinite(v).any() else float("nan")


def _r(x: float) -> float | None:
    return None if x is None or not np.isfinite(x) else round(float(x), 6)
