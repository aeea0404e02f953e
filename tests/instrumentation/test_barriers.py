"""Barriers and the worker's parent under verl's V1 trainers, without Ray (the Ray demo runs check the whole path).

The trainer's side runs verl's real timers (``marked_timer``) and otel_verl's wrappers of the V1 manager and of
``_step_once``; a worker actor is stood in for by an object whose ``__ray_call__.remote`` runs the function in
this process, as Ray runs it in the worker's. The worker's side starts real chunk spans from the carrier the
manager put into the batch (:func:`otel_verl.instrumentation.rollout.chunk._start_chunk`).
"""

from __future__ import annotations

from typing import Any

import pytest

from otel_verl import semconv as sc
from otel_verl.instrumentation.rollout import barriers


class _Call:
    def __init__(self, actor: _Actor) -> None:
        self.actor = actor

    def remote(self, fn: Any, *args: Any) -> None:
        self.actor.calls.append(args)
        fn(self.actor, *args)


class _Actor:
    """A worker actor's handle: ``__ray_call__.remote(fn, *args)`` runs ``fn(actor, *args)``."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.__ray_call__ = _Call(self)


class _Manager:
    def __init__(self, workers: int) -> None:
        self.agent_loop_workers = [_Actor() for _ in range(workers)]


@pytest.fixture(autouse=True)
def fresh_barriers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(barriers, "_rollout", barriers._WorkerRollout())
    monkeypatch.setattr(barriers, "_workers", [])
    monkeypatch.setattr(barriers, "_announced", None)


def _prompts(step: int, validate: bool = False) -> Any:
    """A V1 batch as verl's ``_next_train_batch`` tags it (``global_steps``; ``validate`` for validation)."""
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    batch = TensorDict({}, batch_size=[2])
    tu.assign_non_tensor_data(batch, "global_steps", step)
    if validate:
        tu.assign_non_tensor_data(batch, "validate", True)
    return batch


def _v1_step(mode: str, steps: int = 1, updates: int = 1) -> tuple[_Manager, list[dict[str, str]]]:
    """``steps`` V1 steps as verl's ``fit``/``step``/``_step_once`` time them, the rollout dispatched by the wrapped
    ``AgentLoopManagerTQ.generate_sequences`` in ``prepare_step``; the manager and each dispatch's carrier."""
    from verl.utils.profiler import marked_timer

    from otel_verl.instrumentation.rollout.manager import generate_sequences_wrapper
    from otel_verl.instrumentation.trainer import track_trainer
    from otel_verl.instrumentation.updates import step_once_wrapper

    class Trainer:
        trainer_mode = mode
        parameter_sync_step = updates
        global_steps = 1
        local_trigger_step = 0

    manager, carriers = _Manager(2), []

    def dispatch(prompts: Any) -> None:
        from otel_verl.instrumentation import ray_carrier

        carriers.append(ray_carrier.carrier_dict(prompts.get(ray_carrier.TENSORDICT_KEY).data))

    def step_once(metrics: dict, timing_raw: dict, sample_batch_size: int) -> None:
        with marked_timer("gen", timing_raw):
            pass
        with marked_timer("update_actor", timing_raw):
            pass

    trainer = Trainer()
    track_trainer(trainer)
    try:
        for step in range(1, steps + 1):
            trainer.global_steps = step
            timing: dict[str, float] = {}
            with marked_timer("step", timing):
                generate_sequences_wrapper(dispatch, manager, (_prompts(step),), {})
                for index in range(updates):
                    trainer.local_trigger_step = index
                    step_once_wrapper(step_once, trainer, ({}, timing, 2), {})
                with marked_timer("update_weights", timing):
                    pass
    finally:
        track_trainer(None)
    return manager, carriers


@pytest.mark.parametrize("mode", ["sync", "colocate_async", "separate_async"])
def test_v1_workers_hang_under_the_first_gen_and_hear_the_sync_point(spans_of, mode: str) -> None:
    """verl's V1 ``step`` dispatches before its first ``gen`` opens: the carrier names that ``gen`` (its span id
    planned at the dispatch), verl's timer keeps its own start; each worker is told the step's sync point once:
    the end of ``gen`` (sync, colocate-async), the start of ``update_weights`` (separate-async)."""
    updates = 4 if mode == "separate_async" else 1
    manager, carriers = _v1_step(mode, steps=2, updates=updates)
    spans = spans_of()
    for step in (1, 2):
        mine = [s for s in spans if s.attributes.get(sc.VERL_STEP) == step]
        (step_span,) = [s for s in mine if s.name == sc.SPAN_STEP]
        gens = sorted((s for s in mine if s.name == sc.phase_span_name("gen")), key=lambda s: s.start_time)
        assert len(gens) == updates
        parent = carriers[step - 1]["traceparent"].split("-")
        assert (int(parent[1], 16), int(parent[2], 16)) == (step_span.context.trace_id, gens[0].context.span_id)
        (weights,) = [s for s in mine if s.name == sc.phase_span_name("update_weights")]
        at = weights.start_time if mode == "separate_async" else gens[0].end_time
        point = sc.BARRIER_WEIGHT_SYNC if mode == "separate_async" else sc.BARRIER_SAMPLE_END
        for actor in manager.agent_loop_workers:
            assert actor.calls[step - 1] == (step, at, point)
    assert all(len(actor.calls) == 2 for actor in manager.agent_loop_workers)
    assert not [s for s in spans if s.name == sc.SPAN_BARRIER]  # no chunk reached these workers


def test_legacy_dispatch_inside_gen_keeps_its_parent(spans_of) -> None:
    """The legacy trainer dispatches inside ``gen``: the carrier names the current span, nobody is announced to."""
    from verl.protocol import DataProto
    from verl.utils.profiler import marked_timer

    from otel_verl.instrumentation.rollout.manager import generate_sequences_wrapper

    manager, carriers = _Manager(2), []

    def dispatch(prompts: Any) -> None:
        carriers.append(dict(prompts.meta_info[sc.CARRIER_KEY]))

    with marked_timer("step", {}), marked_timer("gen", {}):
        generate_sequences_wrapper(dispatch, manager, (DataProto(meta_info={"global_steps": 1}),), {})
    (gen,) = [s for s in spans_of() if s.name == sc.phase_span_name("gen")]
    assert int(carriers[0]["traceparent"].split("-")[2], 16) == gen.context.span_id
    assert not any(actor.calls for actor in manager.agent_loop_workers)


def _chunk(step: int, carrier: dict[str, str] | None, validate: bool = False) -> Any:
    """A worker chunk started from the batch the manager dispatched (as ``AgentLoopWorker.generate_sequences``)."""
    from opentelemetry import context as otel_context

    from otel_verl.instrumentation import ray_carrier
    from otel_verl.instrumentation.rollout.chunk import CURRENT_CHUNK, _start_chunk

    batch = _prompts(step, validate)
    if carrier is not None:
        ray_carrier.put_in_tensordict(batch, carrier)
    chunk, (token, chunk_token) = _start_chunk(batch)
    CURRENT_CHUNK.reset(chunk_token)
    otel_context.detach(token)
    return chunk


def _end(chunk: Any) -> int:
    chunk.dispatched = True
    chunk.maybe_end()
    return chunk.end_ns


def test_worker_barrier_runs_from_its_last_chunk_to_the_sync_point(spans_of) -> None:
    """Done before the sync point: the barrier hangs under the chunk the worker was handed in that step and runs
    from the end of its last chunk (here an older one, still running when the step's chunk ended) to the sync
    point; a warm-up chunk (no step trace) counts as work but is no parent, a chunk that came after the sync
    point does not count."""
    import time

    _, (carrier,) = _v1_step("sync")
    warm_up = _chunk(1, None)
    this_step = _chunk(1, carrier)
    _end(this_step)
    last = _end(warm_up)
    sync = time.time_ns()
    time.sleep(0.002)
    later = _chunk(2, carrier)  # the next step's chunk, here before the announcement: it started after the sync point
    barriers.at_sync_point(None, 1, sync, sc.BARRIER_SAMPLE_END)
    barriers.at_sync_point(None, 3, sync, sc.BARRIER_SAMPLE_END)  # no chunk of step 3 here: no barrier
    _end(later)
    spans = spans_of()
    (barrier,) = [s for s in spans if s.name == sc.SPAN_BARRIER]
    (worker,) = [s for s in spans if s.name == sc.SPAN_WORKER and s.attributes.get(sc.VERL_STEP) == 1 and s.parent]
    assert worker.parent.span_id == int(carrier["traceparent"].split("-")[2], 16)
    assert barrier.parent.span_id == worker.context.span_id and barrier.context.trace_id == worker.context.trace_id
    assert (barrier.start_time, barrier.end_time) == (last, sync)
    assert barrier.attributes[sc.VERL_STEP] == 1 and barrier.attributes[sc.VERL_BARRIER_REQUESTS_IN_FLIGHT] == 0
    assert barrier.attributes[sc.VERL_BARRIER_SYNC_POINT] == sc.BARRIER_SAMPLE_END
    assert barrier.attributes[sc.VERL_WORKER_RANK] == worker.attributes[sc.VERL_WORKER_RANK]


def test_worker_busy_at_the_sync_point_waited_nothing(spans_of) -> None:
    """Async trainers stop the rollout mid-work: a worker with requests in flight did not wait (0 s at the sync
    point, the requests counted); one whose chunk ended after the sync point did not either."""
    import time

    _, (carrier,) = _v1_step("separate_async", updates=1)
    busy = _chunk(1, carrier)
    busy.request_started()
    busy.request_started()
    sync = time.time_ns()
    barriers.at_sync_point(None, 1, sync, sc.BARRIER_WEIGHT_SYNC)
    busy.request_finished("completed")
    busy.request_finished("completed")
    _end(busy)
    barriers.at_sync_point(None, 1, sync, sc.BARRIER_WEIGHT_SYNC)  # told late: its chunk ended after the point
    found = [s for s in spans_of() if s.name == sc.SPAN_BARRIER]
    assert [(s.start_time, s.end_time) for s in found] == [(sync, sync)] * 2
    assert [s.attributes[sc.VERL_BARRIER_REQUESTS_IN_FLIGHT] for s in found] == [2, 0]
    assert {s.attributes[sc.VERL_BARRIER_SYNC_POINT] for s in found} == {sc.BARRIER_WEIGHT_SYNC}


def test_validation_chunks_are_no_work_of_the_step(spans_of) -> None:
    """A validation rollout's chunk (``validate`` in the batch) neither opens nor ends the worker's work."""
    _, (carrier,) = _v1_step("sync")
    last = _end(_chunk(1, carrier))
    validation = _chunk(1, carrier, validate=True)
    sync = last + 1_000_000
    barriers.at_sync_point(None, 1, sync, sc.BARRIER_SAMPLE_END)
    _end(validation)
    (barrier,) = [s for s in spans_of() if s.name == sc.SPAN_BARRIER]
    assert (barrier.start_time, barrier.end_time) == (last, sync)
