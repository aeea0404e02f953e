"""verl's real AgentLoopWorker/ToolAgentLoop under instrumentation, in one process."""

from __future__ import annotations

import gc
from collections import Counter

import pytest

from otel_verl import semconv
from otel_verl.demo.sim_server import SimServerConfig
from otel_verl.instrumentation import llm_server
from otel_verl.recording.spans import RecordedSpan
from tests.instrumentation.harness import build_worker, run_chunk


def by_name(spans):
    return Counter(s.name for s in spans)


def children(spans, parent):
    return [s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id]


def test_tree_of_a_worker_chunk(spans_of):
    worker, handle, opts = build_worker(remote_reward=True)
    output = run_chunk(worker, opts)
    spans = spans_of()
    names = by_name(spans)
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    turns = [s for s in spans if s.name == semconv.SPAN_TURN]
    generates = [s for s in spans if s.name.startswith(semconv.GEN_AI_OP_TEXT_COMPLETION)]
    tools = [s for s in spans if s.name.startswith(semconv.GEN_AI_OP_EXECUTE_TOOL)]
    workers = [s for s in spans if s.name == semconv.SPAN_WORKER]

    assert len(workers) == 1
    assert len(requests) == opts.prompts * opts.n == len(output)
    assert all(r.parent.span_id == workers[0].context.span_id for r in requests)
    # every span of the chunk lives in the worker's trace and its parent resolves
    ids = {s.context.span_id for s in spans}
    assert {s.context.trace_id for s in spans if s.name != semconv.ENGINE_SPAN_REQUEST} == {workers[0].context.trace_id}
    assert all(s.parent is None or s.parent.span_id in ids for s in spans if s is not workers[0])
    # one engine round trip per turn, turns counted on the request
    assert len(generates) == len(turns)
    assert len(generates) == len(handle.calls)
    assert sum(r.attributes[semconv.VERL_REQUEST_NUM_TURNS] for r in requests) == len(turns)
    for turn in turns:
        kids = children(spans, turn)
        assert sum(k.name.startswith(semconv.GEN_AI_OP_TEXT_COMPLETION) for k in kids) == 1
    # verl's own turn count: user turns (tool rounds) + assistant turns + 1
    assert int(sum(output.non_tensor_batch["__num_turns__"])) == len(turns) + len(tools) + len(requests)
    # tool parse reports the calls verl parsed; each became one execute_tool span
    parsed = sum(s.attributes[semconv.VERL_TOOL_CALL_COUNT] for s in spans if s.name == semconv.SPAN_TOOL_PARSE)
    assert parsed == len(tools) > 0
    assert all(t.attributes[semconv.GEN_AI_TOOL_NAME] == "calculator" for t in tools)
    # rewards: one local event per request, one remote compute span below it
    assert names[semconv.SPAN_REWARD] == len(requests) == names["verl.reward.compute"]
    assert names[semconv.SPAN_PREPROCESS] >= len(requests)
    # the attribute contract on requests
    for r in requests:
        a = r.attributes
        assert a[semconv.VERL_STEP] == 1
        assert a[semconv.VERL_REQUEST_STATUS] in {s.value for s in semconv.RequestStatus}
        assert isinstance(a[semconv.VERL_REQUEST_ID], str)
        assert a[semconv.VERL_SAMPLE_INDEX] in range(opts.prompts)
        assert a[semconv.VERL_ROLLOUT_N] in range(opts.n)
        assert a[semconv.VERL_REWARD_SCORE] in (0.0, 1.0)
    scores = sorted(r.attributes[semconv.VERL_REWARD_SCORE] for r in requests)
    assert scores == sorted(output.batch["rm_scores"].sum(dim=-1).tolist())
    for g in generates:
        a = g.attributes
        assert a[semconv.GEN_AI_OPERATION_NAME] == "text_completion"
        assert a[semconv.GEN_AI_USAGE_INPUT_TOKENS] > 0 and a[semconv.GEN_AI_USAGE_OUTPUT_TOKENS] > 0
        assert list(a[semconv.GEN_AI_RESPONSE_FINISH_REASONS]) == [a[semconv.VERL_ENGINE_STOP_REASON]]


def test_recorded_spans_leave_the_cyclic_gc_nothing_to_track(spans_of):
    """What a chunk's spans hold while they wait for the exporters is not on the cyclic GC's lists.

    A worker chunk keeps its requests' spans until it ends; every GC-tracked object among them is
    promoted to the oldest generation, and enough promotions trigger full collections of the worker's
    whole heap (~0.3-0.7 s with verl imported), which is what full detail's rollout overhead was made
    of (benchmarks/RESULTS.md, row 2b). Attribute dicts holding only strings, numbers and tuples of
    them are untracked by the collector; a list (``finish_reasons = [stop]``) kept the dict and itself
    tracked, two objects per engine round trip.
    """
    worker, _, opts = build_worker()
    run_chunk(worker, opts)
    recorded = [s for s in spans_of() if isinstance(s, RecordedSpan)]  # the SDK's own spans are not held
    assert {semconv.SPAN_REQUEST, semconv.SPAN_TURN, semconv.SPAN_PREPROCESS} <= {s.name for s in recorded}
    assert any(s.name.startswith(semconv.GEN_AI_OP_TEXT_COMPLETION) for s in recorded)
    gc.collect()
    tracked = sorted({s.name for s in recorded if gc.is_tracked(s.attributes)})
    assert tracked == []


def test_held_requests_keep_their_events_off_the_cyclic_gc(spans_of):
    """While the chunk is open, a finished request waits as its recorder: its turns and events are
    tuples of strings and ints, which the collector stops tracking at its first pass, and their
    attributes literal dicts of such values, which it never tracks; so only the recorder, its root
    span, one list and one dict per request count towards a full collection."""
    from otel_verl.export import flush, tracing
    from otel_verl.recording.recorder import RequestRecorder

    worker, _, opts = build_worker()
    run_chunk(worker, opts)  # as in a worker past its first chunk: the cached finish-reason tuples (each
    gc.collect(0)  # untracked by the GC's first pass over it) are untracked by now
    flush.flush()
    spans_before = len(spans_of())
    flush.hold_begin()  # another chunk stays open: everything this one records is held
    try:
        run_chunk(worker, opts)
        held = [part for part in tracing.get_state().hold._held if isinstance(part, RequestRecorder)]
        assert len(held) == opts.prompts * opts.n
        events = [event for recorder in held for event in recorder.recorded]
        assert {event[0] for event in events} >= {semconv.SPAN_TURN, semconv.SPAN_PREPROCESS, semconv.SPAN_TOOL_PARSE}
        # attribute dicts are made untracked (only a full collection would untrack a tracked one) ...
        tracked = {e[0] for r in held for e in r.recorded if gc.is_tracked(r.event_attributes[e[1]])}
        assert sorted(tracked) == []
        gc.collect(0)  # ... so the first pass over the events untracks them all
        gc.collect()
        assert sorted({event[0] for event in events if gc.is_tracked(event)}) == []
        assert not any(gc.is_tracked(recorder.ends) for recorder in held)
    finally:
        flush.hold_end()
    spans = spans_of()[spans_before:]  # released: every held event became a span of its request
    assert len([s for s in spans if isinstance(s, RecordedSpan)]) == len(held) + len(events)


def test_no_text_by_default_and_capped_when_opted_in(spans_of, monkeypatch):
    worker, _, opts = build_worker()
    run_chunk(worker, opts)
    for span in spans_of():
        for key in (semconv.GEN_AI_PROMPT, semconv.GEN_AI_COMPLETION, semconv.GEN_AI_TOOL_CALL_ARGUMENTS):
            assert key not in span.attributes


def test_content_capture_opt_in_is_capped(monkeypatch, memory_exporter):
    from otel_verl.config import OtelVerlConfig
    from otel_verl.export import flush, tracing

    state = tracing.get_state()
    monkeypatch.setattr(state, "config", OtelVerlConfig(capture_content=True, content_max_chars=10))
    monkeypatch.setattr(llm_server, "_config", None)
    worker, _, opts = build_worker()
    run_chunk(worker, opts)
    flush.flush()
    spans = memory_exporter.get_finished_spans()
    completions = [s.attributes[semconv.GEN_AI_COMPLETION] for s in spans if semconv.GEN_AI_COMPLETION in s.attributes]
    arguments = [
        s.attributes[semconv.GEN_AI_TOOL_CALL_ARGUMENTS]
        for s in spans
        if semconv.GEN_AI_TOOL_CALL_ARGUMENTS in s.attributes
    ]
    assert completions and arguments
    assert all(len(text) <= 11 for text in completions + arguments)
    monkeypatch.setattr(llm_server, "_config", None)


def test_length_cap_is_truncated(spans_of):
    worker, _, opts = build_worker(
        server_config=SimServerConfig(seconds_per_token=0.0, median_tokens=5000, tool_call_probability=0.0)
    )
    run_chunk(worker, opts)
    statuses = Counter(s.attributes[semconv.VERL_REQUEST_STATUS] for s in spans_of() if s.name == semconv.SPAN_REQUEST)
    assert statuses == {"truncated": opts.prompts * opts.n}


def test_aborted_requests_keep_their_spans(spans_of):
    worker, handle, opts = build_worker(
        server_config=SimServerConfig(seconds_per_token=0.001, tool_call_probability=0.0)
    )
    total = opts.prompts * opts.n
    handle.server.begin_step(total - 3)
    run_chunk(worker, opts)
    spans = spans_of()
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    aborted = [s for s in requests if s.attributes[semconv.VERL_REQUEST_STATUS] == "aborted"]
    completed = [s for s in requests if s.attributes[semconv.VERL_REQUEST_STATUS] == "completed"]
    # the engine aborts whatever is still running once total-3 completed (one may finish in that tick)
    assert len(requests) == total and len(completed) >= total - 3
    assert len(aborted) == total - len(completed) > 0
    for request in aborted:
        gens = [
            s
            for s in spans
            if s.name.startswith("text_completion")
            and s.attributes.get(semconv.VERL_REQUEST_ID) == request.attributes[semconv.VERL_REQUEST_ID]
        ]
        assert gens and gens[-1].attributes[semconv.VERL_ENGINE_STOP_REASON] == "aborted"


def test_engine_error_passes_through_unchanged(spans_of, monkeypatch):
    worker, handle, opts = build_worker()

    class EngineDown(RuntimeError):
        pass

    async def broken(**kwargs):
        raise EngineDown("engine down")

    monkeypatch.setattr(handle.server, "generate", broken)
    with pytest.raises(EngineDown, match="engine down"):
        run_chunk(worker, opts)
    spans = spans_of()
    failed = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    assert failed and all(s.attributes[semconv.VERL_REQUEST_STATUS] == "failed" for s in failed)
    assert all(not s.status.is_ok for s in failed)
    gens = [s for s in spans if s.name.startswith("text_completion")]
    # gather() surfaces the first failure; asyncio.run cancels the rest of the still-running requests
    types = Counter(s.attributes[semconv.ERROR_TYPE].rsplit(".", 1)[-1] for s in gens)
    assert types["EngineDown"] >= 1 and set(types) <= {"EngineDown", "CancelledError"}


def test_broken_exporter_does_not_change_results(memory_exporter, monkeypatch):
    """A processor that raises on every span must not change what verl returns."""
    from otel_verl.export import tracing

    worker, _, opts = build_worker(server_config=SimServerConfig(seconds_per_token=0.0, seed=7))
    state = tracing.get_state()

    class Exploding:
        def on_end(self, span):
            raise OSError("disk full")

        def on_start(self, span, parent_context=None):
            raise OSError("disk full")

        def shutdown(self):
            pass

        def force_flush(self, timeout_millis=30000):
            raise OSError("disk full")

    monkeypatch.setattr(state, "processors", [Exploding()])
    out = run_chunk(worker, opts)
    assert len(out) == opts.prompts * opts.n


def test_uninstrument_leaves_no_spans(memory_exporter):
    import otel_verl
    from otel_verl.export import flush

    otel_verl.uninstrument()
    worker, _, opts = build_worker()
    run_chunk(worker, opts)
    flush.flush()
    assert memory_exporter.get_finished_spans() == ()
    otel_verl.instrument()


def test_same_trajectories_with_and_without_tracing(memory_exporter):
    import otel_verl

    worker, _, opts = build_worker(server_config=SimServerConfig(seconds_per_token=0.0, seed=3))
    traced = run_chunk(worker, opts)
    otel_verl.uninstrument()
    worker, _, opts = build_worker(server_config=SimServerConfig(seconds_per_token=0.0, seed=3))
    plain = run_chunk(worker, opts)
    otel_verl.instrument()
    assert sorted(map(tuple, traced.batch["responses"].tolist())) == sorted(
        map(tuple, plain.batch["responses"].tolist())
    )
    assert traced.meta_info.keys() == plain.meta_info.keys()


def test_every_trajectory_is_a_request_with_its_status_and_score(spans_of):
    """Each trajectory verl runs is one request span under its worker span, ended before the worker span,
    with verl's reward score and a status."""
    worker, _, opts = build_worker(remote_reward=True)
    output = run_chunk(worker, opts)
    spans = spans_of()
    worker_span = next(s for s in spans if s.name == semconv.SPAN_WORKER)
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    assert len(requests) == len(output) == worker_span.attributes[semconv.VERL_WORKER_NUM_REQUESTS]
    assert all(r.parent.span_id == worker_span.context.span_id for r in requests)
    assert all(r.start_time >= worker_span.start_time and r.end_time <= worker_span.end_time for r in requests)
    scores = sorted(r.attributes[semconv.VERL_REWARD_SCORE] for r in requests)
    assert scores == sorted(output.batch["rm_scores"].sum(dim=-1).tolist())
    statuses = Counter(r.attributes[semconv.VERL_REQUEST_STATUS] for r in requests)
    assert set(statuses) <= {"completed", "truncated", "aborted"} and sum(statuses.values()) == len(output)
    completed = worker_span.attributes[semconv.VERL_WORKER_NUM_COMPLETED]
    assert completed == statuses["completed"]


def test_trajectory_failing_before_any_hook_is_a_failed_request(spans_of, monkeypatch):
    """verl's ``_run_agent_loop`` raises at its first line (no hook of ours ran inside it): the request
    still ends, failed, with the error's type, and verl sees its own exception."""
    from verl.experimental.agent_loop import agent_loop as verl_agent_loop

    real_info = verl_agent_loop.get_trajectory_info

    async def without_step(*args, **kwargs):
        return [{k: v for k, v in info.items() if k != "step"} for info in await real_info(*args, **kwargs)]

    monkeypatch.setattr(verl_agent_loop, "get_trajectory_info", without_step)
    worker, _, opts = build_worker()
    with pytest.raises(KeyError, match="step"):
        run_chunk(worker, opts)
    spans = spans_of()
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    assert len(requests) == opts.prompts * opts.n
    assert all(r.attributes[semconv.VERL_REQUEST_STATUS] == "failed" for r in requests)
    assert all(r.attributes[semconv.ERROR_TYPE] == "KeyError" and not r.status.is_ok for r in requests)
    assert [s.name for s in spans].count(semconv.SPAN_WORKER) == 1


def test_trajectories_awaited_in_place_are_recorded_too(spans_of, monkeypatch):
    """A worker that wraps the trajectory coroutine before making a task of it (or awaits it in place)
    still gets every request recorded, under the right worker span and step; verl's output is unchanged."""
    import asyncio

    from verl.experimental.agent_loop import agent_loop as verl_agent_loop

    real_create_task = asyncio.create_task

    async def in_place(coro):
        return await coro

    monkeypatch.setattr(verl_agent_loop.asyncio, "create_task", lambda coro, **kw: real_create_task(in_place(coro)))
    worker, _, opts = build_worker()
    first = run_chunk(worker, opts, step=1)
    second = run_chunk(worker, opts, step=2)
    total = opts.prompts * opts.n
    assert len(first) == len(second) == total
    spans = spans_of()
    workers = sorted((s for s in spans if s.name == semconv.SPAN_WORKER), key=lambda s: s.attributes[semconv.VERL_STEP])
    assert [w.attributes[semconv.VERL_WORKER_NUM_REQUESTS] for w in workers] == [total, total]
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    for step, worker_span in zip((1, 2), workers, strict=True):
        mine = [r for r in requests if r.parent.span_id == worker_span.context.span_id]
        assert len(mine) == total and {r.attributes[semconv.VERL_STEP] for r in mine} == {step}
