"""The judgement classes (issue 40): runs built for one question each, beside the 200-run suite.

Each class draws its runs at random like the suite does (shape, lengths, format, place, size) and says what a
diagnosis an expert would sign must tell (an :class:`Expect`):

* ``short`` — 2-5 steps, one of them slowed to at least 1.5× the others' median by one cause of a random
  kind, place and size: the cause named (kind, step, place) at **warning or worse**;
* ``straggler`` — a worker (or, with the engine's spans and ≥ 2 replicas, a replica) slower than its peers at
  the same work (decoding, tools, rewards, queueing) in most steps (70-100 % of them): a ``straggler`` finding
  naming its place;
* ``trend`` — step time moving 20-100 % over the run, by behaviour (every answer longer; more tool-calling
  turns) or by the system (seconds per token, tool latency, engine queueing): a ``trend`` finding with the right
  side and factor;
* ``shift`` — one step where the policy behaved differently (every answer longer, or more turns): a
  ``behaviour_shift`` finding at that step naming what changed;
* ``clean`` — short (2-5 steps) and long runs, half of them with answers growing 1.3-2× over the run (a
  behaviour trend is the run's own, not a plant): no warning.

A pattern is planted as one :class:`~.effects.Plant` per step it acts on (``meta["class"]``); the clean twin is
the run without them, so ``cost`` is still the step's duration with the plant minus without it.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from benchmarks.diagnosis.draws import draw_run
from benchmarks.diagnosis.effects import MORE_TOKENS, MORE_TURNS, SLOWER_TOOL, Effects, Plant
from benchmarks.diagnosis.planting import Planter, bisect, kinds_for, scopes_for
from benchmarks.diagnosis.run_model import SimRun, phase_means, spread_of
from benchmarks.diagnosis.shape import OTLP_ENGINE, Shape, draw_shape, spans_per_request
from benchmarks.diagnosis.steps import StepTimeline, assemble, resimulate, simulate_workers
from otel_verl.analysis.findings.common import kinds as k

CLASSES = ("short", "straggler", "trend", "shift", "clean")
SLOWED = 1.5
"""``short``: the slowed step takes at least this multiple of the other steps' median."""
PERSISTENT_SHARE = (0.7, 1.0)
"""``straggler``: the share of the run's steps it is slow in."""
TREND_GROWTH = (0.2, 1.0)
"""``trend``: how much slower the last step is than the first, from the trend alone (a share of the median step)."""
CLEAN_TREND = (0.3, 1.0)
"""``clean``: answers this much longer at the end than at the start (half the clean runs)."""

BEHAVIOUR_FACTORS = {MORE_TOKENS: ("tokens",), MORE_TURNS: ("turns", "tool_calls")}
INFRASTRUCTURE_FACTORS = {
    k.SLOW_DECODE: ("s_per_token",),
    SLOWER_TOOL: ("tool_latency",),
    k.ENGINE_QUEUE: ("queue",),
}
"""Mechanism → the ``details.factor`` names a finding may give it."""


@dataclass
class Expect:
    """What the diagnosis must tell of one class run."""

    cls: str
    kind: str | None = None
    """The finding kind; None for a clean run (nothing to name)."""
    steps: tuple[int, ...] = ()
    scope: str | None = None
    worker: int | None = None
    replica: int | None = None
    side: str | None = None
    factors: tuple[str, ...] = ()
    plant: Plant | None = None
    """``short``: the plant, matched as the suite matches plants."""
    variant: str = ""
    """How the run was made (mechanism, short or long...), for the tables."""
    size: dict[str, float] = field(default_factory=dict)


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def _base(rng: random.Random, fmt: str, steps: int, max_spans: int) -> tuple[Shape, list, dict, list[StepTimeline]]:
    """A random shape of ``steps`` steps (fewer prompts where more steps would pass ``max_spans``), its draws, its
    phases' usual seconds and its clean steps."""
    shape = replace(draw_shape(rng, fmt, max_spans), steps=steps)
    cap = max_spans / spans_per_request(shape.max_turns, shape.turn_alpha)
    while shape.requests > cap and shape.prompts > 1:
        shape = replace(shape, prompts=shape.prompts - 1)
    draws = draw_run(rng, shape)
    none = Effects()
    workers = [simulate_workers(shape, d, none) for d in draws]
    zero = {name: 0.0 for name in (*shape.phases, "testing")}
    rollouts = [assemble(shape, d, w, none, zero).gen_end + d.lead for d, w in zip(draws, workers, strict=True)]
    means = phase_means(shape, rollouts)
    clean = [assemble(shape, d, w, none, means) for d, w in zip(draws, workers, strict=True)]
    return shape, draws, means, clean


def _apply(shape: Shape, clean: list[StepTimeline], means: dict, plants: list[Plant]) -> list[StepTimeline]:
    steps = list(clean)
    for step in sorted({p.step for p in plants}):
        steps[step - 1] = resimulate(shape, clean[step - 1], Effects([p for p in plants if p.step == step]), means)
    return steps


def _durations(shape: Shape, steps: list[StepTimeline]) -> list[float]:
    return [s.duration(shape.fmt) for s in steps]


def _run(seed: int, shape: Shape, draws: list, means: dict, clean: list, plants: list[Plant]) -> SimRun:
    for p in plants:
        base = clean[p.step - 1]
        p.cost = resimulate(shape, base, Effects([p]), means).duration(shape.fmt) - base.duration(shape.fmt)
    spread = spread_of(_durations(shape, clean))
    for p in plants:
        p.size = p.cost / spread
    return SimRun(seed, shape, draws, means, clean, _apply(shape, clean, means, plants), plants, spread)


def _ramp(shape: Shape, kind: str, final: float, scope: str = k.SCOPE_STEP, cls: str = "trend") -> list[Plant]:
    """One plant a step, growing from nothing at step 1 to ``final`` at the last (``final`` extra turns, or the
    factor minus one for the multiplying kinds; seconds for the adding ones)."""
    n = shape.steps
    out = []
    for s in range(2, n + 1):
        x = (s - 1) / (n - 1)
        param = round(final * x) if kind == MORE_TURNS else final * x
        if param:
            out.append(Plant(kind, s, scope, param=param, group=1, meta={"class": cls}))
    return out


def _trend_cost(shape: Shape, clean: list[StepTimeline], means: dict, kind: str, final: float) -> float:
    """The last step's cost of a ramp to ``final``, against the median step."""
    last = clean[-1]
    plant = Plant(kind, shape.steps, k.SCOPE_STEP, param=round(final) if kind == MORE_TURNS else final)
    cost = resimulate(shape, last, Effects([plant]), means).duration(shape.fmt) - last.duration(shape.fmt)
    return cost / statistics.median(_durations(shape, clean))


def build_short(seed: int, fmt: str, max_spans: int) -> tuple[SimRun, Expect]:
    rng = random.Random(seed)
    shape, draws, means, clean = _base(rng, fmt, rng.randint(2, 5), max_spans)
    spread = spread_of(_durations(shape, clean))
    planter = Planter(rng, shape, clean, means, spread)
    durations = _durations(shape, clean)
    for _ in range(20):
        kind = rng.choice([x for x in kinds_for(shape) if x != k.SLOW_PHASE or shape.phases])
        scope = rng.choice(scopes_for(kind, shape))
        step = rng.randint(1, shape.steps)
        phase = rng.choice(shape.phases) if kind == k.SLOW_PHASE else None
        plant = planter._place(Plant(kind, step, scope, phase=phase, group=1, meta={"class": "short"}))
        if plant is None:
            continue
        others = [d for i, d in enumerate(durations, start=1) if i != step] or durations
        usual = statistics.median(others)
        target = usual * SLOWED * _log_uniform(rng, 1.0, 4.0) - durations[step - 1]
        plant.param = planter._size(plant, max(target, 0.05 * usual))
        if planter.cost(plant) + durations[step - 1] >= SLOWED * usual:
            run = _run(seed, shape, draws, means, clean, [plant])
            return run, Expect("short", kind, (step,), scope, plant=plant, variant=f"{shape.steps} steps")
    run = _run(seed, shape, draws, means, clean, [])
    return run, Expect("short", variant="nothing reached 1.5×")


def build_straggler(seed: int, fmt: str, max_spans: int) -> tuple[SimRun, Expect]:
    rng = random.Random(seed)
    shape, draws, means, clean = _base(rng, fmt, rng.randint(8, 20), max_spans)
    options = [(k.SLOW_DECODE, k.SCOPE_WORKER), (k.SLOW_REWARD, k.SCOPE_WORKER)]
    if shape.max_turns >= 2:
        options.append((k.SLOW_TOOL, k.SCOPE_WORKER))
    if shape.has_engine_spans and shape.replicas > 1:
        options += [(k.SLOW_DECODE, k.SCOPE_REPLICA), (k.ENGINE_QUEUE, k.SCOPE_REPLICA)]
    kind, scope = rng.choice(options)
    worker = rng.randrange(shape.workers)
    replica = rng.randrange(shape.replicas) if scope == k.SCOPE_REPLICA else None
    n = shape.steps
    steps = sorted(rng.sample(range(1, n + 1), max(2, round(n * rng.uniform(*PERSISTENT_SHARE)))))
    median_step = statistics.median(_durations(shape, clean))
    share = _log_uniform(rng, 0.1, 0.5)
    probe = Plant(kind, steps[len(steps) // 2], scope, workers=(worker,) if scope == k.SCOPE_WORKER else ())
    probe.replica = replica
    planter = Planter(rng, shape, clean, means, spread_of(_durations(shape, clean)))
    param = planter._size(probe, share * median_step)
    plants = [replace(probe, step=s, param=param, group=1, meta={"class": "straggler"}) for s in steps]
    run = _run(seed, shape, draws, means, clean, plants)
    variant = f"{kind} on a {scope}"
    size = {"cost_share": statistics.median(p.cost for p in plants) / median_step}
    expect = Expect("straggler", k.STRAGGLER, tuple(steps), scope, worker if scope == k.SCOPE_WORKER else None,
                    replica, variant=variant, size=size)  # fmt: skip
    return run, expect


def build_trend(seed: int, fmt: str, max_spans: int) -> tuple[SimRun, Expect]:
    rng = random.Random(seed)
    shape, draws, means, clean = _base(rng, fmt, rng.randint(10, 30), max_spans)
    behaviour = rng.random() < 0.5
    if behaviour:
        kinds = [MORE_TOKENS, *([MORE_TURNS] if shape.max_turns >= 2 else [])]
    else:
        kinds = [k.SLOW_DECODE, *([SLOWER_TOOL] if shape.max_turns >= 2 else [])]
        kinds += [k.ENGINE_QUEUE] if shape.fmt == OTLP_ENGINE else []
    kind = rng.choice(kinds)
    target = rng.uniform(*TREND_GROWTH)
    if kind == MORE_TURNS:
        final = next((t for t in range(1, 13) if _trend_cost(shape, clean, means, kind, t) >= target), 12)
    elif kind == k.ENGINE_QUEUE:
        final = bisect(lambda p: _trend_cost(shape, clean, means, kind, p), target, 600.0)
    else:
        final = bisect(lambda p: _trend_cost(shape, clean, means, kind, p), target, 50.0, relative=True)
    plants = _ramp(shape, kind, final)
    run = _run(seed, shape, draws, means, clean, plants)
    side = k.SIDE_BEHAVIOUR if behaviour else k.SIDE_INFRASTRUCTURE
    factors = (BEHAVIOUR_FACTORS if behaviour else INFRASTRUCTURE_FACTORS)[kind]
    growth = _trend_cost(shape, clean, means, kind, final)
    expect = Expect("trend", k.TREND, tuple(range(1, shape.steps + 1)), side=side, factors=factors, variant=kind,
                    size={"growth": growth})  # fmt: skip
    return run, expect


def build_shift(seed: int, fmt: str, max_spans: int) -> tuple[SimRun, Expect]:
    rng = random.Random(seed)
    shape, draws, means, clean = _base(rng, fmt, rng.randint(8, 20), max_spans)
    kind = rng.choice([MORE_TOKENS, *([MORE_TURNS] if shape.max_turns >= 2 else [])])
    step = rng.randint(1, shape.steps)
    median_step = statistics.median(_durations(shape, clean))
    spread = spread_of(_durations(shape, clean))
    target = max(_log_uniform(rng, 0.15, 1.0) * median_step, 2 * spread)
    plant = Plant(kind, step, k.SCOPE_STEP, group=1, meta={"class": "shift"})
    base = clean[step - 1]

    def cost(p: float) -> float:
        planted = resimulate(shape, base, Effects([replace(plant, param=round(p) if kind == MORE_TURNS else p)]), means)
        return planted.duration(shape.fmt) - base.duration(shape.fmt)

    if kind == MORE_TURNS:
        plant.param = next((t for t in range(1, 13) if cost(t) >= target), 12)
    else:
        plant.param = bisect(cost, target, 50.0, relative=True)
    run = _run(seed, shape, draws, means, clean, [plant])
    return run, Expect("shift", k.BEHAVIOUR_SHIFT, (step,), k.SCOPE_STEP, factors=BEHAVIOUR_FACTORS[kind],
                       variant=kind, size={"cost_share": plant.cost / median_step})  # fmt: skip


def build_clean(seed: int, fmt: str, max_spans: int) -> tuple[SimRun, Expect]:
    rng = random.Random(seed)
    short = rng.random() < 0.5
    shape, draws, means, clean = _base(rng, fmt, rng.randint(2, 5) if short else rng.randint(8, 40), max_spans)
    trend = rng.random() < 0.5 and shape.steps >= 3
    variant = ("short" if short else "long") + (", answers growing" if trend else "")
    if trend:
        # the policy's answers grow over the run: the run's own behaviour, part of the clean twin
        growth = rng.uniform(*CLEAN_TREND)
        ramp = _ramp(shape, MORE_TOKENS, growth, cls="clean")
        clean = _apply(shape, clean, means, ramp)
    return _run(seed, shape, draws, means, clean, []), Expect("clean", variant=variant)


BUILDERS = {
    "short": build_short,
    "straggler": build_straggler,
    "trend": build_trend,
    "shift": build_shift,
    "clean": build_clean,
}


def build_class_run(seed: int, fmt: str, cls: str, max_spans: int) -> tuple[Any, Expect]:
    """A class run: a :class:`SimRun`, or for the asynchronous classes (issue 50) an :class:`~.async_model.AsyncRun`
    (:mod:`.async_classes`, imported here: it builds on this module)."""
    if cls.startswith("async_"):
        from benchmarks.diagnosis.async_classes import build_async_class_run

        return build_async_class_run(seed, fmt, cls)
    return BUILDERS[cls](seed, fmt, max_spans)


def describe(expect: Expect) -> dict[str, Any]:
    return {
        "class": expect.cls,
        "kind": expect.kind,
        "steps": list(expect.steps),
        "scope": expect.scope,
        "worker": expect.worker,
        "replica": expect.replica,
        "side": expect.side,
        "factors": list(expect.factors),
        "variant": expect.variant,
        **expect.size,
    }
