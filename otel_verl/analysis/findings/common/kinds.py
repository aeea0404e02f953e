"""Every name the diagnosis writes, in one place: the parts of a step's account and the kinds of finding.

Why one module: findings.json, the report, the verdict, the accuracy benchmark and the tests all match on
these strings; a renamed kind is a one-line change here (as :mod:`otel_verl.semconv` does for span names).

A step's **account** (findings.json ``steps[].parts[].kind``) splits its wall time into parts; a **finding**
(``findings[].kind``) is a part that moved, named by what moved. Parts and findings are told apart on purpose:
``decode`` time is one part of the account, and its excess is a ``long_response`` (more tokens than usual) or a
``slow_decode`` (more seconds per token than usual) finding.
"""

from __future__ import annotations

from typing import Final

# ---------------------------------------------------------------- parts of a step's account
PART_PHASE: Final = "phase"
"""A trainer phase other than the rollout (``phase`` says which: old_log_prob, ref, update_actor, testing …)."""
PART_OUTSIDE_PHASES: Final = "outside_phases"
"""Step time inside no phase span (the trainer's own bookkeeping, logging, data loading between phases)."""
PART_ROLLOUT_OVERHEAD: Final = "rollout_overhead"
"""Rollout phase time outside the critical worker's span: dispatching the batch, gathering the outputs."""
PART_START: Final = "start"
"""From the critical worker's start to its request's start: preprocessing, data, the agent loop's setup."""
PART_PREPROCESS: Final = "preprocess"
"""Chat template / tokenisation inside the request (``verl.preprocess``)."""
PART_ENGINE_BEFORE: Final = "engine_before"
"""From our engine call's start to the engine receiving it (Ray hops, the load balancer): needs engine spans."""
PART_ENGINE_QUEUE: Final = "engine_queue"
"""Queued in the engine's scheduler (the engine's own account)."""
PART_PREFILL: Final = "prefill"
PART_DECODE: Final = "decode"
"""Decoding: tokens × seconds per token (split into :data:`LONG_RESPONSE` and :data:`SLOW_DECODE` when it moved)."""
PART_ENGINE_OTHER: Final = "engine_other"
"""The engine's own time that is neither queue, prefill nor decode (input processing, detokenisation)."""
PART_ENGINE_AFTER: Final = "engine_after"
"""From the engine's end to our call's end: the answer's way back, and the worker taking it (a worker whose event
loop or process is held takes it late: a stall)."""
PART_ENGINE: Final = "engine"
"""An engine call with no engine spans and no token count to split it by."""
PART_TOOL_PARSE: Final = "tool_parse"
PART_TOOL: Final = "tool"
PART_REWARD: Final = "reward"
PART_GAP: Final = "gap"
"""Request time covered by none of its spans: between turns, after the last one."""
PART_PAUSE: Final = "pause"
"""Asynchronous trainers: request time covered by none of its spans while the rollout was paused (a weight sync, an
aborted call waiting for its resume): the sync's cost to the rollout, never an anomaly
(:mod:`otel_verl.analysis.findings.steps.paused_gaps`)."""
PART_STALL: Final = "stall"
"""Requests in flight and nothing moving on the worker (no span started or ended)."""
PART_FINISH: Final = "finish"
"""From the last request's end to the worker's end (post-processing the worker's outputs)."""

ROLLOUT_PARTS: Final = (
    PART_ROLLOUT_OVERHEAD,
    PART_START,
    PART_PREPROCESS,
    PART_ENGINE_BEFORE,
    PART_ENGINE_QUEUE,
    PART_PREFILL,
    PART_DECODE,
    PART_ENGINE_OTHER,
    PART_ENGINE_AFTER,
    PART_ENGINE,
    PART_TOOL_PARSE,
    PART_TOOL,
    PART_REWARD,
    PART_GAP,
    PART_PAUSE,
    PART_STALL,
    PART_FINISH,
)
"""The rollout's parts along its critical path, in time order."""
STEP_PARTS: Final = (PART_PHASE, PART_OUTSIDE_PHASES, *ROLLOUT_PARTS)

# ---------------------------------------------------------------- finding kinds: causes (a part that moved)
SLOW_PHASE: Final = "slow_phase"
"""A trainer phase took longer than usual (``details.phase``: update_actor, old_log_prob, update_weights …)."""
SLOW_OUTSIDE_PHASES: Final = "slow_outside_phases"
SLOW_ROLLOUT_OVERHEAD: Final = "slow_rollout_overhead"
SLOW_START: Final = "slow_start"
"""A worker started its requests late (its own preprocessing, data)."""
SLOW_PREPROCESS: Final = "slow_preprocess"
ENGINE_WAIT: Final = "engine_wait"
"""Time before the engine got the request (Ray hops, load balancer)."""
ENGINE_QUEUE: Final = "engine_queue"
SLOW_PREFILL: Final = "slow_prefill"
SLOW_DECODE: Final = "slow_decode"
"""More seconds per token than usual: a slow engine."""
LONG_RESPONSE: Final = "long_response"
"""More tokens than usual at the usual rate: the case for partial rollout (seed 004)."""
SLOW_ENGINE: Final = "slow_engine"
"""A slow engine call that neither token counts nor engine spans split further."""
SLOW_TOOL_PARSE: Final = "slow_tool_parse"
SLOW_TOOL: Final = "slow_tool"
SLOW_REWARD: Final = "slow_reward"
SLOW_GAP: Final = "slow_gap"
"""Requests idle between their spans (between turns, after the last one) longer than usual."""
STALL: Final = "stall"
SLOW_FINISH: Final = "slow_finish"

CAUSE_OF_PART: Final = {
    PART_PHASE: SLOW_PHASE,
    PART_OUTSIDE_PHASES: SLOW_OUTSIDE_PHASES,
    PART_ROLLOUT_OVERHEAD: SLOW_ROLLOUT_OVERHEAD,
    PART_START: SLOW_START,
    PART_PREPROCESS: SLOW_PREPROCESS,
    PART_ENGINE_BEFORE: ENGINE_WAIT,
    PART_ENGINE_QUEUE: ENGINE_QUEUE,
    PART_PREFILL: SLOW_PREFILL,
    PART_ENGINE_OTHER: SLOW_ENGINE,
    PART_ENGINE_AFTER: STALL,
    PART_ENGINE: SLOW_ENGINE,
    PART_TOOL_PARSE: SLOW_TOOL_PARSE,
    PART_TOOL: SLOW_TOOL,
    PART_REWARD: SLOW_REWARD,
    PART_GAP: SLOW_GAP,
    PART_STALL: STALL,
    PART_FINISH: SLOW_FINISH,
}
"""The finding a part's excess is told as (decode is split: :data:`LONG_RESPONSE` / :data:`SLOW_DECODE`)."""

# ---------------------------------------------------------------- patterns across steps and peers (:mod:`.patterns`)
STRAGGLER: Final = "straggler"
"""A worker or replica slower than its peers at the same work in most steps: told once, with what it costs a step
(``details.part``/``metric`` say which work, ``details.per_step`` the seconds)."""
TREND: Final = "trend"
"""Step time (or a part of it) moving over the run, split into ``details.side`` ``behaviour`` (tokens, turns, tool
calls per request: the policy changed) and ``infrastructure`` (seconds per token, queueing, tool latency: the system
changed), with each side's share."""
BEHAVIOUR_SHIFT: Final = "behaviour_shift"
"""One step where the policy behaved differently (many more tokens, turns or tool calls per request than the run's
other steps): the step is slow because it had more to do, not because the system was slower."""
PATTERNS: Final = (STRAGGLER, TREND, BEHAVIOUR_SHIFT)

SIDE_BEHAVIOUR: Final = "behaviour"
SIDE_INFRASTRUCTURE: Final = "infrastructure"

CAUSES: Final = (*dict.fromkeys(CAUSE_OF_PART.values()), SLOW_DECODE, LONG_RESPONSE, *PATTERNS)

# ---------------------------------------------------------------- finding kinds: information and data quality
LONG_TAIL: Final = "long_tail"
"""Information, once per run: the barrier's share of rollout time, where the tail comes from, what
over-sampling and partial rollout would have saved and cost."""
ABORTED_WASTE: Final = "aborted_waste"
"""Time and tokens spent on requests that were aborted (over-sampling)."""
MISSING_WORKER: Final = "missing_worker"
"""A worker rank seen in other steps sent nothing in this one."""
INCOMPLETE_WORKER: Final = "incomplete_worker"
"""Request spans whose worker span never arrived (a worker died mid-step)."""
ENGINE_ORPHANS: Final = "engine_orphans"
"""Engine spans with none of our engine calls as parent."""
MISSING_DATA: Final = "missing_data"
"""What the input lacked: skipped bad lines, steps without workers or requests."""
GENERATION_BOUND: Final = "generation_bound"
"""Asynchronous trainers, once per run: the trainer idled waiting for samples more than the rollout idled
(generation is the bottleneck; :mod:`.bound`)."""
TRAIN_BOUND: Final = "train_bound"
"""Asynchronous trainers, once per run: the rollout idled (paused for weight syncs, asleep, or done with every group
it was given) more than the trainer waited (training is the bottleneck)."""

INFORMATION: Final = (
    LONG_TAIL,
    ABORTED_WASTE,
    MISSING_WORKER,
    INCOMPLETE_WORKER,
    ENGINE_ORPHANS,
    MISSING_DATA,
    GENERATION_BOUND,
    TRAIN_BOUND,
)

# ---------------------------------------------------------------- where a cause moved (``details.scope``)
SCOPE_STEP: Final = "step"
"""Every worker (the median worker moved too): the step's cause, told once."""
SCOPE_WORKER: Final = "worker"
SCOPE_REPLICA: Final = "replica"
SCOPE_SAMPLE: Final = "sample"
"""All (or most) rollouts of one prompt (a sample group)."""
SCOPE_REQUEST: Final = "request"
SCOPE_PHASE: Final = "phase"
"""A trainer phase: the trainer process, not a worker."""

SEVERITIES: Final = ("critical", "warning", "info")
