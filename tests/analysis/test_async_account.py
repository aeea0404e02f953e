"""Who waited for whom (issue 32, part 3): the asynchronous trainers' account per step, the generation-bound /
train-bound finding and the two-lane figure — on hand-built intervals and steps, on a sync run (nothing new), and on
real CPU-demo runs of verl's ``PPOTrainerSeparateAsync`` with a slow rollout or a slow ``update_actor`` planted in
every step."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from otel_verl import semconv as sc
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.thresholds import Thresholds
from otel_verl.analysis.findings.patterns.bound import find_bound
from otel_verl.analysis.findings.steps.async_account import AsyncStep
from otel_verl.analysis.tables.intervals import covered_s, disjoint_covered_s, minus, union

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

S = 1_000_000_000


def test_union_merges_overlaps_and_minus_cuts_pauses_out() -> None:
    s, e = union(np.array([5, 0, 2, 20]) * S, np.array([8, 3, 4, 21]) * S)
    assert (s // S).tolist() == [0, 5, 20] and (e // S).tolist() == [4, 8, 21]
    assert covered_s(np.array([0, 1]) * S, np.array([2, 3]) * S, 0, 10 * S) == 3.0  # one overlap counted once
    assert covered_s(np.array([0]) * S, np.array([10]) * S, 2 * S, 5 * S) == 3.0  # clipped to the window
    busy = minus(union(np.array([0]) * S, np.array([10]) * S), union(np.array([2, 6]) * S, np.array([3, 8]) * S))
    assert (busy[0] // S).tolist() == [0, 3, 8] and (busy[1] // S).tolist() == [2, 6, 10]
    for lo, hi in ((0, 10), (1, 7), (2, 3), (9, 12), (11, 12)):
        assert disjoint_covered_s(*busy, lo * S, hi * S) == covered_s(*busy, lo * S, hi * S)


def _step(step: int, wait: float, idle: float, paused: float, sync: float = 0.3, nbytes: float = 3e9) -> AsyncStep:
    return AsyncStep(
        step=step,
        mode="separate_async",
        wall_s=10.0,
        trainer_wait_s=wait,
        trainer_train_s=10.0 - wait - sync,
        updates=4,
        rollout_paused_s=paused,
        rollout_idle_s=idle,
        rollout_no_work_s=idle - paused,
        replicas={"r0": idle / 10},
        weight_sync_s=sync,
        weight_syncs=1,
        weight_sync_bytes=nbytes,
        weight_sync_replicas=2.0,
        weight_sync_backend="nccl",
    )


def _bound(*steps: AsyncStep) -> list:
    return find_bound([SimpleNamespace(async_account=a) for a in steps], Thresholds())


def test_bound_follows_the_side_that_idles() -> None:
    (gen,) = _bound(_step(1, 9.0, 0.5, 0.3), _step(2, 7.0, 0.5, 0.3), _step(3, 6.0, 0.4, 0.3))
    # step 1's wait for the first samples is the pipeline filling: the balance is the later steps'
    assert gen.kind == k.GENERATION_BOUND and gen.severity == "warning" and gen.steps == [2, 3]
    assert gen.details["trainer_idle_ratio"] == pytest.approx(0.65) and gen.seconds == pytest.approx(13.0)
    assert gen.message.startswith("Generation-bound: the trainer waited for samples 65%")
    assert "over 2 steps; step 1, the pipeline filling, left out" in gen.message
    (filling,) = _bound(_step(1, 9.0, 0.5, 0.3), _step(2, 3.0, 2.0, 0.3))
    assert filling.severity == "info"  # 30 % once the filling is left out (60 % with it)
    colocated = [replace(a, mode="colocate_async") for a in (_step(1, 9.0, 0.5, 0.3), _step(2, 7.0, 0.5, 0.3))]
    (shared,) = _bound(*colocated)  # colocate_async's trainer waits while its own GPUs generate: by design
    assert shared.kind == k.GENERATION_BOUND and shared.severity == "info"
    assert "hybrid_rollout.enable_switch" in gen.message and "To try:" in gen.message
    (train,) = _bound(_step(1, 0.5, 3.0, 0.3), _step(2, 0.5, 3.5, 0.3))
    assert train.kind == k.TRAIN_BOUND and train.severity == "info"  # 32 % idle: not lopsided enough to warn
    assert "parameter_sync_step" in train.message
    assert _bound(_step(1, 3.0, 3.2, 0.3)) == []  # both sides idle alike: neither bound
    assert _bound(_step(1, 0.5, 1.0, 0.3)) == []  # both busy
    assert _bound(_step(1, 0.5, 6.0, 5.8)) == []  # long pauses (weight syncs) alone: the rollout waited for no one
    assert find_bound([SimpleNamespace(async_account=None)], Thresholds()) == []  # a sync trainer


def test_weight_sync_growth_names_what_drove_it() -> None:
    (f,) = _bound(_step(1, 7.0, 0.5, 0.3, sync=0.3, nbytes=3e9), _step(2, 7.0, 0.5, 0.3, sync=0.9, nbytes=9e9))
    sync = f.details["weight_sync"]
    assert sync["growth"] == pytest.approx(3.0) and sync["backend"] == "nccl" and sync["replicas"] == 2
    assert "grew from 0.30 s (step 1) to 0.90 s (step 2), with bytes 3.0 GB → 9.0 GB" in f.message
    (same,) = _bound(_step(1, 7.0, 0.5, 0.3, sync=0.3), _step(2, 7.0, 0.5, 0.3, sync=0.9))
    assert "the transfer itself slowed" in same.message


def test_sync_runs_have_no_async_account(tmp_path: Path) -> None:
    """Seed-format (sync) runs: ``steps[].async`` is null, no bound finding, no figure frame."""
    from gen_seed_logs import write_seed_logs

    from otel_verl import analysis

    logs = write_seed_logs(tmp_path / "seed", steps=4, workers=2, requests=4, seed=3)
    result = analysis.analyze(logs, tmp_path / "out", html_report=False)
    assert result.steps and all(s["async"] is None for s in result.steps)
    assert not [f for f in result.findings if f.kind in (k.GENERATION_BOUND, k.TRAIN_BOUND)]
    assert result.frames["async_timeline"].empty


# ---------------------------------------------------------------- real runs of verl's separate-async trainer
# ray_cpus: None = the runner's default for V1 (workers + 2: TransferQueue's controller and storage take a CPU each)
ASYNC_SIZE = {"trainer": "v1-separate-async", "steps": 3, "val_before_train": False, "ray_cpus": None}


@pytest.fixture(scope="module")
def demo_train_bound(tmp_path_factory: pytest.TempPathFactory):
    """update_actor 6 s slower in every step: the rollout finishes what it was given and waits. (2 s was too little
    on a loaded 2-core machine: generation itself took ~3 s there, and the rollout idled only 24 % of the step.)"""
    from conftest import _demo_run

    plants = {s: {"slow_phase": {"update_actor": 6.0}} for s in (1, 2, 3)}
    return _demo_run(tmp_path_factory, "train-bound", **ASYNC_SIZE, step_plants=plants)


@pytest.fixture(scope="module")
def demo_generation_bound(tmp_path_factory: pytest.TempPathFactory):
    """Every engine call of every step decodes 25x slower: the trainer waits for samples."""
    from conftest import _demo_run

    plants = {s: {"step_slow_decode": 25.0} for s in (1, 2, 3)}
    return _demo_run(tmp_path_factory, "generation-bound", **ASYNC_SIZE, step_plants=plants)


def _spans_of(spans, name: str, step: int):
    return spans[(spans["name"] == name) & (spans["step"] == step)]


@pytest.mark.ray
def test_separate_async_account_adds_up(demo_train_bound) -> None:
    _, spans, _, out = demo_train_bound
    steps = json.loads((out / "findings.json").read_text())["steps"]
    assert [s["step"] for s in steps] == [1, 2, 3]
    for s in steps:
        a = s["async"]
        wall = a["wall_s"]
        assert a["mode"] == "separate_async" and a["updates"] == 4
        assert wall == pytest.approx(s["duration_s"], abs=1e-6)
        # the trainer's wait, training and weight sync are disjoint parts of its step
        assert a["trainer_wait_s"] + a["trainer_train_s"] + a["weight_sync_s"] <= wall + 1e-3
        assert a["trainer_idle_ratio"] == pytest.approx(a["trainer_wait_s"] / wall, abs=1e-5)
        # the rollout is paused during the step's weight sync; paused time is idle time
        assert a["weight_sync_s"] - 1e-3 <= a["rollout_paused_s"] <= a["rollout_idle_ratio"] * wall + 1e-3 <= wall
        assert a["rollout_no_work_s"] >= 0 and set(a["replicas"]) == {"sim-0"}
        # an engine call lies inside its sample: the engines idle at least as long as the samples do
        assert a["engine_idle_ratio"] >= a["rollout_idle_ratio"] - 1e-6
        # weight sync seconds and bytes are the verl.weight_sync spans'
        ws = _spans_of(spans, sc.SPAN_WEIGHT_SYNC, s["step"])
        assert a["weight_syncs"] == len(ws) == 1
        assert a["weight_sync_s"] == pytest.approx(float(ws["duration"].sum()), abs=1e-5)
        assert a["weight_sync_bytes"] == json.loads(ws["extra"].iloc[0])[sc.VERL_SYNC_BYTES] > 0
        # the wait is the inner updates' gen phases (sequential: their seconds add up)
        updates = set(_spans_of(spans, sc.SPAN_UPDATE, s["step"])["span_id"])
        gen = _spans_of(spans, sc.phase_span_name("gen"), s["step"])
        assert a["trainer_wait_s"] == pytest.approx(float(gen[gen["parent_id"].isin(updates)]["duration"].sum()), 1e-4)


@pytest.mark.ray
def test_slow_update_actor_makes_separate_async_train_bound(demo_train_bound) -> None:
    _, _, result, out = demo_train_bound
    bound = [f for f in result.findings if f.kind in (k.GENERATION_BOUND, k.TRAIN_BOUND)]
    print("\n".join(f.message for f in bound))
    assert [f.kind for f in bound] == [k.TRAIN_BOUND]
    d = bound[0].details
    assert d["rollout_no_work_ratio"] > 0.5 > d["trainer_idle_ratio"] and d["mode"] == "separate_async"
    assert d["rollout_idle_ratio"] >= d["rollout_no_work_ratio"]
    assert bound[0].severity == "warning" and bound[0].steps == [2, 3]  # step 1: the pipeline filling
    frame = result.frames["async_timeline"]
    assert set(frame["lane"]) == {"trainer", "rollout"} and set(frame["step"]) == {1, 2, 3}
    keys = {"trainer_wait", "trainer_train", "weight_sync", "rollout_busy", "rollout_generating", "rollout_paused"}
    assert keys <= set(frame["key"])
    assert (out / "async_timeline.png").stat().st_size > 10_000


@pytest.mark.ray
def test_async_engine_calls_keep_the_engines_split(demo_train_bound) -> None:
    """Issue 50: under separate-async every engine call the engine answered has its ``llm_request`` under it, and
    the step's account splits the call by it (prefill, decode at seconds per token > 0) as on a sync run; the
    round trips holding the attempts (``verl.generate``) are no engine calls."""
    from otel_verl.analysis.findings.steps.segments import request_segments
    from otel_verl.analysis.tables import Tables

    _, spans, result, _ = demo_train_bound
    calls = spans[spans["kind"].to_numpy() == "engine"]
    aborted = int((calls["stop_reason"] == "aborted").sum())
    engine = result.summary["engine"]
    assert len(spans[spans["name"] == sc.SPAN_GENERATE]) > 0 and engine["orphans"] == 0
    assert engine["engine_calls"] == len(calls) and engine["engine_calls_with_engine_span"] == len(calls) - aborted
    seg = request_segments(Tables.build(spans))
    split = seg[seg["by_engine"].to_numpy(dtype=bool)]
    seconds = split.groupby("part")["value_s"].sum()
    assert seconds[k.PART_PREFILL] > 0 and seconds[k.PART_DECODE] > 0 and k.PART_ENGINE_QUEUE in seconds
    decode = split[split["part"] == k.PART_DECODE]
    assert (decode["value_s"] / decode["tokens"]).median() > 0  # was 0 s/token: the round trip took the time


@pytest.mark.ray
def test_slow_generation_makes_separate_async_generation_bound(demo_generation_bound) -> None:
    _, _, result, _ = demo_generation_bound
    bound = [f for f in result.findings if f.kind in (k.GENERATION_BOUND, k.TRAIN_BOUND)]
    print("\n".join(f.message for f in bound))
    assert [f.kind for f in bound] == [k.GENERATION_BOUND]
    d = bound[0].details
    assert d["trainer_idle_ratio"] >= 0.2 and d["trainer_idle_ratio"] > d["rollout_no_work_ratio"] + 0.1
    assert bound[0].seconds > 0 and "To try:" in bound[0].message


@pytest.mark.ray
def test_async_timeline_renders_in_chromium(demo_train_bound) -> None:
    """report.html of the separate-async run in headless chromium: the two-lane figure is drawn (plotly bars in
    both lanes, the trainer's lane above), with no console error."""
    from test_report_browser import report_page

    _, _, _, out = demo_train_bound
    with report_page(out / "report.html") as (page, errors):
        title = page.locator("h2#async_timeline").inner_text()
        fig = page.locator("#figure-async_timeline")  # the div plotly draws into, right after the caption
        page.wait_for_function("document.querySelector('#figure-async_timeline .main-svg') !== null", timeout=30_000)
        bars = fig.locator(".bars path").count()
        rows = fig.locator(".ytick text, .y2tick text").all_text_contents()  # the two lanes: y and y2
    assert errors == []
    assert title.startswith("Who waited for whom") and bars > 10
    assert rows == ["trainer", "replica sim-0"], rows
