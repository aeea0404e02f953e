"""Barriers and remote-reward parents when ``verl.DataProto`` is verl's NeoProto view (verl#7557, the ``neo`` line).

verl's real ``AgentLoopManager.generate_sequences`` and ``AgentLoopWorker`` (two workers, in this process, each
call's batch and answer pickled as a Ray call pickles them) and the real ``RewardLoopWorker.compute_score``, with
``verl.DataProto`` and the agent loop's ``DataProto`` replaced by the view as built in
:mod:`tests.instrumentation.neoproto_view` (verl#7557's modules take ``from verl import DataProto``). The view's
``concat`` and ``__post_init__`` never reach ``verl.protocol.DataProto``'s, and its ``meta_info`` is no ``dict``:
before, no ``verl.barrier`` was made, the workers' end times leaked into verl's ``meta_info`` and no
``verl.reward.compute`` span was parented.
"""

from __future__ import annotations

import asyncio
import pickle
from typing import Any

import pytest

from otel_verl import semconv
from otel_verl.demo import trainer as demo_batches
from otel_verl.export import tracing
from otel_verl.instrumentation import ray_carrier
from otel_verl.wrapping import registry
from tests.instrumentation import neoproto_view
from tests.instrumentation.harness import build_worker


def _over_ray(value: Any) -> Any:
    """What the other side of a Ray call gets: the object pickled and rebuilt."""
    return pickle.loads(pickle.dumps(value))


class _Remote:
    def __init__(self, fn: Any) -> None:
        self.fn = fn

    def remote(self, *args: Any) -> Any:
        return self.fn(*args)


class _WorkerHandle:
    """An AgentLoopWorker actor's handle: ``generate_sequences.remote(chunk)`` across a pickled boundary, run on
    an event loop of its own (in a thread) as each actor runs its calls on its own loop."""

    def __init__(self, worker: Any) -> None:
        def run(chunk: Any) -> Any:
            return _over_ray(asyncio.run(worker.generate_sequences(_over_ray(chunk))))

        async def generate(chunk: Any) -> Any:
            return await asyncio.to_thread(run, chunk)

        self.generate_sequences = _Remote(generate)


class _RewardHandle:
    """A RewardLoopWorker actor's handle: ``compute_score.remote(data)`` across a pickled boundary."""

    def __init__(self, compute_score: Any) -> None:
        async def score(data: Any) -> Any:
            return await compute_score(_over_ray(data))

        self.compute_score = _Remote(score)


@pytest.fixture
def neo_data_proto(monkeypatch: pytest.MonkeyPatch) -> type:
    """``from verl import DataProto`` gives the NeoProto view, as on verl's neo after #7557 (set before
    ``instrument()`` runs, so the seams find it there)."""
    import verl
    from verl.experimental.agent_loop import agent_loop

    monkeypatch.setattr(verl, "DataProto", neoproto_view.DataProto)
    monkeypatch.setattr(agent_loop, "DataProto", neoproto_view.DataProto)
    return neoproto_view.DataProto


@pytest.fixture
def neo_spans_of(neo_data_proto, spans_of):
    return spans_of


def _prompts(workers: int) -> Any:
    from otel_verl.demo.runner import DemoOptions

    opts = DemoOptions(prompts=2 * workers, n=2)
    return neoproto_view.DataProto.from_verl(demo_batches._batch(opts, 1))


def test_barrier_per_worker_with_the_neoproto_view(neo_spans_of) -> None:
    from verl.experimental.agent_loop.agent_loop import AgentLoopManager

    view = neoproto_view.DataProto
    assert registry.is_wrapped(view.__dict__["concat"]) and registry.is_wrapped(view.__dict__["__post_init__"])
    manager = AgentLoopManager.__new__(AgentLoopManager)  # its __init__ starts Ray actors: only the call is verl's
    manager.agent_loop_workers = [_WorkerHandle(build_worker()[0]) for _ in range(2)]
    prompts = _prompts(workers=2)
    with tracing.tracer().start_as_current_span("gen") as gen:
        output = manager.generate_sequences(prompts)  # verl's auto_await runs it to the end here

    assert type(output) is view and len(output) == len(prompts)
    assert ray_carrier.WORKER_INFO_KEY not in output.meta_info and semconv.CARRIER_KEY not in output.meta_info
    assert semconv.CARRIER_KEY not in prompts.meta_info  # the manager took its carrier back
    spans = neo_spans_of()
    workers = {s.context.span_id: s for s in spans if s.name == semconv.SPAN_WORKER}
    barriers = [s for s in spans if s.name == semconv.SPAN_BARRIER]
    assert len(workers) == 2 and all(w.parent.span_id == gen.get_span_context().span_id for w in workers.values())
    assert len(barriers) == 2 and {b.parent.span_id for b in barriers} == set(workers)
    slowest_end = max(w.end_time for w in workers.values())
    for barrier in barriers:
        assert barrier.start_time == workers[barrier.parent.span_id].end_time
        assert barrier.end_time == slowest_end


def test_remote_reward_parent_with_the_neoproto_view(neo_spans_of) -> None:
    worker, _, _ = build_worker(remote_reward=True)
    verl_compute_score = worker.reward_loop_worker_handles[0].compute_score.fn  # RewardLoopWorker.compute_score
    worker.reward_loop_worker_handles = [_RewardHandle(verl_compute_score)]
    output = asyncio.run(worker.generate_sequences(_prompts(workers=1)))

    assert type(output) is neoproto_view.DataProto
    spans = neo_spans_of()
    rewards = {s.context.span_id: s for s in spans if s.name == semconv.SPAN_REWARD}
    computes = [s for s in spans if s.name == "verl.reward.compute"]
    assert len(rewards) == len(computes) == len(output) == 4  # 2 prompts × 2 samples
    assert {c.parent.span_id for c in computes} == set(rewards)
    for compute in computes:
        reward = rewards[compute.parent.span_id]
        assert compute.context.trace_id == reward.context.trace_id
        assert reward.start_time <= compute.start_time and compute.end_time <= reward.end_time


def test_one_wrapper_when_verl_dataproto_is_the_old_class(spans_of) -> None:
    """verl 0.9.1: ``verl.DataProto`` is ``verl.protocol.DataProto``; its two seams wrap each function once."""
    import verl
    import verl.protocol

    assert verl.DataProto is verl.protocol.DataProto
    for name in ("concat", "__post_init__"):
        wrapped = verl.protocol.DataProto.__dict__[name]
        assert registry.is_wrapped(wrapped) and not registry.is_wrapped(wrapped.__wrapped__)
