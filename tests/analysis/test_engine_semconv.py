"""The engine's request span in the shapes vLLM may take next: named ``"{operation} {model}"`` (vllm#47633,
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``), with child spans
``vllm.request.queue/prefill/decode`` (vllm#44402). They nest under our engine call and are read.

verl's real AgentLoopWorker runs in-process against the simulated engine, which emits each shape
(``SimServerConfig.engine_spans``); the spool is read back by the analyzer.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from otel_verl import semconv as sc
from tests.process_state import reset_tracing


def _traced_chunk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str):
    import otel_verl
    from otel_verl.analysis import Tables
    from otel_verl.analysis.read import load_spans
    from otel_verl.demo import runner
    from otel_verl.demo.sim_server import SimServerConfig
    from otel_verl.export import flush, provider
    from tests.instrumentation.harness import build_worker, run_chunk

    monkeypatch.setenv("OTEL_VERL_SPOOL", "true")
    monkeypatch.setenv("OTEL_VERL_SPOOL_DIR", str(tmp_path))
    monkeypatch.setenv("OTEL_VERL_RUN_ID", "run")
    monkeypatch.setenv("OTEL_VERL_DETAIL", "full")
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    reset_tracing()
    provider.setup_tracing("agent_loop_worker", worker_rank=0, set_global=False)
    otel_verl.instrument()
    try:
        opts = runner.DemoOptions(prompts=3, n=2, seed=4)
        worker, _, opts = build_worker(opts, SimServerConfig(seconds_per_token=0.0005, engine_spans=style))
        run_chunk(worker, opts)
        flush.flush()
    finally:
        otel_verl.uninstrument()
        reset_tracing()
    spans = load_spans(tmp_path / "run")
    return spans, Tables.build(spans)


@pytest.mark.parametrize("style", ["llm_request", "semconv", "semconv-phases"])
def test_engine_request_spans_nest_and_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, style: str) -> None:
    spans, tables = _traced_chunk(tmp_path, monkeypatch, style)
    ours = spans[(spans.service == "verl") & spans.name.str.startswith(sc.GEN_AI_OP_TEXT_COMPLETION)]
    engine_name = sc.ENGINE_SPAN_REQUEST if style == "llm_request" else "text_completion model"
    engine = spans[(spans.service == "verl" + sc.SIM_ENGINE_SERVICE_SUFFIX) & (spans.name == engine_name)]
    assert len(engine) == len(ours) > 0  # one engine span per round trip (no aborts here)
    if style != "llm_request":
        assert set(ours.name) == {engine_name}  # the collision the analyzer must see through
    # the engine's span is not taken for one of ours: our calls stay "engine", the engine's "other"
    assert set(spans.loc[ours.index, "kind"]) == {"engine"} and set(spans.loc[engine.index, "kind"]) == {"other"}
    by_id = spans.set_index("span_id")
    assert set(by_id.loc[engine.parent_id, "name"]) == {"text_completion model"}
    assert set(by_id.loc[engine.parent_id].index) <= set(ours.span_id)
    calls = tables.engine_calls
    assert len(calls) == len(engine) and calls.joined.all()
    assert (calls.engine_decode_s > 0).all() and calls.completion_tokens.notna().all()
    if style == "semconv-phases":
        children = spans[spans.name.str.startswith(sc.ENGINE_PHASE_SPAN_PREFIX)]
        assert len(children) == 3 * len(engine) and set(children.parent_id) == set(engine.span_id)
        # the account comes from the children: decode = the decode child's seconds
        decode = children[children.name == "vllm.request.decode"].set_index("parent_id")
        seconds = ((decode.end_ns - decode.start_ns) / 1e9).reindex(calls.span_id).to_numpy()
        assert calls.engine_decode_s.to_numpy() == pytest.approx(seconds, abs=1e-6)
    else:
        # from the engine's own numbers, as before
        attrs = engine.set_index("span_id").extra.map(json.loads).reindex(calls.span_id)
        expected = [a[sc.ENGINE_LATENCY_DECODE] for a in attrs]
        assert calls.engine_decode_s.to_numpy() == pytest.approx(expected, abs=1e-6)
    turns = tables.engine_turns
    assert len(turns) == spans.turn_span[spans.kind == "engine"].nunique()
