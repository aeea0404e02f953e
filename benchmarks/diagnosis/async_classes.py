"""The asynchronous judgement classes (issue 50, must-have 5): runs of verl's ``separate_async`` and
``colocate_async`` trainers (:mod:`.async_model`, written by :mod:`.write_async`), each built for one question.

Drawn like the other classes (shape, format, place, size at random; the mode half and half, ``async_replica`` in
the engine-span format with 2 or 4 replicas):

* ``async_clean`` — nothing planted: no warning (the first step's wait is the pipeline filling, not excused);
* ``async_stale`` — nothing slow, batches dispatched 2-3 ahead so every update trains on samples 1-3 versions old:
  staleness is the price of overlap, counted, not a fault: no warning;
* ``async_phase`` — one step's ``update_actor`` (or ``old_log_prob``) longer in every inner update, costing 15-100 %
  of a median step (and ≥ 2 spreads): ``slow_phase`` at that step naming the phase;
* ``async_sync`` — the weight sync growing linearly over 8-12 steps, the last step 20-60 % of a median step slower
  for it: a finding naming the weight sync (``details`` mention ``weight_sync`` or ``update_weights``) that covers
  the run's last third;
* ``async_replica`` — one replica decoding slower from a random dispatch on, sized so the trainer's wait grows by
  15-60 % of a median step in the steps that consume it: a finding at that replica (``details.replica``) at one of
  those steps;
* ``async_reward`` — one request's reward hangs in one batch, sized so the step that trains on that batch (the
  next one: a later step than the dispatch's) waits 25-150 % of a median step longer: ``slow_reward`` at the
  waiting step, placed as the suite places request plants.

Told right (``alarm`` in the tables): the finding above at warning or worse within the first three cause findings.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from dataclasses import replace
from typing import Any

from benchmarks.diagnosis import matching as m
from benchmarks.diagnosis.async_model import (
    MODES,
    SEPARATE,
    UPDATE_PHASES,
    AsyncRun,
    TrainerPlan,
    draw_async_shape,
    median_rollout,
    simulate_async,
)
from benchmarks.diagnosis.classes import Expect
from benchmarks.diagnosis.draws import draw_run
from benchmarks.diagnosis.effects import Plant
from benchmarks.diagnosis.planting import bisect
from benchmarks.diagnosis.run_model import spread_of
from benchmarks.diagnosis.shape import OTLP_ENGINE, TRAINER_PHASES, draw_shape, spans_per_request
from otel_verl.analysis.findings.common import kinds as k

ASYNC_CLASSES = ("async_clean", "async_stale", "async_phase", "async_sync", "async_replica", "async_reward")
MAX_SPANS = 4_000
"""Small runs: 8 runs a class take a few minutes on two busy cores."""
SYNC_SHARE = (0.05, 0.15)
"""The weight sync's usual seconds against the median rollout."""


def _log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


class Base:
    """A drawn asynchronous run before plants: shape, draws, the trainer's plan; :meth:`run` simulates it."""

    def __init__(self, seed: int, fmt: str, steps: tuple[int, int], lookahead: int = 1, replicas: bool = False):
        rng = self.rng = random.Random(seed)
        self.seed = seed
        mode = rng.choice(MODES)
        shape = draw_shape(rng, fmt, MAX_SPANS)
        n = rng.randint(*steps)
        shape = replace(shape, steps=n, abort_share=0.0, test_every=0, replica_queue=())
        if replicas:
            shape = replace(shape, replicas=rng.choice((2, 4)))
        cap = MAX_SPANS / spans_per_request(shape.max_turns, shape.turn_alpha)
        while shape.requests > cap and shape.prompts > 1:
            shape = replace(shape, prompts=shape.prompts - 1)
        self.shape = shape
        self.draws = draw_run(rng, replace(shape, steps=n + lookahead))  # one batch per step, and the warm-up's
        self.ashape = replace(draw_async_shape(rng, mode), lookahead=lookahead)
        rollout = median_rollout(shape, self.draws)
        weights = {name: w for name, w in TRAINER_PHASES if name in shape.phases and name in UPDATE_PHASES}
        total = self.ashape.train_ratio * rollout
        per = {name: total * w / sum(weights.values()) / self.ashape.updates for name, w in weights.items()}
        sync = rollout * rng.uniform(*SYNC_SHARE)
        noise = [{name: rng.lognormvariate(0, shape.phase_sigma) for name in UPDATE_PHASES} for _ in range(n)]
        syncs = [sync * rng.lognormvariate(0, shape.phase_sigma) for _ in range(n)]
        gaps = [(rng.uniform(0.05, 0.3), rng.uniform(0.005, 0.03), rng.uniform(0.02, 0.1), rng.uniform(0.01, 0.1))
                for _ in range(n)]  # fmt: skip
        self.ashape = replace(self.ashape, sync_s=sync)
        self.plan = TrainerPlan(per, noise, {}, syncs, gaps)
        self.clean = simulate_async(shape, self.ashape, self.draws, self.plan, [])[1]
        self.durations = [s.duration for s in self.clean]
        self.median = statistics.median(self.durations)
        self.spread = spread_of(self.durations)

    def simulate(self, plan: TrainerPlan | None = None, plants: list[Plant] | None = None) -> tuple[list, list]:
        return simulate_async(self.shape, self.ashape, self.draws, plan or self.plan, plants or [])

    def run(self, plan: TrainerPlan | None = None, plants: list[Plant] | None = None, **meta: Any) -> AsyncRun:
        dispatches, steps = self.simulate(plan, plants)
        for p in plants or []:
            at = p.meta.get("waits_at", p.step)
            p.cost = steps[at - 1].duration - self.clean[at - 1].duration
            p.size = p.cost / self.spread
        return AsyncRun(self.seed, self.shape, self.ashape, dispatches, steps, self.clean, plants or [], self.spread,
                        {"mode": self.ashape.mode, **meta})  # fmt: skip

    def variant(self, what: str = "") -> str:
        return f"{'separate' if self.ashape.mode == SEPARATE else 'colocate'}{', ' + what if what else ''}"


def build_async_clean(seed: int, fmt: str) -> tuple[AsyncRun, Expect]:
    b = Base(seed, fmt, (4, 10))
    return b.run(), Expect("async_clean", variant=b.variant())


def build_async_stale(seed: int, fmt: str) -> tuple[AsyncRun, Expect]:
    rng = random.Random(f"{seed}:lookahead")
    b = Base(seed, fmt, (4, 10), lookahead=rng.choice((2, 3)))
    return b.run(), Expect("async_stale", variant=b.variant(f"{b.ashape.lookahead} batches ahead"))


def build_async_phase(seed: int, fmt: str) -> tuple[AsyncRun, Expect]:
    b = Base(seed, fmt, (4, 10))
    rng = b.rng
    phase = rng.choice([p for p in ("update_actor", "old_log_prob") if p in b.plan.phase_s] or ["update_actor"])
    step = rng.randint(2, b.shape.steps)
    target = max(_log_uniform(rng, 0.15, 1.0) * b.median, 2 * b.spread)

    def plan_for(extra: float) -> TrainerPlan:
        return replace(b.plan, extra={step: {phase: extra}})

    def cost(extra: float) -> float:
        return b.simulate(plan_for(extra))[1][step - 1].duration - b.clean[step - 1].duration

    extra = bisect(cost, target, 20 * b.median)
    plant = Plant(k.SLOW_PHASE, step, k.SCOPE_PHASE, phase=phase, param=extra, meta={"class": "async_phase"})
    run = b.run(plan_for(extra), [], plants_trainer=[plant.as_json()])
    plant.cost, plant.size = cost(extra), cost(extra) / b.spread
    run.plants = [plant]
    return run, Expect("async_phase", k.SLOW_PHASE, (step,), k.SCOPE_PHASE, plant=plant, variant=b.variant(phase),
                       size={"cost_share": plant.cost / b.median})  # fmt: skip


def build_async_sync(seed: int, fmt: str) -> tuple[AsyncRun, Expect]:
    b = Base(seed, fmt, (8, 12))
    n = b.shape.steps
    growth = b.rng.uniform(0.2, 0.6) * b.median
    factor = 1 + growth / b.ashape.sync_s
    syncs = [x * (1 + (factor - 1) * (s - 1) / (n - 1)) for s, x in enumerate(b.plan.sync, start=1)]
    plan = replace(b.plan, sync=syncs)
    run = b.run(plan, [], weight_sync_factor=factor)
    late = tuple(range(n - n // 3, n + 1))
    return run, Expect("async_sync", "weight_sync", late, variant=b.variant(),
                       size={"growth": growth / b.median, "factor": factor})  # fmt: skip


def build_async_replica(seed: int, fmt: str) -> tuple[AsyncRun, Expect]:
    b = Base(seed, OTLP_ENGINE, (6, 10), replicas=True)
    rng = b.rng
    n = b.shape.steps
    replica = rng.randrange(b.shape.replicas)
    first = rng.randint(0, n // 2)
    target = _log_uniform(rng, 0.15, 0.6) * b.median
    waiting = list(range(max(2, first + 1), n + 1))
    # dispatch j is trained on by step j + 1; step 1's wait is the pipeline filling

    def plants(p: float) -> list[Plant]:
        return [Plant(k.SLOW_DECODE, j, k.SCOPE_REPLICA, replica=replica, param=p, meta={"class": "async_replica"})
                for j in range(first, n)]  # fmt: skip

    def cost(p: float) -> float:
        steps = b.simulate(None, plants(p))[1]
        return statistics.median(steps[s - 1].wait_s - b.clean[s - 1].wait_s for s in waiting) if waiting else 0.0

    param = bisect(cost, target, 50.0, relative=True)
    planted = plants(param)
    for p in planted:
        p.meta["waits_at"] = min(n, p.step + 1)
    run = b.run(None, planted)
    return run, Expect("async_replica", k.SLOW_DECODE, tuple(waiting), k.SCOPE_REPLICA, replica=replica,
                       variant=b.variant(f"{b.shape.replicas} replicas"),
                       size={"cost_share": cost(param) / b.median, "factor": 1 + param})  # fmt: skip


def build_async_reward(seed: int, fmt: str) -> tuple[AsyncRun, Expect]:
    b = Base(seed, fmt, (4, 10))
    rng = b.rng
    n = b.shape.steps
    dispatch = rng.randint(b.ashape.lookahead, n - 1)
    waits_at = dispatch + 1
    worker = rng.randrange(b.shape.workers)
    rq = rng.choice(b.draws[dispatch].workers[worker].requests)
    target = _log_uniform(rng, 0.25, 1.5) * b.median
    label = dispatch if dispatch >= b.ashape.lookahead else 1

    def plant(p: float) -> Plant:
        meta = {"class": "async_reward", "waits_at": waits_at, "dispatch_step": label}
        return Plant(k.SLOW_REWARD, dispatch, k.SCOPE_REQUEST, workers=(worker,), sample_index=rq.sample_index,
                     request_ids=(rq.request_id,), param=p, meta=meta)  # fmt: skip

    def cost(p: float) -> float:
        return b.simulate(None, [plant(p)])[1][waits_at - 1].duration - b.clean[waits_at - 1].duration

    param = bisect(cost, target, 50 * b.median)
    planted = plant(param)
    run = b.run(None, [planted])
    told = replace(planted, step=waits_at)
    return run, Expect("async_reward", k.SLOW_REWARD, (waits_at,), k.SCOPE_REQUEST, worker=worker, plant=told,
                       variant=b.variant(), size={"cost_share": planted.cost / b.median})  # fmt: skip


BUILDERS = {
    "async_clean": build_async_clean,
    "async_stale": build_async_stale,
    "async_phase": build_async_phase,
    "async_sync": build_async_sync,
    "async_replica": build_async_replica,
    "async_reward": build_async_reward,
}


def build_async_class_run(seed: int, fmt: str, cls: str) -> tuple[AsyncRun, Expect]:
    return BUILDERS[cls](seed, fmt)


def _mentions_sync(f: dict[str, Any]) -> bool:
    text = json.dumps(m.details_of(f)) + str(f.get("kind")) + str(f.get("phase"))
    return "weight_sync" in text or "update_weights" in text


def tells_async(expect: Expect, f: dict[str, Any], n_workers: int) -> bool:
    """Whether finding ``f`` tells what an asynchronous class run asks (module docstring)."""
    d = m.details_of(f)
    steps = set(m.steps_of(f))
    if expect.cls in ("async_phase", "async_reward"):
        return expect.plant is not None and m.matches(expect.plant, f, n_workers)
    if expect.cls == "async_sync":
        kind = str(f.get("kind"))
        return (
            _mentions_sync(f)
            and (kind in (k.TREND, k.SLOW_PHASE) or "sync" in kind)
            and (not steps or bool(steps & set(expect.steps)))
        )
    if expect.cls == "async_replica":
        place = d.get("replica") is not None and str(d.get("replica")) == str(expect.replica)
        return place and bool(m.kinds_of(f) & {k.SLOW_DECODE, k.STRAGGLER}) and bool(steps & set(expect.steps))
    return False
