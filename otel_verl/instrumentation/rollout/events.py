"""Turns and events inside a trajectory (``full`` detail): GENERATING-state turns, preprocess and tool-parse events.

Each entry into ``ToolAgentLoop``'s GENERATING state opens a turn; verl's token-building helpers
(``ct_build_initial_tokens``/``ct_merge_*``) are ``verl.preprocess`` events and each tool parser's
``extract_tool_calls`` a ``verl.tool.parse`` event, under the running turn.
"""

from __future__ import annotations

import logging
from typing import Any

from otel_verl import semconv
from otel_verl.recording.recorder import current_request
from otel_verl.wrapping.registry import coroutine_wrapper

logger = logging.getLogger(__name__)


@coroutine_wrapper
def generating_state_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Each entry into the GENERATING state starts a new turn (verl awaits the call at once)."""
    recorder = current_request.get()
    if recorder is not None:
        try:
            recorder.open_turn()
        except Exception:
            logger.debug("otel_verl: turn could not open", exc_info=True)
    return wrapped(*args, **kwargs)


def preprocess_wrapper(kind: str):
    """A wrapper recording one ``verl.preprocess`` event of ``kind`` inside the current request.

    No ``enabled()`` check here, nor in the tool-parse wrapper: a trajectory has a recorder only when it
    started outside ``suppress_instrumentation``, and these seams are verl's own code, never user code.
    """
    attributes = {semconv.VERL_PREPROCESS_KIND: kind}

    @coroutine_wrapper
    def wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
        recorder = current_request.get()
        if recorder is None or not recorder.events:
            return wrapped(*args, **kwargs)
        # a literal copy, not dict(): a dict made by calling dict() starts tracked by the cyclic GC, and
        # only a full collection would untrack it (and the recorded event holding it)
        return recorder.timed(semconv.SPAN_PREPROCESS, {**attributes}, wrapped(*args, **kwargs))

    return wrapper


@coroutine_wrapper
def tool_parse_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    recorder = current_request.get()
    if recorder is None or not recorder.events:
        return wrapped(*args, **kwargs)
    attributes = {semconv.VERL_TOOL_PARSER: type(instance).__name__}
    return recorder.timed(semconv.SPAN_TOOL_PARSE, attributes, wrapped(*args, **kwargs), _tool_call_count)


def _tool_call_count(result: Any) -> dict[str, int]:
    """``extract_tool_calls`` returns ``(text, tool_calls)``."""
    calls = result[1] if isinstance(result, tuple) and len(result) > 1 else None
    return {semconv.VERL_TOOL_CALL_COUNT: len(calls) if calls is not None else 0}
