"""Partial rollout: FullyAsyncLLMServerClient resumes aborted generations: one ``verl.generate`` round trip, each
attempt (one engine submission) the GenAI span with its own usage."""

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
        self.tokens_returned = 0
        """Every token the engine handed back, aborted submissions' included: what was generated."""

    async def _generate(self, **kwargs: Any) -> Any:
        from verl.workers.rollout.replica import TokenOutput

        self.calls.append(kwargs)
        prompt = tuple(kwargs["prompt_ids"])
        # a resume sends the aborted prompt + the tokens generated so far (so it is strictly longer)
        match = next((p for p in self.aborted if len(prompt) > len(p) and prompt[: len(p)] == p), None)
        if match is None:
            self.aborted.append(prompt)
            output = TokenOutput(token_ids=list(prompt[-3:]), stop_reason="aborted", num_preempted=0, extra_fields={})
        else:
            self.aborted.remove(match)
            output = await self.server.generate(**kwargs)
        self.tokens_returned += len(output.token_ids)
        return output


def _resumed_run(spans_of, monkeypatch) -> tuple[list, AbortOnceHandle, Any]:
    """A chunk of single-turn requests through verl's real ``FullyAsyncLLMServerClient``, each aborted once."""
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
    return spans_of(), aborting, opts


def test_resumed_generation_is_one_round_trip_with_attempts(spans_of, monkeypatch):
    spans, _, opts = _resumed_run(spans_of, monkeypatch)
    by_id = {s.context.span_id: s for s in spans}
    trips = [s for s in spans if s.name == semconv.SPAN_GENERATE]
    attempts = [s for s in spans if s.name.startswith(semconv.GEN_AI_OP_TEXT_COMPLETION)]
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    assert len(trips) == len(requests) == opts.prompts * opts.n  # one round trip per (single) turn
    assert all(by_id[t.parent.span_id].name == semconv.SPAN_TURN for t in trips)
    assert all(a.parent.span_id in {t.context.span_id for t in trips} for a in attempts)
    assert len(attempts) == 2 * len(trips)  # aborted attempt + resumed attempt
    assert {a.attributes[semconv.VERL_ENGINE_STOP_REASON] for a in attempts} == {"aborted", "completed"}
    assert all(t.attributes[semconv.VERL_REQUEST_NUM_RESUMES] == 1 for t in trips)
    assert all(r.attributes[semconv.VERL_REQUEST_NUM_RESUMES] == 1 for r in requests)
    # the resumed request ended normally, so it is not counted as aborted
    assert {r.attributes[semconv.VERL_REQUEST_STATUS] for r in requests} <= {"completed", "truncated"}


def test_each_engine_submission_is_the_one_genai_span_with_its_usage(spans_of, monkeypatch):
    """Issue 50: a sum over spans of ``gen_ai.usage.output_tokens`` is the tokens generated (the round trip
    carried its attempts' tokens again), and the engine's own span nests under the attempt it answered."""
    spans, handle, _ = _resumed_run(spans_of, monkeypatch)
    genai = [s for s in spans if semconv.GEN_AI_OPERATION_NAME in s.attributes]
    attempts = [s for s in spans if s.name.startswith(semconv.GEN_AI_OP_TEXT_COMPLETION) and s.parent]
    assert genai and {s.context.span_id for s in genai} == {s.context.span_id for s in attempts}
    assert not any(k.startswith("gen_ai.") for t in spans if t.name == semconv.SPAN_GENERATE for k in t.attributes)
    usage = [s.attributes.get(semconv.GEN_AI_USAGE_OUTPUT_TOKENS) for s in spans]
    assert sum(u for u in usage if u is not None) == handle.tokens_returned > 0
    # each submission carried its attempt's context to the engine (SGLang here), never the round trip's
    handed = {int(c["sampling_params"][semconv.CARRIER_KEY]["traceparent"].split("-")[2], 16) for c in handle.calls}
    assert handed == {s.context.span_id for s in genai}
    engine = [s for s in spans if s.name == semconv.ENGINE_SPAN_REQUEST]
    completed = {s.context.span_id for s in genai if s.attributes[semconv.VERL_ENGINE_STOP_REASON] != "aborted"}
    assert engine and {s.parent.span_id for s in engine} == completed  # no engine span for an aborted request


def _fast_sleep(real_sleep):
    async def sleep(delay, *args, **kwargs):
        return await real_sleep(min(delay, 0.01), *args, **kwargs)

    return sleep
