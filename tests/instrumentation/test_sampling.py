"""Volume control on verl's real AgentLoopWorker: detail levels, tail sampling, one trace per request,
and the dropped-span counter. The analyzer reads the result back and must count every request."""

from __future__ import annotations

import logging
import sys
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_verl
from otel_verl import semconv
from otel_verl.analysis.figures import request_cdf
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.tables.requests import requests_table
from otel_verl.analysis.tables.steps import steps_table
from otel_verl.analysis.tables.workers import workers_table
from otel_verl.config import DEFAULT_DETAIL, OtelVerlConfig
from otel_verl.demo import runner
from otel_verl.demo.sim_server import SimServerConfig
from otel_verl.export import dropped, flush, provider, tracing
from otel_verl.export.spool import SpoolSpanExporter
from otel_verl.instrumentation import llm_server, policy
from otel_verl.instrumentation.rollout import chunk, trajectory
from otel_verl.instrumentation.targets import TARGETS, Kind
from otel_verl.recording.sampling import ChunkSampler
from otel_verl.wrapping import registry
from tests.instrumentation.harness import build_worker, run_chunk
from tests.process_state import dropped_so_far, reset_dropped, reset_tracing, wrapped_seams

RUN = "sampling-test"


def _seams(*kinds: Kind) -> set[tuple[str, str]]:
    return {(t.module, t.method) for t in TARGETS if t.kind in kinds}


PER_REQUEST_SEAMS = _seams(Kind.REQUEST, Kind.EVENT)
FULL_DETAIL_SEAMS = _seams(Kind.EVENT)


@pytest.fixture
def traced(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """``traced(**config) -> (memory exporter, spool run dir)``: otel_verl set up with that config, instrumented."""
    monkeypatch.setenv("OTEL_VERL_SPOOL", "false")
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_BSP_MAX_QUEUE_SIZE"):
        monkeypatch.delenv(var, raising=False)
    from otel_verl.instrumentation import trainer

    monkeypatch.setattr(trainer, "_active_trainer", None)  # no trainer from an earlier test in this process
    monkeypatch.setattr(trainer, "_current_step", None)
    calls = [0]

    def start(**overrides: object) -> tuple[InMemorySpanExporter, Path]:
        calls[0] += 1
        reset_tracing()
        memory = InMemorySpanExporter()
        spool_root = tmp_path / f"spool{calls[0]}"
        spool = SpoolSpanExporter(spool_root, RUN, "worker_0")
        config = OtelVerlConfig(spool=False, run_id=RUN).with_overrides(**overrides)
        provider.setup_tracing(
            "agent_loop_worker", worker_rank=0, config=config, extra_exporters=[memory, spool], set_global=False
        )
        otel_verl.uninstrument()  # the seams follow the detail level
        otel_verl.instrument()
        return memory, spool_root / RUN

    yield start
    otel_verl.uninstrument()
    reset_tracing()


def _spans(memory: InMemorySpanExporter) -> list:
    flush.flush()
    return list(memory.get_finished_spans())


def _opts() -> runner.DemoOptions:
    return runner.DemoOptions(prompts=16, n=4, seed=3)


def _server() -> SimServerConfig:
    # real (small) decode times so durations differ and a "slowest" set exists
    return SimServerConfig(seconds_per_token=0.0005, seed=3)


@pytest.fixture
def admitted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, str]]:
    """Every request the sampler saw (start, end, status): the ground truth, whatever was kept."""
    seen: list[tuple[int, int, str]] = []
    original = ChunkSampler.admit

    def spy(self: ChunkSampler, recorder, status: str) -> bool:
        seen.append((recorder.root.start_ns, recorder.root.end_ns, status))
        return original(self, recorder, status)

    monkeypatch.setattr(ChunkSampler, "admit", spy)
    return seen


# ------------------------------------------------------------------ detail levels
@pytest.mark.parametrize("level", ["step", "worker", "request", "full"])
def test_detail_levels(traced, level: str) -> None:
    memory, _ = traced(detail=level)
    worker, handle, opts = build_worker(_opts())
    output = run_chunk(worker, opts)
    names = Counter(s.name for s in _spans(memory))
    total = opts.prompts * opts.n
    assert len(output) == total and len(handle.calls) >= total  # verl ran the same rollout at every level
    applied = set(wrapped_seams())
    per_request = PER_REQUEST_SEAMS & applied
    # exactly what the policy picks for this level (those of its seams this verl has): nothing else
    assert applied <= {(t.module, t.method) for t in policy.seams_for(level, "agent_loop_worker")}
    if level == "step":
        assert not names  # the worker process records nothing; the trainer keeps steps and phases
        assert per_request == set()  # and its rollout calls no hook per trajectory
        assert chunk.WORKER_GENERATE in applied  # still there: a carrier never reaches verl
        return
    assert {trajectory.RUN_AGENT_LOOP, trajectory.POSTPROCESS, llm_server.CLIENT_GENERATE} <= per_request
    (worker_span,) = [s for s in _spans(memory) if s.name == semconv.SPAN_WORKER]
    requests = names[semconv.SPAN_REQUEST]
    summarized = worker_span.attributes[semconv.VERL_WORKER_NUM_SAMPLED_OUT]
    assert requests + summarized == total == worker_span.attributes[semconv.VERL_WORKER_NUM_REQUESTS]
    assert requests == (0 if level == "worker" else total)
    has_turns = names[semconv.SPAN_TURN] > 0 and names[semconv.SPAN_TOOL_PARSE] > 0
    assert has_turns == (level == "full")
    if level == "worker":  # not sampled carriers: the engine records nothing either
        assert names[semconv.ENGINE_SPAN_REQUEST] == 0
        assert len(worker_span.attributes[semconv.VERL_SAMPLED_OUT_START_NS]) == total


def test_policy_picks_seams_by_detail_and_role() -> None:
    """Each level wraps the one below's seams and more; a reward or server process of known role wraps
    no trainer, trajectory or event seam; a process whose role is not known yet wraps all of its level."""
    levels = ("step", "worker", "request", "full")
    picked = {level: {(t.module, t.method) for t in policy.seams_for(level)} for level in levels}
    assert picked["step"] < picked["worker"] == picked["request"] < picked["full"] == _seams(*Kind)
    assert not picked["step"] & PER_REQUEST_SEAMS and picked["worker"] & FULL_DETAIL_SEAMS == set()
    assert picked["full"] - picked["request"] == FULL_DETAIL_SEAMS
    assert {(t.module, t.method) for t in policy.seams_for("full", "agent_loop_worker")} == picked["full"]
    for role in ("reward", "server"):
        remote = {(t.module, t.method) for t in policy.seams_for("full", role)}
        assert remote == _seams(Kind.CHUNK, Kind.RECEIVER, Kind.THREADS, Kind.RAY)
    with pytest.raises(ValueError):
        policy.seams_for("everything")


def test_remote_reward_and_later_trainer_record_with_the_seams_wrapped_at_instrument_time(traced) -> None:
    """Nothing is unwrapped at run time: after a chunk of a worker without reward actors, a worker with
    them carries every request to its reward actor, and a trainer tracked later records its phases."""
    from verl.utils.profiler.performance import simple_timer

    from otel_verl.instrumentation import reward, trainer

    memory, _ = traced(detail="request")
    worker, _, opts = build_worker(_opts())
    run_chunk(worker, opts)
    applied = set(wrapped_seams())
    assert {reward.CLIENT_SCORE, ("verl.utils.profiler.performance", "_timer")} <= applied

    remote_worker, _, opts = build_worker(_opts(), remote_reward=True)
    _spans(memory)  # the first chunk's spans, flushed before they are cleared
    memory.clear()
    run_chunk(remote_worker, opts)
    assert set(wrapped_seams()) == applied
    names = Counter(s.name for s in _spans(memory))
    assert names[reward.SPAN_REWARD_COMPUTE] == names[semconv.SPAN_REQUEST] == opts.prompts * opts.n

    memory.clear()
    trainer.track_trainer(object())
    with simple_timer("update_actor", {}):
        pass
    names = Counter(s.name for s in _spans(memory))
    assert names[semconv.phase_span_name("update_actor")] == 1


def test_request_detail_wraps_no_turn_seams_and_still_counts_turns(traced, monkeypatch) -> None:
    """The default level skips the turn and event seams (their cost is what ``full`` adds); each
    request's turn count, status and tokens come out the same as at ``full``."""
    monkeypatch.delenv("OTEL_VERL_DETAIL", raising=False)
    per_level = {}
    for level in ("full", None):  # None: the default
        memory, _ = traced(**({"detail": level} if level else {}))
        worker, _, opts = build_worker(_opts())
        run_chunk(worker, opts)
        turn_seams = FULL_DETAIL_SEAMS & set(wrapped_seams())
        # a seam this verl names the other way (targets.Target.alternative) is wrapped under that name
        present = {s for s in FULL_DETAIL_SEAMS if registry.alternative_present(sys.modules[s[0]], s) is None}
        assert turn_seams == (present if level == "full" else set())
        requests = [s for s in _spans(memory) if s.name == semconv.SPAN_REQUEST]
        assert len(requests) == opts.prompts * opts.n
        keys = (semconv.VERL_SAMPLE_INDEX, semconv.VERL_ROLLOUT_N)
        summary = (
            semconv.VERL_REQUEST_NUM_TURNS,
            semconv.VERL_REQUEST_STATUS,
            semconv.VERL_REQUEST_RESPONSE_TOKENS,
            semconv.VERL_REQUEST_PROMPT_TOKENS,
        )
        per_level[level] = sorted(tuple(r.attributes.get(k) for k in (*keys, *summary)) for r in requests)
    assert per_level["full"] == per_level[None]
    assert {row[2] for row in per_level[None]} >= {1, 2}  # single- and multi-turn requests alike


def test_unknown_detail_warns_once_and_uses_default(monkeypatch, caplog) -> None:
    monkeypatch.setenv("OTEL_VERL_DETAIL", "everything")
    with caplog.at_level(logging.WARNING, logger="otel_verl.config"):
        config = OtelVerlConfig()
    assert config.detail == DEFAULT_DETAIL == "request"
    assert sum("OTEL_VERL_DETAIL" in r.getMessage() for r in caplog.records) == 1
    monkeypatch.setenv("OTEL_VERL_SAMPLE_RATIO", "2")
    assert OtelVerlConfig().sample_ratio == 1.0


# ------------------------------------------------------------------ tail sampling
def test_tail_sampling_keeps_complete_traces_of_failed_and_slowest(traced, admitted) -> None:
    memory, _ = traced(sample_ratio=0.0, sample_keep_slowest=0.75)
    opts = _opts()
    opts.response_length = 96  # some requests hit the cap: truncated, always kept
    worker, _, _ = build_worker(opts, _server())
    run_chunk(worker, opts)
    spans = _spans(memory)
    total = opts.prompts * opts.n
    assert len(admitted) == total
    durations = sorted(end - start for start, end, _ in admitted)
    threshold = durations[int(0.75 * (total - 1))]
    must_keep = {(s, e) for s, e, status in admitted if status != "completed" or e - s >= threshold}
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    kept = {(r.start_time, r.end_time) for r in requests}
    assert kept == must_keep
    assert any(r.attributes[semconv.VERL_REQUEST_STATUS] == "truncated" for r in requests)
    assert len(requests) < total
    # a kept trace is complete: every turn of each kept request is there, with its engine call
    for r in requests:
        turns = [s for s in spans if s.name == semconv.SPAN_TURN and s.parent.span_id == r.context.span_id]
        assert len(turns) == r.attributes[semconv.VERL_REQUEST_NUM_TURNS] > 0
    # no span of a sampled-out request leaks out
    kept_ids = {r.context.span_id for r in requests}
    request_of = {s.context.span_id: s for s in spans}
    for s in spans:
        if s.name in (semconv.SPAN_TURN, semconv.SPAN_REWARD):
            assert s.parent.span_id in kept_ids
        assert s.name != semconv.SPAN_TURN or request_of[s.parent.span_id].name == semconv.SPAN_REQUEST
    (worker_span,) = [s for s in spans if s.name == semconv.SPAN_WORKER]
    a = worker_span.attributes
    assert a[semconv.VERL_WORKER_NUM_SAMPLED_OUT] == total - len(requests)
    assert set(a[semconv.VERL_SAMPLED_OUT_STATUS]) == {"completed"}
    assert all(
        e - s < threshold
        for s, e in zip(a[semconv.VERL_SAMPLED_OUT_START_NS], a[semconv.VERL_SAMPLED_OUT_END_NS], strict=True)
    )


def _analyzed(run_dir: Path):
    spans = load_spans(run_dir)
    return spans, requests_table(spans)


def test_analyzer_percentiles_of_a_sampled_run_are_exact(traced, admitted) -> None:
    """Sampled run: the analyzer's requests and percentiles equal the full truth of the same run;
    and against an unsampled run of the same seed: same requests, statuses, turns, and each run's durations its own
    truth (two runs' wall-clock durations are not compared: on a loaded CI machine one ran 2.2x slower)."""
    sampled_memory, sampled_dir = traced(sample_ratio=0.1, sample_keep_slowest=0.9)
    worker, _, opts = build_worker(_opts(), _server())
    run_chunk(worker, opts)
    kept = [s for s in _spans(sampled_memory) if s.name == semconv.SPAN_REQUEST]
    truth = np.sort([(e - s) / 1e9 for s, e, _ in admitted])
    provider.shutdown_tracing()

    spans, req = _analyzed(sampled_dir)
    assert len(kept) < len(req) == len(truth)  # spans were really dropped, rows were not
    np.testing.assert_array_equal(np.sort(req["duration"].to_numpy()), truth)
    cdf = request_cdf.compute_request_cdf(spans)
    q = request_cdf.cdf_quantiles(cdf).iloc[0]
    truth_end = np.sort([e for _, e, _ in admitted])
    start = steps_table(spans)["rollout_start_ns"].iloc[0]
    for col, quantile in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
        assert q[col] == pytest.approx(np.quantile((truth_end - start) / 1e9, quantile), abs=1e-6)  # float ns
    workers = workers_table(spans)
    assert int(workers["num_requests"].iloc[0]) == len(truth)

    admitted.clear()
    _, full_dir = traced(sample_ratio=1.0)
    worker, _, opts = build_worker(_opts(), _server())
    run_chunk(worker, opts)
    full_truth = np.sort([(e - s) / 1e9 for s, e, _ in admitted])
    provider.shutdown_tracing()
    _, full = _analyzed(full_dir)
    assert len(full) == len(req)
    assert Counter(full["request_status"]) == Counter(req["request_status"])
    assert Counter(full["num_turns"].astype(int)) == Counter(req["num_turns"].astype(int))
    np.testing.assert_array_equal(np.sort(full["duration"].to_numpy()), full_truth)


# ------------------------------------------------------------------ one trace per request
def test_trace_per_request(traced) -> None:
    memory, run_dir = traced(trace_per_request=True)
    worker, _, opts = build_worker(_opts(), remote_reward=True)
    run_chunk(worker, opts)
    spans = _spans(memory)
    (worker_span,) = [s for s in spans if s.name == semconv.SPAN_WORKER]
    requests = [s for s in spans if s.name == semconv.SPAN_REQUEST]
    assert len(requests) == opts.prompts * opts.n
    assert len({r.context.trace_id for r in requests}) == len(requests)
    for r in requests:
        assert r.parent is None and r.context.trace_id != worker_span.context.trace_id
        (link,) = r.links
        assert link.context.span_id == worker_span.context.span_id
        assert link.context.trace_id == worker_span.context.trace_id
        assert r.attributes[semconv.VERL_STEP] == 1 and r.attributes[semconv.VERL_WORKER_RANK] == 0
    by_trace = Counter(s.context.trace_id for s in spans)
    assert all(by_trace[r.context.trace_id] > 3 for r in requests)  # turns/events live in the request's trace
    provider.shutdown_tracing()

    loaded = load_spans(run_dir)
    req = requests_table(loaded)
    assert len(req) == len(requests)
    assert set(zip(req["step"], req["worker"], strict=True)) == {(1, 0)}
    assert (loaded.loc[loaded["kind"] == "request", "worker_span"] >= 0).all()  # the link stands in for the parent
    turns = loaded[loaded["kind"] == "turn"]
    assert (turns["worker_span"] >= 0).all() and set(turns["worker"]) == {0}
    assert int(workers_table(loaded)["num_requests"].iloc[0]) == len(requests)


# ------------------------------------------------------------------ dropped spans
class _BlockedExporter(SpanExporter):
    def __init__(self) -> None:
        self.release = threading.Event()
        self.exported = 0

    def export(self, spans):
        self.release.wait(10)
        self.exported += len(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


def test_dropped_spans_are_counted_logged_and_exposed(monkeypatch, caplog) -> None:
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_BSP_MAX_QUEUE_SIZE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "4")
    reset_tracing()
    reset_dropped()
    reader = InMemoryMetricReader()
    dropped.register_metric(MeterProvider(metric_readers=[reader]))
    blocked = _BlockedExporter()
    config = OtelVerlConfig(spool=False, max_queue_size=8)
    provider.setup_tracing("driver", config=config, extra_exporters=[blocked], set_global=False)
    tracer = tracing.tracer()
    created = 200
    for i in range(created):
        tracer.start_span(f"burst {i}").end()
    lost = dropped_so_far()
    assert created - 8 - 4 <= lost <= created - 8  # queue of 8; at most one batch of 4 left it for the exporter
    points = reader.get_metrics_data().resource_metrics[0].scope_metrics[0].metrics
    (metric,) = [m for m in points if m.name == dropped.METRIC_NAME]
    assert metric.data.data_points[0].value == lost
    blocked.release.set()
    with caplog.at_level(logging.WARNING, logger="otel_verl.export.dropped"):
        provider.shutdown_tracing()
    warnings = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(warnings) == 1 and str(lost) in warnings[0].getMessage()
    assert blocked.exported == created - lost
    reset_dropped()


@pytest.mark.parametrize("level", ["request", "full"])
def test_report_says_when_turns_were_not_recorded(traced, tmp_path: Path, level: str) -> None:
    """The default level's report is complete for requests and says how to get the turn and event figures."""
    from otel_verl.analysis import analyze

    _, run_dir = traced(detail=level)
    worker, _, opts = build_worker(_opts())
    run_chunk(worker, opts)
    flush.flush()
    result = analyze(load_spans(run_dir), tmp_path / "report")
    assert result.summary["requests"] == opts.prompts * opts.n
    assert (result.summary["turn_spans"] == 0) == (level == "request")
    html = (tmp_path / "report" / "report.html").read_text()
    assert ("OTEL_VERL_DETAIL=full" in html) == (level == "request")
