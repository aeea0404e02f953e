"""Detector thresholds: documented defaults, overridable from the CLI (``--set name=value``) or a JSON file.

Every rule is "far above a robust baseline" = above ``median + k·MAD`` AND above ``ratio × median``
AND at least ``min_s`` seconds above the median. The three together keep a clean run quiet:
k·MAD alone fires on near-constant data, ratio alone on tiny durations, min_s alone on big steps.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

import numpy as np

from otel_verl.analysis.errors import AnalysisInputError


@dataclass(frozen=True)
class Thresholds:
    """Defaults tuned on the seed's numbers (a 140-150 s stall in a ~30 s rollout) and on clean synthetic runs."""

    slow_step_k: float = 5.0
    """Step rollout time above median + k·MAD of the *other* steps..."""
    slow_step_ratio: float = 1.5
    """...and at least this multiple of their median..."""
    slow_step_min_s: float = 5.0
    """...and at least this many seconds above it (a 0.7 s step among 0.4 s ones is noise, not a slow step)."""
    slow_step_min_steps: int = 3
    """Need this many other steps for a baseline; fewer → no slow_step finding."""
    straggler_min_s: float = 5.0
    """A worker finishing this many seconds after the step's median worker..."""
    straggler_rel: float = 0.25
    """...and this fraction of the median worker's rollout time."""
    idle_gap_min_s: float = 10.0
    """A stretch with requests in flight and no span starting or ending, at least this long..."""
    idle_gap_rel: float = 0.2
    """...and this fraction of the step's median worker rollout time..."""
    idle_gap_min_inflight: int = 2
    """...with at least this many requests in flight (one long call alone is a tail, not a stall)."""
    tail_quantile: float = 0.99
    """tail_request: requests above this per-step quantile of duration..."""
    tail_ratio: float = 2.0
    """...and this multiple of the step's median request duration."""
    tail_max_per_step: int = 3
    """At most this many tail_request findings per step (the slowest)."""
    event_k: float = 10.0
    """slow_event: one event span above median + k·MAD of its event type (all steps)..."""
    event_ratio: float = 5.0
    """...and this multiple of the type's median..."""
    event_min_s: float = 2.0
    """...and at least this many seconds above it."""
    turn_k: float = 10.0
    """turn_anomaly: a turn's engine time above median + k·MAD of its turn index..."""
    turn_ratio: float = 4.0
    """...and this multiple of that median..."""
    turn_min_s: float = 5.0
    """...and at least this many seconds above it."""
    aborted_warn_fraction: float = 0.5
    """aborted_waste is a warning when aborted requests used this fraction of the step's request-seconds."""
    stall_burst_s: float = 0.1
    """Process stall: slow spans of one worker ending within this many seconds of each other form a burst..."""
    stall_min_requests: int = 3
    """...of at least this many requests, that started apart but ended together after a stretch in which
    nothing else on the worker ended: the process was paused (CPU starvation, GC, a blocked event loop).
    Reported once as an ``idle_gap`` (``details.pattern = "process_stall"``), not as one slow event per span."""
    replica_queue_min_s: float = 5.0
    """replica_imbalance / engine_queueing: a replica's engine calls queued in the engine at least this many
    seconds in total in one step..."""
    replica_queue_share: float = 0.8
    """...replica_imbalance: and it holds this share of the step's queued seconds while another replica served
    requests of the step and queued almost none (verl's sticky sessions pin conversations to a replica)..."""
    engine_queue_fraction: float = 0.25
    """...engine_queueing: the step's engine calls spent this fraction of their time queued in the engine."""
    warning_fraction: float = 0.1
    """An anomaly that cost less than this fraction of the median step rollout time is ``info``..."""
    critical_fraction: float = 0.5
    """...one that cost at least this fraction is ``critical``..."""
    critical_min_s: float = 10.0
    """...if it also cost at least this many seconds (a 2.6 s hiccup in a 3 s step is a warning at most)."""
    max_findings_per_kind: int = 50
    """Cap per kind so a pathological run still gives a readable report."""

    def with_overrides(self, pairs: list[str] | None = None, config: Path | None = None) -> Thresholds:
        """Apply a JSON config file, then ``name=value`` pairs (CLI wins)."""
        values: dict[str, object] = {}
        if config is not None:
            try:
                data = json.loads(Path(config).read_text())
            except (OSError, json.JSONDecodeError) as exc:
                raise AnalysisInputError(f"{config}: cannot read thresholds config: {exc}") from None
            if not isinstance(data, dict):
                raise AnalysisInputError(f"{config}: thresholds config must be a JSON object")
            values.update(data.get("thresholds", data))
        for pair in pairs or []:
            if "=" not in pair:
                raise AnalysisInputError(f"threshold override {pair!r} is not name=value")
            k, v = pair.split("=", 1)
            values[k.strip()] = v.strip()
        known = {f.name: f for f in fields(self)}
        parsed: dict[str, object] = {}
        for k, v in values.items():
            if k not in known:
                raise AnalysisInputError(f"unknown threshold {k!r}; valid: {', '.join(sorted(known))}")
            typ = int if known[k].type in (int, "int") else float
            try:
                parsed[k] = typ(v)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                raise AnalysisInputError(f"threshold {k}={v!r} is not a number") from None
        return replace(self, **parsed)

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


def severity(cost_s: float, median_rollout_s: float, th: Thresholds, min_s: float = 0.0) -> str:
    """Severity from what an anomaly cost: its share of a typical step's rollout, and its seconds.

    ``cost_s`` is the time the anomaly cost (a gap's length, how much later a straggler or a slow event's
    worker finished); ``min_s`` the detector's own floor for a warning. Without a step baseline every
    detected anomaly counts as large.
    """
    med = median_rollout_s
    share = cost_s / med if np.isfinite(med) and med > 0 else float("inf")
    if cost_s < min_s or share < th.warning_fraction:
        return "info"
    if cost_s >= th.critical_min_s and share >= th.critical_fraction:
        return "critical"
    return "warning"


def far_above(value: float, median: float, mad: float, k: float, ratio: float, min_s: float) -> bool:
    """The shared 'far above a robust baseline' test."""
    return value > median + k * mad and value >= ratio * median and value - median >= min_s
