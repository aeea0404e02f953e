"""Engine spans that arrive without our parent (an engine started outside the job, trace headers not
passed, the parent not loaded) load as orphans: counted and shown, no error or warning, and left out of the
per-turn engine split. A hand-built run: every engine call of ours answered by a vLLM-shaped
``llm_request``, plus 3 without a parent and 2 under a span that never arrived."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from builder import T0_NS, Plan, any_value, build_run

from otel_verl import semconv as sc
from otel_verl.analysis import LoadStats, Tables, analyze, diagnose, load


def _llm_request(trace_id: str, span_id: str, parent_id: str, start: float, end: float, queue: float) -> dict:
    attrs = {
        sc.ENGINE_LATENCY_QUEUE: queue,
        sc.ENGINE_LATENCY_PREFILL: 0.01,
        sc.ENGINE_LATENCY_DECODE: max(0.0, end - start - queue - 0.02),
        sc.ENGINE_LATENCY_TTFT: queue + 0.015,
        sc.ENGINE_LATENCY_E2E: end - start,
        sc.ENGINE_USAGE_PROMPT_TOKENS: 100,
        sc.ENGINE_USAGE_COMPLETION_TOKENS: 40,
        sc.ENGINE_REQUEST_ID: span_id,
    }
    span = {
        "traceId": trace_id,
        "spanId": span_id,
        "name": sc.ENGINE_SPAN_REQUEST,
        "kind": 2,
        "startTimeUnixNano": str(T0_NS + round(start * 1e9)),
        "endTimeUnixNano": str(T0_NS + round(end * 1e9)),
        "attributes": [{"key": k, "value": any_value(v)} for k, v in attrs.items()],
    }
    if parent_id:
        span["parentSpanId"] = parent_id
    return span


def _write_engine_spans(path: Path, spans: list[dict]) -> None:
    resource = {"attributes": [{"key": "service.name", "value": {"stringValue": "verl.vllm"}}]}
    doc = {
        "resourceSpans": [{"resource": resource, "scopeSpans": [{"scope": {"name": sc.ENGINE_SCOPE}, "spans": spans}]}]
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc) + "\n")


def test_orphan_engine_spans_load_counted_and_kept_out(tmp_path: Path) -> None:
    b = build_run(Plan(steps=3, workers=2, requests=4))
    calls = [s for s in b.spans if s.name.startswith(sc.GEN_AI_OP_TEXT_COMPLETION)]
    assert calls
    engine = [_llm_request(c.trace_id, b.new_id(8), c.span_id, c.start + 0.002, c.end - 0.001, 0.0) for c in calls]
    orphans = [_llm_request(b.new_id(16), b.new_id(8), "", 1.0 + i, 1.5 + i, 0.2) for i in range(3)]
    orphans += [_llm_request(calls[0].trace_id, b.new_id(8), b.new_id(8), 2.0, 2.4, 0.1) for _ in range(2)]
    run = b.write(tmp_path)
    _write_engine_spans(run / "no_step" / "server_1.jsonl", engine + orphans)

    stats = LoadStats()
    t = load(tmp_path, stats=stats)
    assert stats.warnings == [] and stats.bad_lines == 0
    assert isinstance(t, Tables)
    table = t.engine_calls
    assert len(table) == len(calls) + 5 and int(table["joined"].sum()) == len(calls)
    orphan_ids = {o["spanId"] for o in orphans}
    assert set(table.loc[~table["joined"], "span_id"]) == orphan_ids
    # the per-turn split holds our turns only, never an orphan
    turns = t.engine_turns
    assert len(turns) == t.spans.loc[t.spans["kind"] == "turn"].shape[0]
    assert not orphan_ids & set(turns["engine_span_id"])
    assert turns["engine_before_s"].between(0.0019, 0.0021).all()

    found = [f for f in diagnose(t) if f.kind == "engine_orphans"]
    assert len(found) == 1 and found[0].severity == "info"
    assert (found[0].details["orphans"], found[0].details["without_parent"]) == (5, 3)
    assert "verl.vllm" in found[0].message and len(found[0].evidence) == 5

    result = analyze(t, tmp_path / "report")
    engine_summary = result.summary["engine"]
    assert (engine_summary["orphans"], engine_summary["joined"]) == (5, len(calls))
    assert engine_summary["share_with_engine_span"] == 1.0
    assert not result.frames["engine_phases"].empty


def test_only_orphans_load_without_error(tmp_path: Path) -> None:
    """An engine traced outside any job: only its spans, nothing of ours. They load; the engine view is
    empty of turns and says how many orphans came."""
    b = build_run(Plan(steps=1, workers=1, requests=2))
    b.write(tmp_path)
    spans = [_llm_request(b.new_id(16), b.new_id(8), "", 1.0, 1.5, 0.0) for _ in range(4)]
    _write_engine_spans(tmp_path / "run1" / "no_step" / "server_9.jsonl", spans)
    t = load(tmp_path)
    assert t.engine_turns["engine_span_id"].isin([s["spanId"] for s in spans]).sum() == 0
    assert int((~t.engine_calls["joined"]).sum()) == 4
    (orphans,) = [f for f in diagnose(t) if f.kind == "engine_orphans"]
    assert orphans.details["without_parent"] == 4
