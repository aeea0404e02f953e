"""The step's account: where every second of a step went, against what it usually costs: each step
:func:`valued` against the run's baselines, then all :func:`judged` among each other.

A step's wall time is a sum of parts: the trainer's phases (each top-level ``verl.phase``, with the time no
earlier phase held), the time outside any phase, and the rollout along its critical path (:mod:`.peel`: what each
anomaly cost, the usual path's start, preprocess, engine parts, tools, reward, gaps and finish, the rollout's
overhead after its last worker). Each part's *baseline* is its median over the run's steps where it ran (a
validation pass is judged against the validation passes); the step's baseline is the sum of its parts'
baselines, so its excess splits exactly into the parts' excesses. The excess of the parts no span accounts for
(a request's time between its spans, the step's time outside any phase) is the *unexplained* rest.

The run's *spread* is the robust spread of the steps' excesses, and how far the largest of them naturally strays
(:class:`StepSpread`): what "within the run's normal variation" means when a cause is judged (:mod:`.naming`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np
import pandas as pd

from otel_verl.analysis.findings.account.anomalies import step_anomalies
from otel_verl.analysis.findings.account.baselines import Baselines
from otel_verl.analysis.findings.account.peel import RolloutPath, rollout_path
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.steps.step_summary import StepSummary
from otel_verl.analysis.tables.intervals import covered_s

UNEXPLAINED_PARTS = (k.PART_GAP, k.PART_OUTSIDE_PHASES)
"""Parts no span accounts for: their excess is the account's unexplained rest."""


@dataclass
class Part:
    """One part of a step's account."""

    kind: str
    value_s: float
    phase: str | None = None
    baseline_s: float = float("nan")
    seconds: float = 0.0
    """This part's share of the step's excess (value − baseline; negative when it took less than usual)."""

    @property
    def key(self) -> tuple[str, str | None]:
        return (self.kind, self.phase)


@dataclass
class StepAccount:
    summary: StepSummary
    parts: list[Part]
    anomalies: pd.DataFrame
    """:mod:`.anomalies` rows with ``cost``: seconds of the rollout each cost (:mod:`.peel`)."""
    path: RolloutPath | None
    baseline_s: float = float("nan")
    rollout_baseline_s: float = float("nan")
    phase_name: str | None = None
    """The rollout phase's name (``gen``), when a phase held the workers."""
    notes: list[str] = field(default_factory=list)

    @property
    def step(self) -> int:
        return self.summary.step

    @property
    def duration_s(self) -> float:
        return self.summary.duration_s

    @property
    def excess_s(self) -> float:
        return self.duration_s - self.baseline_s

    @property
    def unexplained_s(self) -> float:
        return float(sum(p.seconds for p in self.parts if p.kind in UNEXPLAINED_PARTS))

    @property
    def rollout_s(self) -> float:
        return self.path.rollout_s if self.path is not None else float("nan")

    def held_to_the_wait(self, seconds: float) -> float:
        """What a rollout cause cost this step. An asynchronous step's wall is the trainer's: the rollout, a
        producer running alongside and across the step's edges, cost it at most what the trainer waited for samples
        in it (a clean colocate_async demo's first step, 1.24 s, was told a 1.7 s late start of worker 0; its
        trainer waited 0.37 s)."""
        acc = self.summary.async_account
        return seconds if acc is None else min(seconds, acc.trainer_wait_s)

    def part(self, kind: str, phase: str | None = None) -> Part | None:
        return next((p for p in self.parts if p.kind == kind and p.phase == phase), None)


CALIBRATION_RUNS = 20_000
"""Simulated clean runs behind :func:`warn_level` (its level moves by a few percent between seeds)."""
CALIBRATION_MAX_STEPS = 40
"""Beyond this many steps the spread is measured well: the warn level grows with ln n alone."""
GUMBEL_SCALE_PER_PAIRWISE = 1 / (1.0483 * np.log(3))
"""A Gumbel's scale per :func:`pairwise_spread` (the difference of two Gumbels is logistic: median |·| = ln 3)."""
MIN_SPREAD_STEPS = 2
"""A spread needs two steps whatever ``min_steps`` says (``--set min_steps=1``): one step measures nothing."""
MAX_PAIRS = 200_000
""":func:`pairwise_spread` measures at most this many pairs (all of them up to 632 steps)."""


def pairwise_spread(values: np.ndarray) -> np.ndarray:
    """1.0483 × the median distance between two of the values (Shamos' estimator; a normal's σ), along the last
    axis: as robust as it needs to be here (the steps the causes slowed are already left out) and, from the few
    steps a short run has, much steadier than the median absolute deviation (86 % efficient against 37 %)."""
    values = np.asarray(values, dtype=float)
    n = values.shape[-1]
    if n * (n - 1) // 2 <= MAX_PAIRS:
        i, j = np.triu_indices(n, 1)
    else:  # a run of thousands of steps: a seeded sample of its pairs measures the same median
        i, j = np.random.default_rng(n).integers(0, n, size=(2, MAX_PAIRS))
        i, j = i[i != j], j[i != j]
    return np.median(np.abs(values[..., i] - values[..., j]), axis=-1) * 1.0483


@lru_cache(maxsize=256)
def warn_level(steps: int, margin: float) -> float:
    """How far above their median, in :func:`pairwise_spread` units, the largest of ``steps`` clean steps passes
    with probability e^−margin, the spread measured on those same steps.

    With a known Gumbel scale that is scale × (ln n + margin − its median); measured on a short run's few steps
    the spread is uncertain, and the plain formula broke its promise: a clean run of 5 steps passed it in 12 % of
    simulated runs instead of 3 % (more figures: docs/performance.md). The level is therefore the quantile of
    (largest excess − median) / (measured spread) over :data:`CALIBRATION_RUNS` simulated clean runs of Gumbel
    steps, seeded, so a run always gets the same level."""
    n = min(steps, CALIBRATION_MAX_STEPS)
    rng = np.random.default_rng(n)
    ratios = []
    for _ in range(10):  # in chunks: a 40-step run has 780 pairs
        x = rng.gumbel(size=(CALIBRATION_RUNS // 10, n))
        x -= np.median(x, axis=1, keepdims=True)
        ratios.append(x.max(axis=1) / np.maximum(pairwise_spread(x), 1e-12))
    measured = float(np.quantile(np.concatenate(ratios), 1 - np.exp(-margin)))
    return measured + GUMBEL_SCALE_PER_PAIRWISE * float(np.log(steps / n))


LOO_MAX_STEPS = 12
"""Up to this many other steps, a step is judged against a level they set without it (:meth:`StepSpread.without`)."""


@lru_cache(maxsize=64)
def loo_level(others: int, margin: float) -> float:
    """How far above the median of ``others`` clean steps, in their :func:`pairwise_spread`, one more clean step
    passes with probability e^−margin once every step of the run is judged against the rest: the quantile of the
    largest of those n statistics over :data:`CALIBRATION_RUNS` simulated clean Gumbel runs, seeded."""
    n = others + 1
    rng = np.random.default_rng(1000 + n)
    x = rng.gumbel(size=(CALIBRATION_RUNS, n))
    worst = np.full(CALIBRATION_RUNS, -np.inf)
    for i in range(n):
        rest = np.delete(x, i, axis=1)
        worst = np.maximum(worst, (x[:, i] - np.median(rest, axis=1)) / np.maximum(pairwise_spread(rest), 1e-12))
    return float(np.quantile(worst, 1 - np.exp(-margin)))


@dataclass(frozen=True)
class StepSpread:
    """How the run's steps stray from their baselines: ``spread`` (1.4826 × the median absolute deviation of the
    ``used`` steps' excesses about their median excess, a normal's σ; what findings.json reports; the verdict tells
    the median and the plain deviation from ``used``, figures a reader checks against the steps table), ``warn_s``,
    the excess beyond which a step is not the run's own variation (:meth:`of`: their median plus
    :func:`pairwise_spread`, a different and steadier estimate of the same σ, times :func:`warn_level`), and
    ``steps``, how many steps measured them (fewer than ``min_steps``: neither is measured, ``spread`` is NaN and
    ``warn_s`` infinite; a step is then judged against its own peers)."""

    spread: float
    warn_s: float
    steps: int = 0
    used: tuple[tuple[int, float], ...] = ()
    """(step, excess) of the steps it was measured on."""
    least: int = 3
    margin: float = 3.5
    lengths: tuple[tuple[int, float, float], ...] = ()
    """(step, duration, baseline) of every step with a baseline: what a step too few others measure a spread for is
    judged against (:meth:`without`)."""
    ratio: float = float("inf")
    """``Thresholds.short_run_ratio``."""
    short_steps: int = 0
    """``Thresholds.short_run_steps``: up to this many steps, a step is also judged by its length."""

    @property
    def measured(self) -> bool:
        return bool(np.isfinite(self.spread))

    def without(self, step: int) -> tuple[float, float]:
        """(spread, warn level) measured without ``step``: a short run's step is judged against its others, not
        against a level it set itself (with three steps, the largest always sits right at the level its own excess
        made), with its own calibration (:func:`loo_level`). Beyond :data:`LOO_MAX_STEPS` steps one step barely
        moves the run's level: that one. In a run of at most ``short_steps`` steps, the level is also at most the
        length yardstick (:meth:`_by_length`): three or four other steps put :func:`loo_level` 7 to 9 of their
        spreads above their median, so a step half as long again as all of them could pass as noise."""
        others = np.array([x for s, x in self.used if s != step], dtype=float)
        if not self.measured or len(others) < self.least:
            return float("nan"), self._by_length(step)
        if len(others) == len(self.used) or len(others) > LOO_MAX_STEPS:
            spread, warn = self.spread, self.warn_s
        else:
            level = float(pairwise_spread(others)) * loo_level(len(others), self.margin)
            spread, warn = _mad(others), max(float(np.median(others)), 0.0) + level
        if len(self.lengths) <= self.short_steps:  # a few steps measure a level 7-9 spreads wide: the length too
            warn = min(warn, self._by_length(step))
        return spread, warn

    def _by_length(self, step: int) -> float:
        """With no spread to measure: the excess at which ``step`` took ``ratio`` times the median of the run's
        other steps (infinite with no other step)."""
        baseline = next((b for s, _, b in self.lengths if s == step), None)
        others = [d for s, d, _ in self.lengths if s != step]
        if baseline is None or not others or not np.isfinite(self.ratio):
            return float("inf")
        return max(self.ratio * float(np.median(others)) - baseline, 0.0)

    @classmethod
    def unmeasured(
        cls, steps: int = 0, lengths: tuple[tuple[int, float, float], ...] = (), ratio: float = np.inf
    ) -> StepSpread:
        return cls(float("nan"), float("inf"), steps, lengths=lengths, ratio=ratio)

    @classmethod
    def of(cls, accounts: list[StepAccount], th: Thresholds, explained: np.ndarray | None = None) -> StepSpread:
        """A rollout waits for its slowest request, so a step's excess has the right tail of a maximum: a Gumbel's.
        The largest of ``n`` clean steps passes ``median + scale × (ln n + m)`` with probability about e^−m when the
        scale is known; measured on the run's own few steps it is not, and :func:`warn_level` gives the level that
        keeps that promise (in the steps' pairwise spread, above their median excess when that is positive).
        ``th.warning_margin`` is m, so neither a longer nor a shorter run raises more false alarms.

        Steps that anomalies made slow are not the run's own variation: they are left out and the spread measured
        again (a run with several slow steps would otherwise call its own noise larger than it is). ``explained``:
        each step's seconds that anomalies account for (default: the anomalies' peel cost; the causes pass what
        they named, trainer phases included). A step is left out when they explain ``th.explained_share`` of its
        excess and it stands out from the steps they do not explain (not from all steps: with more than half the steps
        slowed, the median step is a slow one and would hide them all); where fewer than ``th.min_steps`` steps
        go unexplained, from what the causes leave of every step. Fewer than ``th.min_steps`` steps left measure
        nothing (a 3-step run with one slow step: its two others cannot say how far steps stray)."""
        excess = np.array([a.excess_s for a in accounts], dtype=float)
        ok = np.isfinite(excess)
        least = max(th.min_steps, MIN_SPREAD_STEPS)
        lengths = tuple((a.step, a.duration_s, a.baseline_s) for a, good in zip(accounts, ok, strict=True) if good)
        if ok.sum() < least:
            return cls.unmeasured(int(ok.sum()), lengths, th.short_run_ratio)
        if explained is None:
            explained = np.array([float(a.anomalies["cost"].sum()) if len(a.anomalies) else 0.0 for a in accounts])
        by_anomaly = (explained > 0) & (explained >= th.explained_share * np.maximum(excess, 0))
        plain = ok & ~by_anomaly
        # fewer than min_steps plain steps (a cause named in nearly every step, if only a 0.1 s one): what the
        # causes leave of each step is the run's own variation (all the excesses would put the median on a slow one)
        ref = excess[plain] if plain.sum() >= th.min_steps else (excess - np.where(by_anomaly, explained, 0.0))[ok]
        slow = ok & by_anomaly & (excess > np.median(ref) + 3 * max(_mad(ref), 1e-9))
        short = least - int((ok & ~slow).sum())
        if short > 0:  # too few steps left to measure: the least slowed of the slow ones come back (each step is
            # still judged against the others: :meth:`without`)
            slow[np.argsort(np.where(slow, excess, np.inf))[:short]] = False
        used = excess[ok & ~slow]
        level = float(pairwise_spread(used)) * warn_level(len(used), th.warning_margin)
        kept = tuple((a.step, float(x)) for a, x, keep in zip(accounts, excess, ok & ~slow, strict=True) if keep)
        warn_s = max(float(np.median(used)), 0.0) + level
        return cls(
            _mad(used),
            warn_s,
            len(used),
            kept,
            least,
            th.warning_margin,
            lengths,
            th.short_run_ratio,
            th.short_run_steps,
        )


def _mad(values: np.ndarray) -> float:
    """1.4826 × the median absolute deviation (a normal's standard deviation)."""
    return float(np.median(np.abs(values - np.median(values)))) * 1.4826


def judged(accounts: list[StepAccount], th: Thresholds) -> tuple[list[StepAccount], StepSpread]:
    """Accounts :func:`valued` (each part's seconds), judged among each other: each part's baseline, each step's
    baseline and excess, the run's spread. Returns judged copies: the accounts given stay as valued, so the live
    account can judge a step's account again among later steps (``otel_verl.live.account``)."""
    copies = [replace(a, parts=[replace(p) for p in a.parts], notes=list(a.notes)) for a in accounts]
    _judge(copies, th)
    return copies, StepSpread.of(copies, th)


def valued(s: StepSummary, b: Baselines, th: Thresholds) -> StepAccount:
    """A step's parts and their seconds, its anomalies against ``b`` and what each cost (:mod:`.peel`); no
    baselines yet (:func:`judged` sets them)."""
    anomalies = step_anomalies(s, b, th)
    path = rollout_path(s, anomalies)
    anomalies = anomalies.assign(cost=path.cost.reindex(anomalies.index).fillna(0.0) if path else 0.0)
    parts: list[Part] = []
    ph = s.phases
    asynchronous = s.async_account is not None
    held = ph["rollout"].to_numpy(dtype=bool) & (not asynchronous) if len(ph) else np.zeros(0, dtype=bool)
    rollout_phase = ph[held] if len(ph) else ph
    own: dict[str, float] = {}  # a phase run several times in a step (an asynchronous step's updates): its total
    for row, by_rollout in zip(ph.itertuples(index=False), held, strict=True):
        if not by_rollout:
            own[str(row.name)] = own.get(str(row.name), 0.0) + float(row.seconds)
    parts.extend(Part(k.PART_PHASE, v, phase=name) for name, v in own.items())
    starts = [int(x) for x in ph["start_ns"]] if len(ph) else []
    ends = [int(x) for x in ph["end_ns"]] if len(ph) else []
    if path is not None:
        parts.extend(Part(kind, float(v)) for kind, v in path.parts.items())
        if rollout_phase.empty and not asynchronous and s.rollout is not None:  # the workers ran in no phase
            starts.append(s.rollout[0])
            ends.append(s.rollout[1])
    parts.append(Part(k.PART_OUTSIDE_PHASES, outside_s(s.start_ns, s.end_ns, starts, ends)))
    name = str(rollout_phase["name"].iloc[0]) if len(rollout_phase) else None
    return StepAccount(s, parts, anomalies, path, phase_name=name)


def outside_s(lo: int, hi: int, starts: list[int], ends: list[int]) -> float:
    """Seconds of the step ``[lo, hi]`` that no interval covers: its wall minus the *union* of the intervals
    clipped to it, so never negative. A sum of durations would count twice what overlaps (an asynchronous
    trainer's phases and rollout overlap each other and cross the step's edges: a clean separate_async demo's
    "outside" summed to −4.1 s) and count what lies beyond the step's edges."""
    if hi <= lo:
        return 0.0
    covered = covered_s(np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64), lo, hi)
    return max((hi - lo) / 1e9 - covered, 0.0)


def _judge(accounts: list[StepAccount], th: Thresholds) -> None:
    """Each part's baseline (its median over the steps where it ran), each step's baseline and excess.

    Two steps have no median to speak of: each one's baseline is the other step (so the slow one's excess is the
    whole difference, not half of it). One step has none: its baseline and excess are NaN (the account says what
    each part took; :mod:`.naming` tells its anomalies against the step's own peers)."""
    values: dict[tuple[str, str | None], list[float]] = {}
    rollout_steps = sum(1 for a in accounts if a.path is not None)
    for a in accounts:
        for p in a.parts:
            values.setdefault(p.key, []).append(p.value_s)
    medians = {}
    for key, vs in values.items():
        arr = np.asarray(vs, dtype=float)
        if key[0] in k.ROLLOUT_PARTS:  # a rollout part missing from a step's path took 0 s there
            arr = np.concatenate([arr, np.zeros(max(rollout_steps - len(arr), 0))])
        medians[key] = float(np.median(arr)) if len(arr) else float("nan")
    for a in accounts:
        if a.path is not None:
            have = {p.key for p in a.parts}
            a.parts.extend(
                Part(kind, 0.0) for kind, phase in medians if kind in k.ROLLOUT_PARTS and (kind, phase) not in have
            )
    others = _the_other_step(accounts) if len(accounts) == 2 else None
    for i, a in enumerate(accounts):
        for p in a.parts:
            if len(accounts) < 2:
                p.baseline_s = float("nan")
            elif others is not None:
                # a phase the other step did not run (a validation) is judged by nothing: its own value
                p.baseline_s = others[1 - i].get(p.key, 0.0 if p.kind in k.ROLLOUT_PARTS else p.value_s)
            else:
                p.baseline_s = medians.get(p.key, float("nan"))
            p.seconds = p.value_s - p.baseline_s
        if a.summary.async_account is not None and a.summary.async_account.fills_pipeline and len(accounts) > 1:
            _pipeline_filling(a)
        wall = [p for p in a.parts if not (a.summary.async_account is not None and p.kind in k.ROLLOUT_PARTS)]
        a.baseline_s = float(sum(p.baseline_s for p in wall))
        if a.path is not None:
            a.rollout_baseline_s = float(sum(p.baseline_s for p in a.parts if p.kind in k.ROLLOUT_PARTS))
        a.parts.sort(key=lambda p: -p.seconds if np.isfinite(p.seconds) else -p.value_s)


PIPELINE_FILLING = (
    "the pipeline filling: the first step of an asynchronous run waits for the first samples, which no earlier "
    "step produced ahead; a first step has no history, so it is judged against its own peers only"
)


def _pipeline_filling(a: StepAccount) -> None:
    """The first step of an asynchronous run has no history: the later steps take samples the rollout produced
    while the trainer trained, the first waits for the rollout to start. Its parts get no baseline (as a run of
    one step), so what it waited is judged like any cause without history (its anomalies against their peers,
    no excess against the run) and told as the pipeline filling; it still counts in the later steps' baselines."""
    for p in a.parts:
        p.baseline_s, p.seconds = float("nan"), float("nan")
    a.notes.append(PIPELINE_FILLING)


def _the_other_step(accounts: list[StepAccount]) -> list[dict[tuple[str, str | None], float]]:
    """Each of two steps' part values by key (the other step's are its baseline)."""
    return [{p.key: p.value_s for p in a.parts} for a in accounts]
