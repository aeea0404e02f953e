"""The accuracy benchmark's asynchronous runs (benchmarks/diagnosis/async_*.py, issue 50): the model keeps its own
rules (the trainer waits for the groups it trains on, a pause moves only the calls in flight, the twin differs
only by the plant), and the spool it writes loads with the analyzer's own ``load`` as an asynchronous run: steps,
requests, the round trip with its attempts, tokens counted once, every group linked to its dispatch and consumer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.bench_diagnosis import class_list, plan_classes
from benchmarks.diagnosis.async_classes import ASYNC_CLASSES, BUILDERS
from benchmarks.diagnosis.async_model import SEPARATE, AsyncRun
from benchmarks.diagnosis.classes import CLASSES
from benchmarks.diagnosis.shape import FORMATS, OTLP, OTLP_ENGINE, SEED
from benchmarks.diagnosis.write_async import write_async
from benchmarks.gen_spool import MODEL
from otel_verl import semconv as sc
from otel_verl.analysis import load


def _spans(root: Path) -> list[dict]:
    out = []
    for path in root.rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            for rs in json.loads(line)["resourceSpans"]:
                for ss in rs["scopeSpans"]:
                    out += ss["spans"]
    return out


def _attrs(span: dict) -> dict:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def test_the_sync_classes_keep_their_seeds_and_async_selects_the_new_ones() -> None:
    """The issue-40 classes draw exactly as before (their tables must not move); ``--classes async`` is the six."""
    specs = plan_classes(3, 7, list(FORMATS), list(CLASSES))
    assert [s.seed for s in specs] == [7 * 1_000_003 + 500_000 + i for i in range(3 * len(CLASSES))]
    assert class_list("async") == list(ASYNC_CLASSES)
    assert {s.fmt for s in plan_classes(4, 7, list(FORMATS), list(ASYNC_CLASSES))} == {OTLP, OTLP_ENGINE}
    assert SEED not in {s.fmt for s in plan_classes(2, 7, [SEED], ["async_clean"])}


@pytest.mark.parametrize("cls", ASYNC_CLASSES)
def test_each_class_is_its_clean_twin_but_for_the_plant(cls: str) -> None:
    run, expect = BUILDERS[cls](3000 + ASYNC_CLASSES.index(cls), OTLP)
    durations, clean = run.durations(), run.durations(clean=True)
    if cls in ("async_clean", "async_stale"):
        assert durations == clean and not run.plants and expect.kind is None
        return
    assert expect.kind and expect.steps
    first = min(p.meta.get("waits_at", p.step) for p in run.plants) if run.plants else 2
    assert durations[: first - 1] == clean[: first - 1], "nothing moves before the first step a plant reaches"
    if cls in ("async_phase", "async_reward"):
        (p,) = run.plants
        at = p.meta.get("waits_at", p.step)
        assert p.cost == pytest.approx(durations[at - 1] - clean[at - 1], abs=1e-9) and p.cost > 0
    if cls == "async_reward":
        assert expect.steps == (run.plants[0].step + 1,), "told at the step that trained on the batch"
    if cls == "async_sync":
        assert durations[-1] > clean[-1] and expect.size["factor"] > 1


def test_the_trainer_waits_for_the_groups_it_trains_on() -> None:
    for seed in range(6):
        run, _ = BUILDERS["async_clean"](4000 + seed, OTLP)
        assert isinstance(run, AsyncRun)
        for step in run.steps:
            for u in step.updates:
                d = run.dispatches[u.groups[0][0]]
                ends = [max(d.requests[r].end for r in d.groups()[g]) for _, g in u.groups]
                assert u.gen[1] >= max(ends) - 1e-9
            assert step.start < step.weights[0] < step.sync[1] <= step.weights[1] <= step.end


def test_the_spool_is_the_async_trace(tmp_path: Path) -> None:
    """Separate-async with its weight syncs aborting calls: attempts under verl.generate, engine spans under the
    attempt that finished, tokens once, links both ways, and ``load`` reads steps, requests and waits."""
    run = next(
        r
        for s in range(30)
        if (r := BUILDERS["async_clean"](5000 + s, OTLP_ENGINE)[0]).ashape.mode == SEPARATE
        and any(len(c.attempts) > 1 for d in r.dispatches for q in d.requests.values() for c in q.calls)
    )
    root = write_async(run, tmp_path / "run")
    spans = _spans(root)
    by_id = {s["spanId"]: s for s in spans}
    names = [s["name"] for s in spans]
    attempts = [s for s in spans if s["name"] == sc.generate_span_name(MODEL)]
    assert attempts and all(by_id[s["parentSpanId"]]["name"] == sc.SPAN_GENERATE for s in attempts)
    aborted = [s for s in attempts if _attrs(s)[sc.VERL_ENGINE_STOP_REASON] == "aborted"]
    assert aborted, "a weight sync aborted calls in flight"
    engine = [s for s in spans if s["name"] == sc.ENGINE_SPAN_REQUEST]
    assert all(_attrs(by_id[s["parentSpanId"]])[sc.VERL_ENGINE_STOP_REASON] != "aborted" for s in engine)
    decoded = sum(rq.timeline.tokens for d in run.dispatches for rq in d.requests.values())
    assert sum(int(_attrs(s)[sc.GEN_AI_USAGE_OUTPUT_TOKENS]) for s in attempts) == pytest.approx(decoded, rel=0.02)
    groups = {s["spanId"] for s in spans if s["name"] == sc.SPAN_GROUP}
    workers = {s["spanId"] for s in spans if s["name"] == sc.SPAN_WORKER}
    assert all(s["links"][0]["spanId"] in workers for s in spans if s["name"] == sc.SPAN_GROUP)
    consumed = [lk["spanId"] for s in spans if s["name"] == sc.SPAN_UPDATE for lk in s["links"]]
    assert set(consumed) <= groups and len(consumed) == len(set(consumed))
    assert names.count(sc.SPAN_WEIGHT_SYNC) == run.shape.steps + 1 and names.count(sc.SPAN_STEP) == run.shape.steps
    t = load(root)
    assert sorted(t.steps["step"]) == list(range(1, run.shape.steps + 1))
    assert t.steps.set_index("step")["duration"].tolist() == pytest.approx(run.durations(), abs=1e-5)
    assert len(t.requests) == sum(len(d.requests) for d in run.dispatches)
