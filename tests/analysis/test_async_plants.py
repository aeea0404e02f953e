"""Issue 50 (items 2 and 6): the asynchronous trainers' own planted problems and how the analyzer tells them.

- ``slow-replica``: one engine replica decodes several times slower; the trainer waits for its samples. Told at
  the step whose trainer waited for them, with the dispatch that produced them (``details.dispatch_step``).
- ``growing-sync``: the weight sync grows step after step; told as the weight sync's trend, not "the trainer's
  phases".
- The pipeline filling is the trainer's first step (``verl.trainer.first_step``), not the first step analysed.

Unit checks first; then both asynchronous demos planted (serial: they start Ray)."""

from __future__ import annotations

import json

import pytest

from otel_verl.analysis.findings.causes.waited_for import dispatch_words
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import SEVERITIES
from otel_verl.analysis.findings.steps.async_account import AsyncStep
from otel_verl.demo import plants


def test_growing_sync_grows_in_every_step_and_merges_with_one_step_plants() -> None:
    got = plants.ready_made(["growing-sync", "slow-phase"], steps=4)
    assert sorted(got) == [2, 3, 4]
    assert [got[s][plants.SLOW_PHASE]["update_weights"] for s in (2, 3, 4)] == pytest.approx(
        [plants.GROWTH_S, 2 * plants.GROWTH_S, 3 * plants.GROWTH_S]
    )
    assert got[plants.PLANT_STEP][plants.SLOW_PHASE]["update_actor"] == 8.0  # slow-phase kept beside it
    slow = {plants.SLOW_REPLICA: {1: plants.SLOW_REPLICA_FACTOR}}
    assert plants.ready_made(["slow-replica"], steps=3) == {2: slow, 3: slow}
    assert set(plants.names()) >= {"slow-replica", "growing-sync", "stall"}


def test_only_the_planted_replica_decodes_slower() -> None:
    pytest.importorskip("verl")
    from otel_verl.demo.sim_server import SimLLMServer

    server = SimLLMServer.__new__(SimLLMServer)  # the factor alone: no tokenizer, no Ray
    plan = {plants.SLOW_REPLICA: {1: 8.0}}
    for name, factor in (("sim-0", 1.0), ("sim-1", 8.0), ("other", 1.0)):
        server.replica = name
        assert server._replica_factor(plan) == factor


def test_the_pipeline_fills_at_the_trainers_first_step() -> None:
    first = AsyncStep(1, "separate_async", 5.0, 3.0, 1.0, 4, 0.3, 1.0, 0.5)
    assert first.fills_pipeline
    later = AsyncStep(5, "separate_async", 5.0, 3.0, 1.0, 4, 0.3, 1.0, 0.5)
    assert not later.fills_pipeline  # analyze --steps 5:10: step 5 is no filling
    resumed = AsyncStep(101, "separate_async", 5.0, 3.0, 1.0, 4, 0.3, 1.0, 0.5, first_step=101)
    assert resumed.fills_pipeline  # resumed from global_step_100: its pipeline fills again


def test_the_dispatch_is_told_only_where_another_step_waited() -> None:
    d = {"dispatch_step": 2, "policy_version": 1}
    assert dispatch_words(d, [3]) == " (the trainer waited for them; dispatched in step 2, weight version 1)"
    assert dispatch_words(d, [2]) == ""
    assert dispatch_words({}, [3]) == ""
    assert dispatch_words(d, [2, 3]) == ""


# ------------------------------------------------------- both asynchronous trainers, planted (serial)
PLANTED_ASYNC = {"val_before_train": False, "ray_cpus": None}


def _loud(data: dict) -> list[dict]:
    return [f for f in data["findings"] if SEVERITIES.index(f["severity"]) < SEVERITIES.index("info")]


@pytest.mark.ray
@pytest.mark.xfail(
    strict=False,
    reason="issue 50, open: on a quiet machine the slow replica is told at the right replica and step, but as "
    "'time between a request's spans' (slow_gap): its attempts are aborted at each weight sync and the wait until "
    "their resume counts as gap, not decoding (under load it reads slow_decode and passes)",
)
def test_slow_replica_is_told_where_the_trainer_waited(tmp_path_factory: pytest.TempPathFactory) -> None:
    """separate-async, replica sim-1 of 2 decoding 25x slower from step 2 on: the first finding, at warning or worse, is
    that replica's decoding, at a step whose trainer waited for its samples, naming the dispatch."""
    from conftest import _demo_run

    plan = plants.ready_made(["slow-replica"], steps=3)
    _, _, _, out = _demo_run(
        tmp_path_factory,
        "slow-replica",
        trainer="v1-separate-async",
        steps=3,
        replicas=2,
        step_plants=plan,
        **PLANTED_ASYNC,
    )
    data = json.loads((out / "findings.json").read_text())
    print(data["summary"]["verdict"])
    loud = _loud(data)
    assert loud, [f["message"] for f in data["findings"]]
    first = loud[0]
    assert first is data["findings"][0]
    assert first["kind"] in (k.SLOW_DECODE, k.SLOW_ENGINE), first["message"]
    assert first["details"].get("replica") == "sim-1", first["message"]
    assert "sim-1" in first["message"]
    waited = {s["step"]: s["async"]["trainer_wait_s"] for s in data["steps"]}
    assert first["seconds"] <= sum(waited[s] for s in first["steps"]) + 1e-6  # held to what the trainer waited
    # told at a step whose trainer took the samples, never before the step that dispatched them
    assert first["details"]["dispatch_step"] <= min(first["steps"]), first["details"]


@pytest.mark.ray
def test_growing_sync_is_told_as_the_weight_syncs_trend(tmp_path_factory: pytest.TempPathFactory) -> None:
    """colocate-async, the weight sync growing 0.6 s a step over 8 steps: the first finding, at warning or worse,
    names the weight sync (a trend whose factor is the sync, or the sync's phase), not "the trainer's phases"."""
    from conftest import _demo_run

    steps = 8  # a trend is sure from 7 steps on (Mann-Kendall |z| >= 3)
    plan = plants.ready_made(["growing-sync"], steps)
    _, _, _, out = _demo_run(
        tmp_path_factory, "growing-sync", trainer="v1-colocate-async", steps=steps, step_plants=plan, **PLANTED_ASYNC
    )
    data = json.loads((out / "findings.json").read_text())
    print(data["summary"]["verdict"])
    loud = _loud(data)
    assert loud, [f["message"] for f in data["findings"]]
    first = loud[0]
    assert first is data["findings"][0]
    assert first["kind"] == k.TREND, first["message"]
    assert first["details"]["factor"] == "weight_sync", first["message"]
    assert "the weight sync" in first["message"] and "the trainer's phases" not in first["message"]
    syncs = [s["async"]["weight_sync_s"] for s in data["steps"]]
    assert syncs[-1] > syncs[0] + 2.0  # the planted growth is in the verl.weight_sync spans
