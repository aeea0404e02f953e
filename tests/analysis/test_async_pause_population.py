"""Issue 50: in an asynchronous run the norms and the groups' medians are read from the occurrences that did not
wait out a rollout pause (``step_summary._unpaused``), as no anomaly is told on those that did.

The benchmark's own clean colocate-async run (``--classes async_clean --seed 9837``, run 0), written as verl traces
itself and read by the real analyzer: step 2's batch went out while the replicas slept, so its 40 first engine calls
were parked through the pause (9.2 s against a usual 0.7 s). Read into the step's median they moved the whole step
7.8x; the step's other calls, at 1.0x their usual, were then told a warning "all 5 workers decoded at 6.64 ms/token,
1.0x the usual 6.49 ms/token in step 3: +3.7 s". Nothing was planted: no warning is right."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from async_runs import analyzed_async_run

from benchmarks.diagnosis.shape import OTLP


def test_a_clean_colocate_run_tells_no_step_slow_for_calls_parked_in_a_pause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(os.environ, "OTEL_VERL_ANALYZE_JOBS", "1")
    expect, data = analyzed_async_run("async_clean", 9837729511, OTLP, tmp_path)
    assert expect.variant == "colocate"
    loud = [f"{f['kind']} {f['severity']}: {f['message']}" for f in data["findings"] if f["severity"] != "info"]
    assert loud == []
    # the parked calls are still in the account: step 2's rollout paused while its batch waited for the replicas
    paused = {s["step"]: sum(p["value_s"] for p in s["parts"] if p["kind"] == "pause") for s in data["steps"]}
    assert any(v > 0 for v in paused.values())


def test_the_trainers_wait_is_not_told_beside_the_answers_it_waited_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One cause, one name (``waited_for.the_wait_left``): the benchmark's clean separate-async run
    (``--classes async_clean --seed 9837``, run 4) has a train-bound trainer whose wait for samples (``gen``) is
    0.01 s in every step but step 9, where it waited 25.2 s for two long answers. The old analysis told the wait
    itself a warning, "gen took 25.2 s (usually 0.01 s) in step 9: +25.1 s", beside those answers (+20.0 s,
    +18.0 s): the same seconds twice, judged against a wait's own history, which has no spread in a train-bound run
    (a hinge: nothing while the rollout runs ahead). The answers are told, at the step that waited; the wait is
    not."""
    monkeypatch.setitem(os.environ, "OTEL_VERL_ANALYZE_JOBS", "1")
    expect, data = analyzed_async_run("async_clean", 9837729515, OTLP, tmp_path)
    assert expect.variant == "separate"
    at_9 = [f for f in data["findings"] if 9 in (f.get("steps") or [f.get("step")])]
    answers = [f for f in at_9 if f["kind"] == "long_response" and f["severity"] != "info"]
    assert answers and sum(f["details"]["judged"]["cost_s"] for f in answers) > 25.0
    waits = [f for f in at_9 if f["details"].get("phase") == "gen" and f["severity"] != "info"]
    assert waits == [], [f["message"] for f in waits]
