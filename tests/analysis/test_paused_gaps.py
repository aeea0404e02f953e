"""Issue 50: a request's wait for a rollout pause is the pause's part, not its gap (:mod:`~otel_verl.analysis.
findings.steps.paused_gaps`).

A hand-made turn aborted by a weight sync and resumed after it, through the real span reader, tables and segments:
the uncovered time inside the pause, and the resume's lag after it, move from ``gap`` to ``pause``; the rest stays
a gap, and the request's parts still add up to its duration."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from benchmarks.diagnosis.async_classes import BUILDERS
from benchmarks.diagnosis.shape import OTLP_ENGINE
from benchmarks.diagnosis.write_async import write_async
from otel_verl import semconv as sc
from otel_verl.analysis import analyze
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.steps.paused_gaps import RESUME_LAG_S, with_pauses
from otel_verl.analysis.findings.steps.segments import request_segments
from otel_verl.analysis.read import load_spans
from otel_verl.analysis.tables import Tables

from .builder import TraceBuilder

W = "worker_0.jsonl"


def _aborted_and_resumed(tmp_path: Path) -> Tables:
    """One request 0.3-9.0 s: attempt 0.3-2.0 s (aborted), its resume 5.0-8.0 s, then 1 s before its end."""
    b = TraceBuilder(seed=7)
    turn = b.one_turn((10.0, 9.5, 9.2, 9.0, 8.0))
    trip = b.span(sc.SPAN_GENERATE, 0.3, 8.0, turn, step=1, file=W, **{sc.VERL_REQUEST_NUM_RESUMES: 1})
    genai = {sc.GEN_AI_OPERATION_NAME: sc.GEN_AI_OP_TEXT_COMPLETION}
    aborted = {**genai, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 40, sc.VERL_ENGINE_STOP_REASON: "aborted"}
    b.span("text_completion qwen", 0.3, 2.0, trip, step=1, file=W, **aborted)
    resumed = {**genai, sc.GEN_AI_USAGE_OUTPUT_TOKENS: 60, sc.VERL_ENGINE_STOP_REASON: "completed"}
    b.span("text_completion qwen", 5.0, 8.0, trip, step=1, file=W, **resumed)
    return Tables.build(load_spans(b.write(tmp_path / "spool")))


def _parts(seg) -> dict[str, float]:
    return seg.groupby("part")["value_s"].sum().to_dict()


@pytest.mark.parametrize(("pause_s", "moved_s"), [(2.5, 3.0), (0.5, 0.5 + RESUME_LAG_S)])
def test_the_wait_for_a_pause_is_the_pause(tmp_path: Path, pause_s: float, moved_s: float) -> None:
    """A sync from the abort (2.0 s) for ``pause_s``: the wait until the resume (5.0 s) is the pause's, up to
    :data:`RESUME_LAG_S` after the sync's end; the second before the request's end stays its gap."""
    t = _aborted_and_resumed(tmp_path)
    seg = request_segments(t)
    calls = t.spans[t.spans["kind"] == "engine"].sort_values("start_ns")
    abort_ns = int(calls["end_ns"].iloc[0])
    before = _parts(seg)
    assert before[k.PART_GAP] == pytest.approx(4.0, abs=1e-6)  # 2.0-5.0 and 8.0-9.0
    after = _parts(with_pauses(seg, (np.array([abort_ns]), np.array([abort_ns + int(pause_s * 1e9)]))))
    assert after[k.PART_PAUSE] == pytest.approx(moved_s, abs=1e-6)
    assert after[k.PART_GAP] == pytest.approx(4.0 - moved_s, abs=1e-6)
    assert sum(after.values()) == pytest.approx(sum(before.values()), abs=1e-6)  # still the request's duration


def test_a_pause_outside_the_requests_gaps_moves_nothing(tmp_path: Path) -> None:
    """A sync while the resumed call ran (its span covers it): no gap waited for it (the call's own share in the
    pause excuses it, :data:`~otel_verl.analysis.findings.account.anomalies.PAUSED_SHARE`)."""
    t = _aborted_and_resumed(tmp_path)
    seg = request_segments(t)
    calls = t.spans[t.spans["kind"] == "engine"].sort_values("start_ns")
    start = int(calls["start_ns"].iloc[1]) + int(0.5e9)
    after = with_pauses(seg, (np.array([start]), np.array([start + int(1e9)])))
    assert k.PART_PAUSE not in set(after["part"])
    assert _parts(after) == pytest.approx(_parts(seg))


def test_a_clean_colocate_run_tells_no_wait_for_a_sync_as_gap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's clean colocate-async run (``--classes async_clean --seed 4243``, run 5): requests in flight
    at the end of sampling waited ~63 s for the weight sync (replicas asleep while the trainer trained). The old
    analysis told them as three slow_gap findings (one critical) and a slow_engine; now that wait is each request's
    ``pause`` and no gap or engine finding is a warning."""
    monkeypatch.setitem(os.environ, "OTEL_VERL_ANALYZE_JOBS", "1")
    run, _ = BUILDERS["async_clean"](4243712734, OTLP_ENGINE)
    root = write_async(run, tmp_path / "data")
    analyze(root, tmp_path / "out", html_report=False, figures=False)
    data = json.loads((tmp_path / "out" / "findings.json").read_text())
    loud = [f for f in data["findings"] if f["severity"] in ("warning", "critical")]
    assert not [f["message"] for f in loud if f["kind"] in (k.SLOW_GAP, k.SLOW_ENGINE)]
    assert not [f for f in data["findings"] if f["details"].get("part") == k.PART_PAUSE]  # never a cause
    paused = [p["value_s"] for s in data["steps"] for p in s["parts"] if p["kind"] == k.PART_PAUSE]
    assert max(paused, default=0.0) > 30.0  # the ~63 s waits, in the account as the sync's
