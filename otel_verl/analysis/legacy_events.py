"""The seed's SGLangLogManager event names and how they map to otel_verl span kinds (both directions)."""

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

ENGINE_NAMES: Final = frozenset({ENGINE, "async_generate_duration", "engine_generate_duration"})


def kind_of(event: str) -> str:
    """Span kind for a seed event name; ``other`` keeps unknown events as generic spans."""
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
    if event.startswith("preprocess"):
        return "preprocess"
    if "reward" in event:
        return "reward"
    if "tool_parse" in event or "parse_tool" in event:
        return "tool_parse"
    if "tool" in event:
        return "tool"
    return "other"


EXPORT_NAME: Final = {
    "engine": ENGINE,
    "preprocess": PREPROCESS,
    "reward": REWARD,
    "tool": TOOL,
    "tool_parse": TOOL_PARSE,
    "barrier": BARRIER,
    "worker": WORKER_ROLLOUT,
}
