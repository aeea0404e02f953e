"""A pattern's severity, earned by what it costs the run (issue 50, must-have 4).

The step's judgement (:func:`.severity.judge`) asks whether one step lost more than the run's steps stray. A pattern
is not one step's loss, and that question misjudges it both ways:

* **a persistent straggler** (:mod:`.stragglers`) slows every step a little, so no step strays and its mean cost
  rarely reaches ``evidence_share`` (10 %) of a step; yet it costs the whole run. Its evidence is its persistence
  against its peers (the pattern's own test: slower in most steps, with a chance below ``evidence_chance`` over
  every group and part tested); its cost is its mean over the steps it slowed. It is a **warning** from
  ``warning_fraction`` (5 %) of the median step, a **critical** from ``critical_fraction`` of it. The seconds floor
  (``warning_min_s``) is weighed against what it cost the run (the sum over its steps): a worker that costs each of
  twenty 4 s steps 0.3 s costs the run 6 s.
* **a behaviour shift** (:mod:`.behaviour_shift`) is one step, but its evidence is the behaviour metric's move, not
  the step's time: a step whose policy asked for so much more work that it cost :data:`SHIFT_WARNING_SHARE` (25 %)
  of a usual step (its baseline, the yardstick of every severity's floor) is a **warning** however much the run's
  steps stray (the step's own judgement still decides past it, e.g. critical). What it cost is its extra work at the
  usual speed where that is more than the step lost against its usual: the rest of the step may have run fast by its
  own draw, which does not make the extra work cheaper (``bench_diagnosis --classes --seed 11504``, a shift run:
  answers 1.39× longer in step 1, 40.9 s of extra decoding, the truth's 38.8 s; the step lost 20.9 s against its
  usual and the shift was information). That holds for a synchronous step; an asynchronous step's rollout overlaps
  its training, so there the shift cost what the step lost, held to its trainer's wait (a clean stale colocate-async
  run, tests/analysis/test_consumed_across_parts.py: 12.5 s of extra decoding, 1.9 s lost, was a warning). A shift
  whose move is within what a run of this many steps shows by chance (the step's draw of prompts) stays information:
  it is no evidence the policy changed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from otel_verl.analysis.findings.causes.severity import Judgement, cost_floor
from otel_verl.analysis.findings.common.thresholds import Thresholds

SHIFT_WARNING_SHARE = 0.25
"""A behaviour shift (beyond chance) that cost at least this share of its step is a warning (issue 50)."""
RANK = ("info", "warning", "critical")


def persistent(per_step_s: Sequence[float], median_step_s: float, chance: float, th: Thresholds) -> Judgement:
    """The severity of a straggler that cost the steps it slowed ``per_step_s`` (module docstring); the share is
    its mean cost over ``median_step_s``, the figure its message says."""
    cost = np.asarray(per_step_s, dtype=float)
    typical = float(cost.mean()) if len(cost) else 0.0
    share = typical / median_step_s if median_step_s > 0 else 0.0
    shown = float(f"{chance:.2g}") if chance < 1 else None
    evidence = chance <= th.evidence_chance
    if not evidence or share < th.warning_fraction or float(cost.sum()) < th.warning_min_s:
        return Judgement("info", share, False, evidence, shown)
    return Judgement("critical" if share >= th.critical_fraction else "warning", share, False, True, shown)


def shifted(step_judgement: Judgement, cost_s: float, usual_step_s: float, drawn: bool, th: Thresholds) -> Judgement:
    """A behaviour shift's severity: its step's judgement, raised to a warning when the shift is beyond chance and
    cost (``cost_s``: the larger of what the step lost to it and its extra work at the usual speed) at least
    :data:`SHIFT_WARNING_SHARE` of a usual step (``usual_step_s``) and the floor; a drawn one is information
    (module docstring)."""
    j = step_judgement
    if drawn:
        return Judgement("info", j.share, j.beyond_steps, j.beyond_norm, j.chance)
    share = cost_s / usual_step_s if usual_step_s > 0 else 0.0
    floor = cost_floor(usual_step_s, th)
    if j.severity != "info" or share < SHIFT_WARNING_SHARE or cost_s < floor:
        return j
    return Judgement("warning", j.share, j.beyond_steps, True, j.chance, cost_s, floor)
