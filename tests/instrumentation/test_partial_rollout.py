"""Partial rollout: FullyAsyncLLMServerClient resumes aborted generations; attempts stay visible."""

from __future__ import annotations

import asyncio
from typing import Any

from otel_verl import semconv
from tests.instrumentation.harness import LocalHandle, build_worker, run_chunk


class AbortOnceHandle(LocalHandle):
    """The first engine call of every turn is aborted half-way (weights sync), the resume completes."""

    def __init__(self, server: Any) -> None:
        super().__init__(server)
        self.aborted: list[tuple[int, ...]] = []

    async def _generate(self, **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append(kwargs)
        prompt = tuple(kwargs["prompt_ids"])
        # a resume sends the aborted prompt + the tokens generated so far (so it is strictly longer)
        match = next((p for p in self.aborted if len(prompt) > len(p) and prompt[: len(p)] == p), None)
        if match is None:
            self.aborted.append(prompt)
            return TokenOutput(token_ids=list(prompt[-3:]), stop_reason="aborted", num_preempted=0, extra_fields={})
        self.aborted.remove(match)
        return await self.server.generate(**kwargs)


def test_resumed_generation_is_one_round_trip_with_attempts(spans_of, monkeypatch):
    from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient

    from otel_verl.demo.sim_server import SimServerConfig

    monkeypatch.setattr(asyncio, "sleep", _fast_sleep(asyncio.sleep))  # verl waits 1 s before resuming
    worker, handle, opts = build_worker(server_config=SimServerConfig(seconds_per_token=0.0, tool_call_probability=0.0))
    aborting = AbortOnceHandle(handle.server)

    class Client(FullyAsyncLLMServerClient):
        async def _acquire_server(self, request_id, **extra):
            return "sim-0", aborting

        def _release_server(self, server_id, request_id=None):
            return None

    worker.llm_client = Client(worker.config)
    run_chunk(worker, opts)
    spans = spans_of()
    generates = [s for s in spans if s.name.startswith("text_completion")]
    by_id = {s.context.span_id: s for s in generates}
    outer = [s for s in generates if s.parent.span_id not in by_id]
    attempts = [s for s in generates if s.parent.span_id in by_id]
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    assert len(outer) == len(requests) == opts.prompts * opts.n  # one round trip per (single) turn
    assert len(attempts) == 2 * len(outer)  # aborted attempt + resumed attempt
    assert {a.attributes[semconv.VERL_ENGINE_STOP_REASON] for a in attempts} == {"aborted", "completed"}
    assert all(o.attributes[semconv.VERL_REQUEST_NUM_RESUMES] == 1 for o in outer)
    assert all(r.attributes[semconv.VERL_REQUEST_NUM_RESUMES] == 1 for r in requests)
    # the resumed request ended normally, so it is not counted as aborted
    assert {r.attributes[semconv.VERL_REQUEST_STATUS] for r in requests} <= {"completed", "truncated"}


def _fast_sleep(real_sleep):
    async def sleep(delay, *args, **kwargs):
        return await real_sleep(min(delay, 0.01), *args, **kwargs)

    return sleep
