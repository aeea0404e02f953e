"""``execute_tool <name>`` per tool call, wrapping ``ToolAgentLoop._call_tool``.

``BaseTool.execute`` is overridden by tool subclasses without ``super()``, so the one call site in
the agent loop is the seam. Tool arguments are recorded only with OTEL_VERL_CAPTURE_CONTENT, capped.
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import context as otel_context

from otel_verl import semconv
from otel_verl.content import capture_text
from otel_verl.export import tracing
from otel_verl.recording.recorder import current_request
from otel_verl.wrapping.registry import enabled
from otel_verl.wrapping.signatures import call_failed

logger = logging.getLogger(__name__)

TOOL_AGENT_MODULE = "verl.experimental.agent_loop.tool_agent_loop"
CALL_TOOL = (TOOL_AGENT_MODULE, "ToolAgentLoop._call_tool")


def _attributes(tool_call: Any) -> dict[str, Any]:
    name = getattr(tool_call, "name", None)
    attributes: dict[str, Any] = {semconv.GEN_AI_OPERATION_NAME: semconv.GEN_AI_OP_EXECUTE_TOOL}
    if isinstance(name, str):
        attributes[semconv.GEN_AI_TOOL_NAME] = name
    call_id = getattr(tool_call, "tool_call_id", None)
    if isinstance(call_id, str):
        attributes[semconv.GEN_AI_TOOL_CALL_ID] = call_id
    config = tracing.current_config()
    arguments = getattr(tool_call, "arguments", None)
    if config.capture_content and isinstance(arguments, str):
        captured = capture_text(arguments, config)
        if captured is not None:
            attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS] = captured
    return attributes


async def call_tool_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    recorder = current_request.get()
    if recorder is None or not enabled():
        return await wrapped(*args, **kwargs)
    node = None
    try:
        tool_call = args[0] if args else kwargs.get("tool_call")
        attributes = _attributes(tool_call)
        node = recorder.start(semconv.tool_span_name(attributes.get(semconv.GEN_AI_TOOL_NAME)), attributes=attributes)
    except Exception:
        call_failed(CALL_TOOL)
    token = None
    try:
        if node is not None:  # spans the tool makes (HTTP clients, threads, to_thread) nest under execute_tool
            token = otel_context.attach(recorder.otel_context(node))
    except Exception:
        logger.debug("otel_verl: tool context not attached", exc_info=True)
    try:
        call = wrapped(*args, **kwargs)
        del wrapped, args, kwargs  # not kept alive (and on the GC's lists) while the tool runs
        result = await call
    except BaseException as exc:
        if node is not None:
            recorder.end(node, error=exc)
        raise
    finally:
        if token is not None:
            otel_context.detach(token)
    if node is not None:
        try:
            response = result[0] if isinstance(result, tuple) and result else None
            text = getattr(response, "text", None) or ""
            # verl turns tool exceptions into an error message; keep that visible as error.type.
            if (
                text.startswith("Error executing tool")
                or text.startswith("Unknown function")
                or text.startswith("Invalid JSON")
            ):
                recorder.fail(node, "tool_error")
            recorder.end(node)
        except Exception:
            recorder.end(node)
    return result
