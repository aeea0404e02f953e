"""The demo's planted problems: the keys of a step's plan, the ready-made ``--plant`` problems, and which step
gets which plan.

A *plan* is one step's planted slowness, ``DemoOptions.step_plants[step]``: a dict whose keys are below. Each
key is applied where the demo's real or simulated part does that work, so the planted time shows up in the
span that covers it and in no other:

========================  =================================  ============================================
key                        value                              where the time goes
========================  =================================  ============================================
``stall``                  {prompt index: s}                  its rollouts' first engine call stalls (sim engine)
``slow_turn``              {prompt index: (turn, s[, where])}  that turn's engine call (sim engine)
``slow_reward``            {prompt index: s}                  its rollouts' rewards (reward actor)
``slow_tool``              {prompt index: s}                  each calculator call of its rollouts (verl's
                                                              ``tools_kwargs``)
``slow_phase``             {trainer phase: s}                 that trainer phase, once in the step (the
                                                              trainer's stand-in compute)
``slow_start``             {worker rank: s}                   the worker prepares its chunk ``s`` longer
                                                              before its first request (the demo's worker)
``long_response``          {prompt index: tokens}             each rollout of the prompt decodes ``tokens``
                                                              tokens on its first turn (sim engine)
``step_slow_decode``       k (float)                          every engine call decodes at k× the usual
                                                              seconds per token (sim engine)
``step_slow_reward``       s (float)                          every reward of the step takes ``s`` more
``slow_replica``           {replica rank: k}                  that replica decodes at k× the usual seconds
                                                              per token (sim engine; 2 replicas or more)
========================  =================================  ============================================

Steps without a plan run clean. The sim-engine keys need ``engine="sim"``. Most ready-made problems are one
step's plan (:data:`READY_MADE`); a growing one is a plan in every step (:data:`GROWING`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

STALL: Final = "stall"
SLOW_TURN: Final = "slow_turn"
SLOW_REWARD: Final = "slow_reward"
SLOW_TOOL: Final = "slow_tool"
SLOW_PHASE: Final = "slow_phase"
SLOW_START: Final = "slow_start"
LONG_RESPONSE: Final = "long_response"
STEP_SLOW_DECODE: Final = "step_slow_decode"
STEP_SLOW_REWARD: Final = "step_slow_reward"
SLOW_REPLICA: Final = "slow_replica"
KEYS: Final = (
    STALL,
    SLOW_TURN,
    SLOW_REWARD,
    SLOW_TOOL,
    SLOW_PHASE,
    SLOW_START,
    LONG_RESPONSE,
    STEP_SLOW_DECODE,
    STEP_SLOW_REWARD,
    SLOW_REPLICA,
)
ENGINE_KEYS: Final = (STALL, SLOW_TURN, LONG_RESPONSE, STEP_SLOW_DECODE, SLOW_REPLICA)
"""Keys the simulated engine applies (not available with ``engine="vllm"``)."""

PLANT_STEP: Final = 2
"""The step every ready-made plant goes into (the demo's default run has 3 steps)."""

READY_MADE: Final[dict[str, tuple[dict[str, Any], str]]] = {
    "stall": (
        {STALL: {3: 20.0}},
        "the 4 rollouts of prompt 3 stall 20 s on their first engine call, so worker 0 stalls mid-rollout "
        "and the others wait at the barrier (a straggler)",
    ),
    "slow-phase": ({SLOW_PHASE: {"update_actor": 8.0}}, "the trainer's update_actor phase takes 8 s more"),
    "slow-start": (
        {SLOW_START: {1: 8.0}},
        "worker 1 prepares its chunk 8 s longer: its span starts on time, its first request 8 s late",
    ),
    "long-response": (
        {LONG_RESPONSE: {5: 15000}},
        "the rollouts of prompt 5 decode 15000 tokens on their first turn (~6 s: 0.4 ms a token once the "
        "step's other rollouts are done, 0.8 ms while all 64 decode at once)",
    ),
    "step-slow-decode": ({STEP_SLOW_DECODE: 8.0}, "every engine call of the step decodes 8x slower per token"),
    "step-slow-reward": ({STEP_SLOW_REWARD: 4.0}, "every reward of the step takes 4 s more"),
}
"""``--plant NAME``: (the plan put into step :data:`PLANT_STEP`, what it does). Prompts 0-7 run on worker 0
and 8-15 on worker 1 in the default run (16 prompts, 2 workers)."""


SLOW_REPLICA_FACTOR: Final = 25.0
"""``slow-replica``: how many times slower replica 1 decodes per token (the demo's calls decode ~150 tokens at
0.4 ms: ~1.5 s more a call, several seconds a multi-turn request, well above a loaded machine's noise)."""
GROWTH_S: Final = 0.6
"""``growing-sync``: seconds the weight sync grows by each step."""

GROWING: Final[dict[str, tuple[Callable[[int], dict[str, Any]], str]]] = {
    "slow-replica": (
        lambda step: {SLOW_REPLICA: {1: SLOW_REPLICA_FACTOR}},
        f"replica 1 of 2 (the demo runs 2 for it) decodes {SLOW_REPLICA_FACTOR:.0f}x "
        "slower per token: the rollouts it serves come late and the trainer waits for them",
    ),
    "growing-sync": (
        lambda step: {SLOW_PHASE: {"update_weights": GROWTH_S * (step - 1)}},
        f"the weight sync grows by {GROWTH_S} s every step (step 8: +4.2 s, about 15x the demo's 0.3 s; a run of 7 "
        "steps or more tells it as the weight sync's trend, fewer as a slow weight sync in its last steps)",
    ),
}
"""``--plant NAME`` whose problem lasts or grows over the run, from step :data:`PLANT_STEP` on: (the plan of each
step, what it does)."""

NEEDS_REPLICAS: Final = {"slow-replica": 2}
"""Ready-made problems that need this many engine replicas (the demo raises ``--replicas`` to it)."""


def names() -> list[str]:
    """Every ``--plant`` name."""
    return [*READY_MADE, *GROWING]


def ready_made(names: list[str], steps: int = PLANT_STEP) -> dict[int, dict[str, Any]]:
    """``step_plants`` for the ready-made problems ``names``: the one-step ones merged into one plan of
    :data:`PLANT_STEP`, the lasting and growing ones into every step's plan from there up to ``steps``."""
    plans: dict[int, dict[str, Any]] = {}
    for name in names:
        per_step = [(PLANT_STEP, READY_MADE[name][0])] if name in READY_MADE else []
        if name in GROWING:
            per_step = [(s, GROWING[name][0](s)) for s in range(PLANT_STEP, steps + 1)]
        for step, part in per_step:
            plan = plans.setdefault(step, {})
            for key, value in part.items():
                plan[key] = {**plan[key], **value} if isinstance(value, dict) and key in plan else value
    return plans


def step_plan(opts: Any, step: int) -> tuple[bool, dict[str, Any] | None]:
    """(planted slowness on in ``step``, the step's own plan or None).

    With ``opts.step_plants`` set, a step runs its plan or clean; else the per-sample knobs of
    :class:`~otel_verl.demo.options.DemoOptions` apply in ``opts.slow_step`` (every step when None)."""
    if opts.step_plants:
        plan = opts.step_plants.get(step)
        return plan is not None, plan
    return opts.slow_step is None or opts.slow_step == step, None


def longest_response(opts: Any) -> int:
    """The most tokens any planted long response decodes (0: none planted)."""
    return max((int(t) for plan in opts.step_plants.values() for t in plan.get(LONG_RESPONSE, {}).values()), default=0)


def phase_extra(plan: dict[str, Any] | None, phase: str) -> float:
    """Planted extra seconds of trainer ``phase`` in this step's plan."""
    return float((plan or {}).get(SLOW_PHASE, {}).get(phase, 0.0))
