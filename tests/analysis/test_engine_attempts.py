"""Issue 50: a fully-async round trip holds attempts, and the attempt is the engine call.

Hand-made traces of one request whose turn was aborted once and resumed: its round trip holds two attempts, the
engine's ``llm_request`` under the resumed one. The round trip is ``verl.generate`` (what otel_verl writes now)
or, in a spool written before, ``text_completion`` too: either way the analyzer counts the attempts as the
engine calls (their tokens once, the engine's queue/prefill/decode split on the call it answered), never the
round trip that holds them."""

from __future__ import annotations

from pathlib import Path

import pytest

from otel_verl import semconv as sc
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.steps.segments import request_segments
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.tables import Tables

from .builder import TraceBuilder

W = "worker_0.jsonl"


def _resumed_turn(tmp_path: Path, round_trip: str) -> tuple[Path, str]:
    """The spool, and the round trip's span id."""
    b = TraceBuilder(seed=5)
    turn = b.one_turn((10.0, 9.0, 8.5, 8.0, 8.0))
    genai = {sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_TEXT_COMPLETION}
    # the old shape: the round trip carried its attempts' tokens again
    old = {**genai, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 100} if round_trip != sc.SPAN_GENERATE else {}
    trip = b.span(round_trip, 0.3, 8.0, turn, step=1, file=W, **old, **{sc.VERL_REQUEST_NUM_RESUMES: 1})
    aborted = {**genai, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 40, sc.VERL_ENGINE_STOP_REASON: "aborted"}
    b.span("text_completion qwen", 0.3, 2.0, trip, step=1, file=W, **aborted)  # the weight sync aborted it
    resumed = {**genai, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 60, sc.VERL_ENGINE_STOP_REASON: "completed"}
    attempt = b.span("text_completion qwen", 5.0, 8.0, trip, step=1, file=W, **resumed)
    engine = {  # vLLM's account of the resumed submission: 1 s queued, 0.5 s prefill, 1.2 s decode
        sc.ENGINE_LATENCY_E2E: 2.9,
        sc.ENGINE_LATENCY_QUEUE: 1.0,
        sc.ENGINE_LATENCY_PREFILL: 0.5,
        sc.ENGINE_LATENCY_DECODE: 1.2,
        sc.ENGINE_USAGE_COMPLETION_TOKENS: 60,
    }
    b.span(sc.ENGINE_SPAN_REQUEST, 5.05, 7.95, attempt, step=1, file=W, **engine)
    return b.write(tmp_path / "spool"), trip.span_id


@pytest.mark.parametrize("round_trip", [sc.SPAN_GENERATE, "text_completion qwen"])
def test_the_attempts_are_the_engine_calls(tmp_path: Path, round_trip: str) -> None:
    spool, trip = _resumed_turn(tmp_path, round_trip)
    spans = load_spans(spool)
    assert spans.loc[spans["span_id"] == trip, "kind"].tolist() == ["generate"]
    engine = spans[spans["kind"] == "engine"]
    assert len(engine) == 2 and set(engine["name"]) == {"text_completion qwen"}
    t = Tables.build(spans)
    assert int(t.events.loc[t.events["kind"] == "engine", "output_tokens"].sum()) == 100  # generated once
    calls = t.engine_calls
    assert calls["joined"].all() and calls["call_span_id"].tolist() == [engine["span_id"].iloc[-1]]
    seg = request_segments(t).groupby("part")["value_s"].sum()
    # the resumed call is split by the engine's account; the aborted one (no engine span) is decode
    assert seg[k.PART_ENGINE_QUEUE] == pytest.approx(1.0, abs=1e-6)
    assert seg[k.PART_PREFILL] == pytest.approx(0.5, abs=1e-6)
    assert seg[k.PART_DECODE] == pytest.approx(1.2 + 1.7, abs=1e-6)
    # the pause between the aborted attempt and its resume is no engine part: the request's gap
    assert seg[k.PART_GAP] == pytest.approx(3.0, abs=1e-6)
