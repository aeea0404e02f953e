"""Which causes a run gets, where, and how big.

Each plant gets a kind the run's format can show (engine-span kinds only with engine spans, trainer phases
only in our spool), a scope that makes sense for the kind (:data:`SCOPES`), a random step (distinct
steps per plant; about one in six repeats on the next one or two steps), a random place, and a target size
drawn log-uniformly between :data:`SIZE_RANGE` times the run's step-to-step spread: from barely noticeable
to huge. Its ``param`` is then found by bisection on the step's simulated duration so that the plant costs
the target (a local plant off the critical path first has to use up its worker's slack). Where no
``param`` reaches the target (a long response capped at max_tokens, a request the over-sampling aborts),
the largest one tried is kept and the plant's real cost is what it is scored by.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

from benchmarks.diagnosis.effects import ENGINE_SPAN_KINDS, MULTIPLYING, Effects, Plant
from benchmarks.diagnosis.shape import Shape
from benchmarks.diagnosis.steps import StepTimeline, resimulate
from otel_verl.analysis.findings.common import kinds as k

SCOPES: dict[str, tuple[str, ...]] = {
    k.SLOW_PHASE: (k.SCOPE_PHASE,),
    k.SLOW_START: (k.SCOPE_WORKER, k.SCOPE_STEP),
    k.SLOW_PREPROCESS: (k.SCOPE_WORKER, k.SCOPE_STEP, k.SCOPE_REQUEST),
    k.ENGINE_WAIT: (k.SCOPE_WORKER, k.SCOPE_STEP, k.SCOPE_REQUEST),
    k.ENGINE_QUEUE: (k.SCOPE_REPLICA, k.SCOPE_STEP, k.SCOPE_REQUEST),
    k.SLOW_PREFILL: (k.SCOPE_REPLICA, k.SCOPE_STEP),
    k.SLOW_DECODE: (k.SCOPE_WORKER, k.SCOPE_REPLICA, k.SCOPE_STEP),
    k.LONG_RESPONSE: (k.SCOPE_REQUEST, k.SCOPE_SAMPLE),
    k.SLOW_TOOL: (k.SCOPE_REQUEST, k.SCOPE_WORKER, k.SCOPE_STEP),
    k.SLOW_REWARD: (k.SCOPE_REQUEST, k.SCOPE_WORKER, k.SCOPE_STEP),
    k.STALL: (k.SCOPE_WORKER,),
    k.SLOW_FINISH: (k.SCOPE_WORKER, k.SCOPE_STEP),
}
"""Where each kind is planted: step = every worker; replica = every request pinned to one engine replica."""
KINDS = tuple(SCOPES)
SIZE_RANGE = (0.25, 64.0)
PLANT_COUNTS = ((1, 0.45), (2, 0.3), (3, 0.15), (4, 0.06), (5, 0.04))
_MAX_SECONDS = 20_000.0
_MAX_FACTOR = 2_000.0
_REPEATS = (0, 0, 0, 0, 0, 1, 2)
"""Extra steps a plant repeats on (step, worker, replica and phase plants): about one in six recurs."""


def kinds_for(shape: Shape) -> list[str]:
    """The kinds a run of this shape can show."""
    out = []
    for kind in KINDS:
        if kind in ENGINE_SPAN_KINDS and not shape.has_engine_spans:
            continue
        if (kind == k.SLOW_PHASE and not shape.has_phases) or (kind == k.SLOW_TOOL and shape.max_turns < 2):
            continue
        out.append(kind)
    return out


def scopes_for(kind: str, shape: Shape) -> list[str]:
    """The kind's scopes this run can show: replicas only with ≥ 2 of them and the engine's spans (nothing
    else says which replica served a call), sample groups only with rollout.n ≥ 2."""
    return [
        s
        for s in SCOPES[kind]
        if (s != k.SCOPE_REPLICA or (shape.replicas > 1 and shape.has_engine_spans))
        and (s != k.SCOPE_SAMPLE or shape.rollout_n > 1)
    ]


class Planter:
    """Draws and sizes the plants of one run (``rng`` continues the run's own, after every base draw)."""

    def __init__(
        self,
        rng: random.Random,
        shape: Shape,
        clean: list[StepTimeline],
        phase_means: dict[str, float],
        spread: float,
    ) -> None:
        self.rng, self.shape, self.clean = rng, shape, clean
        self.phase_means, self.spread = phase_means, spread

    def cost(self, plant: Plant) -> float:
        base = self.clean[plant.step - 1]
        planted = resimulate(self.shape, base, Effects([plant]), self.phase_means)
        return planted.duration(self.shape.fmt) - base.duration(self.shape.fmt)

    def plants(self, count: int, kinds: Sequence[str] | None = None) -> list[Plant]:
        """``count`` plants on distinct steps, at most a third of the run's steps (fewer when it has too few)."""
        rng, shape = self.rng, self.shape
        budget = max(1, shape.steps // 3)
        used: set[int] = set()
        choices = [x for x in (kinds or kinds_for(shape)) if x in kinds_for(shape)]
        out: list[Plant] = []
        for group in range(1, count + 1):
            if len(used) >= budget or not choices:
                break
            kind = rng.choice(choices)
            scope = rng.choice(scopes_for(kind, shape))
            free = [s for s in range(1, shape.steps + 1) if s not in used]
            testing = [s for s in free if shape.test_every and s % shape.test_every == 0]
            if shape.test_every and shape.steps // shape.test_every < 3:
                testing = []  # a slow validation needs two others to be told from a usual one
            phase = None
            if kind == k.SLOW_PHASE:
                phase = rng.choice([*shape.phases, *(("testing",) if testing else ())])
            step = rng.choice(testing if phase == "testing" else free)
            used.add(step)
            plant = self._place(Plant(kind, step, scope, phase=phase, group=group))
            if plant is None:
                continue
            plant.target = math.exp(rng.uniform(*map(math.log, SIZE_RANGE)))
            plant.param = self._size(plant, plant.target * self.spread)
            out.append(plant)
            repeats = 0 if scope in (k.SCOPE_REQUEST, k.SCOPE_SAMPLE) or phase == "testing" else rng.choice(_REPEATS)
            for nxt in range(step + 1, min(shape.steps, step + repeats) + 1):
                if nxt in used or len(used) >= budget:
                    break
                used.add(nxt)
                out.append(Plant(**{**plant.__dict__, "step": nxt, "meta": {"repeat_of": step}}))
        for plant in out:
            plant.cost = self.cost(plant)
            plant.size = plant.cost / self.spread
        return sorted(out, key=lambda p: p.step)

    def _place(self, plant: Plant) -> Plant | None:
        """Where the plant acts: a worker, request, sample group or replica of its step (None: nowhere fits)."""
        rng, step = self.rng, self.clean[plant.step - 1]
        w = rng.randrange(self.shape.workers)
        if plant.scope == k.SCOPE_REPLICA:
            plant.replica = rng.randrange(self.shape.replicas)
            return plant
        if plant.scope in (k.SCOPE_STEP, k.SCOPE_PHASE):
            return plant
        plant.workers = (w,)
        if plant.scope == k.SCOPE_WORKER:
            if plant.kind == k.STALL:
                plant.at = rng.uniform(0.05, 0.7)
            return plant
        requests = step.workers[w].requests
        if plant.kind == k.SLOW_TOOL:
            requests = [r for r in requests if any(t.has_tool for t in r.turns)]
        if plant.kind == k.LONG_RESPONSE:
            requests = [r for r in requests if r.turns[-1].tokens * 4 < self.shape.max_tokens]
        if not requests:
            return None
        chosen = rng.choice(requests).draw
        if plant.scope == k.SCOPE_SAMPLE:
            plant.sample_index = chosen.sample_index
            plant.request_ids = tuple(
                r.draw.request_id for r in step.workers[w].requests if r.draw.sample_index == chosen.sample_index
            )
        else:
            plant.request_ids = (chosen.request_id,)
        return plant

    def _size(self, plant: Plant, target: float) -> float:
        """The smallest ``param`` whose cost reaches ``target`` seconds (bisection; costs grow with it)."""
        if plant.kind == k.LONG_RESPONSE:
            tokens = min(r.turns[-1].tokens for w in self.clean[plant.step - 1].workers for r in w.requests
                         if r.draw.request_id in plant.request_ids)  # fmt: skip
            cap = self.shape.max_tokens / tokens - 1
        else:
            cap = _MAX_FACTOR if plant.kind in MULTIPLYING else _MAX_SECONDS
        return bisect(lambda p: self.cost(plant.with_param(p)), target, cap, relative=plant.kind in MULTIPLYING)


def bisect(cost: Callable[[float], float], target: float, cap: float, *, relative: bool = False) -> float:
    """The smallest p in (0, cap] with cost(p) ≥ target, to ~0.5 %. Where even ``cap`` falls short (the
    cost saturates), the smallest p reaching 99 % of cost(cap) instead: no absurd value in the written run."""
    hi = min(cap, 0.5 if relative else max(target, 1e-3))
    while cost(hi) < target:
        if hi >= cap:
            reachable = 0.99 * cost(cap)
            if reachable <= 1e-6:
                return min(cap, 0.5 if relative else max(target, 1e-3))
            return bisect(cost, reachable, cap, relative=relative)
        hi = min(cap, hi * 4)
    lo = 0.0
    for _ in range(40):
        if hi - lo <= 0.005 * hi:
            break
        mid = (lo + hi) / 2
        if cost(mid) >= target:
            hi = mid
        else:
            lo = mid
    return hi
