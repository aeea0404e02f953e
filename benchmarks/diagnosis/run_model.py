"""A whole simulated run: shape, draws, plants, the planted timelines and the clean twin's.

One ``random.Random(seed)`` draws, in this order, the shape, every base draw of every step, then the plants
(kinds, places, sizes). The clean twin is the same draws with no plant; each plant's cost is its step's
duration in the run minus in the twin (plants sit on distinct steps, and a step never changes the next
one's durations, so the twin is the run without that one plant at that step).

The run's **spread** is 1.4826 × the median absolute deviation of the twin's step durations: the standard
deviation's robust stand-in (equal to it for normal noise), which a few slow steps — validation steps,
a heavy-tailed request — do not inflate the way they inflate a standard deviation, and which is defined
with as few as 8 steps, unlike a percentile range. It is floored at 1 % of the median step, so a run whose
steps are all alike does not turn a 0.1 s plant into a "huge" one.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.diagnosis.draws import StepDraw, draw_run
from benchmarks.diagnosis.effects import Effects, Plant
from benchmarks.diagnosis.planting import PLANT_COUNTS, Planter
from benchmarks.diagnosis.shape import MAX_SPANS_PER_RUN, TRAINER_PHASES, Shape, draw_replica_load, draw_shape
from benchmarks.diagnosis.steps import StepTimeline, assemble, resimulate, simulate_workers

MAD_TO_SIGMA = 1.4826
SPREAD_FLOOR = 0.01


@dataclass
class SimRun:
    seed: int
    shape: Shape
    draws: list[StepDraw]
    phase_means: dict[str, float]
    clean: list[StepTimeline]
    steps: list[StepTimeline]
    """The run as written: the clean twin's steps with the plants applied."""
    plants: list[Plant]
    spread: float

    @property
    def fmt(self) -> str:
        return self.shape.fmt

    def durations(self, clean: bool = False) -> list[float]:
        return [s.duration(self.fmt) for s in (self.clean if clean else self.steps)]

    def truth(self) -> dict[str, Any]:
        """The ground truth, as written next to a kept run (``truth.json``)."""
        return {
            "seed": self.seed,
            "format": self.fmt,
            "shape": {**self.shape.__dict__, "phases": list(self.shape.phases)},
            "spread_s": self.spread,
            "clean_durations_s": self.durations(clean=True),
            "durations_s": self.durations(),
            "plants": [p.as_json() for p in self.plants],
        }


def spread_of(durations: Sequence[float]) -> float:
    """1.4826 × MAD, floored at 1 % of the median (module docstring)."""
    median = statistics.median(durations)
    mad = statistics.median(abs(d - median) for d in durations)
    return max(MAD_TO_SIGMA * mad, SPREAD_FLOOR * median)


def phase_means(shape: Shape, rollouts: Sequence[float]) -> dict[str, float]:
    """Each trainer phase's usual seconds: the trainer takes ``trainer_share`` of a median step."""
    median = statistics.median(rollouts)
    trainer = median * shape.trainer_share / (1 - shape.trainer_share)
    weights = {name: w for name, w in TRAINER_PHASES if name in shape.phases}
    total = sum(weights.values())
    means = {name: trainer * w / total for name, w in weights.items()}
    means["testing"] = shape.testing_share * median
    return means


def build_run(
    seed: int,
    fmt: str,
    plants: int | None = None,
    kinds: Sequence[str] | None = None,
    max_spans: int = MAX_SPANS_PER_RUN,
) -> SimRun:
    """Run ``seed`` in format ``fmt`` with ``plants`` causes (None: 1-5 at random; 0: a clean run) of the
    ``kinds`` given (default: any the format shows), about ``max_spans`` spans at most."""
    rng = random.Random(seed)
    shape = draw_replica_load(random.Random(f"{seed}:replicas"), draw_shape(rng, fmt, max_spans))
    draws = draw_run(rng, shape)
    none = Effects()
    workers = [simulate_workers(shape, d, none) for d in draws]
    zero = {name: 0.0 for name in (*shape.phases, "testing")}
    rollouts = [assemble(shape, d, w, none, zero).gen_end + d.lead for d, w in zip(draws, workers, strict=True)]
    means = phase_means(shape, rollouts)
    clean = [assemble(shape, d, w, none, means) for d, w in zip(draws, workers, strict=True)]
    spread = spread_of([s.duration(fmt) for s in clean])
    if plants is None:
        plants = rng.choices([n for n, _ in PLANT_COUNTS], weights=[p for _, p in PLANT_COUNTS])[0]
    planted = Planter(rng, shape, clean, means, spread).plants(plants, kinds) if plants else []
    steps = list(clean)
    for step in sorted({p.step for p in planted}):
        here = [p for p in planted if p.step == step]
        steps[step - 1] = resimulate(shape, clean[step - 1], Effects(here), means)
    return SimRun(seed, shape, draws, means, clean, steps, planted, spread)
