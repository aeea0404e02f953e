"""The analyzer's engine view on real demo runs: verl's rollout against the simulated engine, which makes
vLLM-shaped ``llm_request`` spans under our ``text_completion`` spans; two replicas behind verl's own load
balancer, one of which runs 2 requests at once (the rest queue in it). Planted in step 2: sample 0 waits
8 s in the engine's queue on turn index 0, sample 3's turn index 1 reaches the engine 8 s late, sample 6
decodes 8 s longer on turn index 1. 1/8 over-sampling in every step (aborted requests get no engine span)."""

from __future__ import annotations

import json

import pytest

from otel_verl import semconv as sc
from otel_verl.analysis.findings.causes import flatten

pytestmark = pytest.mark.ray

ENGINE_RUN = {
    "steps": 3,
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
    "oversample": 0.125,
}


@pytest.fixture(scope="module")
def engine_run(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("verl")
    from otel_verl.analysis import Tables, analyze
    from otel_verl.analysis.read import load_spans
    from otel_verl.demo.runner import DemoOptions, run_demo
    from otel_verl.export import provider

    provider.reset_for_tests()
    spool = tmp_path_factory.mktemp("demo-engine")
    try:
        result = run_demo(DemoOptions(spool=str(spool), **ENGINE_RUN))
    finally:
        provider.reset_for_tests()
    spans = load_spans(result.spool_dir)
    out = tmp_path_factory.mktemp("report-engine")
    return result, spans, Tables.build(spans), analyze(spans, out), out


def _requests_of(spans, step: int, sample: int) -> set[str]:
    req = spans[(spans["kind"] == "request") & (spans["step"] == step) & (spans["sample_index"] == sample)]
    return set(req["request_id"])


def test_engine_spans_are_vllm_shaped_and_nested(engine_run):
    result, spans, t, analysis, _ = engine_run
    engine = spans[spans["name"] == sc.ENGINE_SPAN_REQUEST]
    assert len(engine) and set(engine["service"]) == {"verl" + sc.ENGINE_SERVICE_SUFFIX}
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


def _phase_findings(analysis, phase: str) -> list:
    return [f for f in flatten(analysis.findings) if f.kind == "engine_phase" and f.event == phase and f.step == 2]


def test_slow_turns_named_by_engine_phase(engine_run):
    _, spans, t, analysis, _ = engine_run
    turns = t.engine_turns
    for phase, sample, turn in (("queue", 0, 0), ("before", 3, 1), ("decode", 6, 1)):
        found = _phase_findings(analysis, phase)
        named = {r for f in found if f.details["turn_index"] == turn for r in f.details["request_ids"]}
        # the planted turns the engine answered (a call aborted by over-sampling has no engine span)
        answered = set(turns.loc[turns["turn_index"] == turn, "request_id"]) & _requests_of(spans, 2, sample)
        assert answered and answered <= named, (phase, [f.message for f in found])
    queue = next(f for f in _phase_findings(analysis, "queue") if f.details["turn_index"] == 0)
    assert "queued in the engine" in queue.message and queue.value >= 7.5
    before = next(f for f in _phase_findings(analysis, "before") if f.details["turn_index"] == 1)
    assert "before the engine received the request" in before.message and before.value >= 7.5
    decode = next(f for f in _phase_findings(analysis, "decode") if f.details["turn_index"] == 1)
    assert "decod" in decode.message and decode.value >= 7.5
    assert len(decode.evidence) == 2  # our call and the engine's span
    # nothing planted outside step 2 is blamed on an engine phase
    assert not [f for f in flatten(analysis.findings) if f.kind == "engine_phase" and f.step != 2 and f.impact_s >= 5]


def test_replica_imbalance(engine_run):
    _, _, _, analysis, _ = engine_run
    found = [f for f in flatten(analysis.findings) if f.kind == "replica_imbalance"]
    assert {1, 3} <= {f.step for f in found}, [f.message for f in flatten(analysis.findings)]
    for f in found:
        assert f.details["replica"] == "sim-1" and f.details["idle_replica"] == "sim-0"
        assert "sticky sessions" in f.message and "sat idle" in f.message


def test_engine_figure_and_per_turn_columns(engine_run):
    _, _, t, analysis, out = engine_run
    frame = analysis.frames["engine_phases"]
    assert set(frame["group"]) == {"turn index", "step"} and set(frame[frame["group"] == "step"]["key"]) == {1, 2, 3}
    assert (out / "engine_phases.png").stat().st_size > 5_000
    turns = t.engine_turns
    for col in ("engine_before_s", "engine_queue_s", "engine_prefill_s", "engine_decode_s", "completion_tokens"):
        assert turns[col].notna().all()
    assert turns["engine_queue_s"].max() >= 7.5


def test_aborted_waste_counts_engine_time(engine_run):
    _, _, _, analysis, _ = engine_run
    waste = [f for f in flatten(analysis.findings) if f.kind == "aborted_waste"]
    assert waste and all(f.details["engine_seconds_wasted"] > 0 for f in waste)
    assert all("in engine calls" in f.message for f in waste)
