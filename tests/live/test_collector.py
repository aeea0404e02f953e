"""The collector's rules (otel_verl/live/collector.py): when a step is computed, what is late, what is kept.

The account is a recording stand-in here (what reached it is the point); the real account runs in
tests/live/test_inprocess_run.py and the demo's runs.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from otel_verl.live import names as n
from otel_verl.live.collector import LiveCollector
from otel_verl.live.metrics import LiveStep
from otel_verl.live.sink import LocalSink
from otel_verl.live.span_feed import LiveSpanExporter


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Recorder:
    """Stands in for ``LiveAccount.add``: notes which lines each step was computed from."""

    def __init__(self) -> None:
        self.seen: dict[int, list[str]] = {}
        self.computed = threading.Event()

    def __call__(self, source: Path, step: int) -> LiveStep:
        self.seen[step] = sorted(
            line for f in sorted(source.iterdir()) for line in f.read_text().splitlines() if line.strip()
        )
        self.computed.set()
        return LiveStep(step, {n.STEP: float(step)}, {n.VERDICT: f"step {step}: ok"})


def line(tag: str) -> bytes:
    return json.dumps({"tag": tag}).encode()


@pytest.fixture
def made(tmp_path: Path):
    clock, account = Clock(), Recorder()
    c = LiveCollector(account, root=tmp_path, settle_s=1.0, clock=clock)
    yield c, clock, account
    c.close()


def _wait_for(c: LiveCollector, step: int, after: int = 0) -> LiveStep:
    """Step ``step``'s result among those after ``after`` (a later step's may already be there too)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        mine = [r for _, r in c.results(after, timeout_s=1) if r.step == step]
        if mine:
            return mine[-1]
    raise AssertionError(f"no result for step {step}")


def test_a_done_step_is_computed_once_its_lines_settle(made) -> None:
    c, clock, account = made
    c.add([(1, 3, line("a")), (None, 1, line("engine"))])
    c.step_done(1, lag=0)
    assert c.results(0, timeout_s=0.3) == []  # not settled yet
    clock.now += 1.5
    _wait_for(c, 1)
    assert account.seen[1] == [line("a").decode(), line("engine").decode()]  # with the spans of no step
    assert c.pending() == []
    assert not list(c.root.glob("step_*")), "a computed step's files are removed"


def test_lines_after_the_step_was_computed_are_counted_late(made) -> None:
    c, clock, _ = made
    c.add([(1, 3, line("a"))])
    c.step_done(1, lag=0)
    clock.now += 1.5
    _wait_for(c, 1)
    c.add([(1, 7, line("late"))])
    c.step_done(2, lag=0)
    c.add([(2, 2, line("b"))])
    clock.now += 1.5
    assert _wait_for(c, 2, after=1).metrics[n.LATE_SPANS] == 7


def test_async_steps_wait_for_the_next_step(made) -> None:
    """lag 1: step n is computed once step n+1 is done too (its groups generate into step n+1)."""
    c, clock, account = made
    c.add([(1, 3, line("a"))])
    c.step_done(1, lag=1)
    clock.now += 5
    assert c.results(0, timeout_s=0.5) == []
    c.add([(1, 2, line("a-later")), (2, 1, line("b"))])
    c.step_done(2, lag=1)
    clock.now += 1.5
    _wait_for(c, 1)
    assert account.seen[1] == sorted([line("a").decode(), line("a-later").decode()])


def test_finish_computes_what_is_left(made) -> None:
    c, clock, _ = made
    c.add([(1, 3, line("a")), (2, 3, line("b"))])
    c.step_done(1, lag=1)  # never followed by step 2's mark
    c.finish()
    clock.now += 1.5
    assert c.drain(timeout_s=10)
    assert [r.step for _, r in c.results(0, timeout_s=1)] == [1, 2]


def test_no_step_segments_older_than_the_step_before_go(made) -> None:
    c, clock, _ = made
    for step in range(1, 5):
        c.add([(step, 1, line(str(step))), (None, 1, line(f"engine{step}"))])
        c.step_done(step, lag=0)
        clock.now += 1.5
        _wait_for(c, step, after=step - 1)
    segments = sorted(int(p.stem) for p in (c.root / "no_step").glob("*.jsonl"))
    assert segments and min(segments) >= 4 - 1


def test_an_engine_span_filed_steps_later_still_reaches_its_step(made) -> None:
    """A process's batch processor sends every 2 s: where steps are shorter, an engine's spans of step 1 (no step
    of their own) arrive while the trainer is in step 3, and are filed there."""
    c, clock, account = made
    c.add([(1, 1, line("step1"))])
    c.step_done(1)
    c.step_done(2)
    c.add([(None, 1, line("engine-of-step1"))])  # the trainer is in step 3 now
    clock.now += 1.5
    _wait_for(c, 1)
    assert account.seen[1] == sorted([line("step1").decode(), line("engine-of-step1").decode()])


def test_the_settle_outlasts_the_workers_hold() -> None:
    from otel_verl.export.provider import HOLD_SETTLE_S
    from otel_verl.live import collector

    assert collector.WORKER_HOLD_S == HOLD_SETTLE_S and collector.SETTLE_S > HOLD_SETTLE_S


def test_the_hold_counts_from_the_rollouts_end(tmp_path: Path) -> None:
    """Issue 51: the wait at ``finish`` was the settle (then 4 s) after the last step. The workers' hold (1 s) runs
    from their chunk's end, the rollout's end in the synchronous trainers: what of it passed in the phases after
    ``gen`` is not waited for again. Never below the live delay and the trip; without the rollout's end, all of it."""
    from otel_verl.live import collector

    clock, account = Clock(), Recorder()
    c = LiveCollector(account, root=tmp_path, clock=clock)  # the default settle
    try:
        c.add([(1, 1, line("one"))])
        c.step_done(1, lag=0, rollout_age_s=0.8)  # gen ended 0.8 s before the step was logged
        clock.now += collector.SETTLE_S - 0.8 - 0.1
        assert c.results(0, timeout_s=0.7) == []
        clock.now += 0.2
        _wait_for(c, 1)
        c.add([(2, 1, line("two"))])
        c.step_done(2, lag=0)  # no rollout end known: the whole settle
        clock.now += collector.SETTLE_S - 0.8 + 0.1
        assert [r.step for _, r in c.results(1, timeout_s=0.7)] == []
        clock.now += 0.8
        _wait_for(c, 2, after=1)
        c.add([(3, 1, line("three"))])
        c.step_done(3, lag=0, rollout_age_s=30.0)  # long phases after gen: the hold long over
        clock.now += collector.LIVE_DELAY_S + collector.TRIP_S - 0.1
        assert [r.step for _, r in c.results(2, timeout_s=0.7)] == []
        clock.now += 0.2
        _wait_for(c, 3, after=2)
    finally:
        c.close()


def test_the_exporter_sorts_spans_by_step_and_encodes_nothing_without_a_collector(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from otel_verl import semconv
    from otel_verl.live import sink as sink_module

    exporter = LiveSpanExporter("exporter-test")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("t")
    tracer.start_span("nobody listens", attributes={semconv.VERL_STEP: 1}).end()
    assert exporter.spans_sent == 0

    account = Recorder()
    local = LocalSink(LiveCollector(account, root=tmp_path, settle_s=0.0))
    sink_module._sinks["exporter-test"] = local
    try:
        for name, step in (("a", 1), ("b", 2), ("engine", None)):
            tracer.start_span(name, attributes={semconv.VERL_STEP: step} if step else {}).end()
        local.step_done(1, 0)
        assert account.computed.wait(10)
        names = sorted(s["name"] for text in account.seen[1] for s in _spans(text))
        assert names == ["a", "engine"]  # step 2's span is not there; one of no step may belong to step 1
        assert exporter.spans_sent == 3
    finally:
        sink_module.forget("exporter-test")


def _spans(line_text: str) -> list[dict]:
    doc = json.loads(line_text)
    return [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]


def test_steps_are_computed_in_order_even_when_a_later_one_settles_first(made) -> None:
    """Each account is judged among the window's earlier ones: on a loaded machine an async step 1 still got lines
    after step 2 had settled, and step 2 was computed first (both rows then differed from ``analyze``'s)."""
    c, clock, _ = made
    c.add([(1, 1, line("a")), (2, 1, line("b"))])
    c.step_done(1, lag=1)
    c.step_done(2, lag=1)
    c.finish()
    clock.now += 1.5
    c.add([(1, 1, line("a-still"))])  # step 1 has not settled; step 2 has
    assert c.results(0, timeout_s=0.6) == []
    clock.now += 1.5
    assert c.drain(timeout_s=10)
    assert [r.step for _, r in c.results(0, timeout_s=1)] == [1, 2]


def test_a_step_that_never_settles_is_computed_once_enough_later_steps_are_done(made) -> None:
    c, _, account = made
    c.add([(1, 1, line("a"))])
    c.step_done(1, lag=0)
    for step in range(2, 6):
        c.add([(step, 1, line(str(step))), (1, 1, line(f"a{step}"))])  # step 1 keeps getting lines
        c.step_done(step, lag=0)
    assert _wait_for(c, 1).step == 1
    assert len(account.seen[1]) == 5


def test_an_async_steps_engine_spans_filed_in_the_step_before_reach_it(made) -> None:
    """An async step's groups start generating in the step before it: their engine spans may be filed before that
    step is even done."""
    c, clock, account = made
    c.add([(None, 1, line("engine-of-step2"))])  # no step done yet: segment 0
    c.add([(1, 1, line("a"))])
    c.step_done(1, lag=1)
    c.add([(2, 1, line("b"))])
    c.step_done(2, lag=1)
    c.step_done(3, lag=1)
    c.finish()
    clock.now += 1.5
    assert c.drain(timeout_s=10)
    assert [r.step for _, r in c.results(0, timeout_s=1)] == [1, 2]
    assert line("engine-of-step2").decode() in account.seen[2]
