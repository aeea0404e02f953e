"""Every random number of an undisturbed run, drawn once, before anything is planted.

Why apart from the simulation: a planted cause must change nothing but itself. The simulation
(:mod:`.simulate`, :mod:`.steps`) is a pure function of these draws and the plants, so a run and its
clean twin share every draw and differ only by the plant, and a plant's cost is the difference of two
deterministic timelines.
"""

from __future__ import annotations

import math
import random
import uuid
from dataclasses import dataclass

from benchmarks.diagnosis.shape import Shape
from benchmarks.gen_seed_logs import draw_tail


@dataclass(slots=True)
class TurnDraw:
    """One turn: its engine call, tool-call parsing and (not on the last turn) a tool call and the merge of
    its answer. Seconds unless said otherwise."""

    pre: float
    """Turn 0: the initial prompt's preprocessing; later turns: the loop's own step before the call."""
    tokens: int
    """Tokens the engine call decodes (capped at the run's max_tokens: then the call is truncated)."""
    rate: float
    """This call's seconds per token against the run's (mild jitter)."""
    before: float
    """Our call's start → the engine received it (Ray hops, load balancer)."""
    queue: float
    prefill_jitter: float
    engine_other: float
    after: float
    parse: float
    post: float
    tool: float | None
    merge: float
    tool_tokens: int


@dataclass(slots=True)
class RequestDraw:
    request_id: str
    index: int
    """Position in its worker's chunk."""
    sample_index: int
    """Dataset index of its prompt (one per sample group, unique in the run)."""
    rollout_index: int
    replica: int
    submit: float
    """Seconds after the worker's preprocessing that the request's task starts."""
    prompt_tokens: int
    pending: float
    turns: list[TurnDraw]
    reward: float
    finalization: float
    score: float
    actual_share: float


@dataclass(slots=True)
class WorkerDraw:
    dispatch: float
    """The step's ``gen`` phase start → this worker's span start."""
    start: float
    """Its preprocessing of the batch before the first request."""
    finish: float
    sorting: float
    tail: list[float]
    """Seed format: the worker-step's events after the barrier."""
    requests: list[RequestDraw]


@dataclass(slots=True)
class StepDraw:
    step: int
    workers: list[WorkerDraw]
    lead: float
    """Step start → ``gen`` start (the trainer's own work before the rollout)."""
    gather: float
    phase_noise: dict[str, float]
    phase_gaps: list[float]
    tail: float
    between: float
    """This step's end → the next step's start (outside any step)."""
    release: float
    """Seed format: the last worker's barrier → every worker's release."""


def _turn_count(rng: random.Random, shape: Shape) -> int:
    weights = [k**-shape.turn_alpha for k in range(1, shape.max_turns + 1)]
    return rng.choices(range(1, shape.max_turns + 1), weights=weights)[0]


def _turn(rng: random.Random, shape: Shape, index: int, last: bool) -> TurnDraw:
    tokens = int(rng.lognormvariate(math.log(shape.tokens_median), shape.tokens_sigma)) + 1
    tool = None if last else min(60.0, rng.lognormvariate(math.log(shape.tool_median), shape.tool_sigma))
    return TurnDraw(
        pre=rng.lognormvariate(math.log(0.03), 0.4) if index == 0 else rng.uniform(1e-4, 2e-3),
        tokens=min(tokens, shape.max_tokens),
        rate=rng.lognormvariate(0, 0.1),
        before=rng.lognormvariate(math.log(0.003), 0.4),
        queue=rng.lognormvariate(math.log(shape.queue_median), 0.8),
        prefill_jitter=rng.lognormvariate(0, 0.2),
        engine_other=rng.uniform(2e-4, 2e-3),
        after=rng.lognormvariate(math.log(0.002), 0.4),
        parse=rng.lognormvariate(math.log(0.001), 0.4),
        post=rng.uniform(1e-4, 1e-3),
        tool=tool,
        merge=rng.lognormvariate(math.log(0.015), 0.4) if tool is not None else 0.0,
        tool_tokens=rng.randint(20, 200),
    )


def _request(rng: random.Random, shape: Shape, index: int, sample: int) -> RequestDraw:
    n_turns = _turn_count(rng, shape)
    turns: list[TurnDraw] = []
    for i in range(n_turns):
        turn = _turn(rng, shape, i, i == n_turns - 1)
        turns.append(turn)
        if turn.tokens >= shape.max_tokens:  # ran to max_tokens: the trajectory ends here
            turn.tool, turn.merge = None, 0.0
            break
    return RequestDraw(
        request_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        index=index,
        sample_index=sample,
        rollout_index=index % shape.rollout_n,
        replica=rng.randrange(shape.replicas),
        submit=index * rng.uniform(5e-4, 3e-3) + rng.uniform(0, 2e-3),
        prompt_tokens=rng.randint(200, 1500),
        pending=rng.uniform(1e-3, 2e-2),
        turns=turns,
        reward=rng.lognormvariate(math.log(shape.reward_median), 0.5),
        finalization=rng.uniform(1e-4, 1e-3),
        score=float(rng.random() < 0.6),
        actual_share=rng.uniform(0.8, 1.0),
    )


def draw_step(rng: random.Random, shape: Shape, step: int) -> StepDraw:
    workers = []
    for w in range(shape.workers):
        first_sample = ((step - 1) * shape.workers + w) * shape.prompts
        requests = [
            _request(rng, shape, i, first_sample + i // shape.rollout_n) for i in range(shape.requests_per_worker)
        ]
        workers.append(
            WorkerDraw(
                dispatch=rng.uniform(0.01, 0.08),
                start=shape.start_s * rng.uniform(0.7, 1.3),
                finish=rng.uniform(0.005, 0.05),
                sorting=rng.uniform(1e-5, 1e-4),
                tail=draw_tail(rng),
                requests=requests,
            )
        )
    names = (*shape.phases, "testing")
    return StepDraw(
        step=step,
        workers=workers,
        lead=rng.uniform(0.05, 0.3),
        gather=rng.uniform(0.02, 0.2),
        phase_noise={name: rng.lognormvariate(0, shape.phase_sigma) for name in names},
        phase_gaps=[rng.uniform(0.005, 0.05) for _ in names],
        tail=rng.uniform(0.02, 0.1),
        between=rng.uniform(0.05, 0.5),
        release=rng.uniform(1e-3, 1e-2),
    )


def draw_run(rng: random.Random, shape: Shape) -> list[StepDraw]:
    """Every step's draws (steps numbered from 1)."""
    return [draw_step(rng, shape, step) for step in range(1, shape.steps + 1)]
