"""How severity is earned: what a cause cost, and how strong the evidence is that it is not the run's usual.

A cause is a **note** (``info``) unless it cost its step at least ``warning_min_s`` and ``warning_fraction`` of a
usual step, and one of two kinds of evidence holds:

* **the run's steps**: its step lost more than the run's steps naturally stray (the level the largest of the run's
  clean steps passes with probability e^−``warning_margin``: :class:`.step_account.StepSpread`; in a short run, also a
  step ``short_run_ratio`` times as long as the others), and the cause lost that much itself or is one of the
  step's largest causes that together explain ``explained_share`` of what it lost (:func:`carriers`: a step slowed
  by two causes is slow, whichever of them is larger);
* **its own norm and peers**: the cause is an anomaly — its occurrences lie beyond their part's fence, its group
  (a worker, replica, prompt or the whole step) moved beyond how far such groups stray, or its worker stood still
  beyond the run's stretches of nothing moving — so far out that a clean run of this size would show it with a
  chance below ``evidence_chance`` (:mod:`.chance`), and it cost at least ``evidence_share`` of its step and,
  where the spread is measured, ``evidence_spread`` times it. This holds with a handful of steps, or one: the
  fence and the groups are the step's own peers then.

A warning that cost ``critical_fraction`` of a usual step is **critical**. The usual step is the step's baseline
(each part at its median over the run's steps), or, with no other step to take one from, the step without the
cause. A cause that is the usual critical path running long (``details.tail``: each of its occurrences inside its
norm) has only the run's steps as evidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from otel_verl.analysis.findings.common.thresholds import Thresholds

if TYPE_CHECKING:
    from otel_verl.analysis.findings.account.step_account import StepAccount
    from otel_verl.analysis.findings.causes.cause import Cause


Levels = dict[int, tuple[float, float]]
"""Per step, (spread, warn level) measured without it (:meth:`.step_account.StepSpread.without`)."""


@dataclass(frozen=True)
class Judgement:
    """What the severity rests on (``details.evidence`` in findings.json)."""

    severity: str
    share: float
    """Seconds lost over the step's duration."""
    beyond_steps: bool
    beyond_norm: bool
    chance: float | None = None
    """How likely a clean run of this size shows the cause's anomaly (None: not an anomaly)."""

    def as_json(self) -> dict[str, object]:
        basis = [name for name, on in (("steps", self.beyond_steps), ("norm", self.beyond_norm)) if on]
        return {"share_of_step": round(self.share, 4), "basis": basis, "chance": self.chance}


def carriers(
    seconds: Sequence[float], excess_s: float, warn_s: float, share: float = Thresholds.explained_share
) -> list[int]:
    """Which of a step's causes (their ``seconds``) carry its being slow: none unless the step lost at least
    ``warn_s``; else the largest, in order, until they add up to ``share`` of what it lost (the share at which
    :meth:`.step_account.StepSpread.of` counts a step as the causes' doing). Indices into ``seconds``."""
    if not (np.isfinite(excess_s) and np.isfinite(warn_s) and excess_s > 0 and excess_s >= warn_s):
        return []
    out, total = [], 0.0
    for i in sorted(range(len(seconds)), key=lambda i: -seconds[i]):
        if total >= share * excess_s or seconds[i] <= 0:
            break
        out.append(i)
        total += seconds[i]
    return out if total >= share * excess_s else []


def carrying(causes: Sequence[Cause], accounts: Sequence[StepAccount], levels: Levels, th: Thresholds) -> set[int]:
    """``id`` of every cause that carries its step's being slow (:func:`carriers` against the step's warn level in
    ``levels``; a stall's echo never does)."""
    by_step: dict[int, list[Cause]] = {}
    for c in causes:
        if not c.details.get("stall_echo"):
            by_step.setdefault(c.step, []).append(c)
    out: set[int] = set()
    for a in accounts:
        mine = by_step.get(a.step, [])
        if mine:
            picked = carriers([c.seconds for c in mine], a.excess_s, levels[a.step][1], th.explained_share)
            out.update(id(mine[i]) for i in picked)
    return out


def judge(
    seconds: float,
    duration_s: float,
    usual_step_s: float,
    excess_s: float,
    chance: float,
    spread_s: float,
    warn_s: float,
    th: Thresholds,
    carries: bool = False,
) -> Judgement:
    """The severity of a cause that cost ``seconds`` of a step of ``duration_s`` (module docstring).

    ``usual_step_s``: the step's baseline (NaN without one); ``excess_s``: what the step lost against it;
    ``chance``: how likely a clean run shows the cause's anomaly (1 for the usual path running long);
    ``spread_s``/``warn_s``: the run's step-to-step spread and the excess beyond which a step is not its own
    variation (NaN/inf unmeasured); ``carries``: one of the causes that explain the step's loss (:func:`carriers`)."""
    usual = usual_step_s if np.isfinite(usual_step_s) and usual_step_s > 0 else max(duration_s - seconds, 0.0)
    share = seconds / duration_s if duration_s > 0 else 0.0
    lost = min(seconds, max(excess_s, 0.0)) if np.isfinite(excess_s) else 0.0
    beyond_steps = bool(np.isfinite(warn_s) and (lost >= warn_s or (carries and excess_s >= warn_s)))
    measured = np.isfinite(spread_s)
    beyond_norm = chance <= th.evidence_chance and share >= th.evidence_share
    beyond_norm = beyond_norm and (not measured or seconds >= th.evidence_spread * spread_s)
    cost = seconds if beyond_norm else lost
    shown = float(f"{chance:.2g}") if chance < 1 else None
    if not (beyond_steps or beyond_norm) or cost < max(th.warning_min_s, th.warning_fraction * usual):
        return Judgement("info", share, beyond_steps, beyond_norm, shown)
    severity = "critical" if cost >= th.critical_fraction * usual else "warning"
    return Judgement(severity, share, beyond_steps, beyond_norm, shown)
