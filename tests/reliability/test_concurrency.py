"""Concurrency: 1,000 trajectories at once in one worker, and work handed to threads, keep their parents
(in the chunk's trace or, past its size limit, their sample group's: the engine's and the reward's spans too).

verl's real AgentLoopWorker runs every trajectory as an asyncio task; tools and verl's
NaiveRewardManager hand work to threads (``loop.run_in_executor``, ``threading.Thread``,
``asyncio.to_thread``). Every span must land in its own request's subtree: checked through ids that
travel with the work itself (verl's request id, the sample index), never through timing.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from otel_verl import semconv
from otel_verl.demo import runner
from otel_verl.demo.sim_server import SimServerConfig
from otel_verl.export import flush, provider, tracing
from tests.process_state import reset_tracing
from tests.reliability.traced_run import traced

pytest.importorskip("verl", reason="needs the verl extra")
pytestmark = pytest.mark.verl

USER_KINDS = ("executor", "thread", "to_thread")
QUESTION = re.compile(r"Question #(\d+)")


def _user_span(kind: str, request_id: str) -> None:
    """What a tool's own instrumented code (an HTTP client, a user tracer) does in a thread."""
    with tracing.tracer().start_as_current_span(f"user.{kind}", attributes={"user.request_id": request_id}):
        pass


def _tool_with_threads(original: Any) -> Any:
    async def execute(self: Any, instance_id: str, parameters: dict, **kwargs: Any) -> Any:
        request_id = kwargs["agent_data"].request_id
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, _user_span, "executor", request_id)
        thread = threading.Thread(target=_user_span, args=("thread", request_id))
        thread.start()
        await loop.run_in_executor(None, thread.join)
        await asyncio.to_thread(_user_span, "to_thread", request_id)
        return await original(self, instance_id, parameters, **kwargs)

    return execute


def _user_compute_score(data_source: str, solution_str: str, ground_truth: str, extra_info: dict, **_: Any) -> float:
    """A plain (sync) reward function: verl's NaiveRewardManager runs it through run_in_executor."""
    from verl.utils.reward_score import gsm8k

    with tracing.tracer().start_as_current_span("user.compute_score", attributes={"user.index": extra_info["index"]}):
        return float(gsm8k.compute_score(solution_str, ground_truth))


def _request_of(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> ReadableSpan | None:
    node = span
    while node is not None and node.name != semconv.SPAN_REQUEST:
        node = by_id.get(node.parent.span_id) if node.parent is not None else None
    return node


def test_thousand_concurrent_trajectories_keep_their_parentage(monkeypatch):
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    from otel_verl.demo.model import build_tokenizer
    from otel_verl.demo.tools import CalculatorTool
    from tests.instrumentation.harness import build_worker

    monkeypatch.setattr(CalculatorTool, "execute", _tool_with_threads(CalculatorTool.execute))
    opts = runner.DemoOptions(prompts=250, n=4, seed=1)
    memory = InMemorySpanExporter()
    with traced(memory):
        worker, handle, opts = build_worker(
            opts, SimServerConfig(seconds_per_token=0.0001, capacity=64), remote_reward=True
        )
        reward_worker = worker.reward_loop_worker_handles[0].compute_score.fn.__self__

        async def chunk() -> Any:
            # verl's own reward manager, built in the running loop (it keeps a reference to it)
            reward_worker.reward_manager = NaiveRewardManager(
                reward_worker.config, build_tokenizer(), compute_score=_user_compute_score
            )
            return await worker.generate_sequences(runner._batch(opts, 1))

        output = asyncio.run(chunk())
        flush.flush()
        spans = list(memory.get_finished_spans())
    assert len(output) == 1000
    by_id = {s.context.span_id: s for s in spans}
    names = Counter(s.name for s in spans)
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    worker_span = next(s for s in spans if s.name == semconv.SPAN_WORKER)
    assert len(requests) == 1000 == len({r.attributes[semconv.VERL_REQUEST_ID] for r in requests})
    # ~25k spans: the chunk's trace keeps what fits (OTEL_VERL_TRACE_MAX_SPANS), the other requests are roots of
    # their sample group's trace linked to the worker span; every other span's parent is there, in its trace
    assert len({s.context.trace_id for s in spans}) > 1
    for span in spans:
        if span is worker_span or (span.parent is None and span in requests):
            continue
        assert span.parent is not None and span.parent.span_id in by_id, span.name
        assert by_id[span.parent.span_id].context.trace_id == span.context.trace_id, span.name
    for r in requests:
        worker = r.parent if r.parent is not None else r.links[0].context
        assert worker.span_id == worker_span.context.span_id
    groups = Counter()
    for r in requests:
        if r.parent is None:
            groups[(r.context.trace_id, r.attributes[semconv.VERL_SAMPLE_INDEX])] += 1
    assert groups and len({trace for trace, _ in groups}) == len(groups)  # one sample group a trace
    assert max(Counter(s.context.trace_id for s in spans).values()) <= 5000

    tools = sum(n for name, n in names.items() if name.startswith(semconv.GEN_AI_OP_EXECUTE_TOOL))
    assert tools > 0
    for kind in USER_KINDS:
        assert names[f"user.{kind}"] == tools, kind
    assert names["user.compute_score"] == 1000

    for span in spans:
        if span in requests or span is worker_span:
            continue
        request = _request_of(span, by_id)
        assert request is not None, span.name
        rid = request.attributes[semconv.VERL_REQUEST_ID]
        attrs = span.attributes or {}
        if span.name.startswith("user.") and span.name != "user.compute_score":
            # work done in a thread for request R sits under R's execute_tool span
            assert by_id[span.parent.span_id].name.startswith(semconv.GEN_AI_OP_EXECUTE_TOOL)
            assert attrs["user.request_id"] == rid
        elif span.name == "user.compute_score":
            assert by_id[span.parent.span_id].name == "verl.reward.compute"
            assert attrs["user.index"] == request.attributes[semconv.VERL_SAMPLE_INDEX]
        elif span.name == semconv.ENGINE_SPAN_REQUEST:  # the engine parented on the carrier verl sent it
            assert by_id[span.parent.span_id].name.startswith(semconv.GEN_AI_OP_TEXT_COMPLETION)
        elif semconv.VERL_REQUEST_ID in attrs:  # our own spans carry the request id of their subtree
            assert attrs[semconv.VERL_REQUEST_ID] == rid, span.name
    # every engine call carried the carrier of a text_completion span of the request whose prompt it sent
    assert names[semconv.ENGINE_SPAN_REQUEST] == len(handle.calls)
    tokenizer = build_tokenizer()
    named = Counter()
    for call in handle.calls:
        traceparent = call["sampling_params"][semconv.CARRIER_KEY]["traceparent"]
        generate = by_id[int(traceparent.split("-")[2], 16)]
        named[generate.context.span_id] += 1
        question = int(QUESTION.search(tokenizer.decode(call["prompt_ids"])).group(1))
        assert question == _request_of(generate, by_id).attributes[semconv.VERL_SAMPLE_INDEX]
    assert set(named.values()) == {1}


def test_executor_and_thread_keep_their_parent():
    """The seams on ThreadPoolExecutor.submit and Thread.start/run, and their removal by uninstrument()."""
    memory = InMemorySpanExporter()

    def child(name: str) -> None:
        with tracing.tracer().start_as_current_span(name):
            pass

    async def main(pool: ThreadPoolExecutor) -> None:
        loop = asyncio.get_running_loop()
        with tracing.tracer().start_as_current_span("parent"):
            await loop.run_in_executor(None, child, "default-executor")
            await loop.run_in_executor(pool, child, "own-executor")
            pool.submit(child, "submit").result()
            thread = threading.Thread(target=child, args=("thread",))
            thread.start()
            thread.join()
        await loop.run_in_executor(None, child, "no-parent")  # nothing current: nothing carried

    with traced(memory), ThreadPoolExecutor(2) as pool:
        asyncio.run(main(pool))
        flush.flush()
        spans = {s.name: s for s in memory.get_finished_spans()}
    parent = spans["parent"].context.span_id
    for name in ("default-executor", "own-executor", "submit", "thread"):
        assert spans[name].parent is not None and spans[name].parent.span_id == parent, name
    assert spans["no-parent"].parent is None

    # after uninstrument() (traced() ends with it) the standard library is itself again
    memory = InMemorySpanExporter()
    provider.setup_tracing("agent_loop_worker", extra_exporters=[memory], set_global=False)
    try:
        with ThreadPoolExecutor(2) as pool:
            asyncio.run(main(pool))
        flush.flush()
        spans = {s.name: s for s in memory.get_finished_spans()}
    finally:
        reset_tracing()
    assert spans["default-executor"].parent is None and spans["thread"].parent is None


def test_a_rollout_chunks_own_context_is_not_carried_into_executor_threads():
    """verl's tokenizer work submitted straight from a chunk's context carries nothing (threads.exempt);
    a context made from it (a tool's, a reward's) still is, and the chunk's end lifts the exemption."""
    from opentelemetry import context as otel_context
    from opentelemetry import trace

    from otel_verl.wrapping import threads

    memory = InMemorySpanExporter()

    def child(name: str) -> None:
        with tracing.tracer().start_as_current_span(name):
            pass

    async def main(chunk_ctx: otel_context.Context) -> None:
        loop = asyncio.get_running_loop()
        token = otel_context.attach(chunk_ctx)
        try:
            await loop.run_in_executor(None, child, "from-chunk")
            with tracing.tracer().start_as_current_span("tool"):
                await loop.run_in_executor(None, child, "from-tool")
            threads.unexempt(chunk_ctx)
            await loop.run_in_executor(None, child, "after-chunk")
        finally:
            otel_context.detach(token)

    with traced(memory):
        worker = tracing.tracer().start_span("worker")
        chunk_ctx = trace.set_span_in_context(worker)
        threads.exempt(chunk_ctx)
        asyncio.run(main(chunk_ctx))
        worker.end()
        flush.flush()
        spans = {s.name: s for s in memory.get_finished_spans()}
    assert spans["from-chunk"].parent is None
    assert spans["from-tool"].parent.span_id == spans["tool"].context.span_id
    assert spans["after-chunk"].parent.span_id == spans["worker"].context.span_id
