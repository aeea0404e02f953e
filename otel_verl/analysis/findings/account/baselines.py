"""What each part usually takes in this run: :func:`run_baselines` over the steps' summaries.

Two questions are answered per part (and per key: an engine call's turn index, a tool's name):

* **Is one occurrence far outside the run's own spread?** Its value is above the *fence*: where the largest of
  the run's values of that part would fall, given the width of its tail (:func:`fence`), and at least
  ``3 × median``. Heavy tails move the fence out with them, so the long answers and slow tools every multi-turn
  run has stay inside it, while a stalled call or a 30 s reward lands far beyond. Quantiles come from the steps'
  histograms (:mod:`.histograms`), so a streamed run gets the same fences.
* **Did a whole group move?** The median of a step, a worker, a replica or a sample group, divided by the run's
  median, is compared with how far such groups usually stray (a robust z on log ratios across all groups of that
  type in the run): a reward 3× slower on every worker is nowhere near any single reward's fence, but every worker
  moved together.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from statistics import NormalDist

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.group_sums import weighted_means
from otel_verl.analysis.findings.common.histograms import LogHistogram
from otel_verl.analysis.findings.common.row_codes import factorize_rows
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.steps.step_statistics import REPLICA_KEY, replica_key
from otel_verl.analysis.findings.steps.step_summary import StepSummary

SHORT_RUN = 6
"""Fewer steps than this are a short run: each step is compared with its other steps directly."""
MIN_KEY_COUNT = 30
"""A (part, key) with fewer occurrences in the run is judged by its part's values over every key."""


@dataclass(frozen=True)
class Norm:
    """A part's usual value (``median``) and the fence an occurrence must pass to be far outside it."""

    median: float
    fence: float
    count: int
    moved: frozenset[int] = frozenset()
    """Steps where the whole part moved (:func:`steady`), left out of ``fence``. Their own occurrences are judged
    against ``moved_fence``, the fence over every step: their step's move tells them (one cause, at step scope)."""
    moved_fence: float = float("inf")
    scale: float = float("nan")
    """The tail's width: a normal's σ of log values (``additive``: of seconds, for a part that usually takes
    nothing), what :meth:`z` measures an occurrence in; taken one standard error wider than read (:func:`fence`)."""
    additive: bool = False

    def fence_in(self, step: int) -> float:
        """The fence an occurrence of ``step`` must pass."""
        return self.moved_fence if step in self.moved else self.fence

    def z(self, values: np.ndarray) -> np.ndarray:
        """How many widths above the median ``values`` lie (infinite for a part whose values never differ)."""
        v = np.asarray(values, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            x = v - self.median if self.additive else np.log(v / self.median)
            return np.where(x > 0, x / self.scale if self.scale > 0 else np.inf, 0.0)


@dataclass(frozen=True)
class Spread:
    """How far a group type's medians usually stray from the run's: centre and robust scale of their log ratios."""

    center: float
    scale: float
    groups: int


@dataclass
class Baselines:
    norms: dict[tuple[str, str, str], Norm] = field(default_factory=dict)
    """(part, key, metric) → its norm (a sparse key falls back to its part's norm over every key)."""
    part_norms: dict[tuple[str, str], Norm] = field(default_factory=dict)
    spreads: dict[tuple[str, str, str], Spread] = field(default_factory=dict)
    """(group type, part, metric) → the spread of such groups' log ratios in the run."""
    stall_norm: Norm | None = None
    """The norm of each worker-step's heaviest stretch of nothing moving (seconds × requests in flight)."""
    other_steps: dict[int, dict[tuple[str, str, str], LogHistogram]] = field(default_factory=dict)
    """A short run (fewer than :data:`SHORT_RUN` steps): per step, every other step's values merged per (part,
    key, metric). A step is judged against them (:func:`.anomalies.short_run_shifts`): a run of a few steps has
    too few step medians to learn how far steps stray."""

    @property
    def stall_fence(self) -> float:
        """A stretch of nothing moving heavier than this is far outside the run's usual."""
        return self.stall_norm.fence if self.stall_norm is not None else float("inf")

    def norm(self, part: str, key: str, metric: str) -> Norm | None:
        found = self.norms.get((part, key, metric))
        if found is not None and found.count >= MIN_KEY_COUNT:
            return found
        return self.part_norms.get((part, metric), found)

    def tested(self, part: str, metric: str) -> int:
        """How many of ``part``'s values the run judges against its norms, over every key and replica: the
        family an outlier is the most extreme of (a 4σ answer is rare among one turn index's 45, not among 1,800)."""
        found = self.part_norms.get((part, metric))
        return found.count if found is not None else 0

    def replica_norm(self, part: str, key: str, replica: object, metric: str) -> Norm | None:
        """The norm of ``part`` on one replica (:func:`~.step_statistics.replica_keys`) when it has enough values,
        else :meth:`norm` of its key."""
        found = self.norms.get((part, replica_key(key, replica), metric))
        return found if found is not None and found.count >= MIN_KEY_COUNT else self.norm(part, key, metric)


def is_replica_key(key: tuple[str, str, str]) -> bool:
    """Whether (part, key, metric) is an engine queue's per-replica key (:func:`~.step_statistics.replica_keys`)."""
    return key[0] == k.PART_ENGINE_QUEUE and REPLICA_KEY in key[1]


def fence(h: LogHistogram, th: Thresholds) -> Norm:
    """The norm of one part: its median, and the fence beyond which an occurrence is not the run's own tail.

    The tail's width is read in log space between the median and ``fence_quantile`` (robust to a few per cent
    of the values being the anomalies themselves); the fence lies where the largest of ``n`` such values would
    fall (``z`` of 1 − 1/n) plus ``fence_margin`` widths, and at least ``fence_min_ratio`` × the median.

    A part that usually takes nothing (its median below ``occurrence_min_s``: the engine's queue, the way to the
    engine) has no width in log space: its fence is ``q + fence_additive × (q − median)`` instead (a replica that
    sometimes queues must not hide a 8 s wait on one that never does).

    The width a norm's evidence is measured in (:attr:`Norm.scale`) is one standard error wider than read: a
    quantile of ``n`` values is uncertain by ``√(p(1−p)/n) / φ(z_p)`` (45 answers of one turn index read 0.60 where
    the run drew 0.78, and a clean answer 12× its median looked a 1-in-2,000 event)."""
    med, q = h.median(), h.quantile(th.fence_quantile)
    n = h.n
    if not np.isfinite(med):
        return Norm(med, float("inf"), n)
    normal = NormalDist()
    z_q = normal.inv_cdf(th.fence_quantile)
    wider = 1.0 + np.sqrt(th.fence_quantile * (1.0 - th.fence_quantile) / max(n, 1)) / (normal.pdf(z_q) * z_q)
    if med < th.occurrence_min_s:
        floor = med + th.occurrence_min_s * th.fence_min_ratio
        fenced = max(q + th.fence_additive * (q - med), floor)
        return Norm(med, fenced, n, scale=(q - med) / z_q * wider, additive=True)
    width = max(np.log(q / med), 0.0) / z_q
    z_max = normal.inv_cdf(1.0 - 1.0 / max(n, 2))
    fenced = max(med * np.exp(width * (z_max + th.fence_margin)), med * th.fence_min_ratio)
    return Norm(med, fenced, n, scale=width * wider)


def run_baselines(summaries: list[StepSummary], th: Thresholds) -> Baselines:
    """The run's norms per part and the spreads of its groups, from every step's summary."""
    per_step: dict[tuple[str, str, str], list[tuple[int, LogHistogram]]] = {}
    by_part: dict[tuple[str, str], list[tuple[int, LogHistogram]]] = {}
    for s in summaries:
        mine: dict[tuple[str, str], LogHistogram] = {}
        for key, h in s.histograms.items():
            per_step.setdefault(key, []).append((s.step, h))
            if not is_replica_key(key):  # it repeats its turn key's values
                mine.setdefault((key[0], key[2]), LogHistogram()).merge(h)
        for key, h in mine.items():
            by_part.setdefault(key, []).append((s.step, h))
    b = Baselines(
        norms={key: part_norm(steps, th) for key, steps in per_step.items()},
        part_norms={key: part_norm(steps, th) for key, steps in by_part.items()},
    )
    b.spreads = _spreads(summaries, b)
    b.stall_norm = _stall_norm(summaries, th)
    if 1 < len(summaries) < SHORT_RUN:
        b.other_steps = _other_steps(per_step)
    return b


def _other_steps(per_step: dict[tuple[str, str, str], list[tuple[int, LogHistogram]]]) -> dict:
    """Per step of a short run, the other steps' histograms merged, per (part, key, metric)."""
    out: dict[int, dict[tuple[str, str, str], LogHistogram]] = {}
    for key, steps in per_step.items():
        if is_replica_key(key):
            continue
        for step, _ in steps:
            merged = LogHistogram()
            for other, h in steps:
                if other != step:
                    merged.merge(h)
            if merged.n:
                out.setdefault(step, {})[key] = merged
    return out


def part_norm(steps: list[tuple[int, LogHistogram]], th: Thresholds) -> Norm:
    """One part's norm from its steps' histograms: the fence over its steady steps (:func:`steady`)."""
    kept, moved = steady([h for _, h in steps], th)
    norm = fence(kept, th)
    if not moved.any():
        return norm
    every = LogHistogram()
    for _, h in steps:
        every.merge(h)
    out = frozenset(step for (step, _), m in zip(steps, moved, strict=True) if m)
    return replace(norm, moved=out, moved_fence=fence(every, th).fence)


def steady(hs: list[LogHistogram], th: Thresholds) -> tuple[LogHistogram, np.ndarray]:
    """The steps' histograms of one part merged, less the steps where the whole part moved (which they are).

    A step whose every reward took 10 s holds 16 of a 12-step run's 180 rewards: 9 %, enough to carry the
    ``fence_quantile`` and hide a single 10 s reward in another step. Such a step is told by its group's move
    (:func:`group_log_ratios`), not by the fence: a step is left out here when its median is at least
    ``fence_min_ratio`` × the steps' median median and beyond 3 robust deviations of the steps' medians (a part
    that drifts over training keeps its steps). At most half the steps are left out.
    """
    merged = LogHistogram()
    medians = np.array([h.median() if h.n else np.nan for h in hs], dtype=float)
    ok = np.isfinite(medians) & (medians > 0)
    moved = np.zeros(len(hs), dtype=bool)
    if ok.sum() >= max(th.min_steps, 4):
        logs = np.log(medians[ok])
        center = float(np.median(logs))
        scale = float(np.median(np.abs(logs - center))) * 1.4826
        beyond = logs - center > max(3 * scale, np.log(th.fence_min_ratio))
        if beyond.sum() <= ok.sum() // 2:
            moved[np.flatnonzero(ok)[beyond]] = True
    for h, out in zip(hs, moved, strict=True):
        if not out:
            merged.merge(h)
    return merged, moved


LOG_RATIO_COLUMNS = ["group_type", "group", "part", "metric", "count", "log_ratio", "median", "usual"]


def group_log_ratios(groups: pd.DataFrame, b: Baselines) -> pd.DataFrame:
    """Per (group type, group, part, metric): the count-weighted mean over keys of log(group median / run
    median), the group's count, and the count-weighted means of its medians and of the run's (what a move is worth
    in seconds). Groups of a part whose run median is 0 are left out. Columns :data:`LOG_RATIO_COLUMNS`."""
    if groups.empty:
        return pd.DataFrame(columns=LOG_RATIO_COLUMNS)
    text = {c: groups[c].to_numpy(dtype=object) for c in ("group_type", "group", "part", "key", "metric")}
    codes, uniques = factorize_rows([text["part"], text["key"], text["metric"]])
    base = np.array([(n.median if (n := b.norm(*u)) is not None else np.nan) for u in uniques], dtype=float)[codes]
    median = groups["median"].to_numpy(dtype=float)
    rows = np.flatnonzero((base > 0) & (median > 0))
    if not len(rows):
        return pd.DataFrame(columns=LOG_RATIO_COLUMNS)
    median, base = median[rows], base[rows]
    keys = [text[c][rows] for c in ("group_type", "group", "part", "metric")]
    values = {"log_ratio": np.log(median / base), "median": median, "usual": base}
    uniques, count, means = weighted_means(keys, groups["count"].to_numpy()[rows], values)
    names = dict(zip(("group_type", "group", "part", "metric"), zip(*uniques, strict=True), strict=True))
    return pd.DataFrame({c: list(v) for c, v in names.items()} | {"count": count} | means, columns=LOG_RATIO_COLUMNS)


def _spreads(summaries: list[StepSummary], b: Baselines) -> dict[tuple[str, str, str], Spread]:
    """Each group type's spread over every step's groups: one step's group medians read at a time (spilled
    summaries bring each back from disk), its log ratios kept (a few thousand floats a step, where the groups'
    rows held together grew the analysis with every step: docs/performance.md)."""
    ratios: dict[tuple[str, str, str], list[np.ndarray]] = {}
    for s in summaries:
        groups = s.groups
        if not len(groups):
            continue
        lr = group_log_ratios(groups, b)
        rows: dict[tuple[str, str, str], list[int]] = {}
        keys = zip(*(lr[c].to_numpy(dtype=object) for c in ("group_type", "part", "metric")), strict=True)
        for i, key in enumerate(keys):
            rows.setdefault(key, []).append(i)
        log_ratio = lr["log_ratio"].to_numpy(dtype=float)
        for key, i in rows.items():
            ratios.setdefault(key, []).append(log_ratio[i])
    out = {}
    for key, parts in ratios.items():
        x = np.concatenate(parts)
        center = float(np.median(x))
        scale = float(np.median(np.abs(x - center))) * 1.4826
        out[key] = Spread(center, scale, len(x))
    return out


def _stall_norm(summaries: list[StepSummary], th: Thresholds) -> Norm | None:
    """The fence over each worker-step's heaviest stretch of nothing moving (seconds × requests in flight, two or
    more in flight): a stall holds many requests still for long; a rollout's tail holds one or two."""
    heaviest = []
    for s in summaries:
        q = s.quiet
        if len(q):
            busy = q[q["in_flight"].to_numpy() >= th.stall_min_in_flight]
            if len(busy):
                heaviest.extend(busy.groupby("worker")["weight"].max().to_numpy(dtype=float))
    if not heaviest:
        return None
    return fence(LogHistogram.of(np.asarray(heaviest)), th)
