"""The accuracy benchmark's run model (benchmarks/diagnosis): a run and its clean twin differ only by the
plants, a plant's cost is what the timelines (and the written files) say, and both writers' output loads
with the analyzer's own ``load`` with the shape the model says."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.diagnosis.effects import ENGINE_SPAN_KINDS
from benchmarks.diagnosis.run_model import SimRun, build_run
from benchmarks.diagnosis.shape import FORMATS, OTLP, OTLP_ENGINE, SEED
from benchmarks.diagnosis.write_otlp import write_spool
from benchmarks.diagnosis.write_seed import write_seed
from otel_verl import semconv as sc
from otel_verl.analysis import load
from otel_verl.analysis.findings.common import kinds as k

SMALL = 6_000
"""Spans at most per run here: the model is the same at any size."""


def _write(run: SimRun, path: Path) -> Path:
    return (write_seed if run.fmt == SEED else write_spool)(run, path)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_clean_run_has_no_plant(fmt: str) -> None:
    run = build_run(11, fmt, plants=0, max_spans=SMALL)
    assert run.plants == []
    assert run.steps == run.clean
    assert run.durations() == run.durations(clean=True)


@pytest.mark.parametrize("seed", range(6))
def test_the_twin_differs_only_by_the_plants(seed: int) -> None:
    fmt = FORMATS[seed % 3]
    run = build_run(seed, fmt, max_spans=SMALL)
    twin = build_run(seed, fmt, plants=0, max_spans=SMALL)
    assert run.plants, "a planted run has at least one plant"
    assert run.shape == twin.shape and run.draws == twin.draws
    assert run.durations(clean=True) == twin.durations()
    planted = {p.step for p in run.plants}
    for step, (a, b) in enumerate(zip(run.steps, twin.steps, strict=True), start=1):
        if step not in planted:
            assert a.duration(fmt) == b.duration(fmt) and a.workers == b.workers
            continue
        touched = {w for p in run.plants if p.step == step for w in range(run.shape.workers) if p.on_worker(w)}
        for wa, wb in zip(a.workers, b.workers, strict=True):
            if wa.worker not in touched:
                assert wa.requests == wb.requests and wa.finish == wb.finish and not wa.stall_s


def test_plants_are_kinds_and_places_the_format_can_show() -> None:
    seen: dict[str, set[str]] = {f: set() for f in FORMATS}
    scopes: dict[str, set[str]] = {f: set() for f in FORMATS}
    for seed in range(45):
        fmt = FORMATS[seed % 3]
        plants = build_run(seed, fmt, max_spans=SMALL).plants
        seen[fmt] |= {p.kind for p in plants}
        scopes[fmt] |= {p.scope for p in plants}
    assert not seen[SEED] & (ENGINE_SPAN_KINDS | {k.SLOW_PHASE})
    assert not seen[OTLP] & ENGINE_SPAN_KINDS
    assert k.SCOPE_REPLICA not in scopes[SEED] | scopes[OTLP], "only engine spans say which replica served a call"
    assert len(seen[OTLP_ENGINE] | seen[OTLP] | seen[SEED]) >= 10
    assert {k.SCOPE_STEP, k.SCOPE_WORKER, k.SCOPE_REQUEST} <= scopes[SEED] | scopes[OTLP] | scopes[OTLP_ENGINE]


@pytest.mark.parametrize("seed", range(4))
def test_the_cost_is_what_the_timings_and_the_files_say(seed: int, tmp_path: Path) -> None:
    fmt = (SEED, OTLP_ENGINE)[seed % 2]
    run = build_run(100 + seed, fmt, plants=3, max_spans=SMALL)
    clean = run.durations(clean=True)
    for p in run.plants:
        assert p.cost == pytest.approx(run.steps[p.step - 1].duration(fmt) - clean[p.step - 1], abs=1e-9)
        assert p.size == pytest.approx(p.cost / run.spread)
    loaded = load(_write(run, tmp_path / "run")).steps.set_index("step")["duration"]
    for p in run.plants:
        assert loaded[p.step] - clean[p.step - 1] == pytest.approx(p.cost, abs=1e-5)


def test_a_slow_phase_costs_its_seconds_and_sizes_follow_their_targets() -> None:
    reached = 0
    plants = [p for seed in range(8) for p in build_run(seed, OTLP, plants=2, kinds=[k.SLOW_PHASE]).plants]
    for p in plants:
        assert p.kind == k.SLOW_PHASE and p.cost == pytest.approx(p.param, rel=1e-9)
        reached += "repeat_of" in p.meta or abs(p.size / p.target - 1) < 0.01
    assert reached == len(plants)


@pytest.mark.parametrize("fmt", FORMATS)
def test_each_writer_loads_with_the_models_shape(fmt: str, tmp_path: Path) -> None:
    run = build_run(7, fmt, max_spans=SMALL)
    t = load(_write(run, tmp_path / "run"))
    shape = run.shape
    assert sorted(t.steps["step"]) == list(range(1, shape.steps + 1))
    assert t.workers["worker"].nunique() == shape.workers
    assert len(t.requests) == shape.requests
    assert t.steps.set_index("step")["duration"].tolist() == pytest.approx(run.durations(), abs=1e-5)
    phases = set(t.spans.loc[t.spans["kind"] == "phase", "phase"].dropna())
    engine_calls = t.engine_calls
    if fmt == SEED:
        assert phases <= {"gen"} and engine_calls.empty
    else:
        assert {"gen", "update_actor", "old_log_prob"} <= phases
    if fmt == OTLP_ENGINE:
        finished = sum(
            1
            for st in run.steps
            for wt in st.workers
            for rq in wt.requests
            if (wt.worker, rq.draw.index) not in st.aborted
            for _ in rq.turns
        )
        assert int(engine_calls["joined"].sum()) >= finished and not (~engine_calls["joined"]).any()
        assert set(engine_calls["replica"].astype(str)) <= {str(r) for r in range(shape.replicas)}
    elif fmt == OTLP:
        assert engine_calls.empty
    tokens = t.spans.loc[t.spans["kind"] == "engine", "name"]
    assert len(tokens) > 0


def test_a_stall_leaves_its_worker_still(tmp_path: Path) -> None:
    """Nothing of the stalled worker starts or ends while its process is paused; the rest moves later."""
    run = next(r for s in range(40) if (r := build_run(s, OTLP, plants=1, kinds=[k.STALL], max_spans=SMALL)).plants)
    (p,) = [x for x in run.plants if "repeat_of" not in x.meta][:1]
    t = load(_write(run, tmp_path / "run"))
    spans = t.spans
    step_start = t.steps.set_index("step").loc[p.step, "start_ns"]
    st = run.steps[p.step - 1]
    wt = st.workers[p.workers[0]]
    lo = step_start + (st.lead + wt.stall_at) * 1e9 + 1e6
    hi = lo + wt.stall_s * 1e9 - 2e6
    mine = spans[(spans["step"] == p.step) & (spans["worker"] == p.workers[0]) & (spans["kind"] != "barrier")]
    if run.shape.abort_share:
        pytest.skip("an over-sampled step: the abort may land inside the pause")
    inside = ((mine["start_ns"] > lo) & (mine["start_ns"] < hi)) | ((mine["end_ns"] > lo) & (mine["end_ns"] < hi))
    assert not inside.any()
    assert ((mine["start_ns"] < lo) & (mine["end_ns"] > hi)).any(), "spans in flight stretch over the pause"
    assert sc.SPAN_WORKER in set(mine["name"])
