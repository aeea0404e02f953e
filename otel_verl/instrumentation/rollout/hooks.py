"""The user's hooks on the request span, as OpenTelemetry's instrumentations take them.

``VerlInstrumentor().instrument(request_hook=..., response_hook=...)``, like ``request_hook(span, request)``
and ``response_hook(span, request, response)`` of the HTTP instrumentations:

- ``request_hook(span, inputs)``: when a trajectory's ``verl.rollout.request`` span starts, before verl's
  agent loop runs. ``inputs`` is a new dict of ``AgentLoopWorker._run_agent_loop``'s arguments by name:
  ``sampling_params``, ``trajectory`` (step, sample_index, rollout_n, validate), ``agent_name`` and the
  dataset row's fields (``raw_prompt``, ``tools_kwargs``, ...).
- ``response_hook(span, inputs, output)``: when it ends, after verl's agent loop and postprocess returned,
  before otel_verl sets the request's status; ``output`` is ``_run_agent_loop``'s result (None when it raised:
  the span's ``error.type`` says what).

``span`` is an ``opentelemetry.trace.Span`` standing for the request span (:class:`RequestSpan`): attributes
set on it are exported with the request; its context is the request's. The request span is recorded, not an SDK
span, and its name, status and end are otel_verl's (the analyzer reads them): ``update_name``,
``set_status``, ``add_event``, ``record_exception`` and ``end`` do nothing.

Why no turn or engine-call hook: below ``full`` detail turns are counted, not recorded, and at ``full`` they are
tuples on the rollout's hot path (:mod:`otel_verl.recording.recorder`); a span object per turn for a hook would
cost every run. A hook that wants per-turn data reads it from ``output`` (verl's ``num_turns``,
``response_ids``...). Hooks are called on the rollout's event loop: they must be quick and must not block.

Hooks run only where a request is recorded (detail ``worker`` and above) and in the process whose
``instrument()`` was given them (in a Ray run: a ``worker_process_setup_hook`` of the user's). A hook that
raises is logged once and never changes what verl does or what otel_verl records.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanContext, TraceFlags
from opentelemetry.util.types import AttributeValue

from otel_verl.recording.recorder import RequestRecorder

logger = logging.getLogger(__name__)

RequestHook = Callable[[trace.Span, Mapping[str, Any]], None]
ResponseHook = Callable[[trace.Span, Mapping[str, Any], Any], None]

_request_hook: RequestHook | None = None
_response_hook: ResponseHook | None = None
_warned: set[str] = set()

_ARGUMENTS = ("sampling_params", "trajectory")
"""``_run_agent_loop``'s positional parameters (after ``self``); the rest are keyword-only."""


def set_hooks(request_hook: RequestHook | None, response_hook: ResponseHook | None) -> None:
    """The hooks of this process (None: none); non-callables are refused with a warning."""
    global _request_hook, _response_hook
    _request_hook = _callable_or_none("request_hook", request_hook)
    _response_hook = _callable_or_none("response_hook", response_hook)
    _warned.clear()


def _callable_or_none(name: str, hook: Any) -> Any:
    if hook is None or callable(hook):
        return hook
    logger.warning("otel_verl: %s=%r is not callable; not used", name, hook)
    return None


def any_hook() -> bool:
    """Whether a hook is set (the trajectory keeps its inputs only then)."""
    return _request_hook is not None or _response_hook is not None


def hook_inputs(args: tuple, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``_run_agent_loop``'s arguments by name (a new dict: a hook changing it changes nothing in verl)."""
    inputs = dict(zip(_ARGUMENTS, args, strict=False))
    inputs.update(kwargs)
    return inputs


class RequestSpan(trace.Span):
    """The request span as a hook sees it: attributes go onto the recorded request span."""

    __slots__ = ("_recorder",)

    def __init__(self, recorder: RequestRecorder) -> None:
        self._recorder = recorder

    def get_span_context(self) -> SpanContext:
        recorder = self._recorder
        flags = TraceFlags(TraceFlags.SAMPLED if recorder.sampled else TraceFlags.DEFAULT)
        return SpanContext(recorder.trace_id, recorder.root.span_id, is_remote=False, trace_flags=flags)

    def is_recording(self) -> bool:
        return not self._recorder.finished

    def set_attribute(self, key: str, value: AttributeValue) -> None:
        if not self._recorder.finished:
            self._recorder.root.attributes[key] = value

    def set_attributes(self, attributes: Mapping[str, AttributeValue]) -> None:
        if not self._recorder.finished:
            self._recorder.root.attributes.update(attributes)

    def add_event(self, name: str, attributes: Any = None, timestamp: int | None = None) -> None:
        """Not kept: a recorded request span has no events."""

    def update_name(self, name: str) -> None:
        """Not kept: the analyzer finds requests by their name."""

    def set_status(self, status: Any, description: str | None = None) -> None:
        """Not kept: the request's status is verl's outcome (``verl.request.status``)."""

    def record_exception(self, exception: BaseException, attributes: Any = None, timestamp: Any = None,
                         escaped: bool = False) -> None:  # fmt: skip
        """Not kept: a failed trajectory's span carries ``error.type`` already."""

    def end(self, end_time: int | None = None) -> None:
        """otel_verl ends the request span when verl's trajectory ends."""


def request_started(recorder: RequestRecorder, inputs: Mapping[str, Any]) -> RequestSpan | None:
    """Call the request hook (if any) on a request that starts; the span handed to it, for the response hook."""
    request_hook, response_hook = _request_hook, _response_hook
    if request_hook is None and response_hook is None:
        return None
    span = RequestSpan(recorder)
    if request_hook is not None:
        _call("request_hook", request_hook, span, inputs)
    return span


def request_ending(span: RequestSpan | None, inputs: Mapping[str, Any], output: Any) -> None:
    """Call the response hook (if any) on a request about to end."""
    hook = _response_hook
    if span is not None and hook is not None:
        _call("response_hook", hook, span, inputs, output)


def _call(name: str, hook: Callable[..., Any], *args: Any) -> None:
    try:
        hook(*args)
    except Exception as exc:
        if name not in _warned:
            _warned.add(name)
            logger.warning(
                "otel_verl: %s %r raised %s: %s (ignored: verl is unaffected; warned once)",
                name, hook, type(exc).__name__, str(exc)[:200], exc_info=True,
            )  # fmt: skip
