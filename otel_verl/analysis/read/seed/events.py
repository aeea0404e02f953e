"""The seed's SGLangLogManager event names and how they map to otel_verl span kinds (both directions).

Per-request events are exported under the names the seed's profiler logged inside
``_async_rollout_a_request`` (``engine_call``, ``tool_execution``, ``tool_parsing``,
``tool_response_processing``, ``reward_calculation``): the seed's plotting scripts
(``top_req_analysis_per_worker_step.py``, ``req_analysis_and_cdf.py``) draw a request's phase bars
from exactly those names. Older seed names (``engine_async_generate``, ``*_duration``) still import.
"""

from __future__ import annotations

from typing import Final

REQUEST_COMPLETE: Final = "async_rollout_request_complete"
REQUEST_ABORTED: Final = "aborted_request_with_cancelled_error"
WORKER_ROLLOUT: Final = "async_rollout_with_monitoring_duration"
BARRIER: Final = "barrier_wait_duration"
ENGINE: Final = "engine_async_generate"
PREPROCESS: Final = "preprocessing_duration"
REWARD: Final = "reward_calculation_duration"
TOOL: Final = "tool_call_duration"
TOOL_PARSE: Final = "tool_parse_duration"

# Per-request phase events of the seed profiler (the keys of its scripts' PHASE_COLORS).
ENGINE_CALL: Final = "engine_call"
TOOL_EXECUTION: Final = "tool_execution"
TOOL_PARSING: Final = "tool_parsing"
TOOL_RESPONSE: Final = "tool_response_processing"
REWARD_CALCULATION: Final = "reward_calculation"
TOOL_CALLING_STATE: Final = "tool_calling_state"
"""Seed wrapper around tool execution + response processing: imported as a generic span, not a tool."""

ENGINE_NAMES: Final = frozenset(
    {
        ENGINE,
        ENGINE_CALL,
        "turn_engine_call",
        "engine_async_generate_actual",
        "async_generate_duration",
        "engine_generate_duration",
    }
)
# The seed logger's per-worker-step phases (``_req_level_generate_sequences``), one line each per worker-step.
ASYNC_GENERATE: Final = "async_generate_duration"
TOTAL_STEP: Final = "total_step_duration"
WORKER_STEP_EVENTS: Final = (PREPROCESS, ASYNC_GENERATE, BARRIER, TOTAL_STEP)
"""The four per-worker-step events the seed's step scripts read (overview, per-step bars, event shares)."""

# The seed logger's per-turn events (``_async_rollout_a_request``, "added for each turn"; also ``turn_tool_parsing``
# and ``turn_post_process``, which :func:`kind_of` names by its rules: tool_parse, other).
TURN_END: Final = "turn_end"
TURN_ENGINE: Final = "turn_engine_call"
TURN_PRE_PROCESS: Final = "turn_pre_process"
ENGINE_ACTUAL: Final = "engine_async_generate_actual"
FINISH_REASON_PREFIX: Final = "FinishReasonTypeEnum."
"""The seed writes ``str(FinishReasonTypeEnum.STOP)``; its scripts keep what follows the last dot."""

SEED_KINDS: Final = {
    TURN_END: "turn",
    TURN_PRE_PROCESS: "preprocess",
    "tool_creation_pending_state": "other",
    "interaction_start_pending_state": "other",
    "engine_generate_setup": "other",
}
"""Seed events whose kind the name rules below would get wrong (a turn's total, tool *creation*)."""

PREPROCESS_KIND_OF: Final = {TOOL_RESPONSE: "merge_context"}
"""Seed events that are a kind of otel_verl preprocess, with the ``verl.preprocess.kind`` they stand for."""


def kind_of(event: str) -> str:
    """Span kind for a seed event name; ``other`` keeps unknown events as generic spans."""
    if event in SEED_KINDS:
        return SEED_KINDS[event]
    if event == REQUEST_COMPLETE:
        return "request"
    if event == REQUEST_ABORTED:
        return "aborted"
    if event == WORKER_ROLLOUT:
        return "worker"
    if event == BARRIER:
        return "barrier"
    if event in ENGINE_NAMES:
        return "engine"
    if event.startswith("preprocess") or event in PREPROCESS_KIND_OF:
        return "preprocess"
    if event == TOOL_CALLING_STATE:
        return "other"
    if "reward" in event:
        return "reward"
    if "tool_parse" in event or "tool_parsing" in event or "parse_tool" in event:
        return "tool_parse"
    if "tool" in event:
        return "tool"
    return "other"


EXPORT_NAME: Final = {
    "engine": ENGINE_CALL,
    "preprocess": PREPROCESS,
    "reward": REWARD_CALCULATION,
    "tool": TOOL_EXECUTION,
    "tool_parse": TOOL_PARSING,
    "barrier": BARRIER,
    "worker": WORKER_ROLLOUT,
}
"""Span kind → exported event name; a ``merge_context`` preprocess is exported as :data:`TOOL_RESPONSE`."""
