"""The run's step-to-step spread (``findings/account.py`` StepSpread): measured on the steps the named causes did
not slow, however many steps they slowed, and whatever small causes they named in the other steps."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from otel_verl.analysis.findings.account import StepSpread
from otel_verl.analysis.findings.thresholds import Thresholds


def _spread(excess: np.ndarray, explained: np.ndarray) -> StepSpread:
    accounts = [SimpleNamespace(excess_s=float(x)) for x in excess]
    return StepSpread.of(accounts, Thresholds(), explained)  # type: ignore[arg-type]


def test_most_steps_slowed_and_small_causes_everywhere() -> None:
    """The CPU demo's shape: 11 steps, 7 slowed by 6-16 s causes, the 4 others within ±0.1 s of their baseline,
    and 0.1 s causes named in 3 of those 4 (fewer than three steps left that no cause explains). The warning
    level comes from the quiet steps (under a second), not from the slowed ones (tens of seconds), on random
    draws of the same shape."""
    for seed in range(50):
        rng = np.random.default_rng(seed)
        slowed = rng.choice(11, 7, replace=False)
        excess = rng.normal(0.0, 0.08, 11)
        excess[slowed] += rng.uniform(6, 16, 7)
        explained = np.where(np.isin(np.arange(11), slowed), excess, 0.0)
        quiet = np.flatnonzero(~np.isin(np.arange(11), slowed))
        explained[quiet[:3]] = np.abs(excess[quiet[:3]]) + 0.05  # small causes, in every quiet step but one
        spread = _spread(excess, explained)
        assert spread.spread < 0.5 and spread.warn_s < 3.0, (seed, spread)


def test_a_clean_run_keeps_its_own_spread() -> None:
    """No cause anywhere: the spread is the run's (1.4826 × MAD of the excesses)."""
    excess = np.random.default_rng(0).normal(0.0, 1.0, 40)
    spread = _spread(excess, np.zeros(40))
    mad = float(np.median(np.abs(excess - np.median(excess)))) * 1.4826
    assert spread.spread == mad and spread.warn_s > 3 * mad
