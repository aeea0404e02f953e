"""Inner-update spans (``verl.update``) and their links to the sample groups they consumed, without Ray.

verl's real ``PPOTrainer._step_once`` is wrapped; a trainer object with just what it reads stands in for the
rest of verl's trainer, and the batch it returns is the ``KVBatchMeta`` verl's replay buffer hands out
(TransferQueue keys and tags), so the links are made from the same data as in a run.
"""

from __future__ import annotations

import uuid

import pytest

from otel_verl import semconv as sc
from otel_verl.instrumentation.sample_groups import group_span_id, group_trace_id, uid_of_key
from otel_verl.instrumentation.updates import consumed_groups, link_attributes


def _batch(groups: dict[str, list[tuple[int, int | None, int | None]]], padding: int = 0):
    """A ``KVBatchMeta`` over ``uid -> [(dispatch step, min_global_steps, max_global_steps)]`` per sample."""
    from transfer_queue import KVBatchMeta

    keys, tags = [], []
    for uid, samples in groups.items():
        for session, (step, low, high) in enumerate(samples):
            keys.append(f"{uid}_{session}_0")
            tags.append({"status": "success", "global_steps": step, "min_global_steps": low, "max_global_steps": high})
    for i in range(padding):
        keys.append(f"pad{uuid.uuid4().hex}_{i}_0")
        tags.append({"is_padding": True, "global_steps": 0, "min_global_steps": 0, "max_global_steps": 0})
    return KVBatchMeta(partition_id="train", keys=keys, tags=tags)


def test_group_ids_follow_from_the_uid() -> None:
    uid = str(uuid.uuid4())
    assert group_trace_id(uid) == uuid.UUID(uid).int
    assert group_span_id(uid) == group_span_id(uid) != group_span_id(str(uuid.uuid4()))
    assert 0 < group_span_id(uid) < 2**64 and 0 < group_trace_id("not-a-uuid") < 2**128
    assert uid_of_key(f"{uid}_3_0") == uid


def test_consumed_groups_and_staleness_as_verl_defines_it() -> None:
    """verl's ``_compute_metrics``: staleness = (step - 1) - max_global_steps (a lower bound), worst =
    (step - 1) - min_global_steps; a group's link reports its stalest sample; padding is left out."""
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    batch = _batch({a: [(3, 2, 4), (3, 3, 5)], b: [(5, 5, 5)]}, padding=2)
    groups = consumed_groups(batch)
    assert set(groups) == {a, b}
    link = link_attributes(groups[a], consuming_step=6)
    assert link == {
        sc.VERL_DISPATCH_STEP: 3,
        sc.VERL_POLICY_VERSION_MIN: 2,
        sc.VERL_POLICY_VERSION_MAX: 5,
        sc.VERL_GROUP_NUM_SAMPLES: 2,
        sc.VERL_SAMPLE_STALENESS: (6 - 1) - 4,  # the sample whose newest weights are the oldest
        sc.VERL_SAMPLE_STALENESS_WORST: (6 - 1) - 2,
    }
    assert link_attributes(groups[b], consuming_step=6)[sc.VERL_SAMPLE_STALENESS] == 0  # on-policy


def test_no_versions_no_staleness() -> None:
    """The legacy path's engine reports no version: the link says what is known, nothing invented."""
    uid = str(uuid.uuid4())
    link = link_attributes(consumed_groups(_batch({uid: [(1, None, None)]}))[uid], consuming_step=1)
    assert link == {sc.VERL_DISPATCH_STEP: 1, sc.VERL_GROUP_NUM_SAMPLES: 1}


@pytest.mark.parametrize("mode", ["sync", "separate_async"])
def test_update_span_links_each_consumed_group(spans_of, mode: str) -> None:
    """The wrapper of verl's ``_step_once``: one ``verl.update`` under the step, the update's phases (verl's
    timers) inside it with its index, and one link per consumed group to the group's span: in the step's
    trace under the sync trainer, in the group's own trace under the async ones."""
    from verl.utils.profiler import marked_timer

    from otel_verl.instrumentation.trainer import track_trainer
    from otel_verl.instrumentation.updates import step_once_wrapper

    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    batch = _batch({a: [(2, 1, 2), (2, 2, 2)], b: [(3, 2, 2)]}, padding=1)

    class Trainer:
        trainer_mode = mode
        parameter_sync_step = 2
        global_steps = 4
        local_trigger_step = 1

    def step_once(metrics: dict, timing_raw: dict, sample_batch_size: int):
        with marked_timer("gen", timing_raw):
            pass
        with marked_timer("update_actor", timing_raw):
            pass
        return batch

    trainer = Trainer()
    track_trainer(trainer)
    try:
        timing: dict[str, float] = {}
        with marked_timer("step", timing):
            result = step_once_wrapper(step_once, trainer, ({}, timing, 2), {})
    finally:
        track_trainer(None)
    assert result is batch
    spans = {s.name: s for s in spans_of()}
    step, update = spans[sc.SPAN_STEP], spans[sc.SPAN_UPDATE]
    assert step.attributes[sc.VERL_TRAINER_MODE] == mode and step.attributes[sc.VERL_PARAMETER_SYNC_STEP] == 2
    assert update.parent.span_id == step.context.span_id
    assert update.attributes[sc.VERL_UPDATE_INDEX] == 1 and update.attributes[sc.VERL_STEP] == 4
    assert update.attributes[sc.VERL_UPDATE_NUM_GROUPS] == 2 and update.attributes[sc.VERL_UPDATE_NUM_SAMPLES] == 3
    for phase in ("gen", "update_actor"):
        span = spans[sc.phase_span_name(phase)]
        assert span.parent.span_id == update.context.span_id and span.attributes[sc.VERL_UPDATE_INDEX] == 1
    links = {link.context.span_id: link for link in update.links}
    assert set(links) == {group_span_id(a), group_span_id(b)}
    for uid in (a, b):
        trace_id = group_trace_id(uid) if mode != "sync" else update.context.trace_id
        assert links[group_span_id(uid)].context.trace_id == trace_id
    assert links[group_span_id(a)].attributes[sc.VERL_SAMPLE_STALENESS] == (4 - 1) - 2
    assert update.attributes[sc.VERL_UPDATE_STALENESS_MAX] == (4 - 1) - 2


def test_an_exception_in_the_update_passes_through(spans_of) -> None:
    from otel_verl.instrumentation.updates import step_once_wrapper

    def failing(*_args):
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        step_once_wrapper(failing, object(), ({}, {}, 1), {})
    (update,) = [s for s in spans_of() if s.name == sc.SPAN_UPDATE]
    assert not update.status.is_ok and update.attributes[sc.ERROR_TYPE] == "KeyError" and not update.links
