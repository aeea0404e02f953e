"""The one place the turn's trace context is handed to an engine (SGLang, vLLM), so the engine's own spans
name otel_verl's engine round trip as their parent.

The way there, for any engine (``OTEL_VERL_ENGINE_LINK``, on by default, for ``LINKED_ENGINES``):

1. AgentLoopWorker: the round trip's wrapper (:mod:`otel_verl.instrumentation.llm_server`) hands verl's
   server actor a copy of ``sampling_params`` with the span's W3C carrier under ``semconv.CARRIER_KEY``
   (:func:`with_carrier`).
2. Rollout server's process: :func:`server_generate_wrapper`, on every server's ``generate``
   (``SGLangHttpServer``, ``vLLMHttpServer``), removes it before verl's code runs (:func:`pop_carrier`)
   and keeps it in :data:`engine_carrier` while the call runs, and by verl's request id
   (:func:`carrier_in_flight`; verl's ids repeat, see there).
3. The engine's entry point gets it the way that engine reads it: ``external_trace_header`` on SGLang's
   ``GenerateReqInput`` (:func:`sglang_generate_request_wrapper`), ``trace_headers=`` on vLLM's
   ``AsyncLLM.generate`` (:func:`vllm_generate_wrapper`).

Engine flags: SGLang ``--enable-trace --otlp-traces-endpoint``; vLLM ``--otlp-traces-endpoint`` with
``disable_log_stats=False`` (verl's default True makes vLLM's tracing assert). What an engine does once a
call ended (vLLM: the engine span of an aborted request, :mod:`otel_verl.instrumentation.vllm_tracing`) is
that engine's module's, told through :func:`follow_calls`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any

from otel_verl import semconv

logger = logging.getLogger(__name__)

LINKED_ENGINES = frozenset({"sglang", "vllm"})
"""verl's ``rollout.name`` of the engines that are handed the carrier."""

engine_carrier: ContextVar[dict[str, str] | None] = ContextVar("otel_verl_engine_carrier", default=None)
"""Server-side: the W3C carrier of the turn's generate span while the engine call runs."""

_in_flight: dict[str, list[Mapping[str, str]]] = {}
"""verl request id → the carriers of verl's server ``generate`` calls with that id now in the engine, oldest
first. A list, not one carrier: verl's ids repeat (``rollout.full_determinism`` names every request
``det-{priority}``, the same in every step, and the asynchronous trainers run two steps' requests at once)."""

CallEnded = Callable[[Mapping[str, str], int, str, tuple, dict, Any], None]
"""``(carrier, started_ns, request_id, args, kwargs, output)`` after a server call that carried a carrier
returned (not after one that raised)."""
_call_followers: list[CallEnded] = []


def follow_calls(follower: CallEnded) -> None:
    """Have ``follower`` called after each server ``generate`` call that carried our carrier returned."""
    if follower not in _call_followers:
        _call_followers.append(follower)


def carrier_in_flight(request_id: str) -> Mapping[str, str] | None:
    """The carrier of verl's server call for ``request_id`` while it runs, else None; None too while several
    calls with that id run (an id alone cannot tell which call an engine output answers: no parent is better
    than another call's)."""
    calls = _in_flight.get(request_id)
    return calls[0] if calls is not None and len(calls) == 1 else None


def _enter(request_id: str, carrier: Mapping[str, str]) -> None:
    _in_flight.setdefault(request_id, []).append(carrier)


def _leave(request_id: str, carrier: Mapping[str, str]) -> None:
    """This call's carrier out of the table (by identity: a call with the same id keeps its own)."""
    calls = _in_flight.get(request_id)
    if calls is None:
        return
    for i, c in enumerate(calls):
        if c is carrier:
            del calls[i]
            break
    if not calls:
        _in_flight.pop(request_id, None)


def with_carrier(kwargs: dict, carrier: dict[str, str]) -> dict:
    """Client side: the round trip's kwargs with a copy of ``sampling_params`` carrying ``carrier`` (verl's
    own dict is not changed); the kwargs unchanged when ``sampling_params`` is not a dict."""
    params = kwargs.get("sampling_params")
    if not isinstance(params, dict):
        return kwargs
    return {**kwargs, "sampling_params": {**params, semconv.CARRIER_KEY: carrier}}


def pop_carrier(args: tuple, kwargs: dict) -> tuple[tuple, dict, dict[str, str] | None]:
    """The server's arguments without our carrier (verl and the engine never see it), and the carrier."""
    params = kwargs.get("sampling_params")
    carrier = None
    if isinstance(params, dict) and semconv.CARRIER_KEY in params:
        params = dict(params)
        carrier = params.pop(semconv.CARRIER_KEY, None)
        kwargs = {**kwargs, "sampling_params": params}
    elif len(args) > 1 and isinstance(args[1], dict) and semconv.CARRIER_KEY in args[1]:
        params = dict(args[1])
        carrier = params.pop(semconv.CARRIER_KEY, None)
        args = (args[0], params, *args[2:])
    return args, kwargs, carrier


def _request_id(args: tuple, kwargs: dict) -> str:
    """verl's ``generate(prompt_ids, sampling_params, request_id, ...)``: the request id as text."""
    return str(args[2] if len(args) > 2 else kwargs.get("request_id"))


async def server_generate_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """Every rollout server's ``generate``: our carrier popped from ``sampling_params`` (verl and the engine
    never see it) and exposed to the engine's entry point for the call; then the followers told."""
    args, kwargs, carrier = pop_carrier(args, kwargs)
    if not carrier:
        return await wrapped(*args, **kwargs)
    started_ns = time.time_ns()
    request_id = _request_id(args, kwargs)
    _enter(request_id, carrier)
    token = engine_carrier.set(carrier)
    try:
        output = await wrapped(*args, **kwargs)
    finally:
        engine_carrier.reset(token)
        _leave(request_id, carrier)
    for follower in _call_followers:
        try:
            follower(carrier, started_ns, request_id, args, kwargs, output)
        except Exception:  # what an engine module does after the call never reaches verl
            logger.debug("otel_verl: %r failed after a server call", follower, exc_info=True)
    return output


def sglang_generate_request_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """SGLang: put the carrier on ``GenerateReqInput.external_trace_header`` if none is set."""
    carrier = engine_carrier.get()
    obj = args[0] if args else kwargs.get("obj")
    if carrier and obj is not None and getattr(obj, "external_trace_header", None) is None:
        try:
            obj.external_trace_header = dict(carrier)
        except Exception:
            logger.debug("otel_verl: SGLang request does not take external_trace_header", exc_info=True)
    return wrapped(*args, **kwargs)


def vllm_generate_wrapper(wrapped: Any, instance: Any, args: tuple, kwargs: dict) -> Any:
    """vLLM: pass ``trace_headers=`` to ``AsyncLLM.generate`` unless the caller did."""
    carrier = engine_carrier.get()
    if carrier and kwargs.get("trace_headers") is None:
        kwargs = {**kwargs, "trace_headers": dict(carrier)}
    return wrapped(*args, **kwargs)
