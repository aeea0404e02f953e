"""The turn's W3C carrier reaches the engine: SGLang external_trace_header, vLLM trace_headers."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from otel_verl import semconv
from otel_verl.instrumentation import engine_link
from tests.instrumentation.harness import build_worker, run_chunk


def _span_id_of(carrier: dict[str, str]) -> int:
    return int(carrier["traceparent"].split("-")[2], 16)


@pytest.mark.parametrize("engine", ["sglang", "vllm"])
def test_client_hands_the_generate_span_to_the_server(spans_of, engine):
    worker, handle, opts = build_worker(engine=engine)
    run_chunk(worker, opts)
    spans = spans_of()
    generates = {s.context.span_id: s for s in spans if s.name.startswith("text_completion")}
    carriers = [call["sampling_params"][semconv.CARRIER_KEY] for call in handle.calls]
    assert len(carriers) == len(generates)
    assert {_span_id_of(c) for c in carriers} == set(generates)
    for carrier in carriers:
        trace_id = int(carrier["traceparent"].split("-")[1], 16)
        assert generates[_span_id_of(carrier)].context.trace_id == trace_id
    # the caller's own sampling_params dict is never modified
    assert all(semconv.CARRIER_KEY not in call.get("request_sampling_params_seen", {}) for call in handle.calls)


def test_no_carrier_for_engines_that_do_not_trace(spans_of):
    worker, handle, opts = build_worker(engine="hf")
    run_chunk(worker, opts)
    assert handle.calls and all(semconv.CARRIER_KEY not in c["sampling_params"] for c in handle.calls)


def test_server_side_pops_carrier_and_feeds_sglang_and_vllm():
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    seen = {}

    class GenerateReqInput:  # the field SGLang >= 0.5 reads
        external_trace_header = None

    async def server_generate(prompt_ids, sampling_params, request_id):
        seen["params"] = dict(sampling_params)
        obj = GenerateReqInput()
        engine_link.sglang_generate_request_wrapper(lambda o, r: o, None, (obj, None), {})
        seen["sglang"] = obj.external_trace_header
        seen["vllm"] = engine_link.vllm_generate_wrapper(lambda **kw: kw, None, (), {"prompt": "x"})
        return "ok"

    params = {"temperature": 1.0, semconv.CARRIER_KEY: carrier}
    result = asyncio.run(
        engine_link.server_generate_wrapper(
            server_generate, None, (), {"prompt_ids": [1], "sampling_params": params, "request_id": "r"}
        )
    )
    assert result == "ok"
    assert seen["params"] == {"temperature": 1.0}  # verl and the engine never see our key
    assert params[semconv.CARRIER_KEY] == carrier  # and the sender's dict is untouched
    assert seen["sglang"] == carrier
    assert seen["vllm"]["trace_headers"] == carrier
    assert engine_link.engine_carrier.get() is None


def test_server_wrapper_keeps_the_carrier_in_flight_and_tells_followers(monkeypatch):
    """What vLLM's abort handling reads (the carrier by verl's request id while the call runs) and is told
    after it; a follower that raises changes nothing for verl."""
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    told = []

    def follower(got, started_ns, request_id, args, kwargs, output):
        told.append((got, request_id, args[0], output, engine_link.carrier_in_flight(request_id)))

    def broken(*args):
        raise RuntimeError("follower bug")

    monkeypatch.setattr(engine_link, "_call_followers", [])
    engine_link.follow_calls(follower)
    engine_link.follow_calls(broken)
    engine_link.follow_calls(follower)  # once only

    async def server_generate(prompt_ids, sampling_params, request_id):
        assert engine_link.carrier_in_flight(request_id) == carrier
        return "out"

    params = {semconv.CARRIER_KEY: carrier}
    result = asyncio.run(engine_link.server_generate_wrapper(server_generate, None, ([7], params, "req-9"), {}))
    assert result == "out"
    assert told == [(carrier, "req-9", [7], "out", None)]  # told after the call, no longer in flight

    async def plain_generate(prompt_ids, sampling_params, request_id):
        assert engine_link.carrier_in_flight(request_id) is None
        return "out"

    asyncio.run(engine_link.server_generate_wrapper(plain_generate, None, ([7], {}, "req-10"), {}))
    assert len(told) == 1  # a call without our carrier: nothing to follow


@pytest.mark.parametrize(
    ("module", "cls"),
    [
        ("verl.workers.rollout.sglang_rollout.async_sglang_server", "SGLangHttpServer"),
        ("verl.workers.rollout.vllm_rollout.vllm_async_server", "vLLMHttpServer"),
    ],
)
def test_real_server_classes_are_wrapped_where_they_import(memory_exporter, module, cls):
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # sglang / vllm are GPU installs
        pytest.skip(f"{module} does not import here: {type(exc).__name__}")
    assert getattr(getattr(mod, cls).__dict__["generate"], "_self_wrapper", None) is engine_link.server_generate_wrapper


def test_same_request_id_twice_in_flight_keeps_each_call_its_own(monkeypatch):
    """verl's ``full_determinism`` ids (``det-{priority}``) repeat across steps, and an asynchronous trainer runs
    two steps' requests at once: two server calls with one id in flight. Each call's engine entry sees its own
    carrier; the table never answers with the other call's (ambiguous: None), and the first call to end does
    not take the other's entry with it."""
    monkeypatch.setattr(engine_link, "_in_flight", {})
    first = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    second = {"traceparent": "00-1bf7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"}
    seen: dict[str, object] = {}

    async def server_generate(prompt_ids, sampling_params, request_id, release: asyncio.Event):
        name = prompt_ids[0]
        seen[f"{name} engine"] = engine_link.vllm_generate_wrapper(lambda **kw: kw, None, (), {})["trace_headers"]
        await release.wait()
        seen[f"{name} lookup at end"] = engine_link.carrier_in_flight(request_id)
        return name

    async def main():
        first_done, second_done = asyncio.Event(), asyncio.Event()
        a = asyncio.create_task(
            engine_link.server_generate_wrapper(
                server_generate, None, (["a"], {semconv.CARRIER_KEY: first}, "det-0"), {"release": first_done}
            )
        )
        await asyncio.sleep(0)
        assert engine_link.carrier_in_flight("det-0") == first  # alone: its own carrier
        b = asyncio.create_task(
            engine_link.server_generate_wrapper(
                server_generate, None, (["b"], {semconv.CARRIER_KEY: second}, "det-0"), {"release": second_done}
            )
        )
        await asyncio.sleep(0)
        assert engine_link.carrier_in_flight("det-0") is None  # two calls, one id: no guess
        first_done.set()
        assert await a == "a"
        assert engine_link.carrier_in_flight("det-0") == second  # the one still running keeps its entry
        second_done.set()
        assert await b == "b"

    asyncio.run(main())
    assert seen["a engine"] == first and seen["b engine"] == second
    assert seen["a lookup at end"] is None  # b was in flight too
    assert seen["b lookup at end"] == second
    assert engine_link._in_flight == {}
