"""The analyzer's engine view on real demo runs: verl's rollout against the simulated engine, which makes
vLLM-shaped ``llm_request`` spans under our ``text_completion`` spans; two replicas behind verl's own load
balancer, one of which runs 2 requests at once (the rest queue in it). Planted in step 2: sample 0 waits
8 s in the engine's queue on turn index 0, sample 3's turn index 1 reaches the engine 8 s late, sample 6
decodes 8 s longer on turn index 1 (steps 1 and 3-5 run clean). 1/16 over-sampling in every step: the
last of the 16 requests is aborted (aborted requests get no engine span). Not more: the six planted copies
finish last and close together, and with 1/8 the two aborted were, on a loaded CI machine, both copies of
sample 0, still in their planted queue (no engine span, so no queue to name: told as a slow engine call).

The engine's own account splits each call, so each plant is named by what moved: queueing in the engine, the
way to the engine, decoding (slower per token, at the usual token count)."""

from __future__ import annotations

import json
import re

import pytest

from otel_verl import semconv as sc
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.diagnose import diagnose_run
from tests.process_state import reset_tracing

pytestmark = pytest.mark.ray

ENGINE_RUN = {
    "steps": 5,  # with 3, the run's usual (each part's median) and spread came from one quiet step too few
    # to hold still on a shared CI machine: step 2's plants then read as within its variation
    "workers": 2,
    "prompts": 8,
    "n": 2,
    "ray_cpus": 2,
    "val_before_train": True,
    "trainer": "legacy",
    "replicas": 2,
    "replica_capacity": {1: 2},
    "seconds_per_token": 0.005,
    "slow_turn": {0: (0, 8.0, "queue"), 3: (1, 8.0, "before"), 6: (1, 8.0, "decode")},
    "slow_step": 2,
    "oversample": 0.0625,  # one abort a step: every plant keeps a copy that completes
}


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("verl")
    from otel_verl.analysis import Tables, analyze
    from otel_verl.analysis.read import load_spans
    from otel_verl.demo.runner import DemoOptions, run_demo

    reset_tracing()
    spool = tmp_path_factory.mktemp("demo-engine")
    try:
        result = run_demo(DemoOptions(spool=str(spool), **ENGINE_RUN))
    finally:
        reset_tracing()
    spans = load_spans(result.spool_dir)
    out = tmp_path_factory.mktemp("report-engine")
    return result, spans, Tables.build(spans), analyze(spans, out), out


def _requests_of(spans, step: int, sample: int) -> set[str]:
    req = spans[(spans["kind"] == "request") & (spans["step"] == step) & (spans["sample_index"] == sample)]
    return set(req["request_id"])


def test_engine_spans_are_vllm_shaped_and_nested(engine_run):
    result, spans, t, analysis, _ = engine_run
    engine = spans[spans["name"] == sc.ENGINE_SPAN_REQUEST]
    assert len(engine) and set(engine["service"]) == {"verl" + sc.SIM_ENGINE_SERVICE_SUFFIX}
    raw = [
        (ss["scope"]["name"], sp["kind"])
        for path in __import__("pathlib").Path(result.spool_dir).rglob("*.jsonl")
        for line in path.read_text().splitlines()
        for rs in json.loads(line)["resourceSpans"]
        for ss in rs["scopeSpans"]
        for sp in ss["spans"]
        if sp["name"] == sc.ENGINE_SPAN_REQUEST
    ]
    assert set(raw) == {(sc.ENGINE_SCOPE, 2)}  # SPAN_KIND_SERVER
    calls = t.engine_calls
    assert calls["joined"].all() and analysis.summary["engine"]["orphans"] == 0
    # every engine call of ours has the engine's span under it, except those aborted in flight (vLLM makes none)
    ours = spans[spans["kind"] == "engine"]
    answered = set(calls["call_span_id"])
    missing = ours[~ours["span_id"].isin(answered)]
    assert len(ours) > len(missing) and set(missing["stop_reason"]) <= {"aborted"}
    assert {"sim-0", "sim-1"} == set(calls["replica"])
    # the parts of each call add up to our call's seconds
    parts = calls[[c for c in calls.columns if c.startswith("engine_") and c.endswith("_s")]]
    parts = parts.drop(columns=["engine_e2e_s", "engine_ttft_s"]).sum(axis=1)
    assert ((parts - calls["call_s"]).abs() < 1e-3).all()


PLANTED = {(k.ENGINE_QUEUE, 0, 0), (k.ENGINE_WAIT, 3, 1), (k.SLOW_DECODE, 6, 1)}
"""(cause, sample, turn index) planted in step 2."""


def test_each_engine_plant_is_named_by_what_moved(engine_run):
    _, spans, t, analysis, _ = engine_run
    d = diagnose_run(t)
    a = next(a for a in d.accounts if a.step == 2)
    occ = a.summary.occurrences
    found = set()
    for row in a.anomalies.itertuples(index=False):
        sample, turn = occ["sample_index"].iat[row.occ], occ["turn_index"].iat[row.occ]
        if row.x >= 5 and sample == sample and turn == turn:
            found.add((row.cause, int(sample), int(turn)))
    assert found >= PLANTED, found
    # the step's excess is those plants' parts: named, not unexplained
    assert 1 - a.unexplained_s / a.excess_s >= 0.9
    moved = {p.kind for p in a.parts if p.seconds >= 2}
    assert moved & {k.PART_ENGINE_QUEUE, k.PART_ENGINE_BEFORE, k.PART_DECODE}, moved
    # its first finding is one of them, at its sample, and nothing outside step 2 is serious
    first = next(f for f in analysis.findings if 2 in f.steps and f.kind in k.CAUSES)
    kind = first.details.get("engine_kind", first.kind)  # a plant that held its worker still is told as a stall
    assert kind in {c for c, _, _ in PLANTED} and first.severity in ("warning", "critical"), first.message
    planted_sample = {c: s for c, s, _ in PLANTED}[kind]
    # it names the planted sample's request; a request that queued as long behind sample 6's slow decode on the
    # replica running 2 at once may be named with it (a real consequence: seen on 1 of 4 runs here)
    assert set(first.details["request_ids"]) & _requests_of(spans, 2, planted_sample), first.message
    # the replica that runs 2 at once queues in every step: a straggler that persists, told at the replica (not at
    # the worker whose calls the load balancer happened to send there: CI once told worker 1 in 4 of 5 steps)
    hot = [f for f in analysis.findings if f.kind == k.STRAGGLER and f.details["part"] == k.PART_ENGINE_QUEUE]
    assert [f.details.get("replica") for f in hot] == ["sim-1"], [f.message for f in hot]
    assert "×" not in hot[0].message or hot[0].details["usual"] > 0.01, hot[0].message  # no ratio to a queue of 0
    # outside step 2 only that and the simulator's own heavy tail may warn: step 1 really runs long (its turn index
    # 1 decodes 512-640 tokens where the run's usual is ~200-270), +1.0-2.2 s: told as a note on a quiet machine, but
    # at load 4 once a warning (+1.4 s against a 5-step run's warn level of 1.2 s there), a true cause
    serious = [f for f in analysis.findings if f.kind in k.CAUSES and f.severity != "info"]
    elsewhere = [f for f in serious if 2 not in f.steps and not any(f is h for h in hot)]
    assert all(f.kind == k.LONG_RESPONSE and f.severity == "warning" for f in elsewhere), [f.message for f in elsewhere]
    # a cause of several steps is one headline, not one a step; the verdict's total counts what it cost every step
    assert sum(hot[0].message in h for h in analysis.summary["headlines"]) <= 1, analysis.summary["headlines"]
    if hot[0].severity != "info":
        costing = re.search(r"costing ([\d.]+) s of step time", analysis.summary["verdict"])
        assert costing and float(costing.group(1)) >= hot[0].seconds - 0.05, analysis.summary["verdict"]


def test_a_stall_is_told_of_the_worker_it_happened_on(engine_run):
    """In step 2 both workers wait on their planted samples at once; each finding's "nothing else moved on it for
    N s" is a quiet stretch of its own worker (it once gave sample 3's worker 0 the seconds of worker 1's stall)."""
    _, _, t, _, _ = engine_run
    d = diagnose_run(t)
    stalled = [f for f in d.findings if f.details.get("stalled_s")]
    assert stalled
    for f in stalled:
        # one cause, one name (issue 51): told "worker N stalled", it is a stall in findings.json too, the engine's
        # judgement of where the time sat kept beside it
        assert f.kind == k.STALL, (f.kind, f.message)
        assert f.details.get("engine_kind", k.STALL) in k.CAUSES and "stalled" in f.message, f.message
        q = next(a for a in d.accounts if a.step == f.steps[0]).summary.quiet
        own = q[q["worker"].isin(f.workers)]["seconds"].to_numpy(dtype=float)
        assert len(f.workers) == 1 and (abs(own - f.details["stalled_s"]) < 1e-9).any(), (f.message, q)


def test_engine_figure_and_per_turn_columns(engine_run):
    _, _, t, analysis, out = engine_run
    frame = analysis.frames["engine_phases"]
    assert set(frame["group"]) == {"turn index", "step"}
    assert set(frame[frame["group"] == "step"]["key"]) == {1, 2, 3, 4, 5}
    assert (out / "engine_phases.png").stat().st_size > 5_000
    turns = t.engine_turns
    for col in ("engine_before_s", "engine_queue_s", "engine_prefill_s", "engine_decode_s", "completion_tokens"):
        assert turns[col].notna().all()
    assert turns["engine_queue_s"].max() >= 7.5


def test_aborted_waste_counts_engine_time(engine_run):
    _, _, _, analysis, _ = engine_run
    waste = [f for f in analysis.findings if f.kind == k.ABORTED_WASTE]
    assert waste and all(f.details["engine_seconds_wasted"] > 0 for f in waste)
    assert all("in engine calls" in f.message for f in waste)
