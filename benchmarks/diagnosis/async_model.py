"""A simulated asynchronous verl run (V1 ``colocate_async`` / ``separate_async``): the trainer consumes, the rollout
produces, weight syncs pause it (issue 50, must-have 5).

The rollout's work is the synchronous model's (:mod:`.simulate`): **dispatch** ``j`` is one batch of sample groups,
simulated as a step of :mod:`.steps` would be, from its dispatch time. Dispatch 0 is the warm-up batch (verl's
one batch ahead, before step 1); step ``s`` dispatches the next batch at its start (the last steps' batches, which
no step of the run trains on, finish after it, as the demo lets them)
and trains on batch ``s - 1``, dispatched ``lookahead`` batches ahead (verl's default 1: the batch of the step before;
2-3 train on older samples, the ``async_stale`` class).

The trainer's step (times from the run's start):

* ``updates`` inner updates (``separate_async``: verl's ``parameter_sync_step``, 1-4; ``colocate_async``: 1), each a
  ``gen`` wait for its share of the batch's groups — in the order they finish (the replay buffer hands over finished
  groups), so a group that hangs holds the update that needs the batch's last groups — then its trainer phases;
* ``update_weights`` with its ``verl.weight_sync``; the step ends a little after it.

The rollout pauses: ``separate_async`` for each weight sync (standalone replicas, aborted and resumed around it:
verl's ``FullyAsyncLLMServerClient`` waits before it resumes, 0.5-1 s); ``colocate_async`` from the end of the
step's sampling (``on_sample_end`` aborts the unfinished requests, the replicas sleep) to the end of its weight
sync. An engine call in flight at a pause's start is aborted there (an attempt with the tokens decoded so far) and
resumed at the pause's end (a second attempt with the rest); a call that would start inside a pause waits for its
end; tool calls, rewards and everything off the engine run on. A request's later moments move by what its calls
waited. Nothing else is coupled: the replicas' speed does not depend on how much is in flight (the synchronous
model's simplification).
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass, field
from typing import Any

from benchmarks.diagnosis.draws import draw_run
from benchmarks.diagnosis.effects import Effects, Plant
from benchmarks.diagnosis.run_model import spread_of
from benchmarks.diagnosis.shape import Shape
from benchmarks.diagnosis.simulate import RequestTimeline, TurnTimeline, WorkerTimeline
from benchmarks.diagnosis.steps import simulate_workers

SEPARATE = "separate_async"
COLOCATE = "colocate_async"
MODES = (SEPARATE, COLOCATE)
UPDATE_PHASES = ("old_log_prob", "ref", "values", "adv", "update_critic", "update_actor")
"""The trainer phases of one inner update, in verl's order (those the run's shape has)."""


@dataclass(frozen=True)
class AsyncShape:
    """What an asynchronous run adds to the rollout's :class:`~.shape.Shape`."""

    mode: str
    updates: int
    """Inner updates a step (``parameter_sync_step``)."""
    lookahead: int
    """Batches dispatched ahead of the one being trained on (verl: 1)."""
    train_ratio: float
    """The trainer's phases a step against the median batch's rollout time (below 1: the trainer waits)."""
    sync_s: float
    """The weight sync's usual seconds."""
    sync_bytes: int
    resume_s: float
    """After a pause, how long before an aborted call is resumed."""


def draw_async_shape(rng: random.Random, mode: str) -> AsyncShape:
    sep = mode == SEPARATE
    return AsyncShape(
        mode=mode,
        updates=rng.choice((1, 2, 4)) if sep else 1,
        lookahead=1,
        train_ratio=math.exp(rng.uniform(math.log(0.5), math.log(1.5))),
        sync_s=0.0,  # set from the rollout's size by build_async (a share of the median step)
        sync_bytes=rng.choice((1, 3, 7, 14)) * 2**30 if sep else 0,
        resume_s=rng.uniform(0.5, 1.0) if sep else rng.uniform(0.02, 0.1),
    )


@dataclass
class Call:
    """One engine call of a request as written: its attempts (start, end, tokens, aborted) in run time."""

    start: float
    end: float
    attempts: list[tuple[float, float, int, bool]]
    arrival: float
    """When the engine got the attempt that finished (its ``llm_request`` starts there)."""


@dataclass
class RealRequest:
    """A request's moments in run time (seconds from the run's start) after the pauses."""

    timeline: RequestTimeline
    shift: list[float]
    """Per turn: how far that turn's moments after its call's start moved (the pauses its calls waited out)."""
    calls: list[Call]
    start: float
    end: float
    base: float
    """The dispatch's start: a timeline moment ``t`` is ``base + t`` before the pauses."""


@dataclass
class Dispatch:
    index: int
    label: int
    """Its ``verl.step`` attribute: the step that dispatched it (the warm-up batch: 1, as verl's ``global_steps``)."""
    start: float
    workers: list[WorkerTimeline]
    requests: dict[tuple[int, int], RealRequest] = field(default_factory=dict)
    worker_ends: list[float] = field(default_factory=list)

    def groups(self) -> dict[tuple[int, int], list[tuple[int, int]]]:
        """(worker, sample index) → its requests' (worker, request index)."""
        out: dict[tuple[int, int], list[tuple[int, int]]] = {}
        for wt in self.workers:
            for i, rq in enumerate(wt.requests):
                out.setdefault((wt.worker, rq.draw.sample_index), []).append((wt.worker, i))
        return out


@dataclass
class Update:
    index: int
    gen: tuple[float, float]
    phases: list[tuple[str, float, float]]
    groups: list[tuple[int, tuple[int, int]]]
    """(dispatch index, group key) consumed."""


@dataclass
class AsyncStep:
    step: int
    start: float
    end: float
    updates: list[Update]
    weights: tuple[float, float]
    """The ``update_weights`` phase."""
    sync: tuple[float, float]
    """Its ``verl.weight_sync`` (the rollout's pause, ``separate_async``)."""
    pause: tuple[float, float]
    dispatched: int | None

    @property
    def duration(self) -> float:
        return self.end - self.start

    @property
    def wait_s(self) -> float:
        return sum(u.gen[1] - u.gen[0] for u in self.updates)


def _in_pause(t: float, pauses: list[tuple[float, float]]) -> tuple[float, float] | None:
    return next(((a, b) for a, b in pauses if a <= t < b), None)


def place_request(rq: RequestTimeline, base: float, pauses: list[tuple[float, float]], resume_s: float) -> RealRequest:
    """``rq`` (moments from ``base``) in run time: engine calls aborted at a pause and resumed after it."""
    shift, calls, off = [], [], 0.0
    for turn in rq.turns:
        call_start = base + turn.call_start + off
        arrival = base + turn.arrival + off
        attempts: list[tuple[float, float, int, bool]] = []
        begin = call_start
        done_tokens = 0
        held = _in_pause(arrival, pauses)
        if held:  # the call waits for the pause's end (the submission gate)
            off += held[1] + resume_s - arrival
            arrival = held[1] + resume_s
        while True:
            end = base + turn.call_end + off
            stop = next((a for a, b in pauses if arrival < a < base + turn.engine_end + off), None)
            if stop is None:
                attempts.append((begin, end, turn.tokens - done_tokens, False))
                break
            first, last = base + turn.first_token + off, base + turn.last_token + off
            frac = min(1.0, max(0.0, (stop - first) / (last - first))) if last > first else 0.0
            tokens = int(turn.tokens * frac) - done_tokens
            abort_end = stop + 0.002
            attempts.append((begin, abort_end, max(0, tokens), True))
            done_tokens += max(0, tokens)
            pause_end = next(b for a, b in pauses if a == stop)
            resumed = pause_end + resume_s
            off += resumed - stop
            begin, arrival = resumed, resumed + turn.draw.before
        calls.append(Call(call_start, attempts[-1][1], attempts, arrival))
        shift.append(off)
    return RealRequest(rq, shift, calls, base + rq.start, base + rq.end + off, base)


@dataclass
class AsyncRun:
    """An asynchronous run as written, with its clean twin's step durations (same interface as :class:`SimRun`
    where the scorers use it)."""

    seed: int
    shape: Shape
    ashape: AsyncShape
    dispatches: list[Dispatch]
    steps: list[AsyncStep]
    clean_steps: list[AsyncStep]
    plants: list[Plant]
    spread: float
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def fmt(self) -> str:
        return self.shape.fmt

    def durations(self, clean: bool = False) -> list[float]:
        return [s.duration for s in (self.clean_steps if clean else self.steps)]

    def truth(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "format": self.fmt,
            "shape": {**self.shape.__dict__, "phases": list(self.shape.phases)},
            "async": self.ashape.__dict__,
            "spread_s": self.spread,
            "clean_durations_s": self.durations(clean=True),
            "durations_s": self.durations(),
            "waits_s": [s.wait_s for s in self.steps],
            "clean_waits_s": [s.wait_s for s in self.clean_steps],
            "plants": [p.as_json() for p in self.plants],
            **self.meta,
        }


@dataclass
class TrainerPlan:
    """What the trainer does each step besides waiting: phase seconds, extra seconds per phase, sync seconds."""

    phase_s: dict[str, float]
    """A phase's usual seconds in one inner update."""
    noise: list[dict[str, float]]
    extra: dict[int, dict[str, float]]
    """step → phase → seconds added to the step's total of that phase (split over its updates)."""
    sync: list[float]
    """Each step's weight sync seconds."""
    gaps: list[tuple[float, float, float, float]]
    """Each step: (step start → its first ``gen``, between phases, tail, the replay buffer's poll lag)."""


def simulate_async(
    shape: Shape, ashape: AsyncShape, draws: list, plan: TrainerPlan, plants: list[Plant]
) -> tuple[list[Dispatch], list[AsyncStep]]:
    """Every dispatch and step of the run with ``plants`` (rollout plants act on their ``step`` = dispatch index;
    trainer plants are in ``plan.extra`` / ``plan.sync``)."""
    n = shape.steps
    by_dispatch: dict[int, list[Plant]] = {}
    for p in plants:
        by_dispatch.setdefault(p.step, []).append(p)
    dispatches: list[Dispatch] = []

    def dispatch(j: int, at: float, label: int) -> None:
        workers = simulate_workers(shape, draws[j], Effects(by_dispatch.get(j, [])))
        dispatches.append(Dispatch(j, label, at, workers))

    pauses: list[tuple[float, float]] = []
    for j in range(ashape.lookahead):
        dispatch(j, 0.05 * j, 1)
    consumed: set[tuple[int, tuple[int, int]]] = set()
    steps: list[AsyncStep] = []
    t = 0.2
    for s in range(1, n + 1):
        lead, gap, tail, poll = plan.gaps[s - 1]
        start = t
        nxt = s - 1 + ashape.lookahead
        dispatched = None
        if nxt < len(draws):
            dispatch(nxt, start + lead * 0.5, s)
            dispatched = nxt
        batch = dispatches[s - 1]
        ends = _group_ends(batch, pauses, ashape.resume_s)
        order = sorted(ends, key=lambda g: ends[g])
        per = math.ceil(len(order) / ashape.updates)
        updates, u_t = [], start + lead
        for u in range(ashape.updates):
            mine = order[u * per : (u + 1) * per]
            if not mine:
                break
            ready = max(ends[g] for g in mine) + poll
            gen = (u_t, max(u_t + 0.005, ready))
            tt, phases = gen[1], []
            for name in (x for x in UPDATE_PHASES if x in plan.phase_s):
                tt += gap
                sec = plan.phase_s[name] * plan.noise[s - 1][name]
                sec += plan.extra.get(s, {}).get(name, 0.0) / ashape.updates
                phases.append((name, tt, tt + sec))
                tt += sec
            updates.append(Update(u, gen, phases, [(s - 1, g) for g in mine]))
            consumed |= {(s - 1, g) for g in mine}
            u_t = tt + 0.002
        w0 = u_t + gap
        sync = (w0 + 0.003, w0 + 0.003 + plan.sync[s - 1])
        weights = (w0, sync[1] + 0.002)
        pause = (sync[0], sync[1]) if ashape.mode == SEPARATE else (updates[-1].gen[1], sync[1])
        pauses.append(pause)
        end = weights[1] + tail
        steps.append(AsyncStep(s, start, end, updates, weights, sync, pause, dispatched))
        t = end + 0.01
    for d in dispatches:  # every request placed with every pause (the last batches finish after the run)
        _group_ends(d, pauses, ashape.resume_s)
    return dispatches, steps


def _group_ends(d: Dispatch, pauses: list[tuple[float, float]], resume_s: float) -> dict[tuple[int, int], float]:
    """Place every request of ``d`` with the pauses known so far; each group's end (its last request's)."""
    d.requests = {}
    for wt in d.workers:
        base = d.start
        for i, rq in enumerate(wt.requests):
            d.requests[(wt.worker, i)] = place_request(rq, base, pauses, resume_s)
    d.worker_ends = [
        max(d.requests[(wt.worker, i)].end for i in range(len(wt.requests))) + wt.finish for wt in d.workers
    ]
    return {g: max(d.requests[r].end for r in rs) for g, rs in d.groups().items()}


def turn_at(req: RealRequest, i: int, t: float) -> float:
    """Turn ``i``'s moment ``t`` (timeline seconds) in run time: before its call as is, after it moved."""
    turn: TurnTimeline = req.timeline.turns[i]
    before = req.shift[i - 1] if i else 0.0
    return req.base + t + (req.shift[i] if t >= turn.call_end else before)


def median_rollout(shape: Shape, draws: list) -> float:
    none = Effects()
    return statistics.median(
        max(max(r.end for r in wt.requests) + wt.finish for wt in simulate_workers(shape, d, none)) for d in draws
    )


def spread_async(durations: list[float]) -> float:
    return spread_of(durations)


__all__ = ["draw_run"]
