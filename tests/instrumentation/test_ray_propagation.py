"""A real local Ray cluster, 2 AgentLoopWorker actors activated only by the setup hook (the planted run of
tests/instrumentation/planted_run.py, its validation aside).

The demo's driver plays the trainer; each step must be one connected trace across the trainer,
both worker actors, the reward actor and the server actor.
"""

from __future__ import annotations

from collections import Counter

import pytest

from otel_verl import semconv
from tests.instrumentation.planted_run import training_spans

pytestmark = pytest.mark.ray


LEGACY = pytest.mark.parametrize("planted_run", ["legacy"], indirect=True)
V1_SYNC = pytest.mark.parametrize("planted_run", ["v1-sync"], indirect=True)


@pytest.fixture
def demo_run(planted_run):
    """(options, verl's outputs, the spans outside validation) of the trainer's planted run (conftest's
    ``planted_run``): validation's own traces are test_validation.py's."""
    return planted_run.opts, planted_run.result, training_spans(planted_run.spans)


@LEGACY
def test_each_step_is_one_connected_trace(demo_run):
    opts, _result, spans = demo_run
    steps = spans[spans.name == semconv.SPAN_STEP]
    assert sorted(steps.step) == list(range(1, opts.steps + 1))
    assert spans.trace_id.nunique() == opts.steps  # everything, server and reward actors included
    ids = set(spans.span_id)
    parents = spans.parent_id.fillna("")
    assert parents[parents != ""].isin(ids).all()
    roots = spans[parents == ""]
    assert list(roots.name) == [semconv.SPAN_STEP] * opts.steps


@LEGACY
def test_every_level_and_counts(demo_run):
    opts, result, spans = demo_run
    names = Counter(spans.name)
    per_step = opts.prompts * opts.n
    assert names[semconv.SPAN_WORKER] == opts.workers * opts.steps
    assert names[semconv.SPAN_BARRIER] == opts.workers * opts.steps
    assert names[semconv.SPAN_REQUEST] == per_step * opts.steps
    assert names[semconv.SPAN_REWARD] == names["verl.reward.compute"] == per_step * opts.steps
    assert names[semconv.phase_span_name("gen")] == opts.steps
    turns = names[semconv.SPAN_TURN]
    tools = sum(v for k, v in names.items() if k.startswith(semconv.GEN_AI_OP_EXECUTE_TOOL))
    generates = sum(v for k, v in names.items() if k.startswith(semconv.GEN_AI_OP_TEXT_COMPLETION))
    assert generates == turns == names[semconv.ENGINE_SPAN_REQUEST] > 0
    # verl's own __num_turns__ = assistant turns + tool rounds + 1 per trajectory
    verl_turns = sum(sum(out["num_turns"]) for out in result.outputs)
    assert verl_turns == turns + tools + per_step * opts.steps
    # worker spans are in their own processes, ranks 0..n-1, below the trainer's phase
    workers = spans[spans.name == semconv.SPAN_WORKER]
    assert sorted(workers.worker.astype(int)) == [0] * opts.steps + [1] * opts.steps
    by_id = spans.set_index("span_id")
    assert set(by_id.loc[workers.parent_id].name) == {semconv.phase_span_name("gen")}
    # the engine's span nests below the turn's generate span (engine linkage)
    engine = spans[spans.name == semconv.ENGINE_SPAN_REQUEST]
    assert set(by_id.loc[engine.parent_id].name) == {"text_completion model"}


@LEGACY
def test_spool_layout(demo_run):
    from pathlib import Path

    opts, result, _ = demo_run
    run = Path(result.spool_dir)
    for step in range(1, opts.steps + 1):
        files = {p.name for p in (run / f"step_{step}").glob("*.jsonl")}
        assert {"trainer.jsonl", "worker_0.jsonl", "worker_1.jsonl"} <= files


@pytest.fixture
def v1_run(planted_run):
    """verl's V1 sync trainer (``PPOTrainerSync``): AgentLoopManagerTQ dispatches fire-and-forget, the replay
    buffer samples the results from TransferQueue. (options, verl's outputs, the spans outside validation, the
    threads the run left)."""
    pytest.importorskip("transfer_queue")
    run = planted_run
    return run.opts, run.result, training_spans(run.spans), run.threads_left


@V1_SYNC
def test_v1_trainer_steps_are_connected_traces(v1_run):
    opts, _, spans, _ = v1_run
    names = Counter(spans.name)
    ids = set(spans.span_id)
    parents = spans.parent_id.fillna("")
    assert parents[parents != ""].isin(ids).all()
    roots = spans[parents == ""]
    # a trace per step, and the first weight sync (verl's on_init_end, before training)
    assert sorted(roots.name) == [semconv.SPAN_STEP] * opts.steps + [semconv.SPAN_WEIGHT_SYNC]
    assert spans.trace_id.nunique() == opts.steps + 1
    assert names[semconv.SPAN_WORKER] == opts.workers * opts.steps
    assert names[semconv.SPAN_GROUP] == opts.prompts * opts.steps
    assert names[semconv.SPAN_REQUEST] == opts.prompts * opts.n * opts.steps
    assert names["verl.reward.compute"] == names[semconv.SPAN_REQUEST]
    # V1 dispatches inside the step, a few ms before its gen opens: workers hang under that gen (the phase that
    # waits for them), groups under them
    workers = spans[spans.name == semconv.SPAN_WORKER]
    gens = spans[spans.name == semconv.phase_span_name("gen")]
    assert set(workers.parent_id) == set(gens.span_id) and len(gens) == opts.steps
    groups = spans[spans.name == semconv.SPAN_GROUP]
    requests = spans[spans.name == semconv.SPAN_REQUEST]
    assert set(groups.parent_id) == set(workers.span_id) and set(requests.parent_id) == set(groups.span_id)
    for _, worker in workers.iterrows():
        mine = requests[requests.parent_id.isin(groups.span_id[groups.parent_id == worker.span_id])]
        assert len(mine) == opts.prompts * opts.n // opts.workers
        # fire-and-forget: the worker span still lasts until its last trajectory ended
        assert worker.end_ns >= mine.end_ns.max()
    # rollout.n comes from the session id the V1 worker gives each of the n samples
    assert sorted(set(requests.rollout_n.astype(int))) == list(range(opts.n))


@V1_SYNC
def test_v1_sync_barrier_per_worker_until_the_end_of_gen(v1_run):
    """Each worker, done, waits until the trainer's ``gen`` ends (verl's replay buffer handed over the step's batch
    and the replicas went to sleep): one ``verl.barrier`` per worker and step, under its worker span, from the
    worker's end to the end of ``gen``; it is what the analyzer's workers table reads as their barrier wait."""
    from otel_verl.analysis.tables import Tables

    opts, _, spans, _ = v1_run
    barriers = spans[spans.name == semconv.SPAN_BARRIER]
    workers = spans[spans.name == semconv.SPAN_WORKER].set_index("span_id")
    gens = spans[spans.name == semconv.phase_span_name("gen")].set_index("span_id")
    assert len(barriers) == opts.workers * opts.steps and set(barriers.parent_id) == set(workers.index)
    for _, barrier in barriers.iterrows():
        worker = workers.loc[barrier.parent_id]
        gen = gens.loc[worker.parent_id]
        assert (barrier.step, barrier.worker) == (worker.step, worker.worker)
        assert barrier.end_ns == gen.end_ns and barrier.start_ns == min(worker.end_ns, gen.end_ns)
    table = Tables.build(spans).workers.set_index(["step", "worker"])
    for _, barrier in barriers.iterrows():
        assert table.loc[(barrier.step, barrier.worker), "barrier_s"] == pytest.approx(barrier.duration)


@V1_SYNC
def test_v1_sync_inner_update_links_its_groups_and_versions(v1_run):
    """One ``verl.update`` per step links the step's groups, in the step's trace; each sample was generated by
    the weights of the step before (version = step - 1), so it is consumed on-policy (staleness 0)."""
    import json

    opts, _, spans, _ = v1_run
    extra = spans.extra.fillna("").map(lambda e: json.loads(e) if e else {})
    updates = spans[spans.name == semconv.SPAN_UPDATE]
    assert sorted(updates.step) == list(range(1, opts.steps + 1))
    groups = spans[spans.name == semconv.SPAN_GROUP]
    requests = spans[spans.name == semconv.SPAN_REQUEST]
    for row, update in updates.iterrows():
        linked = {link.split(":")[1] for link in update.links.split(",")}
        mine = groups[groups.step == update.step]
        assert linked == set(mine.span_id) and set(mine.trace_id) == {update.trace_id}
        assert extra[row][semconv.VERL_UPDATE_STALENESS_MAX] == 0
        versions = extra[requests.index[requests.step == update.step]]
        assert {v[semconv.VERL_POLICY_VERSION_MIN] for v in versions} == {update.step - 1}
    syncs = spans[spans.name == semconv.SPAN_WEIGHT_SYNC]
    versions = sorted(extra[syncs.index].map(lambda e: e[semconv.VERL_SYNC_VERSION]))
    assert versions == list(range(opts.steps + 1))  # the initial sync, then one per step
    assert {e[semconv.VERL_SYNC_BACKEND] for e in extra[syncs.index]} == {"naive"}


@V1_SYNC
def test_v1_demo_closes_transfer_queue(v1_run):
    """TransferQueue's client loop and storage notify threads (and their ZMQ contexts) end with the run.
    Left to interpreter exit, daemon threads polling ZMQ are torn down mid-call: the likely cause of a
    CI run whose test process died with SIGSEGV after every test had passed."""
    *_, left = v1_run
    assert left == []
