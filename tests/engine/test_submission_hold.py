"""The hold at verl's submission gate (``vLLMHttpServer._park_until_admitted``) is a ``verl.submission_hold`` span.

verl's real ``vLLMHttpServer`` gate (``abort_all_requests`` closes it before a weight sync pauses the engine,
``open_submission_gate`` opens it), built without a process as verl's own ``test_submitter_gate_on_cpu.py`` builds
it: only the engine is a stand-in. Needs ``scripts/install_vllm.sh``'s environment (skipped elsewhere).
"""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from otel_verl import semconv
from otel_verl.export import tracing
from otel_verl.instrumentation import engine_link, ray_carrier
from tests.instrumentation.conftest import memory_exporter, spans_of  # noqa: F401  (in-memory spans, instrumented)

pytest.importorskip("vllm", reason="needs vLLM (scripts/install_vllm.sh)")

HOLD_S = 0.3


class _Engine:
    """vLLM's AsyncLLM as far as the gate uses it: pause and resume."""

    def __init__(self) -> None:
        self.output_processor = SimpleNamespace(request_states={})

    async def pause_generation(self, **kwargs: Any) -> None:
        return None

    async def resume_generation(self) -> None:
        return None


def _server() -> Any:
    from verl.workers.rollout.vllm_rollout import vllm_async_server

    server = object.__new__(vllm_async_server.vLLMHttpServer)  # its __init__ needs Ray and a GPU worker config
    server.node_rank, server.global_steps, server.engine = 0, 3, _Engine()
    server._submission_paused, server._rejecting, server._admitting = False, False, 0
    server._resume_event = asyncio.Event()
    server._resume_event.set()
    return server


async def _park(server: Any, request_id: str, reject: bool = False, open_after: float | None = None) -> Any:
    """One engine call's arrival at the gate (with the call's carrier, as the server's ``generate`` exposes it)
    while verl's weight sync holds the gate closed (``abort_all_requests``) for ``open_after`` seconds."""
    if open_after is not None or reject:
        await server.abort_all_requests(reject_request=reject)
    with tracing.tracer().start_as_current_span("text_completion model") as call:
        token = engine_link.engine_carrier.set(ray_carrier.current_carrier())
        try:
            parked = asyncio.create_task(server._park_until_admitted(request_id))
        finally:
            engine_link.engine_carrier.reset(token)
        if open_after is not None:
            await asyncio.sleep(open_after)
            await server.resume_generation()
        return await parked, call.get_span_context()


def test_a_request_held_by_the_gate_gets_its_hold(spans_of) -> None:  # noqa: F811
    server = _server()
    result, call = asyncio.run(_park(server, "req-1", open_after=HOLD_S))
    assert result is None and server._admitting == 1  # admitted, as without otel_verl
    holds = [s for s in spans_of() if s.name == semconv.SPAN_SUBMISSION_HOLD]
    assert len(holds) == 1
    hold = holds[0]
    assert hold.parent.span_id == call.span_id and hold.context.trace_id == call.trace_id
    assert hold.attributes[semconv.VERL_REQUEST_ID] == "req-1"
    assert hold.attributes[semconv.VERL_SUBMISSION_REJECTED] is False
    assert HOLD_S <= (hold.end_time - hold.start_time) / 1e9 < HOLD_S + 1.0


def test_an_open_gate_adds_nothing(spans_of) -> None:  # noqa: F811
    server = _server()
    result, _ = asyncio.run(_park(server, "req-2"))
    assert result is None and server._admitting == 1
    assert not [s for s in spans_of() if s.name == semconv.SPAN_SUBMISSION_HOLD]


def test_a_rejected_request_is_marked(spans_of) -> None:  # noqa: F811
    server = _server()
    result, call = asyncio.run(_park(server, "req-3", reject=True))
    assert result.stop_reason == "aborted" and server._admitting == 0  # verl's own answer, unchanged
    (hold,) = [s for s in spans_of() if s.name == semconv.SPAN_SUBMISSION_HOLD]
    assert hold.parent.span_id == call.span_id and hold.attributes[semconv.VERL_SUBMISSION_REJECTED] is True
