"""Request spans wait while a rollout chunk is open and reach the exporters when it ends (bounded)."""

from __future__ import annotations

import time

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor

from otel_verl import semconv
from otel_verl.config import OtelVerlConfig
from otel_verl.export import flush, provider, tracing
from otel_verl.export.hold import SpanHold
from otel_verl.recording.recorder import SPAN_ID, RequestRecorder
from tests.process_state import reset_tracing


class Arrivals(SpanProcessor):
    """Notes when each request span reaches the processors."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.times: list[float] = []

    def on_end(self, span: ReadableSpan) -> None:
        self.names.append(span.name)
        self.times.append(time.monotonic())


def _flattened(out: list):
    """A release callback collecting the spans of the released parts (lists, or builders of lists)."""

    def release(parts: list) -> None:
        for part in parts:
            out.extend(part() if callable(part) else part)

    return release


def _release_into(out: list) -> SpanHold:
    return SpanHold(30.0, 100, _flattened(out))


def test_held_while_a_chunk_is_open_released_when_one_ends():
    out: list = []
    hold = _release_into(out)
    assert hold.add(["a"]) is False  # no chunk: the caller emits itself
    hold.begin()
    hold.begin()  # two overlapping chunks (V1 fire-and-forget; the async trainers' steps overlap)
    assert hold.add(["b", "c"]) is True and out == []
    hold.end()
    assert out == ["b", "c"] and hold.held == 0  # not kept for the other chunk: its end may be steps away
    assert hold.add(["d"]) is True and out == ["b", "c"]  # that chunk is still open
    hold.end()
    assert out == ["b", "c", "d"] and hold.held == 0
    hold.end()  # unbalanced end never goes negative or raises
    assert hold.add(["e"]) is False


def test_released_early_by_size_and_age():
    out: list = []
    hold = SpanHold(30.0, 3, _flattened(out))
    hold.begin()
    hold.add([1, 2])
    assert out == []
    hold.add([3])
    assert out == [1, 2, 3]  # max_spans reached
    built = SpanHold(30.0, 3, _flattened(out))
    built.begin()
    calls: list = []
    assert built.add(lambda: calls.append(1) or [6, 7], 2) is True
    assert calls == [] and built.held == 2  # a builder counts as the spans it will make, runs only when released
    built.add([8])
    assert calls == [1] and out[-3:] == [6, 7, 8]
    aged = SpanHold(0.05, 1000, _flattened(out))
    aged.begin()
    aged.add([4])
    time.sleep(0.06)
    aged.add([5])
    assert out[-2:] == [4, 5]  # the oldest waited max_seconds
    assert aged.drain() == []


def _soon(check, timeout: float = 10.0) -> bool:
    """``check()`` became true within ``timeout`` (a timer thread on a loaded CI box can be late)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_release_waits_settle_s_after_the_last_chunk_and_never_for_a_later_chunk():
    out: list = []
    hold = SpanHold(30.0, 100, _flattened(out), settle_s=0.2)
    hold.begin()
    hold.add([1])
    hold.end()
    assert out == [] and hold.held == 1  # the worker is still returning the chunk's output
    assert _soon(lambda: out == [1]) and hold.held == 0
    hold.begin()
    hold.add([2])
    hold.end()
    hold.begin()  # the next chunk opens within the wait (rollouts back to back)
    hold.add([3])
    assert _soon(lambda: out == [1, 2, 3])  # released after settle_s all the same, not at that chunk's end
    hold.end()
    hold.begin()
    hold.add([4])
    hold.end()
    assert hold.drain() == [[4]]  # a blocking flush takes them at once; the pending release finds nothing
    time.sleep(0.4)
    assert out == [1, 2, 3]


def test_the_last_chunk_end_cues_one_release_even_with_nothing_held():
    """The release is also the chunk-end flush's cue: it comes settle_s later, empty if nothing was held."""
    releases: list[list] = []
    hold = SpanHold(30.0, 100, releases.append, settle_s=0.1)
    hold.begin()
    hold.begin()
    assert hold.end() is True and releases == []  # a chunk is still open
    assert hold.end() is True
    assert releases == []  # not at the chunk's end, while the worker returns its output
    assert _soon(lambda: releases == [[]])
    time.sleep(0.2)
    assert releases == [[]]  # once
    assert SpanHold(0.0, 100, releases.append).end() is False  # holding off: the caller flushes itself


def test_zero_seconds_turns_holding_off():
    out: list = []
    hold = SpanHold(0.0, 100, _flattened(out))
    hold.begin()
    assert hold.add([1]) is False


@pytest.fixture
def traced(tmp_path):
    reset_tracing()
    config = OtelVerlConfig(spool=True, spool_dir=str(tmp_path), run_id="hold")
    state = provider.setup_tracing("agent_loop_worker", worker_rank=0, config=config, set_global=False)
    arrivals = Arrivals()
    state.processors.append(arrivals)
    yield arrivals
    reset_tracing()


def _request(parent) -> RequestRecorder:
    rec = RequestRecorder(parent, {semconv.VERL_STEP: 1})
    rec.open_turn()
    rec.end(rec.start("text_completion m"))
    rec.finish("completed")
    return rec


def test_chunk_spans_reach_processors_after_the_chunk(traced):
    worker = tracing.tracer().start_span(semconv.SPAN_WORKER)
    flush.hold_begin()
    for _ in range(5):
        _request(worker.get_span_context())
    assert traced.names == []  # nothing exported while the rollout runs
    chunk_end = time.monotonic()
    flush.hold_end()
    flush.flush()  # the release runs on the background thread; flush waits for it
    assert len(traced.names) == 15 and min(traced.times) >= chunk_end
    spooled = sum(1 for _ in (tracing.get_state().spool.run_dir).rglob("*.jsonl"))
    assert spooled == 1 and tracing.get_state().spool.spans_written == 15


def test_held_requests_are_completed_at_release_and_a_failing_one_loses_only_itself(traced):
    flush.hold_begin()
    first, _, last = (_request(None) for _ in range(3))
    assert first.recorded is not None  # the recorded turn: its span is built at release, off the event loop
    turn = first.recorded[0]
    assert semconv.VERL_STEP not in first.attributes_of(turn)

    def fail() -> list:
        raise RuntimeError("build failed")

    tracing.get_state().hold._held[1] = fail  # the second request's builder breaks
    flush.hold_end()
    flush.flush()
    assert len(traced.names) == 6 and first.recorded is None  # built, the recording let go
    assert first.nodes[1].span_id == turn[SPAN_ID] and first.nodes[1].attributes[semconv.VERL_STEP] == 1
    assert last.nodes[1].attributes[semconv.VERL_STEP] == 1


def test_blocking_flush_and_shutdown_take_held_spans(traced):
    flush.hold_begin()
    _request(None)
    assert flush.flush() and len(traced.names) == 3  # a blocking flush never leaves spans behind
    _request(None)
    spool = tracing.get_state().spool
    provider.shutdown_tracing()  # chunk still open: shutdown exports what is held
    assert spool.spans_written == 6


def test_outside_a_chunk_spans_go_straight_to_the_processors(traced):
    _request(None)
    assert len(traced.names) == 3


class SlowArrivals(Arrivals):
    """A processor slow enough that the background release is still running when the caller goes on."""

    def on_end(self, span: ReadableSpan) -> None:
        time.sleep(0.02)
        super().on_end(span)


def test_flush_and_shutdown_wait_for_a_release_already_under_way(tmp_path):
    for finish in (flush.flush, provider.shutdown_tracing, reset_tracing):
        reset_tracing()
        config = OtelVerlConfig(spool=True, spool_dir=str(tmp_path / finish.__name__), run_id="hold")
        state = provider.setup_tracing("agent_loop_worker", worker_rank=0, config=config, set_global=False)
        slow = SlowArrivals()
        state.processors.insert(0, slow)  # ahead of the spool: the release is mid-way when we finish
        flush.hold_begin()
        for _ in range(4):
            _request(None)
        flush.hold_end()  # hands 12 spans to the background thread and returns at once
        finish()
        assert len(slow.names) == 12 and state.spool.spans_written == 12, finish.__name__
    reset_tracing()
