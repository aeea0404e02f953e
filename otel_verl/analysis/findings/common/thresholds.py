"""The diagnosis's thresholds: documented defaults, overridable from the CLI (``--set name=value``) or a JSON file.

Every threshold is relative to the run itself: an occurrence is judged against the run's spread of that part
(:mod:`.baselines`), a group against how far such groups usually stray, and a cause's severity against the run's
step-to-step spread. None is set so that one example passes: the defaults were chosen on the randomised runs of
``benchmarks/bench_diagnosis.py`` (warnings per clean run, causes named) and are judged by its rates.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from otel_verl.analysis.errors import AnalysisInputError


@dataclass(frozen=True)
class Thresholds:
    """Defaults; each name can be overridden (``--set fence_power=3``)."""

    fence_quantile: float = 0.95
    """An occurrence is far outside its part's norm beyond the fence (:func:`.baselines.fence`): the tail's width is
    read between the median and this quantile..."""
    fence_margin: float = 0.5
    """...and the fence lies this many widths beyond where the largest of the run's values would fall..."""
    fence_min_ratio: float = 3.0
    """...and never below this multiple of the median (near-constant parts)."""
    fence_additive: float = 3.0
    """...for a part that usually takes nothing, the fence is its quantile plus this many (quantile − median)..."""
    occurrence_min_s: float = 0.02
    """...and at least this many seconds above the median (micro-second parts never matter)."""
    shift_z: float = 4.0
    """A step, worker, replica or sample group moved when its median's log ratio to the run's median lies this
    many robust standard deviations beyond such groups' usual spread..."""
    shift_min_ratio: float = 1.25
    """...and its median is at least this multiple of the run's."""
    shift_min_count: int = 3
    """A group needs this many occurrences of a part to be judged as a group."""
    degraded_ratio: float = 3.0
    """A part this many times its usual value on every worker of a step is reported as a warning even when the
    step lost little to it (requests overlapped): the degraded service, before it costs more."""
    stall_min_in_flight: int = 2
    """A stall: a stretch with at least this many requests in flight and nothing starting or ending on the
    worker, beyond the fence of such stretches in the run."""
    info_spread: float = 1.0
    """A cause is reported (as information) when it cost its step at least this many times the run's
    step-to-step spread..."""
    info_fraction: float = 0.02
    """...and this fraction of a usual step; smaller moves are the run's noise and stay in the account only."""
    warning_margin: float = 3.5
    """A cause is a warning when it cost its step more than the run's steps naturally stray: beyond where the
    largest of the run's clean steps would fall only with probability e^−margin (3 %;
    :class:`.step_account.StepSpread`), so a longer run does not raise more false alarms..."""
    warning_fraction: float = 0.05
    """...and at least this fraction of a usual step (a run of near-identical steps has a tiny spread)..."""
    warning_min_s: float = 0.5
    """...and at least this many seconds."""
    evidence_chance: float = 0.01
    """A cause lies far outside its part's norm when a clean run of this size would show it with a smaller chance
    (:mod:`.chance`)..."""
    evidence_share: float = 0.1
    """...and such a cause is a warning from this share of its step, whatever the run's step-to-step spread says
    (:mod:`.severity`)..."""
    evidence_spread: float = 2.0
    """...when it cost at least this many times that spread (where the spread is measured)."""
    critical_fraction: float = 0.5
    """A warning that cost at least this fraction of a usual step is critical."""
    aborted_warn_fraction: float = 0.5
    """Aborted (over-sampled) requests are a warning when they used this fraction of the step's request time."""
    bound_min_idle: float = 0.2
    """Asynchronous trainers: a run is generation-bound (train-bound) when the trainer waited for samples (the rollout
    had nothing to generate) at least this fraction of the step time, and half this more than the other side
    (:mod:`.bound`)..."""
    bound_warn_idle: float = 0.5
    """...and a warning when the waiting side waited at least this fraction, and twice the other side's."""
    trend_min_growth: float = 0.1
    """What drove step time over the run that moved it this share of the median step is a trend (:mod:`.trends`;
    the benchmark's trends move it 20 % or more: the estimate is a model's, told from half that so it does not miss
    the ones at that edge)..."""
    trend_z: float = 3.0
    """...each factor counted when it moved surely: Mann-Kendall's |z| at least this (a clean run's factor does with
    a chance of ~0.3 %)."""
    min_steps: int = 3
    """Fewer steps than this (that the causes left alone) measure no step-to-step spread: a step is then judged
    against its own peers (:mod:`.severity`), and said to be..."""
    short_run_ratio: float = 1.5
    """...and against the run's other steps by their length alone: a step that took at least this many times the
    median of the others lost more than steps naturally stray (with no spread to measure, a step half as long
    again as its peers is what the benchmark's short runs call a slowed step;
    :meth:`.step_account.StepSpread.without`)."""
    short_run_steps: int = 5
    """A run of at most this many steps judges a step by its length too, though it measured a spread: three or four
    other steps measure one so loosely that the level they set lies 7 to 9 spreads above their median."""
    explained_share: float = 0.5
    """A step is its causes' doing when they explain at least this share of what it lost: it is left out of the
    spread (:meth:`.step_account.StepSpread.of`), and its largest causes up to this share carry it
    (:mod:`.severity`)."""
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
