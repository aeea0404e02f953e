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

Every kind of cause goes through this one judgement (:func:`judge_cause`; issue 50): rollout parts, trainer phases
(their own history is their norm: :mod:`.phase_causes`), the weight sync and an asynchronous trainer's wait (both
phases), patterns (stragglers, trends and shifts, on top of :func:`judge`). Below the floor nothing is a warning,
whatever its evidence; a note says why it is one (``details.judged.why``, :data:`WHY`): an empty basis is never
silent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from otel_verl.analysis.findings.common.kinds import PART_PHASE, SCOPE_REPLICA, SCOPE_WORKER
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
    cost: float | None = None
    """The seconds the severity was weighed by (None: the caller's own measure, e.g. a pattern's)."""
    floor: float | None = None
    """The cost a warning needs: ``warning_min_s`` and ``warning_fraction`` of a usual step."""
    why: str | None = None
    """Why a cause is information, where neither the floor nor missing evidence says it (:data:`WHY`)."""

    @property
    def basis(self) -> list[str]:
        return [name for name, on in (("steps", self.beyond_steps), ("norm", self.beyond_norm)) if on]

    def reason(self) -> str | None:
        """Why the cause is information (None for a warning or worse): one of :data:`WHY`."""
        if self.severity != "info":
            return None
        if self.why:
            return self.why
        if self.cost is not None and self.floor is not None and self.cost < self.floor:
            return BELOW_FLOOR
        return NO_EVIDENCE if not self.basis else PATTERN_RULE

    def as_json(self) -> dict[str, object]:
        out: dict[str, object] = {"share_of_step": round(self.share, 4), "basis": self.basis, "chance": self.chance}
        if self.cost is not None and self.floor is not None:
            out |= {"cost_s": round(self.cost, 3), "floor_s": round(self.floor, 3)}
        if (why := self.reason()) is not None:
            out["why"] = why
        return out


BELOW_FLOOR = "below_floor"
NO_EVIDENCE = "no_evidence"
WARM_UP = "warm_up"
STALL_ECHO = "stall_echo"
PATTERN_RULE = "pattern_rule"
WHY = {
    BELOW_FLOOR: "it cost less than a warning needs (the floor), whatever its evidence",
    NO_EVIDENCE: "neither the run's steps nor its own norm and peers say it is not the run's usual",
    WARM_UP: "an engine warming up on its first calls of the run",
    STALL_ECHO: "a stall seen from another side (a small cause on a stalled worker)",
    PATTERN_RULE: "its pattern's own rule holds it as information (e.g. a shift within chance)",
}
"""``details.judged.why`` of an ``info`` cause: every note says why it is one (an empty basis is never silent)."""


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
    floor = cost_floor(usual, th)
    if not (beyond_steps or beyond_norm) or cost < floor:
        return Judgement("info", share, beyond_steps, beyond_norm, shown, cost, floor)
    severity = "critical" if cost >= th.critical_fraction * usual else "warning"
    return Judgement(severity, share, beyond_steps, beyond_norm, shown, cost, floor)


def cost_floor(usual_step_s: float, th: Thresholds) -> float:
    """The least a warning costs: ``warning_min_s`` and ``warning_fraction`` of a usual step."""
    return max(th.warning_min_s, th.warning_fraction * max(usual_step_s, 0.0))


def judge_cause(c: Cause, a: StepAccount, level: tuple[float, float], th: Thresholds, carries: bool) -> Judgement:
    """A cause's severity, the same :func:`judge` for every kind (a rollout part, a trainer phase, a weight sync, a
    wait): an anomaly earns it from its own norm and peers (``details.chance``) or the run's steps, the usual path
    running long (``details.tail``) from the run's steps only. A degraded part (far outside its norm on every
    worker, at little cost) keeps its evidence but not a warning: below the floor nothing is one. A stall's echo
    and an engine's warm-up (``details.warm_up``) are information, their evidence kept."""
    usual = a.baseline_s if np.isfinite(a.baseline_s) and a.baseline_s > 0 else max(a.duration_s - c.seconds, 0.0)
    share = c.seconds / a.duration_s if a.duration_s > 0 else 0.0
    if c.details.get("degraded"):
        chance = c.details.get("chance")
        return Judgement("info", share, False, True, chance, c.seconds, cost_floor(usual, th), BELOW_FLOOR)
    echo, warm = bool(c.details.get("stall_echo")), bool(c.details.get("warm_up"))
    anomaly = not c.details.get("tail") and not echo
    chance = float(c.details.get("chance", 1.0)) if anomaly else 1.0
    spread_s, warn_s = level
    if c.part == PART_PHASE or _outlasts_the_spread(c, spread_s, th):
        # a phase's excess is read off its own span, not a noisy critical path, and its chance already weighs its
        # own spread: the run's step-to-step spread (mostly the rollout's) is no bar to its own evidence
        spread_s = float("nan")
    j = judge(c.seconds, a.duration_s, a.baseline_s, a.excess_s, chance, spread_s, warn_s, th, carries)
    if echo or warm:
        return replace(j, severity="info", why=STALL_ECHO if echo else WARM_UP)
    return j


def _outlasts_the_spread(c: Cause, spread_s: float, th: Thresholds) -> bool:
    """An asynchronous rollout cause told at the later step whose trainer waited for it, one of whose occurrences
    alone (an outlier beyond its fence: a hung reward, a stuck tool call) took ``evidence_spread`` times the run's
    step-to-step spread over its usual. Its cost is held to that trainer's measured wait (:mod:`.waited_for`), and
    an asynchronous step's spread is the rollout's batch-to-batch rhythm (colocate-async: a third of a step, so a
    reward hung 18 s that kept the trainer waiting 9.4 s, 28 % of a step, stayed a note): the spread is no bar to
    an occurrence it cannot hide. Nor to a replica or a worker slower than its peers in the same steps (issue 50,
    items 4-5: a node slower than its peers, which the trainer waited for): its peers rode the same rhythm
    (``bench_diagnosis --classes async_replica --seed 7`` run 2, colocate-async: replica 0 decoding 1.4x slower,
    chance 2e-11, held the trainer 10.2 s of a 29 s step, 35 %, and 5.1 s in another step, was a note at cost 0
    against a spread of ±8 s). A whole step's move (every worker decoding a little slower) keeps the bar."""
    dispatch = c.details.get("dispatch_step")
    if dispatch is None or dispatch == c.step or not np.isfinite(spread_s):
        return False
    if c.scope in (SCOPE_REPLICA, SCOPE_WORKER) and not c.details.get("tail"):
        return True
    return float(c.details.get("outlier_s", 0.0)) >= th.evidence_spread * spread_s
