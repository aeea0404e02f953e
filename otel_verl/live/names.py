"""Every metric name the live account writes into verl's logger, pinned in one place (docs/live.md has the table).

All live under :data:`PREFIX`; a part's or phase's name is the account's own (``decode``, ``tool``,
``update_actor`` …), made safe for every backend by :func:`safe`. Seconds end in ``_s``, ratios in ``_ratio`` or
``_share``. Text (the verdict line, the top cause) goes only where the backend takes text.
"""

from __future__ import annotations

import re
from typing import Final

PREFIX: Final = "otel_verl/"

STEP: Final = PREFIX + "step"
"""The step these values describe (wandb plots every ``otel_verl/*`` against it: they arrive a step late)."""
STEP_S: Final = PREFIX + "step_s"
USUAL_S: Final = PREFIX + "usual_s"
"""The step's baseline: the sum of its parts' usual values (medians over the window of recent steps)."""
EXCESS_S: Final = PREFIX + "excess_s"
"""``step_s − usual_s``: what the parts below split between them."""
ROLLOUT_S: Final = PREFIX + "rollout_s"
ROLLOUT_USUAL_S: Final = PREFIX + "rollout_usual_s"
UNEXPLAINED_S: Final = PREFIX + "unexplained_s"
"""The excess of the time no span accounts for (between a request's spans, outside any phase)."""

PART: Final = PREFIX + "part/"
"""``otel_verl/part/<part>_s``: a rollout part's seconds on the critical path (``decode``, ``engine_queue`` …);
``otel_verl/part/phase/<phase>_s``: a trainer phase's seconds."""
EXCESS: Final = PREFIX + "excess/"
"""``otel_verl/excess/<part>_s`` and ``otel_verl/excess/phase/<phase>_s``: the part's seconds over its usual."""

CAUSE_S: Final = PREFIX + "cause_s"
"""Seconds the step's top cause cost it (0: no cause named)."""
CAUSE_SEVERITY: Final = PREFIX + "cause_severity"
"""The top cause's severity as a number: :data:`SEVERITY_LEVEL`."""
SEVERITY_LEVEL: Final = {"critical": 3, "warning": 2, "info": 1}
"""0: no cause named in the step."""

TAIL: Final = PREFIX + "tail/"
TAIL_BARRIER_SHARE: Final = TAIL + "barrier_share"
"""The workers' mean share of the rollout spent waiting at the barrier for the slowest worker."""
TAIL_OVERSAMPLE_SAVED_S: Final = TAIL + "oversample_saved_s"
"""What aborting the last 10 % of the step's requests once the rest were done would have saved."""
TAIL_OVERSAMPLE_DROPPED: Final = TAIL + "oversample_dropped"
TAIL_PARTIAL_SAVED_S: Final = TAIL + "partial_rollout_saved_s"
"""What capping decoding when 90 % were done (the rest resumed next step) would have saved."""
TAIL_PARTIAL_TOKENS: Final = TAIL + "partial_rollout_tokens_carried"

ASYNC: Final = PREFIX + "async/"
"""Asynchronous trainers (``colocate_async``, ``separate_async``): who waited for whom in the step."""
ASYNC_KEYS: Final = (
    "trainer_wait_s",
    "trainer_idle_ratio",
    "rollout_paused_s",
    "rollout_no_work_s",
    "rollout_idle_ratio",
    "engine_idle_ratio",
    "weight_sync_s",
    "weight_syncs",
)
"""findings.json's ``steps[].async`` keys written as ``otel_verl/async/<key>``."""
STALENESS_MAX: Final = ASYNC + "staleness_max"
STALENESS_MEAN: Final = ASYNC + "staleness_mean"
"""Over the samples the step's inner updates consumed (their ``verl.update.staleness.*``)."""

LIVE: Final = PREFIX + "live/"
BASELINE_STEPS: Final = LIVE + "baseline_steps"
"""Steps the baselines came from (the window), valued as ``analyze`` values a run that short: 1, no baseline (no
usual, no excess is written); 2, each step is the other's baseline (every excess is the difference from the step
before); from 3 (``Thresholds.min_steps``), medians over the window, and how much steps vary is measured."""
SPANS: Final = LIVE + "spans"
LATE_SPANS: Final = LIVE + "late_spans"
"""Spans that reached the live account after their step was computed (left out; cumulative over the run)."""
DROPPED_SPANS: Final = LIVE + "dropped_spans"
"""Spans of the step the live account could not take (its per-step cap; cumulative over the run)."""
COMPUTE_S: Final = LIVE + "compute_s"
"""Seconds the live account spent on this step (beside the trainer, not in it)."""
LAG_STEPS: Final = LIVE + "lag_steps"
"""How many steps later than its own step the account reached the logger."""

VERDICT: Final = PREFIX + "verdict"
"""Text: the step's one-line verdict (also the console line)."""
CAUSE: Final = PREFIX + "cause"
"""Text: the top cause's name (the steps table's: ``step_cause.cause_name``) and where, in the live line's words
(``stall at worker 0``)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


def safe(name: str) -> str:
    """A part's or phase's name as a metric name component (mlflow takes letters, digits, ``_ . - / :``)."""
    return _UNSAFE.sub("_", str(name)).strip("_") or "unnamed"


def part_key(prefix: str, kind: str, phase: str | None) -> str:
    """``<prefix><part>_s`` for a rollout part, ``<prefix>phase/<phase>_s`` for a trainer phase."""
    return f"{prefix}phase/{safe(phase)}_s" if phase is not None else f"{prefix}{safe(kind)}_s"
