"""The run's norms (``findings/baselines.py``): a step where a whole part moved does not widen that part's fence."""

from __future__ import annotations

import numpy as np

from otel_verl.analysis.findings.baselines import fence, part_norm, steady
from otel_verl.analysis.findings.histograms import LogHistogram
from otel_verl.analysis.findings.thresholds import Thresholds


def _steps(rng: np.random.Generator, n_steps: int, per_step: int, drift: float = 0.0) -> list[LogHistogram]:
    """Rewards of ~20 ms with a heavy right tail, their median growing by ``drift`` (log) per step."""
    return [LogHistogram.of(0.02 * np.exp(drift * s + rng.normal(0, 0.5, per_step))) for s in range(n_steps)]


def test_a_step_that_moved_whole_is_left_out_of_the_fence() -> None:
    """11 steps, every reward of one step 10 s: merged, that step is 9 % of the values and carries q95 past 10 s,
    hiding a single 10 s reward in another step; left out, the fence of the other steps stays near the run's own
    tail."""
    th = Thresholds()
    for seed in range(20):
        rng = np.random.default_rng(seed)
        hs = _steps(rng, 11, 16)
        moved = int(rng.integers(11))
        hs[moved] = LogHistogram.of(np.full(16, 10.0))
        merged = LogHistogram()
        for h in hs:
            merged.merge(h)
        assert fence(merged, th).fence > 10.0
        assert fence(steady(hs, th)[0], th).fence < 1.0, seed
        # the moved step's own rewards are judged against every step's fence: its move tells them, once
        norm = part_norm(list(enumerate(hs)), th)
        assert norm.moved == {moved} and norm.fence_in(moved) > 10.0 > 1.0 > norm.fence_in(moved - 1)


def test_a_part_that_drifts_keeps_its_steps() -> None:
    """Answers growing over training (the median ×8 from the first step to the last) move no step out: the fence
    of a drifting part is the fence of all its steps."""
    th = Thresholds()
    for seed in range(20):
        hs = _steps(np.random.default_rng(seed), 12, 16, drift=np.log(8) / 11)
        merged = LogHistogram()
        for h in hs:
            merged.merge(h)
        assert fence(steady(hs, th)[0], th).fence == fence(merged, th).fence


def test_too_few_steps_or_too_many_moved_keep_every_step() -> None:
    th = Thresholds()
    rng = np.random.default_rng(0)
    few = _steps(rng, 3, 16)
    few[0] = LogHistogram.of(np.full(16, 10.0))
    assert steady(few, th)[0].n == 48
    half = _steps(rng, 8, 16)
    for i in range(5):  # more than half the steps "moved": that is the run, not a move
        half[i] = LogHistogram.of(np.full(16, 10.0))
    assert steady(half, th)[0].n == 128
