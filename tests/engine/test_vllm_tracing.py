"""vLLM's own tracing functions (vLLM 0.24's real ``vllm.tracing``) end in otel_verl's exporters, whichever
initialises first, with the engine's service name, parented on the carrier otel_verl handed the engine.

Each order runs in a fresh interpreter: OpenTelemetry's global provider can be set once per process.
Needs ``scripts/install_vllm.sh``'s environment (skipped elsewhere); no engine is started.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("vllm.tracing.otel", reason="needs vLLM (scripts/install_vllm.sh)")

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    os.environ.pop("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", None)
    os.environ.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    os.environ["OTEL_VERL_SPOOL"] = "false"
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from vllm.tracing import SpanKind, extract_trace_context
    import vllm.tracing.otel as vllm_otel
    from vllm.v1.engine import async_llm, output_processor
    import otel_verl
    from otel_verl.export import flush, provider

    order = sys.argv[1]
    memory = InMemorySpanExporter()
    if order == "vllm-first":  # vLLM's engine started before otel_verl was activated in this process
        async_llm.init_tracer("vllm.llm_engine", "http://127.0.0.1:9")
        vllm_provider = trace.get_tracer_provider()
    provider.setup_tracing("server", extra_exporters=[memory], set_global=(order == "otel-verl-first"))
    otel_verl.instrument()
    if order != "vllm-first":
        async_llm.init_tracer("vllm.llm_engine", "http://127.0.0.1:9")

    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    for i in range(3):
        output_processor.instrument_manual(
            span_name="llm_request",
            start_time=1_000_000_000 + i,
            attributes={"gen_ai.usage.completion_tokens": 7 + i},
            context=extract_trace_context(carrier),
            kind=SpanKind.SERVER,
        )
    flush.flush()
    spans = memory.get_finished_spans()
    global_provider = trace.get_tracer_provider()
    print(json.dumps({
        "spans": [
            {
                "name": s.name,
                "trace_id": format(s.context.trace_id, "032x"),
                "parent": format(s.parent.span_id, "016x") if s.parent else None,
                "service": s.resource.attributes.get("service.name"),
                "scope": s.instrumentation_scope.name,
                "kind": s.kind.name,
                "tokens": s.attributes.get("gen_ai.usage.completion_tokens"),
            }
            for s in spans
        ],
        "env_endpoint": os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
        "global_is_vllms": order == "vllm-first" and global_provider is vllm_provider,
        "global_is_sdk": isinstance(global_provider, TracerProvider),
    }))
    """
)


def _run(order: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, order], capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("order", ["otel-verl-first", "instrumented-then-vllm", "vllm-first"])
def test_engine_spans_reach_otel_verl_exporters(order: str) -> None:
    result = _run(order)
    spans = result["spans"]
    assert [s["name"] for s in spans] == ["llm_request"] * 3
    assert {s["trace_id"] for s in spans} == {"0af7651916cd43dd8448eb211c80319c"}
    assert {s["parent"] for s in spans} == {"b7ad6b7169203331"}
    assert {s["service"] for s in spans} == {"verl.vllm"}
    assert {s["scope"] for s in spans} == {"vllm.tracing.otel"}
    assert {s["kind"] for s in spans} == {"SERVER"}
    assert sorted(s["tokens"] for s in spans) == [7, 8, 9]
    if order == "vllm-first":
        # vLLM had already made its provider global and written its endpoint: it keeps both, receives nothing
        assert result["global_is_vllms"]
        assert result["env_endpoint"] == "http://127.0.0.1:9"
    else:
        # vLLM's switch no longer writes the process environment (otel_verl would read it as its own endpoint)
        assert result["env_endpoint"] is None
        assert result["global_is_sdk"]


@pytest.fixture
def fresh_vllm_tracing(monkeypatch: pytest.MonkeyPatch):
    """The vLLM seams' per-process state as in a fresh process (restored after the test)."""
    from otel_verl.instrumentation import engine_link, vllm_tracing

    monkeypatch.setattr(vllm_tracing, "_engine", None)
    monkeypatch.setattr(vllm_tracing, "_replica_rank", None)
    monkeypatch.setattr(vllm_tracing, "_warned_log_stats", False)
    monkeypatch.setattr(vllm_tracing, "_noted_endpoint", False)
    monkeypatch.setattr(vllm_tracing, "_aborts_traced", set())
    monkeypatch.setattr(engine_link, "_in_flight", {})
    return vllm_tracing


def test_disable_log_stats_warns_once_naming_the_fix(
    caplog: pytest.LogCaptureFixture, tmp_path, fresh_vllm_tracing
) -> None:
    pytest.importorskip("verl")
    from verl.utils.config import omega_conf_to_dataclass

    from otel_verl.demo.runner import DemoOptions, _verl_config
    from otel_verl.instrumentation import vllm_tracing

    config = _verl_config(DemoOptions(engine="vllm"), tmp_path, tmp_path / "tools.yaml").actor_rollout_ref.rollout
    with caplog.at_level(logging.WARNING, logger=vllm_tracing.__name__):
        assert not vllm_tracing.warn_if_tracing_will_crash(omega_conf_to_dataclass(config))  # log stats on: fine
        config.disable_log_stats = True  # verl's default
        rollout = omega_conf_to_dataclass(config)
        assert vllm_tracing.warn_if_tracing_will_crash(rollout)
        assert not vllm_tracing.warn_if_tracing_will_crash(rollout)  # once per process
    warnings = [r.getMessage() for r in caplog.records if r.name == vllm_tracing.__name__]
    assert len(warnings) == 1
    assert "disable_log_stats=False" in warnings[0]
    assert rollout.disable_log_stats is True  # verl's config is only read


def test_aborted_llm_request_gets_its_turn_back(fresh_vllm_tracing) -> None:
    """vLLM's engine core ends an aborted request without trace headers: its llm_request is re-parented on
    the carrier of verl's in-flight call and marked aborted; one with headers is left alone."""
    from opentelemetry import trace
    from vllm.tracing import extract_trace_context

    from otel_verl import semconv
    from otel_verl.instrumentation import engine_link, vllm_tracing

    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    engine_link._enter("req-1", carrier)
    attributes, context = vllm_tracing._restore_aborted_parent(
        {"gen_ai.request.id": "req-1"}, extract_trace_context(None)
    )
    parent = trace.get_current_span(context).get_span_context()
    assert format(parent.span_id, "016x") == "b7ad6b7169203331"
    assert attributes[semconv.VERL_ENGINE_STOP_REASON] == "aborted"
    assert carrier["traceparent"] in vllm_tracing._aborts_traced  # by call, not by verl's (repeating) id
    other = {"traceparent": "00-1af7651916cd43dd8448eb211c80319c-c7ad6b7169203331-01"}
    kept, kept_context = vllm_tracing._restore_aborted_parent(
        {"gen_ai.request.id": "req-1"}, extract_trace_context(other)
    )
    assert semconv.VERL_ENGINE_STOP_REASON not in kept
    assert format(trace.get_current_span(kept_context).get_span_context().span_id, "016x") == "c7ad6b7169203331"
