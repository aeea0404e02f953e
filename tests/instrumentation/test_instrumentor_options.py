"""``VerlInstrumentor().instrument(tracer_provider=..., request_hook=..., response_hook=...)`` on verl's real
AgentLoopWorker (in one process, against the demo's simulated server)."""

from __future__ import annotations

import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import otel_verl
from otel_verl import semconv
from otel_verl.export import flush, tracing
from otel_verl.instrumentation.rollout.hooks import RequestSpan
from tests.instrumentation.harness import build_worker, run_chunk
from tests.process_state import reset_tracing


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch, tmp_path):
    """No OTLP endpoint; a spool directory that otel_verl would write to were it building its own provider."""
    monkeypatch.setenv("OTEL_VERL_SPOOL", "true")
    monkeypatch.setenv("OTEL_VERL_SPOOL_DIR", str(tmp_path / "spool"))
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    reset_tracing()
    yield tmp_path / "spool"
    otel_verl.uninstrument()
    reset_tracing()


def _users_provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def _requests(spans: list) -> list:
    return [s for s in spans if s.name == semconv.SPAN_REQUEST]


def test_a_provider_passed_in_receives_every_span(quiet_env):
    provider, exporter = _users_provider()
    global_before = trace.get_tracer_provider()
    otel_verl.VerlInstrumentor().instrument(skip_dep_check=True, tracer_provider=provider)
    worker, _, opts = build_worker()
    output = run_chunk(worker, opts)
    flush.flush()
    spans = exporter.get_finished_spans()
    names = {s.name for s in spans}
    assert len(_requests(spans)) == opts.prompts * opts.n == len(output)
    assert {semconv.SPAN_WORKER, semconv.SPAN_TURN} <= names  # an SDK span (worker) and recorded ones
    worker_span = next(s for s in spans if s.name == semconv.SPAN_WORKER)
    assert all(r.parent.span_id == worker_span.context.span_id for r in _requests(spans))
    # the provider's resource, not one of otel_verl's making; no exporter of otel_verl's own
    assert all(s.resource is provider.resource for s in _requests(spans))
    assert tracing.get_state().provider is provider
    assert not quiet_env.exists()
    assert trace.get_tracer_provider() is global_before


def test_without_a_provider_otel_verl_builds_its_own(quiet_env):
    otel_verl.VerlInstrumentor().instrument(skip_dep_check=True)
    worker, _, opts = build_worker()
    run_chunk(worker, opts)
    flush.flush()
    state = tracing.get_state()
    assert state.owns_provider and state.spool is not None
    assert list(quiet_env.glob("*/step_1/*.jsonl"))  # the spool, as without the option


def test_a_provider_not_of_the_sdk_is_refused_with_a_warning(quiet_env, caplog):
    with caplog.at_level(logging.WARNING, logger="otel_verl"):
        otel_verl.VerlInstrumentor().instrument(skip_dep_check=True, tracer_provider=trace.NoOpTracerProvider())
    assert "not an OpenTelemetry SDK TracerProvider" in caplog.text
    worker, _, opts = build_worker()
    run_chunk(worker, opts)
    assert tracing.get_state().owns_provider


def test_hooks_see_the_request_span_and_verl_s_arguments(quiet_env):
    provider, exporter = _users_provider()
    started: list[tuple] = []
    ended: list[tuple] = []

    def request_hook(span, inputs):
        started.append((span, dict(inputs), span.get_span_context().span_id))
        span.set_attribute("app.prompt_uid", str(inputs["trajectory"]["sample_index"]))

    def response_hook(span, inputs, output):
        ended.append((span, inputs, output))
        span.set_attributes({"app.response_len": len(output.response_ids)})

    otel_verl.VerlInstrumentor().instrument(
        skip_dep_check=True, tracer_provider=provider, request_hook=request_hook, response_hook=response_hook
    )
    worker, _, opts = build_worker()
    run_chunk(worker, opts)
    flush.flush()
    requests = {s.context.span_id: s for s in _requests(exporter.get_finished_spans())}
    assert len(started) == len(ended) == len(requests) == opts.prompts * opts.n
    for span, inputs, span_id in started:
        assert isinstance(span, RequestSpan) and isinstance(span, trace.Span)
        exported = requests[span_id]  # the hook's span is the exported request span
        assert span.get_span_context().trace_id == exported.context.trace_id
        assert {"sampling_params", "trajectory", "agent_name", "raw_prompt"} <= set(inputs)
        assert inputs["trajectory"]["sample_index"] == exported.attributes[semconv.VERL_SAMPLE_INDEX]
        assert inputs["trajectory"]["rollout_n"] == exported.attributes[semconv.VERL_ROLLOUT_N]
        assert exported.attributes["app.prompt_uid"] == str(inputs["trajectory"]["sample_index"])
    by_id = {end_span.get_span_context().span_id: (end_inputs, output) for end_span, end_inputs, output in ended}
    for span_id, exported in requests.items():
        end_inputs, output = by_id[span_id]
        assert type(output).__name__ == "_InternalAgentLoopOutput"
        assert exported.attributes["app.response_len"] == len(output.response_ids)
        assert exported.attributes[semconv.VERL_REQUEST_NUM_TURNS] >= 1
        assert end_inputs["trajectory"]["sample_index"] == exported.attributes[semconv.VERL_SAMPLE_INDEX]


def _outputs(hooks: dict, caplog) -> tuple:
    provider, exporter = _users_provider()
    otel_verl.VerlInstrumentor().instrument(skip_dep_check=True, tracer_provider=provider, **hooks)
    worker, _, opts = build_worker()
    with caplog.at_level(logging.WARNING, logger="otel_verl"):
        output = run_chunk(worker, opts)
    flush.flush()
    otel_verl.uninstrument()
    reset_tracing()
    keys = (semconv.VERL_SAMPLE_INDEX, semconv.VERL_ROLLOUT_N, semconv.VERL_REQUEST_STATUS)
    requests = sorted(tuple(s.attributes[k] for k in keys) for s in _requests(exporter.get_finished_spans()))
    return output, requests


def test_a_raising_hook_changes_nothing(quiet_env, caplog):
    def boom(*args):
        raise RuntimeError("hook bug")

    plain, plain_requests = _outputs({}, caplog)
    assert "hook bug" not in caplog.text
    hooked, hooked_requests = _outputs({"request_hook": boom, "response_hook": boom}, caplog)
    tensors = list(plain.batch.keys())
    assert tensors == list(hooked.batch.keys())
    for key in tensors:
        assert (plain.batch[key] == hooked.batch[key]).all(), key
    assert list(plain.non_tensor_batch) == list(hooked.non_tensor_batch)
    assert hooked_requests == plain_requests and len(plain_requests) == len(plain)
    # one warning per hook, not one per request
    assert caplog.text.count("request_hook") == 1 and caplog.text.count("response_hook") == 1
    assert "RuntimeError: hook bug" in caplog.text


def test_an_unknown_detail_is_refused_before_anything_is_installed(quiet_env):
    """``detail`` is checked first: a refused ``instrument()`` leaves no provider, hook or wrapper behind."""
    from otel_verl.export import given_provider
    from otel_verl.instrumentation.rollout import hooks
    from otel_verl.wrapping import registry

    provider, _ = _users_provider()
    with pytest.raises(ValueError, match="detail must be one of"):
        otel_verl.VerlInstrumentor().instrument(
            skip_dep_check=True, tracer_provider=provider, request_hook=lambda span, inputs: None, detail="bogus"
        )
    assert given_provider._given is None
    assert hooks._request_hook is None
    assert not registry._active and not list(registry.applied_methods())
