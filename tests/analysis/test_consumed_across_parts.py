"""Issue 50 (must-have 5): a streamed asynchronous run tells a hung reward at the step whose trainer waited for it.

The streamed analyzer summarizes one step a part; the group a step dispatches is linked by the next step's
``verl.update``, in the next part. Before :mod:`otel_verl.analysis.stream.consumers` the dispatch step's requests
never learnt their consumer, and the benchmark's ``async_reward`` class was told at the dispatch step in 0 of 4 runs;
nor did a part hold the later weight syncs its groups waited out (``AsyncStep.pauses``). A real simulated run (the
benchmark's builder and spool writer), the real streamed ``analyze``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from benchmarks.diagnosis.async_classes import BUILDERS
from benchmarks.diagnosis.shape import OTLP, OTLP_ENGINE
from benchmarks.diagnosis.write_async import write_async
from otel_verl.analysis import analyze, load
from otel_verl.analysis.findings.common import kinds as k
from otel_verl.analysis.findings.common.record import SEVERITIES
from otel_verl.analysis.findings.diagnose import diagnose_run

CAUSES_FIRST = 3


def test_a_hung_reward_is_told_where_the_next_step_waited(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(os.environ, "OTEL_VERL_ANALYZE_JOBS", "1")
    run, expect = BUILDERS["async_reward"](9837734513, OTLP)  # separate-async, 4 steps (--seed 9837's run 2)
    plant = run.plants[0]
    waits_at, dispatched = plant.meta["waits_at"], plant.meta["dispatch_step"]
    assert waits_at == dispatched + 1 and expect.steps == (waits_at,)  # verl: dispatched in N, trained on in N + 1
    analyze(write_async(run, tmp_path / "data"), tmp_path / "out", html_report=False, figures=False)
    findings = json.loads((tmp_path / "out" / "findings.json").read_text())["findings"]
    rewards = [f for f in findings if f["kind"] == k.SLOW_REWARD]
    assert [f["steps"] for f in rewards] == [[waits_at]], rewards  # not the dispatch step
    told = rewards[0]
    assert told["details"]["dispatch_step"] == dispatched
    assert told["details"]["request_ids"] == list(plant.request_ids)
    assert SEVERITIES.index(told["severity"]) <= SEVERITIES.index("warning")
    assert findings.index(told) < CAUSES_FIRST


def test_a_streamed_stale_run_is_judged_as_the_whole_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """colocate-async, batches dispatched 3 ahead (--seed 9837's async_stale run 3): its groups wait out the weight
    syncs of later steps. Streamed, each step's part must know them as the whole-table diagnosis does: the same
    warnings (four, critical among them, when a part held only its own pauses)."""
    monkeypatch.setitem(os.environ, "OTEL_VERL_ANALYZE_JOBS", "1")
    run, _ = BUILDERS["async_stale"](9837730514, OTLP_ENGINE)
    assert run.ashape.lookahead == 3
    root = write_async(run, tmp_path / "data")
    analyze(root, tmp_path / "out", html_report=False, figures=False)
    streamed = json.loads((tmp_path / "out" / "findings.json").read_text())["findings"]
    whole = [f.to_json() for f in diagnose_run(load(root)).findings]

    def loud(fs: list[dict]) -> list[tuple]:
        return [(f["kind"], f["severity"], f["steps"]) for f in fs if f["severity"] in ("warning", "critical")]

    assert loud(streamed) == loud(whole)
    assert len(loud(streamed)) <= 1
